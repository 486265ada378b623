"""Many inputs (issue 24 part 2): what a run asks storage for grows with the files, not with
their square. No timings (bench/many_files.py measures them): listings of the output folder are
counted, and a Parquet file of many row groups is checked to plan few items and read right.
"""

from __future__ import annotations

import io
import json
import logging
import os
import types

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, strategies as st

from dataio import manifest, readers
from dataio import discovery
from dataio.elements import ShardResult
from dataio.indexed import Counts
from pipelines.tokenize import outcome, planner

SHARDS = 40


def test_final_files_names_each_planned_shards_files_of_any_counts():
    sizes = {"a_text_document_dc=1_sc=1_tc=3.bin": 6, "a_text_document_dc=1_sc=1_tc=3.idx": 40,
             "a_text_document_dc=2_sc=2_tc=5.idx": 40,  # a lone .idx of an older run
             "ab_text_document_dc=1_sc=1_tc=1.bin": 2,  # another shard whose name starts alike
             "holdout/a_text_document_dc=1_sc=1_tc=1.bin": 2, "a_text_document.bin": 1,
             "metadata.json": 9}
    found = manifest.final_files(sizes, ["a_text_document", "holdout/a_text_document",
                                         "c_text_document"])
    # the name without counts is the shard's too (--output-prefix's naming): a commit under
    # the other naming replaces it
    assert found == {"a_text_document": ("a_text_document", "a_text_document_dc=1_sc=1_tc=3",
                                         "a_text_document_dc=2_sc=2_tc=5"),
                     "holdout/a_text_document": ("holdout/a_text_document_dc=1_sc=1_tc=1",)}


@pytest.fixture(scope="module")
def many_row_groups(tmp_path_factory):
    """The same 20,000 rows twice: in 20,000 one-row groups, and in 4 groups."""
    folder = tmp_path_factory.mktemp("row_groups")
    texts = [f"document {i} " + "word " * (i % 7) for i in range(20_000)]
    table = pa.table({"text": texts})
    (folder / "one").mkdir()
    (folder / "few").mkdir()
    pq.write_table(table, str(folder / "one" / "rows.parquet"), row_group_size=1)
    pq.write_table(table, str(folder / "few" / "rows.parquet"), row_group_size=5_000)
    return folder


