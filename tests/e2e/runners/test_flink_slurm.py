"""The tokenize job on SLURM + Flink, end to end: a local SLURM cluster with 2 virtual nodes,
the launcher's rendered sbatch script starting Flink (JobManager + a TaskManager per node) and
worker pools inside the allocation, submitting the pipeline as an uber jar (no Beam job server),
then tearing them down."""

import json
import os
import re
import shutil
import subprocess
import time
import urllib.request
import uuid

import psutil
import pytest
from runner_support import (PYTHON, ROOT, assert_no_processes_left, describe, files_holding,
                            flink_temp_entries, is_loopback, listening_sockets, processes_with,
                            shards, tokenize_args)

from runners import slurm
from tests.clusters import local_azurite

pytestmark = pytest.mark.slow  # whole-job runs / services: see tests/conftest.py

JOB_TIMEOUT = 480


@pytest.fixture
def launch(slurm_cluster, flink_stack, tmp_path):
    """launch(*launcher_args, output=DIR) -> CompletedProcess of `python -m runners.slurm submit`;
    every process of the job carries this test's marker in its environment."""
    marker = f"slurm-test-{tmp_path}"
    env = slurm_cluster.env(dict(os.environ, TOKENBEAM_TEST_MARKER=marker))
    log_dir = tmp_path / "slurm logs"   # a space on purpose

    def _launch(*extra, timeout=JOB_TIMEOUT + 60, env=env):
        cmd = [PYTHON, "-m", "runners.slurm", "submit", "--config",
               os.path.join(ROOT, "runners/flink_slurm.yaml"),
               "--cache-dir", os.path.join(ROOT, ".cache"), "--python-env",
               os.path.dirname(os.path.dirname(PYTHON)), "--log-dir", str(log_dir),
               "--nodes", "2", "--cpus-per-node", str(slurm_cluster.cpus), "--time", "00:20:00",
               "--set", "memory=null", "--set", "signal_before_end=60",
               "--jobmanager-memory", "1024m", "--taskmanager-memory", "1280m",
               "--set", "job_server_memory=512m", "--set", "startup_timeout=180", *extra]
        return subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env,
                              timeout=timeout)

    _launch.env, _launch.marker, _launch.log_dir = env, marker, log_dir
    _launch.cpus = slurm_cluster.cpus
    return _launch


def _job_id(proc) -> str:
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout.strip().splitlines()[-1]


def _wait_for_line(path, pattern, *, timeout=240.0) -> re.Match:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if os.path.exists(path):
            with open(path, encoding="utf-8", errors="replace") as f:
                m = re.search(pattern, f.read())
            if m:
                return m
        time.sleep(0.5)
    raise AssertionError(f"{pattern!r} not in {path} after {timeout} s")


def _flink_jobs(rest_port) -> list[dict]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{rest_port}/jobs/overview",
                                    timeout=5) as r:
            return json.load(r)["jobs"]
    except OSError:
        return []


def test_two_node_job_matches_direct_runner(launch, direct_output, corpus_dir, hf_tokenizer,
                                            tmp_path):
    out = tmp_path / "out"
    temp_before = flink_temp_entries()
    started = time.monotonic()
    proc = launch("--wait", "--", *tokenize_args(corpus_dir, hf_tokenizer, out))
    wall = time.monotonic() - started
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert shards(out) == shards(direct_output)
    assert json.loads((out / "metadata.json").read_text())["totals"] == \
        json.loads((direct_output / "metadata.json").read_text())["totals"]
    job_id = re.search(r"submitted job (\d+)", proc.stdout).group(1)
    folder = launch.log_dir / job_id
    logs = set(os.listdir(folder))
    assert {"batch.log", "jobmanager.log", "taskmanager-node1.log", "taskmanager-node2.log",
            "pipeline.log", "flink-conf", "exit-status"} <= logs
    assert any(name.startswith("worker-pool-") for name in logs)
    batch = (folder / "batch.log").read_text()
    assert f"2 TaskManager(s), {2 * launch.cpus} slots" in batch
    assert "stopped everything; exit status 0" in batch
    assert (launch.log_dir / f"slurm-{job_id}.out").exists()
    assert_no_processes_left(launch.marker)
    # Flink's temp files (a copy of the job-server jar per process) went with the job.
    assert "flink-tmp" not in logs
    assert flink_temp_entries() <= temp_before
    print(f"\n2-node SLURM + Flink job: {wall:.1f} s wall (submit to end)")


