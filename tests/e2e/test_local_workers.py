"""``--workers N`` (several local processes, runners/local_runner.py), issue 23 items 2 and 6:

* every socket the job listens on is on loopback (Beam's Fn API servers bind every interface
  unless told otherwise);
* a worker killed alone (the OOM killer's SIGKILL), early, mid-run or late, ends the job at
  once with one line naming the worker, its signal and its last work item, exit status 1; the
  other workers are stopped, nothing half-written is committed, and the rerun of the same
  command equals a clean run byte for byte.

The kills are chosen by a seeded RNG (a checkpoint of runtime.faults where a worker kills itself,
or a point in the job's progress where the test kills one): a failure names its seed; replay it with
TOKENBEAM_FAULT_SEED=<seed>. The subprocess timeouts are hang detectors, not timings.
"""

import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import time

import psutil
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "bench"))

import fault_injection as fi  # noqa: E402

from runtime import faults  # noqa: E402

pytestmark = pytest.mark.slow  # whole-job runs: see tests/conftest.py

SEED = int(os.environ.get("TOKENBEAM_FAULT_SEED") or random.SystemRandom().randrange(1 << 31))
JOB_TIMEOUT = 180  # a hang detector: a clean run of this corpus takes seconds
CHECKPOINT_TRIALS = 6  # a worker kills itself at a checkpoint (reading, writing, committing)
RANDOM_TRIALS = 4  # the test kills a worker at a random point of the job's progress
PROGRESS = "progress"


def _session(sid: int) -> list[psutil.Process]:
    """The live processes of session ``sid`` (the job: its driver started a new session)."""
    found = []
    for proc in psutil.process_iter(["status"]):
        try:
            if os.getsid(proc.pid) == sid and proc.info["status"] != psutil.STATUS_ZOMBIE:
                found.append(proc)
        except (ProcessLookupError, psutil.NoSuchProcess):
            continue
    return found


def _workers(driver: int) -> list[psutil.Process]:
    try:
        kids = psutil.Process(driver).children()
    except psutil.NoSuchProcess:
        return []
    found = []
    for kid in kids:
        try:
            if "runners.worker_main" in kid.cmdline() and kid.status() != psutil.STATUS_ZOMBIE:
                found.append(kid)
        except psutil.Error:
            continue
    return found


def _loopback(ip: str) -> bool:
    import ipaddress

    addr = ipaddress.ip_address(ip.split("%")[0])
    addr = getattr(addr, "ipv4_mapped", None) or addr  # gRPC listens on ::ffff:127.0.0.1
    return addr.is_loopback


def _start(cmd, env=None) -> tuple[subprocess.Popen, object]:
    err = tempfile.TemporaryFile()
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=err,
                            stdin=subprocess.DEVNULL, env=env or fi._env(),
                            start_new_session=True)
    return proc, err


def _finish(proc, err) -> str:
    try:
        proc.wait(JOB_TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        pytest.fail(f"the job hung (no end within {JOB_TIMEOUT} s); seed {SEED}")
    err.seek(0)
    text = err.read().decode(errors="replace")
    err.close()
    return text


# --- item 2: loopback only -------------------------------------------------------------------

def test_workers_job_listens_on_loopback_only(corpus_dir, hf_tokenizer, tmp_path):
    """Poll the listening TCP sockets of every process of a --workers 2 job while it runs."""
    cmd = fi.job_command(str(corpus_dir), str(tmp_path / "out"), str(hf_tokenizer), workers=2)
    proc, err = _start(cmd)
    seen: dict[tuple[str, int], str] = {}
    try:
        while proc.poll() is None:
            for member in _session(proc.pid):
                try:
                    conns = member.net_connections(kind="inet")
                    cmdline = " ".join(member.cmdline())[:80]
                except psutil.Error:
                    continue
                for conn in conns:
                    if conn.status == psutil.CONN_LISTEN:
                        seen.setdefault((conn.laddr.ip, conn.laddr.port), cmdline)
            time.sleep(0.05)
    finally:
        stderr = _finish(proc, err)
    assert proc.returncode == 0, stderr
    table = "\n".join(f"  {ip}:{port}  {cmd}" for (ip, port), cmd in sorted(seen.items()))
    assert seen, "no listening socket seen: the job's gRPC servers were not found"
    exposed = [key for key in seen if not _loopback(key[0])]
    assert not exposed, "listening on every interface:\n" + table


# --- item 6: a worker dies -------------------------------------------------------------------

@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    """A small corpus (4 files), its tokenizer, and a clean --workers 2 run (traced)."""
    return fi.prepare(str(tmp_path_factory.mktemp("worker-death")), workers=2)


@pytest.fixture(scope="module")
def picks(setup):
    """(point, arrival) for checkpoint kills, (PROGRESS, checkpoints reached) for the others."""
    rng = random.Random(SEED)
    points = list(faults.POINTS)
    chosen = []
    for i in range(CHECKPOINT_TRIALS):
        point = points[i % len(points)] if i < len(points) else rng.choice(points)
        chosen.append((point, rng.randint(1, setup.arrivals[point])))
    # early, mid and late, at random: after the k-th checkpoint any worker reaches (k = 0: as
    # soon as both run), the test kills one of the two, wherever it is by then
    reached = sum(setup.arrivals.values())
    for _ in range(RANDOM_TRIALS):
        chosen.append((PROGRESS, rng.randint(0, reached)))
    return chosen


DEATH = re.compile(r"^error: worker [12] of 2 \(pid (\d+)\) was killed by SIGKILL \(out of "
                   r"memory\?\); (its last work item: (reading|committing) .+|it had taken no "
                   r"work yet); the other workers were stopped; rerun the same command to "
                   r"resume$")


def _user_lines(stderr: str) -> list[str]:
    assert "Traceback" not in stderr, stderr
    return [line for line in stderr.splitlines() if line and "apitools not found" not in line
            and not line.startswith(("tokenizer backend:", "workers: "))]


def _run_and_kill(setup, output: str, point: str, n) -> tuple[int, str, int, int | None]:
    """The job, with one worker killed at ``point``: (status, stderr, driver pid, the pid the
    test killed or None)."""
    cmd = fi.job_command(setup.corpus, output, setup.tokenizer, workers=2)
    if point != PROGRESS:
        env = fi._env(**{faults.FAULT_ENV: f"{point}:{n}", faults.SCOPE_ENV: "process",
                         faults.COUNTER_ENV: output + ".hits"})
        proc, err = _start(cmd, env)
        stderr = _finish(proc, err)
        return proc.returncode, stderr, proc.pid, None
    rng = random.Random(f"{SEED}-{n}")
    trace = output + ".trace"
    proc, err = _start(cmd, fi._env(**{faults.TRACE_ENV: trace}))
    victim = None
    while proc.poll() is None:
        running = _workers(proc.pid)
        if len(running) == 2 and _lines(trace) >= n:
            victim = rng.choice(running)
            victim.send_signal(signal.SIGKILL)
            break
        time.sleep(0.02)
    stderr = _finish(proc, err)
    return proc.returncode, stderr, proc.pid, victim and victim.pid


def _lines(path: str) -> int:
    try:
        with open(path, "rb") as f:
            return f.read().count(b"\n")
    except FileNotFoundError:
        return 0


def _left_running(sid: int, grace: float = 30.0) -> list[int]:
    """Processes of the job still running ``grace`` seconds after its driver ended."""
    deadline = time.monotonic() + grace
    while True:
        left = [p.pid for p in _session(sid)]
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.05)


