"""ReshardFiles on its own (transforms/reshard.py): sources written and described here go through
a TestPipeline; the committed shard summaries come out, the shards are in the output, and an
unreadable source stops every write. Its DoFns (measure, write a shard) are driven directly.

(The planning functions are tested in tests/e2e/test_reshard.py with the command; this file is not
called test_reshard.py because pytest's default import mode needs unique basenames.)"""

import gzip
import json
import os

import apache_beam as beam
from apache_beam.testing.util import assert_that, equal_to

from dataio import jsonl_sink
from transforms import reshard as rs

TEMPLATE = "{language}_{split:02d}"


def source(path, language="en", **kwargs):
    return rs.Source(path=str(path), format=kwargs.pop("format", None) or
                     ("jsonl.gz" if str(path).endswith(".gz") else "jsonl"),
                     size=os.path.getsize(path), fields=(("language", language),), **kwargs)


def lines_of(n, tag):
    return [json.dumps({"text": f"{tag} document {i:03d} " + "x" * 40}).encode() for i in range(n)]


def shard_lines(path):
    data = open(path, "rb").read()
    return (gzip.decompress(data) if path.endswith(".gz") else data).splitlines()


def test_sources_are_cut_into_shards_in_order_per_group(tmp_path, make_pipeline):
    en_a, en_b, de = lines_of(6, "en-a"), lines_of(5, "en-b"), lines_of(3, "de")
    (tmp_path / "a.jsonl").write_bytes(b"\n".join(en_a) + b"\n")
    (tmp_path / "b.jsonl.gz").write_bytes(gzip.compress(b"\n".join(en_b) + b"\n"))
    (tmp_path / "de.jsonl").write_bytes(b"\n".join(de))  # no final newline
    out = tmp_path / "out"
    temp = jsonl_sink.new_temporary_dir(str(out))  # the run folder the driver makes
    sources = [source(tmp_path / "b.jsonl.gz"), source(tmp_path / "a.jsonl"),
               source(tmp_path / "de.jsonl", "de")]
    target = 4 * (len(en_a[0]) + 1)  # about four documents per shard
    plan = rs.CommitPlan(output=str(out), template=TEMPLATE, extension=".jsonl")
    with make_pipeline() as p:
        summaries = (p | beam.Create(sources)
                     | rs.ReshardFiles(target=target, compression="none", temp_dir=temp, plan=plan))
        a, b, d = (str(tmp_path / n) for n in ("a.jsonl", "b.jsonl.gz", "de.jsonl"))
        assert_that(summaries | beam.Map(lambda s: (s["name"], s["documents"], s["inputs"])),
                    equal_to([("de_00.jsonl", 3, [d]), ("en_00.jsonl", 4, [a]),
                              ("en_01.jsonl", 4, [a, b]), ("en_02.jsonl", 3, [b])]))
    names = sorted(n for n in os.listdir(out) if not n.startswith((".", "_")))
    assert names == ["de_00.jsonl", "en_00.jsonl", "en_01.jsonl", "en_02.jsonl"]
    assert [x for n in names[1:] for x in shard_lines(str(out / n))] == en_a + en_b
    assert shard_lines(str(out / "de_00.jsonl")) == de
    summary = json.loads(open(os.path.join(temp, jsonl_sink.SUMMARY_NAME)).read())
    assert summary["failed"] == [] and len(summary["shards"]) == 4


def test_an_unreadable_source_fails_the_group_and_nothing_is_written(tmp_path, make_pipeline):
    (tmp_path / "ok.jsonl").write_bytes(b"\n".join(lines_of(3, "ok")) + b"\n")
    (tmp_path / "bad.jsonl.gz").write_bytes(gzip.compress(b"\n".join(lines_of(50, "x")))[:60])
    out = tmp_path / "out"
    temp = jsonl_sink.new_temporary_dir(str(out))  # the run folder the driver makes
    out.mkdir()
    (out / "en_00.jsonl").write_bytes(b"an earlier run's shard\n")  # --overwrite would replace it
    plan = rs.CommitPlan(output=str(out), template=TEMPLATE, extension=".jsonl",
                         stale=(str(out / "en_00.jsonl"),))
    with make_pipeline() as p:
        summaries = (p | beam.Create([source(tmp_path / "ok.jsonl"),
                                      source(tmp_path / "bad.jsonl.gz", "de")])
                     | rs.ReshardFiles(target=100, compression="none", temp_dir=temp, plan=plan))
        assert_that(summaries, equal_to([]))
    summary = json.loads(open(os.path.join(temp, jsonl_sink.SUMMARY_NAME)).read())
    assert summary["shards"] == []
    assert [f["path"] for f in summary["failed"]] == [str(tmp_path / "bad.jsonl.gz")]
    assert [n for n in os.listdir(out) if not n.startswith((".", "_"))] == ["en_00.jsonl"]  # kept


def test_measure_fn_sizes_units_and_carries_errors(tmp_path):
    data = b"\n".join(lines_of(4, "m")) + b"\n"
    (tmp_path / "p.jsonl").write_bytes(data)
    (tmp_path / "c.jsonl.gz").write_bytes(gzip.compress(data))
    fn = rs._MeasureFn()
    [plain] = fn.process(source(tmp_path / "p.jsonl"))
    [packed] = fn.process(source(tmp_path / "c.jsonl.gz"))
    assert plain.unit_sizes == packed.unit_sizes == (len(data),)  # the offset line is uncompressed
    [failed] = fn.process(source(tmp_path / "p.jsonl", error="p.jsonl: gone"))
    assert (failed.error, failed.unit_sizes) == ("p.jsonl: gone", ())


def test_write_shard_fn_retries_never_collide_and_compress_reproducibly(tmp_path):
    data = b"\n".join(lines_of(5, "w")) + b"\n"
    (tmp_path / "w.jsonl").write_bytes(data)
    task = rs.ShardTask(group=0, fields=(("language", "en"),), index=0,
                        pieces=(rs.Piece(path=str(tmp_path / "w.jsonl"), format="jsonl",
                                          start=0, end=len(data)),))
    fn = rs._WriteShardFn(temp_dir=str(tmp_path / "tmp"), compression="gzip")
    [first] = fn.process(task)
    [retry] = fn.process(task)
    assert first.temporary != retry.temporary  # a retried bundle never overwrites an attempt
    assert open(first.temporary, "rb").read() == open(retry.temporary, "rb").read()
    assert gzip.decompress(open(first.temporary, "rb").read()) == data
    assert (first.documents, first.bytes) == (5, len(data))
