"""``python -m pipelines.inspect PATH``: show what a tokenize output holds.

PATH is a tokenize output folder (its datasets in name order; ``--split holdout`` for its
``holdout/`` subfolder), a dataset prefix, or a ``.bin``/``.idx`` file; local or an fsspec URL.
Prints one line per dataset (documents, sequences, tokens, dtype), the totals, the vocabulary size
from ``metadata.json``, document length percentiles over the non-empty documents, and with
``--decode N`` the first N documents decoded by the tokenizer given in ``--tokenizer-model`` (a
HuggingFace folder or ``tokenizer.json``, or a SentencePiece ``.model``; by default the one
``metadata.json`` records, when it exists on this machine). ``--plot FILE`` writes a
histogram of document lengths as a PNG (needs matplotlib: ``pip install tokenbeam[plot]``).
``--report [FILE]`` writes one self-contained HTML page to open in a browser (default:
``report.html`` in the output folder): the per-dataset table with tokens per input byte and bad
records, length histograms, the tokenizer and options, the bad records' reasons
(pipelines/_inspect_report.py).
Reads only the ``.idx`` files, plus the tokens of the documents it decodes (and for
``--report``, ``metadata.json`` and the ``_errors/`` files).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from typing import Callable

import numpy as np

from runtime import cli
from dataio import dataset as dsmod
from dataio import dataset_find
from runtime import errors
from dataio import fs as fsutil
from dataio import locations
from dataio import indexed
from dataio.manifest import ERRORS_DIR
from dataio.naming import printable
from pipelines import _inspect_report as report
from transforms import tokenizer as tk

PERCENTILES = (10, 50, 90, 99)


class InspectError(errors.ConfigError):
    """What inspect was pointed at cannot be opened: a path, split or flag to fix (status 2)."""


@dataclasses.dataclass(frozen=True)
class ShardStats:
    name: str
    documents: int
    sequences: int
    tokens: int
    dtype: str


def shard_stats(shard: dsmod.Shard) -> ShardStats:
    return ShardStats(shard.name, shard.document_count, shard.sequence_count, shard.token_count,
                      str(shard.dtype))


def length_summary(lengths: np.ndarray) -> dict[str, float]:
    """min, percentiles, max and mean of ``lengths`` (empty dict when there are none)."""
    if lengths.size == 0:
        return {}
    summary = {"min": float(lengths.min())}
    values = np.percentile(lengths, PERCENTILES)
    summary.update({f"p{p}": float(v) for p, v in zip(PERCENTILES, values)})
    summary.update(max=float(lengths.max()), mean=float(lengths.mean()))
    return summary


def format_table(stats: list[ShardStats]) -> list[str]:
    total = ShardStats(f"total ({len(stats)} dataset{'s' * (len(stats) != 1)})",
                       sum(s.documents for s in stats), sum(s.sequences for s in stats),
                       sum(s.tokens for s in stats), ",".join(sorted({s.dtype for s in stats})))
    width = max(len("dataset"), *(len(printable(s.name)) for s in [*stats, total]))
    line = "{:<{w}}  {:>11}  {:>11}  {:>14}  {}"
    rows = [line.format("dataset", "documents", "sequences", "tokens", "dtype", w=width)]
    for s in [*stats, total]:
        rows.append(line.format(printable(s.name), s.documents, s.sequences, s.tokens, s.dtype,
                                w=width))
    return rows


class DecodeError(errors.RunError):
    """The dataset's ids do not fit the tokenizer given to decode them (status 1)."""


