"""``python -m pipelines.merge --input GLOB --output PREFIX``: one Megatron dataset from many.

Concatenates Megatron datasets, streaming (:func:`dataio.indexed.merge`: the ``.bin`` is copied
in chunks and the index arrays are spilled, so memory does not grow with the data). On the same
inputs the files are byte-identical to Megatron-LM's ``tools/merge_datasets.py``
(tests/data/megatron_merge/), whose flags are accepted too: ``--output-prefix P`` writes exactly
``P.bin/.idx`` (as ``--output P --no-counts``); ``--multimodal`` is refused (text datasets only).

- Order: Megatron's, the matched datasets sorted by their full paths as plain strings (Python's
  ``sorted()``: ``split_10`` before ``split_2``; within one folder that is merge_datasets.py's
  order of the names), or with ``--natural-order`` in natural order (``split_2`` before
  ``split_10``); with zero-padded numbers the two agree. Each dataset once, so the same inputs
  always give the same bytes.
- Before anything is written: every input's header is read, the dtypes must agree (else nothing
  is written and the differing files are named), the counts are summed, and the output must not
  exist (``--overwrite`` replaces it) nor be one of the inputs under any spelling
  (``DIR/./NAME``, ``DIR//NAME``, ``..``, a symlink, another URL form: exit status 2).
- Output name: ``PREFIX_dc=N_sc=N_tc=N`` (the summed counts). A PREFIX that already ends in
  counts is used as it is after checking they are the sums (a mismatch is an error);
  ``--no-counts`` writes exactly PREFIX.
- Nothing half-written: the writer uses temporary names and renames ``.bin`` then ``.idx`` at the
  end; a failure removes the temporary files and leaves no final-named file.

Exit status: 0 merged, 1 inputs that cannot be merged (the message names them), 2 bad command
line (including an output that is one of the inputs).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
import sys

from runtime import cli
from dataio import dataset_find
from runtime import errors
from dataio import fs as fsutil
from dataio import locations
from dataio import indexed, naming


class MergeError(errors.RunError):
    """The datasets cannot be merged as asked; the message names the files and the fix."""


def natural_key(path: str) -> list:
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", path)]


def plan_merge(prefixes: list[str], output: str, *, counts_in_name: bool = True,
               overwrite: bool = False) -> tuple[str, indexed.Counts]:
    """The final output prefix and the counts it will hold; raises :class:`MergeError` for
    anything that would make the merge fail or surprise."""
    if not prefixes:
        raise MergeError("no input datasets")
    naming.refuse_control_characters(os.path.basename(output), where=f"--output {output}")
    counted = [indexed.count_dataset(p) for p in prefixes]
    dtypes = sorted({str(c.dtype) for c in counted})
    if len(dtypes) > 1:
        by_dtype = {d: [c.name for c in counted if str(c.dtype) == d] for d in dtypes}
        listing = "; ".join(f"{d}: {', '.join(names[:3])}{' ...' if len(names) > 3 else ''}"
                            for d, names in by_dtype.items())
        raise MergeError(f"inputs have different dtypes ({listing}); merge each dtype separately "
                         "or re-tokenize with one tokenizer; nothing was written")
    total = sum((c.counts for c in counted), indexed.Counts())
    named = naming.parse_counts(os.path.basename(output))
    if not counts_in_name:
        final = output
    elif named is not None:
        if named != dataclasses.astuple(total):
            raise MergeError(f"--output {output} says dc={named[0]} sc={named[1]} tc={named[2]} "
                             f"but the inputs hold dc={total.documents} sc={total.sequences} "
                             f"tc={total.tokens}; drop the counts from --output to have them "
                             "added")
        final = output
    else:
        final = naming.with_counts(output, total.documents, total.sequences, total.tokens)
    # Spelled differently (DIR/./NAME, DIR//NAME, "..", a symlink), the output is still an input
    # that --overwrite would destroy: compare where the files are, not how they are written.
    locations.refuse_same_location([indexed.bin_path(final), indexed.idx_path(final)],
                                [f(p) for p in prefixes for f in (indexed.bin_path,
                                                                  indexed.idx_path)],
                                flag="--output")
    if not overwrite:
        existing = [p for p in (indexed.bin_path(final), indexed.idx_path(final))
                    if fsutil.exists(p)]
        if existing:
            raise MergeError(f"{existing[0]} already exists; pass --overwrite to replace it")
    return final, total


def merge_order(prefixes: list[str], *, natural: bool = False) -> list[str]:
    """The order the datasets are concatenated in: Megatron's plain ``sorted()`` (default), or
    natural order (numbers compared as numbers)."""
    return sorted(prefixes, key=natural_key if natural else None)


def merge_datasets(prefixes: list[str], output: str, *, counts_in_name: bool = True,
                   overwrite: bool = False, natural: bool = False) -> tuple[str, indexed.Counts]:
    """Merge ``prefixes`` (in :func:`merge_order`) into ``output``; returns the final prefix and
    its counts."""
    ordered = dataset_find.unique_datasets(merge_order(prefixes, natural=natural))
    final, total = plan_merge(ordered, output, counts_in_name=counts_in_name,
                              overwrite=overwrite)
    header = indexed.merge(ordered, final)
    if (header.document_count, header.sequence_count) != (total.documents, total.sequences):
        raise MergeError(f"{final}: wrote {header.document_count} documents and "
                         f"{header.sequence_count} sequences, expected {total.documents} and "
                         f"{total.sequences}; an input changed during the merge?")
    return final, total


def build_parser() -> argparse.ArgumentParser:
    parser = cli.ArgumentParser(prog="python -m pipelines.merge", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--input", action="append", required=True, metavar="GLOB",
                        help="datasets: glob, folder, .bin/.idx file or prefix; repeatable")
    output = parser.add_mutually_exclusive_group(required=True)
    output.add_argument("--output", metavar="PREFIX",
                        help="output prefix (local or URL); counts are appended unless it "
                             "already ends in them")
    output.add_argument("--output-prefix", metavar="PREFIX",
                        help="Megatron's spelling: write exactly PREFIX.bin/.idx (as --output "
                             "PREFIX --no-counts)")
    parser.add_argument("--no-counts", action="store_true",
                        help="write exactly PREFIX, without _dc=_sc=_tc=")
    parser.add_argument("--natural-order", action="store_true",
                        help="merge in natural order of the paths (split_2 before split_10) "
                             "instead of Megatron's sorted() order (split_10 before split_2)")
    parser.add_argument("--multimodal", action="store_true",
                        help="Megatron's flag for multimodal datasets: refused (text datasets "
                             "only; use Megatron's tools/merge_datasets.py --multimodal)")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing output")
    return parser


def run(argv=None) -> int:
    return errors.main(_run, argv)


def _run(argv) -> int:
    args = build_parser().parse_args(argv)
    if args.multimodal:
        raise errors.ConfigError("--multimodal: tokenbeam merges text datasets only (its index "
                                 "has no modes array); merge multimodal datasets with "
                                 "Megatron-LM's tools/merge_datasets.py --multimodal")
    # Megatron writes PREFIX + .bin/.idx whatever PREFIX ends in; --output drops a .bin/.idx
    output = args.output_prefix or indexed.prefix_of(args.output)
    counts_in_name = not (args.no_counts or args.output_prefix)
    prefixes = dataset_find.find_datasets(args.input)
    try:
        final, total = merge_datasets(prefixes, output, counts_in_name=counts_in_name,
                                      overwrite=args.overwrite, natural=args.natural_order)
    except FileNotFoundError as exc:  # an input removed after it was found
        raise MergeError(str(exc)) from None
    print(f"merged {len(prefixes)} datasets -> {naming.printable(final)} "
          f"(documents={total.documents} "
          f"sequences={total.sequences} tokens={total.tokens})")
    return 0


def main() -> int:
    """The command line (``python -m pipelines.merge``, ``tokenbeam-merge``): :func:`run`
    with its interrupt handling (exit 130 / 143, see runtime/errors.py)."""
    return errors.main(_run, process=True)


if __name__ == "__main__":
    sys.exit(main())
