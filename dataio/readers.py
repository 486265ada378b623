"""Input files: discovery, work planning, and reading raw records.

Formats: ``.jsonl``/``.json`` (one JSON object per line), ``.jsonl.gz``, ``.jsonl.zst`` and
``.parquet``. Large uncompressed JSONL files are cut into byte ranges so several workers read
one file: a range ``[start, end)`` owns every line that *starts* inside it, so the ranges of a
file together yield each line exactly once. Compressed files are read whole (they cannot be
entered in the middle). Parquet files are read by row group and only the requested columns.

Readers yield :class:`RawRecord`s: the bytes of one JSONL line (or the values of one Parquet
row) with its line number and byte offset, for error reports. Line numbers are 1-based. For a
range that does not start at 0 the line number is found by counting newlines before it, which is
only done when a record of that range is reported as bad.
"""

from __future__ import annotations

import dataclasses
import gzip
import os
from typing import Iterator, Sequence

from dataio import fs as fsutil

JSONL_SUFFIXES = (".jsonl", ".json", ".jsonl.gz", ".json.gz", ".jsonl.zst", ".json.zst")
PARQUET_SUFFIXES = (".parquet",)
SUPPORTED_SUFFIXES = JSONL_SUFFIXES + PARQUET_SUFFIXES
_BLOCK = 8 << 20


class InputError(ValueError):
    """A bad input specification (no files, unsupported format, clashing names)."""


class CorruptFileError(IOError):
    """A file that cannot be read at all (bad compression, unreadable Parquet)."""


@dataclasses.dataclass(frozen=True)
class InputFile:
    path: str
    size: int
    version: str  # mtime (local) or etag (object stores): part of the resume key

    @property
    def stem(self) -> str:
        return file_stem(self.path)

    @property
    def format(self) -> str:
        return file_format(self.path)


@dataclasses.dataclass(frozen=True)
class WorkItem:
    """One unit of reading: a byte range of a JSONL file, a whole compressed file, or a list
    of Parquet row groups. ``index`` orders the items of one file."""

    path: str
    stem: str
    format: str
    index: int
    start: int = 0
    end: int | None = None
    row_groups: tuple[int, ...] = ()


@dataclasses.dataclass
class RawRecord:
    data: bytes | dict  # a JSONL line, or a Parquet row's values by column
    line: int | None  # 1-based line (JSONL) or row number (Parquet); None until resolved
    offset: int  # byte offset of the line (JSONL) or row index (Parquet)


def file_format(path: str) -> str:
    name = os.path.basename(path).lower()
    for suffix in SUPPORTED_SUFFIXES:
        if name.endswith(suffix):
            if suffix.endswith(".gz"):
                return "jsonl.gz"
            if suffix.endswith(".zst"):
                return "jsonl.zst"
            return "parquet" if suffix == ".parquet" else "jsonl"
    raise InputError(f"{path}: unsupported file type; supported: {', '.join(SUPPORTED_SUFFIXES)}")


def file_stem(path: str) -> str:
    name = os.path.basename(path)
    for suffix in sorted(SUPPORTED_SUFFIXES, key=len, reverse=True):
        if name.lower().endswith(suffix):
            return name[: -len(suffix)]
    return os.path.splitext(name)[0]


def _version_of(info: dict) -> str:
    for key in ("etag", "ETag", "mtime", "last_modified", "LastModified", "created"):
        if info.get(key) is not None:
            return f"{key}:{info[key]}"
    return "unknown"


def discover(patterns: Sequence[str]) -> list[InputFile]:
    """Every supported file named by the patterns (globs, files, or folders: every supported file
    directly in them), sorted by path, each once."""
    found: dict[str, InputFile] = {}
    for pattern in patterns:
        fs, inner = fsutil.filesystem_and_path(pattern)
        if fs.isdir(inner):
            paths = [p for p in fsutil.glob(fsutil.join(pattern, "*"))
                     if os.path.basename(p).lower().endswith(SUPPORTED_SUFFIXES)]
        elif any(ch in pattern for ch in "*?["):
            paths = fsutil.glob(pattern)
        else:
            if not fs.exists(inner):
                raise InputError(f"--input {pattern}: no such file or folder")
            paths = [pattern]
        if not paths:
            raise InputError(f"--input {pattern}: matches no supported file "
                             f"({', '.join(SUPPORTED_SUFFIXES)})")
        for path in paths:
            file_format(path)
            fs_, inner_ = fsutil.filesystem_and_path(path)
            info = fs_.info(inner_)
            found[path] = InputFile(path, int(info.get("size") or 0), _version_of(info))
    files = sorted(found.values(), key=lambda f: f.path)
    stems: dict[str, str] = {}
    for f in files:
        if f.stem in stems:
            raise InputError(f"inputs {stems[f.stem]} and {f.path} would both write shards named "
                             f"{f.stem}_*; rename one or tokenize them in separate --output folders")
        stems[f.stem] = f.path
    return files


