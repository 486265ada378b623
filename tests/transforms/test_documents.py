"""ReadDocuments on its own (transforms/documents.py): work items written here go through a
TestPipeline; the documents, the bad records ('errors') and the unreadable files ('failed') come
out on their outputs. Its DoFn: what it holds and adopts in setup, and how it travels."""

import gzip
import os

import apache_beam as beam
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from apache_beam.testing.util import assert_that, equal_to

from dataio import readers
from dataio.elements import WorkItem
from transforms import documents as docs
from transforms.read import ReadDocuments
from dataio.elements import DocumentBatch


def item_of(path, index=0, **kwargs):
    return WorkItem(path=path, stem=readers.file_stem(path),
                            format=readers.file_format(path), index=index, **kwargs)


def batch_view(b: DocumentBatch):
    """Everything a DocumentBatch carries, as comparable tuples."""
    return (b.stem, b.item, b.batch, tuple(tuple(v) if isinstance(v, list) else v
                                           for v in b.texts["text"]),
            tuple(b.ids), b.num_bytes, b.path, tuple(b.lines), tuple(b.offsets))


def reason_of(line: bytes, keys=("text",)) -> str:
    with pytest.raises(docs.BadRecord) as exc:
        docs.parse_json_line(line, list(keys))
    return str(exc.value)


LINES = [b'{"id": 1, "text": "first"}', b"{not json", b'{"id": 2, "text": ["s1", "s2"]}', b"",
         b'{"id": 3, "text": "third"}', b'{"id": 4, "other": "x"}', b'{"id": 5, "text": "fifth"}']
OFFSETS = [sum(len(x) + 1 for x in LINES[:i]) for i in range(len(LINES))]


def test_documents_in_batches_bad_records_and_unreadable_files_tagged(tmp_path, write_jsonl,
                                                                     make_pipeline):
    path = write_jsonl("web.jsonl", LINES)
    broken = tmp_path / "broken.jsonl.gz"
    broken.write_bytes(gzip.compress(b'{"text": "lost"}\n' * 50)[:40])  # truncated
    with make_pipeline() as p:
        out = (p | beam.Create([item_of(path), item_of(str(broken))])
               | ReadDocuments(["text"], id_key="id", max_docs=2))
        assert_that(out["documents"] | "Batches" >> beam.Map(batch_view), equal_to([
            ("web", 0, 0, ("first", ("s1", "s2")), ("1", "2"), len(LINES[0]) + len(LINES[2]) + 2,
             path, (1, 3), (OFFSETS[0], OFFSETS[2])),
            ("web", 0, 1, ("third", "fifth"), ("3", "5"), len(LINES[4]) + len(LINES[6]) + 2,
             path, (5, 7), (OFFSETS[4], OFFSETS[6]))]), label="Documents")
        assert_that(out[docs.ERRORS_TAG], equal_to([
            ("web", docs.BadRecordReport(path, 2, OFFSETS[1], reason_of(LINES[1]), "{not json")),
            ("web", docs.BadRecordReport(path, 4, OFFSETS[3], "blank line", "")),
            ("web", docs.BadRecordReport(path, 6, OFFSETS[5], reason_of(LINES[5]),
                                         LINES[5].decode()))]), label="Errors")
        # the whole file fails (its shard gets a failure record); the other file is unaffected
        assert_that(out[docs.FAILED_TAG] | beam.Map(lambda f: (f.stem, str(broken) in f.reason)),
                    equal_to([("broken", True)]), label="Failed")


def test_byte_ranges_of_one_file_give_every_document_once(write_jsonl, make_pipeline):
    records = [{"text": f"document {i}"} for i in range(20)]
    path = write_jsonl("big.jsonl", records)
    items = readers.plan_items([readers.InputFile(path, os.path.getsize(path), "v")],
                               split_bytes=100)
    assert len(items) > 2
    with make_pipeline() as p:
        out = p | beam.Create(items) | ReadDocuments(["text"], max_docs=3)
        texts = out["documents"] | beam.FlatMap(
            lambda b: [(b.item, b.batch, t) for t in b.texts["text"]])
        assert_that(texts | beam.Map(lambda x: x[2]),
                    equal_to([r["text"] for r in records]), label="EachOnce")
        # documents keep input order by (item, batch): the order key the sink commits in
        assert_that(texts | beam.combiners.ToList() | beam.Map(
            lambda xs: [t for _, _, t in sorted(xs, key=lambda x: x[:2])]),
            equal_to([[r["text"] for r in records]]), label="InOrder")


def test_parquet_rows_with_a_null_text_are_bad_records(tmp_path, make_pipeline):
    path = str(tmp_path / "rows.parquet")
    pq.write_table(pa.table({"id": ["a", "b", "c"], "text": ["one", None, "three"]}), path,
                   row_group_size=2)
    items = [item_of(path, index=g, row_groups=(g,)) for g in (0, 1)]
    with make_pipeline() as p:
        out = p | beam.Create(items) | ReadDocuments(["text"], id_key="id")
        assert_that(out["documents"] | beam.Map(lambda b: (b.item, b.texts["text"], b.ids,
                                                           b.lines, b.offsets)),
                    equal_to([(0, ["one"], ["a"], [1], [0]), (1, ["three"], ["c"], [3], [2])]),
                    label="Documents")
        assert_that(out[docs.ERRORS_TAG] | beam.Map(lambda e: (e[0], e[1].line, e[1].reason)),
                    equal_to([("rows", 2, "key 'text' is missing or null")]), label="Errors")


def test_on_bad_record_fail_stops_with_file_and_line(write_jsonl, make_pipeline):
    path = write_jsonl("web.jsonl", LINES)
    with pytest.raises(Exception, match=rf"{path}:2: not valid JSON"):
        with make_pipeline() as p:
            _ = p | beam.Create([item_of(path)]) | ReadDocuments(["text"],
                                                                      on_bad_record="fail")


def test_a_record_bad_for_one_key_is_left_out_for_every_key(write_jsonl, make_pipeline):
    path = write_jsonl("two.jsonl", [{"text": "a", "title": "A"}, {"text": "b"},
                                     {"text": "c", "title": "C"}])
    with make_pipeline() as p:
        out = p | beam.Create([item_of(path)]) | ReadDocuments(["text", "title"])
        assert_that(out["documents"] | beam.Map(lambda b: b.texts),
                    equal_to([{"text": ["a", "c"], "title": ["A", "C"]}]), label="Documents")
        assert_that(out[docs.ERRORS_TAG] | beam.Map(lambda e: e[1].line), equal_to([2]),
                    label="Errors")


def test_read_fn_holds_only_its_configuration_and_ships_without_secrets(
        azure_storage_plan, ship, monkeypatch, write_jsonl):
    from dataio import azure

    transform = ReadDocuments(["text"], id_key="id", max_docs=7, storage=azure_storage_plan)
    fn = transform._fn
    assert vars(fn) == {"_keys": ["text"], "_id_key": "id", "_on_bad": "skip", "_max_docs": 7,
                        "_max_bytes": 8 << 20, "_storage": azure_storage_plan, "_output": ""}
    worker = ship(fn)
    adopted = []
    monkeypatch.setattr(azure.state, "configure_worker", adopted.append)
    worker.setup()
    assert adopted == [azure_storage_plan]
    out = list(worker.process(item_of(write_jsonl("w.jsonl", [{"id": 1, "text": "x"}]))))
    assert [b.texts for b in out] == [{"text": ["x"]}]
    assert adopted == [azure_storage_plan]  # setup only, not per element
