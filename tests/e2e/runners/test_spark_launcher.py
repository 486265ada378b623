"""runners/spark.py without a cluster: configs, the pipeline jar, the batch request, the boot
command, detached holds. (The same launcher against a real Spark and Livy: test_spark_e2e.py.)"""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import subprocess
import sys
from concurrent import futures

import pytest
from runner_support import PYTHON, ROOT, tokenize_args

from dataio import lock as output_lock
from runners import config as rc
from runners import sdk_boot, spark, spark_jar, spark_request

pytestmark = pytest.mark.slow  # whole-job runs / services: see tests/conftest.py

SECRET = "pw-Zq81-never-written"


def _cfg(path="runners/spark_hdinsight.yaml", **overrides):
    return rc.load(os.path.join(ROOT, path), overrides)


@pytest.mark.parametrize("name", ["spark_hdinsight", "spark_synapse", "spark"])
def test_shipped_configs_load(name):
    cfg = _cfg(f"runners/{name}.yaml")
    assert cfg["kind"] == name
    assert cfg["python_env"].startswith("/")


@pytest.mark.parametrize("key,value,named", [
    ("staging_dir", "relative/folder", "staging_dir"),
    ("python_env", "venv", "python_env"),
    ("password_env", "hunter2 with spaces", "password_env"),
    ("livy_url", "cluster.azurehdinsight.net", "livy_url"),
    ("executor_memory", "lots", "executor_memory"),
    ("spark_conf", {"not.spark": 1}, "spark_conf"),
    ("num_executors", 0, "num_executors"),
])
def test_bad_values_name_the_key_and_the_fix(key, value, named):
    with pytest.raises(rc.ConfigError, match=named):
        _cfg(**{key: value})


def test_hdinsight_login_comes_only_from_the_environment(monkeypatch):
    monkeypatch.delenv("HDINSIGHT_USERNAME", raising=False)
    monkeypatch.delenv("HDINSIGHT_PASSWORD", raising=False)
    with pytest.raises(rc.ConfigError, match="HDINSIGHT_USERNAME and HDINSIGHT_PASSWORD"):
        spark.client_for(_cfg())
    monkeypatch.setenv("HDINSIGHT_USERNAME", "admin")
    monkeypatch.setenv("HDINSIGHT_PASSWORD", SECRET)
    client = spark.client_for(_cfg())
    assert client.url == "https://CLUSTER.azurehdinsight.net/livy"
    assert client._session.headers["X-Requested-By"]


def test_synapse_batches_url():
    cfg = _cfg("runners/spark_synapse.yaml", workspace="https://ws.dev.azuresynapse.net",
               spark_pool="pool1")
    assert spark.batches_url(cfg) == ("https://ws.dev.azuresynapse.net/livyApi/versions/"
                                      "2019-11-01-preview/sparkPools/pool1")


def test_cluster_staging_dir_renames_staged_paths():
    cfg = _cfg(staging_dir="/mnt/share/staging", cluster_staging_dir="file:///shared/staging")
    assert spark_request.cluster_name(cfg, "/mnt/share/staging/jobs/r1/pipeline.jar") == \
        "file:///shared/staging/jobs/r1/pipeline.jar"


def test_synapse_requirements_match_the_package():
    """The Synapse requirements list what tokenbeam itself requires (base, azure, fast,
    sentences): a version bump in setup.py must reach the pool too."""
    wanted = set()
    for req in importlib.metadata.requires("tokenbeam"):
        spec, _, marker = req.partition(";")
        extra = re.search(r'extra == "(\w+)"', marker)
        if extra is None or extra.group(1) in ("azure", "fast", "sentences"):
            wanted.add(spec.replace(" ", ""))
    with open(os.path.join(ROOT, "runners/templates/synapse-requirements.txt")) as f:
        listed = {line.strip().replace(" ", "") for line in f
                  if line.strip() and not line.startswith("#")}
    normalise = lambda s: {re.sub(r"([<>=!~]=?)", r" \1", x).split(" ")[0].lower() + "|" +  # noqa: E731
                           ",".join(sorted(re.findall(r"[<>=!~]=?[^,]+", x))) for x in s}
    assert normalise(wanted) == normalise(listed)


