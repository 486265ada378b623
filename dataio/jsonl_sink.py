"""Reshard's sink: JSONL shards written under temporary names, then committed by renaming.

Protocol (the same on local disk and object stores):

1. The driver picks a run's temporary folder, :func:`new_temporary_dir`: a hidden folder in the
   output (``.reshard-{run}.tmp``), so that listing the output for shards never sees it.
2. Each shard is written by :func:`write_lines` to :func:`attempt_path`, a name unique to the
   attempt (``{name}.{attempt}.part``): a retried bundle never truncates or collides with an
   earlier attempt's file. A write that fails removes its own file.
3. :func:`commit`, one step after every shard is written, deletes the temporaries of dropped
   shards and commits the kept ones all or nothing as every reader sees it, through the
   output's manifest :data:`MANIFEST_NAME` (a marker written last, as Hadoop's ``_SUCCESS``; no
   folder rename, which flat blob containers do not have):

   a. the manifest is written *unfinished*: every shard the folder will hold once the commit
      is done (name and size), the shards it held before, and the renames and deletions to do
      (every name a base name in the output, each temporary relative to it:
      ``.reshard-{run}.tmp/{name}``, so the same from any working folder);
   b. each kept temporary is renamed to its final name (:func:`dataio.fs.replace`: atomic on
      local disk and ADLS Gen2; on flat blob containers copy-then-delete, the target complete
      whenever it exists);
   c. the outputs of an earlier run that are not among the new names are deleted
      (``--overwrite``);
   d. the manifest is written *complete*: the shards with their sizes, nothing else (the same
      bytes on every run).

   Readers (:func:`refusal`, called by ``dataio.discovery.find_inputs``, the one way every job
   finds its inputs) refuse a folder whose manifest is unfinished, a listed shard whose size
   differs, and, when the folder is read whole, a listed shard that is missing. A kill anywhere
   in a-d leaves the manifest unfinished; the next reshard run into that folder settles it
   first (:func:`recover`): if every rename was done it finishes the commit, otherwise it rolls
   it back (deletes the shards already renamed and the dead run's temporaries) and goes on
   as a fresh run. A retried commit (same temporaries) redoes what is left and skips a rename
   already done. A manifest naming anything else (a path outside the output, a temporary
   outside its ``.reshard-*.tmp`` folders: edited or planted) is refused with one line and
   nothing it names is touched (:func:`checked_manifest`). Reshard holds the output's lock
   (:mod:`dataio.lock`) from before it settles a commit to its end, so the run it settles is
   dead, not merely slow.
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
import os
import re
import uuid
from typing import Iterable, Sequence

from runtime import errors, faults
from dataio import naming
from dataio import fs as fsutil
from dataio import locations
from dataio.lock import LOCK_NAME

EXTENSIONS = {"none": ".jsonl", "gzip": ".jsonl.gz", "zstd": ".jsonl.zst"}
SUMMARY_NAME = "_summary.json"
# The output's commit marker (step 3). No input suffix: a folder listing for inputs passes it by.
MANIFEST_NAME = "_reshard_manifest"
_MANIFEST_VERSION = 1
_WRITE_BUFFER = 8 << 20


class ManifestError(errors.ConfigError):
    """An output's manifest that reshard did not write as it reads (a name outside the output,
    a temporary that is not one of this output's): edited or planted, so nothing it names is
    touched (exit status 2)."""


class LostShardError(errors.RunError):
    """A written shard vanished before its commit (neither its temporary nor its final file
    exists): the run must be redone."""


@dataclasses.dataclass(frozen=True)
class WrittenLines:
    """What :func:`write_lines` wrote: lines, and their bytes before compression."""

    lines: int
    bytes: int


# A run's temporary folder, directly in the output (step 1).
_TEMPORARY_DIR = re.compile(r"\.reshard-[0-9A-Za-z_-]{1,64}\.tmp")


def new_temporary_dir(output: str) -> str:
    """A temporary folder for one run's shards, in ``output`` and hidden (see step 1)."""
    return fsutil.join(output, f".reshard-{uuid.uuid4().hex[:12]}.tmp")


def is_temporary_dir(name: str) -> bool:
    """Whether ``name`` (a base name in the output) is a run's temporary folder (step 1)."""
    return _TEMPORARY_DIR.fullmatch(name) is not None


def remove_temporary_dirs(output: str) -> list[str]:
    """Remove every run's temporary folder in ``output`` (step 1); returns their names. Only
    for a run holding the output's lock (:mod:`dataio.lock`): then no other run is alive, and
    what is there was left by runs killed before their commit."""
    found = [n for n in fsutil.list_names(output) if is_temporary_dir(n)]
    for name in found:
        fsutil.remove_tree(fsutil.join(output, name))
    return found


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


