"""``python -m pipelines.signature --input DIR_OR_URL --output signature.json``: the data signature.

The signature is the sorted JSON list of the dataset prefixes (file names without ``.bin``/
``.idx``) directly in DIR_OR_URL (not its subfolders, so ``holdout/`` stays apart), so that blend
weights can be computed (``pipelines.blend --signature``) without downloading the data. A dataset
counts when both its files exist; temporary files of unfinished writes are ignored; a ``.bin``
without its ``.idx`` (or the reverse) is an error unless ``--skip-incomplete``.

Datasets are found by :func:`dataio.dataset_find.list_datasets`, as by every dataset command.

Exit status: 0 written, 1 incomplete datasets or none found, 2 bad command line (including an
``--output`` that is one of the dataset files, however spelled).
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from runtime import cli
from dataio import dataset_find
from runtime import errors
from dataio import fs as fsutil
from dataio import locations


def signature(directory: str, *, skip_incomplete: bool = False) -> list[str]:
    """The sorted base names of the datasets in ``directory``."""
    found = dataset_find.list_datasets(directory, incomplete="skip" if skip_incomplete else "error")
    return sorted(os.path.basename(p) for p in found)


def build_parser() -> argparse.ArgumentParser:
    parser = cli.ArgumentParser(prog="python -m pipelines.signature", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--input", required=True, metavar="DIR_OR_URL",
                        help="folder (local or fsspec URL) holding the .bin/.idx datasets")
    parser.add_argument("--output", required=True, metavar="FILE",
                        help="where to write the JSON list (local or URL; - for stdout)")
    parser.add_argument("--skip-incomplete", action="store_true",
                        help="warn about a .bin without .idx (or the reverse) instead of failing")
    return parser


def run(argv=None) -> int:
    return errors.main(_run, argv)


def _run(argv) -> int:
    args = build_parser().parse_args(argv)
    names = signature(args.input, skip_incomplete=args.skip_incomplete)
    if not names:
        raise errors.RunError(f"no .bin/.idx datasets in {args.input}")
    if args.output != "-":
        locations.refuse_same_location([args.output], [fsutil.join(args.input, n + suffix)
                                                    for n in names
                                                    for suffix in (".bin", ".idx")],
                                    flag="--output")
    fsutil.write_text(args.output, json.dumps(names, indent=1) + "\n")
    if args.output != "-":
        print(f"{len(names)} datasets -> {args.output}")
    return 0


def main() -> int:
    """The command line (``python -m pipelines.signature``, ``tokenbeam-signature``): :func:`run`
    with its interrupt handling (exit 130 / 143, see runtime/errors.py)."""
    return errors.main(_run, process=True)


if __name__ == "__main__":
    sys.exit(main())