@dataclasses.dataclass(frozen=True)
class Decoder:
    """Token ids to text with one tokenizer; :meth:`__call__` refuses an id outside its
    vocabulary (a dataset tokenized with another tokenizer) rather than decode garbage."""

    vocab_size: int
    _decode: Callable[[list[int]], str]

    def __call__(self, ids: np.ndarray, *, document: int = 0) -> str:
        if len(ids):
            low, high = int(np.min(ids)), int(np.max(ids))
            if low < 0 or high >= self.vocab_size:
                raise DecodeError(
                    f"id {high if high >= self.vocab_size else low} at document {document} is "
                    f"outside the tokenizer's vocabulary (size {self.vocab_size}): wrong "
                    "--tokenizer-model for this dataset?")
        return self._decode([int(t) for t in ids])


def load_decoder(model: str) -> Decoder:
    """A :class:`Decoder` for a HuggingFace ``tokenizer.json`` (or a folder holding one) or a
    SentencePiece ``.model``, loaded as the tokenize job loads it (a damaged or truncated file
    is a configuration error naming it: transforms/tokenizer/load.py). Special tokens (EOD) are
    left out of the text."""
    path = model
    if os.path.isdir(path):
        path = os.path.join(path, "tokenizer.json")
        if not os.path.exists(path):
            raise InspectError(f"--tokenizer-model {model}: the folder has no tokenizer.json; "
                               "pass a HuggingFace tokenizer folder, a tokenizer.json or a "
                               "SentencePiece .model")
    if not os.path.exists(path):
        raise InspectError(f"--tokenizer-model {model}: no such file or folder")
    if path.endswith(".json"):
        tok = tk.load_tokenizer(tk.TokenizerSpec(kind="HuggingFaceTokenizer", model=model))
        backend = tok.backend
        return Decoder(tok.vocab_size, lambda ids: backend.decode(ids, skip_special_tokens=True))
    if path.endswith(".model"):
        tok = tk.load_tokenizer(tk.TokenizerSpec(kind="SentencePieceTokenizer", model=path))
        return Decoder(tok.vocab_size, tok.decode)
    raise InspectError(f"--tokenizer-model {model}: expected a folder with tokenizer.json, a "
                       "tokenizer.json or a SentencePiece .model")


def recorded_tokenizer(prefixes: list[str]) -> str | None:
    """The tokenizer path the tokenize job recorded in metadata.json, if it exists here."""
    for _, meta in dataset_find.metadata_files(prefixes):
        model = (meta.get("tokenizer") or {}).get("model")
        if model and os.path.exists(model):
            return model
    return None


def plot_lengths(lengths: np.ndarray, path: str, *, title: str, bins: int = 60) -> None:
    """A histogram of document lengths (log-spaced bins when they span over two decades)."""
    try:
        import matplotlib
    except ImportError:
        raise errors.RunError("--plot needs matplotlib: pip install 'tokenbeam[plot]'") from None
    matplotlib.use("Agg")  # no display on clusters; must precede pyplot
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=100)
    if lengths.size:
        edges, log = report.length_bins(lengths, bins)
        ax.hist(lengths, bins=edges, color="#4878a8", edgecolor="white", linewidth=0.3)
        if log:
            ax.set_xscale("log")
        for p, style in ((50, "--"), (99, ":")):
            value = float(np.percentile(lengths, p))
            ax.axvline(value, color="#c44e52", linestyle=style, label=f"p{p} = {value:,.0f}")
        ax.legend()
    else:
        ax.text(0.5, 0.5, "no non-empty documents", ha="center", transform=ax.transAxes)
    ax.set_xlabel("document length (tokens)")
    ax.set_ylabel("documents")
    ax.set_title(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, format="png")
    plt.close(fig)


