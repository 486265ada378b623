"""Storage access for every path tokenbeam touches: local paths and any fsspec URL.

Local paths go through the OS directly (memory maps, atomic ``os.replace``); anything with a
``scheme://`` goes through fsspec. Per-protocol storage options (credentials) are registered
once per process with :func:`set_storage_options` (on Beam workers: in ``DoFn.setup``), so they
are never part of a pickled transform or a logged URL.

Schemes that need more than fsspec gives (credentials per account, URL forms fsspec does not
parse, a commit that is not ``fs.mv``) register a handler with :func:`register_scheme` when their
package is imported; fs holds none of their code. Azure (``abfs://``, ``abfss://``, ``az://``,
``https://ACCOUNT.blob.core.windows.net/...``, Azurite's path-style URLs) is one:
dataio/azure/scheme.py, one filesystem per account and credential, path ``container/blob``.

Storage primitives for commit protocols (same behaviour on local disk and object stores):
:func:`replace` (atomic rename locally and on ADLS Gen2; copy-then-delete on flat blob
containers, the target complete whenever it exists), :func:`write_bytes_atomic` (a small file
appears whole or not at all), :func:`info` (size, etag, mtime), :func:`list_files`,
:func:`remove` and :func:`remove_temporaries`. Where a path points (is an output one of the
inputs?) is dataio/locations.py; a file's content hash, dataio/file_hashes.py.

Links: nothing tokenbeam writes on local disk goes through a symbolic link planted where the
file goes (which would overwrite a file elsewhere, e.g. another user's): new files are created
exclusively (``O_CREAT|O_EXCL``, which refuses any link) under a unique temporary name and
renamed over the final name (a link there is replaced, its target untouched); a file opened in
place (the output's ``_lock``) is opened with ``O_NOFOLLOW``, and :func:`refuse_links` refuses
an output whose own control files or folders are links. Object stores have no links.

Not files: every local read of tokenbeam's own files (:func:`read_bytes`, :func:`map_or_read`,
:func:`open_file` for reading: shards, indexes, records, manifests) first checks, on a
descriptor opened without blocking, that the path is a regular file; a FIFO, a device (a link to
``/dev/zero``) or a socket there is :class:`NotRegularFileError`, one line naming it, instead of
a read that blocks or never ends.
"""

from __future__ import annotations

import errno
import importlib
import itertools
import mmap
import os
import shutil
import stat
import sys
import threading
import uuid
from typing import Any, Callable

import fsspec
from fsspec.implementations.local import LocalFileSystem

from runtime import errors

_STORAGE_OPTIONS: dict[str, dict[str, Any]] = {}
_LOCAL = LocalFileSystem()


def set_storage_options(protocol: str, options: dict[str, Any]) -> None:
    """Options (e.g. credentials) used for every URL of ``protocol`` in this process."""
    _STORAGE_OPTIONS[protocol] = dict(options)


def storage_options(protocol: str) -> dict[str, Any]:
    return dict(_STORAGE_OPTIONS.get(protocol, {}))


def _draw_token_prefix() -> None:
    global _TOKEN_PREFIX
    _TOKEN_PREFIX = uuid.uuid4().hex[:8]


_TOKEN_PREFIX = ""
_draw_token_prefix()
os.register_at_fork(after_in_child=_draw_token_prefix)  # a forked worker draws its own
_TOKEN_COUNTER = itertools.count()


def unique_token() -> str:
    """A part of a temporary's name that no other writer uses: a random prefix drawn once per
    process (so also unique across machines sharing a folder) and a counter, not a draw from
    the OS per file."""
    return f"{_TOKEN_PREFIX}{next(_TOKEN_COUNTER):x}"


def create_in(folder: str, create: Callable[[], Any]) -> Any:
    """``create()`` (a new local file in ``folder``); where the folder is missing it is made
    and ``create()`` tried again: a folder is not asked for first (a request per file)."""
    try:
        return create()
    except FileNotFoundError:
        os.makedirs(folder, exist_ok=True)
        return create()


def is_local(path: str) -> bool:
    return "://" not in path or path.startswith("file://")


