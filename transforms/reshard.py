"""Reshard raw text: JSONL/Parquet files in, JSONL shards of about a target size out.

Contract:

- Inputs are grouped by their name fields (the template's fields other than ``split``). Within a
  group the files are laid end to end in sorted path order on one "offset line": a JSONL file
  contributes its bytes (decompressed for ``.gz``/``.zst``), a Parquet file the bytes of its rows
  as JSON lines. The line is cut into ``n = ceil(total / target)`` equal spans and a document
  belongs to the span in which it starts. So no document is ever split, and a shard holds at
  most ``ceil(total / n) <= target`` bytes of document starts plus the rest of its last document.
- A shard's documents keep input order, one per line ending in ``\\n``: JSONL lines are copied
  byte for byte (whitespace-only lines dropped, a missing final newline added); Parquet rows are
  serialised with orjson (column order, UTF-8, no spaces; bytes as UTF-8 text or base64,
  decimals as strings).
- Same inputs and options, same output bytes, whatever the runner, bundling, parallelism or
  retries: the plan depends only on the sorted inputs and their measured sizes (measured in
  parallel, planned in one place), and gzip/zstd output carries no timestamp or file name.
- Shards are written under a temporary folder and renamed to their final names
  (``template.format(**fields, split=i)`` + extension) only after every shard is written, all
  or nothing as readers see it: the output's ``_reshard_manifest`` is written last (the bytes
  and that commit: :mod:`dataio.jsonl_sink`; the final names: :func:`final_names`).
- An input that cannot be read whole (a truncated or corrupt ``.gz``/``.zst``, a short Parquet
  file, a path that cannot be opened) is found while measuring, and then nothing is written: the
  offsets of a group depend on every file in it, and shards missing a file's documents would look
  complete. Every such file is listed with its reason (the ``failed`` list of
  :data:`dataio.jsonl_sink.SUMMARY_NAME`).
  Planned shards that received no document (possible only when single documents are larger than
  a span) are dropped, and ``split`` numbers the remaining shards of a group 0, 1, 2, ...

Costs: plain JSONL is never read before writing (its size is its offset line). Compressed JSONL
is decompressed once to measure it, and each shard that starts inside it decompresses it again
from the beginning (gzip/zstd streams cannot be entered in the middle), so a compressed file that
spans k shards is decompressed about k/2 + 1 times. Parquet rows are serialised once to measure
and once to write.

Pure planning functions come first (no Beam, no I/O); reading documents, naming and committing
shards, and the Beam shell follow.
"""

from __future__ import annotations

import base64
import dataclasses
import decimal
import math
import re
import string
from typing import Iterable, Iterator, Sequence

import apache_beam as beam
import orjson

from runtime import errors, faults
from dataio import fs as fsutil
from dataio import jsonl_sink, naming, readers
from runtime import workers
from dataio.elements import WorkItem

FIELD_FLAGS = ("language", "domain", "subdomain")
SPLIT = "split"
_PARQUET_BATCH_ROWS = 4096


class ReshardError(errors.ConfigError):
    """Bad reshard configuration or inputs; the message names the flag or file and the fix
    (exit status 2)."""


