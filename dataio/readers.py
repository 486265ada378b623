"""Input files: formats, work planning, and reading raw records.

Formats: ``.jsonl``/``.json`` (one JSON object per line), ``.jsonl.gz``, ``.jsonl.zst`` and
``.parquet``. Large uncompressed JSONL files are cut into byte ranges so several workers read
one file: a range ``[start, end)`` owns every line that *starts* inside it, so the ranges of a
file together yield each line exactly once. Compressed files are read whole (they cannot be
entered in the middle). Parquet files are read by row group and only the requested columns.

A file that is wrong as a whole (truncated or corrupt compression, a short Parquet file, a path
that cannot be read) raises :class:`CorruptFileError` from the reader, in the worker, so only that
file's shards fail: discovery and planning never raise for one bad file, they record why the file
could not be listed or planned (``InputFile.error``, ``WorkItem.error``) and the reader fails with
it. A compressed stream must end where its format says it ends: a zstd file that stops inside a
frame, a gzip file without its trailer, and an empty ``.gz``/``.zst`` (a copy that never started)
are corrupt, not short.

Finding the inputs is dataio/discovery.py (:func:`~dataio.discovery.find_inputs`); planning
samples of an input, bounded in bytes, dataio/sampling.py.

Lines end as in Python's text mode, which Megatron reads JSONL with (universal newlines): at a
LF, a CR LF pair or a CR alone, so files with CR LF, CR-only or mixed line ends give the records
Megatron gives. A range boundary never splits a CR LF pair into two line ends.

Readers yield :class:`RawRecord`s: the bytes of one JSONL line (or the values of one Parquet
row) with its line number and byte offset, for error reports. Line numbers are 1-based. For a
range that does not start at 0 the line number is found by counting line ends before it, which
is only done when a record of that range is reported as bad. :func:`read_jsonl_blocks` gives
the same lines a block (up to 8 MB) at a time, with their numbers and offsets, for a caller
that handles lines by the hundred thousand (the tokenize step's parser).
"""

from __future__ import annotations

import bisect
import dataclasses
import functools
import gzip
import io
import itertools
import operator
import os
import re
import typing
import zlib
from typing import Iterator, Sequence

from runtime import errors, faults
from dataio import input_hashes
from dataio import fs as fsutil
from dataio.elements import WorkItem

JSONL_SUFFIXES = (".jsonl", ".json", ".jsonl.gz", ".json.gz", ".jsonl.zst", ".json.zst")
PARQUET_SUFFIXES = (".parquet",)
SUPPORTED_SUFFIXES = JSONL_SUFFIXES + PARQUET_SUFFIXES
LONGEST_SUFFIX_FIRST = tuple(sorted(SUPPORTED_SUFFIXES, key=len, reverse=True))
# The compression codec Spark writes into a part file's name (part-00000-....snappy.parquet).
_PART_CODEC = re.compile(r"\.(snappy|gz|gzip|zstd|lz4|lz4_raw|brotli|lzo|uncompressed)$",
                         re.IGNORECASE)
_BLOCK = 8 << 20


class InputError(errors.ConfigError):
    """The inputs named on the command line cannot be used (no files, an unsupported format,
    clashing names, an incomplete dataset); the message names them and the fix. A bad command
    line, exit status 2, unless raised with another ``exit_status`` (the dataset commands answer
    a dataset they cannot find or use with 1). The one input error of every command."""

    def __init__(self, message: str, *, exit_status: int = errors.EXIT_USAGE):
        super().__init__(message)
        self.exit_status = exit_status


class CorruptFileError(IOError):
    """A file that cannot be read at all (bad compression, unreadable Parquet)."""


class InputChangedError(CorruptFileError):
    """A file that is no longer the one planned (truncated, rewritten or replaced while the job
    ran): what was read from it are not the planned bytes, so its shards fail (a rerun plans it
    again)."""