def plan_items(files: Sequence[InputFile], *, split_bytes: int = 256 << 20) -> list[WorkItem]:
    """Cut files into work items; see the module docstring."""
    items = []
    for f in files:
        if f.format == "jsonl" and f.size > split_bytes:
            for k, start in enumerate(range(0, f.size, split_bytes)):
                items.append(WorkItem(f.path, f.stem, f.format, k, start,
                                      min(start + split_bytes, f.size)))
        elif f.format == "parquet":
            groups = parquet_row_groups(f.path)
            per_item = 8  # row groups per item: enough parallelism, few items per file
            chunks = [tuple(groups[i:i + per_item]) for i in range(0, len(groups), per_item)] or [()]
            for k, chunk in enumerate(chunks):
                items.append(WorkItem(f.path, f.stem, f.format, k, row_groups=chunk))
        else:
            items.append(WorkItem(f.path, f.stem, f.format, 0))
    return items


def parquet_row_groups(path: str) -> list[int]:
    import pyarrow.parquet as pq

    try:
        with fsutil.open_file(path, "rb") as fh:
            return list(range(pq.ParquetFile(fh).num_row_groups))
    except Exception as exc:  # noqa: BLE001 - any pyarrow failure means an unreadable file
        raise CorruptFileError(f"{path}: not a readable Parquet file ({exc})") from exc


# --- JSONL ------------------------------------------------------------------------------------

def _open_decompressed(path: str, fmt: str):
    raw = fsutil.open_file(path, "rb")
    if fmt == "jsonl.gz":
        return gzip.GzipFile(fileobj=raw, mode="rb")
    if fmt == "jsonl.zst":
        import zstandard

        return zstandard.ZstdDecompressor().stream_reader(raw, read_across_frames=True,
                                                          closefd=True)
    return raw


def read_jsonl(item: WorkItem) -> Iterator[RawRecord]:
    """The lines a work item owns, in order (without their newline)."""
    if item.format == "jsonl":
        yield from _read_jsonl_range(item.path, item.start, item.end)
        return
    try:
        with _open_decompressed(item.path, item.format) as f:
            yield from _split_lines(f, base=0, end=None, first_line=1)
    except (OSError, EOFError, gzip.BadGzipFile) as exc:
        raise CorruptFileError(f"{item.path}: cannot decompress ({exc}); the file is corrupt or "
                               "truncated: re-copy it or leave it out") from exc
    except Exception as exc:
        if type(exc).__module__.startswith("zstd"):
            raise CorruptFileError(f"{item.path}: cannot decompress ({exc}); the file is corrupt "
                                   "or truncated: re-copy it or leave it out") from exc
        raise


def _read_jsonl_range(path: str, start: int, end: int | None) -> Iterator[RawRecord]:
    with fsutil.open_file(path, "rb") as f:
        if start > 0:
            # The line containing byte start-1 belongs to the previous range; skip past it.
            f.seek(start - 1)
            skipped = 0
            while True:
                block = f.read(1 << 16)
                if not block:
                    return
                nl = block.find(b"\n")
                if nl >= 0:
                    base = start - 1 + skipped + nl + 1
                    f.seek(base)
                    break
                skipped += len(block)
            first_line = None
        else:
            base, first_line = 0, 1
        if end is not None and base >= end:
            return
        yield from _split_lines(f, base=base, end=end, first_line=first_line)


def _split_lines(f, *, base: int, end: int | None, first_line: int | None) -> Iterator[RawRecord]:
    """Lines from the current position of ``f`` (at byte ``base``), stopping after the last line
    that starts before ``end``. Line numbers count from ``first_line`` (None = unknown)."""
    pending: list[bytes] = []  # pieces of a line longer than one block (joined once)
    offset = base
    line_no = first_line
    while True:
        block = f.read(_BLOCK)
        if not block:
            break
        if b"\n" not in block:
            pending.append(block)
            continue
        data = b"".join(pending) + block if pending else block
        lines = data.split(b"\n")
        pending = [lines.pop()]
        for line in lines:
            if end is not None and offset >= end:
                return
            yield RawRecord(line, line_no, offset)
            offset += len(line) + 1
            if line_no is not None:
                line_no += 1
    last = b"".join(pending)
    if last and (end is None or offset < end):
        yield RawRecord(last, line_no, offset)


def line_number_at(path: str, offset: int) -> int:
    """1-based number of the line starting at ``offset`` of an uncompressed file."""
    count = 0
    with fsutil.open_file(path, "rb") as f:
        remaining = offset
        while remaining > 0:
            block = f.read(min(_BLOCK, remaining))
            if not block:
                break
            count += block.count(b"\n")
            remaining -= len(block)
    return count + 1


# --- Parquet ----------------------------------------------------------------------------------

def read_parquet(item: WorkItem, columns: Sequence[str]) -> Iterator[tuple[int, dict]]:
    """``(row index, {column: list of values})`` per row group, columns read whole (no per-row
    dicts). A column missing from the file gives a list of None (reported per record)."""
    import pyarrow.parquet as pq

    try:
        with fsutil.open_file(item.path, "rb") as fh:
            pf = pq.ParquetFile(fh)
            present = [c for c in columns if c in pf.schema_arrow.names]
            row = sum(pf.metadata.row_group(g).num_rows for g in range(min(item.row_groups or (0,)))) \
                if item.row_groups else 0
            for g in item.row_groups:
                table = pf.read_row_group(g, columns=present)
                values = {c: table.column(c).to_pylist() for c in present}
                for c in columns:
                    if c not in values:
                        values[c] = [None] * table.num_rows
                yield row, values
                row += table.num_rows
    except CorruptFileError:
        raise
    except Exception as exc:  # noqa: BLE001 - any pyarrow failure means an unreadable file
        raise CorruptFileError(f"{item.path}: not a readable Parquet file ({exc})") from exc