def test_a_parquet_file_of_20000_row_groups_is_few_items_each_knowing_its_first_row(
        many_row_groups):
    (f,) = discovery.discover([str(many_row_groups / "one" / "rows.parquet")])
    (whole,) = readers.plan_items([f])  # the default --split-bytes: one item, one footer read
    assert whole.row_groups == tuple(range(20_000)) and whole.first_row == 0
    uncompressed = sum(size for _, size in readers.parquet_row_groups(f.path))
    items = readers.plan_items([f], split_bytes=uncompressed // 4)  # cut by bytes, in order
    assert 4 <= len(items) <= 5
    assert [g for i in items for g in i.row_groups] == list(range(20_000))
    rows = []
    for item in items:
        assert item.first_row == len(rows)
        for first, values in readers.read_parquet(item, ["text"]):
            assert first == len(rows)  # each row group's rows numbered where the file has them
            rows.extend(values["text"])
    assert rows == pq.read_table(str(many_row_groups / "few" / "rows.parquet"))["text"].to_pylist()


def test_clearing_the_shards_records_before_a_run_lists_each_folder_once(
        tmp_path, hf_tokenizer, monkeypatch):
    """Before the run, the failure records and error files of the shards it redoes go: found
    in one listing of each folder, not by removing each shard's (absent) files, a request per
    shard on object storage."""
    from dataio import fs as fsutil
    from pipelines import tokenize
    from pipelines.tokenize import driver

    inp, out = tmp_path / "in", tmp_path / "out"
    inp.mkdir()
    for i in range(SHARDS):
        (inp / f"f{i:03d}.jsonl").write_text(json.dumps({"text": f"document {i}"}) + "\n")
    failed = manifest.failure_record_path(str(out), "f007_text_document")
    bad = manifest.errors_path(str(out), "f009")
    for path in (failed, bad):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write("{}\n")
    _, options, _ = tokenize.setup(["--input", str(inp), "--output", str(out), "--tokenizer-type",
                                    "HuggingFaceTokenizer", "--tokenizer-model",
                                    str(hf_tokenizer), "--append-eod"])
    job = tokenize.plan(options, checked=True)
    assert len(job.to_process) == SHARDS
    removed: list[str] = []
    original = fsutil.remove
    monkeypatch.setattr(fsutil, "remove", lambda path: (removed.append(path), original(path)))
    driver.prepare_output(job)
    assert sorted(removed) == sorted([failed, bad])
    assert not os.path.exists(failed) and not os.path.exists(bad)


def test_reading_back_what_became_of_many_shards_asks_each_folder_once(tmp_path, monkeypatch):
    """Where the runner hands no results back (Spark; more shards than Beam's string set
    holds), the driver reads the records: which failed and how many bad records each input
    has come from one listing of each folder, not an existence check per shard."""
    from dataio import fs as fsutil
    from dataio.indexed import Counts

    out = str(tmp_path / "out")
    shards = [f"f{i:03d}_text_document" for i in range(SHARDS)]
    for i, shard in enumerate(shards):
        fsutil.write_bytes_atomic(manifest.commit_record_path(out, shard), json.dumps(
            {"name": shard + "_dc=1_sc=1_tc=2", "fingerprint": "fp", "documents": 1,
             "sequences": 1, "tokens": 2, "input_bytes": 10 + i}).encode())
    fsutil.write_bytes_atomic(manifest.failure_record_path(out, shards[3]),
                              json.dumps({"reason": "bad gzip"}).encode())
    fsutil.write_bytes_atomic(manifest.errors_path(out, "f005"), b"{}\n{}\n")
    monkeypatch.setattr(fsutil, "exists", lambda path: pytest.fail(f"asked for {path}"))
    failures = fsutil.files_under(fsutil.join(out, manifest.FAILURES_DIR))
    results = [manifest.shard_result(out, s, "fp", failures=failures) for s in shards]
    assert [r.failed for r in results].count("bad gzip") == 1 and results[3].failed
    assert results[4] == ShardResult(shards[4], shards[4] + "_dc=1_sc=1_tc=2",
                                              Counts(1, 1, 2), input_bytes=14)
    assert manifest.count_bad_records(out, [f"f{i:03d}" for i in range(SHARDS)]) == 2


def test_the_summary_names_the_first_committed_shards_and_counts_the_rest():
    results = [ShardResult(f"f{k:03d}_text_document", f"f{k:03d}_text_document_dc=1_sc=1_tc=2",
                           Counts(1, 1, 2)) for k in range(outcome.SUMMARY_NAMES + 5)]
    out = io.StringIO()
    outcome._summary(types.SimpleNamespace(shards=[]), results, seconds=1.0,
                     figures=outcome.Figures(documents=25, tokens=50, input_bytes=9,
                                             bad_records=0), out=out)
    named = [line for line in out.getvalue().splitlines() if line.startswith("  committed ")]
    assert named == [f"  committed {r.name}" for r in results[:outcome.SUMMARY_NAMES]]
    assert out.getvalue().endswith("  ... and 5 more committed (metadata.json lists every "
                                   "shard)\n")


@pytest.mark.parametrize("extra", [{}, {"content": "sha256:ab"}, {"names": "without counts"},
                                   {"content": None, "input": ['/d/ü"x\\.jsonl', None, ""]}])
def test_a_fingerprint_made_with_the_runs_alike_values_is_the_same(extra):
    payload = {"format": 3, "input": ["/data/a.jsonl", 12, "mtime:1.5"],
               "tokenizer": [["f00d"], "HuggingFaceTokenizer", 2, False, {"b": 1, "a": [None]}],
               "settings": {"keys": ["text"], "level": "document", "é": 1.25}, **extra}
    alike = {k: json.dumps(payload[k], sort_keys=True) for k in ("settings", "tokenizer")}
    assert planner._fingerprint_of(payload, alike) == planner._fingerprint_of(payload)


@pytest.mark.parametrize("debug", [False, True])
def test_a_rerun_names_the_first_skipped_and_redone_shards_and_counts_the_rest(capsys, debug):
    shards = ([types.SimpleNamespace(shard=f"s{k:03d}", skip=True, reason="committed")
               for k in range(planner.ANNOUNCED_PER_KIND + 3)]
              + [types.SimpleNamespace(shard="r", skip=False, reason="the tokenizer changed"),
                 types.SimpleNamespace(shard="n", skip=False, reason="not committed yet")])
    logger = logging.getLogger(planner._LOG.name)
    level = logger.level
    logger.setLevel(logging.DEBUG if debug else logging.INFO)
    try:
        planner.announce_skips(types.SimpleNamespace(shards=shards))
    finally:
        logger.setLevel(level)
    lines = capsys.readouterr().out.splitlines()
    shown = planner.ANNOUNCED_PER_KIND + 3 if debug else planner.ANNOUNCED_PER_KIND
    assert lines[:shown] == [f"skip s{k:03d}: committed" for k in range(shown)]
    assert lines[shown:] == ["redo r: the tokenizer changed"] + (
        [] if debug else ["skip: 3 more shards (--log-level debug lists each)"])


@given(st.lists(st.dictionaries(st.sampled_from(["shard", "name", "status", "input"]),
                                st.one_of(st.text(), st.integers(), st.none())), max_size=5),
       st.text())
def test_metadata_json_holds_what_it_was_given_one_shard_a_line(shards, option):
    meta = {"version": 2, "options": {"argv": [option, "@@shards-0@@", '"@@shards-1@@"']},
            "shards": shards, "totals": {"shards": len(shards)}}
    text = manifest.metadata_text(meta)
    assert json.loads(text) == meta
    lines = text.split("\n")  # (not splitlines: U+0085 and others are in the text)
    assert [json.loads(line.strip().rstrip(",")) for line in lines
            if line.startswith("  {")] == shards