@dataclasses.dataclass(frozen=True)
class InputFile:
    path: str
    size: int
    version: str  # mtime (local) or etag (object stores): part of the resume key
    error: str = ""  # why discovery could not read the file; its shards fail with this reason
    dataset: str = ""  # a part file of a dataset folder (``t.parquet/``): that folder's stem
    # The folder the file (a part file: its dataset folder) lies in, relative to the input root,
    # with "/" between folders; "" directly in it (see :func:`shard_stems`).
    folder: str = ""
    # The stem its shards are named by, where discovery chose one other than its own name (an
    # input of the same name elsewhere, or --output-layout mirror: :func:`shard_stems`).
    shard_stem: str = ""

    # Cached: planning asks each file's stem several times per shard (10,000 inputs: 60,000).
    @functools.cached_property
    def stem(self) -> str:
        """The name of its shards: :attr:`own_stem`, or the one :func:`shard_stems` chose."""
        return self.shard_stem or self.own_stem

    @functools.cached_property
    def own_stem(self) -> str:
        """The file's name without its suffixes; for a part file of a dataset folder,
        ``{folder stem}_{part stem}`` without the codec Spark names in it
        (``t.parquet/part-00000-(uuid)-c000.snappy.parquet``: ``t_part-00000-(uuid)-c000``)."""
        if self.dataset:
            return f"{self.dataset}_{_PART_CODEC.sub('', file_stem(self.path))}"
        return file_stem(self.path)

    @functools.cached_property
    def format(self) -> str:
        return file_format(self.path)


@dataclasses.dataclass
class RawRecord:
    data: bytes | dict  # a JSONL line, or a Parquet row's values by column
    line: int | None  # 1-based line (JSONL) or row number (Parquet); None until resolved
    offset: int  # byte offset of the line (JSONL) or row index (Parquet)


class LineBlock(typing.NamedTuple):
    """Consecutive JSONL lines of one block: line i is ``lines[i]``, number ``first_line + i``
    (None: unknown), at byte ``offsets[i]``. The caller may set ``lines[i] = None`` once it has
    the line (a huge line then lives only as long as the caller holds it)."""

    lines: list
    first_line: int | None
    offsets: list[int]


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
    lower = name.lower()
    for suffix in LONGEST_SUFFIX_FIRST:
        if lower.endswith(suffix):
            return name[: -len(suffix)]
    return os.path.splitext(name)[0]


def version_of(info: dict) -> str:
    for key in ("etag", "ETag", "mtime", "last_modified", "LastModified", "created"):
        if info.get(key) is not None:
            return f"{key}:{info[key]}"
    return "unknown"


def plan_items(files: Sequence[InputFile], *, split_bytes: int = 256 << 20,
               stamps: dict[str, str] | None = None) -> list[WorkItem]:
    """Cut files into work items; see the module docstring. Never raises for one bad file: a
    file that could not be listed or planned becomes one item carrying the reason, which the
    reader raises in the worker (so only that file's shards fail). Each item carries the file
    as planned (size, version, and its ``stamps`` entry: the identity its content hash was
    taken under), which the reader confirms (:func:`confirm_unchanged`).

    Parquet files are planned from their footers, 16 read at a time (on object stores a few
    requests each, so 10,000 files one after the other would take minutes), and cut like JSONL
    by bytes: consecutive row groups of at most ``split_bytes`` uncompressed (at least one
    group) per item, each item carrying its first row. Every item reads the footer again, so
    a file of 20,000 small row groups is a few items, not 2,500 footer reads."""
    groups_of = _parquet_row_groups_of([f for f in files if f.format == "parquet" and not f.error])
    items = []
    for f in files:
        of_file = {"path": f.path, "stem": f.stem, "format": f.format}
        if not f.error:
            of_file.update(size=f.size, version=f.version, stamp=(stamps or {}).get(f.path, ""))
        if f.error:
            items.append(WorkItem(**of_file, index=0, error=f.error))
        elif f.format == "jsonl" and f.size > split_bytes:
            for k, start in enumerate(range(0, f.size, split_bytes)):
                items.append(WorkItem(**of_file, index=k, start=start,
                                      end=min(start + split_bytes, f.size)))
        elif f.format == "parquet":
            groups = groups_of[f]
            if isinstance(groups, CorruptFileError):  # e.g. a short file: no footer to plan with
                items.append(WorkItem(**of_file, index=0, error=str(groups)))
                continue
            chunks: list[tuple[tuple[int, ...], int]] = []  # (row groups, first row)
            chunk: list[int] = []
            first_row = row = size = 0
            for g, (rows, num_bytes) in enumerate(groups):
                if chunk and size + num_bytes > split_bytes:
                    chunks.append((tuple(chunk), first_row))
                    chunk, first_row, size = [], row, 0
                chunk.append(g)
                row, size = row + rows, size + num_bytes
            chunks.append((tuple(chunk), first_row))  # ((), 0) for a file of no row group
            for k, (groups_of_item, first) in enumerate(chunks):
                items.append(WorkItem(**of_file, index=k, row_groups=groups_of_item,
                                      first_row=first))
        else:
            items.append(WorkItem(**of_file, index=0))
    return items


