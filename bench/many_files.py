"""What many small inputs cost (issue 24 part 2): N one-line JSONL files against the same bytes in
100 files, and one Parquet file of 20,000 one-row row groups against the same rows in 4 groups.

    python bench/many_files.py [--sizes 1000,10000] [--workers 1,2] [--parquet-groups 20000]
                               [--repeat N] [--workdir DIR] [--code REPO] [--timeout 1800]
                               [--dry-run]

Every figure is the real command, ``python -m pipelines.tokenize`` in a subprocess (interpreter
start and Beam's import included), with a byte-level BPE trained here on the generated text (no
network). Each N is run twice: N files of one line each, and the reference: the same lines in
100 files (so the same bytes, documents and tokens; what differs is only the number of files and
shards). Columns, seconds of wall-clock time unless named:

  plan      process start to the end of planning (the driver's ``workers:`` line): imports,
            discovery, the commit records, fingerprints, clearing the shards' old records
  run       planning done to the summary: Beam's import, read, tokenize, write the parts,
            commit every shard (merge, commit record, older versions removed), metadata.json
  exit      summary to exit (this run's temporaries removed, the lock released)
  total     the whole process;  cpu: user + system seconds of it and its worker processes
  rerun     the same command again: every shard committed, so planning alone (N records)
  dry-run   ``--dry-run`` on a fresh output (the plan printed with per-file estimates)
  RSS MB    peak RSS of the largest process of the run (the driver or a worker)
  disk floor  the last line: what creating the three files of each shard costs on this disk
            alone (a one-line file is one shard), part of ms/file that no code can remove
  ms/file   (total - the reference's total) / N: what a file costs beyond its bytes
            (target: at most 1 ms on local disk up to 100,000 files); cpu ms/file: the same of
            the cpu seconds

The growth exponent is the slope of log(total) against log(N) fitted over the sizes (1: linear;
target at most 1.1); ``overhead exp.`` fits (total - reference) instead, the per-file cost alone.
The machine's load moves wall-clock times (the cpu column is steadier): say so when quoting.

``--code REPO`` runs another checkout's code (e.g. the commit before a change, for a before/after
table) on the same corpora. Corpora and the tokenizer are kept in ``--workdir`` (reused when
given); outputs are kept until the end, then deleted (deleting them between runs would time
the deletions too: see ``main``). On ext4 without a journal, a disk with many files deleted in
the last few minutes makes every file created slower: run it on a disk left alone for a while
(a bench started within 6 minutes of the last one's deletions waits for the rest of them).
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from pipelines import demo  # noqa: E402

WORDS = ("the quick brown fox jumps over a lazy dog while seven wizards quietly hex "
         "sphinx of black quartz judge my vow pack my box with five dozen liquor jugs").split()
REFERENCE_FILES = 100


def line(rng: random.Random) -> str:
    return json.dumps({"text": " ".join(rng.choice(WORDS) for _ in range(14))}) + "\n"


def make_files(folder: str, n: int, *, files: int) -> str:
    """``n`` one-line documents in ``files`` files (n // files lines each), the same lines
    whatever ``files`` is; kept when already there."""
    done = os.path.join(folder, ".complete")
    if os.path.exists(done):
        return folder
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)
    rng = random.Random(n)
    lines = [line(rng) for _ in range(n)]
    per = n // files
    for k in range(files):
        with open(os.path.join(folder, f"doc_{k:06d}.jsonl"), "w", encoding="utf-8") as f:
            f.writelines(lines[k * per:(k + 1) * per] if k < files - 1 else lines[k * per:])
    open(done, "w").close()
    return folder


def make_parquet(folder: str, rows: int, *, groups: int) -> str:
    done = os.path.join(folder, ".complete")
    if os.path.exists(done):
        return folder
    import pyarrow as pa
    import pyarrow.parquet as pq

    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)
    rng = random.Random(rows)
    texts = [json.loads(line(rng))["text"] for _ in range(rows)]
    pq.write_table(pa.table({"text": texts}), os.path.join(folder, "rows.parquet"),
                   row_group_size=max(1, rows // groups))
    open(done, "w").close()
    return folder


def run(code: str, inp: str, out: str, tok: str, *, workers: int, extra=(), timeout: float
        ) -> dict:
    """One ``python -m pipelines.tokenize``: its phases (see the module docstring), cpu and
    peak RSS."""
    cmd = [sys.executable, "-m", "pipelines.tokenize", "--input", inp, "--output", out,
           "--tokenizer-type", "HuggingFaceTokenizer", "--tokenizer-model", tok, "--append-eod",
           "--log-interval", "0", "--workers", str(workers), *extra]
    env = {**os.environ, "PYTHONPATH": code}
    # The job syncs its output's filesystem once per bundle (its commit records' durability):
    # the earlier runs' files, still unwritten, are written first, so that the sync waits for
    # this run's files only.
    os.sync()
    marks: dict[str, float] = {}
    tail: list[str] = []
    start = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=code, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, errors="replace")

    def watch(stream):
        for text in stream:
            now = time.monotonic() - start
            if text.startswith("workers:") or " workers: " in text[:40]:
                marks.setdefault("planned", now)
            elif text.startswith(("summary", "nothing to do:")):
                marks.setdefault("summary", now)
            tail.append(text)
            del tail[:-20]

    readers = [threading.Thread(target=watch, args=(s,), daemon=True)
               for s in (proc.stdout, proc.stderr)]
    for t in readers:
        t.start()
    timer = threading.Timer(timeout, proc.kill)
    timer.start()
    _, status, usage = os.wait4(proc.pid, 0)
    timer.cancel()
    total = time.monotonic() - start
    for t in readers:
        t.join()
    code_ = os.waitstatus_to_exitcode(status)
    if code_ != 0:
        return {"error": f"exit {code_}" + (" (timed out)" if total >= timeout else "") +
                ": " + "".join(tail[-3:]).strip()[-300:]}
    planned = marks.get("planned", marks.get("summary", total))
    summary = marks.get("summary", total)
    return {"plan": planned, "run": summary - planned, "exit": total - summary, "total": total,
            "cpu": usage.ru_utime + usage.ru_stime, "rss": usage.ru_maxrss * 1024 / 10**6}


def median_run(tries: list[dict]) -> dict:
    """The runs of one case as one: each figure's median (peak RSS: the largest); the first
    error, if any run failed."""
    failed = [t for t in tries if "error" in t]
    if failed:
        return failed[0]
    out = {k: statistics.median(t[k] for t in tries) for k in ("plan", "run", "exit", "total",
                                                                "cpu")}
    return {**out, "rss": max(t["rss"] for t in tries)}


def _brief(result: dict) -> str:
    """One run's figures as the progress lines on stderr show them (so a long run that is cut
    off leaves what it measured)."""
    if "error" in result:
        return result["error"]
    return ", ".join(f"{k} {v:.1f}" for k, v in result.items() if isinstance(v, float))


def slope(xs, ys) -> float | None:
    """Least-squares slope of log(y) on log(x); None with fewer than 2 usable points."""
    pts = [(math.log(x), math.log(y)) for x, y in zip(xs, ys) if y and y > 0]
    if len(pts) < 2:
        return None
    mx = sum(x for x, _ in pts) / len(pts)
    my = sum(y for _, y in pts) / len(pts)
    den = sum((x - mx) ** 2 for x, _ in pts)
    return sum((x - mx) * (y - my) for x, y in pts) / den if den else None


def fmt(value, spec=".1f") -> str:
    return "-" if value is None else format(value, spec)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1000,10000",
                        help="numbers of files, comma separated (100000 runs too: minutes)")
    parser.add_argument("--workers", default="1,2", help="--workers values, comma separated")
    parser.add_argument("--parquet-groups", type=int, default=20000,
                        help="one-row row groups of the Parquet file (0: no Parquet row)")
    parser.add_argument("--workdir", default=None, help="corpora kept here (default: a temp dir)")
    parser.add_argument("--code", default=ROOT, help="the checkout whose code runs")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds per run")
    parser.add_argument("--repeat", type=int, default=1,
                        help="runs of each case (figures: their medians; default 1)")
    parser.add_argument("--no-rerun", action="store_true", help="leave out the rerun column")
    parser.add_argument("--dry-run", action="store_true", help="add the --dry-run column")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s]
    workers = [int(w) for w in args.workers.split(",") if w]
    work = args.workdir or tempfile.mkdtemp(prefix="tokenbeam-many-files-")
    os.makedirs(work, exist_ok=True)
    tok = os.path.join(work, "bpe")
    if not os.path.exists(os.path.join(tok, "tokenizer.json")):
        rng = random.Random(0)
        demo.train_bpe([json.loads(line(rng))["text"] for _ in range(2000)], tok, vocab_size=400)
    print(f"code: {args.code}; cores: {os.cpu_count()}; load average: "
          f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}; "
          f"{'one run each' if args.repeat == 1 else f'medians of {args.repeat} runs'}",
          flush=True)

    cases = []  # (label, n, input, reference input)
    for n in sizes:
        cases.append((f"{n} files", n, make_files(os.path.join(work, f"files_{n}"), n, files=n),
                      make_files(os.path.join(work, f"ref_{n}"), n, files=min(n, REFERENCE_FILES))))
    if args.parquet_groups:
        g = args.parquet_groups
        cases.append((f"parquet {g} groups", None,
                      make_parquet(os.path.join(work, f"pq_{g}"), g, groups=g),
                      make_parquet(os.path.join(work, f"pq_{g}_ref"), g, groups=4)))

    header = (f"{'case':<22} {'w':>2} {'plan':>7} {'run':>7} {'exit':>6} {'total':>7} {'cpu':>7} "
              f"{'rerun':>7} {'dry-run':>7} {'RSS MB':>7} | {'ref total':>9} {'ref cpu':>7} "
              f"{'ms/file':>7} {'cpu ms/file':>11}")
    rows = []
    # Outputs are deleted at the end, not between runs: on ext4 without a journal (this kind of
    # VM's disk) a file created within a minute or more of many deletions costs up to 0.3 ms
    # more, the kernel passing over every recently freed inode (find_inode_bit and
    # recently_deleted, seen with perf): the bench's own deletions would be timed in the next
    # run. The disk floor's files stay until then too.
    trash = os.path.join(work, "trash")
    if os.path.exists(trash):  # a bench killed before its end
        shutil.rmtree(trash, ignore_errors=True)
        note_deletion(work)
    settle(work)
    os.makedirs(trash)
    outputs = itertools.count()
    # One untimed run first: the first process after a while reads Python, Beam and the
    # corpus from disk (the first row of a cold machine was 0.4 s slower to plan).
    if cases:
        run(args.code, cases[0][3], os.path.join(trash, "warm-up"), tok, workers=1,
            timeout=args.timeout)
    for w in workers:
        for label, n, inp, ref in cases:
            results = {}
            for kind, folder in (("many", inp), ("ref", ref)):
                tries = []
                for _ in range(args.repeat):
                    out = os.path.join(trash, f"out{next(outputs)}")
                    tries.append(run(args.code, folder, out, tok, workers=w,
                                     timeout=args.timeout))
                    print(f"  ({label}, --workers {w}, {kind}: {_brief(tries[-1])})",
                          file=sys.stderr, flush=True)
                results[kind] = median_run(tries)
                if kind == "many" and "error" not in results[kind] and not args.no_rerun:
                    again = run(args.code, folder, out, tok, workers=w, timeout=args.timeout)
                    results[kind]["rerun"] = again.get("total")
                    print(f"  ({label}, --workers {w}, rerun: {_brief(again)})",
                          file=sys.stderr, flush=True)
                if kind == "many" and args.dry_run:
                    out = os.path.join(trash, f"out{next(outputs)}")
                    dry = run(args.code, folder, out, tok, workers=w, extra=["--dry-run"],
                              timeout=args.timeout)
                    results[kind]["dry"] = dry.get("total")
            many, reference = results["many"], results["ref"]
            rows.append((label, n, w, many, reference))
            if "error" in many or "error" in reference:
                print(f"{label:<22} {w:>2} failed: {many.get('error') or reference.get('error')}",
                      flush=True)
                continue
            units = n or args.parquet_groups
            per_file = (many["total"] - reference["total"]) / units * 1000
            cpu_per_file = (many["cpu"] - reference["cpu"]) / units * 1000
            if not rows[:-1]:
                print(header)
            print(f"{label:<22} {w:>2} {many['plan']:>7.1f} {many['run']:>7.1f} "
                  f"{many['exit']:>6.1f} {many['total']:>7.1f} {many['cpu']:>7.1f} "
                  f"{fmt(many.get('rerun')):>7} {fmt(many.get('dry')):>7} {many['rss']:>7.0f} | "
                  f"{reference['total']:>9.1f} {reference['cpu']:>7.1f} {per_file:>7.2f} "
                  f"{cpu_per_file:>11.2f}",
                  flush=True)
    print()
    for w in workers:
        done = [(n, m, r) for label, n, ww, m, r in rows
                if ww == w and n and "error" not in m and "error" not in r]
        if len(done) < 2:
            continue
        xs = [n for n, _, _ in done]
        print(f"--workers {w}: growth exponent over {', '.join(map(str, xs))} files: "
              f"total {fmt(slope(xs, [m['total'] for _, m, _ in done]), '.2f')}, "
              f"cpu {fmt(slope(xs, [m['cpu'] for _, m, _ in done]), '.2f')}, "
              f"plan {fmt(slope(xs, [m['plan'] for _, m, _ in done]), '.2f')}, "
              f"run {fmt(slope(xs, [m['run'] for _, m, _ in done]), '.2f')}, "
              f"overhead exp. {fmt(slope(xs, [m['total'] - r['total'] for _, m, r in done]), '.2f')}"
              " (target: at most 1.1)")
    # last, so that no run's sync (once per bundle) waits for these files to reach the disk
    floor = disk_floor(os.path.join(trash, "floor"), min(max(sizes or [1000]), 10000))
    print(f"disk floor: creating the 3 files each shard needs (.bin, .idx, commit record; "
          f"create, write, rename) costs {floor:.2f} ms per file on this disk, before any "
          f"reading, tokenizing or Beam (median of 3, at most 10,000 files)")
    shutil.rmtree(trash, ignore_errors=True)
    note_deletion(work)
    if not args.workdir:
        shutil.rmtree(work, ignore_errors=True)
    return 0


# How long file creation stays slow after many deletions (ext4 without a journal: see main).
SETTLE_SECONDS = 360


def note_deletion(work: str) -> None:
    """Remember when this bench last deleted its outputs (a file in ``work``)."""
    with open(os.path.join(work, ".last-deletion"), "w") as f:
        f.write(str(time.time()))


def settle(work: str) -> None:
    """Wait until :data:`SETTLE_SECONDS` have passed since the last deletion :func:`note_deletion`
    remembered, so that a bench run right after another does not time the other's deletions.
    Deletions by anything else on the disk are not known here: run on a disk left alone."""
    try:
        with open(os.path.join(work, ".last-deletion")) as f:
            left = float(f.read()) + SETTLE_SECONDS - time.time()
    except (OSError, ValueError):
        return
    if left > 0:
        print(f"waiting {left:.0f} s: the last bench's outputs were deleted "
              f"{SETTLE_SECONDS - left:.0f} s ago, and file creation is slow for a few minutes "
              "after many deletions",
              file=sys.stderr, flush=True)
        os.sync()
        time.sleep(left)


def disk_floor(folder: str, n: int) -> float:
    """ms per shard to create, write (30 bytes) and rename 3 files, ``n`` shards in one folder
    (as the output's), on the disk holding ``folder``: what no implementation of this output
    format goes below."""
    times = []
    for k in range(3):
        where = os.path.join(folder, str(k))  # (left for the caller to delete: see main)
        os.makedirs(where)
        start = time.perf_counter()
        for i in range(n):
            for suffix in (".bin", ".idx", ".json"):
                tmp = os.path.join(where, f".s{i}{suffix}.tmp")
                fd = os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
                os.write(fd, b"x" * 30)
                os.close(fd)
                os.rename(tmp, os.path.join(where, f"s{i}{suffix}"))
        times.append((time.perf_counter() - start) / n * 1000)
    return sorted(times)[1]


if __name__ == "__main__":
    sys.exit(main())
