"""``--dry-run``'s estimates of documents and tokens, with an error bound, and its check of
each input's first records (:func:`bad_records`). Importing it imports no Beam (the readers'
pure core, transforms/documents.py, comes on first use).

A few files of each format are sampled (:data:`SAMPLE_FILES`, spread over the list); the
others are estimated at the rate of the sampled ones. Each estimate is a rate per byte times
the file's bytes, never a rate per document times a document count: documents vary in length
along a file (a corpus sorted by source or date), so tokens per document taken at one place
are biased, while tokens per byte hardly move.

- plain JSONL: :data:`WINDOWS` windows spread over the file (seek: nothing else is read);
  tokens and documents per byte, times the file's size.
- .jsonl.gz / .jsonl.zst: the first :data:`STORED_SAMPLE` stored bytes are streamed through the
  decompressor (counted, not kept) for the ratio of decompressed to stored bytes, and the
  first :data:`TEXT_SAMPLE` decompressed bytes are tokenized; tokens per decompressed byte,
  times the size, times the ratio. A stream cannot be entered midway: the sample is its head.
- Parquet: up to :data:`ROW_GROUPS` row groups spread over the file; documents are the footer's
  row count; tokens per text byte (UTF-8) of the rows tokenized, times the file's text bytes
  (exact when every row group was sampled, else the footer's uncompressed column sizes scaled
  by the sampled groups' text share).

The bound: each rate's standard error from the spread of its chunks (a chunk: up to
:data:`CHUNK_DOCS` documents), combined with the ratio's, times :data:`Z`; a file estimated
at the sampled files' rate gets the lowest and highest of their bounds. Totals add the bounds
(errors of files are not assumed to cancel).
"""

from __future__ import annotations

import dataclasses
import math

from runtime import errors
from dataio import fs as fsutil
from dataio import readers
from dataio import sampling
from dataio.elements import WorkItem

SAMPLE_FILES = 4  # files sampled per format; the others get the sampled files' rate
STORED_SAMPLE = 4 << 20  # a compressed file's stored bytes streamed for its ratio
TEXT_SAMPLE = 1 << 20  # decompressed bytes of a file tokenized (JSONL), all windows together
WINDOWS = 16  # places sampled in a plain JSONL file (a seek each)
ROW_GROUPS = 8  # row groups sampled in a Parquet file
ROWS_PER_GROUP = 256  # rows tokenized per sampled Parquet row group
CHUNK_DOCS = 16  # documents per chunk of the standard error
Z = 3.0  # the bound: Z standard errors


def _documents():
    from transforms import documents  # imports Beam's coders: only when estimating

    errors.anticipate(documents.BadRecord, status=errors.EXIT_FAILED)
    return documents


@dataclasses.dataclass(frozen=True, kw_only=True)
class Estimate:
    documents: float
    tokens: float
    low: float  # tokens: the bound
    high: float
    documents_low: float
    documents_high: float
    note: str = ""  # "" for a sampled file; else how it was estimated
    # another file's bound at this one's rate (the chunks' spread: a file read whole has no
    # bound of its own, yet its rate is a sample of the others'); None: low..high
    rate_bound: tuple | None = None  # (tokens' relative bound, documents')

    def line(self) -> str:
        def within(low, high, value) -> str:
            return f"±{100 * (high - low) / 2 / max(value, 1):.0f}%"

        docs = within(self.documents_low, self.documents_high, self.documents)
        docs = "" if docs == "±0%" else f" ({docs})"
        return (f"~{int(self.documents):,} documents{docs}, ~{int(self.tokens):,} tokens "
                f"({within(self.low, self.high, self.tokens)}{self.note})")


@dataclasses.dataclass
class _Chunks:
    """(documents, bytes, tokens) of each chunk of a sample."""

    rows: list = dataclasses.field(default_factory=list)

    def add(self, docs: int, nbytes: int, tokens: int) -> None:
        self.rows.append((docs, nbytes, tokens))

    def rate(self, which: int) -> tuple[float, float]:
        """(column ``which`` per byte, its relative standard error: a ratio estimator over the
        chunks; 1.0 where fewer than two chunks say nothing of the spread)."""
        n = len(self.rows)
        b = sum(r[1] for r in self.rows)
        y = sum(r[which] for r in self.rows)
        if not b or not y:
            return (y / b if b else 0.0), 0.0 if (b and n >= 2) else 1.0
        rate = y / b
        if n < 2:
            return rate, 1.0
        var = sum((r[which] - rate * r[1]) ** 2 for r in self.rows) / (n - 1) / n
        return rate, math.sqrt(var) / (b / n) / rate


