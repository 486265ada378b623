"""What `python -m pipelines.tokenize` prints: tokenbeam's own lines in one format, Beam's
start-up chatter only with --log-level debug, one job-level progress line (whatever the number
of local workers) with rates and the job's ETA, the summary on stdout with the wall time, sizes
in MB of 10^6 bytes everywhere."""

import json
import os
import re
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow  # whole-job runs: see tests/conftest.py

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def tokenize(corpus_dir, hf_tokenizer, out, *extra):
    argv = [sys.executable, "-m", "pipelines.tokenize", "--runner=DirectRunner",
            "--input", str(corpus_dir), "--output", str(out), "--tokenizer-type",
            "HuggingFaceTokenizer", "--tokenizer-model", str(hf_tokenizer), "--append-eod",
            "--workers", "2", "--batch-documents", "16", *extra]
    proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout, proc.stderr.splitlines()


def _summary(out: str) -> dict[str, str]:
    rows = re.findall(r"^  (\S.*?\S)  +(\S+)$", out.split("  committed ")[0], re.M)
    return dict(rows)


def test_quiet_by_default_with_one_job_progress_line(corpus_dir, hf_tokenizer, tmp_path):
    """--workers 2: the lines are the job's (no worker's name, no share of one): documents and
    the fraction of the job's planned bytes only grow, and the last line is the whole job."""
    out, err = tokenize(corpus_dir, hf_tokenizer, tmp_path / "out", "--log-interval", "10")
    assert not [line for line in err if "apitools" in line or "INFO" in line
                or "semi_persistent" in line], err
    assert err[0].startswith("tokenizer backend: ") and err[1] == "workers: 2 (--workers)"
    progress = err[2:]
    assert progress and all(line.startswith("Processed ") for line in progress), err
    assert not [line for line in progress if "worker" in line or "share" in line], progress
    assert all(" docs/s, " in line and " MB/s, " in line and " tokens/s)" in line
               and " MB planned, ETA " in line for line in progress), progress
    documents = [int(re.match(r"Processed ([\d,]+) documents", line)[1].replace(",", ""))
                 for line in progress]
    percents = [int(re.search(r"; (\d+)% of ", line)[1]) for line in progress]
    assert documents == sorted(documents) and percents == sorted(percents), progress
    meta = json.load(open(tmp_path / "out" / "metadata.json"))
    assert documents[-1] == meta["totals"]["documents"] and percents[-1] == 100, progress
    planned = sum(os.path.getsize(p) for p in corpus_dir.glob("*.jsonl"))
    assert f" of {planned / 1e6:,.1f} MB planned" in progress[-1]  # MB = 10^6 bytes
    assert out.startswith("summary\n") and "  committed " in out
    rows = _summary(out)
    assert rows["input MB"] == f"{planned / 1e6:.2f}"  # the same unit as the lines
    # the wall time is the command's, from the process's start: Beam's import and planning too
    assert float(rows["wall seconds"]) > float(rows["job seconds"]) > 0
    assert float(rows["MB/s"]) == pytest.approx(planned / 1e6 / float(rows["wall seconds"]),
                                                rel=0.1, abs=0.02)


def test_debug_shows_beams_messages(corpus_dir, hf_tokenizer, tmp_path):
    _, err = tokenize(corpus_dir, hf_tokenizer, tmp_path / "out", "--log-interval", "0",
                      "--log-level", "debug")
    assert any(line.startswith("INFO apache_beam.") for line in err), err
    assert not any("Processed" in line for line in err)


def test_warning_level_leaves_only_problems(corpus_dir, hf_tokenizer, tmp_path):
    out, err = tokenize(corpus_dir, hf_tokenizer, tmp_path / "out", "--log-level", "warning",
                        "--log-interval", "10")
    assert err == []
    assert "summary" in out
