"""The tokenize job on a real YARN cluster (HDInsight runs Spark on YARN): Hadoop's
MiniYARNCluster (a ResourceManager and one NodeManager, tests/e2e/runners/yarn_minicluster.py) and
the pipeline jar submitted by ``python -m runners.spark submit --config runners/spark.yaml
--set master=yarn`` (spark-submit from the pyspark 3.5.8 wheel, ``--deploy-mode cluster``: the
driver runs in YARN's application master, as a Livy batch on HDInsight does). The output is
byte-identical to the DirectRunner's. The cluster and the launcher run inside a private
network namespace with only loopback."""

from __future__ import annotations

import glob
import json
import os
import queue
import re
import shutil
import socket
import subprocess
import threading
import time
import uuid

import pytest
import yarn_minicluster
from runner_support import CACHE, PYTHON, ROOT, shards, tokenize_args
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


def _yarn_sets(yarn_cluster, tmp_path) -> list[str]:
    home = local_spark.spark_home(CACHE)
    sets = {"master": "yarn", "deploy_mode": "cluster",
            "hadoop_conf_dir": yarn_cluster.conf_dir, "spark_home": home,
            "staging_dir": str(tmp_path / "staging"),
            "python_env": os.path.dirname(os.path.dirname(PYTHON)),
            "num_executors": 1, "executor_cores": 2, "executor_memory": "1g",
            "driver_memory": "1g", "poll_interval": 1,
            "spark_conf.spark.yarn.jars": f"local:{home}/jars/*",
            "spark_conf.spark.yarn.stagingDir": f"file://{tmp_path}/yarn-staging"}
    return [arg for key, value in sets.items() for arg in ("--set", f"{key}={value}")]


def test_status_logs_and_cancel_of_a_yarn_application(yarn_cluster, corpus_dir, hf_tokenizer,
                                                      tmp_path):
    """submit records the YARN application id (in the output's detached hold, where a Livy
    batch id goes, and printed); status, logs and cancel then work on it as they do on a Livy
    batch. MiniYARNCluster runs the ResourceManager's and the NodeManager's web apps in one JVM,
    where Guice's static filter pipeline leaves the RM's REST API answering 404 pages, so the
    launcher falls back to the ``yarn`` CLI here (Hadoop's own client classes over RPC to the
    real ResourceManager), as it does on a cluster whose REST API refuses it."""
    out = tmp_path / "out"
    sets = _yarn_sets(yarn_cluster, tmp_path)
    env = {k: v for k, v in yarn_cluster.env().items() if k != "HADOOP_CONF_DIR"}
    submit = yarn_cluster.popen(
        [PYTHON, "-m", "runners.spark", "submit", "--config", "runners/spark.yaml", *sets,
         "--work-dir", str(tmp_path / "work"), "--",
         *tokenize_args(corpus_dir, hf_tokenizer, out)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT, env=env)
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in submit.stdout], daemon=True).start()

    cli_env = {**env, "PATH": os.path.dirname(yarn_cluster.yarn_cli(str(tmp_path / "bin")))
               + os.pathsep + env["PATH"]}

    def command(*args):
        return yarn_cluster.run([PYTHON, "-m", "runners.spark", *args[:1], "--config",
                                 "runners/spark.yaml", *sets, *args[1:]],
                                capture_output=True, text=True, cwd=ROOT, env=cli_env,
                                timeout=180)
    try:
        app, seen = None, []
        deadline = time.monotonic() + 300
        while app is None and time.monotonic() < deadline:
            try:
                line = lines.get(timeout=5)
            except queue.Empty:
                assert submit.poll() is None, "".join(seen)
                continue
            seen.append(line)
            match = re.match(r"submitted application (application_\d+_\d+) to YARN", line)
            app = match.group(1) if match else None
        assert app, "".join(seen)
        holds = [json.loads(open(p).read())
                 for p in glob.glob(str(out / "_temporary" / "*" / "detached.json"))]
        assert [h["batch"] for h in holds] == [app]

        state = None
        while state != "running" and time.monotonic() < deadline:
            status = command("status", app)
            assert status.returncode == 0, status.stdout + status.stderr
            state = status.stdout.strip().rpartition(": ")[2]
            assert status.stdout.strip() == f"application {app}: {state}"
            assert state in ("accepted", "running", "submitted", "new", "new_saving")
            time.sleep(1)
        assert state == "running"
        logs = command("logs", app, "--lines", "30")
        assert logs.returncode == 0, logs.stderr
        tail = logs.stdout.splitlines()
        # the last lines of the application master's stderr: which lines those are depends on
        # how far the job has gone, but they come from its first attempt's first container
        master = "container_" + app.removeprefix("application_") + "_01_000001"
        assert 0 < len(tail) <= 30 and master in logs.stdout and " INFO " in logs.stdout, \
            logs.stdout

        cancel = command("cancel", app)
        assert cancel.returncode == 0, cancel.stdout + cancel.stderr
        assert cancel.stdout.startswith(f"application {app}: killed")
        assert submit.wait(timeout=180) == 1   # submit saw its application end
        after = command("status", app)
        assert after.returncode == 1 and f"application {app}: killed" in after.stdout
    finally:
        if submit.poll() is None:
            submit.kill()
            submit.wait()
