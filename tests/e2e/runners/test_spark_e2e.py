"""The tokenize job on a real Spark 3.5 standalone cluster, submitted through a real Apache Livy
0.7.1 server (what HDInsight exposes) and with spark-submit (runners/spark.yaml): output
byte-identical to the DirectRunner's. The cluster, Livy and the launcher run inside a private
network namespace with only loopback (Spark's and Beam's Java servers bind every interface)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
import uuid

import pytest
from runner_support import CACHE, PYTHON, ROOT, files_holding, shards, tokenize_args

from runners.flink_cluster import free_port
from tests.clusters import local_azurite, local_spark

pytestmark = pytest.mark.slow  # whole-job runs / services: see tests/conftest.py

SECRET = "pw-livy-Kx93-never-written"


def _submit(cluster, config: str, out, corpus_dir, tokenizer, *extra, wait=True, inputs=None,
            env=None):
    staging = os.path.join(cluster.shared_dir, "staging")
    sets = {"staging_dir": staging, "python_env": os.path.dirname(os.path.dirname(PYTHON)),
            "num_executors": 1, "executor_cores": 2, "executor_memory": "1g",
            "driver_memory": "1g", "poll_interval": 1}
    if config.endswith("spark_hdinsight.yaml"):
        sets["livy_url"] = cluster.livy_url
    else:
        sets["master"] = cluster.master_url
        sets["spark_home"] = cluster.spark_home
    argv = [PYTHON, "-m", "runners.spark", "submit", "--config", config,
            *(["--wait"] if wait else []), "--work-dir", os.path.join(cluster.shared_dir, "work")]
    for key, value in sets.items():
        argv += ["--set", f"{key}={value}"]
    args = tokenize_args(corpus_dir, tokenizer, out)
    if inputs:
        args[args.index("--input") + 1] = inputs
    argv += ["--", *args, *extra]
    env = {**cluster.env(), "HDINSIGHT_USERNAME": "admin", "HDINSIGHT_PASSWORD": SECRET,
           **(env or {})}
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


def test_livy_batch_on_azurite_gives_the_directrunner_bytes_with_no_secret_in_it(
        spark_cluster, direct_output, corpus_dir, hf_tokenizer):
    """--input abfs://, --output az:// on Azurite. The launcher (the submitting machine, which
    plans and holds the output's lease while it waits) has the account's connection string, the
    cluster's nodes only their own SAS (the fixture's node_env): the executors' Python workers
    read and commit through adlfs with the nodes' SAS, on the endpoint the plan names. The
    shards are the DirectRunner's, and neither secret is in any file (the request body the
    launcher sent, the staged jars with the pipeline's options, Spark's and the executors'
    logs and work folders, Livy's logs, the output), in the batch's log (the driver's output,
    which Livy keeps), nor in what the launcher prints."""
    azurite = spark_cluster.azurite
    if azurite is None:
        pytest.skip(local_azurite.missing())
    container = spark_cluster.azure_container   # the nodes' SAS is for this one
    conn = azurite.connection_string
    env = {**spark_cluster.env(), "AZURE_STORAGE_CONNECTION_STRING": conn}
    copy = [PYTHON, "-m", "tests.clusters.local_azurite"]
    up = spark_cluster.run([*copy, "upload", container, "corpus", str(corpus_dir)],
                           capture_output=True, text=True, cwd=ROOT, env=env, timeout=120)
    assert up.returncode == 0, up.stderr[-3000:]
    proc = _submit(spark_cluster, "runners/spark_hdinsight.yaml", f"az://{container}/out",
                   corpus_dir, hf_tokenizer, inputs=f"abfs://{container}/corpus/*.jsonl",
                   env={"AZURE_STORAGE_CONNECTION_STRING": conn})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    assert ": success" in proc.stdout
    out = os.path.join(spark_cluster.shared_dir, "out-livy-azurite")
    down = spark_cluster.run([*copy, "download", container, "out", out],
                             capture_output=True, text=True, cwd=ROOT, env=env, timeout=120)
    assert down.returncode == 0, down.stderr[-3000:]
    assert shards(out) == shards(direct_output)
    meta = json.loads(open(os.path.join(out, "metadata.json")).read())
    assert all(s["status"] == "written" for s in meta["shards"])
    assert not os.path.exists(os.path.join(out, "_temporary"))   # the batch's last step cleaned
    assert not os.path.exists(os.path.join(out, "_lock"))        # the launcher released it
    # ... after holding it while it waited: acquired, renewed (every 20 s) and released.
    operations = re.findall(r"Operation=(Blob_\w*Lease)", azurite.debug_log.read_text())
    assert operations[0] == "Blob_AcquireLease" and "Blob_RenewLease" in operations, operations
    requests = [os.path.join(b, n) for b, _d, names in os.walk(
        os.path.join(spark_cluster.shared_dir, "work")) for n in names if n == "batch-request.json"]
    assert requests, "the launcher wrote no record of the request it sent"
    node_sas = spark_cluster.node_env["AZURE_STORAGE_SAS_TOKEN"]
    secrets = (local_azurite.DEV_KEY, conn, node_sas.split("sig=")[1].split("&")[0])
    assert not files_holding([spark_cluster.shared_dir, spark_cluster.workdir], secrets)
    batch = re.search(r"submitted batch (\S+) to", proc.stdout).group(1)
    log = _livy(spark_cluster, "logs", batch, "--lines", "100000")
    assert log.returncode == 0 and log.stdout.strip(), log.stderr[-2000:]
    assert not [s for s in secrets if s in proc.stdout + proc.stderr + log.stdout]
    # The executors' logs hold no line per Azure request (the SDK logs each at INFO).
    executor_logs = [os.path.join(b, n) for b, _d, names in os.walk(
        os.path.join(spark_cluster.workdir, "work")) for n in names if n == "stderr"]
    assert executor_logs
    assert not [p for p in executor_logs if "Request URL:" in open(p, errors="replace").read()]


def test_spark_submit_on_the_standalone_cluster(spark_cluster, direct_output, corpus_dir,
                                                hf_tokenizer):
    out = os.path.join(spark_cluster.shared_dir, "out-standalone")
    proc = _submit(spark_cluster, "runners/spark.yaml", out, corpus_dir, hf_tokenizer)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    assert shards(out) == shards(direct_output)


def _errors(folder) -> dict:
    root = os.path.join(folder, "_errors")
    return {n: open(os.path.join(root, n), "rb").read() for n in sorted(os.listdir(root))}


def _livy(cluster, *argv, timeout=300):
    cmd = [PYTHON, "-m", "runners.spark", *argv[:1], "--config", "runners/spark_hdinsight.yaml",
           "--set", f"livy_url={cluster.livy_url}", "--set", "poll_interval=1", *argv[1:]]
    env = {**cluster.env(), "HDINSIGHT_USERNAME": "admin", "HDINSIGHT_PASSWORD": SECRET}
    return cluster.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env, timeout=timeout)


def test_cancel_mid_run_then_resubmit(spark_cluster, corpus_dir, hf_tokenizer, tmp_path):
    """Sentence level, int32 ids, a bad record, twelve input files of which three were committed
    by an earlier run: the batch is cancelled (Livy DELETE) while it tokenizes, the same command
    resubmitted takes over the cancelled batch's hold, skips the committed shards, and the output
    equals a clean DirectRunner run's, errors file included."""
    corpus = os.path.join(spark_cluster.shared_dir, "corpus-cancel")
    os.makedirs(corpus)
    sources = sorted(os.listdir(corpus_dir))

    def add_inputs(numbers):
        for k in numbers:
            data = open(os.path.join(corpus_dir, sources[k % len(sources)]), "rb").read() * 4
            if k == 7:
                data += b'{"text": "a record cut short\\n'
            with open(os.path.join(corpus, f"part{k:02d}.jsonl"), "wb") as f:
                f.write(data)

    def direct(out):
        proc = subprocess.run([PYTHON, "-m", "pipelines.tokenize", "--runner=DirectRunner",
                               *tokenize_args(corpus, hf_tokenizer, out), *extra],
                              capture_output=True, text=True, cwd=ROOT, timeout=600)
        assert proc.returncode == 0, proc.stderr[-3000:]

    extra = ["--split-sentences", "--dtype", "int32", "--log-interval", "0"]
    # An earlier run committed the shards of the three files there were then.
    out = os.path.join(spark_cluster.shared_dir, "out-cancel")
    add_inputs(range(3))
    direct(out)
    assert len(shards(out)) == 6
    add_inputs(range(3, 12))
    clean = tmp_path / "clean"
    direct(clean)
    assert len(shards(clean)) == 24 and _errors(clean)

    proc = _submit(spark_cluster, "runners/spark_hdinsight.yaml", out, corpus, hf_tokenizer,
                   *extra, wait=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    batch = re.search(r"submitted batch (\S+) to", proc.stdout).group(1)
    run_dirs = os.path.join(out, "_temporary")
    deadline = time.monotonic() + 600
    def working():
        """The executors have done work a cancel keeps: a shard of this batch committed (an
        input of one work item is written straight to its shard), or a part written under
        _parts/{input}/{item}/ (an item of a larger input)."""
        commits = os.path.join(out, "_commits")
        return any(not name.startswith(("part00", "part01", "part02", "."))
                   for name in os.listdir(commits)) or \
            any(name.endswith(".bin") for _base, _dirs, files in
                os.walk(os.path.join(out, "_parts")) for name in files)

    while not working():
        assert time.monotonic() < deadline, _livy(spark_cluster, "status", batch).stdout
        assert not os.path.exists(os.path.join(out, "_commits", "part11_text_sentence.json")), \
            "the batch finished before it was cancelled"
        time.sleep(0.05)
    cancelled = _livy(spark_cluster, "cancel", batch)
    assert cancelled.returncode == 0, cancelled.stdout + cancelled.stderr
    assert "killed" in cancelled.stdout or "dead" in cancelled.stdout, cancelled.stdout
    meta = json.loads(open(os.path.join(out, "metadata.json")).read())
    assert all(s["input"].rsplit("/", 1)[-1] < "part03" for s in meta["shards"]), \
        "the batch finished before it was cancelled"
    for name, data in shards(out).items():   # whatever is final-named is complete and right
        assert data == shards(clean)[name], name
    committed = sorted(n.split("_text_")[0] for n in os.listdir(os.path.join(out, "_commits")))
    assert committed[:3] == ["part00", "part01", "part02"], committed

    again = _submit(spark_cluster, "runners/spark_hdinsight.yaml", out, corpus, hf_tokenizer,
                    *extra)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-5000:]
    assert "has ended; removing its temporaries" in again.stderr
    skipped = [line.split()[1].split("_text_")[0] for line in again.stdout.splitlines()
               if line.startswith("skip ")]
    assert skipped == committed   # the committed shards, and only those, are skipped
    assert shards(out) == shards(clean)
    assert _errors(out) == _errors(clean)
    assert not os.path.exists(run_dirs) and not os.path.exists(os.path.join(out, "_parts"))


