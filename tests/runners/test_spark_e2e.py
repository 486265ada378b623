"""The tokenize job on a real Spark 3.5 standalone cluster, submitted through a real Apache Livy
0.7.1 server (what HDInsight exposes) and with spark-submit (runners/spark.yaml): output
byte-identical to the DirectRunner's. The cluster, Livy and the launcher run inside a private
network namespace with only loopback (Spark's and Beam's Java servers bind every interface)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import uuid

import pytest
from runner_support import CACHE, PYTHON, ROOT, shards, tokenize_args

from runners import local_spark

SECRET = "pw-livy-Kx93-never-written"


@pytest.fixture(scope="module")
def spark_cluster(tmp_path_factory):
    if os.geteuid() != 0 or shutil.which("ip") is None:
        pytest.skip("the Spark cluster runs in a private network namespace: needs root and `ip`")
    if shutil.which("java") is None:
        pytest.skip("java not found (scripts/setup.sh --test installs it)")
    missing = local_spark.missing(CACHE)
    if missing or not os.path.exists(os.path.join(CACHE, "jars", "spark-job-server.jar")):
        pytest.skip(f"not provisioned: {', '.join(missing) or 'the Spark job-server jar'}; "
                    "run `bash scripts/setup.sh --test`")
    shared = tmp_path_factory.mktemp("spark-shared")
    cluster = local_spark.LocalSpark(str(tmp_path_factory.mktemp("spark")), cache_dir=CACHE,
                                     netns=f"tbspark{uuid.uuid4().hex[:6]}", worker_cores=2,
                                     worker_memory="4g", livy_whitelist=(str(shared),))
    cluster.start(timeout=300)
    cluster.shared_dir = str(shared)
    yield cluster
    cluster.stop()


def _submit(cluster, config: str, out, corpus_dir, tokenizer, *extra):
    staging = os.path.join(cluster.shared_dir, "staging")
    sets = {"staging_dir": staging, "python_env": os.path.dirname(os.path.dirname(PYTHON)),
            "num_executors": 1, "executor_cores": 2, "executor_memory": "1g",
            "driver_memory": "1g", "poll_interval": 1}
    if config.endswith("spark_hdinsight.yaml"):
        sets["livy_url"] = cluster.livy_url
    else:
        sets["master"] = cluster.master_url
        sets["spark_home"] = cluster.spark_home
    argv = [PYTHON, "-m", "runners.spark", "submit", "--config", config, "--wait",
            "--work-dir", os.path.join(cluster.shared_dir, "work")]
    for key, value in sets.items():
        argv += ["--set", f"{key}={value}"]
    argv += ["--", *tokenize_args(corpus_dir, tokenizer, out), *extra]
    env = {**cluster.env(), "HDINSIGHT_USERNAME": "admin", "HDINSIGHT_PASSWORD": SECRET}
    return cluster.run(argv, capture_output=True, text=True, cwd=ROOT, env=env, timeout=900)


def test_livy_batch_gives_the_directrunner_bytes_and_a_rerun_skips(spark_cluster, direct_output,
                                                                   corpus_dir, hf_tokenizer):
    out = os.path.join(spark_cluster.shared_dir, "out-livy")
    proc = _submit(spark_cluster, "runners/spark_hdinsight.yaml", out, corpus_dir, hf_tokenizer)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    assert "submitted batch" in proc.stdout and ": success" in proc.stdout
    assert shards(out) == shards(direct_output)
    meta = json.loads(open(os.path.join(out, "metadata.json")).read())
    assert all(s["status"] == "written" for s in meta["shards"])
    assert not os.path.exists(os.path.join(out, "_temporary"))  # the batch's last step cleaned
    # No secret anywhere: output, logs, staged jars, the work folder with the request.
    for folder in (spark_cluster.shared_dir, spark_cluster.workdir):
        for base, _dirs, files in os.walk(folder):
            for name in files:
                with open(os.path.join(base, name), "rb") as f:
                    assert SECRET.encode() not in f.read(), os.path.join(base, name)
    assert SECRET not in proc.stdout + proc.stderr
    # The same command again: every shard is committed, nothing is submitted.
    again = _submit(spark_cluster, "runners/spark_hdinsight.yaml", out, corpus_dir, hf_tokenizer)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "submitted batch" not in again.stdout
    assert again.stdout.count("skip ") == len(shards(direct_output)) // 2  # .bin + .idx
    assert shards(out) == shards(direct_output)


def test_spark_submit_on_the_standalone_cluster(spark_cluster, direct_output, corpus_dir,
                                                hf_tokenizer):
    out = os.path.join(spark_cluster.shared_dir, "out-standalone")
    proc = _submit(spark_cluster, "runners/spark.yaml", out, corpus_dir, hf_tokenizer)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    assert shards(out) == shards(direct_output)


def test_relative_paths_are_refused_before_anything_is_built(tmp_path, corpus_dir, hf_tokenizer):
    args = tokenize_args(corpus_dir, hf_tokenizer, tmp_path / "o")
    args[args.index("--tokenizer-model") + 1] = os.path.relpath(str(hf_tokenizer), ROOT)
    proc = subprocess.run([PYTHON, "-m", "runners.spark", "submit", "--config",
                           "runners/spark.yaml", "--set", f"staging_dir={tmp_path}", "--", *args],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert "a relative path; the cluster's nodes resolve it in another folder" in proc.stderr
    assert not os.path.exists(tmp_path / "o" / "_temporary")