_SIZE = re.compile(r"\s*([0-9]*\.?[0-9]+)\s*([KMGT]i?B|B)?\s*", re.IGNORECASE)
_UNITS = {"b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
          "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}


def parse_size(text: str) -> int:
    """``1GB`` = 10**9 bytes, ``1GiB`` = 2**30, ``500MB``, ``64KiB``, or a plain byte count."""
    m = _SIZE.fullmatch(str(text))
    if not m:
        raise ReshardError(f"--target-size {text!r}: expected a size such as 1GB, 512MB, 1GiB "
                           "or a number of bytes")
    size = float(m.group(1)) * _UNITS[(m.group(2) or "B").lower()]
    if size < 1:
        raise ReshardError(f"--target-size {text!r}: must be at least one byte")
    return int(size)


# ---------------------------------------------------------------------------------------------
# names


class _SplitMarker:
    """Stands for the split number when a name is turned into a pattern (any format spec)."""

    def __format__(self, spec: str) -> str:
        return "\x00SPLIT\x00"


def template_fields(template: str) -> list[str]:
    """The field names of a ``str.format`` template, in order, each once."""
    names: list[str] = []
    try:
        parsed = list(string.Formatter().parse(template))
    except ValueError as exc:
        raise ReshardError(f"--name-template {template!r}: {exc}") from None
    for _, field, _, _ in parsed:
        if field is None:
            continue
        if not field.isidentifier():
            raise ReshardError(f"--name-template {template!r}: field {{{field}}} must be a plain "
                               "name such as {language} or {split:05d}")
        if field not in names:
            names.append(field)
    return names


def check_template(template: str) -> list[str]:
    """The template's fields other than ``split``; raises when it cannot name shards."""
    fields = template_fields(template)
    if SPLIT not in fields:
        raise ReshardError(f"--name-template {template!r} has no {{split}} field; shards of one "
                           "group would get the same name (e.g. add _split_{split:05d})")
    if "/" in template or "\\" in template:
        raise ReshardError(f"--name-template {template!r}: names cannot contain folders")
    naming.refuse_control_characters(template, where="--name-template")
    others = [f for f in fields if f != SPLIT]
    try:
        template.format(**{f: "x" for f in others}, split=0)
    except (ValueError, TypeError) as exc:
        raise ReshardError(f"--name-template {template!r}: {exc} (only {{split}} is a number; "
                           "the other fields are text)") from None
    return others


def format_name(template: str, fields: dict[str, str], split: int, extension: str) -> str:
    return template.format(**fields, split=split) + extension


def name_pattern(template: str, fields: dict[str, str], extension: str) -> re.Pattern:
    """Matches the names of every split of one group (to find outputs of earlier runs)."""
    marked = template.format(**fields, split=_SplitMarker()) + extension
    return re.compile(re.escape(marked).replace(re.escape("\x00SPLIT\x00"), r"\d+"))


def fields_of(path: str, *, regex: re.Pattern | None, flags: dict[str, str],
              needed: Sequence[str]) -> dict[str, str]:
    """The template fields of one input: named groups of ``regex``, then the
    ``--language/--domain/--subdomain`` flags. The regex is searched in the file's base name, or
    in its whole path when the pattern has a ``/`` (fields carried by folders)."""
    fields: dict[str, str] = {}
    if regex is not None:
        m = regex.search(path if "/" in regex.pattern else path.rstrip("/").rsplit("/", 1)[-1])
        if m is None:
            raise ReshardError(f"{path}: --name-regex {regex.pattern!r} does not match this input; "
                               "fix the pattern or leave the file out")
        fields.update({k: v for k, v in m.groupdict().items() if v is not None})
    fields.update(flags)
    missing = [f for f in needed if f not in fields]
    if missing:
        hint = " or ".join(f"--{f}" if f in FIELD_FLAGS else f"a (?P<{f}>...) group in --name-regex"
                           for f in missing)
        raise ReshardError(f"{path}: no value for {{{missing[0]}}} in --name-template; give {hint}")
    for key in needed:
        value = fields[key]
        naming.refuse_control_characters(
            value, where=f"--{key}" if key in flags else f"input {path} ({{{key}}})")
        if not value or "/" in value or "\\" in value:
            raise ReshardError(f"{path}: field {key}={value!r} must be non-empty text without "
                               "slashes")
    return {k: fields[k] for k in needed}


# ---------------------------------------------------------------------------------------------
# planning


@dataclasses.dataclass(frozen=True, kw_only=True)
class Source:
    """One input file as the driver found it."""

    path: str
    format: str  # readers.file_format: jsonl, jsonl.gz, jsonl.zst, parquet
    size: int  # bytes on storage
    fields: tuple[tuple[str, str], ...]  # the group it belongs to
    error: str = ""  # why the driver could not read its details; measuring fails with it
    version: str = ""  # mtime or etag when found: the writer confirms the file is still this


@dataclasses.dataclass(frozen=True, kw_only=True)
class Measured:
    """A source and the sizes of its units on the offset line: one unit for a JSONL file, one
    per row group for Parquet."""

    source: Source
    unit_sizes: tuple[int, ...]
    error: str = ""  # why the file could not be read: then no shard is planned at all

    @property
    def size(self) -> int:
        return sum(self.unit_sizes)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Piece:
    """The documents of one file that start in ``[start, end)`` (offsets within the file)."""

    path: str
    format: str
    start: int
    end: int
    units: tuple[tuple[int, int], ...] = ()  # Parquet: (row group, its first offset) to read
    # The file as measured (size on storage, mtime or etag): the writer confirms it read that
    # file (readers.confirm_unchanged), not one truncated or rewritten since.
    size: int | None = None
    version: str = ""


@dataclasses.dataclass(frozen=True, kw_only=True)
class ShardTask:
    group: int  # index of the group in sorted order
    fields: tuple[tuple[str, str], ...]
    index: int  # planned shard within the group (final split numbers skip empty shards)
    pieces: tuple[Piece, ...]

    @property
    def task_id(self) -> str:
        return f"{self.group:05d}-{self.index:06d}"


def plan_group(measured: Sequence[Measured], *, target: int) -> list[tuple[Piece, ...]]:
    """Cut one group's offset line into spans of at most ``target`` (see module docstring)."""
    ordered = sorted(measured, key=lambda m: m.source.path)
    total = sum(m.size for m in ordered)
    if total == 0:
        return []
    n = math.ceil(total / target)
    bounds = [k * total // n for k in range(n + 1)]
    shards = []
    for k in range(n):
        lo, hi = bounds[k], bounds[k + 1]
        pieces = []
        base = 0
        for m in ordered:
            size = m.size
            start, end = max(lo - base, 0), min(hi - base, size)
            if end > start:
                units = []
                if m.source.format == "parquet":
                    unit_base = 0
                    for g, unit_size in enumerate(m.unit_sizes):
                        if unit_base < end and unit_base + unit_size > start:
                            units.append((g, unit_base))
                        unit_base += unit_size
                pieces.append(Piece(path=m.source.path, format=m.source.format, start=start,
                                    end=end, units=tuple(units), size=m.source.size,
                                    version=m.source.version))
            base += size
        shards.append(tuple(pieces))
    return shards


def plan_tasks(measured: Iterable[Measured], *, target: int) -> list[ShardTask]:
    """Every group's shards; groups in sorted order of their fields. None at all when a source
    could not be measured (see the module docstring)."""
    measured = list(measured)
    if any(m.error for m in measured):
        return []
    groups: dict[tuple, list[Measured]] = {}
    for m in measured:
        groups.setdefault(m.source.fields, []).append(m)
    tasks = []
    for g, fields in enumerate(sorted(groups)):
        for k, pieces in enumerate(plan_group(groups[fields], target=target)):
            tasks.append(ShardTask(group=g, fields=fields, index=k, pieces=pieces))
    return tasks


# ---------------------------------------------------------------------------------------------
# documents


def _json_default(value):
    if isinstance(value, (bytes, bytearray, memoryview)):
        raw = bytes(value)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            return base64.b64encode(raw).decode("ascii")
    if isinstance(value, decimal.Decimal):
        return str(value)
    return str(value)


def row_to_line(row: dict) -> bytes:
    """One Parquet row as a JSON line (without the newline)."""
    return orjson.dumps(row, default=_json_default, option=orjson.OPT_NON_STR_KEYS)


def _parquet_lines(path: str, row_groups: Iterable[int], *,
                   planned: WorkItem | None = None) -> Iterator[tuple[int, list[bytes]]]:
    """``(row group, its rows as JSON lines)`` in batches, for the given row groups in order.
    With ``planned`` (the file as measured), raises :class:`readers.InputChangedError` once the
    rows are read if the file is no longer that one."""
    import pyarrow.parquet as pq

    try:
        with fsutil.open_file(path, "rb") as fh:
            pf = pq.ParquetFile(fh)
            for g in row_groups:
                for batch in pf.iter_batches(batch_size=_PARQUET_BATCH_ROWS, row_groups=[g]):
                    yield g, [row_to_line(row) for row in batch.to_pylist()]
            if planned is not None:
                readers.confirm_unchanged(planned, fh)
    except readers.CorruptFileError:
        raise
    except (OSError, ValueError) as exc:
        if planned is not None:
            readers.confirm_unchanged(planned)  # cut short under us: changed, not corrupt
        raise readers.CorruptFileError(f"{path}: not a readable Parquet file ({exc}); the file is "
                                       "corrupt or truncated: re-copy it or leave it out") from exc


def measure(source: Source) -> Measured:
    """Sizes of a source's units on the offset line (reads the file unless it is plain JSONL).
    Raises :class:`readers.CorruptFileError` for a file that cannot be read whole."""
    if source.error:
        raise readers.CorruptFileError(source.error)
    if source.format == "jsonl":
        return Measured(source=source, unit_sizes=(source.size,))
    # The file as found: one changed since is reported so ("changed while reading"), not as
    # corrupt.
    planned = _whole_file(source.path, source.format, size=source.size, version=source.version)
    if source.format == "parquet":
        import pyarrow.parquet as pq

        try:
            with fsutil.open_file(source.path, "rb") as fh:
                groups = pq.ParquetFile(fh).num_row_groups
        except (OSError, ValueError) as exc:
            readers.confirm_unchanged(planned)
            raise readers.CorruptFileError(f"{source.path}: not a readable Parquet file "
                                           f"({exc}); the file is corrupt or truncated: re-copy "
                                           "it or leave it out") from exc
        sizes = [0] * groups
        for g, lines in _parquet_lines(source.path, range(groups), planned=planned):
            sizes[g] += sum(len(line) + 1 for line in lines)
        return Measured(source=source, unit_sizes=tuple(sizes))
    end = 0
    for record in readers.read_jsonl(planned):
        end = record.offset + len(record.data) + 1
    return Measured(source=source, unit_sizes=(end,))


def measure_or_fail(source: Source) -> Measured:
    """:func:`measure`, or a measurement carrying why the file cannot be read."""
    try:
        return measure(source)
    except OSError as exc:  # CorruptFileError included: the file, not the job, is at fault
        reason = str(exc) if isinstance(exc, readers.CorruptFileError) else \
            f"{source.path}: cannot read the file ({exc}); fix it or leave it out"
        return Measured(source=source, unit_sizes=(), error=reason)


def _whole_file(path: str, fmt: str, start: int = 0, end: int | None = None, *,
                size: int | None = None, version: str = "") -> WorkItem:
    """A work item reading ``path`` (``size`` and ``version``: the file as found, which the
    reader confirms once it has read it; None: not checked)."""
    return WorkItem(path=path, stem=readers.file_stem(path), format=fmt, index=0,
                            start=start, end=end, size=size, version=version)


def piece_documents(piece: Piece) -> Iterator[bytes]:
    """The documents (JSON lines, without newline) that start in the piece, in order. Raises
    :class:`readers.InputChangedError` when the file is not the one measured (its size or
    version changed: truncated or rewritten while the job ran), so no shard is committed from
    other bytes than those planned."""
    planned = _whole_file(piece.path, piece.format, size=piece.size, version=piece.version) \
        if piece.size is not None else None
    if piece.format == "parquet":
        yield from _parquet_piece(piece, planned)
    else:
        if piece.format == "jsonl":
            records = readers.read_jsonl(_whole_file(piece.path, piece.format, piece.start,
                                                     piece.end, size=piece.size,
                                                     version=piece.version))
        else:  # compressed: decompress from the start, keep what starts in the piece
            records = readers.read_jsonl(_whole_file(piece.path, piece.format, size=piece.size,
                                                     version=piece.version))
        for record in records:
            if record.offset >= piece.end:
                break
            if record.offset >= piece.start and record.data.strip():
                yield record.data
    if planned is not None:
        readers.confirm_unchanged(planned)  # also when the loop stopped before the file's end


def _parquet_piece(piece: Piece, planned: WorkItem | None) -> Iterator[bytes]:
    offsets = dict(piece.units)
    current, offset = None, 0
    for g, lines in _parquet_lines(piece.path, [g for g, _ in piece.units], planned=planned):
        if g != current:
            current, offset = g, offsets[g]
        for line in lines:
            if offset >= piece.end:
                return
            if offset >= piece.start:
                yield line
            offset += len(line) + 1


# ---------------------------------------------------------------------------------------------
# writing and committing (the bytes and the protocol: dataio/jsonl_sink.py)


@dataclasses.dataclass(frozen=True, kw_only=True)
class WrittenFile:
    """A planned shard as one attempt wrote it, under a temporary name, not yet committed."""

    task: ShardTask
    temporary: str  # where this attempt wrote it
    documents: int
    bytes: int  # uncompressed


def write_shard(task: ShardTask, *, temp_dir: str, compression: str) -> WrittenFile:
    """Write one shard's documents under a name unique to this attempt (retries never collide)."""
    faults.checkpoint("reshard.before_write")
    temporary = jsonl_sink.attempt_path(temp_dir, task.task_id)
    documents = (line for piece in task.pieces for line in piece_documents(piece))
    written = jsonl_sink.write_lines(temporary, documents, compression=compression)
    return WrittenFile(task=task, temporary=temporary, documents=written.lines,
                       bytes=written.bytes)


@dataclasses.dataclass(frozen=True, kw_only=True)
class CommitPlan:
    """What the commit step needs besides the results (all decided on the driver)."""

    output: str
    template: str
    extension: str
    stale: tuple[str, ...] = ()  # outputs of an earlier run to delete (--overwrite)


def final_names(results: Iterable[WrittenFile], plan: CommitPlan) -> list[tuple[WrittenFile, str]]:
    """``(result, final path)`` of the non-empty shards, split numbers contiguous per group."""
    by_group: dict[int, list[WrittenFile]] = {}
    for r in results:
        by_group.setdefault(r.task.group, []).append(r)
    named = []
    for g in sorted(by_group):
        split = 0
        for r in sorted(by_group[g], key=lambda r: r.task.index):
            if r.documents == 0:
                continue
            name = format_name(plan.template, dict(r.task.fields), split, plan.extension)
            named.append((r, fsutil.join(plan.output, name)))
            split += 1
    return named


def commit_shards(results: list[WrittenFile], plan: CommitPlan) -> list[dict]:
    """Give every written shard its final name (:func:`final_names`), dropping empty ones, and
    commit them (:func:`dataio.jsonl_sink.commit`: idempotent, stale outputs deleted last);
    returns a summary row per final shard."""
    named = final_names(results, plan)
    kept = {r.temporary for r, _ in named}
    jsonl_sink.commit([(r.temporary, final) for r, final in named], output=plan.output,
                      dropped=[r.temporary for r in results if r.temporary not in kept],
                      stale=plan.stale)
    return [{"name": final.rsplit("/", 1)[-1], "documents": r.documents, "bytes": r.bytes,
             "inputs": sorted({p.path for p in r.task.pieces})} for r, final in named]


class _MeasureFn(beam.DoFn):
    def process(self, source: Source):
        workers.note_work(f"measuring {source.path}")  # for the driver, should this worker die
        yield measure_or_fail(source)


class _WriteShardFn(beam.DoFn):
    def __init__(self, *, temp_dir: str, compression: str):
        self._temp_dir = temp_dir
        self._compression = compression

    def process(self, task: ShardTask):
        inputs = sorted({p.path for p in task.pieces})
        workers.note_work(f"writing shard {task.task_id} from {', '.join(inputs[:3])}"
                          + (f" and {len(inputs) - 3} more" if len(inputs) > 3 else ""))
        yield write_shard(task, temp_dir=self._temp_dir, compression=self._compression)


def _commit_and_summarise(results, *, failed, plan: CommitPlan, temp_dir: str):
    failed = sorted(({"path": m.source.path, "reason": m.error} for m in failed),
                    key=lambda f: f["path"])
    shards = [] if failed else commit_shards(list(results), plan)  # none planned if one failed
    jsonl_sink.write_summary(temp_dir, shards=shards, failed=failed)
    yield from shards


class ReshardFiles(beam.PTransform):
    """Sources in, committed shard summaries out (``{"name", "documents", "bytes", "inputs"}``).

    Measures the sources in parallel, plans once over all measurements, writes the shards in
    parallel under ``temp_dir``, then commits them in one step (see the module docstring).
    """

    def __init__(self, *, target: int, compression: str, temp_dir: str, plan: CommitPlan):
        super().__init__()
        self._target = target
        self._compression = compression
        self._temp_dir = temp_dir
        self._plan = plan

    def expand(self, sources):
        measured = (sources
                    | "SpreadSources" >> beam.Reshuffle()
                    | "MeasureSources" >> beam.ParDo(_MeasureFn()))
        failed = measured | "UnreadableSources" >> beam.Filter(lambda m: bool(m.error))
        results = (measured
                   | "GatherMeasurements" >> beam.combiners.ToList()
                   | "PlanShards" >> beam.FlatMap(lambda ms, target: plan_tasks(ms, target=target),
                                                  target=self._target)
                   | "SpreadShards" >> beam.Reshuffle()
                   | "WriteShards" >> beam.ParDo(_WriteShardFn(temp_dir=self._temp_dir,
                                                               compression=self._compression)))
        return (results
                | "GatherResults" >> beam.combiners.ToList()
                | "CommitShards" >> beam.FlatMap(_commit_and_summarise,
                                                 failed=beam.pvalue.AsList(failed),
                                                 plan=self._plan, temp_dir=self._temp_dir))