def _name(path: str) -> str:
    return path.rstrip("/").rsplit("/", 1)[-1]


def _folder(path: str) -> str:
    return path.rstrip("/").rsplit("/", 1)[0]


def manifest_path(output: str) -> str:
    return fsutil.join(output, MANIFEST_NAME)


def read_manifest(output: str) -> dict | None:
    """The output's manifest (step 3), None if it has none; one that cannot be read or parsed
    (a copy cut short) reads as unfinished. Its names are not checked: see
    :func:`checked_manifest`."""
    try:
        data = json.loads(fsutil.read_bytes(manifest_path(output)))
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return {"complete": False, "files": {}, "damaged": True}
    if not isinstance(data, dict) or not isinstance(data.get("files"), dict):
        return {"complete": False, "files": {}, "damaged": True}
    return data


def _plain_name(name) -> bool:
    """A file directly in the output that a manifest may name: no folder, no ``..``, no
    control character, and none of the output's control files."""
    return (isinstance(name, str) and name not in ("", ".", "..", MANIFEST_NAME, LOCK_NAME)
            and "/" not in name and "\\" not in name and naming.printable(name) == name)


def _sizes_fault(sizes, key: str) -> str:
    if not isinstance(sizes, dict):
        return f"{key!r} is not a table of names and sizes"
    for name, size in sizes.items():
        if not _plain_name(name):
            return f"{key!r} names {name!r}, not a file directly in the output"
        if type(size) is not int or size < 0:
            return f"{key!r} gives {name!r} the size {size!r}"
    return ""


def _names_fault(names, key: str) -> str:
    if not isinstance(names, list):
        return f"{key!r} is not a list of names"
    for name in names:
        if not _plain_name(name):
            return f"{key!r} names {name!r}, not a file directly in the output"
    return ""


def manifest_fault(manifest: dict) -> str:
    """Why ``manifest`` (as :func:`read_manifest` gives it) is not one that reshard wrote, ""
    when it may be: every name in it must be a file directly in the output, every temporary
    a file in one of the output's own run folders (``.reshard-{run}.tmp/{name}``, recorded
    relative to the output). Anything else was edited or planted, and acting on it could
    delete files anywhere."""
    if manifest.get("damaged"):
        return ""
    for key in ("files", "previous"):
        why = _sizes_fault(manifest.get(key) or {}, key)
        if why:
            return why
    for key in ("removing", "lost"):
        why = _names_fault(manifest.get(key) or [], key)
        if why:
            return why
    adding = manifest.get("adding") or []
    if not isinstance(adding, list):
        return "'adding' is not a list of [temporary, name]"
    for entry in adding:
        if not (isinstance(entry, list) and len(entry) == 2):
            return f"'adding' holds {entry!r}, not [temporary, name]"
        temporary, name = entry
        if not _plain_name(name):
            return f"'adding' names {name!r}, not a file directly in the output"
        folder, _, base = temporary.partition("/") if isinstance(temporary, str) else ("", "", "")
        if not is_temporary_dir(folder) or not _plain_name(base):
            return (f"'adding' has the temporary {temporary!r}, not a file in one of the "
                    "output's .reshard-*.tmp folders")
    return ""


def checked_manifest(output: str) -> dict | None:
    """:func:`read_manifest`, refusing (:class:`ManifestError`) one that reshard did not write
    (:func:`manifest_fault`)."""
    manifest = read_manifest(output)
    if manifest is not None and isinstance(manifest.get("adding"), list):
        manifest["adding"] = [_of_earlier_version(output, entry)
                              for entry in manifest["adding"]]
    why = manifest_fault(manifest) if manifest is not None else ""
    if why:
        raise ManifestError(_fault_message(output, why))
    return manifest


def _of_earlier_version(output: str, entry):
    """An ``adding`` entry as an earlier tokenbeam wrote it (the temporary's whole path, as the
    run spelled it) made relative, when that path is in this output's own run folder; anything
    else is left for :func:`manifest_fault` to refuse."""
    if not (isinstance(entry, list) and len(entry) == 2 and isinstance(entry[0], str)):
        return entry
    temporary = entry[0]
    if temporary.count("/") < 2 or is_temporary_dir(temporary.partition("/")[0]):
        return entry
    relative = "/".join(temporary.rsplit("/", 2)[-2:])
    if is_temporary_dir(_folder(relative)) and locations.same_location(
            _folder(_folder(temporary)), output):
        return [relative, entry[1]]
    return entry


