"""``python -m runners.flink submit`` against a Flink master nobody listens on: one clear line,
without a cluster (the real cluster runs in tests/e2e/runners/test_flink_existing_cluster.py)."""


from runner_support import submit_flink, tokenize_args

from runners.flink_cluster import free_port


def test_unreachable_cluster_is_a_clear_error(tmp_path, corpus_dir, hf_tokenizer):
    master = f"127.0.0.1:{free_port()}"
    proc = submit_flink("--flink-master", master, "--",
                   *tokenize_args(corpus_dir, hf_tokenizer, tmp_path / "o"), timeout=120)
    assert proc.returncode == 1
    assert f"Flink at {master} is not reachable" in proc.stderr
