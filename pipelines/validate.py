"""``python -m pipelines.validate PATH [PATH ...]``: check Megatron .bin/.idx datasets.

A PATH is a prefix, a ``.bin`` or ``.idx`` file, a folder (every dataset directly in it) or a
glob of them (found by :func:`dataio.dataset_find.find_datasets`; the datasets of each PATH in name
order, the PATHs in the order given). A tokenize output folder (one with ``_commits/``) stands
for its ``holdout/`` folder too, checked right after it.
Prints one line per dataset, ``OK`` with its counts or ``FAIL`` with the first reason; exits 0
only when every dataset passes (and at least one was found). For a tokenize output folder (one
with ``_commits/``) also a ``FAIL`` line per commit record whose files are missing or not of the
recorded sizes, and one when its shards come from more than one tokenizer.
"""

from __future__ import annotations

import argparse
import sys

from runtime import cli
from dataio import dataset
from dataio import dataset_find
from runtime import errors
from dataio import fs as fsutil
from dataio import locations
from dataio import indexed, manifest, naming


def build_parser() -> argparse.ArgumentParser:
    parser = cli.ArgumentParser(prog="python -m pipelines.validate", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("paths", nargs="+", metavar="PATH")
    parser.add_argument("--vocab-size", type=int, help="also check every id is below this")
    parser.add_argument("--eod-id", type=int, help="also check every non-empty document ends "
                        "with this id")
    parser.add_argument("--no-name-check", action="store_true",
                        help="do not compare dc=/sc=/tc= in the name with the files")
    return parser


def run(argv=None) -> int:
    return errors.main(_run, argv)


def _run(argv) -> int:
    args = build_parser().parse_args(argv)
    # "keep": an incomplete pair, or a path with no dataset, is listed so that it FAILs below.
    # One path at a time: the lines come in the order of the paths given.
    found = [(path, dataset_find.find_datasets([path], incomplete="keep"))
             for path in with_holdout(args.paths)]
    prefixes = [prefix for _, listed in found for prefix in listed]
    if not prefixes:
        print("FAIL no .bin/.idx datasets found in " + naming.printable(" ".join(args.paths)))
        return 1
    failed = problems = 0
    for path, listed in found:
        for prefix in listed:
            result = indexed.validate(prefix, vocab_size=args.vocab_size, eod_id=args.eod_id,
                                      check_name=not args.no_name_check)
            print(naming.printable(result.line()), flush=True)  # one line, whatever the name
            failed += not result.ok
        if dataset_find.is_folder(path):
            for line in output_problems(path, listed):
                print(naming.printable(line), flush=True)
                problems += 1
    if len(prefixes) > 1:
        print(f"{len(prefixes)} datasets: {len(prefixes) - failed} OK, {failed} FAIL"
              + (f"; output problems: {problems}" if problems else ""))
    return 1 if failed or problems else 0


def with_holdout(paths: list[str]) -> list[str]:
    """``paths``, each tokenize output folder followed by its ``holdout/`` folder when it has
    one and it is not named too: one ``validate OUT`` checks the whole output, holdout shards
    and their commit records included."""
    named = {locations.resolve_location(p) for p in paths}
    out = []
    for path in paths:
        out.append(path)
        where = dataset_find.tokenize_output_of(path) if dataset_find.is_folder(path) else None
        if where is None or where[1]:
            continue
        holdout = fsutil.join(where[0], dataset_find.HOLDOUT_DIR)
        if locations.resolve_location(holdout) not in named and dataset_find.is_folder(holdout):
            named.add(locations.resolve_location(holdout))
            out.append(holdout)
    return out


def output_problems(folder: str, prefixes: list[str]) -> list[str]:
    """FAIL lines for what a tokenize output folder's records say is wrong: a commit record
    whose files are missing or not of the recorded sizes (the shard is redone by a rerun), and
    shards of more than one tokenizer (the loader refuses them)."""
    where = dataset_find.tokenize_output_of(folder)
    if where is None:
        return []
    output, sub = where
    lines = [f"FAIL {manifest.commit_record_path(output, shard)}  {problem}; rerun the tokenize "
             "command to redo the shard" for shard, problem in
             manifest.commit_record_problems(output, sub)]
    try:
        dataset_find.refuse_mixed_tokenizers(folder, prefixes)
    except dataset.MixedTokenizersError as exc:
        lines.append(f"FAIL {exc}")
    return lines


def main() -> int:
    """The command line (``python -m pipelines.validate``, ``tokenbeam-validate``): :func:`run`
    with its interrupt handling (exit 130 / 143, see runtime/errors.py)."""
    return errors.main(_run, process=True)


if __name__ == "__main__":
    sys.exit(main())