def test_script_action_passes_shellcheck():
    checker = os.path.join(os.path.dirname(sys.executable), "shellcheck")
    proc = subprocess.run([checker, os.path.join(ROOT, "runners/templates/hdinsight-script-action.sh")],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout


def test_no_submit_writes_a_small_jar_and_a_secret_free_request(corpus_dir, hf_tokenizer, tmp_path,
                                                              monkeypatch):
    runtime = tmp_path / "runtime.jar"
    runtime.write_bytes(b"PK\x05\x06" + bytes(18))  # an empty zip stands in for the 100 MB jar
    staging, work, out = tmp_path / "staging", tmp_path / "work", tmp_path / "out"
    env = {**os.environ, "HDINSIGHT_USERNAME": "admin", "HDINSIGHT_PASSWORD": SECRET}
    argv = [PYTHON, "-m", "runners.spark", "submit", "--config", "runners/spark_hdinsight.yaml",
            "--set", f"staging_dir={staging}", "--set", "python_env=/opt/tb/venv",
            "--set", f"job_server_jar={runtime}", "--no-submit", "--work-dir", str(work), "--",
            *tokenize_args(corpus_dir, hf_tokenizer, out), "--azure-sas-token", "sv=2099&sig=" + SECRET]
    proc = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (run_dir,) = os.listdir(work)
    request = json.loads((work / run_dir / "batch-request.json").read_text())
    assert request["url"] == "https://CLUSTER.azurehdinsight.net/livy/batches"
    body = request["body"]
    assert body["className"] == spark_jar.MAIN_CLASS
    assert body["file"] == str(staging / "jobs" / run_dir / "pipeline.jar")
    (runtime_staged,) = body["jars"]
    assert os.path.basename(runtime_staged).startswith(spark_request.RUNTIME_PREFIX)
    jar = staging / "jobs" / run_dir / "pipeline.jar"
    entries = spark_jar.pipeline_entries(str(jar))
    pipeline = json.loads(entries["BEAM-PIPELINE/pipeline/pipeline.json"])
    (environment,) = pipeline["components"]["environments"].values()
    assert environment["urn"] == "beam:env:process:v1"
    import base64
    assert b"/opt/tb/venv/bin/tokenbeam-sdk-boot" in base64.b64decode(environment["payload"])
    assert os.path.getsize(jar) < 2_000_000  # the job's own part only; the runtime is separate
    for where, blob in [("jar", jar.read_bytes()), ("request", json.dumps(request).encode()),
                        ("stdout", proc.stdout.encode()), ("stderr", proc.stderr.encode())]:
        assert SECRET.encode() not in blob, where
    # Until that batch is submitted and ends, the output is held for it.
    hold = json.loads((out / "_temporary" / run_dir / output_lock.DETACHED_NAME).read_text())
    assert hold["runner"] == "spark_hdinsight" and hold["batch"] is None
    again = subprocess.run([PYTHON, "-m", "pipelines.tokenize",
                            *tokenize_args(corpus_dir, hf_tokenizer, out)],
                           capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert again.returncode == 1
    assert "is in use by spark_hdinsight" in again.stderr
    ours = [line for line in again.stderr.splitlines() if "apitools" not in line]  # Beam's
    assert len(ours) == 1, again.stderr


def test_detached_hold_of_an_ended_batch_is_taken_over(tmp_path, capsys):
    out = str(tmp_path)
    output_lock.hold_detached(out, "r1", {"runner": "spark_hdinsight", "cluster": "http://c",
                                          "batch": "7"})
    with pytest.raises(output_lock.OutputLockedError, match="batch 7 on http://c"):
        output_lock.refuse_detached(out)
    with pytest.raises(output_lock.OutputLockedError):
        output_lock.refuse_detached(out, ended=lambda hold: False)
    gone = output_lock.refuse_detached(out, ended=lambda hold: hold["batch"] == "7")
    assert [h["run_id"] for h in gone] == ["r1"]


def test_tokenize_arguments_the_launcher_owns_are_refused(tmp_path):
    for arg in ("--runner=DirectRunner", "--environment_type=DOCKER", "--workers=2"):
        with pytest.raises(rc.ConfigError, match="leave"):
            spark._tokenize_argv(["--input", "x", arg])


# --- the boot command against a real gRPC provision service ----------------------------------

def test_boot_exports_what_the_sdk_worker_reads():
    import grpc
    from apache_beam.portability.api import (beam_provision_api_pb2,
                                             beam_provision_api_pb2_grpc, endpoints_pb2)
    from google.protobuf import struct_pb2

    seen = {}

    class Provision(beam_provision_api_pb2_grpc.ProvisionServiceServicer):
        def GetProvisionInfo(self, request, context):
            seen["worker_id"] = dict(context.invocation_metadata()).get("worker_id")
            options = struct_pb2.Struct()
            options.update({"beam:option:job_name:v1": "tb"})
            return beam_provision_api_pb2.GetProvisionInfoResponse(
                info=beam_provision_api_pb2.ProvisionInfo(
                    pipeline_options=options, runner_capabilities=["beam:cap:a", "beam:cap:b"],
                    control_endpoint=endpoints_pb2.ApiServiceDescriptor(url="127.0.0.1:1111"),
                    logging_endpoint=endpoints_pb2.ApiServiceDescriptor(url="127.0.0.1:2222")))

    server = grpc.server(futures.ThreadPoolExecutor(2))
    beam_provision_api_pb2_grpc.add_ProvisionServiceServicer_to_server(Provision(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        info = sdk_boot.provision_info(f"127.0.0.1:{port}", "worker-3", timeout=10)
    finally:
        server.stop(0)
    assert seen["worker_id"] == "worker-3"
    env = sdk_boot.worker_environment(info, worker_id="worker-3", semi_persistent_dir="/tmp/x")
    assert env["WORKER_ID"] == "worker-3"
    assert json.loads(env["PIPELINE_OPTIONS"]) == {"beam:option:job_name:v1": "tb"}
    assert env["RUNNER_CAPABILITIES"] == "beam:cap:a beam:cap:b"
    assert 'url: "127.0.0.1:1111"' in env["CONTROL_API_SERVICE_DESCRIPTOR"]
    assert 'url: "127.0.0.1:2222"' in env["LOGGING_API_SERVICE_DESCRIPTOR"]
    # sdk_worker_main parses exactly these (its own code, not ours).
    from apache_beam.runners.worker import sdk_worker_main
    assert sdk_worker_main._load_pipeline_options(env["PIPELINE_OPTIONS"]) == {"job_name": "tb"}


def test_boot_without_a_runner_says_so_in_one_line():
    proc = subprocess.run([PYTHON, "-m", "runners.sdk_boot", "--id=1",
                           "--provision_endpoint=127.0.0.1:1"], capture_output=True, text=True,
                          cwd=ROOT, timeout=120, env={**os.environ, "TOKENBEAM_BOOT_TIMEOUT": "3"})
    assert proc.returncode == 2
    assert "no answer from the runner's provision service at 127.0.0.1:1" in proc.stderr


def test_work_dir_defaults_to_the_user_cache_outside_the_checkout(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    args = spark.parser().parse_args(["submit", "--config", "c.yaml", "--", "--input", "x"])
    assert args.work_dir is None   # resolved when submit runs, from the environment then
    assert spark.default_work_dir() == str(tmp_path / "xdg" / "tokenbeam" / "spark-jobs")
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert spark.default_work_dir() == str(tmp_path / "home" / ".cache" / "tokenbeam" /
                                           "spark-jobs")
    assert not spark.default_work_dir().startswith(ROOT)


@pytest.mark.parametrize("name", ["spark_hdinsight", "spark_synapse"])
def test_cloud_configs_say_what_to_override_and_fit_a_small_cluster(name):
    path = os.path.join(ROOT, "runners", f"{name}.yaml")
    with open(path, encoding="utf-8") as f:
        head = f.read().split("\nkind:")[0]
    assert "What you must override" in head and "scripts/setup.sh --spark" in head
    # where the executors' Azure credential comes from (flags reach only the submitting machine)
    assert "the executors read --input and commit the shards with the\n# nodes' own credential" \
        in head and "spark.executorEnv.NAME" in head
    for key in ("staging_dir", "workspace" if name == "spark_synapse" else "livy_url"):
        assert f"#   {key}" in head
    cfg = _cfg(f"runners/{name}.yaml")
    gb = int(cfg["executor_memory"].rstrip("g"))
    # HDInsight's smallest workers (4 cores, 28 GB) / Synapse's Small nodes (4 cores, 32 GB)
    assert cfg["executor_cores"] <= 4 and gb <= 28 and cfg["num_executors"] <= 2
