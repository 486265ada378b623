"""A tokenize run killed partway keeps its finished work: the same command rerun ends with output
byte-identical to a clean run's and does not tokenize again what the killed run finished (issue 24
part 1), on every runner the suite starts: DirectRunner ``--workers 1`` killed by SIGKILL to its
process group, ``--workers 2`` by SIGINT (as Ctrl-C), SLURM + Flink by ``scancel``, Spark via
Livy by the batch's DELETE.

"Partway" is by progress, never by clock: the kill comes as soon as the output holds the record
of a finished work item (``_parts/**/<item>.json`` with its ``num_bytes``), and must land before
the run ends. The rerun shows what it kept in its commit records: shards the killed run
committed and the rerun left alone, or ``reused_bytes`` (input bytes whose tokens it took from
the killed run's parts). Before part 1 nothing of a run survives its death (no item record is
ever written), so these tests fail there, saying so.

The corpus: three inputs of one work item each (committed as soon as written) and three of
several items (``--split-bytes``); the reference is a clean DirectRunner run of it. The clusters
are the session's (tests/e2e/runners/conftest.py).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time

import pytest
from runner_support import PYTHON, ROOT, assert_no_processes_left, shards, tokenize_args

from runners import slurm

pytestmark = pytest.mark.slow  # whole-job runs / services: see tests/conftest.py

SPLIT_BYTES = 512 << 10
JOB_TIMEOUT = 480
SECRET = "pw-livy-resume-never-written"


@pytest.fixture(scope="module")
def resume_corpus(corpus_dir, tmp_path_factory):
    root = tmp_path_factory.mktemp("resume-corpus")
    for k, path in enumerate(sorted(corpus_dir.glob("*.jsonl"))):
        data = path.read_bytes()
        assert len(data) < SPLIT_BYTES < 6 * len(data)
        (root / f"one{k}.jsonl").write_bytes(data)       # one work item
        (root / f"many{k}.jsonl").write_bytes(data * 6)  # several work items
    return root


def job_args(corpus, tokenizer, out) -> list[str]:
    return [*tokenize_args(corpus, tokenizer, out), "--split-bytes", str(SPLIT_BYTES),
            "--log-interval", "0"]


@pytest.fixture(scope="module")
def clean_run(resume_corpus, hf_tokenizer, tmp_path_factory):
    """{name: bytes} of the shards of a clean DirectRunner run, and its total input bytes."""
    out = tmp_path_factory.mktemp("resume-clean") / "out"
    proc = subprocess.run([PYTHON, "-m", "pipelines.tokenize", "--runner=DirectRunner",
                           "--workers=1", *job_args(resume_corpus, hf_tokenizer, out)],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    found = shards(out)
    assert len(found) == 12, sorted(found)
    total = sum(r["input_bytes"] for r in commit_records(out).values())
    return found, total


# --- reading the output --------------------------------------------------------------------------

def commit_records(out) -> dict[str, dict]:
    folder = os.path.join(str(out), "_commits")
    if not os.path.isdir(folder):
        return {}
    return {name: json.loads(open(os.path.join(folder, name), encoding="utf-8").read())
            for name in sorted(os.listdir(folder)) if name.endswith(".json")}


def item_records(out) -> list[str]:
    """Paths of the finished-item records under ``out/_parts``."""
    found = []
    for base, _dirs, names in os.walk(os.path.join(str(out), "_parts")):
        for name in names:
            if not name.endswith(".json"):
                continue
            try:
                with open(os.path.join(base, name), encoding="utf-8") as f:
                    record = json.load(f)
            except (OSError, ValueError):
                continue
            if isinstance(record, dict) and "num_bytes" in record:
                found.append(os.path.join(base, name))
    return found


def kill_and_resume(runner, args, out, clean_run) -> None:
    """Start, kill once a finished item is recorded, rerun; then check what the rerun did."""
    reference, total = clean_run
    handle = runner.start(args)
    deadline = time.monotonic() + JOB_TIMEOUT
    try:
        while not item_records(out):
            ended = os.path.exists(os.path.join(str(out), "metadata.json")) or \
                runner.ended(handle)
            assert not ended, ("the run ended without ever recording a finished work item "
                               "(_parts/**/<item>.json with num_bytes): a run killed partway "
                               "would have kept nothing")
            assert time.monotonic() < deadline, "no work item finished in time"
            time.sleep(0.02)
    except BaseException:
        runner.stop(handle)
        raise
    runner.kill(handle)
    assert not os.path.exists(os.path.join(str(out), "metadata.json")), \
        "the run ended before it could be killed: nothing to resume"
    before = commit_records(out)

    runner.rerun(args)
    assert shards(out) == reference
    after = commit_records(out)
    run_id = json.loads(open(os.path.join(str(out), "metadata.json")).read())["run_id"]
    assert all("run_id" in r and "reused_bytes" in r for r in after.values()), \
        "commit records say which run committed them and what it reused (run_id, reused_bytes)"
    kept = sorted(shard for shard, record in before.items() if after.get(shard) == record)
    rerun = [r for r in after.values() if r["run_id"] == run_id]
    reused = sum(r["reused_bytes"] for r in rerun)
    tokenized = sum(r["input_bytes"] - r["reused_bytes"] for r in rerun)
    assert kept or reused > 0, "the rerun redid everything the killed run had finished"
    assert 0 <= tokenized < total
    assert all(r["run_id"] != run_id for shard, r in after.items() if shard in kept)
    print(f"\n{runner.name}: the rerun tokenized {tokenized / total:.0%} of the input "
          f"({len(kept)} shards committed by the killed run, {reused:,} bytes reused)")


# --- the runners ---------------------------------------------------------------------------------

class Direct:
    def __init__(self, workers: int, kill_signal: int, log):
        self.name = f"DirectRunner --workers {workers}"
        self.workers, self.kill_signal, self.log = workers, kill_signal, log

    def _cmd(self, args):
        return [PYTHON, "-m", "pipelines.tokenize", "--runner=DirectRunner",
                f"--workers={self.workers}", *args]

    def start(self, args):
        with open(self.log, "wb") as log:
            return subprocess.Popen(self._cmd(args), stdout=log, stderr=subprocess.STDOUT,
                                    cwd=ROOT, start_new_session=True)

    def ended(self, proc) -> bool:
        return proc.poll() is not None

    def stop(self, proc) -> None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()

    def kill(self, proc) -> None:
        if proc.poll() is None:
            os.killpg(proc.pid, self.kill_signal)
        try:
            status = proc.wait(120)
        finally:
            try:   # the workers of a --workers run, whatever the driver did
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if self.kill_signal == signal.SIGINT:
            said = open(self.log, encoding="utf-8", errors="replace").read()
            assert status == 130, said[-2000:]
            assert re.search(r"interrupted\b[^\n]*: \d+ of \d+ shards committed, [^\n]*rerun the "
                             r"same command to resume", said), said[-2000:]

    def rerun(self, args) -> None:
        proc = subprocess.run(self._cmd(args), capture_output=True, text=True, cwd=ROOT,
                              timeout=300)
        assert proc.returncode == 0, proc.stderr[-3000:]


class SlurmFlink:
    name = "SLURM + Flink"

    def __init__(self, cluster, tmp_path):
        self.marker = f"resume-test-{tmp_path}"
        self.env = cluster.env(dict(os.environ, TOKENBEAM_TEST_MARKER=self.marker))
        self.cpus, self.log_dir = cluster.cpus, tmp_path / "slurm-logs"

    def _cmd(self, args, *, wait: bool):
        return [PYTHON, "-m", "runners.slurm", "submit", "--config",
                os.path.join(ROOT, "runners/flink_slurm.yaml"),
                "--cache-dir", os.path.join(ROOT, ".cache"), "--python-env",
                os.path.dirname(os.path.dirname(PYTHON)), "--log-dir", str(self.log_dir),
                "--nodes", "2", "--cpus-per-node", str(self.cpus), "--time", "00:20:00",
                "--set", "memory=null", "--set", "signal_before_end=60",
                "--jobmanager-memory", "1024m", "--taskmanager-memory", "1280m",
                "--set", "job_server_memory=512m", "--set", "startup_timeout=180",
                *(["--wait"] if wait else []), "--", *args]

    def start(self, args) -> str:
        proc = subprocess.run(self._cmd(args, wait=False), capture_output=True, text=True,
                              cwd=ROOT, env=self.env, timeout=120)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        return proc.stdout.strip().splitlines()[-1]

    def ended(self, job) -> bool:
        return (slurm.job_info(job, self.env) or {}).get("JobState") in slurm.TERMINAL_STATES

    def kill(self, job) -> None:
        cancel = subprocess.run([PYTHON, "-m", "runners.slurm", "cancel", job],
                                capture_output=True, text=True, env=self.env, cwd=ROOT)
        assert cancel.returncode == 0, cancel.stderr
        slurm.wait_for(job, timeout=120, env=self.env)
        assert_no_processes_left(self.marker, grace=60)

    def stop(self, job) -> None:
        subprocess.run(["scancel", job], env=self.env)
        slurm.wait_for(job, timeout=120, env=self.env)

    def rerun(self, args) -> None:
        proc = subprocess.run(self._cmd(args, wait=True), capture_output=True, text=True,
                              cwd=ROOT, env=self.env, timeout=JOB_TIMEOUT + 60)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]


class SparkLivy:
    name = "Spark via Livy"

    def __init__(self, cluster):
        self.cluster = cluster
        self.env = {**cluster.env(), "HDINSIGHT_USERNAME": "admin", "HDINSIGHT_PASSWORD": SECRET}

    def _spark(self, command: str, *argv, timeout=300):
        return self.cluster.launcher(PYTHON, command, *argv, cwd=ROOT, env=self.env,
                                     timeout=timeout)

    def _submit(self, args, *, wait: bool):
        shared = self.cluster.shared_dir
        sets = {"staging_dir": os.path.join(shared, "staging"),
                "python_env": os.path.dirname(os.path.dirname(PYTHON)), "num_executors": 1,
                "executor_cores": 2, "executor_memory": "1g", "driver_memory": "1g",
                # this checkout's code on the executors, not what the venv's editable install
                # points at (another checkout, when the venv is shared)
                "spark_conf": json.dumps({"spark.executorEnv.PYTHONPATH": ROOT})}
        argv = [*(["--wait"] if wait else []), "--work-dir", os.path.join(shared, "work")]
        for key, value in sets.items():
            argv += ["--set", f"{key}={value}"]
        proc = self._spark("submit", *argv, "--", *args, timeout=JOB_TIMEOUT + 300)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
        return proc.stdout

    def start(self, args) -> str:
        return re.search(r"submitted batch (\S+) to", self._submit(args, wait=False)).group(1)

    def ended(self, batch) -> bool:
        out = self._spark("status", batch).stdout
        return any(f": {state}" in out for state in ("success", "dead", "killed", "error"))

    def kill(self, batch) -> None:
        cancelled = self._spark("cancel", batch)
        assert cancelled.returncode == 0, cancelled.stdout + cancelled.stderr

    def stop(self, batch) -> None:
        self._spark("cancel", batch)

    def rerun(self, args) -> None:
        self._submit(args, wait=True)


class _Throttled:
    """A cluster runner whose status is asked every few seconds, not at every poll."""

    def __init__(self, runner, every: float = 3.0):
        self._runner, self._every, self._last = runner, every, 0.0
        self.name = runner.name

    def ended(self, handle) -> bool:
        if time.monotonic() - self._last < self._every:
            return False
        self._last = time.monotonic()
        return self._runner.ended(handle)

    def __getattr__(self, name):
        return getattr(self._runner, name)


@pytest.mark.parametrize("workers, kill_signal", [(1, signal.SIGKILL), (2, signal.SIGINT)],
                         ids=["workers1-kill9", "workers2-sigint"])
def test_direct_runner_killed_partway_resumes(workers, kill_signal, resume_corpus, hf_tokenizer,
                                             clean_run, tmp_path):
    out = tmp_path / "out"
    runner = Direct(workers, kill_signal, tmp_path / "driver.log")
    kill_and_resume(runner, job_args(resume_corpus, hf_tokenizer, out), out, clean_run)


def test_slurm_flink_job_cancelled_partway_resumes(slurm_cluster, flink_stack, resume_corpus,
                                                   hf_tokenizer, clean_run, tmp_path):
    out = tmp_path / "out"
    runner = _Throttled(SlurmFlink(slurm_cluster, tmp_path))
    kill_and_resume(runner, job_args(resume_corpus, hf_tokenizer, out), out, clean_run)


def test_livy_batch_cancelled_partway_resumes(spark_cluster, resume_corpus, hf_tokenizer,
                                              clean_run):
    out = os.path.join(spark_cluster.shared_dir, "out-resume")
    runner = _Throttled(SparkLivy(spark_cluster))
    kill_and_resume(runner, job_args(resume_corpus, hf_tokenizer, out), out, clean_run)