def test_relative_paths_are_refused_before_anything_is_built(tmp_path, corpus_dir, hf_tokenizer):
    args = tokenize_args(corpus_dir, hf_tokenizer, tmp_path / "o")
    args[args.index("--tokenizer-model") + 1] = os.path.relpath(str(hf_tokenizer), ROOT)
    proc = subprocess.run([PYTHON, "-m", "runners.spark", "submit", "--config",
                           "runners/spark.yaml", "--set", f"staging_dir={tmp_path}", "--", *args],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert "a relative path; the cluster's nodes resolve it in another folder" in proc.stderr
    assert not os.path.exists(tmp_path / "o" / "_temporary")


# --- Synapse: the launcher's requests against a stand-in ----------------------------------------
# TEST DOUBLES, and the only ones here: Synapse's batch endpoint (tests/e2e/runners/synapse_standin.py,
# which forwards to the real Livy above) and Azure AD (a fake `az` command that
# DefaultAzureCredential's AzureCliCredential runs). Nothing else is simulated.

FAKE_AZ = """#!/bin/sh
echo '{"accessToken": "%s", "expiresOn": "2099-01-01 00:00:00.000000", "expires_on": 4070908800,
 "subscription": "0", "tenant": "0", "tokenType": "Bearer"}'
"""


def test_synapse_batch_through_a_standin_with_a_bearer_token(spark_cluster, direct_output,
                                                            corpus_dir, hf_tokenizer, tmp_path):
    token = "tok-" + uuid.uuid4().hex
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "az").write_text(FAKE_AZ % token)
    (bin_dir / "az").chmod(0o755)
    port, log = free_port(), tmp_path / "requests.jsonl"
    standin = spark_cluster.popen([PYTHON, os.path.join(ROOT, "tests/e2e/runners/synapse_standin.py"),
                                   str(port), spark_cluster.livy_url, token, str(log)])
    try:
        probe = [PYTHON, "-c", f"import socket; socket.create_connection(('127.0.0.1', {port}), 1)"]
        for _ in range(60):
            if spark_cluster.run(probe, capture_output=True).returncode == 0:
                break
            time.sleep(0.5)
        out = os.path.join(spark_cluster.shared_dir, "out-synapse")
        staging = os.path.join(spark_cluster.shared_dir, "staging")
        env = {**spark_cluster.env(), "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
        for name in ("AZURE_CLIENT_ID", "AZURE_TENANT_ID", "AZURE_CLIENT_SECRET"):
            env.pop(name, None)
        argv = [PYTHON, "-m", "runners.spark", "submit", "--config", "runners/spark_synapse.yaml",
                "--wait", "--work-dir", os.path.join(spark_cluster.shared_dir, "work"),
                "--set", f"workspace=http://127.0.0.1:{port}", "--set", "spark_pool=pool1",
                "--set", f"staging_dir={staging}",
                "--set", f"python_env={os.path.dirname(os.path.dirname(PYTHON))}",
                "--set", "num_executors=1", "--set", "executor_cores=2",
                "--set", "executor_memory=1g", "--set", "driver_memory=1g",
                "--set", "driver_cores=1", "--set", "poll_interval=1", "--",
                *tokenize_args(corpus_dir, hf_tokenizer, out)]
        proc = spark_cluster.run(argv, capture_output=True, text=True, cwd=ROOT, env=env,
                                 timeout=900)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
        assert shards(out) == shards(direct_output)
        requests = [json.loads(line) for line in log.read_text().splitlines()]
        post = next(r for r in requests if r["method"] == "POST")
        assert post["path"] == "/livyApi/versions/2019-11-01-preview/sparkPools/pool1/batches"
        assert post["authorization"] == f"Bearer {token}"
        assert post["body"]["className"] == "org.apache.beam.runners.spark.SparkPipelineRunner"
        assert post["body"]["tags"]["tokenbeam-run"]
        assert all(r["authorization"] == f"Bearer {token}" for r in requests)
        assert token not in proc.stdout + proc.stderr
        # No credential at all: refused within one attempt per method, each named.
        env["PATH"] = os.environ["PATH"].replace(str(bin_dir), "")
        env["PATH"] = os.pathsep.join(p for p in env["PATH"].split(os.pathsep)
                                      if p and not os.path.exists(os.path.join(p, "az")))
        refused = spark_cluster.run(argv[:argv.index("--")] + ["--"] + tokenize_args(
            corpus_dir, hf_tokenizer, os.path.join(spark_cluster.shared_dir, "out-synapse-2")),
            capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)
        assert refused.returncode == 1, refused.stderr[-3000:]
        assert "no Azure credential for the Synapse workspace" in refused.stderr
        assert "AzureCliCredential" in refused.stderr
    finally:
        standin.kill()
        standin.wait()
