"""runners/templates/hdinsight-script-action.sh picks its Python robustly (issue 26 item 6): the
submitting machine's Python 3.N (TOKENBEAM_PYTHON_VERSION, default 3.11: the pipeline's pickled
code runs only under the Python that pickled it), as an explicit TOKENBEAM_PYTHON, else
python3.N or python3 on PATH with venv, else conda, else one line saying what it tried. Run with bash on PATHs of stub
interpreters (each answers its version and records what it is asked); nothing is installed."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "runners", "templates", "hdinsight-script-action.sh")

# A Python of version {version}: answers the version check, `-m venv` makes an environment of
# itself (with the boot command a tokenbeam install brings), everything else succeeds.
STUB = """#!/bin/sh
echo "$0 $*" >> "{calls}"
case "$1 $2" in
  "-c import sys;"*) echo "{version}" ;;
  "-c import venv, ensurepip") exit {ensurepip_status} ;;
  "-m venv") mkdir -p "$3/bin" && cp "$0" "$3/bin/python" && : > "$3/bin/tokenbeam-sdk-boot" \\
             && chmod +x "$3/bin/tokenbeam-sdk-boot" ;;
  "-c import apache_beam;"*) echo "apache-beam 2.77.0" ;;
esac
exit 0
"""


@pytest.fixture
def node(tmp_path):
    """(make(name, version, ensurepip=True), run(*env pairs)) on a PATH of stubs and the few
    tools the script uses."""
    bin_dir, tools = tmp_path / "bin", tmp_path / "tools"
    bin_dir.mkdir()
    tools.mkdir()
    for tool in ("mkdir", "cp", "chmod", "grep", "cat", "rm"):
        os.symlink(shutil.which(tool), tools / tool)
    calls = tmp_path / "calls"

    def make(name, version, *, ensurepip=True, where=bin_dir):
        path = where / name
        path.write_text(STUB.format(calls=calls, version=version,
                                    ensurepip_status=0 if ensurepip else 1))
        path.chmod(0o755)
        return str(path)

    def run(**env):
        full = {"PATH": f"{bin_dir}:{tools}", "TOKENBEAM_CONDA": str(tmp_path / "no-conda"),
                **env}
        proc = subprocess.run(["/bin/bash", SCRIPT, "tokenbeam[azure]", str(tmp_path / "env")],
                              env=full, capture_output=True, text=True, timeout=60)
        used = calls.read_text().splitlines() if calls.exists() else []
        return proc, used

    return make, run


def _venv_made_with(used):
    return [line.split()[0] for line in used if " -m venv " in line]


def test_plain_python3_of_a_good_version_is_used(node):
    make, run = node
    python3 = make("python3", "3.11")
    proc, used = run()
    assert proc.returncode == 0, proc.stderr
    assert _venv_made_with(used) == [python3]
    assert f"with {python3} (Python 3.11)" in proc.stdout
    assert "ready: python_env: " in proc.stdout


def test_the_submitting_machines_python_is_chosen_not_the_newest(node, tmp_path):
    """The nodes' Python must be the submitter's 3.N: a newer one was taken first (python3.13,
    python3.12, ...), and the pipeline's pickled lambdas do not load across versions."""
    make, run = node
    make("python3", "3.12")
    newer = make("python3.12", "3.12")
    same = make("python3.11", "3.11")
    proc, used = run()
    assert proc.returncode == 0, proc.stderr
    assert _venv_made_with(used) == [same]
    shutil.rmtree(tmp_path / "env")
    proc, used = run(TOKENBEAM_PYTHON_VERSION="3.12")
    assert proc.returncode == 0, proc.stderr
    assert _venv_made_with(used)[-1:] == [newer]


