"""The Spark launcher's YARN arguments and state reading, without a cluster (the real YARN
cluster runs in tests/e2e/runners/test_spark_yarn_cluster.py)."""

from __future__ import annotations

import os

import pytest
from runner_support import ROOT

from runners import config as rc
from runners import spark, spark_clients


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