def _parquet_row_groups_of(files: Sequence[InputFile]) -> dict:
    """{file: its row groups' (rows, bytes), or the CorruptFileError why not}, footers read 16
    at a time."""
    def one(f: InputFile):
        try:
            return parquet_row_groups(f.path)
        except CorruptFileError as exc:
            return exc

    if len(files) < 2:
        return {f: one(f) for f in files}
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=16) as pool:
        return dict(zip(files, pool.map(one, files)))


def parquet_row_groups(path: str) -> list[tuple[int, int]]:
    """(rows, uncompressed bytes) of each row group of a Parquet file, from its footer."""
    import pyarrow.parquet as pq

    try:
        with fsutil.open_file(path, "rb") as fh:
            meta = pq.ParquetFile(fh).metadata
            groups = [meta.row_group(g) for g in range(meta.num_row_groups)]
            return [(group.num_rows, group.total_byte_size) for group in groups]
    except Exception as exc:  # noqa: BLE001 - any pyarrow failure means an unreadable file
        raise CorruptFileError(f"{path}: not a readable Parquet file ({exc}); the file is "
                               "corrupt or truncated: re-copy it or leave it out") from exc


# --- JSONL ------------------------------------------------------------------------------------

class _BadStream(Exception):
    """A compressed stream that is not whole (raised inside :func:`read_jsonl`)."""


class _ZstdStream:
    """The decompressed bytes of a ``.zst`` file, frame after frame, as ``read(n)``.

    zstandard's ``stream_reader`` returns end-of-file when the file stops inside a frame, so a
    truncated file would read as a shorter valid one. Here each frame is decoded by its own
    ``decompressobj``, which knows when its frame is complete: input ending while a frame is
    open raises :class:`_BadStream`. Compressed input is fed in small chunks so the output held
    at once stays near ``n`` (plus one chunk's worth).
    """

    _CHUNK = 1 << 17

    def __init__(self, raw):
        import zstandard

        self._raw = raw
        self._dctx = zstandard.ZstdDecompressor()
        self._error = zstandard.ZstdError
        self._frame = None  # the decompressobj of the frame being decoded
        self._frames = 0
        self._out: list[bytes] = []
        self._held = 0
        self._eof = False

    def read(self, n: int = -1) -> bytes:
        while not self._eof and (n < 0 or self._held < n):
            self._fill()
        data = b"".join(self._out)
        if 0 <= n < len(data):
            data, rest = data[:n], data[n:]
            self._out, self._held = [rest], len(rest)
        else:
            self._out, self._held = [], 0
        return data

    def _fill(self) -> None:
        data = self._raw.read(self._CHUNK)
        if not data:
            if self._frame is not None:
                raise _BadStream("the file ends inside a zstd frame")
            if self._frames == 0:
                raise _BadStream("empty file, not even one zstd frame")
            self._eof = True
            return
        try:
            while data:
                if self._frame is None:
                    self._frame = self._dctx.decompressobj()
                    self._frames += 1
                out = self._frame.decompress(data)
                if out:
                    self._out.append(out)
                    self._held += len(out)
                if not self._frame.eof:
                    break
                data, self._frame = self._frame.unused_data, None  # the next frame starts here
        except self._error as exc:
            raise _BadStream(str(exc)) from None


def read_jsonl(item: WorkItem) -> Iterator[RawRecord]:
    """The lines a work item owns, in order (without their newline), as :class:`RawRecord`;
    see :func:`read_jsonl_blocks`."""
    yield from _records(read_jsonl_blocks(item))