def test_only_a_newer_python_fails_in_one_line(node):
    make, run = node
    python3 = make("python3", "3.12")
    proc, used = run()
    assert proc.returncode == 1 and not _venv_made_with(used)
    assert proc.stderr.strip().splitlines() == [
        f"tokenbeam script action: no Python 3.11 with venv on PATH ({python3} (3.12)) and no "
        f"conda at {os.path.dirname(os.path.dirname(python3))}/no-conda: set TOKENBEAM_PYTHON "
        "to a Python 3.11, or TOKENBEAM_CONDA to a conda"]
    proc, _ = run(TOKENBEAM_PYTHON_VERSION="3")
    assert proc.returncode == 1 and proc.stderr.strip().splitlines() == [
        "tokenbeam script action: TOKENBEAM_PYTHON_VERSION=3: give the submitting machine's "
        "Python as 3.N (3.11 or later), e.g. 3.11"]


def test_a_python_without_venv_support_is_passed_over(node):
    make, run = node
    make("python3.12", "3.12", ensurepip=False)   # Debian without python3-venv
    python3 = make("python3", "3.11")
    proc, used = run()
    assert proc.returncode == 0, proc.stderr
    assert _venv_made_with(used) == [python3]


def test_tokenbeam_python_wins(node, tmp_path):
    make, run = node
    make("python3.12", "3.12")
    elsewhere = tmp_path / "opt"
    elsewhere.mkdir()
    chosen = make("python", "3.11", where=elsewhere)
    proc, used = run(TOKENBEAM_PYTHON=chosen)
    assert proc.returncode == 0, proc.stderr
    assert _venv_made_with(used) == [chosen]


def test_tokenbeam_python_too_old_fails_in_one_line(node, tmp_path):
    make, run = node
    make("python3.12", "3.12")
    old = make("python3.9", "3.9")
    proc, used = run(TOKENBEAM_PYTHON=old)
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines() == [
        f"tokenbeam script action: TOKENBEAM_PYTHON={old} is Python 3.9, not 3.11 with venv: "
        "point it at a Python 3.11 (with its venv module), the submitting machine's (or set "
        "TOKENBEAM_PYTHON_VERSION to that machine's 3.N)"]
    assert not _venv_made_with(used)


def test_no_suitable_python_fails_in_one_line_naming_what_it_tried(node, tmp_path):
    make, run = node
    python3 = make("python3", "3.8")
    proc, used = run()
    assert proc.returncode == 1 and not _venv_made_with(used)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert f"no Python 3.11 with venv on PATH ({python3} (3.8))" in lines[0]
    assert "set TOKENBEAM_PYTHON to a Python 3.11, or TOKENBEAM_CONDA to a conda" in lines[0]


def test_conda_is_the_fallback(node, tmp_path):
    make, run = node
    make("python3", "3.8")
    conda = tmp_path / "conda"
    conda.write_text(f"#!/bin/sh\necho \"conda $*\" >> {tmp_path / 'calls'}\n"
                     "mkdir -p \"$5/bin\" && cp " + make("py311", "3.11", where=tmp_path) +
                     " \"$5/bin/python\" && : > \"$5/bin/tokenbeam-sdk-boot\" && "
                     "chmod +x \"$5/bin/tokenbeam-sdk-boot\"\n")
    conda.chmod(0o755)
    proc, used = run(TOKENBEAM_CONDA=str(conda))
    assert proc.returncode == 0, proc.stderr
    assert any(line.startswith("conda create --yes --quiet --prefix ") and
               line.endswith(" python=3.11 pip") for line in used), used


def test_an_existing_environment_of_an_old_python_is_refused(node, tmp_path):
    make, run = node
    make("python3.12", "3.12")
    (tmp_path / "env" / "bin").mkdir(parents=True)
    make("python", "3.8", where=tmp_path / "env" / "bin")
    proc, _ = run()
    assert proc.returncode == 1
    assert proc.stderr.strip() == (
        f"tokenbeam script action: {tmp_path / 'env'} holds Python 3.8; the nodes need 3.11, "
        f"the submitting machine's: remove {tmp_path / 'env'} (or give another ENV_PATH) and "
        "run this again")
