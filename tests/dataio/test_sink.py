"""The shard sink on its own (dataio/sink.py): WriteShards and WriteErrors in a TestPipeline fed
with token batches and reports written here, the SumCountsFn combiner, and the finaliser driven
directly: run twice, and run after crashes that left parts, a ``.bin`` without its ``.idx``, or a
commit record without files."""

import json
import os

import apache_beam as beam
import numpy as np
import pytest
from apache_beam.testing.util import assert_that, equal_to
from hypothesis import given, settings
from hypothesis import strategies as st

from dataio import indexed, naming, sink
from dataio.elements import ShardResult
from dataio.indexed import Counts
from transforms.documents import BadRecordReport
from dataio.elements import TokenBatch

RUN = "run-1"


def token_batch(shard, item, batch, documents, *, num_bytes=10):
    """A TokenBatch of ``documents`` (each a list of sequences, each a list of ids)."""
    seqs = [s for d in documents for s in d]
    tokens = np.array([t for s in seqs for t in s], dtype=np.int64)
    return TokenBatch(shard=shard, item=item, batch=batch, tokens=tokens,
                      sequence_lengths=np.array([len(s) for s in seqs], np.int64),
                      sequences_per_document=np.array([len(d) for d in documents], np.int64),
                      num_bytes=num_bytes)


def read_documents(prefix):
    """Every document of a committed dataset as lists of ids per sequence."""
    return [[s.tolist() for s in doc] for doc in indexed.IndexedDataset(str(prefix)).documents()]


def write_parts(output, shard, batches, *, run_id=RUN, dtype="uint16"):
    """Drive _WritePartFn directly: (PartInfos, summed (Counts, input bytes, reused bytes)) of
    ``batches``."""
    fn = sink._WritePartFn(str(output), dtype, None, run_id)
    fn.setup()
    outs = [out for tb in batches for out in fn.process(tb)]
    assert {s for s, _ in outs} == {shard}
    combine = sink.SumCountsFn()
    counts = combine.extract_output(combine.merge_accumulators(
        [combine.add_input(combine.create_accumulator(), piece) for _, piece in outs]))
    return [info for _, (info, _) in outs], counts


def finalize(output, shard, fingerprint, parts, counts, *, failed=(), run_id=RUN):
    """The finaliser on ``parts`` whose counts combined to ``counts``."""
    fn = sink._FinalizeShardFn(str(output), "uint16", None, run_id)
    fn.setup()
    counts = (*counts, 0) if len(counts) == 2 else counts  # (Counts, input bytes[, reused])
    element = (shard, {"planned": [fingerprint], "parts": [(p, None) for p in parts],
                       "counts": [counts], "records": [], "failed": list(failed)})
    return list(fn.process(element))


DOCS_A = [[[1, 2], [3]], [], [[4, 5, 6]]]  # item 0 batch 0: 3 documents, one empty
DOCS_B = [[[7]]]  # item 0 batch 1
DOCS_C = [[[8, 9], [10]]]  # item 1 batch 0


# --- WriteShards in a pipeline -------------------------------------------------------------------

