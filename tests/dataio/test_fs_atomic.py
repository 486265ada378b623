"""dataio.fs.write_bytes_atomic (the one atomic small write) and write_text."""

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


def test_the_temporary_is_created_exclusively_and_never_written_through_a_link(tmp_path,
                                                                              monkeypatch):
    monkeypatch.setattr(fsutil, "unique_token", lambda: "0123abcd0")  # a predictable name
    victim = tmp_path / "victim.txt"
    victim.write_bytes(b"keep me")
    os.symlink(victim, tmp_path / ".record.json.inprogress-0123abcd0")
    with pytest.raises(FileExistsError):
        fsutil.write_bytes_atomic(str(tmp_path / "record.json"), b"new", durable=False)
    assert victim.read_bytes() == b"keep me" and not (tmp_path / "record.json").exists()


def test_temporaries_of_one_process_and_of_a_fork_differ():
    first, second = fsutil.unique_token(), fsutil.unique_token()
    assert first != second and first[:8] == second[:8]  # one prefix, a counter
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its own prefix, drawn at the fork
        os.write(write, fsutil.unique_token().encode())
        os._exit(0)
    os.waitpid(pid, 0)
    child = os.read(read, 64).decode()
    assert child[:8] != first[:8]


@pytest.mark.parametrize("linked", [True, False])
def test_replace_moves_a_file_onto_its_target(tmp_path, linked):
    (tmp_path / "new").write_bytes(b"new")
    (tmp_path / "old").write_bytes(b"old")
    fsutil.replace(fsspec.filesystem("file"), str(tmp_path / "new"), str(tmp_path / "old"),
                   linked=linked)
    assert os.listdir(tmp_path) == ["old"] and (tmp_path / "old").read_bytes() == b"new"


def test_replace_by_a_hard_link_of_the_target_leaves_one_name(tmp_path):
    # rename(2) of two names of one file does nothing: the source name is removed after
    (tmp_path / "final").write_bytes(b"bytes")
    os.link(tmp_path / "final", tmp_path / "tmp")
    fsutil.replace(fsspec.filesystem("file"), str(tmp_path / "tmp"), str(tmp_path / "final"))
    assert os.listdir(tmp_path) == ["final"] and (tmp_path / "final").read_bytes() == b"bytes"


def test_an_atomic_write_of_many_megabytes_is_whole(tmp_path):
    data = os.urandom(3 << 20)
    fsutil.write_bytes_atomic(str(tmp_path / "big"), data)
    assert (tmp_path / "big").read_bytes() == data
