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

from runtime import cli
from dataio import dataset_find
from runtime import errors
from dataio import fs as fsutil
from dataio import locations
from dataio import indexed, naming


@dataclasses.dataclass
class Row:
    counted: indexed.CountedDataset | None
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
            counted = indexed.count_dataset(prefix)
        except (indexed.FormatError, FileNotFoundError) as exc:
            rows.append(Row(None, prefix, f"DAMAGED {exc}; run python -m pipelines.validate",
                            False))
            continue
        named = naming.parse_counts(counted.name)
        have = dataclasses.astuple(counted.counts)
        if named is not None:
            if named == have:
                rows.append(Row(counted, prefix, "verified", True))
            else:
                diffs = ", ".join(f"{f}={w} but the index holds {h}"
                                  for f, w, h in zip(("dc", "sc", "tc"), named, have) if w != h)
                rows.append(Row(counted, prefix, f"MISMATCH name says {diffs}", False))
            continue
        if not rename:
            rows.append(Row(counted, prefix, "no counts in name", True))
            continue
        naming.refuse_control_characters(counted.counted_name(), where=f"--rename {prefix}")
        target = fsutil.join(os.path.dirname(prefix), counted.counted_name())
        # Two datasets renamed to one name (e.g. the same one spelled two ways, d/x and d/./x)
        # would have the second rename clobber the first: compare places, not spellings.
        place = locations.resolve_location(target)
        clash = [p for p in (indexed.bin_path(target), indexed.idx_path(target))
                 if fsutil.exists(p)] or ([target] if place in targets else [])
        if clash:
            rows.append(Row(counted, prefix, f"TARGET EXISTS {clash[0]}; move it away first",
                            False))
            continue
        targets.add(place)
        rows.append(Row(counted, prefix, f"rename -> {os.path.basename(target)}", True, target))
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
    # "keep": the half-renamed pair is what is looked for, so incomplete pairs are listed.
    for prefix in dataset_find.find_datasets(patterns, incomplete="keep"):
        # A lone X_dc=.._sc=.._tc=...bin: the .bin already moved; its .idx is still X.idx.
        lone_idx.add(naming.strip_counts(prefix))
    pairs = []
    for prefix in sorted(lone_idx):
        if fsutil.exists(indexed.bin_path(prefix)) or not fsutil.exists(indexed.idx_path(prefix)):
            continue
        try:
            _, counts = indexed.count_index(indexed.idx_path(prefix))
        except (indexed.FormatError, FileNotFoundError):
            continue
        target = naming.with_counts(prefix, *dataclasses.astuple(counts))
        if fsutil.exists(indexed.bin_path(target)) and not fsutil.exists(indexed.idx_path(target)):
            pairs.append((prefix, target))
    return pairs


def format_table(rows: list[Row]) -> list[str]:
    # a name holding a newline or an escape forges no row; names alike in two folders (the
    # subfolders of --output-layout mirror) are shown with their folders
    shown = {id(r): naming.printable(name)
             for r, name in zip(rows, dataset_find.shown_names([r.prefix for r in rows]))}
    name_width = max([len("dataset")] + [len(name) for name in shown.values()])
    lines = [f"{'dataset':<{name_width}}  {'dtype':<6} {'documents':>12} {'sequences':>12} "
             f"{'tokens':>15}  status"]
    total = indexed.Counts()
    for r in rows:
        if r.counted is None:
            lines.append(f"{shown[id(r)]:<{name_width}}  {'-':<6} {'-':>12} "
                         f"{'-':>12} {'-':>15}  {naming.printable(r.status)}")
            continue
        c = r.counted.counts
        total += c
        lines.append(f"{shown[id(r)]:<{name_width}}  {str(r.counted.dtype):<6} "
                     f"{c.documents:>12} {c.sequences:>12} {c.tokens:>15}  "
                     f"{naming.printable(r.status)}")
    lines.append(f"{f'total ({len(rows)} datasets)':<{name_width}}  {'':<6} "
                 f"{total.documents:>12} {total.sequences:>12} {total.tokens:>15}")
    return lines


def build_parser() -> argparse.ArgumentParser:
    parser = cli.ArgumentParser(prog="python -m pipelines.count", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--input", action="append", required=True, metavar="GLOB",
                        help="datasets: glob, folder, .bin/.idx file or prefix; repeatable")
    parser.add_argument("--rename", action="store_true",
                        help="append _dc=N_sc=N_tc=N to the names that lack counts")
    return parser


def run(argv=None) -> int:
    return errors.main(_run, argv)


def _run(argv) -> int:
    args = build_parser().parse_args(argv)
    resumed = resume_candidates(args.input) if args.rename else []
    for prefix, target in resumed:
        _rename_dataset_idx_only(prefix, target)
        print(f"finished an interrupted rename: {naming.printable(os.path.basename(prefix))} -> "
              f"{naming.printable(os.path.basename(target))}")
    prefixes = dataset_find.find_datasets(args.input)
    rows = plan(prefixes, rename=args.rename)
    print("\n".join(format_table(rows)))
    failed = [r for r in rows if not r.ok]
    if failed:
        what = "nothing was renamed" if args.rename else "fix the names or the data"
        raise errors.RunError(f"{len(failed)} of {len(rows)} datasets failed the checks; {what}")
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


def main() -> int:
    """The command line (``python -m pipelines.count``, ``tokenbeam-count``): :func:`run`
    with its interrupt handling (exit 130 / 143, see runtime/errors.py)."""
    return errors.main(_run, process=True)


if __name__ == "__main__":
    sys.exit(main())