# -- schemes beyond fsspec's own ----------------------------------------------------------------
# A handler has: claims(path), owns(fs), filesystem_and_path(path), replace(fs, source, target),
# without_credentials(url), url_like(base, inner), location(path) -> (root, path) | None, and the
# flags trusted_listing (listing details are what info() says) and writes_whole (one write is
# all-or-nothing). The providers are imported on the first URL, by name, as fsspec's own
# registry names adlfs: a provider imports fs to register itself, so fs cannot import it at the
# top (a cycle), and a plain import inside a function would be the same cycle, hidden; by name,
# an optional extra (azure) also stays unloaded while every path is local.
SCHEME_PROVIDERS = ("dataio.azure",)
_SCHEMES: list = []
_providers_lock = threading.RLock()  # a provider importing fs functions re-enters
_providers_loaded = False


def register_scheme(handler) -> None:
    """Called by a scheme's package when it is imported; a second registration replaces the
    first of the same ``name``."""
    _SCHEMES[:] = [s for s in _SCHEMES if s.name != handler.name] + [handler]


def _load_providers() -> None:
    global _providers_loaded
    with _providers_lock:
        if not _providers_loaded:
            for name in SCHEME_PROVIDERS:
                importlib.import_module(name)
            _providers_loaded = True


def scheme_of(path: str):
    """The registered handler of URL ``path``; None for local paths and plain fsspec URLs."""
    if "://" not in path or path.startswith("file://"):
        return None
    if not _providers_loaded:
        _load_providers()
    return next((s for s in reversed(_SCHEMES) if s.claims(path)), None)  # the latest first


def _scheme_of_filesystem(fs):
    if not _providers_loaded:
        _load_providers()
    return next((s for s in reversed(_SCHEMES) if s.owns(fs)), None)


def filesystem_and_path(path: str) -> tuple[fsspec.AbstractFileSystem, str]:
    """The filesystem of ``path`` and the path as that filesystem names it."""
    if is_local(path):
        return _LOCAL, os.path.abspath(path.removeprefix("file://"))
    scheme = scheme_of(path)
    if scheme is not None:
        return scheme.filesystem_and_path(path)
    protocol = path.split("://", 1)[0]
    fs, inner = fsspec.core.url_to_fs(path, **storage_options(protocol))
    return fs, inner


def open_file(path: str, mode: str = "rb", *, blocks: bool = False, **kwargs):
    """``path`` opened through its filesystem. A local path opened for reading must be a regular
    file (:class:`NotRegularFileError` otherwise): a FIFO or a device there would hang the read.
    ``blocks``: the caller reads large blocks only (megabytes), so a local file is opened
    unbuffered: each block is one ``read`` into its own bytes, not a copy through a buffer
    (a third of the time of reading a file from the page cache)."""
    fs, inner = filesystem_and_path(path)
    if "r" in mode and fs is _LOCAL:
        fd = _open_regular(inner, path)  # checked without blocking
        if mode == "rb" and not kwargs:
            # the descriptor checked is the one read
            return os.fdopen(fd, "rb", buffering=0 if blocks else -1)
        os.close(fd)
    return fs.open(inner, mode, **kwargs)


# -- files that are not files: a FIFO or a device where tokenbeam reads one of its files --------