def _fault_message(output: str, why: str) -> str:
    return (f"{manifest_path(output)}: not a manifest reshard wrote ({why}); it was edited or "
            "planted, so nothing it names was touched: remove it, then rerun")


def _relative(output: str, temporary: str) -> str:
    """``temporary`` relative to ``output`` (``.reshard-{run}.tmp/{name}``), as the manifest
    records it: the same from any working folder and for any spelling of the output."""
    relative = "/".join(temporary.rstrip("/").rsplit("/", 2)[-2:])
    if fsutil.join(output, relative) != temporary or not is_temporary_dir(_folder(relative)):
        raise ValueError(f"{temporary}: not a temporary of {output} (see new_temporary_dir)")
    return relative


def _write_manifest(output: str, manifest: dict) -> None:
    fsutil.write_bytes_atomic(manifest_path(output), json.dumps(
        {"version": _MANIFEST_VERSION, **manifest}, indent=1, sort_keys=True).encode("utf-8"))


def _complete(output: str, files: dict[str, int]) -> None:
    _write_manifest(output, {"complete": True, "files": dict(sorted(files.items()))})


def commit(renames: Sequence[tuple[str, str]], *, output: str, dropped: Iterable[str] = (),
           stale: Iterable[str] = ()) -> None:
    """Step 3: delete the ``dropped`` temporaries, then move each ``(temporary, final)`` into
    place in ``output`` and delete the ``stale`` outputs that are not one of the finals, all or
    nothing through the output's manifest. Raises :class:`LostShardError` when a temporary is
    gone and its final file is not there either (so this is not a retry of a commit that got
    that far)."""
    for path in dropped:
        fsutil.remove(path)
    stale = list(stale)
    before = checked_manifest(output) or {"complete": True, "files": {}}
    # What the folder held before this commit. An unfinished manifest here is a retry of this
    # commit (its "previous"), or one that recover() left naming shards it could not restore
    # (its "files": the others).
    previous = before["files"] if before.get("complete") or before.get("lost") else \
        before.get("previous") or {}
    finals = {_name(final) for _, final in renames}
    removing = {_name(p) for p in stale}
    present = {_name(p) for p in fsutil.list_files(output)}  # one listing: shards deleted by hand
    files = {n: size for n, size in previous.items() if n not in removing and n in present}
    for temporary, final in renames:
        fs, source = fsutil.filesystem_and_path(temporary)
        _, target = fsutil.filesystem_and_path(final)
        if fs.exists(source):
            files[_name(final)] = int(fs.size(source))
        elif fs.exists(target):
            files[_name(final)] = int(fs.size(target))
        else:
            raise LostShardError(f"{temporary}: written shard missing before its commit to "
                                 f"{final}; rerun the job")
    adding = [[_relative(output, temporary), _name(final)] for temporary, final in renames]
    _write_manifest(output, {"complete": False, "files": files, "previous": previous,
                             "adding": adding, "removing": sorted(removing)})
    for temporary, final in renames:
        fs, source = fsutil.filesystem_and_path(temporary)
        _, target = fsutil.filesystem_and_path(final)
        if fs.exists(source):
            fsutil.replace(fs, source, target)
        faults.checkpoint("reshard.between_renames")
    for path in stale:
        if _name(path) not in finals:
            fsutil.remove(path)
    _complete(output, files)


def unfinished_shards(output: str) -> set[str]:
    """The names an unfinished commit into ``output`` was adding (what :func:`recover` would
    roll back); empty when the manifest is complete or absent."""
    manifest = checked_manifest(output)
    if manifest is None or manifest.get("complete"):
        return set()
    return {name for _, name in manifest.get("adding") or []}


