"""What a command costs before any work (pipelines/options.py, pipelines/tokenize/): ``--help``
without importing Beam, the Beam-free flag parser giving the values Beam's does from the same
definitions, and ``--workers auto`` chosen from the backend and the cores, and said.

The whole-job runs; the unit tests are in tests/pipelines/test_fixed_cost.py."""

import json
import os
import subprocess
import sys

from pipelines import tokenize
from tests.pipelines.test_fixed_cost import ARGV, ROOT


def test_beams_azure_filesystem_is_never_loaded():
    # pipelines/__init__.py: tokenbeam reaches Azure through adlfs; Beam's azfs:// module (and the
    # Azure SDK it imports, 0.37 s) stays out of every command's process, and Beam still imports.
    probe = ("import sys, pipelines, apache_beam\n"
             "from apache_beam.io.filesystems import FileSystems\n"
             "print(sys.modules[pipelines.BEAM_AZURE_FILESYSTEM], "
             "'azure.storage.blob' in sys.modules, type(FileSystems.get_filesystem('/x')).__name__)")
    proc = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True,
                          text=True, check=True)
    assert proc.stdout.split() == ["None", "False", "LocalFileSystem"]


def test_a_run_says_which_workers_it_chose(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    os.makedirs("in")
    with open("in/a.jsonl", "w") as f:
        f.write(json.dumps({"text": "1 2 3", "title": "4"}) + "\n")
    assert tokenize.run(ARGV + ["--dry-run"]) == 0
    assert "workers: 1 (auto: reference backend, one per core, at most one per work item (1 " \
           "work items))" in capsys.readouterr().out
    assert tokenize.run(ARGV) == 0
    err = capsys.readouterr().err
    assert "workers: 1 (auto: reference backend" in err
    assert tokenize.run(ARGV + ["--workers", "1"]) == 0  # all skipped: no pipeline, no line
    assert "workers:" not in capsys.readouterr().err


def test_planning_a_rerun_and_a_dry_run_import_no_beam(tmp_path):
    """The planner and an all-skip rerun read flags, inputs and commit records only; the holdout
    folder the planner names is the one the tokenize transform writes."""
    probe = f"""
import json, os, sys
os.chdir({str(tmp_path)!r}); os.makedirs("in")
open("in/a.jsonl", "w").write(json.dumps({{"text": "1 2", "title": "3"}}) + "\\n")
from pipelines import tokenize
argv = {ARGV!r}
assert tokenize.run(argv + ["--dry-run"]) == 0
assert "apache_beam" not in sys.modules, "dry run"
import subprocess  # the first run (it imports Beam) in a process of its own
subprocess.run([sys.executable, "-m", "pipelines.tokenize", *argv], check=True,
               env={{**os.environ, "PYTHONPATH": {ROOT!r}}}, capture_output=True)
assert tokenize.run(argv) == 0
assert "apache_beam" not in sys.modules, "rerun"
print("ok")
"""
    proc = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True,
                          text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip().endswith("ok") and "skip a_text_document" in proc.stdout
    from dataio import dataset_find

    from pipelines.tokenize import planner

    assert planner.HOLDOUT_DIR == dataset_find.HOLDOUT_DIR  # the driver names every shard
