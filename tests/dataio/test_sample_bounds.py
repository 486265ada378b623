"""Planning-time samples are bounded in bytes, stored and decompressed (issue 23, item 15).

The planner samples the first inputs (the tokenizer self-check; ``--dry-run``'s estimates).
It used to read the whole first line: a ~100 KB ``.gz`` whose first line unpacks to 100 MB cost
gigabytes in planning (a 2 GB line: MemoryError, the whole job dead). Now a sample reads at most
:data:`sampling.SAMPLE_BYTES` of a JSONL file and only the whole lines in them, and a Parquet
row group larger than :data:`sampling.PARQUET_SAMPLE_BYTES` gives no sample. Memory is measured
with tracemalloc (every bytes object the readers make is traced), not time.
"""

import gzip
import json
import tracemalloc
import zlib

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zstandard

from dataio import readers
from dataio import discovery, sampling
from pipelines.tokenize import planner as plan

LINE_MB = 100  # the decompressed size of the bomb's first line
GOOD = b"".join(json.dumps({"text": f"good document {i}"}).encode() + b"\n" for i in range(50))


def _bomb_chunks():
    yield b'{"text": "'
    block = b"a" * (4 << 20)
    for _ in range(LINE_MB // 4):
        yield block
    yield b'"}\n' + GOOD


@pytest.fixture(scope="module")
def bombs(tmp_path_factory):
    """bomb.jsonl.gz / bomb.jsonl.zst: ~100-300 KB each, whose first line is 100 MB."""
    folder = tmp_path_factory.mktemp("bombs")
    gz = zlib.compressobj(6, zlib.DEFLATED, 31)
    with open(folder / "bomb.jsonl.gz", "wb") as f:
        for chunk in _bomb_chunks():
            f.write(gz.compress(chunk))
        f.write(gz.flush())
    with open(folder / "bomb.jsonl.zst", "wb") as f, \
            zstandard.ZstdCompressor().stream_writer(f) as z:
        for chunk in _bomb_chunks():
            z.write(chunk)
    (folder / "good.jsonl").write_bytes(GOOD)
    return folder


def _peak_bytes(fn):
    tracemalloc.start()
    try:
        result = fn()
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("name", ["bomb.jsonl.gz", "bomb.jsonl.zst"])
def test_a_huge_first_line_is_not_read_whole_and_good_files_are_sampled(bombs, name):
    assert (bombs / name).stat().st_size < 1 << 20  # a small file...
    files = discovery.find_inputs([str(bombs / name), str(bombs / "good.jsonl")])
    texts, peak = _peak_bytes(lambda: plan.sample_texts(files, ["text"]))
    assert peak < 16 << 20, f"planning's sample held {peak / 2**20:.0f} MiB"  # ... not 100 MB
    assert "good document 0" in texts  # the good file is still sampled
    assert not any(len(t) > sampling.SAMPLE_BYTES for t in texts)


@pytest.mark.parametrize("name", ["bomb.jsonl.gz", "bomb.jsonl.zst"])
def test_a_sample_item_reads_only_whole_lines_of_its_head(bombs, name):
    f = discovery.find_inputs([str(bombs / name)])[0]
    records, peak = _peak_bytes(lambda: list(readers.read_jsonl(sampling.sample_item(f))))
    assert records == [] and peak < 16 << 20  # the first line does not end within the head


def test_a_sample_of_a_small_file_is_all_of_it(tmp_path):
    (tmp_path / "a.jsonl.gz").write_bytes(gzip.compress(GOOD + b'{"text": "no newline"}'))
    f = discovery.find_inputs([str(tmp_path / "a.jsonl.gz")])[0]
    lines = [r.data for r in readers.read_jsonl(sampling.sample_item(f))]
    assert lines == GOOD.splitlines() + [b'{"text": "no newline"}']


def test_a_sample_stops_at_the_last_whole_line_of_its_head(tmp_path):
    (tmp_path / "a.jsonl").write_bytes(GOOD * 10)
    f = discovery.find_inputs([str(tmp_path / "a.jsonl")])[0]
    head = len(GOOD) + 5  # five bytes into the first line of the second copy
    lines = [r.data for r in readers.read_jsonl(sampling.sample_item(f, head=head))]
    assert lines == GOOD.splitlines()


def test_a_damaged_gz_gives_the_lines_before_the_damage(tmp_path):
    (tmp_path / "cut.jsonl.gz").write_bytes(gzip.compress(GOOD * 100)[:-200])
    f = discovery.find_inputs([str(tmp_path / "cut.jsonl.gz")])[0]
    lines = list(readers.read_jsonl(sampling.sample_item(f)))  # never raises in planning
    assert 0 < len(lines) < 5000


def test_a_parquet_row_group_larger_than_a_sample_gives_no_sample(tmp_path):
    pq.write_table(pa.Table.from_pylist([{"text": "x" * (2 << 20)}, {"text": "short"}]),
                   tmp_path / "big.parquet")
    f = discovery.find_inputs([str(tmp_path / "big.parquet")])[0]
    assert list(readers.read_parquet(sampling.sample_item(f, head=1 << 20), ["text"])) == []
    (first_row, values), = readers.read_parquet(sampling.sample_item(f), ["text"])
    assert values["text"][1] == "short"  # within PARQUET_SAMPLE_BYTES: sampled


@pytest.mark.parametrize("name", ["bomb.jsonl.gz", "bomb.jsonl.zst"])
def test_measuring_how_a_file_unpacks_streams_and_stops(bombs, name):
    """--dry-run's ratio of decompressed to stored bytes (sampling.decompressed_sizes): counted
    as it streams, never held, and it stops at ``most`` decompressed bytes."""
    points, peak = _peak_bytes(lambda: sampling.decompressed_sizes(
        str(bombs / name), name[len("bomb."):], stored=4 << 20, most=32 << 20))
    assert peak < 4 << 20
    assert (32 << 20) <= points[-1][1] < (33 << 20)  # stopped there, not at LINE_MB


def test_how_a_whole_small_file_unpacks_is_exact(tmp_path):
    for name, data in (("a.jsonl.gz", gzip.compress(GOOD)),
                       ("a.jsonl.zst", zstandard.ZstdCompressor().compress(GOOD))):
        (tmp_path / name).write_bytes(data)
        points = sampling.decompressed_sizes(str(tmp_path / name), name[2:], stored=4 << 20)
        assert points[-1] == (len(data), len(GOOD))
