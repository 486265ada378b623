"""Random-access throughput of ``dataio.dataset`` windows, with a raw-memmap reference beside it.

Usage::

    python bench/loader.py                          # 128 M tokens in 4 shards, L = 2048 and 8192
    python bench/loader.py --tokens 200M --repeats 7 --dir /mnt/scratch --cpu 1

A dataset of ``--tokens`` random uint16 ids (documents of random length around ``--mean-doc``,
about 2% empty, each non-empty one ending in the EOD id 0, which no other token uses) is
written with ``IndexedDatasetWriter`` into ``--shards`` shards in a temporary folder (deleted
afterwards). The process is pinned to one CPU (``--cpu``). For each context length, the same
random window indices are read by:

- ``loader``              ``ds[i]``: token ids + document ids from the ``.idx`` (no mask)
- ``memmap+EOD ids (ref)`` the common approach, same outputs: ``np.memmap`` per shard, the
                          window's slice(s) concatenated, document ids by scanning for EOD (cumsum)
- ``memmap only (floor)`` the slice alone, no document ids: what reading tokens costs at least
- ``loader + mask``       ``ds[i]`` plus ``document_mask()`` (the L x L block-causal bool array)
- ``memmap+EOD mask (ref)`` EOD-scan ids and the mask by broadcasting ``ids == ids.T & tril``

"vs ref" divides each loader figure by its reference's (same outputs, higher is better).

Every method copies the tokens out (``np.array``), so each really reads its bytes. The files were
just written, so they sit in the page cache: this measures the loader, not the disk. One warm-up
pass runs first; figures are medians over ``--repeats`` passes of ``--items`` windows
(``--mask-items`` with masks, which cost O(L^2) each), the methods taking turns pass by pass.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from dataio import indexed  # noqa: E402
from dataio.dataset import get_dataset  # noqa: E402

EOD = 0
SEED = 20240


def parse_count(text: str) -> int:
    units = {"k": 10**3, "M": 10**6, "G": 10**9}
    if text[-1] in units:
        return int(float(text[:-1]) * units[text[-1]])
    return int(text)


def write_dataset(folder: str, *, tokens: int, shards: int, mean_doc: int) -> list[str]:
    """``shards`` datasets of about ``tokens / shards`` tokens each; returns their prefixes."""
    rng = np.random.default_rng(SEED)
    prefixes = []
    per_shard = tokens // shards
    for k in range(shards):
        prefix = os.path.join(folder, f"bench_{k:02d}_text_document")
        written = 0
        with indexed.IndexedDatasetWriter(prefix, dtype=np.uint16) as writer:
            while written < per_shard:
                lengths = rng.integers(2, 2 * mean_doc, 10_000)
                lengths[rng.random(lengths.size) < 0.02] = 0  # empty documents
                lengths = lengths[np.cumsum(lengths) <= per_shard - written]
                if lengths.size == 0:
                    lengths = np.array([per_shard - written])
                flat = rng.integers(1, 60_000, int(lengths.sum()), dtype=np.uint16)
                ends = np.cumsum(lengths)[lengths > 0] - 1
                flat[ends] = EOD
                nonempty = lengths > 0
                writer.add_batch(flat, lengths[nonempty], nonempty.astype(np.int64))
                written += int(lengths.sum())
        prefixes.append(prefix)
    return prefixes


class MemmapReference:
    """Windows cut from plain ``np.memmap`` arrays of the ``.bin`` files."""

    def __init__(self, prefixes: list[str], context_length: int):
        self.arrays = [np.memmap(indexed.bin_path(p), dtype=np.uint16, mode="r")
                       for p in prefixes]
        self.starts = np.concatenate(([0], np.cumsum([len(a) for a in self.arrays])))
        self.context_length = context_length

    def tokens(self, i: int) -> np.ndarray:
        start = i * self.context_length
        stop = start + self.context_length
        k = int(np.searchsorted(self.starts, start, side="right")) - 1
        parts = []
        while start < stop:
            end = min(stop, int(self.starts[k + 1]))
            parts.append(self.arrays[k][start - self.starts[k]:end - self.starts[k]])
            start, k = end, k + 1
        return np.array(parts[0]) if len(parts) == 1 else np.concatenate(parts)


def eod_scan_ids(tokens: np.ndarray) -> np.ndarray:
    """Document ids (window-local) by counting the EODs before each token."""
    is_eod = tokens == EOD
    return np.cumsum(is_eod) - is_eod  # an EOD belongs to the document it ends


def eod_scan_mask(tokens: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """EOD-scan ids and the L x L mask by broadcasting."""
    ids = eod_scan_ids(tokens)
    positions = np.arange(len(tokens))
    mask = (ids[:, None] == ids[None, :]) & (positions[None, :] <= positions[:, None])
    return ids, mask


def time_pass(fn, indices) -> float:
    start = time.perf_counter()
    for i in indices:
        fn(int(i))
    return len(indices) / (time.perf_counter() - start)


def run(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokens", type=parse_count, default=parse_count("128M"))
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--mean-doc", type=int, default=700, help="mean document length")
    parser.add_argument("--context-lengths", type=int, nargs="+", default=[2048, 8192])
    parser.add_argument("--items", type=int, default=20_000)
    parser.add_argument("--mask-items", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--cpu", type=int, default=None, help="CPU to pin to (default: the "
                        "first one this process may use)")
    parser.add_argument("--dir", default=None, help="where to write the temporary dataset")
    args = parser.parse_args(argv)

    cpu = args.cpu if args.cpu is not None else min(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {cpu})
    folder = tempfile.mkdtemp(prefix="tokenbeam-bench-loader-", dir=args.dir)
    try:
        t0 = time.perf_counter()
        prefixes = write_dataset(folder, tokens=args.tokens, shards=args.shards,
                                 mean_doc=args.mean_doc)
        write_s = time.perf_counter() - t0
        ds0 = get_dataset(folder, args.context_lengths[0])
        print(f"dataset: {ds0.num_tokens():,} tokens, {ds0.num_documents():,} documents, "
              f"{ds0.num_files()} shards (uint16), written in {write_s:.1f} s; pinned to CPU "
              f"{cpu}; medians of {args.repeats} passes\n")
        header = (f"{'L':>5}  {'method':<21}  {'items/s':>10}  {'us/item':>9}  "
                  f"{'M tokens/s':>10}  {'vs ref':>6}")
        print(header)
        print("-" * len(header))
        rng = np.random.default_rng(SEED + 1)
        for length in args.context_lengths:
            ds = get_dataset(folder, length)
            ref = MemmapReference(prefixes, length)
            methods = {
                "loader": (lambda i: np.array(ds[i].token_ids), args.items),
                "memmap+EOD ids (ref)": (lambda i: eod_scan_ids(ref.tokens(i)), args.items),
                "memmap only (floor)": (ref.tokens, args.items),
                "loader + mask": (lambda i: (np.array((w := ds[i]).token_ids),
                                             w.document_mask()), args.mask_items),
                "memmap+EOD mask (ref)": (lambda i: eod_scan_mask(ref.tokens(i)),
                                          args.mask_items),
            }
            reference = {"loader": "memmap+EOD ids (ref)",
                         "loader + mask": "memmap+EOD mask (ref)"}
            # The same windows for every method: one index array per pass and size.
            passes = {n: [rng.integers(0, len(ds), n) for _ in range(args.repeats)]
                      for n in (args.items, args.mask_items)}
            for fn, items in methods.values():  # warm-up
                time_pass(fn, rng.integers(0, len(ds), max(10, items // 10)))
            # Passes interleave the methods, so load from other processes hits them alike.
            rates = {name: [] for name in methods}
            for p in range(args.repeats):
                for name, (fn, items) in methods.items():
                    rates[name].append(time_pass(fn, passes[items][p]))
            results = {name: statistics.median(r) for name, r in rates.items()}
            for name, rate in results.items():
                ratio = (f"{rate / results[reference[name]]:>5.2f}x" if name in reference
                         else "")
                print(f"{length:>5}  {name:<21}  {rate:>10,.0f}  {1e6 / rate:>9.1f}  "
                      f"{rate * length / 1e6:>10.1f}  {ratio:>6}")
            ds.close()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(run())