def test_cancelled_job_resubmitted_ends_identical(launch, direct_output, corpus_dir,
                                                  hf_tokenizer, tmp_path):
    out = tmp_path / "out"
    args = tokenize_args(corpus_dir, hf_tokenizer, out)
    job_id = _job_id(launch("--", *args, timeout=120))
    folder = launch.log_dir / job_id
    rest = _wait_for_line(folder / "batch.log", r"rest (\d+)").group(1)
    # Kill it mid-way: the Flink job is running and the output is not complete yet.
    deadline = time.monotonic() + JOB_TIMEOUT
    while not any(j["state"] == "RUNNING" for j in _flink_jobs(rest)):
        assert time.monotonic() < deadline, "the Flink job never started"
        assert not (out / "metadata.json").exists(), "the job ended before it could be killed"
        time.sleep(0.5)
    time.sleep(2)
    status = subprocess.run([PYTHON, "-m", "runners.slurm", "status", job_id],
                            capture_output=True, text=True, env=launch.env, cwd=ROOT)
    assert "RUNNING" in status.stdout and f"job folder: {folder}" in status.stdout
    cancel = subprocess.run([PYTHON, "-m", "runners.slurm", "cancel", job_id],
                            capture_output=True, text=True, env=launch.env, cwd=ROOT)
    assert cancel.returncode == 0, cancel.stderr
    assert not (out / "metadata.json").exists(), "killed too late to test the resume"
    info = slurm.wait_for(job_id, timeout=120, env=launch.env)
    assert info["JobState"] == "CANCELLED"
    _wait_for_line(folder / "batch.log", r"stopped everything", timeout=60)
    assert_no_processes_left(launch.marker)
    committed_before = len(shards(out)) if out.exists() else 0

    proc = launch("--wait", "--", *args)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert shards(out) == shards(direct_output)
    assert not (out / "_temporary").exists()
    print(f"\nresumed after scancel: {committed_before // 2} of 3 shards were committed before")


def test_pre_timeout_signal_tears_everything_down(launch, corpus_dir, hf_tokenizer, tmp_path):
    job_id = _job_id(launch("--", *tokenize_args(corpus_dir, hf_tokenizer, tmp_path / "o"),
                            timeout=120))
    folder = launch.log_dir / job_id
    # SLURM sends USR1 to the batch shell ahead of the time limit (--signal=B:USR1@N); send it
    # now, while the cluster is coming up.
    _wait_for_line(folder / "batch.log", r"JobManager .* rest \d+")
    subprocess.run(["scancel", "--batch", "--signal=USR1", job_id], check=True, env=launch.env)
    info = slurm.wait_for(job_id, timeout=180, env=launch.env)
    assert info["JobState"] == "FAILED" and info["ExitCode"].startswith("124:")
    batch = _wait_for_line(folder / "batch.log", r"stopped everything; exit status 124",
                           timeout=60).string
    assert "received SIGUSR1" in batch
    assert (folder / "exit-status").read_text().strip() == "124"
    assert_no_processes_left(launch.marker)


def test_dry_run_plans_on_the_allocation_without_flink(launch, corpus_dir, hf_tokenizer,
                                                       tmp_path):
    out = tmp_path / "o"
    proc = launch("--wait", "--dry-run", "--", *tokenize_args(corpus_dir, hf_tokenizer, out),
                  timeout=240)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "nothing written (--dry-run)" in proc.stdout
    assert not out.exists() or not shards(out)
    job_id = re.search(r"submitted job (\d+)", proc.stdout).group(1)
    assert not (launch.log_dir / job_id / "jobmanager.log").exists()


def test_requeue_on_the_pre_timeout_signal_resumes_to_identical_output(
        launch, direct_output, corpus_dir, hf_tokenizer, tmp_path):
    out = tmp_path / "out"
    job_id = _job_id(launch("--set", "requeue=true", "--",
                            *tokenize_args(corpus_dir, hf_tokenizer, out), timeout=120))
    # The "time limit" arrives once the first shard is committed: the job requeues itself,
    # and the rerun skips what is committed.
    deadline = time.monotonic() + JOB_TIMEOUT
    while not (out / "_commits").is_dir() or not os.listdir(out / "_commits"):
        assert time.monotonic() < deadline, "no shard was ever committed"
        time.sleep(0.2)
    subprocess.run(["scancel", "--batch", "--signal=USR1", job_id], check=True, env=launch.env)
    # SLURM holds a requeued job for about two minutes (Reason=BeginTime); release it at once.
    deadline = time.monotonic() + 120
    while (slurm.job_info(job_id, launch.env) or {}).get("Reason") != "BeginTime":
        assert time.monotonic() < deadline, "the job was not requeued"
        time.sleep(0.5)
    subprocess.run(["scontrol", "update", f"JobId={job_id}", "StartTime=now"], check=True,
                   env=launch.env)
    info = slurm.wait_for(job_id, timeout=JOB_TIMEOUT, env=launch.env)
    assert info["JobState"] == "COMPLETED", info
    assert int(info["Restarts"]) == 1
    assert shards(out) == shards(direct_output)
    first = (launch.log_dir / job_id / "batch.log").read_text()
    assert "requeueing" in first and "stopped everything" in first
    rerun = launch.log_dir / f"{job_id}.r1"
    assert "stopped everything; exit status 0" in (rerun / "batch.log").read_text()
    skipped = (rerun / "pipeline.log").read_text().count("\nskip ")
    assert_no_processes_left(launch.marker)
    print(f"\nrequeued: the rerun skipped {skipped} of 3 committed shards")


