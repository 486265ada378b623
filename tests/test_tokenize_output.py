"""What `python -m pipelines.tokenize` prints: tokenbeam's own lines in one format, Beam's
start-up chatter only with --log-level debug, progress lines with rates and an ETA, the summary
on stdout."""

import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow  # whole-job runs: see tests/conftest.py

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def tokenize(corpus_dir, hf_tokenizer, out, *extra):
    argv = [sys.executable, "-m", "pipelines.tokenize", "--runner=DirectRunner",
            "--input", str(corpus_dir), "--output", str(out), "--tokenizer-type",
            "HuggingFaceTokenizer", "--tokenizer-model", str(hf_tokenizer), "--append-eod",
            "--workers", "2", "--batch-documents", "16", *extra]
    proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout, proc.stderr.splitlines()


def test_quiet_by_default_with_progress_and_eta(corpus_dir, hf_tokenizer, tmp_path):
    out, err = tokenize(corpus_dir, hf_tokenizer, tmp_path / "out", "--log-interval", "10")
    assert not [line for line in err if "apitools" in line or "INFO" in line
                or "semi_persistent" in line], err
    assert err[0].startswith("tokenizer backend: ") and err[1] == "workers: 2 (--workers)"
    progress = err[2:]
    assert progress and all(line.startswith("worker ") and ": Processed " in line
                            for line in progress), err
    assert all(" docs/s, " in line and " MB/s, " in line and " tokens/s)" in line
               and "ETA of its share " in line for line in progress), progress
    assert out.startswith("summary\n") and "  committed " in out


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
