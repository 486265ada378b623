"""Tokens written once (dataio/indexed.py ``adopt``/``add_index``, the finaliser in
dataio/sink.py): a lone part's ``.bin`` is hard-linked into place, several are joined by the
kernel, and the committed bytes are exactly those of the streamed copy (fsspec's memory
filesystem takes the old path) whatever copy call the platform offers; the finaliser stays
idempotent when it stops after the link and is run again with the same parts."""

import errno
import os

import fsspec
import numpy as np
import pytest

from runtime import faults
from dataio import indexed, sink
from tests.dataio.test_sink import RUN, finalize, token_batch, write_parts

RNG = np.random.default_rng(15)


def _documents(n, high):
    return [[RNG.integers(0, high, size=int(k)).tolist()] if k else []
            for k in RNG.integers(0, 300, size=n)]


def _parts(folder, dtype, count):
    prefixes = []
    for i in range(count):
        prefix = str(folder / f"part-{i}")
        indexed.write_documents(prefix, _documents(50, np.iinfo(dtype).max), dtype=dtype)
        prefixes.append(prefix)
    return prefixes


def _streamed(prefixes, dtype):
    """The old path: every .bin read into Python and written again (memory:// is not local)."""
    target = f"memory://single-write/{os.path.basename(prefixes[0])}-{len(prefixes)}-{dtype}"
    with indexed.IndexedDatasetWriter(target, dtype=dtype) as writer:
        for p in prefixes:
            writer.add_index(p)
    mem = fsspec.filesystem("memory")
    inner = target.removeprefix("memory://")
    return mem.cat_file(inner + ".bin"), mem.cat_file(inner + ".idx")


def _files(prefix):
    with open(prefix + ".bin", "rb") as b, open(prefix + ".idx", "rb") as i:
        return b.read(), i.read()


@pytest.mark.parametrize("dtype", ["uint16", "int32"])
def test_several_parts_joined_by_the_kernel_equal_the_streamed_copy(tmp_path, dtype):
    prefixes = _parts(tmp_path, dtype, 3)
    with indexed.IndexedDatasetWriter(str(tmp_path / "joined"), dtype=dtype) as writer:
        for p in prefixes:
            writer.add_index(p)
    joined = _files(str(tmp_path / "joined"))
    assert joined == _streamed(prefixes, dtype)
    assert joined[0] == b"".join(_files(p)[0] for p in prefixes)  # .bin: the parts in a row
    assert indexed.validate(str(tmp_path / "joined")).ok


@pytest.mark.parametrize("refused", [("_copy_file_range",), ("_copy_file_range", "_sendfile")])
def test_every_copy_fallback_gives_the_same_bytes(tmp_path, monkeypatch, refused):
    prefixes = _parts(tmp_path, "uint16", 3)

    def refuse(src, dst, count):
        raise OSError(errno.EXDEV, "refused here")

    for name in refused:
        monkeypatch.setattr(indexed, name, refuse)
    with indexed.IndexedDatasetWriter(str(tmp_path / "joined"), dtype="uint16") as writer:
        for p in prefixes:
            writer.add_index(p)
    assert _files(str(tmp_path / "joined")) == _streamed(prefixes, "uint16")


def test_a_lone_part_is_linked_not_copied_and_stays_intact(tmp_path):
    (part,) = _parts(tmp_path, "uint16", 1)
    before = _files(part)
    with indexed.IndexedDatasetWriter(str(tmp_path / "final"), dtype="uint16") as writer:
        writer.adopt(part)
        with pytest.raises(ValueError, match="nothing can be appended"):
            writer.add_index(part)
    final = str(tmp_path / "final")
    assert os.stat(final + ".bin").st_ino == os.stat(part + ".bin").st_ino  # no byte copied
    assert _files(final) == before == _streamed([part], "uint16")
    assert _files(part) == before


def test_adopt_copies_where_links_are_refused_or_the_writer_holds_data(tmp_path, monkeypatch):
    a, b = _parts(tmp_path, "uint16", 2)
    with indexed.IndexedDatasetWriter(str(tmp_path / "ab"), dtype="uint16") as writer:
        writer.add_index(a)
        writer.adopt(b)  # not empty: appended
    assert _files(str(tmp_path / "ab")) == _streamed([a, b], "uint16")

    def no_links(src, dst):
        raise OSError(errno.EPERM, "no hard links here")

    monkeypatch.setattr(os, "link", no_links)
    with indexed.IndexedDatasetWriter(str(tmp_path / "copied"), dtype="uint16") as writer:
        writer.adopt(a)
    assert _files(str(tmp_path / "copied")) == _files(a)
    assert os.stat(str(tmp_path / "copied.bin")).st_ino != os.stat(a + ".bin").st_ino


def test_a_bin_that_disagrees_with_its_index_is_refused(tmp_path):
    a, b = _parts(tmp_path, "uint16", 2)
    with open(b + ".bin", "ab") as f:
        f.write(b"\0\0")
    for method in ("add_index", "adopt"):
        with pytest.raises(indexed.FormatError, match="its index says"):
            with indexed.IndexedDatasetWriter(str(tmp_path / method), dtype="uint16") as w:
                getattr(w, method)(b)
        assert not os.path.exists(str(tmp_path / method) + ".idx")


def _expected(tmp_path, docs):
    prefix = str(tmp_path / "expected")
    indexed.write_documents(prefix, docs, dtype="uint16")
    return _files(prefix)


@pytest.mark.parametrize("batches", [1, 3], ids=["one part", "three parts"])
@pytest.mark.parametrize("point", ["indexed.between_renames", "sink.before_commit_record",
                                   "sink.before_cleanup"])
def test_finalize_stopped_after_the_link_or_copy_then_run_again_commits_the_same_bytes(
        tmp_path, monkeypatch, batches, point):
    out, shard = tmp_path / "out", "a_text_document"
    docs = [[[1, 2], [3]], [], [[4, 5, 6]], [[7]], [[8, 9], [10]]]
    cuts = np.array_split(np.arange(len(docs)), batches)
    tbs = [token_batch(shard, 0, k, [docs[i] for i in cut]) for k, cut in enumerate(cuts)]
    parts, counts = write_parts(out, shard, tbs)

    def crash(name):
        if name == point:
            raise KeyboardInterrupt(name)  # stands for the process dying there

    monkeypatch.setattr(faults, "checkpoint", crash)
    with pytest.raises(KeyboardInterrupt):
        finalize(out, shard, "fp", parts, counts)
    monkeypatch.undo()
    assert all(os.path.exists(p.prefix + ".bin") for p in parts)  # a retry finds its parts
    (result,) = finalize(out, shard, "fp", parts, counts)
    final = str(out / result.name)
    assert _files(final) == _expected(tmp_path, docs)
    assert not os.path.exists(sink.temporary_dir(str(out), RUN) + "/" + shard)
    (again,) = finalize(out, shard, "fp", parts, counts)  # and once more: nothing changes
    assert again.name == result.name and _files(final) == _expected(tmp_path, docs)
    names = sorted(os.listdir(out))
    assert [n for n in names if n.endswith((".bin", ".idx"))] == [result.name + ".bin",
                                                                 result.name + ".idx"]