SPECIAL_KINDS = ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
                 (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


class NotRegularFileError(errors.RunError):
    """A local file tokenbeam reads (a shard's ``.bin``/``.idx``, a commit record, a manifest)
    is a FIFO, a device or a socket (exit status 1): opening or reading it would block or never
    end. Not an OSError: no caller may take it for a missing or torn file and go on."""


def special_kind(mode: int) -> str:
    """``a FIFO (named pipe)``, ``a character device``... for a ``st_mode`` that is not a
    regular file or folder; "" otherwise."""
    return next((kind for is_kind, kind in SPECIAL_KINDS if is_kind(mode)), "")


def _not_regular(path: str, mode: int) -> NotRegularFileError:
    kind = special_kind(mode) or "not a regular file"
    local = path.removeprefix("file://")
    link = f", a link to {os.path.realpath(local)}" if os.path.islink(local) else ""
    refused = NotRegularFileError(
        f"{path}: {kind}{link}, not a regular file; tokenbeam reads it as one of its files and "
        "would hang or never end: remove it (or put the real file there), then rerun")
    refused.what = f"{kind}{link}, not a regular file"  # for a message that names path itself
    return refused


def _open_regular(local: str, path: str) -> int:
    """A read-only descriptor of the local file ``local`` (``path`` as the caller spelled it),
    or :class:`NotRegularFileError`. A ``stat`` first (a device is never even opened), then an
    open with ``O_NONBLOCK``, so that a FIFO put there since opens at once instead of blocking,
    and ``fstat``: what was opened is what is checked (no window for a swap); the flag is
    cleared again for the regular file."""
    mode = os.stat(local).st_mode
    if special_kind(mode):
        raise _not_regular(path, mode)
    fd = os.open(local, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            if stat.S_ISDIR(mode):
                raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), path)
            raise _not_regular(path, mode)
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def exists(path: str) -> bool:
    fs, inner = filesystem_and_path(path)
    return fs.exists(inner)


def size(path: str) -> int:
    """The file's size in bytes; a local path that is a FIFO or a device (whose "size" says
    nothing of what reading it gives) is :class:`NotRegularFileError`."""
    fs, inner = filesystem_and_path(path)
    if fs is _LOCAL:
        st = os.stat(inner)  # one stat gives both the kind and the size
        if special_kind(st.st_mode):
            raise _not_regular(path, st.st_mode)
        return st.st_size
    return int(fs.size(inner))


def makedirs(fs: fsspec.AbstractFileSystem, path: str) -> None:
    if path:
        fs.makedirs(path, exist_ok=True)


def replace(fs: fsspec.AbstractFileSystem, source: str, target: str, *,
            linked: bool = True) -> None:
    """Move ``source`` to ``target``, replacing it (atomic on local disk). ``linked=False``:
    ``source`` is a file created as new, never a hard link (no need to look for one after)."""
    if isinstance(fs, LocalFileSystem):
        os.replace(source, target)
        if linked and os.path.lexists(source):
            # rename(2) does nothing when both names are links to one file (a shard committed
            # again from the part its first commit hard-linked): the target is right already
            os.unlink(source)
        return
    scheme = _scheme_of_filesystem(fs)
    if scheme is not None:
        scheme.replace(fs, source, target)
        return
    fs.mv(source, target)


def map_or_read(path: str):
    """A read-only buffer of the whole file: a memory map for local files (an empty ``bytes`` for
    a 0-byte file, which cannot be mapped), the file's bytes otherwise."""
    if is_local(path):
        fd = _open_regular(path.removeprefix("file://"), path)  # a FIFO would block (or never end)
        with os.fdopen(fd, "rb") as f:
            if os.fstat(f.fileno()).st_size == 0:
                return b""
            return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    with open_file(path, "rb") as f:
        return f.read()


def join(base: str, *parts: str) -> str:
    if is_local(base):
        return os.path.join(base, *parts)
    scheme = scheme_of(base) if "?" in base else None
    if scheme is not None:
        # A credential in the query (a SAS) is remembered and dropped from the URL, so joined
        # paths never carry it (nor break when a suffix like ".bin" is appended).
        base = scheme.without_credentials(base)
    return "/".join([base.rstrip("/"), *parts])


def glob(pattern: str) -> list[str]:
    """Expand a glob; returned paths keep the scheme of the pattern."""
    fs, inner = filesystem_and_path(pattern)
    if is_local(pattern):
        return sorted(fs.glob(inner))
    scheme = scheme_of(pattern)
    if scheme is not None:
        return sorted(scheme.url_like(pattern, p) for p in fs.glob(inner))
    protocol = pattern.split("://", 1)[0]
    return sorted(f"{protocol}://{p}" for p in fs.glob(inner))


