"""Kill the tokenize job (SIGKILL, whole process group) at chosen moments; check what it leaves.

Usage::

    python bench/fault_injection.py                       # 40 trials, random seed (printed)
    python bench/fault_injection.py --trials 200 --seed 7 --workers 2

Each trial runs ``python -m pipelines.tokenize`` on a small generated corpus (4 JSONL files,
small batches so every shard has several parts) in a fresh output folder, and kills it with
``runtime.faults``: ``TOKENBEAM_FAULT=POINT:N`` makes the N-th arrival at checkpoint POINT
SIGKILL the job's process group (driver and workers together, like a power loss or a SLURM
kill). The points (``runtime.faults.POINTS``) are where a crash is most likely to leave
something half done: while a part or a shard is written, between the ``.bin`` and ``.idx``
renames, between the renames and the commit record, and between the commit record and the
cleanup. N is drawn uniformly from the arrivals a clean run makes (counted once with
``TOKENBEAM_FAULT_TRACE``); a few trials instead kill at a random wall-clock moment.

After every kill it checks that (1) every final-named dataset (a ``.bin/.idx`` pair named
``..._dc=N_sc=N_tc=N``) in the folder passes ``dataio.indexed.validate``, and every commit
record names files that validate; then (2) that rerunning the same command exits 0 and leaves
exactly the clean run's ``.bin/.idx`` files, byte for byte, and no temporaries.

It prints a table: kill point x outcome (what the kill left, what the rerun did). The exit
status is 1 when any check failed.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from runtime import faults  # noqa: E402
from dataio import indexed, naming, parts
from dataio.sink import COMMITS_DIR, TEMPORARY_DIR  # noqa: E402

WALL_CLOCK = "wall-clock"
JOB_TIMEOUT = 300


# ---------------------------------------------------------------------------------------------
# the job


def make_corpus(folder: str, *, files: int = 4, documents: int = 160, seed: int = 11) -> str:
    """``files`` JSONL files of generated text (empty and long documents included)."""
    from pipelines import demo

    os.makedirs(folder, exist_ok=True)
    for k in range(files):
        records = demo.documents(seed + k, documents, long_every=41, empty_every=29)
        demo.write_jsonl(os.path.join(folder, f"part{k}.jsonl"), records)
    return folder


def make_tokenizer(corpus: str, folder: str) -> str:
    from pipelines import demo

    texts = []
    for name in sorted(os.listdir(corpus)):
        with open(os.path.join(corpus, name), encoding="utf-8") as f:
            texts += [json.loads(line)["text"] for line in f]
    return demo.train_bpe([t for t in texts if t], folder, vocab_size=800)


def job_command(corpus: str, output: str, tokenizer: str, *, workers: int = 1) -> list[str]:
    # Small batches: every shard gets several parts, so there are parts to be killed between.
    cmd = [sys.executable, "-m", "pipelines.tokenize", "--input", corpus, "--output", output,
           "--tokenizer-type", "HuggingFaceTokenizer", "--tokenizer-model", tokenizer,
           "--append-eod", "--log-interval", "0", "--batch-documents", "48"]
    if workers > 1:
        cmd += ["--workers", str(workers)]
    return cmd


def _env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOKENBEAM_FAULT")}
    env.update(extra)
    return env


def run(cmd: list[str], *, env: dict, kill_after: float | None = None,
        timeout: float = JOB_TIMEOUT) -> tuple[int, str]:
    """Run the job in its own session (its own process group, which a fault kills);
    ``kill_after``: SIGKILL that group after so many seconds. Returns (status, stderr tail)."""
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, env=env, cwd=ROOT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            proc.wait(kill_after if kill_after is not None else timeout)
        except subprocess.TimeoutExpired:
            _killpg(proc.pid)
            proc.wait()
            if kill_after is None:
                raise
        else:
            if proc.returncode == -signal.SIGKILL and _group_alive(proc.pid):
                _killpg(proc.pid)
                raise RuntimeError("the fault killed the driver but processes of its group "
                                   "lived on (workers in another process group?)")
        err.seek(0)
        return proc.returncode, err.read().decode(errors="replace")[-3000:]


def _group_alive(pgid: int, grace: float = 2.0) -> bool:
    """Whether a process of group ``pgid`` still runs after ``grace`` seconds (zombies, which
    the killed driver can no longer reap, do not count)."""
    import psutil

    deadline = time.monotonic() + grace
    while True:
        alive = []
        for proc in psutil.process_iter(["status"]):
            try:
                if os.getpgid(proc.pid) == pgid and proc.info["status"] != psutil.STATUS_ZOMBIE:
                    alive.append(proc.pid)
            except (ProcessLookupError, psutil.NoSuchProcess):
                continue
        if not alive or time.monotonic() > deadline:
            return bool(alive)
        time.sleep(0.05)


def _killpg(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass


# ---------------------------------------------------------------------------------------------
# checks


def shard_files(folder: str) -> dict:
    """{name: bytes} of every final-named ``.bin``/``.idx`` in ``folder``."""
    out = {}
    for name in sorted(os.listdir(folder)):
        if name.endswith((".bin", ".idx")) and not indexed.is_temporary_name(name):
            with open(os.path.join(folder, name), "rb") as f:
                out[name] = f.read()
    return out


def final_named(folder: str) -> set:
    """Prefixes of the files in ``folder`` that carry final shard names (counts in the name)."""
    if not os.path.isdir(folder):
        return set()
    return {indexed.prefix_of(n) for n in os.listdir(folder)
            if n.endswith((".bin", ".idx")) and not indexed.is_temporary_name(n)
            and naming.parse_counts(indexed.prefix_of(n)) is not None}


def inspect_killed(folder: str) -> tuple[list[str], list[str]]:
    """What a kill left: (problems, observations). A problem is a final-named dataset that does
    not validate, or a commit record naming files that do not. A lone final-named ``.bin`` (the
    kill fell between the renames) is no dataset: the ``.idx`` is what makes one."""
    problems, seen = [], []
    for prefix in sorted(final_named(folder)):
        path = os.path.join(folder, prefix)
        if not os.path.exists(path + ".idx"):
            seen.append("lone .bin")
            continue
        result = indexed.validate(path)
        if not result.ok:
            problems.append(f"{prefix}: {result.reason}")
    commits = os.path.join(folder, COMMITS_DIR)
    # a kill inside a record's atomic write leaves its hidden temporary (.NAME.json.inprogress-*),
    # which no reader takes for a record
    records = sorted(n for n in os.listdir(commits) if n.endswith(".json")
                     and not n.startswith(".")) if os.path.isdir(commits) else []
    for name in records:
        with open(os.path.join(commits, name), encoding="utf-8") as f:
            record = json.load(f)
        result = indexed.validate(os.path.join(folder, record["name"]))
        if not result.ok:
            problems.append(f"commit record {name}: {result.reason}")
    seen.append(f"{len(records)} committed")
    if os.path.isdir(os.path.join(folder, TEMPORARY_DIR)):
        seen.append("parts")
    return problems, seen


def leftovers(folder: str) -> list[str]:
    """Temporaries a finished run must not leave."""
    left = [n for n in os.listdir(folder) if indexed.is_temporary_name(n)]
    for control in (TEMPORARY_DIR, parts.PARTS_DIR):  # a finished run leaves neither
        if os.path.exists(os.path.join(folder, control)):
            left.append(control)
    return left


# ---------------------------------------------------------------------------------------------
# trials


@dataclasses.dataclass
class Setup:
    corpus: str
    tokenizer: str
    clean: str              # the clean run's output folder
    reference: dict         # its .bin/.idx files
    arrivals: dict          # checkpoint -> arrivals in a clean run
    clean_seconds: float
    workers: int = 1


def prepare(workdir: str, *, workers: int = 1, corpus: str | None = None,
            tokenizer: str | None = None) -> Setup:
    """Corpus, tokenizer and a clean run (traced: how often each checkpoint is reached)."""
    corpus = corpus or make_corpus(os.path.join(workdir, "corpus"))
    tokenizer = tokenizer or make_tokenizer(corpus, os.path.join(workdir, "tokenizer"))
    clean = os.path.join(workdir, "clean")
    trace = os.path.join(workdir, "trace")
    started = time.monotonic()
    status, err = run(job_command(corpus, clean, tokenizer, workers=workers),
                      env=_env(**{faults.TRACE_ENV: trace}))
    seconds = time.monotonic() - started
    if status != 0:
        raise RuntimeError(f"the clean run failed ({status}):\n{err}")
    with open(trace, encoding="utf-8") as f:
        arrivals = collections.Counter(line.strip() for line in f if line.strip())
    missing = [p for p in faults.POINTS if not arrivals[p]]
    if missing:
        raise RuntimeError(f"a clean run never reached {missing}: the checkpoints moved?")
    return Setup(corpus, tokenizer, clean, shard_files(clean), dict(arrivals), seconds, workers)


@dataclasses.dataclass
class Outcome:
    point: str
    n: int | float          # arrival number, or seconds for a wall-clock kill
    killed: bool
    left: str               # what the kill left (observations)
    problems: list
    rerun: str              # "identical", or what went wrong

    @property
    def ok(self) -> bool:
        return not self.problems and self.rerun == "identical"

    def describe(self) -> str:
        at = f"{self.n:.2f}s" if isinstance(self.n, float) else f"#{self.n}"
        return (f"{self.point} {at}: {'killed' if self.killed else 'finished'}, "
                f"left {self.left}; rerun {self.rerun}"
                + (f"; PROBLEMS {self.problems}" if self.problems else ""))


def trial(setup: Setup, output: str, point: str, n) -> Outcome:
    """Kill at the ``n``-th arrival at ``point`` (or after ``n`` seconds for WALL_CLOCK),
    inspect, rerun, compare; removes ``output`` afterwards when all went well."""
    cmd = job_command(setup.corpus, output, setup.tokenizer, workers=setup.workers)
    if point == WALL_CLOCK:
        status, err = run(cmd, env=_env(), kill_after=float(n))
    else:
        counter = output.rstrip("/") + ".hits"
        status, err = run(cmd, env=_env(**{faults.FAULT_ENV: f"{point}:{n}",
                                           faults.COUNTER_ENV: counter}))
    killed = status == -signal.SIGKILL
    if not killed and status != 0:
        return Outcome(point, n, False, "", [f"the job failed with status {status}: {err}"], "-")
    problems, seen = inspect_killed(output)
    status, err = run(job_command(setup.corpus, output, setup.tokenizer,
                                  workers=setup.workers), env=_env())
    if status != 0:
        rerun = f"failed with status {status}: {err[-600:]}"
    else:
        got = shard_files(output)
        if got != setup.reference:
            differ = sorted(set(got) ^ set(setup.reference)) or sorted(
                k for k in got if got[k] != setup.reference[k])
            rerun = f"differs from the clean run: {differ[:4]}"
        elif leftovers(output):
            rerun = f"left temporaries: {leftovers(output)}"
        else:
            rerun = "identical"
    outcome = Outcome(point, n, killed, ", ".join(seen), problems, rerun)
    if outcome.ok:
        shutil.rmtree(output, ignore_errors=True)
        if point != WALL_CLOCK:
            os.remove(counter) if os.path.exists(counter) else None
    return outcome


def choose(setup: Setup, rng: random.Random, trials: int, *, wall_clock: int = 2) -> list:
    """``trials`` (point, n) pairs: every checkpoint at least once (round robin), N uniform over
    its arrivals in a clean run; ``wall_clock`` of them at a uniform moment of a clean run."""
    points = list(faults.POINTS)
    picks = []
    for i in range(trials - wall_clock):
        point = points[i % len(points)] if i < len(points) else rng.choice(points)
        picks.append((point, rng.randint(1, setup.arrivals[point])))
    for _ in range(min(wall_clock, trials)):
        # The first ~2 s are start-up (imports); kill anywhere after that and up to the end.
        picks.append((WALL_CLOCK, round(rng.uniform(0.3, 0.9) * setup.clean_seconds, 2)))
    return picks


def table(outcomes: list[Outcome]) -> str:
    rows = collections.defaultdict(collections.Counter)
    for o in outcomes:
        key = ("killed" if o.killed else "finished") + (f", left {o.left}" if o.left else "")
        rows[o.point][(key, "ok" if o.ok else "FAIL")] += 1
    lines = [f"{'kill point':<28} {'trials':>6}  outcomes (what the kill left -> rerun check)"]
    for point in [*faults.POINTS, WALL_CLOCK]:
        if point not in rows:
            continue
        counts = rows[point]
        desc = "; ".join(f"{n}x {key} -> {verdict}" for (key, verdict), n in sorted(counts.items()))
        lines.append(f"{point:<28} {sum(counts.values()):>6}  {desc}")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=40)
    parser.add_argument("--wall-clock", type=int, default=None,
                        help="trials killed at a random moment instead (default: a tenth)")
    parser.add_argument("--seed", type=int, default=None, help="default: random (printed)")
    parser.add_argument("--workers", type=int, default=1, help="the job's --workers")
    parser.add_argument("--dir", default=None, help="work folder (default: a temporary one)")
    args = parser.parse_args(argv)
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1 << 31)
    rng = random.Random(seed)
    workdir = args.dir or tempfile.mkdtemp(prefix="tokenbeam-faults-")
    print(f"seed {seed}; work folder {workdir}; workers {args.workers}", flush=True)
    setup = prepare(workdir, workers=args.workers)
    print(f"clean run: {setup.clean_seconds:.1f} s, {len(setup.reference) // 2} shards; "
          "arrivals per checkpoint: "
          + ", ".join(f"{p} {setup.arrivals[p]}" for p in faults.POINTS), flush=True)
    wall = args.wall_clock if args.wall_clock is not None else max(1, args.trials // 10)
    outcomes = []
    for i, (point, n) in enumerate(choose(setup, rng, args.trials, wall_clock=wall)):
        outcome = trial(setup, os.path.join(workdir, f"trial{i:04d}"), point, n)
        outcomes.append(outcome)
        print(f"[{i + 1}/{args.trials}] {'ok  ' if outcome.ok else 'FAIL'} {outcome.describe()}",
              flush=True)
    print()
    print(table(outcomes))
    failed = [o for o in outcomes if not o.ok]
    print(f"\n{len(outcomes) - len(failed)} of {len(outcomes)} trials ok "
          f"({sum(o.killed for o in outcomes)} killed); seed {seed}")
    if not args.dir and not failed:
        shutil.rmtree(workdir, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
