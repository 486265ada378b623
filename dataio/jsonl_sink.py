"""Reshard's sink: JSONL shards written under temporary names, then committed by renaming.

Protocol (the same on local disk and object stores):

1. The driver picks a run's temporary folder, :func:`new_temporary_dir`: a hidden folder in the
   output (``.reshard-{run}.tmp``), so that listing the output for shards never sees it.
2. Each shard is written by :func:`write_lines` to :func:`attempt_path`, a name unique to the
   attempt (``{name}.{attempt}.part``): a retried bundle never truncates or collides with an
   earlier attempt's file. A write that fails removes its own file.
3. :func:`commit`, one step after every shard is written, deletes the temporaries of dropped
   shards, renames each kept one to its final name (:func:`dataio.fs.replace`: atomic on local
   disk and ADLS Gen2; on flat blob containers copy-then-delete, the target complete whenever
   it exists), and only then deletes the outputs of an earlier run that are not among the new
   names (``--overwrite``). Idempotent: a retried commit skips a rename already done.
4. The commit step records what it committed and which inputs failed in ``_summary.json`` in the
   temporary folder (:func:`write_summary`); the driver reads it (:func:`read_summary`) and then
   removes the temporary folder.

Bytes: lines are written as given, each followed by ``\\n``. Compressed shards carry nothing but
the lines: gzip (level 6) with no file name and mtime 0 in its header, zstd (level 3) one
stream; writes go out in 8 MiB blocks. So the same lines give the same bytes on every run.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import uuid
from typing import Iterable, Sequence

from dataio import errors
from dataio import fs as fsutil

EXTENSIONS = {"none": ".jsonl", "gzip": ".jsonl.gz", "zstd": ".jsonl.zst"}
SUMMARY_NAME = "_summary.json"
_WRITE_BUFFER = 8 << 20


class LostShardError(errors.RunError):
    """A written shard vanished before its commit (neither its temporary nor its final file
    exists): the run must be redone."""


@dataclasses.dataclass(frozen=True)
class WrittenLines:
    """What :func:`write_lines` wrote: lines, and their bytes before compression."""

    lines: int
    bytes: int


def new_temporary_dir(output: str) -> str:
    """A temporary folder for one run's shards, in ``output`` and hidden (see step 1)."""
    return fsutil.join(output, f".reshard-{uuid.uuid4().hex[:12]}.tmp")


def attempt_path(temp_dir: str, name: str) -> str:
    """Where one attempt at writing shard ``name`` puts it (see step 2)."""
    return fsutil.join(temp_dir, f"{name}.{uuid.uuid4().hex[:12]}.part")


def _open_compressed(raw, compression: str):
    if compression == "gzip":
        # No name and mtime 0 in the header: the same documents give the same bytes.
        return gzip.GzipFile(filename="", fileobj=raw, mode="wb", compresslevel=6, mtime=0)
    if compression == "zstd":
        import zstandard

        return zstandard.ZstdCompressor(level=3).stream_writer(raw, closefd=False)
    if compression != "none":
        raise ValueError(f"compression {compression!r}: expected one of {sorted(EXTENSIONS)}")
    return None


def write_lines(path: str, lines: Iterable[bytes], *, compression: str) -> WrittenLines:
    """Write ``lines`` (without their newlines) to ``path``, compressed as ``compression``
    (a key of :data:`EXTENSIONS`). On failure the file is removed and the error raised."""
    fs, inner = fsutil.filesystem_and_path(path)
    count = size = 0
    fsutil.makedirs(fs, inner.rsplit("/", 1)[0])
    raw = fs.open(inner, "xb" if fsutil.is_local(path) else "wb")  # a new file, never a link
    try:
        out = _open_compressed(raw, compression)
        sink = out if out is not None else raw
        buffer = bytearray()
        for line in lines:
            buffer += line
            buffer += b"\n"
            count += 1
            size += len(line) + 1
            if len(buffer) >= _WRITE_BUFFER:
                sink.write(bytes(buffer))
                buffer.clear()
        if buffer:
            sink.write(bytes(buffer))
        if out is not None:
            out.close()
        raw.close()
    except BaseException:
        raw.close()
        fsutil.remove(path)
        raise
    return WrittenLines(lines=count, bytes=size)


def commit(renames: Sequence[tuple[str, str]], *, dropped: Iterable[str] = (),
           stale: Iterable[str] = ()) -> None:
    """Step 3: delete the ``dropped`` temporaries, move each ``(temporary, final)`` into place,
    then delete the ``stale`` outputs that are not one of the finals. Raises
    :class:`LostShardError` when a temporary is gone and its final file is not there either
    (so this is not a retry of a commit that got that far)."""
    for path in dropped:
        fsutil.remove(path)
    finals = set()
    for temporary, final in renames:
        fs, source = fsutil.filesystem_and_path(temporary)
        _, target = fsutil.filesystem_and_path(final)
        if fs.exists(source):
            fsutil.replace(fs, source, target)
        elif not fs.exists(target):
            raise LostShardError(f"{temporary}: written shard missing before its commit to "
                                 f"{final}; rerun the job")
        finals.add(final)
    for path in stale:
        if path not in finals:
            fsutil.remove(path)


def write_summary(temp_dir: str, *, shards: list[dict], failed: list[dict]) -> None:
    """Step 4: ``{"shards": [row per committed shard], "failed": [{"path", "reason"}]}``."""
    fsutil.write_bytes_atomic(fsutil.join(temp_dir, SUMMARY_NAME),
                      json.dumps({"shards": shards, "failed": failed}, indent=1).encode("utf-8"))


def read_summary(temp_dir: str) -> dict:
    return json.loads(fsutil.read_bytes(fsutil.join(temp_dir, SUMMARY_NAME)))