def test_write_shards_commits_in_input_order_and_reports_every_planned_shard(tmp_path,
                                                                             make_pipeline):
    out = str(tmp_path / "out")
    a, b, c = "a_text_document", "b_text_document", "holdout/c_text_document"
    with make_pipeline() as p:
        planned = p | "Planned" >> beam.Create([(a, "fp-a"), (b, "fp-b"), (c, "fp-c")])
        failed = p | "Failed" >> beam.Create([])
        batches = p | "Batches" >> beam.Create([  # out of order: the sink orders by (item, batch)
            token_batch(a, 1, 0, DOCS_C, num_bytes=5), token_batch(a, 0, 1, DOCS_B, num_bytes=3),
            token_batch(a, 0, 0, DOCS_A, num_bytes=20), token_batch(c, 4, 2, [[[11]]])])
        results = batches | sink.WriteShards(out, dtype="uint16", planned=planned, failed=failed,
                                             run_id=RUN)
        assert_that(results, equal_to([
            ShardResult(a, "a_text_document_dc=5_sc=6_tc=10", Counts(5, 6, 10),
                             input_bytes=28),
            ShardResult(b, "b_text_document_dc=0_sc=0_tc=0", Counts()),
            ShardResult(c, "holdout/c_text_document_dc=1_sc=1_tc=1", Counts(1, 1, 1),
                             input_bytes=10)]))
    assert read_documents(f"{out}/a_text_document_dc=5_sc=6_tc=10") == DOCS_A + DOCS_B + DOCS_C
    assert read_documents(f"{out}/b_text_document_dc=0_sc=0_tc=0") == []  # planned, no batch
    assert read_documents(f"{out}/holdout/c_text_document_dc=1_sc=1_tc=1") == [[[11]]]
    for shard, fingerprint in ((a, "fp-a"), (b, "fp-b"), (c, "fp-c")):
        assert sink.is_committed(out, shard, fingerprint) == (
            True, "committed with the same inputs, tokenizer and options")
    record = sink.read_commit_record(out, a)
    assert (record["documents"], record["sequences"], record["tokens"], record["input_bytes"]) \
        == (5, 6, 10, 28)
    left = [f for _, _, files in os.walk(sink.temporary_dir(out, RUN)) for f in files]
    assert left == []  # every part removed once its shard is committed
    # What was committed comes back through the runner as Beam counters, not from the files.
    from pipelines.tokenize import graph

    assert graph.figures(p.result) == {
        "parts": 4, "shards_committed": 3, "documents": 6, "sequences": 7, "tokens": 11,
        "input_bytes": 38}
    reported = graph.shard_results(p.result)
    assert reported == {a: ShardResult(a, "a_text_document_dc=5_sc=6_tc=10", Counts(5, 6, 10),
                                            input_bytes=28),
                        b: ShardResult(b, "b_text_document_dc=0_sc=0_tc=0", Counts()),
                        c: ShardResult(c, "holdout/c_text_document_dc=1_sc=1_tc=1",
                                            Counts(1, 1, 1), input_bytes=10)}


def test_write_shards_failed_input_gets_a_failure_record_and_unplanned_shards_nothing(
        tmp_path, make_pipeline):
    # x: its input failed to read; z: not planned (committed earlier, this run skips it)
    out = str(tmp_path / "out")
    with make_pipeline() as p:
        planned = p | "Planned" >> beam.Create([("x_text_document", "fp"),
                                                  ("y_text_document", "fp")])
        failed = p | "Failed" >> beam.Create([("x_text_document", "x.jsonl.gz: corrupt")])
        batches = p | "Batches" >> beam.Create([token_batch("x_text_document", 0, 0, DOCS_A),
                                                token_batch("y_text_document", 0, 0, DOCS_B),
                                                token_batch("z_text_document", 0, 0, DOCS_B)])
        results = batches | sink.WriteShards(out, dtype="uint16", planned=planned, failed=failed,
                                             run_id=RUN)
        assert_that(results | beam.Map(lambda r: (r.shard, r.name, r.failed)), equal_to([
            ("x_text_document", None, "x.jsonl.gz: corrupt"),
            ("y_text_document", "y_text_document_dc=1_sc=1_tc=1", None)]))
    failure = json.loads(open(sink.failure_record_path(out, "x_text_document")).read())
    assert (failure["shard"], failure["reason"]) == ("x_text_document", "x.jsonl.gz: corrupt")
    for shard in ("x_text_document", "z_text_document"):
        assert sink.read_commit_record(out, shard) is None
        assert not [n for n in os.listdir(out) if n.startswith(shard[0] + "_")]
    assert not os.path.exists(os.path.join(sink.temporary_dir(out, RUN), "x_text_document"))


# --- WriteErrors in a pipeline -------------------------------------------------------------------

def test_write_errors_one_file_per_stem_sorted_by_offset(tmp_path, make_pipeline):
    out = str(tmp_path / "out")
    r = [BadRecordReport("/in/a.jsonl", line, offset, reason, snippet) for line, offset, reason,
         snippet in ((7, 70, "blank line", ""), (2, 12, "not valid JSON", "{caf\u00e9"),
                     (5, 40, "missing key 'text'", '{"x": 1}'))]
    other = BadRecordReport("/in/b.jsonl", 1, 0, "a JSON list, not an object", "[1]")
    with make_pipeline() as p:
        written = (p | beam.Create([("a", r[0]), ("b", other), ("a", r[1]), ("a", r[2])])
                   | sink.WriteErrors(out))
        assert_that(written, equal_to([("a", 3), ("b", 1)]))
    from pipelines.tokenize import graph

    assert graph.figures(p.result) == {"bad_records": 4}
    lines = open(f"{out}/_errors/a.jsonl", encoding="utf-8").read().splitlines()
    assert [json.loads(x) for x in lines] == [x.as_json() for x in (r[1], r[2], r[0])]
    assert "caf\u00e9" in lines[0]  # readable text, not \\u escapes
    assert [json.loads(x) for x in open(f"{out}/_errors/b.jsonl")] == [other.as_json()]