def read_jsonl_blocks(item: WorkItem) -> Iterator[LineBlock]:
    """The lines a work item owns, in order (without their newline), a block at a time. Raises
    :class:`CorruptFileError` for a file that cannot be read, or whose compressed stream is
    corrupt or incomplete, and :class:`InputChangedError` for a file that is not the one planned
    (then records before the fault may already have been yielded: the caller fails the whole
    file)."""
    if item.error:
        raise CorruptFileError(item.error)
    if item.head is not None:
        yield from _line_blocks(io.BytesIO(_whole_lines_of_head(item)), base=0, end=None,
                                first_line=1)
        return
    if item.size is not None:
        faults.checkpoint("readers.item_started")
    if item.format == "jsonl":
        try:
            yield from _read_jsonl_range(item.path, item.start, item.end)
        except CorruptFileError:
            raise
        except OSError as exc:
            confirm_unchanged(item)  # a file cut short under us changed; it is not corrupt
            raise CorruptFileError(f"{item.path}: cannot read the file ({exc}); fix it or "
                                   "leave it out") from exc
        confirm_unchanged(item)
        return
    try:
        raw = fsutil.open_file(item.path, "rb")
    except OSError as exc:
        raise CorruptFileError(f"{item.path}: cannot read the file ({exc}); fix it or leave it "
                               "out") from exc
    with raw:
        try:
            f = _ZstdStream(raw) if item.format == "jsonl.zst" else gzip.GzipFile(fileobj=raw,
                                                                                  mode="rb")
            yield from _line_blocks(f, base=0, end=None, first_line=1)
            if item.format == "jsonl.gz" and raw.tell() == 0:
                raise _BadStream("empty file, not even a gzip header")
        except (OSError, EOFError, zlib.error, _BadStream) as exc:
            confirm_unchanged(item, raw)  # a file cut short under us changed; it is not corrupt
            raise CorruptFileError(f"{item.path}: cannot decompress ({exc}); the file is corrupt "
                                   "or truncated: re-copy it or leave it out") from exc
        confirm_unchanged(item, raw)


def confirm_unchanged(item: WorkItem, opened=None) -> None:
    """Raise :class:`InputChangedError` unless the file ``item`` was read from is still the one
    planned: the same size and version (mtime or etag) and, where the item carries a ``stamp``,
    the same identity as when its content hash was taken (a local file's ctime moves with every
    write and cannot be set back, so an edit that keeps size and mtime is caught without hashing
    again). Called once the item's bytes are read: a file truncated, appended to or rewritten
    in place since planning fails its shards instead of committing part of it. ``opened``: the
    file object read from, where the caller holds it (a local file is then checked by its
    descriptor), else the path is checked. Items without a planned size (the planner's samples)
    are not checked."""
    if item.size is None:
        return
    stamp = ""
    try:
        if fsutil.is_local(item.path):
            fileno = getattr(opened, "fileno", None)
            st = os.fstat(fileno()) if fileno is not None else \
                os.stat(item.path.removeprefix("file://"))
            size, version = st.st_size, f"mtime:{st.st_mtime}"
            if item.stamp:
                stamp = input_hashes.stamp(st)
        else:
            fs, inner = fsutil.filesystem_and_path(item.path)
            fs.invalidate_cache(inner)  # the file as it is now, not as a listing cached it
            info = fs.info(inner)
            size, version = int(info.get("size") or 0), version_of(info)
    except FileNotFoundError:
        size, version = None, "gone"
    comparable = item.version.startswith("mtime:") or not fsutil.is_local(item.path)
    if size == item.size and (not comparable or version == item.version) and stamp == item.stamp:
        return
    found = "it is gone" if size is None else f"found {size}" if size != item.size else \
        f"found {size}, rewritten in place"
    raise InputChangedError(f"{item.path} changed while reading (planned {item.size} bytes, "
                            f"{found}); rerun")


class Capped:
    """A binary file's first ``limit`` bytes as a file: reads stop there."""

    def __init__(self, raw, limit: int):
        self._raw, self._left = raw, limit

    def read(self, n: int = -1) -> bytes:
        n = self._left if n is None or n < 0 else min(n, self._left)
        data = self._raw.read(n) if n > 0 else b""
        self._left -= len(data)
        return data

    def readable(self) -> bool:
        return True

    @property
    def capped(self) -> bool:
        return self._left <= 0


