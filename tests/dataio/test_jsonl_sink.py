"""dataio/jsonl_sink.py: reshard's shard bytes (plain, gzip, zstd, reproducible) and its commit by
renaming (dropped and stale files deleted, a retried commit harmless, a lost shard an error)."""

import gzip
import os

import fsspec
import pytest
import zstandard

from runtime import errors
from dataio import jsonl_sink

LINES = [b'{"text": "one"}', b'{"text": "two \\u00e9"}', b"{}"]
PLAIN = b"".join(line + b"\n" for line in LINES)


@pytest.mark.parametrize("compression, decode", [
    ("none", lambda b: b),
    ("gzip", gzip.decompress),
    ("zstd", lambda b: zstandard.ZstdDecompressor().decompressobj().decompress(b)),
])
def test_write_lines_is_reproducible_and_counts_uncompressed_bytes(tmp_path, compression, decode):
    first = jsonl_sink.attempt_path(str(tmp_path / "tmp"), "00000-000000")
    again = jsonl_sink.attempt_path(str(tmp_path / "tmp"), "00000-000000")
    assert first != again and os.path.basename(first).startswith("00000-000000.")
    written = jsonl_sink.write_lines(first, iter(LINES), compression=compression)
    jsonl_sink.write_lines(again, LINES, compression=compression)
    assert written == jsonl_sink.WrittenLines(lines=3, bytes=len(PLAIN))
    data = open(first, "rb").read()
    assert data == open(again, "rb").read()  # no timestamp or name in a gzip header
    assert decode(data) == PLAIN


def test_a_failed_write_leaves_no_file(tmp_path):
    path = jsonl_sink.attempt_path(str(tmp_path), "x")

    def broken():
        yield b"{}"
        raise OSError("the input went away")

    with pytest.raises(OSError, match="went away"):
        jsonl_sink.write_lines(path, broken(), compression="gzip")
    assert os.listdir(tmp_path) == []


def test_commit_renames_drops_and_removes_stale_and_can_run_again(tmp_path):
    temp = tmp_path / ".reshard-x.tmp"
    temp.mkdir()
    for name in ("a.part", "b.part", "empty.part"):
        (temp / name).write_bytes(name.encode())
    (tmp_path / "old_00.jsonl").write_bytes(b"earlier run")
    (tmp_path / "en_00.jsonl").write_bytes(b"earlier run, same name")
    renames = [(str(temp / "a.part"), str(tmp_path / "en_00.jsonl")),
               (str(temp / "b.part"), str(tmp_path / "en_01.jsonl"))]
    stale = [str(tmp_path / "old_00.jsonl"), str(tmp_path / "en_00.jsonl")]
    for _ in range(2):  # a retried commit finds its renames done and does nothing more
        jsonl_sink.commit(renames, output=str(tmp_path), dropped=[str(temp / "empty.part")],
                          stale=stale)
        assert sorted(os.listdir(tmp_path)) == [".reshard-x.tmp", jsonl_sink.MANIFEST_NAME,
                                                "en_00.jsonl", "en_01.jsonl"]
        assert (tmp_path / "en_00.jsonl").read_bytes() == b"a.part"
        assert os.listdir(temp) == []
        # the marker written last: complete, every shard with its size, nothing else
        assert jsonl_sink.read_manifest(str(tmp_path)) == {
            "version": 1, "complete": True, "files": {"en_00.jsonl": 6, "en_01.jsonl": 6}}


def test_a_shard_lost_before_its_commit_is_a_run_error(tmp_path):
    with pytest.raises(jsonl_sink.LostShardError, match="missing before its commit") as caught:
        jsonl_sink.commit([(str(tmp_path / "gone.part"), str(tmp_path / "en_00.jsonl"))],
                          output=str(tmp_path))
    assert errors.describe(caught.value)[1] == errors.EXIT_FAILED


def test_summary_round_trip_on_a_url():
    temp = jsonl_sink.new_temporary_dir("memory://jsonl-sink-test/out")
    assert temp.startswith("memory://jsonl-sink-test/out/.reshard-") and temp.endswith(".tmp")
    try:
        jsonl_sink.write_summary(temp, shards=[{"name": "en_00.jsonl"}], failed=[])
        assert jsonl_sink.read_summary(temp) == {"shards": [{"name": "en_00.jsonl"}],
                                                 "failed": []}
    finally:
        fsspec.filesystem("memory").rm("/jsonl-sink-test", recursive=True)