# --- SumCountsFn ---------------------------------------------------------------------------------

counts_st = st.tuples(st.builds(Counts, *[st.integers(0, 10**12)] * 3), st.integers(0, 10**12),
                      st.integers(0, 10**12))


def _sum(values):
    return (Counts(*(sum(getattr(c, f) for c, _, _ in values)
                     for f in ("documents", "sequences", "tokens"))),
            sum(n for _, n, _ in values), sum(r for _, _, r in values))


@settings(max_examples=60, deadline=None)
@given(values=st.lists(counts_st, max_size=12), cuts=st.lists(st.integers(0, 12), max_size=4),
       order=st.randoms(use_true_random=False))
def test_sum_counts_any_split_and_merge_order_gives_the_total(values, cuts, order):
    fn = sink.SumCountsFn()
    bounds = sorted({0, len(values), *(min(c, len(values)) for c in cuts)})
    accs = []
    for lo, hi in zip(bounds, bounds[1:]):
        acc = fn.create_accumulator()
        for v in values[lo:hi]:
            acc = fn.add_input(acc, (None, v))  # (PartInfo, counts) as the part writer gives
        accs.append(acc)
    accs.append(fn.create_accumulator())  # a bundle that saw nothing
    order.shuffle(accs)
    merged = fn.merge_accumulators(accs)
    assert fn.extract_output(merged) == _sum(values)
    # merging in two stages, in another order, changes nothing
    half = len(accs) // 2
    twice = fn.merge_accumulators([fn.merge_accumulators(accs[half:]),
                                   fn.merge_accumulators(accs[:half])])
    assert fn.extract_output(twice) == _sum(values)


def test_sum_counts_of_nothing_is_zero():
    fn = sink.SumCountsFn()
    assert fn.extract_output(fn.create_accumulator()) == (Counts(0, 0, 0), 0, 0)
    assert fn.extract_output(fn.merge_accumulators([])) == (Counts(0, 0, 0), 0, 0)
    assert fn.extract_output(fn.merge_accumulators([fn.create_accumulator()] * 3)) == \
        (Counts(), 0, 0)


# --- bad records: the tally of an input's records, and when it fails the input's shards ------

def _bad(offset, records=1):
    return sink.RecordTally(records=records, bad=1, stem="x", file="/in/x.jsonl", offset=offset,
                            where=f"line {offset + 1}", reason=f"reason {offset}")


@settings(max_examples=60, deadline=None)
@given(offsets=st.lists(st.integers(0, 1000), max_size=10), good=st.integers(0, 50),
       order=st.randoms(use_true_random=False))
def test_tallies_summed_keep_the_first_bad_record_whatever_the_order(offsets, good, order):
    tallies = [_bad(o) for o in offsets] + [sink.RecordTally(records=1, stem="x")] * good
    order.shuffle(tallies)
    half = len(tallies) // 2  # (as the finaliser sums them: in any order, in any grouping)
    total = sum(tallies[half:], sink.RecordTally()) + sum(tallies[:half], sink.RecordTally())
    assert (total.records, total.bad) == (len(offsets) + good, len(offsets))
    assert total.reason == (f"reason {min(offsets)}" if offsets else "")
    assert total.where == (f"line {min(offsets) + 1}" if offsets else "")


@pytest.mark.parametrize("records, bad, fraction, fails", [
    (10, 0, 0.0, False), (10, 1, 0.1, False), (10, 2, 0.1, True), (10, 1, 0.0, True),
    (10, 10, 0.99, True), (10, 10, 1.0, False), (10, 9, 1.0, False), (1, 1, 0.5, True),
    (0, 0, 0.1, False)])
def test_too_many_bad(records, bad, fraction, fails):
    tally = sink.RecordTally(records=records, bad=bad, stem="x", file="/in/x.jsonl", offset=0,
                             where="line 3", reason="missing key 'text'; set --json-keys")
    reason = sink.too_many_bad(tally, fraction, output="/out")
    assert (reason is not None) == fails
    if fails:
        assert reason.startswith("/in/x.jsonl: ") and "/out/_errors/x.jsonl" in reason
        assert "the first, line 3: missing key 'text'; set --json-keys" in reason
        assert ("every record is bad" in reason or "its one record" in reason) == (bad == records)


