"""``python -m pipelines.count --input GLOB [--rename]``: count (and name) Megatron datasets.

For every Megatron dataset matched (made by tokenbeam, Megatron's own tools or anything else) it
reads only the ``.idx`` header and its sequence-lengths array: documents = D - 1, sequences = N,
tokens = the sum of the lengths. The ``.bin`` is never read, only its size is compared with the
index. Prints one table row per dataset and a total.

Names that already end in ``_dc=N_sc=N_tc=N`` are verified against the index. ``--rename`` appends
the counts to both files of every dataset whose name lacks them (``.bin`` first, ``.idx`` last, as
a dataset is complete exactly when its ``.idx`` exists). Every check runs before the first rename:
a count mismatch, a damaged dataset or an existing target name renames nothing. A rename cut off
between its two files is finished by the next ``--rename`` run.

Exit status: 0 all counted (and renamed), 1 a mismatch or a damaged/incomplete dataset, 2 bad
command line.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys

import numpy as np

from dataio import fs as fsutil
from dataio import indexed, naming
from pipelines.signature import InputError, expand_inputs

_LENGTH_CHUNK = 1 << 24  # bytes of the lengths array read at a time (4M sequences)


@dataclasses.dataclass(frozen=True)
class DatasetCounts:
    prefix: str
    dtype: np.dtype
    documents: int
    sequences: int
    tokens: int

    @property
    def name(self) -> str:
        return os.path.basename(self.prefix)

    def counted_name(self) -> str:
        return naming.with_counts(self.name, self.documents, self.sequences, self.tokens)


def count_index(idx_file: str) -> tuple[indexed.IndexHeader, int]:
    """The header and token count of an ``.idx``, read in bounded chunks; the file's size must be
    exactly what its header implies."""
    with fsutil.open_file(idx_file, "rb") as f:
        header = indexed.decode_header(f.read(indexed.HEADER_SIZE))
        remaining = 4 * header.sequence_count
        tokens = 0
        while remaining:
            raw = f.read(min(remaining, _LENGTH_CHUNK))
            if not raw:
                break
            usable = len(raw) - len(raw) % 4
            tokens += int(np.frombuffer(raw[:usable], dtype="<i4").sum(dtype=np.int64))
            remaining -= len(raw)
    actual = fsutil.size(idx_file)
    if actual != header.idx_size:
        raise indexed.FormatError(f"is {actual} bytes but its header (N={header.sequence_count}, "
                                  f"D={header.document_index_count}) means {header.idx_size}")
    return header, tokens


def count_dataset(prefix: str) -> DatasetCounts:
    """Counts of one dataset; raises :class:`indexed.FormatError` when it is damaged."""
    try:
        header, tokens = count_index(indexed.idx_path(prefix))
    except indexed.FormatError as exc:
        raise indexed.FormatError(f"{indexed.idx_path(prefix)}: {exc}") from None
    bin_size = fsutil.size(indexed.bin_path(prefix))
    if bin_size != tokens * header.dtype.itemsize:
        raise indexed.FormatError(f"{indexed.bin_path(prefix)} is {bin_size} bytes but the index "
                                  f"holds {tokens} {header.dtype} tokens "
                                  f"({tokens * header.dtype.itemsize} bytes)")
    return DatasetCounts(prefix, header.dtype, header.document_count, header.sequence_count,
                         tokens)


@dataclasses.dataclass
class Row:
    counts: DatasetCounts | None
    prefix: str
    status: str
    ok: bool
    target: str | None = None  # new prefix when it is to be renamed


def plan(prefixes: list[str], *, rename: bool) -> list[Row]:
    """Count every dataset and decide what to do with it; no file is changed."""
    rows = []
    targets: set[str] = set()
    for prefix in prefixes:
        try:
            counts = count_dataset(prefix)
        except (indexed.FormatError, FileNotFoundError) as exc:
            rows.append(Row(None, prefix, f"DAMAGED {exc}; run python -m pipelines.validate",
                            False))
            continue
        named = naming.parse_counts(counts.name)
        have = (counts.documents, counts.sequences, counts.tokens)
        if named is not None:
            if named == have:
                rows.append(Row(counts, prefix, "verified", True))
            else:
                diffs = ", ".join(f"{f}={w} but the index holds {h}"
                                  for f, w, h in zip(("dc", "sc", "tc"), named, have) if w != h)
                rows.append(Row(counts, prefix, f"MISMATCH name says {diffs}", False))
            continue
        if not rename:
            rows.append(Row(counts, prefix, "no counts in name", True))
            continue
        target = fsutil.join(os.path.dirname(prefix), counts.counted_name())
        # Two datasets renamed to one name (e.g. the same one spelled two ways, d/x and d/./x)
        # would have the second rename clobber the first: compare places, not spellings.
        place = fsutil.resolve_location(target)
        clash = [p for p in (indexed.bin_path(target), indexed.idx_path(target))
                 if fsutil.exists(p)] or ([target] if place in targets else [])
        if clash:
            rows.append(Row(counts, prefix, f"TARGET EXISTS {clash[0]}; move it away first",
                            False))
            continue
        targets.add(place)
        rows.append(Row(counts, prefix, f"rename -> {os.path.basename(target)}", True, target))
    return rows


def _rename_dataset(source: str, target: str) -> None:
    fs, src_inner = fsutil.filesystem_and_path(source)
    _, dst_inner = fsutil.filesystem_and_path(target)
    fsutil.replace(fs, src_inner + ".bin", dst_inner + ".bin")
    try:
        fsutil.replace(fs, src_inner + ".idx", dst_inner + ".idx")
    except BaseException:
        fsutil.replace(fs, dst_inner + ".bin", src_inner + ".bin")
        raise


def resume_candidates(patterns: list[str]) -> list[tuple[str, str]]:
    """``(prefix, target)`` for renames cut off between the two files: a lone ``X.idx`` beside a
    lone ``X_dc=.._sc=.._tc=...bin`` whose counts match the index."""
    lone_idx: set[str] = set()
    for pattern in patterns:
        for match in fsutil.glob(pattern):
            fs, inner = fsutil.filesystem_and_path(match)
            paths = fsutil.list_files(match) if fs.isdir(inner) else [match]
            for path in paths:
                if indexed.is_temporary_name(path) or not path.endswith((".bin", ".idx")):
                    continue
                prefix = indexed.prefix_of(path)
                if path.endswith(".bin") and naming.parse_counts(os.path.basename(prefix)):
                    prefix = naming.strip_counts(prefix)  # the .bin already moved; find its .idx
                if not naming.parse_counts(os.path.basename(prefix)):
                    lone_idx.add(prefix)
    pairs = []
    for prefix in sorted(lone_idx):
        if fsutil.exists(indexed.bin_path(prefix)) or not fsutil.exists(indexed.idx_path(prefix)):
            continue
        try:
            header, tokens = count_index(indexed.idx_path(prefix))
        except (indexed.FormatError, FileNotFoundError):
            continue
        target = naming.with_counts(prefix, header.document_count, header.sequence_count, tokens)
        if fsutil.exists(indexed.bin_path(target)) and not fsutil.exists(indexed.idx_path(target)):
            pairs.append((prefix, target))
    return pairs


def format_table(rows: list[Row]) -> list[str]:
    name_width = max([len("dataset")] + [len(os.path.basename(r.prefix)) for r in rows])
    lines = [f"{'dataset':<{name_width}}  {'dtype':<6} {'documents':>12} {'sequences':>12} "
             f"{'tokens':>15}  status"]
    totals = [0, 0, 0]
    for r in rows:
        c = r.counts
        if c is None:
            lines.append(f"{os.path.basename(r.prefix):<{name_width}}  {'-':<6} {'-':>12} "
                         f"{'-':>12} {'-':>15}  {r.status}")
            continue
        totals = [totals[0] + c.documents, totals[1] + c.sequences, totals[2] + c.tokens]
        lines.append(f"{c.name:<{name_width}}  {str(c.dtype):<6} {c.documents:>12} "
                     f"{c.sequences:>12} {c.tokens:>15}  {r.status}")
    lines.append(f"{f'total ({len(rows)} datasets)':<{name_width}}  {'':<6} {totals[0]:>12} "
                 f"{totals[1]:>12} {totals[2]:>15}")
    return lines


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m pipelines.count", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--input", action="append", required=True, metavar="GLOB",
                        help="datasets: glob, folder, .bin/.idx file or prefix; repeatable")
    parser.add_argument("--rename", action="store_true",
                        help="append _dc=N_sc=N_tc=N to the names that lack counts")
    return parser


def run(argv=None) -> int:
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    resumed = resume_candidates(args.input) if args.rename else []
    for prefix, target in resumed:
        _rename_dataset_idx_only(prefix, target)
        print(f"finished an interrupted rename: {os.path.basename(prefix)} -> "
              f"{os.path.basename(target)}")
    try:
        prefixes = expand_inputs(args.input)
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    rows = plan(prefixes, rename=args.rename)
    print("\n".join(format_table(rows)))
    failed = [r for r in rows if not r.ok]
    if failed:
        what = "nothing was renamed" if args.rename else "fix the names or the data"
        print(f"error: {len(failed)} of {len(rows)} datasets failed the checks; {what}",
              file=sys.stderr)
        return 1
    renamed = 0
    for r in rows:
        if r.target is not None:
            _rename_dataset(r.prefix, r.target)
            renamed += 1
    if args.rename:
        print(f"renamed {renamed} datasets")
    return 0


def _rename_dataset_idx_only(prefix: str, target: str) -> None:
    fs, src_inner = fsutil.filesystem_and_path(prefix)
    _, dst_inner = fsutil.filesystem_and_path(target)
    fsutil.replace(fs, src_inner + ".idx", dst_inner + ".idx")


if __name__ == "__main__":
    sys.exit(run())
