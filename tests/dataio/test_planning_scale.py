"""Planning many inputs and one huge input: what the driver asks storage for, and how work is cut.

No timings: requests are counted (``fs.info`` per file, commit records read one by one) and work
items checked, so these stay honest on a loaded machine. bench/scale_model.py measures the time.
"""

from __future__ import annotations

import json
import os

import fsspec
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from fsspec.implementations.memory import MemoryFileSystem

from dataio import fs as fsutil
from dataio import file_hashes
from dataio import readers, sink
from dataio import discovery


@pytest.fixture
def memory_corpus():
    """200 small JSONL files on fsspec's in-memory filesystem (an object store's stand-in)."""
    mem = fsspec.filesystem("memory")
    root = "/plan-scale"
    if mem.exists(root):
        mem.rm(root, recursive=True)
    for i in range(200):
        mem.pipe_file(f"{root}/part_{i:04d}.jsonl", b'{"text": "x"}\n' * (i + 1))
    yield f"memory://{root}"
    mem.rm(root, recursive=True)


def test_discover_asks_each_file_where_listings_may_say_otherwise(memory_corpus, monkeypatch):
    """fsspec's in-memory filesystem lists ``created`` as a number and ``info`` gives a
    datetime: trusting its listing would move every resume key. Only Azure's listing is used
    as it comes (tests/e2e/azure/test_planning_requests.py); elsewhere each file is asked, several
    at a time, with the same result as one by one."""
    asked: list[str] = []
    original = MemoryFileSystem.info

    def info(self, path, **kwargs):
        asked.append(path)
        return original(self, path, **kwargs)

    expected = {p: discovery._input_file(p) for p in fsutil.glob(memory_corpus + "/*.jsonl")}
    monkeypatch.setattr(MemoryFileSystem, "info", info)
    for pattern in (memory_corpus, memory_corpus + "/part_*.jsonl"):
        asked.clear()
        files = discovery.discover([pattern])
        assert {f.path: f for f in files} == expected
        assert len([p for p in asked if "part_0" in p]) == 200
    assert files[9].size == len(b'{"text": "x"}\n') * 10


def test_plan_items_cuts_a_50_gb_jsonl_file_across_workers():
    huge = readers.InputFile("/data/web_0000.jsonl", 50 << 30, "mtime:1")
    items = readers.plan_items([huge])  # the default --split-bytes: 256 MiB
    assert len(items) == 200
    assert [i.index for i in items] == list(range(200))
    assert items[0].start == 0 and items[-1].end == huge.size
    assert all(a.end == b.start for a, b in zip(items, items[1:]))  # contiguous, no gap
    assert max(i.end - i.start for i in items) == 256 << 20


def test_a_large_compressed_input_is_named_as_one_workers_work(tmp_path, monkeypatch, capsys):
    import zstandard

    for name, size in (("small.jsonl.zst", 10), ("big.jsonl.zst", 4000)):
        (tmp_path / name).write_bytes(zstandard.compress(os.urandom(size)))
    (tmp_path / "plain.jsonl").write_bytes(b"x" * 5000)
    monkeypatch.setattr(discovery, "WHOLE_FILE_NOTE_BYTES", 1000)
    files = discovery.discover([str(tmp_path)])
    note = capsys.readouterr().err
    assert "1 compressed file(s)" in note and "big.jsonl.zst" in note
    items = readers.plan_items(files, split_bytes=1000)
    assert [i.stem for i in items].count("big") == 1  # whole: a stream has no middle to enter
    assert [i.stem for i in items].count("plain") == 5


def test_plan_items_cuts_a_parquet_file_by_row_groups(tmp_path):
    path = str(tmp_path / "big.parquet")
    pq.write_table(pa.table({"text": [f"doc {i}" for i in range(100)]}), path, row_group_size=2)
    (f,) = discovery.discover([path])
    assert len(readers.plan_items([f])) == 1  # 50 small row groups: under --split-bytes
    per_group = max(size for _, size in readers.parquet_row_groups(path))
    items = readers.plan_items([f], split_bytes=8 * per_group)  # by bytes: 8 groups or more
    assert 2 <= len(items) <= 7
    assert [g for i in items for g in i.row_groups] == list(range(50))
    assert [i.first_row for i in items] == [2 * i.row_groups[0] for i in items]