def test_write_shards_fails_the_shards_of_an_input_of_bad_records(tmp_path, make_pipeline):
    out = str(tmp_path / "out")
    x, y = "x_text_document", "y_text_document"
    with make_pipeline() as p:
        planned = p | "Planned" >> beam.Create([(x, "fp"), (y, "fp")])
        failed = p | "Failed" >> beam.Create([])
        records = p | "Records" >> beam.Create([(x, _bad(5)), (x, _bad(2)),
                                                (y, sink.RecordTally(records=3, stem="y")),
                                                (y, _bad(9, records=0))])
        batches = p | "Batches" >> beam.Create([token_batch(y, 0, 0, DOCS_A)])
        results = batches | sink.WriteShards(out, dtype="uint16", planned=planned, failed=failed,
                                             run_id=RUN, records=records, max_bad_fraction=0.5)
        assert_that(results | beam.Map(lambda r: (r.shard, r.name, r.failed)), equal_to([
            (x, None, "/in/x.jsonl: every record is bad (2 of 2), listed in "
                      f"{out}/_errors/x.jsonl; the first, line 3: reason 2. Fix the input or the "
                      "flags and rerun (--max-bad-fraction 1 commits what is good)"),
            (y, "y_text_document_dc=3_sc=3_tc=6", None)]))  # 1 of 3 bad: not more than half
    assert sink.read_commit_record(out, x) is None
    assert json.loads(open(sink.failure_record_path(out, x)).read())["reason"].startswith(
        "/in/x.jsonl: every record is bad")


# --- the part writer -----------------------------------------------------------------------------

def test_part_names_are_deterministic_so_a_retry_overwrites_its_own_part(tmp_path):
    out = tmp_path / "out"
    first, _ = write_parts(out, "a_text_document", [token_batch("a_text_document", 3, 12, DOCS_A)])
    retry, counts = write_parts(out, "a_text_document",
                                [token_batch("a_text_document", 3, 12, DOCS_B)])
    prefix = os.path.join(sink.temporary_dir(str(out), RUN), "a_text_document", "000003-000012")
    assert first[0].prefix == retry[0].prefix == prefix
    assert read_documents(prefix) == DOCS_B  # the retry's content, nothing appended
    assert sorted(os.listdir(os.path.dirname(prefix))) == ["000003-000012.bin",
                                                          "000003-000012.idx"]  # no temporaries
    assert (retry[0].order, retry[0].counts) == ((3, 12), Counts(1, 1, 1))
    assert counts == (Counts(1, 1, 1), 10, 0)


def test_runs_keep_their_parts_apart(tmp_path):
    shard = "a_text_document"
    one, _ = write_parts(tmp_path, shard, [token_batch(shard, 0, 0, DOCS_A)], run_id="one")
    two, _ = write_parts(tmp_path, shard, [token_batch(shard, 0, 0, DOCS_B)], run_id="two")
    assert one[0].prefix != two[0].prefix
    assert read_documents(one[0].prefix) == DOCS_A and read_documents(two[0].prefix) == DOCS_B


# --- the finaliser -------------------------------------------------------------------------------

SHARD = "a_text_document"
NAME = "a_text_document_dc=5_sc=6_tc=10"


def _parts(out):
    return write_parts(out, SHARD, [token_batch(SHARD, 1, 0, DOCS_C),
                                    token_batch(SHARD, 0, 0, DOCS_A),
                                    token_batch(SHARD, 0, 1, DOCS_B)])


def result(counts, *, failed=None):
    """The ShardResult of SHARD for ``counts``: (Counts, input bytes) as SumCountsFn gives them."""
    return ShardResult(SHARD, None if failed else NAME, counts[0], input_bytes=counts[1],
                            failed=failed)


def _files(out):
    return {n: (out / n).read_bytes() for n in sorted(os.listdir(out)) if n.startswith("a_")}


def test_finalize_twice_is_idempotent(tmp_path):
    out = tmp_path / "out"
    parts, counts = _parts(out)
    first = finalize(out, SHARD, "fp", parts, counts)
    files, record = _files(out), (out / "_commits" / f"{SHARD}.json").read_bytes()
    assert first == [result(counts)]
    assert set(files) == {NAME + ".bin", NAME + ".idx"}
    assert read_documents(out / NAME) == DOCS_A + DOCS_B + DOCS_C
    assert not (out / "_temporary" / RUN / SHARD).exists()  # parts removed after the commit
    # A retried finalize (its parts are gone by now) finds its record and changes nothing.
    assert finalize(out, SHARD, "fp", parts, counts) == first
    assert _files(out) == files
    assert (out / "_commits" / f"{SHARD}.json").read_bytes() == record  # not even rewritten