def recover(output: str) -> str:
    """Settle a commit into ``output`` that a killed run left unfinished (step 3), before a new
    run plans, so that the rerun of the same command goes on as a fresh run. Rolled back (the
    shards already renamed into place and the dead run's temporaries deleted) unless it had
    begun deleting the outputs of an earlier run (``--overwrite``): then finished, since what it
    deleted cannot come back. Returns what it did, in one line ("" when there was nothing to do).
    A rolled-back commit that had replaced shards of an earlier run under the same names cannot
    restore them: the manifest stays unfinished, naming them, until a run with ``--overwrite``
    commits."""
    manifest = checked_manifest(output)
    if manifest is None or manifest.get("complete") or manifest.get("damaged"):
        return ""
    adding = manifest.get("adding") or []
    if not adding:
        return ""  # recover() left it naming lost shards: only a new commit settles it
    exists = fsutil.exists
    finals = {name for _, name in adding}
    renamed = [name for temporary, name in adding
               if not exists(fsutil.join(output, temporary))
               and exists(fsutil.join(output, name))]
    removing = [n for n in manifest.get("removing") or [] if n not in finals]
    if any(not exists(fsutil.join(output, n)) for n in removing):
        for name in removing:
            fsutil.remove(fsutil.join(output, name))
        _complete(output, manifest["files"])
        return (f"reshard: finished the commit of an interrupted run in {output} (it had begun "
                "deleting the shards it replaces)")
    for name in renamed:
        fsutil.remove(fsutil.join(output, name))
    for temp_dir in sorted({_folder(temporary) for temporary, _ in adding}):
        fsutil.remove_tree(fsutil.join(output, temp_dir))  # checked: a .reshard-*.tmp in output
    previous = manifest.get("previous") or {}
    lost = sorted(n for n, size in previous.items()
                  if not exists(fsutil.join(output, n))
                  or fsutil.size(fsutil.join(output, n)) != size)
    if lost:
        _write_manifest(output, {"complete": False, "lost": lost, "previous": previous,
                                 "files": {n: s for n, s in previous.items() if n not in lost}})
    else:
        _complete(output, previous)
    return (f"reshard: rolled back the unfinished commit of an interrupted run in {output} "
            f"({len(renamed)} of {len(adding)} shard(s) had been renamed into place)")


def refusal_of_inputs(patterns: Iterable[str], files: dict[str, int | None]) -> str:
    """:func:`refusal` for the input ``files`` (path -> size, None where unreadable) that
    ``patterns`` (the ``--input`` values) matched, folder by folder; a folder named by a pattern
    is read whole."""
    by_folder: dict[str, dict[str, int | None]] = {}
    for path, size in files.items():
        folder, _, name = path.rstrip("/").rpartition("/")
        by_folder.setdefault(folder or ".", {})[name] = size

    def spelled(path: str) -> str:  # one spelling per folder (listings give absolute paths)
        if fsutil.is_local(path):
            return os.path.abspath(path.removeprefix("file://"))
        return path.rstrip("/")

    given = {spelled(p) for p in patterns}
    for folder, sizes in sorted(by_folder.items()):
        why = refusal(folder, sizes, whole=spelled(folder) in given)
        if why:
            return why
    return ""


def refusal(folder: str, sizes: dict[str, int | None], *, whole: bool) -> str:
    """Why a job must not read the files ``sizes`` (name -> size on storage, None where it could
    not be read: its shards fail with that reason) found in ``folder``
    ("" when it may): the folder's reshard manifest (step 3) is unfinished, or lists one of them
    with another size, or (``whole``: the folder was given as an input) lists a shard that is
    not there. A folder without a manifest is not reshard's: nothing to check."""
    manifest = read_manifest(folder)
    if manifest is None:
        return ""
    why = manifest_fault(manifest)
    if why:
        return _fault_message(folder, why)
    if manifest.get("lost"):
        return (f"{folder}: an interrupted reshard run had already replaced earlier shards there "
                f"(e.g. {manifest['lost'][0]}); rerun the reshard command with --overwrite, "
                "then this one")
    if not manifest.get("complete"):
        return (f"{folder}: holds an unfinished reshard commit (the run was interrupted); rerun "
                "the same reshard command to settle it, then this one")
    listed = manifest["files"]
    for name, size in sorted(sizes.items()):
        if name in listed and size is not None and listed[name] != size:
            return (f"{fsutil.join(folder, name)}: {size} bytes, but reshard committed it with "
                    f"{listed[name]}; it changed since: rerun the reshard command with "
                    "--overwrite")
    missing = sorted(set(listed) - set(sizes)) if whole else []
    if missing:
        return (f"{folder}: {len(missing)} shard(s) its reshard commit lists are missing (e.g. "
                f"{missing[0]}); rerun the reshard command with --overwrite")
    return ""


def write_summary(temp_dir: str, *, shards: list[dict], failed: list[dict]) -> None:
    """Step 4: ``{"shards": [row per committed shard], "failed": [{"path", "reason"}]}``."""
    fsutil.write_bytes_atomic(fsutil.join(temp_dir, SUMMARY_NAME),
                      json.dumps({"shards": shards, "failed": failed}, indent=1).encode("utf-8"))


def read_summary(temp_dir: str) -> dict:
    return json.loads(fsutil.read_bytes(fsutil.join(temp_dir, SUMMARY_NAME)))
