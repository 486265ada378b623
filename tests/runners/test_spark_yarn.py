"""The tokenize job on a real YARN cluster (HDInsight runs Spark on YARN): Hadoop's
MiniYARNCluster (a ResourceManager and one NodeManager, tests/runners/yarn_minicluster.py) and
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

from runners import config as rc
from runners import spark, spark_clients
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
        assert 0 < len(tail) <= 30 and "ApplicationMaster" in logs.stdout, logs.stdout

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


def test_resourcemanager_addresses_come_from_yarn_site(tmp_path):
    def site(props):
        (tmp_path / "yarn-site.xml").write_text("<configuration>" + "".join(
            f"<property><name>{k}</name><value>{v}</value></property>" for k, v in props.items())
            + "</configuration>")
    site({"yarn.resourcemanager.hostname": "rm0", "yarn.resourcemanager.webapp.address":
          "${yarn.resourcemanager.hostname}:8088"})
    assert spark_clients.resourcemanager_urls(str(tmp_path)) == ["http://rm0:8088"]
    # HDInsight: two head nodes, an HA pair
    site({"yarn.resourcemanager.ha.enabled": "true", "yarn.resourcemanager.ha.rm-ids": "rm1,rm2",
          "yarn.resourcemanager.webapp.address.rm1": "hn0:8088",
          "yarn.resourcemanager.hostname.rm2": "hn1"})
    assert spark_clients.resourcemanager_urls(str(tmp_path)) == ["http://hn0:8088", "http://hn1:8088"]
    site({"yarn.http.policy": "HTTPS_ONLY", "yarn.resourcemanager.hostname": "rm0"})
    assert spark_clients.resourcemanager_urls(str(tmp_path)) == ["https://rm0:8090"]
    cfg = _yarn_cfg(tmp_path, hadoop_conf_dir=str(tmp_path))
    assert isinstance(spark.client_for(cfg), spark_clients.YarnClient)
    with pytest.raises(rc.ConfigError, match="standalone Spark"):
        spark.client_for(rc.load(os.path.join(ROOT, "runners/spark.yaml"),
                                 {"staging_dir": str(tmp_path)}))


def test_cluster_deploy_mode_only_on_yarn(tmp_path):
    with pytest.raises(rc.ConfigError, match="deploy_mode"):
        rc.load(os.path.join(ROOT, "runners/spark.yaml"),
                {"staging_dir": str(tmp_path), "deploy_mode": "cluster"})


@pytest.mark.parametrize("state, final, livy", [
    ("FINISHED", "SUCCEEDED", "success"), ("FINISHED", "FAILED", "dead"),
    ("FAILED", "FAILED", "dead"), ("KILLED", "KILLED", "killed"), ("FINISHED", "KILLED", "killed"),
    ("ACCEPTED", "UNDEFINED", "accepted"), ("RUNNING", "UNDEFINED", "running")])
def test_yarn_states_read_as_livys(state, final, livy):
    assert spark_clients._livy_state(state, final) == livy
    assert (livy in spark.LIVY_TERMINAL) == (state in ("FINISHED", "FAILED", "KILLED"))


def test_the_application_id_is_read_from_spark_submits_log(tmp_path):
    log = tmp_path / "spark-submit.log"
    log.write_text("25/11/26 04:30:01 INFO Client: Requesting a new application\n")
    assert spark._yarn_application(str(log)) is None
    with log.open("a") as f:
        f.write("25/11/26 04:30:02 INFO YarnClientImpl: Submitted application "
                "application_1795667552109_0001\n")
    assert spark._yarn_application(str(log)) == "application_1795667552109_0001"
    assert spark._yarn_application(str(tmp_path / "none.log")) is None


def test_a_later_submit_asks_yarn_whether_a_held_application_has_ended(tmp_path, capsys):
    """The hold submit records for a YARN application names the ResourceManager, so that a
    later submit asks it, as it asks Livy of a batch (a cluster-mode application outlives a
    launcher stopped with Ctrl-C). The hold used to say ``"cluster": "yarn"``, which matched no
    client: the output stayed refused after the application ended, until removed by hand."""
    from argparse import Namespace

    from dataio import lock as output_lock

    (tmp_path / "yarn-site.xml").write_text(
        "<configuration><property><name>yarn.resourcemanager.ha.enabled</name><value>true"
        "</value></property><property><name>yarn.resourcemanager.ha.rm-ids</name><value>rm1,"
        "rm2</value></property><property><name>yarn.resourcemanager.hostname.rm1</name><value>"
        "hn0</value></property><property><name>yarn.resourcemanager.hostname.rm2</name><value>"
        "hn1</value></property></configuration>")
    cfg = _yarn_cfg(tmp_path, hadoop_conf_dir=str(tmp_path))
    out = tmp_path / "out"
    out.mkdir()
    record = spark._yarn_recorder(Namespace(config="runners/spark.yaml"), cfg, output=str(out),
                                  run_id="r1")
    record("application_1795667552109_0001")
    assert "submitted application application_1795667552109_0001" in capsys.readouterr().out
    (hold,) = output_lock.detached_holds(str(out))
    assert hold["cluster"] == "http://hn0:8088"

    class Answers(spark_clients.YarnClient):   # what the ResourceManager says of the id
        states: dict = {}

        def state(self, app):
            if app not in self.states:
                raise spark_clients.BatchNotFound(app)
            return self.states[app]

    asks = Answers(cfg, env=spark.spark_submit_env(cfg))
    ended = spark._ended_on(asks)
    Answers.states = {"application_1795667552109_0001": "running"}
    assert not ended(hold)
    Answers.states = {"application_1795667552109_0001": "killed"}
    assert ended(hold)
    Answers.states = {}
    assert ended(hold)      # the ResourceManager forgot it
    asks.urls = ["http://elsewhere:8088"]
    assert not ended(hold)  # another cluster's application: not ours to judge


def test_a_yarn_command_given_no_application_id_says_so_in_one_line(tmp_path, capsys):
    """status/logs/cancel on YARN take the id submit printed; a Livy batch number or a typo
    used to go into the ResourceManager's URL (a 404 page, then the `yarn` CLI's words)."""
    (tmp_path / "yarn-site.xml").write_text("<configuration/>")
    for command in ("status", "logs", "cancel"):
        status = spark.main([command, "--config", os.path.join(ROOT, "runners/spark.yaml"),
                             "--set", "master=yarn", "--set", f"hadoop_conf_dir={tmp_path}",
                             "7"])
        err = capsys.readouterr().err
        assert status == 2 and err.count("\n") == 1, err
        assert err.startswith("error: 7: not a YARN application id (application_"), err
