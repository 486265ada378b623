"""A FIFO or a device where tokenbeam reads one of its own files (a shard's ``.idx``/``.bin``, a
commit record, a reshard manifest) is refused with one line naming it, never read (issue 23
item 16): a FIFO blocks the open for ever, ``/dev/zero`` never ends (and read whole, fills the
memory). ``validate`` reports such a dataset or record as a FAIL line and goes on.

The whole-job runs; the unit tests are in tests/dataio/test_not_regular_files.py."""

import json
import os
import subprocess
import sys
import pytest

from dataio import manifest
from tests.dataio.test_not_regular_files import KINDS, LIMIT_S, SHARD, _plant


REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.parametrize("kind", KINDS)
def test_a_tokenize_rerun_refuses_a_commit_record_that_is_not_a_file(hf_tokenizer, tmp_path,
                                                                     kind):
    from pipelines import tokenize

    inp, out = tmp_path / "in", tmp_path / "out"
    inp.mkdir()
    (inp / "x.jsonl").write_bytes(b"".join(json.dumps({"text": f"document {i}"}).encode()
                                           + b"\n" for i in range(20)))
    argv = ["--input", str(inp), "--output", str(out), "--tokenizer-type",
            "HuggingFaceTokenizer", "--tokenizer-model", str(hf_tokenizer), "--append-eod",
            "--log-interval", "0"]
    assert tokenize.run(argv) == 0
    record = out / manifest.COMMITS_DIR / f"{SHARD}.json"
    assert record.is_file()
    _plant(record, kind)
    for extra in (["--dry-run"], []):  # the command itself: Beam is not forked mid-session
        try:
            done = subprocess.run([sys.executable, "-m", "pipelines.tokenize", *argv, *extra],
                                  capture_output=True, text=True, timeout=4 * LIMIT_S,
                                  env={**os.environ, "PYTHONPATH": REPO})
        except subprocess.TimeoutExpired:
            pytest.fail(f"tokenize {' '.join(extra)} hangs on {record}")
        err = done.stderr
        assert done.returncode == 1, (extra, done.returncode, err)
        said = [line for line in err.splitlines() if line.startswith("error:")]
        assert len(said) == 1 and str(record) in said[0] and "Traceback" not in err, (extra, err)