def glob_details(pattern: str) -> dict[str, dict[str, Any]]:
    """:func:`glob` with each match's details (``size``, ``etag``, ``last_modified``, ...) as
    the listing gives them, where they are exactly what ``fs.info`` says of the same file.

    Azure: the listing's pages (5,000 blobs a request) carry them, and adlfs builds listing
    entries and ``info`` with one function, so planning 10,000 inputs costs 2 requests instead
    of 10,000. Elsewhere the names only (empty details), and callers ask each file: a local
    listing would stat every entry anyway and fail on one dangling link, and other fsspec
    filesystems do not promise the same fields (the in-memory one gives ``created`` as a number
    in listings and as a datetime from ``info``, which would change resume keys)."""
    fs, inner = filesystem_and_path(pattern)
    scheme = scheme_of(pattern)
    if scheme is None or not scheme.trusted_listing:
        return {p: {} for p in glob(pattern)}
    found = fs.glob(inner, detail=True)
    return {url_of(pattern, p): dict(found[p]) for p in sorted(found)}


def find_details(folder: str) -> dict[str, dict[str, Any]]:
    """Every file and folder below ``folder`` (recursively) as URLs in ``folder``'s form, with
    ``type`` and, where :func:`glob_details` would trust them (Azure), the listing's other
    details; from one recursive listing (object stores: a request per 5,000 blobs). Folders
    named ``{"type": "directory"}``. Empty when the folder is absent."""
    fs, inner = filesystem_and_path(folder)
    try:
        found = fs.find(inner, withdirs=True, detail=True)
    except FileNotFoundError:
        return {}
    scheme = scheme_of(folder)
    trusted = scheme is not None and scheme.trusted_listing
    return {url_of(folder, p): dict(found[p]) if trusted else {"type": found[p].get("type")}
            for p in sorted(found)}


def files_under(folder: str) -> set[str]:
    """Paths, relative to ``folder`` and with ``/`` separators, of every file below it, from
    one recursive listing (on object stores a few requests for thousands of blobs; empty when
    the folder is absent). For checking many names at once instead of one ``exists`` each."""
    fs, inner = filesystem_and_path(folder)
    base = inner.rstrip("/") + "/"
    try:
        found = fs.find(inner)
    except FileNotFoundError:
        return set()
    return {p[len(base):].replace(os.sep, "/") if is_local(folder) else p[len(base):]
            for p in found if p.startswith(base)}


def url_of(base: str, inner: str) -> str:
    """The URL, in ``base``'s form, of a path ``inner`` as ``base``'s filesystem names it
    (e.g. an entry of ``fs.ls``/``fs.find``)."""
    if is_local(base):
        return inner
    scheme = scheme_of(base)
    if scheme is not None:
        return scheme.url_like(base, inner)
    return f"{base.split('://', 1)[0]}://{inner}"


# -- primitives for commit protocols -----------------------------------------------------------


def info(path: str) -> dict[str, Any]:
    """``{"size": int, "etag": str | None, "mtime": float | None}`` of a file. Object stores give
    an etag (changes with every write); local files give mtime (and no etag)."""
    fs, inner = filesystem_and_path(path)
    raw = fs.info(inner)
    if raw.get("type") == "directory":
        raise IsADirectoryError(path)
    mtime = raw.get("mtime")
    modified = raw.get("last_modified") or raw.get("LastModified")
    if mtime is None and modified is not None:
        mtime = modified.timestamp() if hasattr(modified, "timestamp") else None
    etag = raw.get("etag") or raw.get("ETag")
    return {"size": int(raw.get("size") or 0), "etag": etag.strip('"') if etag else None,
            "mtime": float(mtime) if mtime is not None else None}


def list_files(folder: str) -> list[str]:
    """Files directly in ``folder`` as URLs in ``folder``'s form, sorted; [] if it is absent."""
    fs, inner = filesystem_and_path(folder)
    fs.invalidate_cache(inner)  # what is there now, not what an earlier listing saw
    try:
        entries = fs.ls(inner, detail=True)
    except FileNotFoundError:
        return []
    names = [e["name"] for e in entries if e.get("type") != "directory"]
    if is_local(folder):
        return sorted(names)
    base = folder.split("?", 1)[0].rstrip("/")
    return sorted(join(base, os.path.basename(n.rstrip("/"))) for n in names)


