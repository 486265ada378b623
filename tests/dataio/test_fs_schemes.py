"""dataio/fs.py's scheme registry: a storage registers itself with fs (Azure does,
dataio/azure/scheme.py); fs routes that storage's URLs through it and names none itself."""

from __future__ import annotations

import ast
import os

import fsspec
import pytest

from dataio import fs as fsutil
from dataio import locations

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class _Bucket:
    """``bucket://NAME/path`` on fsspec's in-memory filesystem, under ``/NAME``."""

    name = "test-bucket"
    trusted_listing = False
    writes_whole = True

    def __init__(self):
        self.fs = fsspec.filesystem("memory")
        self.replaced = []

    def claims(self, path):
        return path.startswith("bucket://")

    def owns(self, fs):
        return fs is self.fs

    def filesystem_and_path(self, path):
        return self.fs, "/" + path.removeprefix("bucket://")

    def replace(self, fs, source, target):
        self.replaced.append((source, target))
        fs.mv(source, target)

    def without_credentials(self, url):
        return url.split("?", 1)[0]

    def url_like(self, base, inner):
        return "bucket://" + inner.lstrip("/")

    def location(self, path):
        bucket, _, inner = path.removeprefix("bucket://").partition("/")
        return f"bucket://{bucket.lower()}", inner


@pytest.fixture
def bucket(monkeypatch):
    scheme = _Bucket()
    fsutil.scheme_of("bucket://b")  # the providers registered first: the copy restored keeps them
    monkeypatch.setattr(fsutil, "_SCHEMES", list(fsutil._SCHEMES))
    fsutil.register_scheme(scheme)
    yield scheme
    scheme.fs.rm("/b", recursive=True) if scheme.fs.exists("/b") else None


def test_a_registered_scheme_gets_its_urls(bucket):
    fsutil.write_bytes_atomic("bucket://b/x/one.jsonl", b"1\n")
    fsutil.write_bytes_atomic("bucket://b/x/two.jsonl", b"2\n")
    assert fsutil.read_bytes("bucket://b/x/one.jsonl") == b"1\n"
    assert fsutil.glob("bucket://b/x/*.jsonl") == ["bucket://b/x/one.jsonl",
                                                   "bucket://b/x/two.jsonl"]
    assert fsutil.join("bucket://b/x?token=secret", "y") == "bucket://b/x/y"
    fs, inner = fsutil.filesystem_and_path("bucket://b/x/one.jsonl")
    fsutil.replace(fs, inner, "/b/x/three.jsonl")
    assert bucket.replaced == [("/b/x/one.jsonl", "/b/x/three.jsonl")]
    assert locations.same_location("bucket://B/x/./three.jsonl", "bucket://b/x/three.jsonl")


def test_azure_registers_itself():
    from dataio import azure

    assert fsutil.scheme_of("abfss://c@acct.dfs.core.windows.net/x.jsonl").name == "azure"
    assert isinstance(fsutil.scheme_of("az://c/x"), azure.AzureScheme)
    assert fsutil.scheme_of("memory://x") is None and fsutil.scheme_of("/tmp/x") is None


def test_fs_imports_no_storage_package():
    # the scheme providers are named, never imported, by fs (they import fs to register)
    with open(os.path.join(ROOT, "dataio", "fs.py"), encoding="utf-8") as f:
        tree = ast.parse(f.read())
    imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert not [m for m in imported if m.startswith("dataio")], imported


def test_a_local_file_read_in_blocks_is_opened_unbuffered(tmp_path):
    import io

    from dataio import fs as fsutil

    path = tmp_path / "a.jsonl"
    path.write_bytes(b'{"text": "x"}\n' * 3)
    with fsutil.open_file(str(path), "rb", blocks=True) as f:
        assert isinstance(f, io.FileIO) and f.read() == path.read_bytes()
    with fsutil.open_file(str(path), "rb") as f:
        assert isinstance(f, io.BufferedReader)
