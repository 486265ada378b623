"""What ``--verify-inputs`` costs: the tokenize job, whole process, with and without it.

    python bench/verify_inputs.py [--mb 500] [--vocab 32000] [--workdir DIR] [--repeats 3]
        [--workers 1]

The corpus and tokenizer are bench/throughput.py's (generated multilingual JSONL in 8 files, a
byte-level BPE trained on it; pass the same --workdir to reuse them). Rows, medians of --repeats
runs, the two variants interleaved so that drift in the machine's load hits both alike; wall
seconds and CPU seconds (user + system of the job's processes: steadier than wall time on a
machine shared with other work):

  first run   fresh output folder: plan, tokenize, commit every shard
  rerun       the same command again: every shard is committed, so the run is planning only
              (the worst case for the hash, which then reads the whole corpus for nothing new)
  hash only   dataio.file_hashes.content_hashes over the corpus in this process (page cache warm)

The decision rule (issue 12 item 11): verification is the default when it costs under 5% of the
first run end to end.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "bench"))
from throughput import load_texts, make_corpus  # noqa: E402

from dataio import file_hashes  # noqa: E402
from pipelines import demo  # noqa: E402

MB = 10**6  # a megabyte is 10^6 bytes in every figure tokenbeam prints


def tokenize_seconds(corpus: str, tok_dir: str, out: str, *, verify: bool, workers: int,
                     fresh: bool) -> tuple[float, float]:
    """Whole-process wall seconds and CPU seconds (user + system, the job and its worker
    processes) of one ``python -m pipelines.tokenize``, interpreter start included."""
    if fresh:
        shutil.rmtree(out, ignore_errors=True)
    cmd = [sys.executable, "-m", "pipelines.tokenize", "--input", corpus, "--output", out,
           "--tokenizer-type", "HuggingFaceTokenizer", "--tokenizer-model", tok_dir,
           "--append-eod", "--log-interval", "0", "--workers", str(workers),
           "--verify-inputs" if verify else "--no-verify-inputs"]
    start = time.perf_counter()
    with tempfile.TemporaryFile() as log:
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=log)
        _, status, usage = os.wait4(proc.pid, 0)  # usage: the job and the children it reaped
        proc.returncode = os.waitstatus_to_exitcode(status)
        seconds = time.perf_counter() - start
        if proc.returncode != 0:
            log.seek(0)
            raise SystemExit(f"tokenize failed ({proc.returncode}): "
                             f"{log.read()[-2000:].decode(errors='replace')}")
    return seconds, usage.ru_utime + usage.ru_stime


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=int, default=500)
    parser.add_argument("--vocab", type=int, default=32000)
    parser.add_argument("--workdir", default=None)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--workers", type=int, default=1)
    args = parser.parse_args()
    work = args.workdir or tempfile.mkdtemp(prefix="tokenbeam-verify-")
    corpus = os.path.join(work, "corpus")
    paths = make_corpus(corpus, args.mb)
    nbytes = sum(os.path.getsize(p) for p in paths)
    tok_dir = os.path.join(work, f"bpe{args.vocab}")
    if not os.path.exists(os.path.join(tok_dir, "tokenizer.json")):
        demo.train_bpe(load_texts(paths[:1])[:20000], tok_dir, vocab_size=args.vocab)
    print(f"corpus: {nbytes / MB:.0f} MB in {len(paths)} files; tokenizer: byte-level BPE "
          f"{args.vocab}; --workers {args.workers}; cores: {os.cpu_count()}; "
          f"medians of {args.repeats}", flush=True)

    times: dict[tuple[str, bool], list[tuple[float, float]]] = {}
    for _ in range(args.repeats):
        for verify in (False, True):
            out = os.path.join(work, f"out_{'verify' if verify else 'plain'}")
            first = tokenize_seconds(corpus, tok_dir, out, verify=verify, workers=args.workers,
                                     fresh=True)
            again = tokenize_seconds(corpus, tok_dir, out, verify=verify, workers=args.workers,
                                     fresh=False)
            times.setdefault(("first run", verify), []).append(first)
            times.setdefault(("rerun", verify), []).append(again)
            print(f"  {'verify' if verify else 'plain ':<6} first {first[0]:6.2f} s "
                  f"(cpu {first[1]:6.2f})  rerun {again[0]:6.2f} s (cpu {again[1]:6.2f})",
                  flush=True)
    hash_runs, hash_cpu = [], []
    for _ in range(args.repeats):
        start, cpu_start = time.perf_counter(), time.process_time()  # every thread's CPU
        file_hashes.content_hashes(paths)
        hash_runs.append(time.perf_counter() - start)
        hash_cpu.append(time.process_time() - cpu_start)
    hashing = statistics.median(hash_runs)

    print(f"\n{'run':<10} {'':<5} {'plain s':>9} {'--verify-inputs s':>18} {'extra s':>8} "
          f"{'cost':>7}")
    costs = {}
    for row in ("first run", "rerun"):
        for column, label in ((0, "wall"), (1, "cpu")):
            plain = statistics.median(t[column] for t in times[(row, False)])
            verify = statistics.median(t[column] for t in times[(row, True)])
            costs[(row, label)] = (verify - plain) / plain
            print(f"{row:<10} {label:<5} {plain:>9.2f} {verify:>18.2f} {verify - plain:>+8.2f} "
                  f"{100 * costs[(row, label)]:>+6.1f}%")
    print(f"{'hash only':<10} {'wall':<5} {'-':>9} {hashing:>18.2f}   "
          f"({nbytes / MB / hashing:.0f} MB/s, {file_hashes.CONTENT_HASH}, "
          f"{min(8, len(paths), max(2, os.cpu_count() or 1))} threads)")
    print(f"{'hash only':<10} {'cpu':<5} {'-':>9} {statistics.median(hash_cpu):>18.2f}")
    wall, cpu = costs[("first run", "wall")], costs[("first run", "cpu")]
    print(f"\nfirst run, end to end: --verify-inputs costs {100 * wall:+.1f}% wall-clock, "
          f"{100 * cpu:+.1f}% CPU time (the bar for making it the default: 5%)")
    if not args.workdir:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
