"""How much of an interrupted run its rerun does again, on every runner the tests start.

Usage::

    python bench/interrupt_resume.py                            # every runner, 25/50/75/90 %
    python bench/interrupt_resume.py --runners direct-w1,direct-w2 --points 50,90
    python bench/interrupt_resume.py --runners slurm-flink --points 50 --files 16

Generates a seeded corpus (``--files`` JSONL files of varied size, one big JSONL file that
``--split-bytes`` cuts into several work items, one Parquet file of several items) and trains a
byte-level BPE on it (no network), makes a clean DirectRunner run (the reference), then for each
runner, kill kind and kill point: starts the tokenize job into a fresh folder, kills it once the
input bytes done reach the point, reruns the same command to completion, and compares.

- runners (``--runners``): ``direct-w1``, ``direct-w2`` (``--runner=DirectRunner --workers N``;
  kill kinds ``kill -9`` of the driver's process group and ``SIGINT`` to it, as Ctrl-C sends),
  ``slurm-flink`` (``python -m runners.slurm submit`` on a 2-node local SLURM cluster,
  tests/clusters/local_slurm.py; killed by ``scancel``, or with ``--kinds time-limit`` by the
  signal SLURM sends ahead of a time limit, ``scancel --batch --signal=USR1``, on which the job
  stops Flink and ends as at its limit), ``spark-livy`` (``python -m runners.spark
  submit`` through a real Livy in front of a standalone Spark, tests/clusters/local_spark.py;
  killed by the batch's DELETE, ``runners.spark cancel``). The cluster runners need root and
  ``scripts/setup.sh --test``; one that cannot start is reported and left out.
- input bytes done (polled every 50 ms, never timed): the ``input_bytes`` of the shards committed
  (``_commits/*.json``) plus, per shard not committed, the ``num_bytes`` of its finished work items
  (``_parts/**/*.json``). Where the code keeps no item records (the clean run's commit records
  carry no ``run_id``: before issue 24 part 1), the kill point is found instead by the share of
  a shard's tokens already in parts (``_temporary``/``_parts`` ``.bin`` bytes against the
  reference run's shard). "kept after kill" is the first measure alone, once the run is dead.
- rerun fraction: the input bytes the rerun tokenized, over the whole input's: the sum over the
  commit records the rerun wrote (its ``run_id``; records without one: those new or changed since
  the kill) of ``input_bytes - reused_bytes`` (a missing field counts 0).
- target: the unfinished fraction at the kill plus one work item (the largest) per worker.
- identical: every ``.bin``/``.idx`` of the rerun's output equals the reference run's
  (``metadata.json`` aside, it holds times and the run id).

The machine's other load makes the kill points land a little later than asked (the column
"done at kill" says where they landed); nothing here is timed.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from pipelines import demo  # noqa: E402

MB = 10**6  # a megabyte is 10^6 bytes in every figure tokenbeam prints

PYTHON = sys.executable
CACHE = os.path.join(ROOT, ".cache")
PYTHON_ENV = os.path.dirname(os.path.dirname(PYTHON))
RUNNERS = ("direct-w1", "direct-w2", "slurm-flink", "spark-livy")
PARQUET_ITEM_GROUPS = 8   # row groups per Parquet work item (dataio/readers.py plan_items)
POLL = 0.05


# --- the corpus ----------------------------------------------------------------------------------

def make_corpus(folder: str, *, files: int, docs: int, split_bytes: int,
                seed: int = 24) -> tuple[str, str, list[int]]:
    """(corpus folder, tokenizer folder, the size in input bytes of every work item)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    corpus = os.path.join(folder, "corpus")
    os.makedirs(corpus)
    pool = list(demo.documents(seed, 4000, long_every=97, empty_every=53))
    lines = [json.dumps(r, ensure_ascii=False).encode() + b"\n" for r in pool]
    rng = random.Random(seed)
    items = []
    for k in range(files):   # varied sizes: from a quarter to twice ``docs`` documents
        n = max(1, docs * rng.choice((1, 2, 3, 4, 6, 8)) // 4)
        data = b"".join(rng.choice(lines) for _ in range(n))
        with open(os.path.join(corpus, f"web_{k:02d}.jsonl"), "wb") as f:
            f.write(data)
        items += _jsonl_items(len(data), split_bytes)
    big = bytearray()
    while len(big) < 4.5 * split_bytes:
        big += rng.choice(lines)
    with open(os.path.join(corpus, "books_big.jsonl"), "wb") as f:
        f.write(big)
    items += _jsonl_items(len(big), split_bytes)
    texts = [r["text"] for r in rng.sample(pool, len(pool))]
    groups = 2 * PARQUET_ITEM_GROUPS + 4
    path = os.path.join(corpus, "wiki_rows.parquet")
    pq.write_table(pa.table({"text": texts}), path, row_group_size=-(-len(texts) // groups))
    groups = pq.ParquetFile(path).num_row_groups
    size = os.path.getsize(path)
    for start in range(0, groups, PARQUET_ITEM_GROUPS):
        items.append(size * (min(groups, start + PARQUET_ITEM_GROUPS) - start) // groups)
    tokenizer = demo.train_bpe([r["text"] for r in pool[:2000] if r["text"]],
                               os.path.join(folder, "tokenizer"), vocab_size=2000)
    return corpus, tokenizer, items


def _jsonl_items(size: int, split_bytes: int) -> list[int]:
    return [min(split_bytes, size - start) for start in range(0, size, split_bytes)] or [0]


def job_args(corpus: str, tokenizer: str, out: str, *, split_bytes: int) -> list[str]:
    return ["--input", os.path.join(corpus, "*.jsonl"), "--input",
            os.path.join(corpus, "*.parquet"), "--output", out, "--tokenizer-type",
            "HuggingFaceTokenizer", "--tokenizer-model", tokenizer, "--json-keys", "text",
            "--append-eod", "--split-bytes", str(split_bytes), "--log-interval", "0"]


# --- reading an output folder --------------------------------------------------------------------

def _load_json(path: str):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):   # gone, or being replaced while we look
        return None


def commit_records(output: str) -> dict[str, dict]:
    """{shard: its commit record} of ``output/_commits``."""
    folder = os.path.join(output, "_commits")
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return {}
    found = {}
    for name in names:
        if name.endswith(".json"):
            record = _load_json(os.path.join(folder, name))
            if isinstance(record, dict):
                found[record.get("shard", name[:-len(".json")])] = record
    return found


def shard_files(output: str) -> dict[str, bytes]:
    """{name: bytes} of every committed ``.bin``/``.idx`` in ``output``."""
    found = {}
    for name in sorted(os.listdir(output)):
        if name.endswith((".bin", ".idx")):
            with open(os.path.join(output, name), "rb") as f:
                found[name] = f.read()
    return found


class Progress:
    """Input bytes done in an output folder, by the reference run's shards (see the module
    docstring): ``reference`` is the clean run's commit records."""

    def __init__(self, reference: dict[str, dict], *, estimate: bool):
        self.reference, self.estimate = reference, estimate
        self.total = sum(r.get("input_bytes", 0) for r in reference.values())
        self._keys = {}
        for shard, record in reference.items():
            self._keys[shard] = shard
            if record.get("fingerprint"):
                self._keys[record["fingerprint"][:16]] = shard

    def _shard_of(self, relpath: str, record: dict | None = None) -> str | None:
        """The shard a file under ``_parts``/``_temporary`` belongs to: an item record names
        the shards of its parts; a part's path names its shard or the shard's fingerprint."""
        if record:
            named = [p.get("shard") for p in record.get("parts") or () if isinstance(p, dict)]
            named.append(record.get("shard"))
            found = [s for s in named if s in self.reference]
            if found:
                return found[0]
        for part in relpath.split(os.sep):
            if part in self.reference:
                return part
            for key, shard in self._keys.items():
                if len(key) == 16 and key in part:
                    return shard
        return None

    def done(self, output: str, *, estimate: bool | None = None) -> int:
        """Input bytes done; ``estimate``: count the tokens in parts too (default: when the
        runs keep no item records)."""
        estimate = self.estimate if estimate is None else estimate
        committed = commit_records(output)
        done = {shard: r.get("input_bytes", 0) for shard, r in committed.items()}
        items: dict[str, int] = {}
        parts: dict[str, int] = {}
        for control in ("_parts", "_temporary"):
            root = os.path.join(output, control)
            for base, _dirs, names in os.walk(root):
                for name in names:
                    path = os.path.join(base, name)
                    rel = os.path.relpath(path, root)
                    if name.endswith(".json") and control == "_parts":
                        record = _load_json(path)
                        if not isinstance(record, dict) or "num_bytes" not in record:
                            continue
                        shard = self._shard_of(rel, record)
                        if shard is not None:
                            items[shard] = items.get(shard, 0) + int(record["num_bytes"])
                    elif name.endswith(".bin") and estimate:
                        shard = self._shard_of(rel)
                        try:
                            size = os.path.getsize(path)
                        except OSError:
                            continue
                        if shard is not None:
                            parts[shard] = parts.get(shard, 0) + size
        for shard, ref in self.reference.items():
            if shard in done:
                continue
            share = min(1.0, parts.get(shard, 0) / ref["bin_size"]) if ref.get("bin_size") else 0
            done[shard] = max(items.get(shard, 0), int(share * ref.get("input_bytes", 0)))
        return sum(done.values())


def rerun_tokenized(output: str, run_id: str, before: dict[str, dict]) -> int:
    """Input bytes the rerun ``run_id`` tokenized: over the commit records it wrote, their
    ``input_bytes - reused_bytes``. A record without a ``run_id`` (before issue 24 part 1) is
    the rerun's when it is new or changed since ``before`` (the records at the kill)."""
    total = 0
    for shard, record in commit_records(output).items():
        mine = record.get("run_id") == run_id if "run_id" in record else \
            before.get(shard) != record
        if mine:
            total += int(record.get("input_bytes", 0)) - int(record.get("reused_bytes", 0))
    return total


def run_id_of(output: str) -> str:
    meta = _load_json(os.path.join(output, "metadata.json")) or {}
    return meta.get("run_id", "")


# --- runners -------------------------------------------------------------------------------------

class RunFailed(RuntimeError):
    pass


class Direct:
    """``python -m pipelines.tokenize --runner=DirectRunner --workers N`` in its own session."""

    kinds = default_kinds = ("kill -9", "SIGINT")

    def __init__(self, workers: int, scratch: str):
        self.name, self.workers, self.scratch = f"direct-w{workers}", workers, scratch

    def _cmd(self, args):
        return [PYTHON, "-m", "pipelines.tokenize", "--runner=DirectRunner",
                f"--workers={self.workers}", *args]

    def start(self, args):
        log = open(os.path.join(self.scratch, f"{uuid.uuid4().hex[:8]}.log"), "w+b")
        proc = subprocess.Popen(self._cmd(args), stdout=log, stderr=subprocess.STDOUT, cwd=ROOT,
                                start_new_session=True)
        proc.log = log
        return proc

    def ended(self, proc) -> bool:
        return proc.poll() is not None

    def kill(self, proc, kind: str) -> str:
        """Kill; returns what the driver said about it (its last line)."""
        os.killpg(proc.pid, signal.SIGKILL if kind == "kill -9" else signal.SIGINT)
        try:
            proc.wait(120)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            return "did not stop on SIGINT within 120 s; killed"
        try:   # the workers of a --workers run sit in the same process group
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.log.seek(0)
        tail = proc.log.read().decode(errors="replace").strip().splitlines()
        proc.log.close()
        return f"exit {proc.returncode}" + (f": {tail[-1][:100]}" if tail else "")

    def run(self, args) -> None:
        proc = subprocess.run(self._cmd(args), capture_output=True, text=True, cwd=ROOT)
        if proc.returncode != 0:
            raise RunFailed(f"{self.name} failed:\n{proc.stderr[-3000:]}")

    def stop(self):
        pass


class SlurmFlink:
    """``python -m runners.slurm submit`` on a 2-node local SLURM cluster (a TaskManager with
    this host's cores on each)."""

    kinds = ("scancel", "time limit")
    default_kinds = ("scancel",)

    def __init__(self, scratch: str, nodes: int = 2):
        from tests.clusters.local_slurm import LocalSlurm, missing_binaries

        missing = missing_binaries()
        if missing or os.geteuid() != 0:
            raise RunFailed(f"cannot start SLURM: {', '.join(missing) or 'needs root'}")
        self.name, self.scratch, self.nodes = "slurm-flink", scratch, nodes
        self.cluster = LocalSlurm(os.path.join(scratch, "slurm"), nodes=nodes).start(timeout=120)
        self.workers = nodes * self.cluster.cpus   # Flink slots: one per core per node
        self.env = self.cluster.env()

    def _cmd(self, args, *, wait: bool):
        return [PYTHON, "-m", "runners.slurm", "submit", "--config",
                os.path.join(ROOT, "runners/flink_slurm.yaml"), "--cache-dir", CACHE,
                "--python-env", PYTHON_ENV, "--log-dir", os.path.join(self.scratch, "logs"),
                "--nodes", str(self.nodes), "--cpus-per-node", str(self.cluster.cpus),
                "--time", "01:00:00", "--set", "memory=null", "--set", "signal_before_end=60",
                "--jobmanager-memory", "1024m", "--taskmanager-memory", "1280m",
                "--set", "job_server_memory=512m", "--set", "startup_timeout=180",
                *(["--wait"] if wait else []), "--", *args]

    def start(self, args):
        proc = subprocess.run(self._cmd(args, wait=False), capture_output=True, text=True,
                              cwd=ROOT, env=self.env, timeout=300)
        if proc.returncode != 0:
            raise RunFailed(f"sbatch failed:\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
        return proc.stdout.strip().splitlines()[-1]

    def ended(self, job) -> bool:
        from runners import slurm

        return (slurm.job_info(job, self.env) or {}).get("JobState") in slurm.TERMINAL_STATES

    def kill(self, job, kind: str) -> str:
        from runners import slurm

        if kind == "time limit":   # --signal=B:USR1@N: the batch script's warning of its limit
            subprocess.run(["scancel", "--batch", "--signal=USR1", job], capture_output=True,
                           env=self.env, timeout=120)
        else:
            subprocess.run([PYTHON, "-m", "runners.slurm", "cancel", job], capture_output=True,
                           cwd=ROOT, env=self.env, timeout=120)
        info = slurm.wait_for(job, timeout=300, env=self.env, out=open(os.devnull, "w"))
        return f"job {info.get('JobState')}"

    def run(self, args) -> None:
        proc = subprocess.run(self._cmd(args, wait=True), capture_output=True, text=True,
                              cwd=ROOT, env=self.env, timeout=1800)
        if proc.returncode != 0:
            raise RunFailed(f"SLURM job failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-2000:]}")

    def stop(self):
        self.cluster.stop()


class SparkLivy:
    """``python -m runners.spark submit`` through Livy to a standalone Spark (one executor with
    this host's cores), all in a private network namespace."""

    kinds = default_kinds = ("Livy DELETE",)

    def __init__(self, scratch: str):
        from tests.clusters import local_spark

        missing = local_spark.missing(CACHE)
        if missing or os.geteuid() != 0 or shutil.which("ip") is None:
            raise RunFailed("cannot start Spark: " + (", ".join(missing) or "needs root and ip"))
        self.name, self.scratch = "spark-livy", scratch
        self.workers = os.cpu_count() or 2
        self.cluster = local_spark.LocalSpark(
            os.path.join(scratch, "spark"), cache_dir=CACHE,
            netns=f"tbresume{uuid.uuid4().hex[:6]}", worker_cores=self.workers,
            worker_memory="4g", livy_whitelist=(scratch,))
        self.cluster.start(timeout=300)
        self.env = {**self.cluster.env(), "HDINSIGHT_USERNAME": "bench",
                    "HDINSIGHT_PASSWORD": uuid.uuid4().hex}

    def _spark(self, command: str, *argv, timeout=1800):
        return self.cluster.launcher(PYTHON, command, *argv, cwd=ROOT, env=self.env,
                                     timeout=timeout)

    def _submit(self, args, *, wait: bool):
        sets = {"staging_dir": os.path.join(self.scratch, "staging"), "python_env": PYTHON_ENV,
                "num_executors": 1, "executor_cores": self.workers, "executor_memory": "2g",
                "driver_memory": "1g",
                # this checkout's code on the executors, not what the venv's editable install
                # points at (another checkout, when the venv is shared)
                "spark_conf": json.dumps({"spark.executorEnv.PYTHONPATH": ROOT})}
        argv = [*(["--wait"] if wait else []), "--work-dir", os.path.join(self.scratch, "work")]
        for key, value in sets.items():
            argv += ["--set", f"{key}={value}"]
        proc = self._spark("submit", *argv, "--", *args)
        if proc.returncode != 0:
            raise RunFailed(f"Livy batch failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
        return proc.stdout

    def start(self, args):
        import re

        return re.search(r"submitted batch (\S+) to", self._submit(args, wait=False)).group(1)

    def ended(self, batch) -> bool:
        out = self._spark("status", batch, timeout=120).stdout
        return any(f": {s}" in out for s in ("success", "dead", "killed", "error"))

    def kill(self, batch, kind: str) -> str:
        return self._spark("cancel", batch, timeout=300).stdout.strip()[:100]

    def run(self, args) -> None:
        self._submit(args, wait=True)

    def stop(self):
        self.cluster.stop()


def _kind(text: str) -> str:
    """A kill kind as the table names it, from ``--kinds`` (``kill-9``, ``SIGINT``,
    ``scancel``, ``time-limit``, ``livy-delete``; any case, spaces or dashes)."""
    key = text.strip().lower().replace(" ", "").replace("-", "")
    names = {"kill9": "kill -9", "sigkill": "kill -9", "sigint": "SIGINT", "scancel": "scancel",
             "timelimit": "time limit", "livydelete": "Livy DELETE", "delete": "Livy DELETE"}
    if key not in names:
        raise SystemExit(f"--kinds: unknown kill kind {text!r}; choose from kill-9, SIGINT, "
                         "scancel, time-limit, livy-delete")
    return names[key]


def make_runner(name: str, scratch: str):
    if name.startswith("direct-w"):
        return Direct(int(name[len("direct-w"):]), scratch)
    if name == "slurm-flink":
        return SlurmFlink(scratch)
    if name == "spark-livy":
        return SparkLivy(scratch)
    raise SystemExit(f"--runners: unknown runner {name!r}; choose from {', '.join(RUNNERS)}")


# --- one trial -----------------------------------------------------------------------------------

def trial(runner, kind: str, point: int, *, args_for, progress: Progress, reference: dict,
          item: int, out: str) -> dict:
    """Start, kill at ``point`` % of the input bytes done, rerun, compare."""
    args = args_for(out)
    handle = runner.start(args)
    goal = progress.total * point / 100
    last_status = time.monotonic()
    done = 0
    while True:
        done = progress.done(out) if os.path.isdir(out) else 0
        if done >= goal:
            break
        if os.path.exists(os.path.join(out, "metadata.json")):
            done = -1   # the run ended before the point: nothing was killed
            break
        if time.monotonic() - last_status > (0.5 if isinstance(runner, Direct) else 5):
            if runner.ended(handle):
                done = -1
                break
            last_status = time.monotonic()
        time.sleep(POLL)
    said = runner.kill(handle, kind) if done >= 0 else "ended before the kill point"
    before = commit_records(out)
    kept = progress.done(out, estimate=False) if os.path.isdir(out) else 0
    runner.run(args)
    tokenized = rerun_tokenized(out, run_id_of(out), before)
    identical = shard_files(out) == reference
    shutil.rmtree(out, ignore_errors=True)
    at_kill = max(done, 0) / progress.total
    return {"runner": runner.name, "kind": kind, "point": point, "at_kill": at_kill,
            "kept": kept / progress.total, "fraction": tokenized / progress.total,
            "target": min(1.0, 1 - at_kill + runner.workers * item / progress.total),
            "identical": identical, "said": said, "killed": done >= 0}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runners", default=",".join(RUNNERS),
                        help=f"comma-separated subset of {', '.join(RUNNERS)}")
    parser.add_argument("--points", default="25,50,75,90",
                        help="kill points, percent of the input bytes done")
    parser.add_argument("--kinds", default=None,
                        help="kill kinds: kill-9, SIGINT (DirectRunner), scancel, time-limit (SLURM), "
                        "livy-delete (Spark); a runner none of them applies to runs its "
                        "defaults (DirectRunner both, SLURM scancel)")
    parser.add_argument("--files", type=int, default=32, help="JSONL files of varied size")
    parser.add_argument("--docs", type=int, default=1200, help="documents per file (mean)")
    parser.add_argument("--split-bytes", type=int, default=2 << 20,
                        help="the big file is 4.5 times this, cut into items of this size")
    parser.add_argument("--dir", default=None, help="scratch folder (default: a temp folder)")
    opts = parser.parse_args(argv)
    names = [n.strip() for n in opts.runners.split(",") if n.strip()]
    asked = [_kind(k) for k in opts.kinds.split(",")] if opts.kinds else []
    points = [int(p) for p in opts.points.split(",")]
    if opts.dir:
        os.makedirs(opts.dir, exist_ok=True)
    scratch = tempfile.mkdtemp(prefix="tokenbeam-bench-", dir=opts.dir)
    rows, refused = [], []
    try:
        corpus, tokenizer, items = make_corpus(scratch, files=opts.files, docs=opts.docs,
                                               split_bytes=opts.split_bytes)

        def args_for(out):
            return job_args(corpus, tokenizer, out, split_bytes=opts.split_bytes)

        clean = os.path.join(scratch, "clean")
        t0 = time.monotonic()
        Direct(1, scratch).run(args_for(clean))
        reference_seconds = time.monotonic() - t0
        reference = shard_files(clean)
        # Runs that keep their finished items say so by item records (``_parts``) and by the
        # run id in commit records; before that, progress is read from the parts' tokens.
        keeps = os.path.isdir(os.path.join(clean, "_parts")) or any(
            "run_id" in r for r in commit_records(clean).values())
        progress = Progress(commit_records(clean), estimate=not keeps)
        print(f"corpus: {opts.files + 2} files, {len(items)} work items (largest "
              f"{max(items) / MB:.2f} MB), {progress.total / MB:.1f} MB; clean run "
              f"(DirectRunner --workers 1, the reference): {reference_seconds:.1f} s, "
              f"{len(reference) // 2} shards; {os.cpu_count()} CPUs", flush=True)
        for name in names:
            try:
                runner = make_runner(name, scratch)
            except (RunFailed, RuntimeError) as exc:
                refused.append(f"{name}: {exc}")
                print(f"  {name}: left out ({exc})", flush=True)
                continue
            try:
                # each runner: the asked kinds it knows, or its default ones
                kinds = tuple(k for k in asked if k in runner.kinds) or runner.default_kinds
                for kind in kinds:
                    for point in points:
                        out = os.path.join(scratch, f"out-{name}-{point}-{uuid.uuid4().hex[:6]}")
                        row = trial(runner, kind, point, args_for=args_for, progress=progress,
                                    reference=reference, item=max(items), out=out)
                        rows.append(row)
                        print(f"  {name} {kind} at {point}%: done {row['at_kill']:.0%} at the "
                              f"kill ({row['said']}), rerun {row['fraction']:.2f} of a full "
                              f"run, identical: {row['identical']}", flush=True)
            finally:
                runner.stop()
        print()
        print("| runner | kill | kill point | done at kill | kept after kill | rerun fraction | "
              "target | met | byte-identical |")
        print("|---|---|---:|---:|---:|---:|---:|---|---|")
        for r in rows:
            met = "yes" if r["fraction"] <= r["target"] + 1e-9 else "no"
            at = f"{r['at_kill']:.0%}" if r["killed"] else "(ended first)"
            print(f"| {r['runner']} | {r['kind']} | {r['point']}% | {at} | {r['kept']:.0%} | "
                  f"{r['fraction']:.2f} | {r['target']:.2f} | {met} | "
                  f"{'yes' if r['identical'] else 'NO'} |")
        print("\nreference: a clean DirectRunner --workers 1 run of the same corpus (rerun "
              "fraction 1.00 = the whole input tokenized again)")
        for line in refused:
            print(f"left out: {line}")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return 0 if rows and all(r["identical"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
