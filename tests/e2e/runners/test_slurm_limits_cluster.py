"""Issue 23, item 18: `runners.slurm submit --wait` on a request the partition can never satisfy
does not wait for ever. On the real local SLURM cluster (2 nodes): a request beyond what the
partition's nodes have or its limits allow is refused before anything is submitted, with one
line naming the flag and the limit; a job that gets past that check (extra_sbatch options, which
the check leaves to SLURM) but that SLURM keeps pending for a reason that never passes is
cancelled and the wait fails with SLURM's reason."""

import os
import subprocess
import uuid

import pytest
from runner_support import PYTHON, ROOT

from runners import slurm_limits

CAUGHT = [  # (launcher arguments, what the one line must name)
    (["--nodes", "1", "--cpus-per-node", "64"], ["--cpus-per-node 64", "has {cpus} CPUs"]),
    (["--nodes", "3", "--cpus-per-node", "1"], ["--nodes 3", "has 2 nodes"]),
    (["--nodes", "1", "--cpus-per-node", "1", "--memory", "999G"],
     ["--memory 999G", "(RealMemory)"]),
    (["--nodes", "1", "--cpus-per-node", "1", "--partition", "nosuch"],
     ["--partition nosuch", "debug"]),
]


def _submit(slurm_cluster, tmp_path, *extra, memory=True):
    """`python -m runners.slurm submit --wait` of a tiny job; (process, job name)."""
    name = "t" + uuid.uuid4().hex[:10]
    cmd = [PYTHON, "-m", "runners.slurm", "submit", "--config",
           os.path.join(ROOT, "runners/flink_slurm.yaml"), "--cache-dir",
           os.path.join(ROOT, ".cache"), "--python-env", os.path.dirname(os.path.dirname(PYTHON)),
           "--log-dir", str(tmp_path / "logs"), "--job-name", name, "--time", "00:20:00",
           "--set", "signal_before_end=60", *(["--set", "memory=null"] if memory else []),
           *extra, "--wait", "--timeout", "120", "--",
           "--input", str(tmp_path / "in.jsonl"), "--output", str(tmp_path / "out")]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT,
                          env=slurm_cluster.env(), timeout=600)   # a hang detector
    return proc, name


def _jobs_named(slurm_cluster, name) -> list[dict]:
    out = subprocess.run(["scontrol", "show", "job", "-o"], capture_output=True, text=True,
                         env=slurm_cluster.env())
    return [info for info in map(slurm_limits.parse_oneliner, out.stdout.splitlines())
            if info.get("JobName", "").strip() == name]


@pytest.fixture
def max_time_30_minutes(slurm_cluster):
    def update(value):
        subprocess.run(["scontrol", "update", "PartitionName=debug", f"MaxTime={value}"],
                       check=True, capture_output=True, env=slurm_cluster.env())
    update("00:30:00")
    yield
    update("INFINITE")


@pytest.mark.slow
@pytest.mark.parametrize("extra,named", CAUGHT, ids=["cpus", "nodes", "memory", "partition"])
def test_impossible_request_is_refused_before_submitting(slurm_cluster, flink_stack, tmp_path,
                                                         extra, named):
    proc, name = _submit(slurm_cluster, tmp_path, *extra, memory="--memory" not in extra)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    for part in named:
        assert part.format(cpus=slurm_cluster.cpus) in lines[0], lines[0]
    assert "submitted" not in proc.stdout
    assert not _jobs_named(slurm_cluster, name)


@pytest.mark.slow
def test_time_beyond_the_partitions_max_time_is_refused(slurm_cluster, flink_stack, tmp_path,
                                                       max_time_30_minutes):
    proc, name = _submit(slurm_cluster, tmp_path, "--nodes", "1", "--cpus-per-node", "1",
                         "--time", "01:00:00")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.strip().splitlines() == [
        "error: --time 01:00:00: partition debug allows at most 00:30:00 (MaxTime); ask for "
        "less or choose another --partition"]
    assert not _jobs_named(slurm_cluster, name)


@pytest.mark.slow
@pytest.mark.parametrize("extra_sbatch,reason", [
    ("--cpus-per-task=64", "PartitionConfig"),
    # SLURM sets PartitionConfig when it takes the job, PartitionTimeLimit on its next pass
    ("--time=01:00:00", "PartitionTimeLimit|PartitionConfig"),
])
def test_waiting_on_a_job_that_can_never_start_cancels_it(slurm_cluster, flink_stack, tmp_path,
                                                          max_time_30_minutes, extra_sbatch,
                                                          reason):
    # extra_sbatch overrides what the pre-check reads, so the check leaves it to SLURM, which
    # takes the job and keeps it pending for ever.
    proc, name = _submit(slurm_cluster, tmp_path, "--nodes", "1", "--cpus-per-node", "1",
                         "--set", f"extra_sbatch=[{extra_sbatch}]")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "submitted job" in proc.stdout
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "can never start" in errors[0], proc.stderr
    assert any(f"reason {r}:" in errors[0] for r in reason.split("|")), errors[0]
    assert "Traceback" not in proc.stderr
    jobs = _jobs_named(slurm_cluster, name)
    assert len(jobs) == 1 and jobs[0]["JobState"].strip() == "CANCELLED", jobs