def _whole_lines_of_head(item: WorkItem) -> bytes:
    """The whole lines within the first ``item.head`` bytes of the (decompressed) file, read
    from at most ``item.head`` stored bytes; a line not ended within them is not sampled. Never
    raises for a damaged file: the sample is what could be read (the job reports the file)."""
    limit = item.head
    chunks: list[bytes] = []
    held, whole = 0, False
    try:
        with fsutil.open_file(item.path, "rb") as raw:
            stored = Capped(raw, limit)
            if item.format == "jsonl.gz":
                stream = gzip.GzipFile(fileobj=stored, mode="rb")
            elif item.format == "jsonl.zst":
                import zstandard

                stream = zstandard.ZstdDecompressor().stream_reader(stored, read_size=1 << 16,
                                                                   read_across_frames=True)
            else:
                stream = stored
            while held < limit:
                # at most what is asked (memory stays bounded), in pieces: what was read
                # before a damaged part is kept
                chunk = stream.read(min(limit - held, 1 << 16))
                if not chunk:
                    whole = not stored.capped  # the file ended, not the bytes a sample may read
                    break
                chunks.append(chunk)
                held += len(chunk)
    except Exception:  # noqa: BLE001 - a damaged or cut-off stream: the sample is what was read
        whole = False
    data = b"".join(chunks)
    return data if whole else data[:data.rfind(b"\n") + 1]


def _read_jsonl_range(path: str, start: int, end: int | None) -> Iterator[LineBlock]:
    with fsutil.open_file(path, "rb", blocks=True) as f:
        if start > 0:
            # The line containing byte start-1 belongs to the previous range; skip past its end
            # (a CR LF pair whose LF is byte start belongs to it too: the next line starts after).
            f.seek(start - 1)
            skipped = 0
            while True:
                block = _read_block(f)
                if not block:
                    return
                found = _LINE_END.search(block)
                if found:
                    base = start - 1 + skipped + found.end()
                    f.seek(base)
                    break
                skipped += len(block)
            first_line = None
        else:
            base, first_line = 0, 1
        if end is not None and base >= end:
            return
        yield from _line_blocks(f, base=base, end=end, first_line=first_line)


# What ends a line: Python's text mode (universal newlines), as Megatron reads JSONL: LF, CR LF,
# or a CR alone. Not U+2028 or the other breaks that str.splitlines knows (file iteration does
# not split there). In UTF-8 no multi-byte character holds the byte CR or LF, so the bytes can be
# split before decoding.
_LINE_END = re.compile(rb"\r\n?|\n")
_SPLIT_LINES = re.compile(rb"(\r\n?|\n)")


def _read_block(f) -> bytes:
    """The next block of ``f``; it never ends between the CR and LF of one line end, so that
    each block's CRs can be told apart (a CR alone ends a line, CR LF is one line end)."""
    block = f.read(_BLOCK)
    while block.endswith(b"\r"):
        more = f.read(1)
        if not more:
            break
        block += more
    return block


def _lines_of(block: bytes) -> tuple[list[bytes], list[bytes] | None, int]:
    """(the pieces of ``block`` between line ends, the line ends, or None when all are ``step``
    bytes long, step). A block of one kind of line end is split at the speed of bytes.split."""
    if b"\r" not in block:
        return block.split(b"\n"), None, 1
    if b"\n" not in block:
        return block.split(b"\r"), None, 1
    if block.count(b"\r\n") == block.count(b"\r") == block.count(b"\n"):
        return block.split(b"\r\n"), None, 2
    pieces = _SPLIT_LINES.split(block)
    return pieces[0::2], pieces[1::2], 0


def _split_lines(f, *, base: int, end: int | None, first_line: int | None) -> Iterator[RawRecord]:
    """:func:`_line_blocks` as one :class:`RawRecord` per line."""
    yield from _records(_line_blocks(f, base=base, end=end, first_line=first_line))


def _records(blocks: Iterator[LineBlock]) -> Iterator[RawRecord]:
    out: list[RawRecord] = []  # `yield out.pop()`: this frame holds no reference to the record
    for lines, first_line, offsets in blocks:
        for i, offset in enumerate(offsets):
            out.append(RawRecord(lines[i], None if first_line is None else first_line + i, offset))
            lines[i] = None
            yield out.pop()


