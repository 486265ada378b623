"""A file's content hash: resume notices a change that keeps size and mtime (``--verify-inputs``;
dataio/input_hashes.py remembers them per file identity)."""

from __future__ import annotations

import hashlib
import os
import threading

from dataio.fs import is_local, open_file


CONTENT_HASH = "sha256"  # hashlib's fastest here (SHA-NI); xxhash/blake3 are not dependencies


_HASH_CHUNK = 8 << 20


def content_hash(path: str) -> str:
    """``sha256:HEX`` of the file's bytes (as stored, compressed or not), read in 8 MiB chunks
    so memory stays flat; local paths are read directly, URLs through :func:`open_file`."""
    digest = hashlib.new(CONTENT_HASH)
    opener = (open(path.removeprefix("file://"), "rb", buffering=0) if is_local(path)
              else open_file(path, "rb"))
    with opener as f:
        while chunk := f.read(_HASH_CHUNK):
            digest.update(chunk)  # releases the GIL: files hashed in threads run in parallel
    return f"{CONTENT_HASH}:{digest.hexdigest()}"


def content_hashes(paths: list[str]) -> dict[str, str | None]:
    """:func:`content_hash` of each path, several files at a time (reading and hashing release
    the GIL, so threads use every core and overlap remote reads). A file that cannot be read maps
    to ``None``: hashing is no place to fail it; its reader fails its shards with the reason."""
    from concurrent.futures import ThreadPoolExecutor

    def one(path: str) -> str | None:
        try:
            return content_hash(path)
        except OSError:
            return None

    if not paths:
        return {}
    # Each thread takes the next path when it is done (not one future per path: 10,000 small
    # inputs cost more in futures than in hashing).
    todo, lock, hashes = iter(paths), threading.Lock(), {}

    def work() -> None:
        while True:
            with lock:
                path = next(todo, None)
            if path is None:
                return
            hashes[path] = one(path)

    threads = min(8, len(paths), max(2, os.cpu_count() or 1))
    with ThreadPoolExecutor(max_workers=threads) as pool:
        for done in [pool.submit(work) for _ in range(threads)]:
            done.result()
    return {p: hashes[p] for p in paths}