def remove_temporaries(folder: str, *, is_temporary: Callable[[str], bool]) -> list[str]:
    """Delete every file under ``folder`` (recursively) whose name ``is_temporary`` accepts
    (e.g. ``dataio.indexed.is_temporary_name``); returns the deleted paths' URLs."""
    fs, inner = filesystem_and_path(folder)
    try:
        found = fs.find(inner)
    except FileNotFoundError:
        return []
    doomed = [p for p in found if is_temporary(p)]
    for p in doomed:
        try:
            fs.rm_file(p)
        except FileNotFoundError:
            pass
    return [url_of(folder, p) for p in doomed]


class LinkedControlFileError(errors.ConfigError):
    """A file or folder tokenbeam keeps in an output is a symbolic link (exit status 2)."""


def link_refusal(path: str) -> LinkedControlFileError:
    try:
        target = f" (to {os.readlink(path)!r})"
    except OSError:
        target = ""
    return LinkedControlFileError(
        f"{path!r} is a symbolic link{target}; tokenbeam never writes or deletes its files "
        f"through a link in its output (it would change what the link points to): remove the "
        f"link, then rerun")


def refuse_links(folder: str, names) -> None:
    """Raise :class:`LinkedControlFileError` when one of ``names`` directly in the local
    ``folder`` is a symbolic link: tokenbeam would write or delete through it, outside the
    output. Nothing to check on object stores (no links there)."""
    if not is_local(folder):
        return
    base = os.path.abspath(folder.removeprefix("file://"))
    for name in names:
        path = os.path.join(base, name)
        if os.path.islink(path):
            raise link_refusal(path)


def read_bytes(path: str) -> bytes:
    """The whole file (small files: records, manifests, metadata). A local one must be a
    regular file (:class:`NotRegularFileError` otherwise), checked on the descriptor read."""
    if is_local(path):
        with os.fdopen(_open_regular(os.path.abspath(path.removeprefix("file://")), path),
                       "rb") as f:
            return f.read()
    with open_file(path, "rb") as f:
        return f.read()


def write_bytes_atomic(path: str, data: bytes, *, durable: bool = True) -> None:
    """Write a small file so that readers see the old content or all of ``data``, never a part:
    the one atomic small write of tokenbeam (commit records, metadata, caches, reports).
    ``durable=False`` skips the fsync (a few ms on a busy disk): for files whose loss in a power
    cut costs only redone work, never a wrong answer (dataio/parts.py item records).

    Local: a uniquely named temporary beside it (``.NAME.inprogress-*``, which
    :func:`remove_temporaries` recognises should a crash leave it), created exclusively, fsync,
    rename: a symbolic link at ``path`` is replaced, never written through. Azure: one Put
    Blob, already all-or-nothing (a temporary + copy + delete would add 3 requests). Other
    fsspec URLs: a temporary, then :func:`replace`."""
    if is_local(path):
        local = os.path.abspath(path.removeprefix("file://"))
        folder = os.path.dirname(local)
        tmp = os.path.join(folder, f".{os.path.basename(local)}.inprogress-{unique_token()}")
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = create_in(folder, lambda: os.open(tmp, flags, 0o600))
        try:
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
                if durable:
                    os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, local)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise
        return
    fs, inner = filesystem_and_path(path)
    scheme = scheme_of(path)
    if scheme is not None and scheme.writes_whole:
        fs.pipe_file(inner, bytes(data))
        return
    makedirs(fs, os.path.dirname(inner))
    head, tail = os.path.split(inner)
    tmp = os.path.join(head, f".{tail}.inprogress-{os.getpid()}")
    with fs.open(tmp, "wb") as f:
        f.write(data)
    replace(fs, tmp, inner)