def test_finalize_after_a_crash_that_left_parts_merges_only_this_attempts_parts(tmp_path):
    out = tmp_path / "out"
    # A crashed attempt left a part this attempt does not list (other batching), and a writer
    # temporary; the committed shard holds exactly the listed parts, and all of it is removed.
    write_parts(out, SHARD, [token_batch(SHARD, 9, 9, [[[99, 99]]])])
    parts_dir = out / "_temporary" / RUN / SHARD
    (parts_dir / ".000000-000000.bin.tmp-dead").write_bytes(b"junk")
    parts, counts = _parts(out)
    assert finalize(out, SHARD, "fp", parts, counts) == [result(counts)]
    assert read_documents(out / NAME) == DOCS_A + DOCS_B + DOCS_C
    assert not parts_dir.exists()


def test_finalize_after_a_crash_between_bin_and_idx_rewrites_both(tmp_path):
    out = tmp_path / "out"
    parts, counts = _parts(out)
    (out / f"{NAME}.bin").write_bytes(b"half of an older attempt")  # .bin renamed, .idx not
    assert sink.is_committed(str(out), SHARD, "fp")[0] is False
    finalize(out, SHARD, "fp", parts, counts)
    assert read_documents(out / NAME) == DOCS_A + DOCS_B + DOCS_C
    assert indexed.validate(str(out / NAME)).ok
    assert sink.is_committed(str(out), SHARD, "fp")[0] is True


def test_finalize_after_a_commit_record_without_files_writes_the_files(tmp_path):
    out = tmp_path / "out"
    parts, counts = _parts(out)
    finalize(out, SHARD, "fp", parts, counts)
    expected = _files(out)
    for name in expected:  # e.g. deleted by hand, or an object store that lost them
        (out / name).unlink()
    assert sink.is_committed(str(out), SHARD, "fp") == (
        False, f"{NAME}.bin is missing (its commit record names it)")
    parts, counts = _parts(out)  # the rerun's parts
    assert finalize(out, SHARD, "fp", parts, counts) == [result(counts)]
    assert _files(out) == expected
    assert sink.is_committed(str(out), SHARD, "fp")[0] is True


def test_finalize_replaces_a_record_of_other_inputs_and_removes_stale_files(tmp_path):
    out = tmp_path / "out"
    parts, counts = write_parts(out, SHARD, [token_batch(SHARD, 0, 0, DOCS_B)])
    finalize(out, SHARD, "old", parts, counts)
    old = naming.with_counts(SHARD, 1, 1, 1)
    (out / "ab_text_document_dc=1_sc=1_tc=1.bin").write_bytes(b"another shard")  # not ours
    parts, counts = _parts(out)
    finalize(out, SHARD, "new", parts, counts)
    assert not (out / f"{old}.bin").exists() and not (out / f"{old}.idx").exists()
    assert (out / "ab_text_document_dc=1_sc=1_tc=1.bin").exists()
    assert sink.read_commit_record(str(out), SHARD)["fingerprint"] == "new"
    assert read_documents(out / NAME) == DOCS_A + DOCS_B + DOCS_C


def test_finalize_refuses_parts_that_disagree_with_the_counts(tmp_path):
    out = tmp_path / "out"
    parts, counts = _parts(out)
    with pytest.raises(RuntimeError, match="parts hold 5 documents"):
        finalize(out, SHARD, "fp", parts, (Counts(6, 6, 10), 0))
    assert sink.read_commit_record(str(out), SHARD) is None


def test_a_later_success_clears_the_failure_record(tmp_path):
    out = tmp_path / "out"
    parts, counts = _parts(out)
    assert finalize(out, SHARD, "fp", parts, counts, failed=["bad gzip"]) == [
        result(counts, failed="bad gzip")]
    assert os.path.exists(sink.failure_record_path(str(out), SHARD))
    assert not _files(out) and not (out / "_temporary" / RUN / SHARD).exists()
    parts, counts = _parts(out)
    finalize(out, SHARD, "fp", parts, counts)
    assert not os.path.exists(sink.failure_record_path(str(out), SHARD))


