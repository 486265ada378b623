"""What tokenbeam prints shows every name escaped (issue 23 item 1, second review): a folder
named with a newline and a terminal escape forges no ``error:`` line and sends no escape, in the
log (``FAILED`` lines), the ``error:`` line and the ``--dry-run`` plan; a name that would become
an output name with a control character (merge's ``--output``, ``count --rename``) is refused
with one line; an input name that is not UTF-8 is refused at planning (item 3)."""

import os

import numpy as np

from runtime import errors, log
from dataio import indexed, naming
from runtime import redact as redact_mod
from pipelines import count, merge, validate


# --- the one escaping point: the log's handler, errors.main ------------------------------------

def test_log_arguments_are_escaped_and_the_message_keeps_its_structure(capsys):
    log.setup("info", others=False)
    redact_mod.register_secret("s3cr3t-value-for-the-test")
    log.get("test").error("FAILED %s: %s", "x_text_document",
                          "/in/ok\nerror: FAKE\x1b[2K/bad.gz: corrupt s3cr3t-value-for-the-test")
    log.get("test").info("line one\nline two %d %s", 3, "caf\udce9")
    err = capsys.readouterr().err
    assert err.splitlines() == [
        "error: FAILED x_text_document: /in/ok\\nerror: FAKE\\x1b[2K/bad.gz: corrupt REDACTED",
        "line one", "line two 3 caf\\udce9"], err


def test_an_error_line_is_one_line_with_the_name_escaped(capsys):
    def command(argv):
        raise errors.RunError("/in/ok\nerror: FAKE\x1b[2K/bad.gz: corrupt; re-copy it")

    assert errors.main(command, []) == 1
    err = capsys.readouterr().err
    assert err == "error: /in/ok\\nerror: FAKE\\x1b[2K/bad.gz: corrupt; re-copy it\n"


def test_an_error_line_drops_beams_step_suffix():
    exc = errors.ConfigError("input /a\tb.jsonl: bad [while running 'Read'] [while running 'X']")
    assert errors.describe(exc) == ("input /a\\tb.jsonl: bad", 2)


def test_printable_escapes_c0_c1_separators_and_bytes_that_are_not_utf8():
    assert naming.printable("a\nb\r\x1b[2K\x7f\x85\u2028caf\udce9 d\u00e9j\u00e0") == (
        "a\\nb\\r\\x1b[2K\\x7f\\x85\\u2028caf\\udce9 d\u00e9j\u00e0")


# --- through the commands ----------------------------------------------------------------------


def test_a_bugs_traceback_sends_no_escape(capsys):
    def command(argv):
        raise RuntimeError("/in/x\x1b[2J\x1b]0;title\x07")

    assert errors.main(command, []) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: unexpected RuntimeError (a bug") and "Traceback" in err
    assert "\x1b" not in err and "\x07" not in err and "\\x1b[2J" in err


def _dataset(prefix):
    indexed.write_documents(str(prefix), [[[1, 2, 3]], [[4, 5]]], dtype=np.uint16)


def test_merge_refuses_an_output_named_with_a_control_character(tmp_path, capsys):
    _dataset(tmp_path / "a")
    _dataset(tmp_path / "b")
    evil = tmp_path / "m1" / "evil\nerror: FAKE\x1b[2K"
    (tmp_path / "m1").mkdir()
    code = merge.run(["--input", str(tmp_path / "[ab].bin"), "--output", str(evil)])
    captured = capsys.readouterr()
    assert code == 2, captured.err
    assert captured.err.count("\n") == 1 and "\x1b" not in captured.err, captured.err
    assert captured.err.startswith(f"error: --output {tmp_path}/m1/evil\\nerror: FAKE\\x1b[2K")
    assert "rename it without control characters" in captured.err
    assert os.listdir(tmp_path / "m1") == []


def test_count_rename_refuses_a_new_name_with_a_control_character(tmp_path, capsys):
    _dataset(tmp_path / "fine")
    _dataset(tmp_path / "evil\nerror: FAKE\x1b[2K")
    before = sorted(os.listdir(tmp_path))
    code = count.run(["--input", str(tmp_path / "*.bin"), "--rename"])
    captured = capsys.readouterr()
    assert code == 2, captured.err
    assert captured.err.count("\n") == 1 and "\x1b" not in captured.err, captured.err
    assert captured.err.startswith(f"error: --rename {tmp_path}/evil\\nerror: FAKE\\x1b[2K: ")
    assert sorted(os.listdir(tmp_path)) == before, "nothing is renamed"


def test_count_lists_a_name_with_a_control_character_escaped(tmp_path, capsys):
    _dataset(tmp_path / "evil\nerror: FAKE\x1b[2K")
    assert count.run(["--input", str(tmp_path / "*.bin")]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "evil\\nerror: FAKE\\x1b[2K" in out
    assert [line.split()[0] for line in out.splitlines()] == ["dataset", "evil\\nerror:", "total"]


def test_validate_lists_a_name_with_a_control_character_on_one_line(tmp_path, capsys):
    _dataset(tmp_path / "evil\nFAIL forged\x1b[2K")
    assert validate.run([str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and len(out.splitlines()) == 1, out
    assert "evil\\nFAIL forged\\x1b[2K" in out