def test_plan_items_of_many_parquet_files_in_order_with_a_corrupt_one(tmp_path):
    for i in range(12):
        pq.write_table(pa.table({"text": [f"doc {j}" for j in range(i + 1)]}),
                       str(tmp_path / f"p{i:02d}.parquet"), row_group_size=1)
    (tmp_path / "p05.parquet").write_bytes(b"PAR1 short")
    files = discovery.discover([str(tmp_path)])
    per_group = max(size for _, size in readers.parquet_row_groups(str(tmp_path / "p11.parquet")))
    items = readers.plan_items(files, split_bytes=8 * per_group)
    one_by_one = [i for f in files for i in readers.plan_items([f], split_bytes=8 * per_group)]
    assert items == one_by_one
    assert [i.error != "" for i in items if i.stem == "p05"] == [True]
    assert [i.row_groups for i in items if i.stem == "p11"] == [tuple(range(8)),
                                                                tuple(range(8, 12))]
    assert [i.first_row for i in items if i.stem == "p11"] == [0, 8]


def test_stem_and_format_are_computed_once_per_file():
    f = readers.InputFile("/data/a.b.jsonl.zst", 1, "mtime:1")
    assert (f.stem, f.format) == ("a.b", "jsonl.zst")
    assert f.__dict__["stem"] == "a.b"  # cached on the instance
    assert f == readers.InputFile("/data/a.b.jsonl.zst", 1, "mtime:1")  # equality by fields


def test_content_hashes_of_many_files_keep_the_order_and_map_unreadable_to_none(tmp_path):
    paths = []
    for i in range(50):
        p = tmp_path / f"f{i}.jsonl"
        p.write_bytes(b"x" * i)
        paths.append(str(p))
    paths.append(str(tmp_path / "missing.jsonl"))
    hashes = file_hashes.content_hashes(paths)
    assert list(hashes) == paths
    assert hashes[paths[-1]] is None
    assert hashes[paths[3]] == file_hashes.content_hash(paths[3])


def test_files_under_lists_nested_files_relative(tmp_path):
    (tmp_path / "c" / "holdout").mkdir(parents=True)
    (tmp_path / "c" / "a.json").write_text("{}")
    (tmp_path / "c" / "holdout" / "b.json").write_text("{}")
    assert fsutil.files_under(str(tmp_path / "c")) == {"a.json", "holdout/b.json"}
    assert fsutil.files_under(str(tmp_path / "absent")) == set()


def _plan(corpus, output, tokenizer):
    from pipelines import tokenize

    argv = ["--input", str(corpus), "--output", str(output), "--tokenizer-type",
            "HuggingFaceTokenizer", "--tokenizer-model", str(tokenizer), "--append-eod",
            "--dry-run"]
    _, options, _ = tokenize.setup(argv)
    return tokenize.plan(options, checked=True)


def test_plan_reads_commit_records_only_of_shards_that_have_one(tmp_path, hf_tokenizer,
                                                                monkeypatch):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for i in range(300):
        (corpus / f"web_{i:04d}.jsonl").write_text(json.dumps({"text": f"document {i}"}) + "\n")
    output = tmp_path / "out"
    read: list[str] = []  # the shards whose commit record was looked at, however

    def counting(name):
        original = getattr(fsutil, name)

        def call(path, *args, **kwargs):
            if f"/{sink.COMMITS_DIR}/" in str(path):
                read.append(os.path.basename(str(path))[:-len(".json")])
            return original(path, *args, **kwargs)
        return call

    for name in ("exists", "read_bytes", "open_file", "info", "size"):
        monkeypatch.setattr(fsutil, name, counting(name))
    job = _plan(corpus, output, hf_tokenizer)
    assert len(job.shards) == 300 and not read  # a fresh output: one listing, no record read
    assert {s.reason for s in job.shards} == {"not committed yet"}

    # Records for a third of the shards (an older run with other options): those, and only
    # those, are read, and found out of date.
    for s in job.shards[::3]:
        path = sink.commit_record_path(str(output), s.shard)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            json.dump({"fingerprint": "older", "name": s.shard + "_dc=1_sc=1_tc=1"}, f)
    job = _plan(corpus, output, hf_tokenizer)
    assert set(read) == {s.shard for s in job.shards[::3]}
    changed = {s.shard for s in job.shards
               if s.reason == "inputs, tokenizer or options changed since it was committed"}
    assert changed == set(read)
    assert not any(s.skip for s in job.shards)
