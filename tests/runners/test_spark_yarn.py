"""The tokenize job on a real YARN cluster (HDInsight runs Spark on YARN): Hadoop's
MiniYARNCluster (a ResourceManager and one NodeManager, tests/runners/yarn_minicluster.py) and
the pipeline jar submitted by ``python -m runners.spark submit --config runners/spark.yaml
--set master=yarn`` (spark-submit from the pyspark 3.5.8 wheel, ``--deploy-mode cluster``: the
driver runs in YARN's application master, as a Livy batch on HDInsight does). The output is
byte-identical to the DirectRunner's. The cluster and the launcher run inside a private
network namespace with only loopback."""

from __future__ import annotations

import json
import os
import shutil
import socket
import uuid

import pytest
import yarn_minicluster
from runner_support import CACHE, PYTHON, ROOT, shards, tokenize_args

from runners import config as rc
from runners import spark
from tests.clusters import local_spark


@pytest.fixture(scope="module")
def yarn_cluster(tmp_path_factory):
    if os.geteuid() != 0 or shutil.which("ip") is None:
        pytest.skip("the YARN cluster runs in a private network namespace: needs root and `ip`")
    if yarn_minicluster.java_home() is None:
        pytest.skip("java not found (scripts/setup.sh --test installs it)")
    missing = yarn_minicluster.missing(CACHE) + local_spark.missing(CACHE)[:1]
    if missing or not os.path.exists(os.path.join(CACHE, "jars", "spark-job-server.jar")):
        pytest.skip(f"not provisioned: {', '.join(missing) or 'the Spark job-server jar'}; "
                    "run `bash scripts/setup.sh --test`")
    # MiniYARNCluster advertises its services under this host's name: inside a namespace with
    # only loopback that name must resolve to a loopback address.
    if not socket.gethostbyname(socket.gethostname()).startswith("127."):
        pytest.skip(f"{socket.gethostname()} does not resolve to a loopback address (/etc/hosts)")
    cluster = yarn_minicluster.LocalYarn(str(tmp_path_factory.mktemp("yarn")), cache_dir=CACHE,
                                         netns=f"tbyarn{uuid.uuid4().hex[:6]}", memory_mb=4096,
                                         vcores=4)
    cluster.start(timeout=180)
    yield cluster
    cluster.stop()


def test_yarn_cluster_mode_gives_the_directrunner_bytes(yarn_cluster, direct_output, corpus_dir,
                                                        hf_tokenizer, tmp_path):
    out = tmp_path / "out"
    home = local_spark.spark_home(CACHE)
    sets = {"master": "yarn", "deploy_mode": "cluster",
            "hadoop_conf_dir": yarn_cluster.conf_dir, "spark_home": home,
            "staging_dir": str(tmp_path / "staging"),
            "python_env": os.path.dirname(os.path.dirname(PYTHON)),
            "num_executors": 1, "executor_cores": 2, "executor_memory": "1g",
            "driver_memory": "1g",
            # Spark's own jars from the node's disk, as on HDInsight (otherwise spark-submit
            # zips the 300 MB of SPARK_HOME/jars for every application).
            "spark_conf.spark.yarn.jars": f"local:{home}/jars/*",
            "spark_conf.spark.yarn.stagingDir": f"file://{tmp_path}/yarn-staging"}
    argv = [PYTHON, "-m", "runners.spark", "submit", "--config", "runners/spark.yaml", "--wait",
            "--work-dir", str(tmp_path / "work")]
    for key, value in sets.items():
        argv += ["--set", f"{key}={value}"]
    argv += ["--", *tokenize_args(corpus_dir, hf_tokenizer, out)]
    env = {k: v for k, v in yarn_cluster.env().items() if k != "HADOOP_CONF_DIR"}
    proc = yarn_cluster.run(argv, capture_output=True, text=True, cwd=ROOT, env=env,
                            timeout=600)
    log = next((tmp_path / "work").glob("*/spark-submit.log")).read_text()
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:] + log[-5000:]
    assert "final status: SUCCEEDED" in log  # YARN's verdict on the application
    assert shards(out) == shards(direct_output)
    meta = json.loads((out / "metadata.json").read_text())
    assert all(s["status"] == "written" for s in meta["shards"])
    assert not (out / "_temporary").exists()  # the job's last step, in YARN, cleaned


# --- the launcher's YARN arguments, without a cluster ---------------------------------------------

def _yarn_cfg(tmp_path, **overrides):
    return rc.load(os.path.join(ROOT, "runners/spark.yaml"),
                   {"master": "yarn", "staging_dir": str(tmp_path), **overrides})


def test_yarn_submit_arguments(tmp_path):
    (tmp_path / "yarn-site.xml").write_text("<configuration/>")
    cfg = _yarn_cfg(tmp_path, deploy_mode="cluster", hadoop_conf_dir=str(tmp_path),
                    spark_home=str(tmp_path / "spark"), num_executors=3, executor_cores=2)
    (tmp_path / "spark" / "bin").mkdir(parents=True)
    (tmp_path / "spark" / "bin" / "spark-submit").write_text("")
    staged = spark.Staged("/s/pipeline.jar", "/s/runtime.jar", "/s/pipeline.jar", "/s/runtime.jar")
    argv = spark.spark_submit_argv(cfg, staged, run_id="r1", work=str(tmp_path))
    assert argv[argv.index("--master") + 1] == "yarn"
    assert argv[argv.index("--deploy-mode") + 1] == "cluster"
    assert argv[argv.index("--num-executors") + 1] == "3"
    assert "--total-executor-cores" not in argv  # standalone only
    assert argv[-1] == "/s/pipeline.jar"
    assert spark.spark_submit_env(cfg)["HADOOP_CONF_DIR"] == str(tmp_path)


def test_yarn_without_its_configuration_is_refused(tmp_path, monkeypatch):
    monkeypatch.delenv("HADOOP_CONF_DIR", raising=False)
    monkeypatch.delenv("YARN_CONF_DIR", raising=False)
    with pytest.raises(rc.ConfigError, match="set hadoop_conf_dir"):
        spark.spark_submit_env(_yarn_cfg(tmp_path))
    monkeypatch.setenv("HADOOP_CONF_DIR", str(tmp_path))
    with pytest.raises(rc.ConfigError, match="has no yarn-site.xml"):
        spark.spark_submit_env(_yarn_cfg(tmp_path))


def test_cluster_deploy_mode_only_on_yarn(tmp_path):
    with pytest.raises(rc.ConfigError, match="deploy_mode"):
        rc.load(os.path.join(ROOT, "runners/spark.yaml"),
                {"staging_dir": str(tmp_path), "deploy_mode": "cluster"})