@pytest.mark.parametrize("index", range(CHECKPOINT_TRIALS + RANDOM_TRIALS))
def test_killed_worker_ends_the_job_with_one_line(setup, picks, index, tmp_path):
    point, n = picks[index]
    where = f"seed {SEED} (replay: TOKENBEAM_FAULT_SEED={SEED}), kill at {point} {n}"
    output = str(tmp_path / "out")
    status, stderr, driver, victim = _run_and_kill(setup, output, point, n)
    # every process of the job has ended: the other worker was stopped with it
    assert not _left_running(driver), f"{where}: processes of the job left running"
    if status == 0:
        # a random kill that came after the workers had ended, or after the last work item was
        # done (the workers were being shut down): then the job's output is complete
        assert point == PROGRESS, f"{where}: {stderr}"
        assert fi.shard_files(output) == setup.reference, \
            f"{where}: exit 0 after a worker was killed, but the output is not the clean run's"
    else:
        assert status == 1, f"{where}: status {status}: {stderr}"
        lines = _user_lines(stderr)
        assert len(lines) == 1, f"{where}: {lines}"
        found = DEATH.match(lines[0])
        assert found, f"{where}: {lines[0]}"
        if victim is not None:
            assert int(found.group(1)) == victim, f"{where}: {lines[0]}"
        if point == "sink.part_written":
            assert found.group(3) == "reading", f"{where}: {lines[0]}"
        elif point in ("sink.before_commit_record", "sink.before_cleanup", "sink.stem_committed"):
            assert found.group(3) == "committing", f"{where}: {lines[0]}"
    print(f"\n{where}: {'finished first' if status == 0 else _user_lines(stderr)[0]}")
    # nothing half-done looks committed: every final-named shard is the clean run's
    problems, _ = fi.inspect_killed(output)
    assert not problems, f"{where}: {problems}"
    left = fi.shard_files(output)
    for name in left:
        other = name[:-4] + (".idx" if name.endswith(".bin") else ".bin")
        if other in left:
            assert left[name] == setup.reference.get(name), f"{where}: {name} differs"
    # the rerun of the same command equals a clean run, byte for byte
    status, err = fi.run(fi.job_command(setup.corpus, output, setup.tokenizer, workers=2),
                         env=fi._env(), timeout=JOB_TIMEOUT)
    assert status == 0, f"{where}: the rerun failed ({status}): {err}"
    assert fi.shard_files(output) == setup.reference, f"{where}: the rerun differs"
    assert not fi.leftovers(output), f"{where}: {fi.leftovers(output)}"



def test_a_worker_that_exits_0_mid_job_ends_it_with_one_line(setup, tmp_path):
    """A worker that ends with status 0 before the runner stops its workers (its code called
    sys.exit, say) is a death too: Beam would wait for its bundles for ever. One line, exit 1,
    nothing half-done committed, and the rerun equals a clean run."""
    output = str(tmp_path / "out")
    cmd = fi.job_command(setup.corpus, output, setup.tokenizer, workers=2)
    env = fi._env(**{faults.FAULT_ENV: "sink.part_written:2", faults.SCOPE_ENV: "process",
                     faults.SIGNAL_ENV: "EXIT", faults.COUNTER_ENV: output + ".hits"})
    proc, err = _start(cmd, env)
    stderr = _finish(proc, err)
    assert proc.returncode == 1, stderr
    lines = _user_lines(stderr)
    assert len(lines) == 1, lines
    assert re.match(r"^error: worker [12] of 2 \(pid \d+\) exited with status 0; its last work "
                    r"item: reading .+; the other workers were stopped; rerun the same command "
                    r"to resume$", lines[0]), lines[0]
    assert not fi.inspect_killed(output)[0]
    status, rerun_err = fi.run(fi.job_command(setup.corpus, output, setup.tokenizer, workers=2),
                               env=fi._env(), timeout=JOB_TIMEOUT)
    assert status == 0, rerun_err
    assert fi.shard_files(output) == setup.reference
