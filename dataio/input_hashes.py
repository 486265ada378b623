"""Content hashes of local inputs, remembered between runs by the file's identity.

``--verify-inputs`` (the default) puts each local input's sha256 into its shards' resume key, so
that an edit keeping the size and restoring the mtime still redoes the shard. Hashing every
input on every run would make a rerun that skips everything read the whole corpus again, so the
hash is remembered with the file's identity as ``stat`` gives it: device, inode, size, mtime and
**ctime**. The kernel sets ctime to the current time on every write and every metadata change
(including the ``touch -d`` or ``os.utime`` that restores an mtime), and no system call sets it
back, so a file whose identity is unchanged holds the bytes that were hashed.

As git does with its index ("racy git"), an entry is only kept when the file's ctime is at
least :data:`RACY_NS` older than the moment it was stat-ed before hashing: a write in the same
clock tick as that stat could leave the ctime unchanged. Such files are hashed again next run.

The cache is ``$XDG_CACHE_HOME/tokenbeam/input-hashes.json`` (else ``~/.cache/...``), written
whole and atomically, at most :data:`MAX_ENTRIES` files (the least recently hashed go first); a
missing, unreadable or foreign cache only means hashing again. Paths are absolute, so runs from
other folders share it.
"""

from __future__ import annotations

import json
import os
import stat
import time

from dataio import fs as fsutil
from dataio import file_hashes

RACY_NS = 2_000_000_000  # a file changed this close to its hashing is hashed again next run
MAX_ENTRIES = 50_000  # the least recently hashed files are forgotten beyond this
_VERSION = 1


def cache_path() -> str:
    return os.path.join(fsutil.cache_dir(), "input-hashes.json")


def _identity(st: os.stat_result) -> list[int]:
    return [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


def stamp(st: os.stat_result) -> str:
    """The identity of a file's bytes as a worker can check it (dataio/readers.py
    ``confirm_unchanged``): inode, size, mtime and ctime, without the device number, which
    differs between the hosts mounting one network file system."""
    return f"ino={st.st_ino} size={st.st_size} mtime_ns={st.st_mtime_ns} ctime_ns={st.st_ctime_ns}"


def _load() -> dict[str, list]:
    try:
        with open(cache_path(), "rb") as f:
            data = json.load(f)
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("version") != _VERSION:
        return {}
    files = data.get("files")
    return files if isinstance(files, dict) else {}


def _save(files: dict[str, list]) -> None:
    fsutil.write_cache_file(cache_path(), json.dumps({"version": _VERSION, "files": files},
                                                     separators=(",", ":")).encode())


def content_hashes(paths: list[str], *,
                   stamps: dict[str, str] | None = None) -> dict[str, str | None]:
    """:func:`dataio.file_hashes.content_hashes` of local ``paths``, reusing remembered hashes of files
    whose identity has not changed; a file that cannot be read, or is not a regular file (a
    FIFO, a device: never opened), maps to ``None``. ``stamps``, when given, receives each
    hashed path's :func:`stamp` as stat-ed before hashing: a reader that finds the file with
    that stamp reads the bytes that were hashed."""
    if not paths:
        return {}
    cache = _load()
    known: dict[str, str | None] = {}
    todo: dict[str, tuple[str, list[int], int]] = {}  # path -> (absolute path, identity, stat time)
    for path in paths:
        local = os.path.abspath(path.removeprefix("file://"))
        stat_time = time.time_ns()
        try:
            st = os.stat(local)
        except OSError:
            known[path] = None
            continue
        if not stat.S_ISREG(st.st_mode):  # a FIFO or device would never end: never hashed
            known[path] = None  # (discovery refuses such inputs; this is the last guard)
            continue
        identity = _identity(st)
        if stamps is not None:
            stamps[path] = stamp(st)
        entry = cache.get(local)
        if isinstance(entry, list) and len(entry) == 2 and entry[0] == identity:
            known[path] = entry[1]
        else:
            todo[path] = (local, identity, stat_time)
    if todo:
        hashed = file_hashes.content_hashes(list(todo))
        for path, digest in hashed.items():
            known[path] = digest
            local, identity, stat_time = todo[path]
            cache.pop(local, None)  # re-inserted last: the dict's order is the order of hashing
            if digest is not None and identity[4] + RACY_NS <= stat_time:
                cache[local] = [identity, digest]
        _save(dict(list(cache.items())[-MAX_ENTRIES:]))
    return {p: known[p] for p in paths}
