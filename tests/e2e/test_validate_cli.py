"""`python -m pipelines.validate`: lines, exit status, folders."""

import subprocess
import sys

import numpy as np
import pytest

from dataio import indexed as ix

pytestmark = pytest.mark.slow  # whole-job runs / services: see tests/conftest.py


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "pipelines.validate", *args],
                          capture_output=True, text=True)


def test_folder_all_ok(tmp_path):
    ix.write_documents(str(tmp_path / "a_text_document_dc=2_sc=2_tc=3"), [[1, 2], [3]],
                       dtype=np.uint16)
    ix.write_documents(str(tmp_path / "b"), [[1], []], dtype=np.uint16)
    (tmp_path / "README.md").write_text("not a dataset")
    proc = _cli(str(tmp_path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("OK") and "documents=2 sequences=2 tokens=3" in lines[0]
    assert lines[1].startswith("OK") and "documents=2 sequences=1 tokens=1" in lines[1]


def test_one_bad_fails_with_reason(tmp_path):
    good = str(tmp_path / "good")
    bad = str(tmp_path / "bad_text_document_dc=9_sc=1_tc=1")
    ix.write_documents(good, [[1]], dtype=np.uint16)
    ix.write_documents(bad, [[1]], dtype=np.uint16)
    proc = _cli(good + ".bin", bad + ".idx")
    assert proc.returncode == 1
    assert proc.stdout.splitlines()[1].startswith("FAIL")
    assert "name says dc=9 but the files hold 1" in proc.stdout


def test_eod_and_vocab_flags(tmp_path):
    p = str(tmp_path / "d")
    ix.write_documents(p, [[4, 9], [5, 9]], dtype=np.uint16)
    assert _cli(p, "--eod-id", "9", "--vocab-size", "10").returncode == 0
    proc = _cli(p, "--eod-id", "4")
    assert proc.returncode == 1 and "does not end with the EOD id 4" in proc.stdout


def test_missing_files(tmp_path):
    proc = _cli(str(tmp_path / "nothing"))
    assert proc.returncode == 1 and "missing nothing.idx" in proc.stdout
    assert _cli(str(tmp_path)).returncode == 1  # empty folder: nothing to vouch for