def remove_atomic_leftovers(path: str) -> list[str]:
    """Delete the temporaries a killed :func:`write_bytes_atomic` of local ``path`` left
    (``.NAME.inprogress-*`` beside it); only the holder of the output's lock may call it, as no
    other write of ``path`` can then be under way. Elsewhere nothing is left: returns []."""
    if not is_local(path):
        return []
    local = os.path.abspath(path.removeprefix("file://"))
    folder, name = os.path.split(local)
    prefix = f".{name}.inprogress-"
    try:
        doomed = [os.path.join(folder, n) for n in os.listdir(folder) if n.startswith(prefix)]
    except FileNotFoundError:
        return []
    for p in doomed:
        try:
            os.unlink(p)
        except FileNotFoundError:
            pass
    return doomed


def write_text(path: str, text: str) -> None:
    """:func:`write_bytes_atomic` of ``text`` in UTF-8; ``-`` is stdout (a command's report or
    script printed instead of written)."""
    if path == "-":
        sys.stdout.write(text)
        return
    write_bytes_atomic(path, text.encode("utf-8"))


def remove(path: str) -> None:
    """Delete a file if it exists."""
    if is_local(path):
        try:
            os.unlink(path.removeprefix("file://"))  # one request, not a stat first
            return
        except FileNotFoundError:
            return
        except OSError:
            pass  # a folder (EISDIR): as fsspec says it
    fs, inner = filesystem_and_path(path)
    try:
        fs.rm(inner)
    except FileNotFoundError:
        pass


def sync_filesystem(path: str) -> None:
    """Make everything written to the local filesystem holding ``path`` durable: one
    ``syncfs(2)`` (Linux; ``sync(2)`` elsewhere), for many files at once where an fsync each
    would cost a disk wait each. Object stores: nothing to do (a write there is durable once
    it returns)."""
    if not is_local(path):
        return
    folder = os.path.abspath(path.removeprefix("file://"))
    while not os.path.isdir(folder):
        folder = os.path.dirname(folder)
    if _syncfs is None:
        os.sync()
        return
    fd = os.open(folder, os.O_RDONLY)
    try:
        if _syncfs(fd) != 0:
            os.sync()
    finally:
        os.close(fd)


def _load_syncfs():
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True).syncfs
    except (OSError, AttributeError):
        return None


_syncfs = _load_syncfs() if sys.platform.startswith("linux") else None


def remove_tree(path: str) -> None:
    """Delete a folder and everything under it, if it exists."""
    fs, inner = filesystem_and_path(path)
    if fs is _LOCAL:
        try:
            shutil.rmtree(inner)  # not asked first whether it is there: a request per shard
        except FileNotFoundError:
            pass
        except OSError:
            if os.path.isdir(inner) and not os.path.islink(inner):
                raise
            os.unlink(inner)  # a file, or a link (never followed): removed itself, as fsspec does
        return
    if fs.exists(inner):
        fs.rm(inner, recursive=True)


def file_sizes(folder: str) -> dict[str, int]:
    """``{base name: size}`` of the files directly in ``folder``, from one listing (on object
    stores one request per 5,000 blobs, not one per file; empty when the folder is absent)."""
    fs, inner = filesystem_and_path(folder)
    fs.invalidate_cache(inner)  # what is there now, not what an earlier listing saw
    try:
        entries = fs.ls(inner, detail=True)
    except FileNotFoundError:
        return {}
    return {os.path.basename(e["name"].rstrip("/")): int(e.get("size") or 0)
            for e in entries if e.get("type") != "directory"}


def list_names(path: str) -> list[str]:
    """Base names of the entries directly in folder ``path`` (empty if it does not exist)."""
    fs, inner = filesystem_and_path(path)
    if not fs.exists(inner):
        return []
    return sorted(os.path.basename(p.rstrip("/")) for p in fs.ls(inner, detail=False))


def cache_dir() -> str:
    """tokenbeam's per-user cache folder: ``$XDG_CACHE_HOME/tokenbeam`` (else
    ``~/.cache/tokenbeam``). What is kept there only saves work: any of it may be deleted."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "tokenbeam")


def write_cache_file(path: str, data: bytes) -> None:
    """Write a file of :func:`cache_dir` atomically; one that cannot be written (a read-only
    home, a full disk) only costs the next run the work it would have saved."""
    try:
        write_bytes_atomic(path, data)
    except OSError:
        pass
