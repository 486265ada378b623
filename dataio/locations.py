"""Where a path points: one answer for "is this output one of the inputs?" (every command
refuses to write over its own inputs, however spelled), and the one spelling per place on storage
that resume records compare."""

from __future__ import annotations

import os
from urllib.parse import urlsplit

from dataio.fs import is_local, scheme_of


class SameLocationError(ValueError):
    """A command would write over one of its own inputs (the same file spelled differently).
    A bad command line: exit status 2."""

    exit_status = 2


def resolve_location(path: str) -> str:
    """One spelling per place on storage, for comparing paths (never for opening them).

    Local paths (and ``file://``): the real path, so ``.``, ``..``, ``//`` and symlinks (to the
    file or to any folder above it) are resolved; a missing tail stays as spelled, normalised.
    Azure URLs: ``azure://ACCOUNT/CONTAINER/BLOB`` whatever the form (abfs/abfss/az/https/
    path-style; the account filled in from the configuration when the URL names none), the blob
    path with ``.``/``..``/``//`` collapsed and the query (a SAS) dropped. Other URLs: the scheme
    (and an http host) lower-cased, the path collapsed the same way, query and fragment dropped.
    """
    if is_local(path):
        return os.path.realpath(path.removeprefix("file://"))
    scheme = scheme_of(path)
    found = scheme.location(path) if scheme is not None else None
    if found is not None:  # e.g. azure://ACCOUNT/CONTAINER and the blob path
        root, inner = found
        return f"{root}/{_collapse(inner)}".rstrip("/")
    parts = urlsplit(path)
    scheme = parts.scheme.lower()
    # Host names are case-insensitive; other "hosts" (s3 buckets, memory://) are kept as spelled.
    host = parts.netloc.lower() if scheme in ("http", "https") else parts.netloc
    return f"{scheme}://{host}/{_collapse(parts.path)}".rstrip("/")


def _collapse(path: str) -> str:
    """``a//b/./c/../d`` -> ``a/b/d`` (no leading slash; ``..`` above the root is dropped, as
    HTTP clients and object stores do)."""
    kept: list[str] = []
    for part in path.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if kept:
                kept.pop()
            continue
        kept.append(part)
    return "/".join(kept)


def same_location(a: str, b: str) -> bool:
    """True when ``a`` and ``b`` name the same file however they are spelled (see
    :func:`resolve_location`); local files that both exist are also compared by device and
    inode, which catches hard links and case-insensitive file systems."""
    if resolve_location(a) == resolve_location(b):
        return True
    return _file_id(a) is not None and _file_id(a) == _file_id(b)


def _file_id(path: str) -> tuple[int, int] | None:
    if not is_local(path):
        return None
    try:
        st = os.stat(path.removeprefix("file://"))
    except OSError:
        return None
    return st.st_dev, st.st_ino


def refuse_same_location(outputs: list[str], inputs: list[str], *, flag: str) -> None:
    """Raise :class:`SameLocationError`, naming both paths and the fix, when a file the command
    is about to write (``outputs``) is one it reads (``inputs``) under any spelling (the test of
    :func:`same_location`; each path resolved once, so thousands of inputs cost little)."""
    by_place = {resolve_location(o): o for o in outputs}
    by_id = {i: o for o in outputs if (i := _file_id(o)) is not None}
    for source in inputs:
        output = by_place.get(resolve_location(source))
        if output is None and by_id:
            output = by_id.get(_file_id(source))
        if output is not None:
            spelled = "" if output == source else f" (as {output})"
            raise SameLocationError(
                f"{flag} would write over the input {source}{spelled}: it is the same file, so "
                f"the input would be destroyed; choose another {flag}")


def resolved(path: str | None, folder: str | None = None) -> str | None:
    """``path`` as it names the same file from any folder: a relative local path joined to
    ``folder`` (default: the current one) and normalised; ``file://`` and other URLs unchanged."""
    if not path or not is_local(path) or path.startswith("file://"):
        return path
    return os.path.normpath(os.path.join(folder or os.getcwd(), path))
