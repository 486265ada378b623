"""``python -m pipelines.blend``: Megatron-LM ``--data-path`` weights from token counts in names.

    python -m pipelines.blend (--signature signature.json | --input GLOB [--input GLOB ...])
        --data-ratio data_ratio.json --lang-prob lang_prob.json [--exclude exclude.json]
        --total-tokens N [--path-prefix P] --output-script data_path.sh [--report report.csv]
        [--max-epochs E]

Writes ``data_path.sh`` defining ``DATA_PATH=( --data-path "p1" "path1" ... )`` and, with
``--report``, a CSV of every shard and the totals per language and domain. The arithmetic and its
errors are specified in :mod:`transforms.blend`. A shard's path is ``P/name`` with
``--path-prefix P``; without it, the signature's names as they are, or the dataset paths found by
``--input``. Every file may be local or an fsspec URL.

Exit status: 0 written, 1 the inputs do not fit together (the message names the file and the
fix), 2 bad command line or an unreadable / malformed file.
"""

from __future__ import annotations

import argparse
import json
import re
import sys

from runtime import cli
from dataio import dataset_find
from runtime import errors
from dataio import fs as fsutil
from dataio import locations
from dataio import naming
from transforms import blend as blendlib


class UsageError(errors.ConfigError):
    """Bad flags or an unreadable configuration file (exit status 2)."""


_SUFFIXES = {"": 1, "K": 10**3, "M": 10**6, "B": 10**9, "G": 10**9, "T": 10**12}


def parse_token_count(text: str) -> int:
    """``300000000000``, ``3e11``, ``300B``, ``1.5T`` (K, M, B/G, T are powers of 1000)."""
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][0-9]+)?)\s*([KMBGT]?)\s*", text or "")
    if not m:
        raise UsageError(f"--total-tokens {text!r}: expected a number such as 300000000000, 3e11, "
                         "300B or 1.5T")
    value = float(m.group(1)) * _SUFFIXES[m.group(2)]
    if value < 1 or value != int(value):
        raise UsageError(f"--total-tokens {text!r}: must be a positive whole number of tokens")
    return int(value)


def read_json(path: str, *, flag: str):
    try:
        with fsutil.open_file(path, "rb") as f:
            raw = f.read()
    except (FileNotFoundError, IsADirectoryError):
        raise UsageError(f"{flag} {path}: file not found") from None
    try:
        return json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise UsageError(f"{flag} {path}: not valid JSON ({exc})") from None


def shard_paths(*, signature: str | None, inputs: list[str] | None) -> list[str]:
    """The shards' prefixes: the names a signature lists, or the datasets ``--input`` finds."""
    if signature:
        names = read_json(signature, flag="--signature")
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise UsageError(f"--signature {signature}: expected a JSON list of shard names, as "
                             "written by python -m pipelines.signature")
        return [n.removesuffix(".bin").removesuffix(".idx") for n in names]
    return dataset_find.find_datasets(inputs)


def make_shards(paths: list[str], *, path_prefix: str | None) -> list[blendlib.Shard]:
    shards = []
    for path in paths:
        base = path.rstrip("/").rsplit("/", 1)[-1]
        target = fsutil.join(path_prefix, base) if path_prefix else path
        shards.append(blendlib.parse_shard(base, target))
    return shards


def load_shards(*, signature: str | None, inputs: list[str] | None,
                path_prefix: str | None) -> list[blendlib.Shard]:
    return make_shards(shard_paths(signature=signature, inputs=inputs), path_prefix=path_prefix)


def refuse_overwriting_inputs(args, prefixes: list[str]) -> None:
    """No output may be a file this command reads (a config file, a dataset found by --input),
    under any spelling; raises :class:`locations.SameLocationError`."""
    read = [p for p in (args.signature, args.data_ratio, args.lang_prob, args.exclude) if p]
    if args.input:
        read += [prefix + suffix for prefix in prefixes for suffix in (".bin", ".idx")]
    for flag, path in (("--output-script", args.output_script), ("--report", args.report)):
        if path and path != "-":
            locations.refuse_same_location([path], read, flag=flag)


