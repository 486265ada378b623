"""Write throughput and peak memory of ``dataio.indexed.IndexedDatasetWriter``.

Usage::

    python bench/write_throughput.py                  # 500 M tokens / 1 M docs, then 50 M / 100 k
    python bench/write_throughput.py --repeats 5 --dir /mnt/scratch
    python bench/write_throughput.py --sizes 50M:100k --megatron-python /path/to/venv/bin/python

Each case runs in a fresh subprocess so that its peak RSS (``getrusage`` maxrss) is its own.
Methods, side by side:

- ``add_batch``     the writer fed batches of ``--batch-docs`` documents (how the pipeline feeds it)
- ``add_document``  the writer fed one document per call
- ``list builder``  reference: a Megatron-style builder written inline here (tokens streamed to
                    ``.bin``, lengths and document boundaries kept in Python lists, pointers built
                    at the end), i.e. what ``IndexedDatasetBuilder`` does, without torch
- ``megatron-core`` reference: megatron-core's own ``IndexedDatasetBuilder.add_document``, only
                    when a python with megatron-core is given (``--megatron-python`` or the env var
                    ``TOKENBEAM_MEGATRON_PYTHON``); its RSS includes importing torch
- ``tofile``        the disk ceiling: the same token bytes written with ``ndarray.tofile``

Documents have random lengths (0 to twice the mean; a 0 is an empty document) and tokens are
slices of a fixed random pool, so generating input costs next to nothing. MB/s counts the bytes
of ``.bin`` + ``.idx`` written (1 MB = 10^6 bytes) divided by the wall time from opening to
commit (no fsync: the figure is the writer's cost, with the OS page cache absorbing the disk);
MB/cpu-s divides by the CPU time (user + system) instead, which a busy shared machine distorts
less.
"base RSS" is the process's RSS before the first write (interpreter, numpy, the token pool), so
"peak RSS - base" is what writing cost. Figures are medians over ``--repeats`` runs. Output
files go to a temporary directory that is deleted afterwards.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

POOL_TOKENS = 1 << 23  # 8 M random uint16 tokens (16 MiB) that every document is sliced from
SEED = 1234
METHODS = ("add_batch", "add_document", "list_builder", "megatron_core", "tofile")
LABELS = {"add_batch": "add_batch", "add_document": "add_document",
          "list_builder": "list builder (ref)", "megatron_core": "megatron-core (ref)",
          "tofile": "tofile (ceiling)"}


# ---------------------------------------------------------------------------------------------
# input generation (the same in every method)


def batches(tokens: int, docs: int, batch_docs: int):
    """Yield ``(flat_tokens, document_lengths)`` batches; document lengths sum to ``tokens``
    exactly over the whole run. ``flat_tokens`` are views into a shared pool (no copies)."""
    rng = np.random.default_rng(SEED)
    pool = rng.integers(0, 50_000, size=POOL_TOKENS, dtype=np.uint16)
    mean, extra = divmod(tokens, docs)
    done_docs = 0
    offset = 0
    while done_docs < docs:
        n = min(batch_docs, docs - done_docs)
        # symmetric offsets around the mean keep the sum exact: pairs (+d, -d), shuffled
        half = rng.integers(0, mean + 1, size=(n + 1) // 2)
        lengths = np.full(n, mean, dtype=np.int64)
        deltas = np.concatenate([half, -half])[:n]
        if n % 2:
            deltas[-1] = 0
        rng.shuffle(deltas)
        lengths += deltas
        # spread the remainder of tokens/docs over the first documents of the run
        lo, hi = done_docs, done_docs + n
        if lo < extra:
            lengths[: min(hi, extra) - lo] += 1
        total = int(lengths.sum())
        if offset + total > POOL_TOKENS:
            offset = 0
        if total > POOL_TOKENS:
            raise SystemExit("a batch is larger than the token pool; lower --batch-docs")
        yield pool[offset:offset + total], lengths
        offset += total
        done_docs += n


# ---------------------------------------------------------------------------------------------
# the methods (each runs alone in a worker process)


def run_add_batch(prefix: str, data) -> None:
    from dataio.indexed import IndexedDatasetWriter

    with IndexedDatasetWriter(prefix, dtype=np.uint16) as writer:
        for flat, lengths in data:
            nonempty = lengths > 0
            writer.add_batch(flat, lengths[nonempty], nonempty.astype(np.int64))


def run_add_document(prefix: str, data) -> None:
    from dataio.indexed import IndexedDatasetWriter

    with IndexedDatasetWriter(prefix, dtype=np.uint16) as writer:
        for flat, lengths in data:
            start = 0
            for length in lengths.tolist():
                writer.add_document(flat[start:start + length])
                start += length


def run_list_builder(prefix: str, data) -> None:
    # What a list-based builder (Megatron's IndexedDatasetBuilder) does, written out here.
    lengths_list: list[int] = []
    doc_ends = [0]
    with open(prefix + ".bin", "wb") as bin_file:
        for flat, lengths in data:
            start = 0
            for length in lengths.tolist():
                bin_file.write(np.array(flat[start:start + length], dtype=np.uint16).tobytes())
                if length:
                    lengths_list.append(length)
                doc_ends.append(len(lengths_list))
                start += length
    pointers = []
    position = 0
    for length in lengths_list:
        pointers.append(position)
        position += 2 * length
    with open(prefix + ".idx", "wb") as idx:
        idx.write(b"MMIDIDX\x00\x00" + (1).to_bytes(8, "little") + bytes([8])
                  + len(lengths_list).to_bytes(8, "little") + len(doc_ends).to_bytes(8, "little"))
        idx.write(np.array(lengths_list, dtype="<i4").tobytes())
        idx.write(np.array(pointers, dtype="<i8").tobytes())
        idx.write(np.array(doc_ends, dtype="<i8").tobytes())


def run_megatron_core(prefix: str, data) -> None:
    from megatron.core.datasets.indexed_dataset import IndexedDatasetBuilder

    builder = IndexedDatasetBuilder(prefix + ".bin", dtype=np.uint16)
    for flat, lengths in data:
        start = 0
        for length in lengths.tolist():
            builder.add_document(flat[start:start + length], [length] if length else [])
            start += length
    builder.finalize(prefix + ".idx")


def run_tofile(prefix: str, data) -> None:
    with open(prefix + ".bin", "wb") as bin_file:
        for flat, _ in data:
            flat.tofile(bin_file)


RUNNERS = {"add_batch": run_add_batch, "add_document": run_add_document,
           "list_builder": run_list_builder, "megatron_core": run_megatron_core,
           "tofile": run_tofile}


def worker(args) -> None:
    """One case in this (fresh) process; prints a JSON line with the figures."""
    if args.method == "megatron_core":
        # megatron-core logs and warns a lot on import; import it before measuring the base
        import warnings

        warnings.simplefilter("ignore")
        import megatron.core.datasets.indexed_dataset  # noqa: F401
    elif args.method in ("add_batch", "add_document"):
        import dataio.indexed  # noqa: F401
    data = batches(args.tokens, args.docs, args.batch_docs)
    first = next(data)  # builds the pool: part of the base, not of the writer's cost
    base_kib = _current_rss_kib()

    def all_batches():
        yield first
        yield from data

    prefix = os.path.join(args.dir, f"bench_{args.method}")
    cpu_before = _cpu_seconds()
    start = time.perf_counter()
    RUNNERS[args.method](prefix, all_batches())
    elapsed = time.perf_counter() - start
    cpu = _cpu_seconds() - cpu_before
    written = sum(os.path.getsize(prefix + s) for s in (".bin", ".idx")
                  if os.path.exists(prefix + s))
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    print(json.dumps({"seconds": elapsed, "cpu_seconds": cpu, "bytes": written,
                      "peak_kib": peak_kib, "base_kib": base_kib}))


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _current_rss_kib() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024


# ---------------------------------------------------------------------------------------------
# driver


def parse_size(text: str) -> int:
    scale = {"k": 10**3, "M": 10**6, "G": 10**9}
    if text[-1] in scale:
        return int(float(text[:-1]) * scale[text[-1]])
    return int(text)


def run_case(python: str, method: str, tokens: int, docs: int, batch_docs: int,
             root: str) -> dict:
    workdir = tempfile.mkdtemp(prefix="write-throughput-", dir=root)
    try:
        cmd = [python, os.path.abspath(__file__), "--worker", method, "--tokens", str(tokens),
               "--docs", str(docs), "--batch-docs", str(batch_docs), "--dir", workdir]
        env = dict(os.environ)
        repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        env["PYTHONPATH"] = repo + os.pathsep + env.get("PYTHONPATH", "")
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
        if proc.returncode != 0:
            raise SystemExit(f"{method} failed:\n{proc.stderr[-3000:]}")
        return json.loads(proc.stdout.strip().splitlines()[-1])
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def megatron_python(explicit: str | None) -> str | None:
    candidates = [explicit, os.environ.get("TOKENBEAM_MEGATRON_PYTHON"),
                  os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                               ".cache", "megatron-venv", "bin", "python")]
    for candidate in candidates:
        if candidate and os.path.exists(candidate):
            return candidate
    return None


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", nargs="+", default=["500M:1M", "50M:100k"],
                        help="cases as TOKENS:DOCUMENTS (default: 500M:1M 50M:100k)")
    parser.add_argument("--methods", nargs="+", choices=METHODS,
                        default=["add_batch", "add_document", "list_builder", "megatron_core",
                                 "tofile"])
    parser.add_argument("--batch-docs", type=int, default=1000,
                        help="documents per add_batch call (default 1000)")
    parser.add_argument("--repeats", type=int, default=3, help="runs per case; medians shown")
    parser.add_argument("--dir", default=None, help="where temporary output goes (default: "
                        "the system temp dir); deleted afterwards")
    parser.add_argument("--megatron-python", default=None,
                        help="a python with megatron-core installed, for the megatron-core column")
    parser.add_argument("--worker", choices=METHODS, dest="method", help=argparse.SUPPRESS)
    parser.add_argument("--tokens", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--docs", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.method:
        worker(args)
        return 0

    mpython = megatron_python(args.megatron_python)
    methods = [m for m in args.methods if m != "megatron_core" or mpython]
    if "megatron_core" in args.methods and not mpython:
        print("megatron-core column skipped: no python with megatron-core (give "
              "--megatron-python or set TOKENBEAM_MEGATRON_PYTHON)", file=sys.stderr)
    header = (f"{'case':<22} {'method':<22} {'MB/s':>8} {'MB/cpu-s':>9} {'seconds':>8} "
              f"{'peak RSS MB':>12} {'base MB':>8} {'peak-base':>10}")
    print(f"IndexedDatasetWriter write throughput, uint16, median of {args.repeats} run(s), "
          f"{args.batch_docs} docs per add_batch call")
    print(header)
    print("-" * len(header))
    for size in args.sizes:
        tokens_text, docs_text = size.split(":")
        tokens, docs = parse_size(tokens_text), parse_size(docs_text)
        case = f"{tokens_text} tok / {docs_text} docs"
        runs: dict[str, list[dict]] = {m: [] for m in methods}
        # Interleaved (method after method, then again) so that a noisy neighbour or the page
        # cache's writeback slows every method alike rather than one method's whole series.
        for _ in range(args.repeats):
            for method in methods:
                python = mpython if method == "megatron_core" else sys.executable
                os.sync()  # start each run with no dirty pages left by the previous one
                runs[method].append(run_case(python, method, tokens, docs, args.batch_docs,
                                             args.dir))
        for method in methods:
            done = runs[method]
            seconds = statistics.median(r["seconds"] for r in done)
            mbps = statistics.median(r["bytes"] / r["seconds"] / 1e6 for r in done)
            cpu_mbps = statistics.median(r["bytes"] / r["cpu_seconds"] / 1e6 for r in done)
            peak = statistics.median(r["peak_kib"] for r in done) * 1024 / 1e6
            base = statistics.median(r["base_kib"] for r in done) * 1024 / 1e6
            print(f"{case:<22} {LABELS[method]:<22} {mbps:>8.0f} {cpu_mbps:>9.0f} "
                  f"{seconds:>8.2f} {peak:>12.1f} {base:>8.1f} {peak - base:>10.1f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
