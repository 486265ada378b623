"""``python -m runners.flink submit`` against a Flink master nobody listens on: one clear line,
without a cluster (the real cluster runs in tests/e2e/runners/test_flink_existing_cluster.py)."""

import os
import subprocess

from runner_support import PYTHON, ROOT, tokenize_args

from runners.flink_cluster import free_port


def _submit(*extra, marker="", timeout=480):
    """``marker`` goes into the environment every process of the run inherits."""
    cmd = [PYTHON, "-m", "runners.flink", "submit", "--config",
           os.path.join(ROOT, "runners/flink.yaml"), "--cache-dir", os.path.join(ROOT, ".cache"),
           *extra]
    env = dict(os.environ, TOKENBEAM_TEST_MARKER=marker)
    return subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=timeout,
                          env=env)


def test_unreachable_cluster_is_a_clear_error(tmp_path, corpus_dir, hf_tokenizer):
    master = f"127.0.0.1:{free_port()}"
    proc = _submit("--flink-master", master, "--",
                   *tokenize_args(corpus_dir, hf_tokenizer, tmp_path / "o"), timeout=120)
    assert proc.returncode == 1
    assert f"Flink at {master} is not reachable" in proc.stderr
