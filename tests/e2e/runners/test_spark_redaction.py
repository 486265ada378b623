"""Issue 23, item 4: a secret a config gives Spark's executors (``spark.executorEnv.*``) is in
neither Spark's event log (what the History Server shows) nor spark-submit's command line.

The real Spark that scripts/setup.sh provisions runs, through runners/spark_request.py's
``spark_submit_argv``, a tiny PySpark job (``--master local[1]``: a full Beam pipeline adds
minutes and nothing to what is checked) with event logging on; the job checks that the executor
did get the variables.
"""

from __future__ import annotations

import os
import shutil
import stat
import sys

import pytest
from runner_support import ROOT

from runners import config as rc
from runners import spark_request
from tests.clusters import local_spark
from tests.process_watch import run_watching_cmdlines

pytestmark = pytest.mark.slow  # a real spark-submit

CACHE = os.path.join(ROOT, ".cache")
KEY = "c2VjcmV0LWFjY291bnQta2V5LVpxODE="          # looks like an account key
SIG = "sIgQx81NeverLoggedZ%3D"
SECRETS = {
    "spark.executorEnv.AZURE_STORAGE_KEY": KEY,
    "spark.executorEnv.AZURE_STORAGE_CONNECTION_STRING":
        "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=Cn9-conn-key-never-logged;",
    "spark.executorEnv.AZURE_STORAGE_SAS_TOKEN": f"sv=2024-08-04&sp=rl&sig={SIG}",
    "spark.executorEnv.AZURE_CLIENT_SECRET": "client-secret-Jw2-never-logged",
}
VALUES = [KEY, SIG, "Cn9-conn-key-never-logged", "client-secret-Jw2-never-logged"]

JOB = """
import os, sys
from pyspark.sql import SparkSession
names = sys.argv[1].split(",")
spark = SparkSession.builder.getOrCreate()
got = spark.sparkContext.parallelize([0], 1).map(
    lambda _: [bool(os.environ.get(n)) for n in names]).collect()[0]
spark.stop()
sys.exit(0 if all(got) else 3)
"""


@pytest.fixture(scope="module")
def spark_home():
    if shutil.which("java") is None:
        pytest.skip("java not found (scripts/setup.sh --test installs it)")
    missing = [m for m in local_spark.missing(CACHE) if m.startswith("Spark")]
    if missing:
        pytest.skip(f"not provisioned: {missing[0]}; run `bash scripts/setup.sh --test`")
    return local_spark.spark_home(CACHE)


def test_executor_secrets_stay_out_of_the_event_log_and_the_command_line(spark_home, tmp_path,
                                                                         monkeypatch):
    events, work, conf_dir = tmp_path / "events", tmp_path / "work", tmp_path / "conf"
    for folder in (events, work, conf_dir):
        folder.mkdir()
    # the cluster's own defaults, which a --properties-file would otherwise drop
    (conf_dir / "spark-defaults.conf").write_text("spark.ui.enabled false\n")
    monkeypatch.setenv("SPARK_CONF_DIR", str(conf_dir))
    job = tmp_path / "job.py"
    job.write_text(JOB)
    runtime = os.path.join(spark_home, "jars", sorted(os.listdir(os.path.join(
        spark_home, "jars")))[0])   # any jar: --jars must name one
    cfg = rc.load(os.path.join(ROOT, "runners/spark.yaml"), {
        "master": "local[1]", "spark_home": spark_home, "staging_dir": str(tmp_path),
        "num_executors": 1, "executor_cores": 1, "driver_memory": "512m",
        "executor_memory": "512m",
        "spark_conf": {**SECRETS, "spark.eventLog.enabled": "true",
                       "spark.eventLog.dir": events.as_uri(),
                       "spark.driver.bindAddress": "127.0.0.1",
                       "spark.driver.host": "127.0.0.1"}})
    staged = spark_request.Staged(str(job), runtime, str(job), runtime)
    argv = spark_request.spark_submit_argv(cfg, staged, run_id="r1", work=str(work))
    properties = work / spark_request.SECRET_PROPERTIES
    assert stat.S_IMODE(properties.stat().st_mode) == 0o600
    assert "spark.ui.enabled false" in properties.read_text()
    names = ",".join(k.rsplit(".", 1)[1] for k in SECRETS)
    env = {**os.environ, "SPARK_HOME": spark_home, "SPARK_CONF_DIR": str(conf_dir),
           "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable,
           "PYSPARK_DRIVER_PYTHON": sys.executable}
    status, stderr, seen, leaks = run_watching_cmdlines(argv + [names], secrets=VALUES, env=env,
                                                        cwd=str(tmp_path))
    assert status == 0, stderr[-4000:]   # 3: the executor did not get the variables
    assert not leaks, f"a secret on a command line: {leaks}"
    assert any(b"SparkSubmit" in line for line in seen.values())
    logs = [p for p in events.iterdir() if p.is_file()]
    assert logs, "Spark wrote no event log"
    text = "".join(p.read_text(errors="replace") for p in logs)
    assert "spark.executorEnv.AZURE_STORAGE_KEY" in text   # the property is there, redacted
    assert "*********(redacted)" in text
    for value in VALUES:
        assert value not in text, f"{value} is in the event log"


def test_a_configured_redaction_regex_is_extended_not_replaced():
    cfg = rc.load(os.path.join(ROOT, "runners/spark.yaml"),
                  {"spark_conf": {"spark.redaction.regex": "(?i)mycompany"}})
    regex = spark_request.spark_conf(cfg)["spark.redaction.regex"]
    assert regex.startswith("(?:(?i)mycompany)|") and spark_request.SPARK_DEFAULT_REDACTION in regex
    body = spark_request.batch_body(cfg, spark_request.Staged("j", "r", "j", "r"), run_id="r1")
    assert body["conf"]["spark.redaction.regex"] == regex   # Livy / Synapse batches too