def test_job_on_azurite_matches_direct_runner_with_no_secret_in_it(
        launch, azurite, direct_output, corpus_dir, hf_tokenizer, tmp_path):
    """--input abfs://, --output az:// on Azurite, the credential (a connection string holding
    the account key) only in the submitting environment, which sbatch hands the job's nodes:
    the driver holds the output's lease while the TaskManagers' Python workers read and commit
    through adlfs, the shards are the DirectRunner's, and the key is in no file of the job (the
    sbatch script, every log, the Flink configuration, the uber jar with the pipeline's
    options), in the Flink job's configuration, nor in what the launcher prints."""
    container = "slurm" + uuid.uuid4().hex[:12]
    conn = azurite.connection_string
    local_azurite.upload(conn, container, str(corpus_dir), "corpus")
    env = dict(launch.env, AZURE_STORAGE_CONNECTION_STRING=conn)
    args = tokenize_args(corpus_dir, hf_tokenizer, "x")
    args[args.index("--input") + 1] = f"abfs://{container}/corpus/*.jsonl"
    args[args.index("--output") + 1] = f"az://{container}/out"
    job_id = _job_id(launch("--", *args, env=env, timeout=120))
    folder = launch.log_dir / job_id
    rest = _wait_for_line(folder / "batch.log", r"rest (\d+)").group(1)
    lock = azurite.service().get_blob_client(container, "out/_lock")
    secrets = (local_azurite.DEV_KEY, conn)
    seen_running, leases, leaks = {}, set(), []
    deadline = time.monotonic() + JOB_TIMEOUT
    state = None
    try:
        while time.monotonic() < deadline:
            state = (slurm.job_info(job_id, launch.env) or {}).get("JobState")
            if state in slurm.TERMINAL_STATES:
                break
            for job in _flink_jobs(rest):
                if job["state"] == "RUNNING" and job["jid"] not in seen_running:
                    with urllib.request.urlopen(f"http://127.0.0.1:{rest}/jobs/{job['jid']}"
                                                "/config", timeout=10) as r:
                        seen_running[job["jid"]] = r.read().decode()
                    # while the job runs: the uber jar (flink-tmp) and every log of the job
                    leaks += files_holding([folder], secrets)
                    leases.add(lock.get_blob_properties().lease.state)
            time.sleep(0.5)
    finally:
        if state not in slurm.TERMINAL_STATES:   # never leave the job running
            subprocess.run(["scancel", job_id], env=launch.env)
            slurm.wait_for(job_id, timeout=120, env=launch.env)
    assert state == "COMPLETED", (folder / "pipeline.log").read_text()[-3000:]
    assert seen_running, "the Flink job was never seen running"
    assert leases == {"leased"}   # the driver held the output's lease while the job ran
    out = tmp_path / "out"
    local_azurite.download(conn, container, "out", str(out))
    assert shards(out) == shards(direct_output)
    assert json.loads((out / "metadata.json").read_text())["totals"] == \
        json.loads((direct_output / "metadata.json").read_text())["totals"]
    assert not (out / "_lock").exists() and not (out / "_temporary").exists()
    assert not [s for s in secrets if s in "".join(seen_running.values())]
    leaks += files_holding([launch.log_dir, out], secrets)
    assert not leaks, leaks
    # No line per Azure request (the SDK logs each at INFO) in the TaskManagers' or any log.
    assert not files_holding([folder], ["Request URL:"])
    assert_no_processes_left(launch.marker)


