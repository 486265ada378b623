"""``python -m runners.local`` with runners/direct.yaml: the same job, Beam's local runner."""

import os
import subprocess

from runner_support import PYTHON, ROOT, shards, tokenize_args


def test_direct_config_runs_the_job_locally(direct_output, corpus_dir, hf_tokenizer, tmp_path):
    out = tmp_path / "out"
    proc = subprocess.run([PYTHON, "-m", "runners.local", "--config",
                           os.path.join(ROOT, "runners/direct.yaml"), "--workers", "2", "--",
                           *tokenize_args(corpus_dir, hf_tokenizer, out)],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert shards(out) == shards(direct_output)