def _line_blocks(f, *, base: int, end: int | None, first_line: int | None
                 ) -> Iterator[LineBlock]:
    """Lines from the current position of ``f`` (at byte ``base``), stopping after the last line
    that starts before ``end``, without their line ends (LF, CR LF or CR: see ``_LINE_END``),
    one :class:`LineBlock` per block read. Line numbers count from ``first_line`` (None =
    unknown).

    A line longer than a block (one huge document) is gathered block by block and joined once,
    into a block of its own: its peak is twice its size, and no copy of it is kept here once it
    is yielded (the caller takes it out of the block's list), so it lives only as long as the
    caller holds it."""
    pending: list[bytes] = []  # the blocks of a line longer than one block
    offset = base
    line_no = first_line
    while True:
        block = _read_block(f)
        if not block:
            break
        if pending:
            found = _LINE_END.search(block)
            if found is None:
                pending.append(block)
                continue
            pending.append(block[:found.start()])
            block = block[found.end():]
            if end is not None and offset >= end:
                return
            one = [b"".join(pending)]
            pending = []
            size = len(one[0])
            yield LineBlock(one, line_no, [offset])
            del one
            offset += size + len(found.group())
            if line_no is not None:
                line_no += 1
        lines, ends, step = _lines_of(block)
        del block
        tail = lines.pop()
        pending = [tail] if tail else []
        del tail
        # each line's offset: the running sum of the lines' sizes and their line ends (in C)
        sizes = (map(step.__add__, map(len, lines)) if ends is None
                 else map(operator.add, map(len, lines), map(len, ends)))
        offsets = list(itertools.accumulate(sizes, initial=offset))
        offset = offsets.pop()  # where the next line starts
        if end is not None and offset > end:
            keep = bisect.bisect_left(offsets, end)  # the lines that start before end
            if keep < len(lines):
                del lines[keep:], offsets[keep:]
                if lines:
                    yield LineBlock(lines, line_no, offsets)
                return
        if lines:
            count = len(lines)
            yield LineBlock(lines, line_no, offsets)
            if line_no is not None:
                line_no += count
        del lines, ends, offsets
    if pending and (end is None or offset < end):
        one = [b"".join(pending)]
        pending = []
        yield LineBlock(one, line_no, [offset])


def line_number_at(path: str, offset: int) -> int:
    """1-based number of the line starting at ``offset`` of an uncompressed file, counting lines
    as :func:`_split_lines` does (a CR LF pair ends one line)."""
    count = 0
    after_cr = False  # the block before ended with CR: a LF starting this one is of that pair
    with fsutil.open_file(path, "rb") as f:
        remaining = offset
        while remaining > 0:
            block = f.read(min(_BLOCK, remaining))
            if not block:
                break
            count += block.count(b"\n") + block.count(b"\r") - block.count(b"\r\n")
            if after_cr and block.startswith(b"\n"):
                count -= 1
            after_cr = block.endswith(b"\r")
            remaining -= len(block)
    return count + 1


# --- Parquet ----------------------------------------------------------------------------------

def row_group_bytes(pf, groups: Sequence[int], columns: Sequence[str]) -> int:
    """Uncompressed bytes of ``columns`` in row ``groups``, from the footer (nothing read)."""
    meta, wanted = pf.metadata, set(columns)
    total = 0
    for g in groups:
        group = meta.row_group(g)
        for c in range(group.num_columns):
            chunk = group.column(c)
            if chunk.path_in_schema.split(".")[0] in wanted:
                total += chunk.total_uncompressed_size
    return total


def read_parquet(item: WorkItem, columns: Sequence[str]) -> Iterator[tuple[int, dict]]:
    """``(row index, {column: list of values})`` per row group, columns read whole (no per-row
    dicts). A column missing from the file gives a list of None (reported per record)."""
    import pyarrow.parquet as pq

    if item.error:
        raise CorruptFileError(item.error)
    if item.size is not None:
        faults.checkpoint("readers.item_started")
    try:
        with fsutil.open_file(item.path, "rb") as fh:
            pf = pq.ParquetFile(fh)
            present = [c for c in columns if c in pf.schema_arrow.names]
            if item.head is not None and row_group_bytes(pf, item.row_groups, present) > item.head:
                return  # a planning sample: this row group is larger than a sample may be
            row = item.first_row
            if row is None:  # not planned by plan_items: counted in the footer
                row = sum(pf.metadata.row_group(g).num_rows
                          for g in range(min(item.row_groups or (0,)))) if item.row_groups else 0
            for g in item.row_groups:
                table = pf.read_row_group(g, columns=present)
                values = {c: table.column(c).to_pylist() for c in present}
                for c in columns:
                    if c not in values:
                        values[c] = [None] * table.num_rows
                yield row, values
                row += table.num_rows
            confirm_unchanged(item, fh)
    except CorruptFileError:
        raise
    except Exception as exc:  # noqa: BLE001 - any pyarrow failure means an unreadable file
        confirm_unchanged(item)  # a file cut short under us changed; it is not corrupt
        raise CorruptFileError(f"{item.path}: not a readable Parquet file ({exc}); the file is "
                               "corrupt or truncated: re-copy it or leave it out") from exc
