"""`python -m pipelines.merge` against Megatron-LM's own tools/merge_datasets.py.

The whole-job runs; the unit tests are in tests/pipelines/test_merge_megatron.py."""

from __future__ import annotations
import os
import subprocess

import megatron_live
from megatron_reference import read_pair
from pipelines import merge
from tests.pipelines.test_merge_megatron import MEGATRON_MERGED, _inputs_copy


def test_live_megatron_merge_datasets_matches(tmp_path, capsys):
    python, megatron_lm = megatron_live.live_or_skip()
    inputs = _inputs_copy(tmp_path)
    (tmp_path / "megatron").mkdir()
    theirs = str(tmp_path / "megatron" / "merged")
    proc = subprocess.run([python, "-W", "ignore",
                           os.path.join(megatron_lm, "tools", "merge_datasets.py"),
                           "--input", str(inputs), "--output-prefix", theirs],
                          env=dict(os.environ, PYTHONPATH=megatron_lm), capture_output=True,
                          text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr[-4000:]
    ours = str(tmp_path / "ours")
    assert merge.run(["--input", str(inputs), "--output-prefix", ours]) == 0
    assert read_pair(ours) == read_pair(theirs) == read_pair(MEGATRON_MERGED)
