"""Storage access for every path tokenbeam touches: local paths and any fsspec URL.

Local paths go through the OS directly (memory maps, atomic ``os.replace``); anything with a
``scheme://`` goes through fsspec. Per-protocol storage options (credentials) are registered
once per process with :func:`set_storage_options` (on Beam workers: in ``DoFn.setup``), so they
are never part of a pickled transform or a logged URL.
"""

from __future__ import annotations

import mmap
import os
from typing import Any

import fsspec
from fsspec.implementations.local import LocalFileSystem

_STORAGE_OPTIONS: dict[str, dict[str, Any]] = {}
_LOCAL = LocalFileSystem()


def set_storage_options(protocol: str, options: dict[str, Any]) -> None:
    """Options (e.g. credentials) used for every URL of ``protocol`` in this process."""
    _STORAGE_OPTIONS[protocol] = dict(options)


def storage_options(protocol: str) -> dict[str, Any]:
    return dict(_STORAGE_OPTIONS.get(protocol, {}))


def is_local(path: str) -> bool:
    return "://" not in path or path.startswith("file://")


def filesystem_and_path(path: str) -> tuple[fsspec.AbstractFileSystem, str]:
    """The filesystem of ``path`` and the path as that filesystem names it."""
    if is_local(path):
        return _LOCAL, os.path.abspath(path.removeprefix("file://"))
    protocol = path.split("://", 1)[0]
    fs, inner = fsspec.core.url_to_fs(path, **storage_options(protocol))
    return fs, inner


def open_file(path: str, mode: str = "rb", **kwargs):
    fs, inner = filesystem_and_path(path)
    return fs.open(inner, mode, **kwargs)


def exists(path: str) -> bool:
    fs, inner = filesystem_and_path(path)
    return fs.exists(inner)


def size(path: str) -> int:
    fs, inner = filesystem_and_path(path)
    return int(fs.size(inner))


def makedirs(fs: fsspec.AbstractFileSystem, path: str) -> None:
    if path:
        fs.makedirs(path, exist_ok=True)


def replace(fs: fsspec.AbstractFileSystem, source: str, target: str) -> None:
    """Move ``source`` to ``target``, replacing it (atomic on local disk)."""
    if isinstance(fs, LocalFileSystem):
        os.replace(source, target)
    else:
        fs.mv(source, target)


def map_or_read(path: str):
    """A read-only buffer of the whole file: a memory map for local files (an empty ``bytes`` for
    a 0-byte file, which cannot be mapped), the file's bytes otherwise."""
    if is_local(path):
        local = path.removeprefix("file://")
        with open(local, "rb") as f:
            if os.fstat(f.fileno()).st_size == 0:
                return b""
            return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    with open_file(path, "rb") as f:
        return f.read()


def join(base: str, *parts: str) -> str:
    if is_local(base):
        return os.path.join(base, *parts)
    return "/".join([base.rstrip("/"), *parts])


def glob(pattern: str) -> list[str]:
    """Expand a glob; returned paths keep the scheme of the pattern."""
    fs, inner = filesystem_and_path(pattern)
    if is_local(pattern):
        return sorted(fs.glob(inner))
    protocol = pattern.split("://", 1)[0]
    return sorted(f"{protocol}://{p}" for p in fs.glob(inner))


def read_bytes(path: str) -> bytes:
    with open_file(path, "rb") as f:
        return f.read()


def write_bytes_atomic(path: str, data: bytes) -> None:
    """Write a small object under a temporary name, then move it into place."""
    fs, inner = filesystem_and_path(path)
    makedirs(fs, os.path.dirname(inner))
    head, tail = os.path.split(inner)
    tmp = os.path.join(head, f".{tail}.inprogress-{os.getpid()}")
    with fs.open(tmp, "wb") as f:
        f.write(data)
    replace(fs, tmp, inner)


def remove(path: str) -> None:
    """Delete a file if it exists."""
    fs, inner = filesystem_and_path(path)
    try:
        fs.rm(inner)
    except FileNotFoundError:
        pass


def remove_tree(path: str) -> None:
    """Delete a folder and everything under it, if it exists."""
    fs, inner = filesystem_and_path(path)
    if fs.exists(inner):
        fs.rm(inner, recursive=True)


def list_names(path: str) -> list[str]:
    """Base names of the entries directly in folder ``path`` (empty if it does not exist)."""
    fs, inner = filesystem_and_path(path)
    if not fs.exists(inner):
        return []
    return sorted(os.path.basename(p.rstrip("/")) for p in fs.ls(inner, detail=False))
