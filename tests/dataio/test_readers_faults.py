"""dataio.readers on files that are wrong as a whole: every fault is a CorruptFileError from the
reader (so only that file's shards fail), and discovery or planning never raises for one file."""

import gzip
import io
import json
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zstandard

from dataio import readers
from dataio import discovery
from dataio.elements import WorkItem

RAW = b"".join(json.dumps({"text": "w" * (i % 300) + str(i)}).encode() + b"\n"
               for i in range(5000))


def _read(tmp_path, name, data):
    path = tmp_path / name
    path.write_bytes(data)
    item = WorkItem(path=str(path), stem=readers.file_stem(str(path)),
                            format=readers.file_format(str(path)), index=0)
    return b"".join(r.data + b"\n" for r in readers.read_jsonl(item))


def _frames():
    c = zstandard.ZstdCompressor()
    return c.compress(RAW[:100_000]) + c.compress(RAW[100_000:])


def test_zstd_whole_files_read_back(tmp_path):
    c = zstandard.ZstdCompressor()
    assert _read(tmp_path, "a.jsonl.zst", c.compress(RAW)) == RAW
    assert _read(tmp_path, "b.jsonl.zst", _frames()) == RAW  # several frames
    streamed = io.BytesIO()  # no content size in the header
    with c.stream_writer(streamed, closefd=False) as w:
        w.write(RAW)
    assert _read(tmp_path, "c.jsonl.zst", streamed.getvalue()) == RAW
    skippable = (0x184D2A50).to_bytes(4, "little") + (3).to_bytes(4, "little") + b"abc"
    assert _read(tmp_path, "d.jsonl.zst", skippable + c.compress(RAW)) == RAW
    assert _read(tmp_path, "e.jsonl.zst", c.compress(b"")) == b""  # one empty frame: no records


@pytest.mark.parametrize("cut", [1, 4, 9, 1000, -1000, -1])
def test_zstd_cut_anywhere_inside_a_frame_is_corrupt(tmp_path, cut):
    data = _frames()
    with pytest.raises(readers.CorruptFileError, match="ends inside a zstd frame"):
        _read(tmp_path, "t.jsonl.zst", data[:cut])


@pytest.mark.parametrize("name,data,reason", [
    ("empty.jsonl.zst", b"", "empty file"),
    ("empty.jsonl.gz", b"", "empty file"),
    ("flipped.jsonl.zst", None, "Data corruption detected|Corrupted block"),
    ("garbage_tail.jsonl.zst", zstandard.ZstdCompressor().compress(RAW) + b"not zstd", "cannot decompress"),
    ("no_trailer.jsonl.gz", gzip.compress(RAW)[:-8], "end-of-stream marker"),
    ("flipped.jsonl.gz", None, "cannot decompress"),
])
def test_corrupt_or_incomplete_compressed_files(tmp_path, name, data, reason):
    if data is None:
        compress = zstandard.ZstdCompressor().compress if name.endswith(".zst") else gzip.compress
        data = bytearray(compress(RAW))
        for i in range(len(data) // 2, len(data) // 2 + 32):
            data[i] ^= 0xFF
        data = bytes(data)
    with pytest.raises(readers.CorruptFileError, match=reason) as info:
        _read(tmp_path, name, data)
    assert str(tmp_path / name) in str(info.value) and "re-copy it" in str(info.value)


def test_short_parquet_is_planned_and_fails_in_the_reader(tmp_path):
    path = tmp_path / "short.parquet"
    pq.write_table(pa.table({"text": ["a", "b", "c"]}), path)
    path.write_bytes(path.read_bytes()[:-20])
    f = readers.InputFile(str(path), path.stat().st_size, "x")
    items = readers.plan_items([f])  # no exception while planning
    assert len(items) == 1 and "not a readable Parquet file" in items[0].error
    with pytest.raises(readers.CorruptFileError, match="not a readable Parquet file"):
        list(readers.read_parquet(items[0], ["text"]))


def test_symlink_loop_is_kept_as_a_failing_input(tmp_path):
    (tmp_path / "good.jsonl").write_bytes(RAW)
    os.symlink(tmp_path / "loop.jsonl", tmp_path / "loop.jsonl")
    files = discovery.discover([str(tmp_path)])
    by_name = {os.path.basename(f.path): f for f in files}
    assert not by_name["good.jsonl"].error
    assert "Too many levels of symbolic links" in by_name["loop.jsonl"].error
    items = readers.plan_items(files)
    loop = [i for i in items if i.stem == "loop"]
    with pytest.raises(readers.CorruptFileError, match="cannot read the file"):
        list(readers.read_jsonl(loop[0]))
    # named on its own it is taken literally and fails the same way later
    assert discovery.discover([str(tmp_path / "loop.jsonl")])[0].error


def test_existing_path_with_glob_characters_is_literal(tmp_path):
    (tmp_path / "a[1].jsonl").write_bytes(RAW)
    (tmp_path / "a1.jsonl").write_bytes(RAW)
    assert [f.path for f in discovery.discover([str(tmp_path / "a[1].jsonl")])] == \
        [str(tmp_path / "a[1].jsonl")]
    assert [f.path for f in discovery.discover([str(tmp_path / "a[0-9].jsonl")])] == \
        [str(tmp_path / "a1.jsonl")]
    (tmp_path / "d[x]").mkdir()
    (tmp_path / "d[x]" / "in.jsonl").write_bytes(RAW)
    assert [os.path.basename(f.path) for f in discovery.discover([str(tmp_path / "d[x]")])] == \
        ["in.jsonl"]


def test_own_files_are_left_out_and_named(tmp_path, capsys):
    (tmp_path / "good.jsonl").write_bytes(RAW)
    (tmp_path / "tokenizer.json").write_text('{"model": {}}')
    (tmp_path / "metadata.json").write_text(json.dumps({"tokenizer": {}}, indent=1))
    (tmp_path / "notes.json").write_text('{"text": "a user file, one object per line"}\n')
    files = discovery.discover([str(tmp_path)], leave_out=[str(tmp_path / "tokenizer.json")])
    assert sorted(os.path.basename(f.path) for f in files) == ["good.jsonl", "notes.json"]
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "left out 2 file(s)" in err
    # a metadata.json that is JSONL (one object per line) is somebody's input
    (tmp_path / "metadata.json").write_text('{"text": "x"}\n{"text": "y"}\n')
    assert len(discovery.discover([str(tmp_path)])) == 4
