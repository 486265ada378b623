"""SIGKILL the tokenize job (the whole process group) at randomly chosen moments; after every
kill no final-named dataset fails validation and a rerun equals a clean run byte for byte.

The moments: the fault checkpoints of runtime.faults (while a part or shard is written, between
the .bin and .idx renames, between the renames and the commit record, between the commit
record and the cleanup), each hit at a random arrival, plus random wall-clock kills and one
kill from inside a worker of a --workers 2 job. The choice is seeded: a failure names its seed;
replay it with TOKENBEAM_FAULT_SEED=<seed>. bench/fault_injection.py runs many more trials.
"""

import os
import random
import signal
import subprocess
import sys
import time

import psutil
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "bench"))

import fault_injection as fi  # noqa: E402

from runtime import faults  # noqa: E402

pytestmark = pytest.mark.slow  # whole-job runs / services: see tests/conftest.py

SEED = int(os.environ.get("TOKENBEAM_FAULT_SEED") or random.SystemRandom().randrange(1 << 31))
CHECKPOINT_TRIALS = 9   # every checkpoint at least once, then random ones; with the worker
#                         trial, 10 kills for sure (a wall-clock kill may come after the end)
WALL_CLOCK_TRIALS = 2


@pytest.fixture(scope="module")
def setup(corpus_dir, hf_tokenizer, tmp_path_factory):
    return fi.prepare(str(tmp_path_factory.mktemp("faults")), corpus=str(corpus_dir),
                      tokenizer=str(hf_tokenizer))


@pytest.fixture(scope="module")
def picks(setup):
    return fi.choose(setup, random.Random(SEED), CHECKPOINT_TRIALS + WALL_CLOCK_TRIALS,
                     wall_clock=WALL_CLOCK_TRIALS)


def _check(outcome, *, must_kill: bool):
    where = f"seed {SEED} (replay: TOKENBEAM_FAULT_SEED={SEED}): {outcome.describe()}"
    assert not outcome.problems, where
    assert outcome.rerun == "identical", where
    if must_kill:
        assert outcome.killed, "the job finished before the checkpoint was reached: " + where


@pytest.mark.parametrize("index", range(CHECKPOINT_TRIALS + WALL_CLOCK_TRIALS))
def test_kill_then_rerun_equals_clean_run(setup, picks, index, tmp_path):
    point, n = picks[index]
    outcome = fi.trial(setup, str(tmp_path / "out"), point, n)
    print(f"\nseed {SEED}: {outcome.describe()}")
    # A wall-clock kill may come after a fast run has finished; a checkpoint kill always hits.
    _check(outcome, must_kill=point != fi.WALL_CLOCK)


def test_kill_in_a_worker_takes_the_whole_job(setup, tmp_path):
    """With --workers 2 the checkpoint fires in a worker process: the driver and the other
    worker die with it (fi.run fails if any process of the job outlives the kill)."""
    rng = random.Random(SEED)
    point = rng.choice(["sink.part_written", "indexed.between_renames"])
    workers = fi.Setup(**{**setup.__dict__, "workers": 2})
    outcome = fi.trial(workers, str(tmp_path / "out"), point, rng.randint(1, 3))
    print(f"\nseed {SEED}: {outcome.describe()}")
    _check(outcome, must_kill=True)


def test_unset_hook_does_nothing(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOKENBEAM_FAULT")}
    code = ("from runtime import faults\n"
            "assert not faults._ACTIVE\n"
            "for p in faults.POINTS: faults.checkpoint(p)\n"
            "print('alive')")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT, env=env)
    assert proc.returncode == 0 and proc.stdout.strip() == "alive", proc.stderr


def test_hook_kills_its_process_group_at_the_nth_arrival(tmp_path):
    """The process and a child in its group die at the 2nd arrival, not the 1st."""
    trace = tmp_path / "trace"
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOKENBEAM_FAULT")}
    env.update({faults.FAULT_ENV: "sink.part_written:2", faults.TRACE_ENV: str(trace)})
    code = ("import subprocess, sys, time\n"
            "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
            "print(child.pid, flush=True)\n"
            "from runtime import faults\n"
            "faults.checkpoint('sink.part_written')\n"
            "print('after 1', flush=True)\n"
            "faults.checkpoint('sink.before_cleanup')\n"
            "faults.checkpoint('sink.part_written')\n"
            "print('after 2', flush=True)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT, env=env, start_new_session=True, timeout=60)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    lines = proc.stdout.split()
    assert lines[1:] == ["after", "1"]
    # the sleeping child (same group) went with it: gone, or a zombie nobody reaps yet
    child = int(lines[0])
    assert _ends(child), f"child {child} survived the kill"
    assert trace.read_text().split() == ["sink.part_written", "sink.before_cleanup",
                                         "sink.part_written"]


def _ends(pid: int, timeout: float = 10.0) -> bool:
    """Whether ``pid`` is gone (or a zombie) within ``timeout``: a killed process takes a moment
    to be torn down."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.05)
    return False


@pytest.mark.parametrize("spec", ["sink.part_written", "sink.part_written:0", ":3",
                                  "sink.part_written:x"])
def test_bad_fault_spec_is_refused(spec):
    with pytest.raises(ValueError, match="NAME:N"):
        faults._parse(spec)