def build_parser() -> argparse.ArgumentParser:
    parser = cli.ArgumentParser(prog="python -m pipelines.inspect", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("path", metavar="PATH")
    parser.add_argument("--split", choices=dataset_find.SPLIT_NAMES,
                        help="for a folder: 'holdout' shows its holdout/ subfolder")
    parser.add_argument("--decode", type=int, default=0, metavar="N",
                        help="print the first N documents decoded (needs --tokenizer-model)")
    parser.add_argument("--tokenizer-model", metavar="PATH",
                        help="HuggingFace tokenizer folder or tokenizer.json, or SentencePiece "
                             ".model, used by --decode (default: the one metadata.json names)")
    parser.add_argument("--max-chars", type=int, default=2000, metavar="N",
                        help="cut each decoded document after N characters (0: no limit)")
    parser.add_argument("--plot", metavar="FILE.png",
                        help="write a histogram of document lengths to this PNG")
    parser.add_argument("--report", nargs="?", const="", metavar="FILE.html",
                        help="write an HTML page to open in a browser (per-dataset table, "
                             "length histograms, tokenizer and options, bad records); "
                             "default FILE: report.html in the output folder; a folder: "
                             "report.html in it")
    return parser


def default_report_path(path: str, prefixes: list[str], split: str | None) -> str:
    """``report.html`` (``report_holdout.html`` for ``--split holdout``) in the folder PATH
    names, or beside the dataset PATH names."""
    folder = path if dataset_find.is_folder(path) else (os.path.dirname(prefixes[0]) or ".")
    return fsutil.join(folder, f"report_{split}.html" if split else "report.html")


def report_rows(*, prefixes: list[str], names: list[str], shards: list[dsmod.Shard],
                lengths: list[np.ndarray], metadata: list[tuple[str, dict]],
                bad: report.BadRecords) -> list[report.Row]:
    """The report's table: each dataset's counts and lengths, and where metadata.json lists it,
    its input, the input's size and the input's bad records."""
    listed = {}
    for meta_path, meta in metadata:
        folder = os.path.dirname(meta_path)
        sizes = {i.get("path"): i.get("size") for i in meta.get("inputs") or []
                 if isinstance(i, dict)}
        for entry in meta.get("shards") or []:
            if isinstance(entry, dict) and entry.get("name"):
                source = entry.get("input")
                listed[fsutil.join(folder, entry["name"])] = (source, sizes.get(source))
    rows = []
    for prefix, name, shard, of_shard in zip(prefixes, names, shards, lengths):
        source, size = listed.get(indexed.prefix_of(prefix), (None, None))
        rows.append(report.Row(
            name=name, documents=shard.document_count, sequences=shard.sequence_count,
            tokens=shard.token_count, dtype=str(shard.dtype), lengths=of_shard,
            input=source, input_bytes=size,
            bad_records=bad.by_input.get(source, 0) if source else None))
    return rows


def write_report(path: str, *, title: str, prefixes: list[str], names: list[str],
                 shards: list[dsmod.Shard], lengths: list[np.ndarray],
                 metadata: list[tuple[str, dict]], vocab_size: int | None,
                 summary: dict[str, float]) -> None:
    """The ``--report`` page at ``path`` (local or a URL), from what inspect read plus the
    output's ``_errors/`` and ``_failures/`` records (those of the first metadata.json's
    folder: a holdout split's are its parent's)."""
    output = os.path.dirname(metadata[0][0]) if metadata else None
    bad = report.read_bad_records(output) if output else report.BadRecords()
    empty = sum(int((of_shard == 0).sum()) for of_shard in lengths)
    page = report.render(
        title=title, rows=report_rows(prefixes=prefixes, names=names, shards=shards,
                                      lengths=lengths, metadata=metadata, bad=bad),
        meta=metadata[0][1] if metadata else None, bad=bad,
        errors_where=fsutil.join(output, ERRORS_DIR) if output else None,
        vocab_size=vocab_size, summary=summary, empty=empty,
        failed=report.not_committed(output, metadata[0][1]) if output else [])
    fsutil.write_bytes_atomic(path, page.encode("utf-8"), durable=False)


def run(argv=None) -> int:
    return errors.main(_run, argv)


def _run(argv) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.decode < 0:
        parser.error("--decode N needs N >= 0")
    try:
        prefixes = dataset_find.resolve_prefixes(args.path, args.split)
        model = args.tokenizer_model
        if args.decode and not model:
            model = recorded_tokenizer(prefixes)
            if model is None:
                parser.error("--decode needs --tokenizer-model (a HuggingFace tokenizer folder or "
                             "tokenizer.json, or a SentencePiece .model); metadata.json names "
                             "none that exists here")
        decode = load_decoder(model) if args.decode else None
        metadata = dataset_find.metadata_files(prefixes)
        read = ([p + suffix for p in prefixes for suffix in (".bin", ".idx")]
                + [path for path, _ in metadata] + ([model] if model else []))
        if args.plot:  # a typo'd --plot out/x.bin would replace the dataset it is reading
            locations.refuse_same_location([args.plot], read, flag="--plot")
        if args.report == "":
            args.report = default_report_path(args.path, prefixes, args.split)
        elif args.report and dataset_find.is_folder(args.report):  # --report OUT: the page goes there
            args.report = default_report_path(args.report, prefixes, args.split)
        if args.report:
            locations.refuse_same_location([args.report], read, flag="--report")
        shards = [dsmod.Shard(p) for p in prefixes]
        vocab_size = dataset_find.read_vocab_size(prefixes)
    except (FileNotFoundError, ValueError) as exc:
        # dataio.dataset is a library and raises the builtin errors; to this command whatever
        # keeps it from opening its datasets (a damaged shard included) is a path to fix.
        raise InspectError(str(exc)) from None

    stats = [dataclasses.replace(shard_stats(s), name=name)
             for s, name in zip(shards, dataset_find.shown_names(prefixes))]
    for row in format_table(stats):
        print(row)
    print(f"vocab size: {vocab_size if vocab_size is not None else 'unknown (no metadata.json)'}")
    per_shard = [s.document_lengths() for s in shards]
    lengths_all = np.concatenate(per_shard)
    lengths = lengths_all[lengths_all > 0]
    print(f"empty documents: {int(lengths_all.size - lengths.size)}")
    summary = length_summary(lengths)
    if summary:
        print("document length (tokens, non-empty documents): "
              + "  ".join(f"{k} {v:,.1f}" if k == "mean" else f"{k} {v:,.0f}"
                          for k, v in summary.items()))
    holdout = fsutil.join(args.path, dataset_find.HOLDOUT_DIR)
    if args.split is None and dataset_find.is_folder(holdout):
        count = len(dataset_find.list_datasets(holdout, incomplete="idx"))
        if count:
            print(f"{dataset_find.HOLDOUT_DIR}/: {count} dataset{'s' * (count != 1)} "
                  "(show them with --split holdout)")

    if decode is not None:
        loader = dsmod.TokenDataset(shards, 1, vocab_size=vocab_size)
        for j in range(min(args.decode, loader.num_documents())):
            ids = loader.document(j)
            text = decode(ids, document=j)
            cut = args.max_chars and len(text) > args.max_chars
            print(f"--- document {j} ({len(ids)} tokens) ---")
            print(text[:args.max_chars] + " [...]" if cut else text)
    if args.plot:
        name = os.path.basename(args.path.rstrip("/"))
        title = (f"{name}: {lengths.size:,} non-empty documents, "
                 f"{sum(s.tokens for s in stats):,} tokens")
        plot_lengths(lengths, args.plot, title=title)
        print(f"histogram: {printable(args.plot)}")
    if args.report:
        write_report(args.report, title=args.path, prefixes=prefixes,
                     names=[s.name for s in stats], shards=shards, lengths=per_shard,
                     metadata=metadata, vocab_size=vocab_size, summary=summary)
        print(f"report: {printable(args.report)} (open it in a browser)")
    return 0


def main() -> int:
    """The command line (``python -m pipelines.inspect``, ``tokenbeam-inspect``): :func:`run`
    with its interrupt handling (exit 130 / 143, see runtime/errors.py)."""
    return errors.main(_run, process=True)


if __name__ == "__main__":
    sys.exit(main())
