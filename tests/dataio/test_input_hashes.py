"""dataio/input_hashes.py: content hashes remembered by file identity (device, inode, size,
mtime, ctime), never trusted for a file changed close to its hashing."""

from __future__ import annotations

import hashlib
import json
import os
import time

import pytest

from dataio import file_hashes
from dataio import input_hashes


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


def _sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _no_hashing(monkeypatch):
    def refuse(paths):
        raise AssertionError(f"hashed again: {paths}")

    monkeypatch.setattr(file_hashes, "content_hashes", refuse)


def test_an_unchanged_file_is_not_read_again(tmp_path, monkeypatch):
    monkeypatch.setattr(input_hashes, "RACY_NS", -10**18)  # every file old enough to remember
    path = tmp_path / "a.jsonl"
    path.write_bytes(b'{"text": "one"}\n')
    assert input_hashes.content_hashes([str(path)]) == {str(path): _sha(path.read_bytes())}
    _no_hashing(monkeypatch)
    assert input_hashes.content_hashes([str(path)]) == {str(path): _sha(path.read_bytes())}


def test_same_size_edit_with_mtime_restored_is_hashed_again(tmp_path, monkeypatch):
    monkeypatch.setattr(input_hashes, "RACY_NS", -10**18)
    path = tmp_path / "a.jsonl"
    path.write_bytes(b'{"text": "one"}\n')
    before = os.stat(path)
    assert input_hashes.content_hashes([str(path)])[str(path)] == _sha(b'{"text": "one"}\n')
    time.sleep(0.05)  # past the kernel's timestamp tick, so the edit's ctime differs
    path.write_bytes(b'{"text": "two"}\n')
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert os.stat(path).st_mtime_ns == before.st_mtime_ns
    assert input_hashes.content_hashes([str(path)])[str(path)] == _sha(b'{"text": "two"}\n')


def test_a_file_changed_close_to_its_hashing_is_not_remembered(tmp_path, monkeypatch):
    path = tmp_path / "fresh.jsonl"
    path.write_bytes(b'{"text": "new"}\n')  # ctime: now, within RACY_NS of the hashing
    assert input_hashes.content_hashes([str(path)])[str(path)] == _sha(path.read_bytes())
    cached = json.loads(open(input_hashes.cache_path()).read())["files"]
    assert str(path) not in cached
    calls = []
    real = file_hashes.content_hashes
    monkeypatch.setattr(file_hashes, "content_hashes", lambda paths: calls.append(paths) or real(paths))
    input_hashes.content_hashes([str(path)])
    assert calls == [[str(path)]]


def test_unreadable_and_missing_files_map_to_none(tmp_path):
    missing = str(tmp_path / "gone.jsonl")
    assert input_hashes.content_hashes([missing]) == {missing: None}


def test_a_broken_cache_means_hashing_again(tmp_path, monkeypatch):
    monkeypatch.setattr(input_hashes, "RACY_NS", -10**18)
    path = tmp_path / "a.jsonl"
    path.write_bytes(b"x\n")
    os.makedirs(os.path.dirname(input_hashes.cache_path()), exist_ok=True)
    for text in ("not json", '{"version": 99, "files": {}}', '[1, 2]',
                 json.dumps({"version": 1, "files": {str(path): "garbage"}})):
        with open(input_hashes.cache_path(), "w") as f:
            f.write(text)
        assert input_hashes.content_hashes([str(path)]) == {str(path): _sha(b"x\n")}


def test_the_cache_keeps_the_most_recently_hashed(tmp_path, monkeypatch):
    monkeypatch.setattr(input_hashes, "RACY_NS", -10**18)
    monkeypatch.setattr(input_hashes, "MAX_ENTRIES", 2)
    paths = []
    for name in "abc":
        p = tmp_path / f"{name}.jsonl"
        p.write_bytes(name.encode() + b"\n")
        paths.append(str(p))
        input_hashes.content_hashes([str(p)])
    cached = json.loads(open(input_hashes.cache_path()).read())["files"]
    assert sorted(cached) == paths[1:]


def test_relative_and_file_url_spellings_share_an_entry(tmp_path, monkeypatch):
    monkeypatch.setattr(input_hashes, "RACY_NS", -10**18)
    path = tmp_path / "a.jsonl"
    path.write_bytes(b"x\n")
    monkeypatch.chdir(tmp_path)
    input_hashes.content_hashes(["a.jsonl"])
    _no_hashing(monkeypatch)
    url = "file://" + str(path)
    assert input_hashes.content_hashes([url]) == {url: _sha(b"x\n")}
