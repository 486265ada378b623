"""dataio.fs.write_bytes_atomic (the one atomic small write) and write_text."""

import json
import os

import fsspec
import pytest

from dataio import fs as fsutil


def test_local_write_replaces_whole_and_leaves_no_temporary(tmp_path):
    path = tmp_path / "sub" / "record.json"
    fsutil.write_bytes_atomic(str(path), b"first")
    fsutil.write_bytes_atomic(f"file://{path}", b"second")
    assert path.read_bytes() == b"second"
    assert os.listdir(path.parent) == ["record.json"]


def test_a_failed_local_write_keeps_the_old_content(tmp_path, monkeypatch):
    path = tmp_path / "record.json"
    path.write_bytes(b"old")

    def broken_fsync(fd):
        raise OSError("simulated")

    monkeypatch.setattr(os, "fsync", broken_fsync)
    with pytest.raises(OSError, match="simulated"):
        fsutil.write_bytes_atomic(str(path), b"new")
    assert path.read_bytes() == b"old" and os.listdir(tmp_path) == ["record.json"]


def test_url_write_and_text(capsys):
    mem = fsspec.filesystem("memory")
    try:
        fsutil.write_bytes_atomic("memory://atomic-test/a/x.bin", b"abc")
        fsutil.write_text("memory://atomic-test/a/y.txt", "é\n")
        assert mem.cat("/atomic-test/a/x.bin") == b"abc"
        assert mem.cat("/atomic-test/a/y.txt") == "é\n".encode()
        assert sorted(os.path.basename(p) for p in mem.ls("/atomic-test/a", detail=False)) == \
            ["x.bin", "y.txt"]
    finally:
        mem.rm("/atomic-test", recursive=True)
    fsutil.write_text("-", "to stdout\n")
    assert capsys.readouterr().out == "to stdout\n"


def test_a_record_is_created_under_its_name_and_a_second_write_replaces_it(tmp_path):
    path = tmp_path / "_commits" / "sub" / "a.json"  # its folders made where missing
    fsutil.write_record(str(path), b'{"n": 1}\n')
    assert path.read_bytes() == b'{"n": 1}\n' and os.listdir(path.parent) == ["a.json"]
    fsutil.write_record(str(path), b'{"n": 2}\n')  # the name is taken: replaced whole
    assert path.read_bytes() == b'{"n": 2}\n' and os.listdir(path.parent) == ["a.json"]


def test_a_record_never_writes_through_a_link_planted_at_its_name(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_bytes(b"keep me")
    record = tmp_path / "a.json"
    os.symlink(victim, record)
    fsutil.write_record(str(record), b'{"n": 1}\n')
    assert victim.read_bytes() == b"keep me"
    assert not record.is_symlink() and record.read_bytes() == b'{"n": 1}\n'


def test_a_record_cut_short_by_a_crash_reads_as_no_record(tmp_path):
    # write_record writes under the final name: what a kill between its create and its last
    # write leaves must count as not committed, never as a record
    from dataio import manifest
    data = json.dumps({"shard": "a", "name": "a_dc=1", "fingerprint": "f"}).encode() + b"\n"
    for cut in range(len(data) - 1):  # every prefix short of the closing brace and newline
        path = tmp_path / "_commits" / "a.json"
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(data[:cut])
        assert manifest.read_commit_record(str(tmp_path), "a") is None, cut


def test_a_failed_record_write_leaves_no_file(tmp_path, monkeypatch):
    path = tmp_path / "a.json"

    def broken_write(fd, data):
        raise OSError("simulated")

    monkeypatch.setattr(os, "write", broken_write)
    with pytest.raises(OSError, match="simulated"):
        fsutil.write_record(str(path), b'{"n": 1}\n')
    assert os.listdir(tmp_path) == []
