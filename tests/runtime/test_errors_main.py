"""runtime.errors.main: the one wrapper every command runs under."""

import subprocess
import sys

from runtime import errors


def test_argparse_exits_become_statuses(capsys):
    import argparse

    def command(argv):
        parser = argparse.ArgumentParser(prog="x")
        parser.add_argument("--n", type=int, required=True)
        parser.parse_args(argv)
        return 0

    assert errors.main(command, ["--help"]) == 0
    assert errors.main(command, ["--n", "two"]) == 2
    assert "invalid int value" in capsys.readouterr().err


def test_an_anticipated_error_is_one_line_with_its_status(capsys):
    def command(argv):
        raise errors.ConfigError("--thing x: no such file; give a file")

    assert errors.main(command, []) == 2
    assert capsys.readouterr().err == "error: --thing x: no such file; give a file\n"


def test_a_closed_pipe_ends_quietly():
    # `tokenbeam-validate ... | head -1`: the reader leaves, the command stops without a traceback
    code = ("import sys; from runtime import errors\n"
            "def command(argv):\n"
            "    for i in range(100000):\n"
            "        print('line', i, flush=True)\n"
            "    return 0\n"
            "sys.exit(errors.main(command, [], process=True))\n")
    proc = subprocess.run(f"{sys.executable} -c \"{code}\" | head -1", shell=True,
                          capture_output=True, text=True, timeout=60)
    assert proc.stdout == "line 0\n"
    assert proc.stderr == ""
