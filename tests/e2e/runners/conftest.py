"""Fixtures for the runner tests: the provisioned Flink + job-server jar, a plain Flink cluster,
a local SLURM cluster (2 virtual nodes), a Spark standalone cluster behind a real Livy (with an
Azurite in its namespace), an Azurite blob service, and the DirectRunner reference output. The
SLURM and Spark clusters are started once per session (the Spark, SLURM and kill-and-resume test
modules share them).

Real services only, all on 127.0.0.1 with free ports, every file under pytest's tmp folders,
every process stopped by PID. What is missing (java, SLURM, the Flink distribution or the jar,
which ``scripts/setup.sh --test`` installs) skips the tests that need it, saying why.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid

import pytest
from runner_support import CACHE, PYTHON, ROOT, shards, tokenize_args

from runners import config as rc
from runners.flink_cluster import free_port
from tests.clusters import local_azurite, local_spark
from tests.clusters.local_azurite import azurite_or_skip
from tests.clusters.local_flink import LocalFlink
from tests.clusters.local_slurm import LocalSlurm, missing_binaries


@pytest.fixture(scope="session")
def flink_stack():
    """(FLINK_HOME, version, job-server jar) as provisioned by scripts/setup.sh --test."""
    if shutil.which("java") is None:
        pytest.skip("java not found (scripts/setup.sh --test installs it)")
    cfg = {"cache_dir": CACHE, "flink_home": None, "flink_version": None, "job_server_jar": None}
    try:
        home, version = rc.resolve_flink(cfg)
        jar = rc.resolve_job_server_jar(cfg, version)
    except rc.ConfigError as exc:
        pytest.skip(f"Flink or the Beam job-server jar is not provisioned: {exc}")
    return home, version, jar


@pytest.fixture(scope="session")
def direct_output(corpus_dir, hf_tokenizer, tmp_path_factory):
    """The DirectRunner output for the shared test corpus: the reference for every runner."""
    out = tmp_path_factory.mktemp("direct") / "out"
    proc = subprocess.run([PYTHON, "-m", "pipelines.tokenize", "--runner=DirectRunner",
                           *tokenize_args(corpus_dir, hf_tokenizer, out)],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    found = shards(out)
    assert len(found) == 6, sorted(found)
    return out


@pytest.fixture(scope="module")
def flink_cluster(flink_stack, tmp_path_factory):
    """A plain Flink cluster (JobManager + 1 TaskManager, 2 slots) from the provisioned
    distribution, stopped by PID after the module."""
    home, _version, _jar = flink_stack
    cluster = LocalFlink(home, str(tmp_path_factory.mktemp("flink")), taskmanagers=1, slots=2)
    cluster.start(timeout=180)
    yield cluster
    cluster.stop()


@pytest.fixture(scope="session")
def slurm_cluster(tmp_path_factory):
    """munged + slurmctld + 2 slurmd (node1, node2) on this host, as child processes."""
    missing = missing_binaries()
    if missing:
        pytest.skip(f"SLURM/munge not installed ({', '.join(missing)}); "
                    "scripts/setup.sh --test installs slurm-wlm and munge")
    if os.geteuid() != 0:
        pytest.skip("the local SLURM cluster runs slurmd, which needs root")
    cluster = LocalSlurm(str(tmp_path_factory.mktemp("slurm")), nodes=2)
    cluster.start(timeout=90)
    yield cluster
    cluster.stop()


@pytest.fixture(scope="session")
def azurite(tmp_path_factory):
    """An Azurite blob service on 127.0.0.1 (the jobs' input and output on Azure)."""
    yield from azurite_or_skip(tmp_path_factory.mktemp("azurite"))


@pytest.fixture(scope="session")
def spark_cluster(tmp_path_factory):
    """Spark 3.5 standalone (master + 1 worker, 2 cores) and Apache Livy 0.7.1 in a private
    network namespace (tests/clusters/local_spark.py); ``shared_dir`` is Livy's whitelisted
    folder for staging, work folders and outputs."""
    if os.geteuid() != 0 or shutil.which("ip") is None:
        pytest.skip("the Spark cluster runs in a private network namespace: needs root and `ip`")
    if shutil.which("java") is None:
        pytest.skip("java not found (scripts/setup.sh --test installs it)")
    missing = local_spark.missing(CACHE)
    if missing or not os.path.exists(os.path.join(CACHE, "jars", "spark-job-server.jar")):
        pytest.skip(f"not provisioned: {', '.join(missing) or 'the Spark job-server jar'}; "
                    "run `bash scripts/setup.sh --test`")
    shared = tmp_path_factory.mktemp("spark-shared")
    # An Azurite inside the cluster's namespace (Spark's "cloud storage"). The nodes (the worker
    # and its executors, Livy and its drivers) have their own credential in their environment,
    # a SAS of the container the job uses, as a cluster set up for it; the submitting machine
    # has another (the test's launcher uses the connection string): neither goes with the job.
    # (A container SAS: Azurite answers Put Block From URL under an account SAS with a 500,
    # which a commit retries as a fault, instead of the 501 that says it lacks the call.)
    azurite_port = free_port() if local_azurite.missing() is None else None
    azure_container = "spark" + uuid.uuid4().hex[:12]
    node_env = ({"AZURE_STORAGE_SAS_TOKEN": local_azurite.container_sas(azure_container, 24)}
                if azurite_port else {})
    cluster = local_spark.LocalSpark(str(tmp_path_factory.mktemp("spark")), cache_dir=CACHE,
                                     netns=f"tbspark{uuid.uuid4().hex[:6]}", worker_cores=2,
                                     worker_memory="4g", livy_whitelist=(str(shared),),
                                     node_env=node_env)
    cluster.start(timeout=300)
    cluster.shared_dir = str(shared)
    cluster.azurite, cluster.azure_container, started = None, azure_container, None
    try:
        if azurite_port:
            started = local_azurite.run_azurite(tmp_path_factory.mktemp("spark-azurite"),
                                                prefix=tuple(cluster.prefix()), port=azurite_port)
            cluster.azurite = next(started)
        yield cluster
    finally:
        if started is not None:
            started.close()
        cluster.stop()
