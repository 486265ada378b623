"""``python -m pipelines.signature --input DIR_OR_URL --output signature.json``: the data signature.

The signature is the sorted JSON list of the dataset prefixes (file names without ``.bin``/
``.idx``) directly in DIR_OR_URL (not its subfolders, so ``holdout/`` stays apart), so that blend
weights can be computed (``pipelines.blend --signature``) without downloading the data. A dataset
counts when both its files exist; temporary files of unfinished writes are ignored; a ``.bin``
without its ``.idx`` (or the reverse) is an error unless ``--skip-incomplete``.

Also the home of :func:`expand_inputs`, which turns ``--input`` globs into dataset prefixes for
the count, blend and merge commands.

Exit status: 0 written, 1 incomplete datasets or none found, 2 bad command line (including an
``--output`` that is one of the dataset files, however spelled).
"""

from __future__ import annotations

import argparse
import glob as globlib
import json
import os
import sys

from dataio import fs as fsutil
from dataio import indexed


class InputError(ValueError):
    """The datasets named on the command line cannot be used; the message says why and the fix."""


def _incomplete_message(prefix: str, present: str) -> str:
    missing = ".idx" if present == ".bin" else ".bin"
    return (f"{prefix}{present} has no {os.path.basename(prefix)}{missing} (an unfinished or "
            "partly copied dataset?); finish or delete it")


def list_datasets(directory: str, *, skip_incomplete: bool = False) -> list[str]:
    """Prefixes (full paths or URLs) of the complete datasets directly in ``directory``."""
    fs, inner = fsutil.filesystem_and_path(directory)
    if not fs.isdir(inner):
        raise InputError(f"{directory} is not a folder; give the folder that holds the .bin/.idx "
                         "files")
    suffixes: dict[str, set[str]] = {}
    for path in fsutil.list_files(directory):
        if path.endswith((".bin", ".idx")) and not indexed.is_temporary_name(path):
            suffixes.setdefault(path[:-4], set()).add(path[-4:])
    prefixes = []
    for prefix, found in sorted(suffixes.items()):
        if len(found) == 2:
            prefixes.append(prefix)
        elif skip_incomplete:
            print(f"warning: skipped {_incomplete_message(prefix, found.pop())}", file=sys.stderr)
        else:
            raise InputError(_incomplete_message(prefix, found.pop()) +
                             " (or pass --skip-incomplete)")
    return prefixes


def _has_magic(pattern: str) -> bool:
    return globlib.has_magic(pattern)


def expand_inputs(patterns: list[str], *, skip_incomplete: bool = False) -> list[str]:
    """Dataset prefixes named by ``--input`` values, sorted and without duplicates (however
    they are spelled: see :func:`unique_datasets`).

    A pattern may be a glob, a folder (its datasets, not its subfolders'), a ``.bin``/``.idx``
    file or a prefix. Other matches (``metadata.json``, folders matched by a wildcard) are
    ignored; a pattern matching no dataset is an error naming it.
    """
    prefixes: set[str] = set()
    for pattern in patterns:
        found: set[str] = set()
        matches = fsutil.glob(pattern)
        if not matches and not _has_magic(pattern) and fsutil.exists(indexed.idx_path(pattern)):
            matches = [indexed.idx_path(pattern)]
        for match in matches:
            fs, inner = fsutil.filesystem_and_path(match)
            if fs.isdir(inner):
                # A folder named outright is read; one a wildcard happens to match (holdout/
                # under out/*) is not descended into.
                if not _has_magic(pattern):
                    found.update(list_datasets(match, skip_incomplete=skip_incomplete))
            elif match.endswith((".bin", ".idx")) and not indexed.is_temporary_name(match):
                found.add(indexed.prefix_of(match))
        for prefix in sorted(found):
            for suffix, other in ((".bin", ".idx"), (".idx", ".bin")):
                if not fsutil.exists(prefix + other):
                    if skip_incomplete:
                        print(f"warning: skipped {_incomplete_message(prefix, suffix)}",
                              file=sys.stderr)
                        found.discard(prefix)
                        break
                    raise InputError(_incomplete_message(prefix, suffix))
        if not found:
            raise InputError(f"--input {pattern}: no .bin/.idx datasets match; check the path "
                             "and quote the glob so the shell does not expand it")
        prefixes.update(found)
    return unique_datasets(sorted(prefixes))


def unique_datasets(prefixes: list[str]) -> list[str]:
    """``prefixes`` with every dataset once, in the given order: ``out/x`` and ``out/./x`` (or a
    symlink to it) are one dataset, and counting, blending or merging it twice is never meant."""
    seen: set[str] = set()
    unique = []
    for prefix in prefixes:
        where = fsutil.resolve_location(indexed.idx_path(prefix))
        if where not in seen:
            seen.add(where)
            unique.append(prefix)
    return unique


def signature(directory: str, *, skip_incomplete: bool = False) -> list[str]:
    """The sorted base names of the datasets in ``directory``."""
    return sorted(os.path.basename(p) for p in list_datasets(directory,
                                                              skip_incomplete=skip_incomplete))


def write_text(path: str, text: str) -> None:
    """Write a small text file whole (readers never see a part of it); ``-`` is stdout."""
    if path == "-":
        sys.stdout.write(text)
        return
    fsutil.put_atomic(path, text.encode("utf-8"))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m pipelines.signature", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--input", required=True, metavar="DIR_OR_URL",
                        help="folder (local or fsspec URL) holding the .bin/.idx datasets")
    parser.add_argument("--output", required=True, metavar="FILE",
                        help="where to write the JSON list (local or URL; - for stdout)")
    parser.add_argument("--skip-incomplete", action="store_true",
                        help="warn about a .bin without .idx (or the reverse) instead of failing")
    return parser


def run(argv=None) -> int:
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    try:
        names = signature(args.input, skip_incomplete=args.skip_incomplete)
    except (InputError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if not names:
        print(f"error: no .bin/.idx datasets in {args.input}", file=sys.stderr)
        return 1
    try:
        if args.output != "-":
            fsutil.refuse_same_location([args.output], [fsutil.join(args.input, n + suffix)
                                                        for n in names
                                                        for suffix in (".bin", ".idx")],
                                        flag="--output")
    except fsutil.SameLocationError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_status
    write_text(args.output, json.dumps(names, indent=1) + "\n")
    if args.output != "-":
        print(f"{len(names)} datasets -> {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(run())