# Sockets the cluster needs that cannot be bound to loopback, by the role of the process that
# opens them; docs/slurm-flink.md, section "Network exposure", lists each with its reason (keep the two in
# step). Anything else a job process listens on must be bound to 127.0.0.1 / ::1 (in this test
# the node address is 127.0.0.1, so Flink's own ports, bound to the node address, count too).
DOCUMENTED_WILDCARD_ROLES = {
    # Beam's Fn API servers (control, data, state, logging, provisioning, artifacts) inside each
    # TaskManager, one set per SDK environment: Beam's Java ServerFactory binds them with
    # NettyServerBuilder.forPort (every interface); no option chooses the address.
    "flink-taskmanager": "Beam Fn API servers for the SDK workers on the same host",
    # srun's I/O forwarding and step message ports (SLURM's own; SrunPortRange in slurm.conf).
    "srun": "SLURM step I/O and messages",
}


def _role(cmdline: str) -> str:
    """What a job process is, from its command line."""
    if "job-server" in cmdline and "java" in cmdline:
        return "beam-job-server"
    if "TaskManagerRunner" in cmdline:
        return "flink-taskmanager"
    if "StandaloneSessionClusterEntrypoint" in cmdline or "ClusterEntrypoint" in cmdline:
        return "flink-jobmanager"
    if "runners.worker_pool" in cmdline:
        return "beam-worker-pool"
    if "sdk_worker" in cmdline or "SdkHarness" in cmdline:
        return "beam-sdk-worker"
    if "pipelines.tokenize" in cmdline:
        return "pipeline-driver"
    first = cmdline.split(" ", 1)[0]
    return os.path.basename(first) or "?"


def _short(cmdline: str) -> str:
    """The interesting part of a command line: the main class, module or jar, not JVM flags."""
    words = cmdline.split()
    for i, word in enumerate(words):
        if word in ("-jar", "-m") or word.startswith("org.apache.flink.runtime"):
            return " ".join(words[i:i + 2])[:90]
    return cmdline[:90]


def test_job_listens_only_on_loopback(launch, slurm_cluster, corpus_dir, hf_tokenizer,
                                      tmp_path):
    """While a job runs, every TCP socket a process of the job listens on is bound to the
    loopback address, or is one docs/slurm-flink.md ("Network exposure") says the cluster needs."""
    if shutil.which("ss") is None:
        pytest.skip("ss not found (iproute2; scripts/setup.sh --test installs it)")
    out = tmp_path / "out"
    job_id = _job_id(launch("--", *tokenize_args(corpus_dir, hf_tokenizer, out), timeout=120))
    seen: dict[tuple[str, int, int], tuple[str, str]] = {}
    deadline = time.monotonic() + JOB_TIMEOUT
    state = None
    try:
        while time.monotonic() < deadline:
            job = _job_pids(launch.marker, slurm_cluster.conf_path)
            for address, port, pid, name in listening_sockets():
                if pid in job and (address, port, pid) not in seen:
                    cmd = describe(pid)
                    if cmd == "(gone)":   # exited since ss saw it (srun's forks do): ss's name
                        cmd = f"{name} (gone)"
                    seen[(address, port, pid)] = (_role(cmd), cmd)
            state = (slurm.job_info(job_id, launch.env) or {}).get("JobState")
            if state in slurm.TERMINAL_STATES:
                break
            time.sleep(0.5)
    finally:
        if state not in slurm.TERMINAL_STATES:   # never leave the job running
            subprocess.run(["scancel", job_id], env=launch.env)
            slurm.wait_for(job_id, timeout=120, env=launch.env)
            assert_no_processes_left(launch.marker, grace=60)
    assert state == "COMPLETED", f"job {job_id}: {state}"
    table = "\n".join(f"  {'ok ' if is_loopback(a) else 'ALL'} {a}:{p:<6} pid {pid:<7} {role:<18} "
                      f"{_short(cmd)}" for (a, p, pid), (role, cmd) in sorted(
                          seen.items(), key=lambda kv: (kv[1][0], kv[0][1])))
    print(f"\nlistening sockets of the job's processes:\n{table}")
    exposed = {key: v for key, v in seen.items()
               if not is_loopback(key[0]) and v[0] not in DOCUMENTED_WILDCARD_ROLES}
    assert seen, "no listening socket seen: the job's processes were not found"
    assert not exposed, "listening on every interface, not documented:\n" + table


def _job_pids(marker: str, slurm_conf: str) -> set[int]:
    """The job's processes: those carrying the test's marker, and everything the SLURM
    daemons started (slurmstepd and below), but not the daemons themselves."""
    job = {p.pid for p in processes_with(marker)}
    for daemon in processes_with(slurm_conf):
        try:
            if daemon.name() in ("slurmd", "slurmctld"):
                job.update(c.pid for c in daemon.children(recursive=True))
        except psutil.Error:
            continue
    return job