def build_parser() -> argparse.ArgumentParser:
    parser = cli.ArgumentParser(prog="python -m pipelines.blend", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--signature", metavar="FILE",
                        help="JSON list of shard names (python -m pipelines.signature)")
    source.add_argument("--input", action="append", metavar="GLOB",
                        help="datasets to blend (globs, folders, prefixes); repeatable")
    parser.add_argument("--data-ratio", required=True, metavar="FILE",
                        help="{domain: multiplier} or {language: {domain: multiplier}}")
    parser.add_argument("--lang-prob", required=True, metavar="FILE",
                        help="{language: probability}; normalised to sum to 1")
    parser.add_argument("--exclude", metavar="FILE",
                        help="shard names to leave out: [names] or {\"exclude_iterator_name\": "
                             "[names]}")
    parser.add_argument("--total-tokens", required=True, metavar="N",
                        help="tokens the training run will read (e.g. 300B, 1.5T, 3e11)")
    parser.add_argument("--path-prefix", metavar="P",
                        help="folder or URL put before each shard name in the script")
    parser.add_argument("--output-script", required=True, metavar="FILE",
                        help="bash file defining DATA_PATH=( --data-path p1 path1 ... )")
    parser.add_argument("--report", metavar="FILE",
                        help="CSV: every shard and totals per language and domain")
    parser.add_argument("--max-epochs", type=float, metavar="E",
                        help="report shards that would be repeated more than E times")
    return parser


def run(argv=None) -> int:
    return errors.main(_run, argv)


def _run(argv) -> int:
    args = build_parser().parse_args(argv)
    if args.max_epochs is not None and args.max_epochs <= 0:
        raise UsageError(f"--max-epochs {args.max_epochs}: must be positive")
    total = parse_token_count(args.total_tokens)
    ratios = blendlib.parse_ratios(read_json(args.data_ratio, flag="--data-ratio"),
                                   source=args.data_ratio)
    lang_prob = blendlib.parse_lang_prob(read_json(args.lang_prob, flag="--lang-prob"),
                                         source=args.lang_prob)
    exclude = blendlib.parse_exclude(read_json(args.exclude, flag="--exclude"),
                                     source=args.exclude) if args.exclude else []
    paths = shard_paths(signature=args.signature, inputs=args.input)
    refuse_overwriting_inputs(args, paths)
    shards = make_shards(paths, path_prefix=args.path_prefix)
    result = blendlib.compute_blend(
        shards, ratios=ratios, lang_prob=lang_prob, total_tokens=total, exclude=exclude,
        max_epochs=args.max_epochs,
        sources={"lang_prob": args.lang_prob, "data_ratio": args.data_ratio,
                 "exclude": args.exclude or "--exclude"})

    fsutil.write_text(args.output_script, blendlib.render_script(result))
    if args.report:
        fsutil.write_text(args.report, blendlib.render_report(result))
    for name in result.unmatched_excludes:
        print(f"warning: {naming.printable(args.exclude)} names {name!r}, which matches no shard",
              file=sys.stderr)
    for s in result.over_max_epochs():
        print(f"warning: {naming.printable(s.shard.name)} would be read "
              f"{float(s.epochs):.3g} times "
              f"(more than --max-epochs {args.max_epochs:g})", file=sys.stderr)
    left_out = [s for s in result.shards if not s.used]
    for s in left_out:
        print(f"left out: {naming.printable(s.shard.name)} ({naming.printable(s.status)})",
              file=sys.stderr)
    print("\n".join(blendlib.summary_lines(result)))
    print(f"{len(result.used)} shards -> {args.output_script}"
          + (f"; report -> {args.report}" if args.report else ""))
    return 0


def main() -> int:
    """The command line (``python -m pipelines.blend``, ``tokenbeam-blend``): :func:`run`
    with its interrupt handling (exit 130 / 143, see runtime/errors.py)."""
    return errors.main(_run, process=True)


if __name__ == "__main__":
    sys.exit(main())