def _count_tokens(tokenizer, texts: list, *, eod: bool) -> int:
    texts = [t if isinstance(t, str) else "".join(t) for t in texts]
    try:
        lengths = list(tokenizer.encode_batch(texts)[1]) if texts else []
    except Exception:  # noqa: BLE001 - a text the tokenizer refuses (NullTokenizer on words):
        # the job makes it a bad record; the estimate counts the texts it can tokenize
        lengths = []
        for text in texts:
            try:
                lengths.extend(tokenizer.encode_batch([text])[1])
            except Exception:  # noqa: BLE001
                pass
    return int(sum(lengths)) + (int(sum(1 for n in lengths if n > 0)) if eod else 0)


def _jsonl_sample(f: readers.InputFile, keys, tokenizer, *, eod: bool) -> tuple[_Chunks, str]:
    chunks = _Chunks()
    docs = _documents()
    if f.format == "jsonl":
        window = max(1, TEXT_SAMPLE // WINDOWS)
        starts = sorted({int(i * max(f.size - window, 0) / max(WINDOWS - 1, 1))
                         for i in range(WINDOWS)}) if f.size > TEXT_SAMPLE else [0]
        items = [WorkItem(path=f.path, stem=f.stem, format=f.format, index=0, start=s,
                                  end=s + window if f.size > TEXT_SAMPLE else None)
                 for s in starts]
        what = ("whole" if f.size <= TEXT_SAMPLE
                else f"{len(items)} windows of {window / 2**20:.2f} MiB")
    else:
        items = [sampling.sample_item(f, head=TEXT_SAMPLE)]
        what = f"first {TEXT_SAMPLE / 2**20:.2f} MiB decompressed"
    for item in items:
        # a batch of CHUNK_DOCS documents is a chunk; its bytes: its lines' in the file
        for out in docs.read_documents(item, keys, max_docs=CHUNK_DOCS):
            if isinstance(out, docs.DocumentBatch):
                chunks.add(len(out), out.num_bytes,
                           sum(_count_tokens(tokenizer, out.texts[k], eod=eod) for k in keys))
    return chunks, what


def _ratio(f: readers.InputFile) -> tuple[float, float, str]:
    """(decompressed bytes per stored byte, its relative standard error, what was read)."""
    points = sampling.decompressed_sizes(f.path, f.format, stored=STORED_SAMPLE,
                                        step=max(STORED_SAMPLE // 16, 1))
    if not points or not points[-1][0]:
        return 0.0, 1.0, "nothing could be decompressed"
    stored, out = points[-1]
    if stored >= f.size:
        return out / stored, 0.0, "whole file decompressed"
    steps = [(s1 - s0, d1 - d0) for (s0, d0), (s1, d1) in zip(points, points[1:])]
    what = f"first {stored / 2**20:.1f} MiB stored decompressed"
    if len(steps) < 2:
        return out / stored, 0.5, what
    # differences between marks: the decompressor's read-ahead cancels out
    s, d = sum(x for x, _ in steps), sum(y for _, y in steps)
    ratio = d / s
    n = len(steps)
    var = sum((y - ratio * x) ** 2 for x, y in steps) / (n - 1) / n
    return ratio, math.sqrt(var) / (s / n) / ratio, what


def _parquet(f: readers.InputFile, keys, tokenizer, *, eod: bool) -> tuple[Estimate, str]:
    import pyarrow.parquet as pq

    chunks = _Chunks()
    with fsutil.open_file(f.path, "rb") as fh:
        pf = pq.ParquetFile(fh)
        meta = pf.metadata
        present = [k for k in keys if k in pf.schema_arrow.names]
        groups = range(meta.num_row_groups)
        sizes = [readers.row_group_bytes(pf, [g], present) for g in groups]
        small = [g for g in groups if sizes[g] <= sampling.PARQUET_SAMPLE_BYTES]
        picked = sorted({small[round(i * (len(small) - 1) / max(ROW_GROUPS - 1, 1))]
                         for i in range(min(ROW_GROUPS, len(small)))}) if small else []
        text = {}  # sampled group -> its text bytes (UTF-8)
        for g in picked:
            table = pf.read_row_group(g, columns=present)
            values = {k: table.column(k).to_pylist() for k in present}
            text[g] = sum(len((v if isinstance(v, str) else "".join(v)).encode("utf-8"))
                          for vs in values.values() for v in vs if v is not None)
            rows = [r for r in range(table.num_rows)
                    if all(values.get(k, [None] * table.num_rows)[r] is not None for k in keys)]
            rows = rows[:ROWS_PER_GROUP]
            for lo in range(0, len(rows), CHUNK_DOCS):
                part = rows[lo:lo + CHUNK_DOCS]
                texts = {k: [values[k][r] for r in part] for k in present}
                tokens = sum(_count_tokens(tokenizer, ts, eod=eod) for ts in texts.values())
                nbytes = sum(len((t if isinstance(t, str) else "".join(t)).encode("utf-8"))
                             for ts in texts.values() for t in ts)
                chunks.add(len(part), nbytes, tokens)
        docs = meta.num_rows
    if not chunks.rows:
        raise NoSample("no row group small enough to sample" if not small else
                        "no documents in the sample")
    rate, rate_se = chunks.rate(2)
    if len(picked) == len(sizes):
        total_text, text_se = sum(text.values()), 0.0
    else:
        share = [text[g] / max(sizes[g], 1) for g in picked]
        mean = sum(text.values()) / max(sum(sizes[g] for g in picked), 1)
        total_text = mean * sum(sizes)
        n = len(share)
        text_se = (math.sqrt(sum((x - mean) ** 2 for x in share) / (n - 1) / n) / mean
                   if n >= 2 and mean else 0.5)
    tokens = rate * total_text
    rel = Z * math.hypot(rate_se, text_se)
    what = (f"{len(picked)} of {len(sizes)} row groups, {ROWS_PER_GROUP} rows each at most")
    return Estimate(documents=docs, tokens=tokens, low=tokens * max(0.0, 1 - rel),
                    high=tokens * (1 + rel), documents_low=docs, documents_high=docs), what


class NoSample(Exception):
    """The sample of a file holds no document (the message says why)."""


def estimate_file(f: readers.InputFile, keys, tokenizer, *, eod: bool) -> tuple[Estimate, str]:
    """(the estimate of ``f``, what was sampled). Raises readers.CorruptFileError for a file
    that cannot be read, NoSample when the sample holds no document."""
    if f.error:
        raise readers.CorruptFileError(f.error)
    if f.format == "parquet":
        try:
            return _parquet(f, keys, tokenizer, eod=eod)
        except (NoSample, OSError):
            raise
        except Exception as exc:  # noqa: BLE001 - any pyarrow failure means an unreadable file
            raise readers.CorruptFileError(f"{f.path}: not a readable Parquet file ({exc})"
                                           ) from exc
    scale, scale_se, how = float(f.size), 0.0, ""
    if f.format != "jsonl":
        broken = unreadable(f)
        if broken:
            raise readers.CorruptFileError(broken)
        ratio, scale_se, how = _ratio(f)
        if not ratio:
            raise NoSample("no documents in the sample")
        scale = f.size * ratio
    chunks, what = _jsonl_sample(f, keys, tokenizer, eod=eod)
    if not chunks.rows:
        raise NoSample("no documents in the sample")
    what = f"{what}; {how}" if how else what
    tokens_rate, tokens_se = chunks.rate(2)
    docs_rate, docs_se = chunks.rate(0)
    tokens, docs = tokens_rate * scale, docs_rate * scale
    rel_t, rel_d = Z * math.hypot(tokens_se, scale_se), Z * math.hypot(docs_se, scale_se)
    rate_bound = None
    if f.format == "jsonl" and f.size <= TEXT_SAMPLE:
        # read whole: counted, not estimated; the chunks' spread bounds only other files
        tokens, docs = (float(sum(r[i] for r in chunks.rows)) for i in (2, 0))
        rate_bound, rel_t, rel_d = (rel_t, rel_d), 0.0, 0.0
    return Estimate(documents=docs, tokens=tokens, low=tokens * max(0.0, 1 - rel_t),
                    high=tokens * (1 + rel_t), documents_low=docs * max(0.0, 1 - rel_d),
                    documents_high=docs * (1 + rel_d), rate_bound=rate_bound), what


def at_rate_of(f: readers.InputFile, sampled: list[tuple[readers.InputFile, Estimate]]
               ) -> Estimate:
    """``f`` estimated at the sampled files' rate per stored byte (of its format); the bound:
    the lowest and highest of their bounds."""
    size = sum(s.size for s, _ in sampled) or 1
    per = [_per_byte_bounds(s, e) for s, e in sampled]
    return Estimate(documents=f.size * sum(e.documents for _, e in sampled) / size,
                    tokens=f.size * sum(e.tokens for _, e in sampled) / size,
                    low=f.size * min(p[0] for p in per), high=f.size * max(p[1] for p in per),
                    documents_low=f.size * min(p[2] for p in per),
                    documents_high=f.size * max(p[3] for p in per),
                    note=", at the sampled files' rate")


def _per_byte_bounds(s: readers.InputFile, e: Estimate) -> tuple[float, ...]:
    """(tokens low, high, documents low, high) per stored byte of a sampled file."""
    size = max(s.size, 1)
    if e.rate_bound is None:
        return (e.low / size, e.high / size, e.documents_low / size, e.documents_high / size)
    rel_t, rel_d = e.rate_bound
    return (e.tokens * max(0.0, 1 - rel_t) / size, e.tokens * (1 + rel_t) / size,
            e.documents * max(0.0, 1 - rel_d) / size, e.documents * (1 + rel_d) / size)


def chosen(files: list[readers.InputFile]) -> set[str]:
    """The paths sampled: per format, up to :data:`SAMPLE_FILES` spread over the list."""
    picked: set[str] = set()
    by_format: dict[str, list[readers.InputFile]] = {}
    for f in files:
        by_format.setdefault(f.format, []).append(f)
    for of_format in by_format.values():
        n = len(of_format)
        k = min(SAMPLE_FILES, n)
        picked |= {of_format[round(i * (n - 1) / max(k - 1, 1))].path for i in range(k)}
    return picked


def unreadable(f: readers.InputFile) -> str:
    """Why the run cannot read ``f`` at all, found cheaply ("" when nothing is found): what
    discovery found wrong with it, or a compressed file of which not one byte decompresses
    (the run's reader fails its shards). A file damaged further in is found by the run only."""
    if f.error:
        return f.error
    if f.format in ("jsonl.gz", "jsonl.zst") and not f.size:
        return f"{f.path}: an empty file, not even a {f.format} header (leave it out)"
    if f.format in ("jsonl.gz", "jsonl.zst"):
        points = sampling.decompressed_sizes(f.path, f.format, stored=1 << 16, step=1 << 16,
                                            most=1)
        if not points or not points[-1][1]:
            empty = bool(points) and points[-1][0] >= f.size
            if not empty:   # a whole stream read to its end with no text in it is empty
                return (f"{f.path}: nothing decompresses: not a {f.format} file, or damaged "
                        "from its start (re-copy it or leave it out)")
    return ""


def bad_records(input_file: readers.InputFile, keys) -> str:
    """What the first records of the file say of its bad records ("" when none): a --json-keys
    key they lack fails the run's shards. Raises readers.CorruptFileError."""
    item = sampling.sample_item(input_file)  # bounded in bytes (sampling.SAMPLE_BYTES)
    n_docs = 0
    bad: list = []  # the sample's bad records (BadRecordReport)
    for out in _documents().read_documents(item, keys, max_docs=256):
        if isinstance(out, _documents().DocumentBatch):
            n_docs += len(out)
        else:
            bad.append(out)
        if n_docs + len(bad) >= 256:
            break
    if not bad:
        return ""
    sampled = n_docs + len(bad)
    unit = "row" if input_file.format == "parquet" else "line"
    share = f"all {sampled}" if not n_docs else f"{len(bad)} of {sampled}"
    return f"{share} sampled records are bad; the first ({unit} {bad[0].line}): {bad[0].reason}"


def estimate_files(files: list[readers.InputFile], keys, tokenizer, *, eod: bool
                   ) -> tuple[dict[str, object], dict[str, str], str]:
    """(path -> its Estimate, or the line that says why there is none; path -> what of it was
    sampled; the total line) of ``files``: a few sampled per format, the others at their
    rate."""
    sampled = chosen(files)
    found: dict[str, object] = {}
    what: dict[str, str] = {}
    for f in files:
        if f.path not in sampled:
            continue
        try:
            found[f.path], what[f.path] = estimate_file(f, keys, tokenizer, eod=eod)
        except (readers.CorruptFileError, OSError) as exc:
            found[f.path] = f"unreadable: {exc}"
        except NoSample as exc:
            found[f.path] = str(exc)
    like: dict[str, list] = {}  # format -> (file, Estimate) of its sampled files
    for f in files:
        if isinstance(found.get(f.path), Estimate):
            like.setdefault(f.format, []).append((f, found[f.path]))
    for f in files:
        if f.path not in found:
            found[f.path] = (at_rate_of(f, like[f.format]) if f.format in like else
                             f"not estimated: no sampled {f.format} file could be read")
    got = [e for e in found.values() if isinstance(e, Estimate)]
    if not got:
        return found, what, ""
    docs, tokens = int(sum(e.documents for e in got)), int(sum(e.tokens for e in got))
    low, high = int(sum(e.low for e in got)), int(sum(e.high for e in got))
    total = (f"estimate: ~{docs:,} documents, ~{tokens:,} tokens (between {low:,} and {high:,}) "
             f"for {len(got)} of {len(files)} files, {len(what)} of them sampled; the bound: "
             f"{Z:g} standard errors of the sampled rates")
    return found, what, total