def test_finalize_of_an_unplanned_shard_does_nothing(tmp_path):
    fn = sink._FinalizeShardFn(str(tmp_path), "uint16", None, RUN)
    assert list(fn.process((SHARD, {"planned": [], "parts": [], "counts": [], "failed": []}))) == []
    assert os.listdir(tmp_path) == []


# --- the DoFns with setup: what they hold, what they adopt, how they travel -----------------------

@pytest.mark.parametrize("make", [
    lambda out, storage: sink._WritePartFn(out, "uint16", storage, RUN),
    lambda out, storage: sink._FinalizeShardFn(out, "uint16", storage, RUN),
    lambda out, storage: sink._WriteErrorsFn(out, storage),
], ids=["WritePart", "FinalizeShard", "WriteErrors"])
def test_sink_dofns_ship_without_secrets_and_adopt_the_storage_plan_in_setup(
        make, tmp_path, azure_storage_plan, ship, monkeypatch):
    from dataio import azure

    fn = make(str(tmp_path), azure_storage_plan)
    # identifiers only (_guard: the output lock's OutputGuard, URL, run and lease ids;
    # _stale: names of older shard files the plan found)
    assert set(vars(fn)) <= {"_output", "_dtype", "_storage", "_temporary", "_guard",
                             "_max_bad_fraction", "_run_id", "_committer"}
    if hasattr(fn, "_committer"):  # the commit's identifiers: output, dtype, run id, guard,
        # stale, and whether names carry counts (False: --output-prefix); whether records
        # await their filesystem sync
        assert set(vars(fn._committer)) == {"_output", "_dtype", "_run_id", "_guard", "_stale",
                                            "_counted_names", "_unsynced"}
    worker = ship(fn)
    adopted = []
    monkeypatch.setattr(azure.state, "configure_worker", adopted.append)
    worker.setup()
    assert adopted == [azure_storage_plan]  # once, in setup, the plan the driver made


def test_sink_dofns_without_storage_touch_no_azure_state(tmp_path, monkeypatch):
    from dataio import azure

    monkeypatch.setattr(azure.state, "configure_worker",
                        lambda plan=None: pytest.fail("configure_worker called without storage"))
    for fn in (sink._WritePartFn(str(tmp_path), "uint16"),
               sink._FinalizeShardFn(str(tmp_path), "uint16"), sink._WriteErrorsFn(str(tmp_path))):
        fn.setup()


def test_a_shard_result_travels_as_one_string_and_back():
    from dataio import manifest

    for result in (ShardResult("holdout/a_text_document",
                                    "holdout/a_text_document_dc=1_sc=2_tc=3", Counts(1, 2, 3),
                                    input_bytes=40),
                   ShardResult("b_text_document", None, Counts(),
                                    failed="b.jsonl.gz: corrupt")):
        assert manifest.decode_result(manifest.encode_result(result)) == result


def test_the_commit_record_keeps_the_resume_key_and_says_what_changed(tmp_path):
    # planned as (fingerprint, resume key): the key goes into the record; a later plan with
    # another key is told which part changed (pipelines/tokenize/planner.py, dataio/manifest.py)
    from dataio import manifest

    key = {"format": 1, "input": ["/in/web.jsonl", 10, "mtime:1"], "content": None,
           "tokenizer": [["ab"], "NullTokenizer", 1000, False],
           "settings": {"level": "document", "append_eod": False}}
    out = str(tmp_path)
    parts, counts = write_parts(out, "web_text_document",
                                [token_batch("web_text_document", 0, 0, [[[1, 2]]])])
    [result] = finalize(out, "web_text_document", ("fp", key), parts, counts)
    record = manifest.read_commit_record(out, "web_text_document")
    assert record["resume_key"] == key and result.name
    assert manifest.is_committed(out, "web_text_document", "fp", resume_key=key)[0]
    now = {**key, "settings": {"level": "document", "append_eod": True}}
    done, why = manifest.is_committed(out, "web_text_document", "other", resume_key=now)
    assert not done and why == "options changed: append_eod False -> True"
    now = {**key, "input": ["/in/web.jsonl", 11, "mtime:2"], "tokenizer": [["cd"]]}
    assert manifest.what_changed(key, now) == (
        "the input's path, size or modification time changed; the tokenizer changed (its "
        "files, kind, EOD or options)")
    assert manifest.what_changed({**key, "content": "sha256:a"}, {**key, "content": "sha256:b"}) \
        == "the input's content changed"
    assert manifest.what_changed(None, now) == \
        "inputs, tokenizer or options changed since it was committed"  # an older record
