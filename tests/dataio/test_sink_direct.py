"""The part writer's direct path (dataio/sink.py _WritePartFn): the batches of a kept work item
are held until its mark; an input of one item is then written once, straight to its shards'
final names (no part, no parts folder), and one too large to hold, one of several items, or one
whose commit is declined goes through parts as before, with the same final bytes."""

import os

import numpy as np
import pytest
from apache_beam.pvalue import TaggedOutput

from dataio import indexed, manifest, parts, sink
from dataio.elements import TokenBatch
from dataio.parts import ItemMark, StemPlan

RUN = "run-1"
SHARD = "doc_text_document"
DOCS = [[[1, 2], [3]], [], [[4, 5, 6]]], [[[7]]]  # batch 0 (one empty document), batch 1


def batch(place, number, documents, *, shard=SHARD, num_bytes=10):
    seqs = [s for d in documents for s in d]
    return TokenBatch(shard=shard, item=0, batch=number,
                      tokens=np.array([t for s in seqs for t in s], dtype=np.int64),
                      sequence_lengths=np.array([len(s) for s in seqs], np.int64),
                      sequences_per_document=np.array([len(d) for d in documents], np.int64),
                      num_bytes=num_bytes, place=place)


def end_mark(plan, key, *, records=4, bad=0):
    mark = ItemMark(plan, key, "end", path="/in/doc.jsonl", records=records - bad, num_bytes=20)
    for i in range(bad):
        mark.note_bad({"offset": i, "line": i + 1, "reason": "not JSON", "file": "/in/doc.jsonl"},
                      found="read")
    return mark


def stem_plan(items: int, *, found: bool = True) -> StemPlan:
    """The plan of the stem ``doc`` of ``items`` work items and one shard (``found``: its parts
    folder held files when planned)."""
    return StemPlan(stem="doc", folder=parts.stem_folder("doc", [(SHARD, "fp")]),
                    shards=((SHARD, "fp", None),), items=items,
                    keys=tuple(parts.item_key(i, 0, None, ()) for i in range(items))
                    if items > 1 else (), found=found)


def split(out):
    """What the part writer emitted: (its parts and the shards it committed, its
    (shard, RecordTally) tallies)."""
    tagged = [o for o in out if isinstance(o, TaggedOutput)]
    assert {o.tag for o in tagged} <= {sink.TALLIES, sink.COMMITTED}
    return ([o if not isinstance(o, TaggedOutput) else o.value for o in out
             if not isinstance(o, TaggedOutput) or o.tag == sink.COMMITTED],
            [o.value for o in tagged if o.tag == sink.TALLIES])


def run_item(output, *, items=1, bad=0, max_bad_fraction=1.0, found=True):
    """One item of a stem of ``items``, its two batches then its mark, through a fresh
    _WritePartFn in one bundle; returns its parts (as split), plan, key and tallies."""
    plan = stem_plan(items, found=found)
    key = parts.item_key(0, 0, None, ())
    place = (plan.folder, key)
    fn = sink._WritePartFn(str(output), "uint16", None, RUN, max_bad_fraction=max_bad_fraction)
    fn.setup()
    fn.start_bundle()
    mark = end_mark(plan, key, bad=bad)
    elements = [batch(place, 0, DOCS[0]), batch(place, 1, DOCS[1]), mark_batch(place, mark)]
    out, tallies = split([o for tb in elements for o in fn.process(tb)])
    fn.finish_bundle()
    return out, plan, key, tallies


def mark_batch(place, mark):
    return TokenBatch(shard="", item=0, batch=-1, tokens=np.empty(0, np.int64),
                      sequence_lengths=np.empty(0, np.int64),
                      sequences_per_document=np.empty(0, np.int64), num_bytes=0, place=place,
                      mark=mark)


def committed(output):
    record = manifest.read_commit_record(str(output), SHARD)
    assert record is not None
    prefix = os.path.join(output, record["name"])
    docs = [[s.tolist() for s in d] for d in indexed.IndexedDataset(prefix).documents()]
    with open(prefix + ".bin", "rb") as b, open(prefix + ".idx", "rb") as i:
        return record["name"], docs, b.read() + i.read()


def test_an_input_of_one_item_is_written_straight_to_its_final_names(tmp_path):
    out, _, _, tallies = run_item(tmp_path)
    name, docs, _ = committed(tmp_path)
    assert name == f"{SHARD}_dc=4_sc=4_tc=7"
    assert docs == [[[1, 2], [3]], [], [[4, 5, 6]], [[7]]]
    assert not (tmp_path / parts.PARTS_DIR).exists(), "a part or parts folder was written"
    (shard, (info, (counts, num_bytes, reused))), = out
    assert (shard, info.committed, info.counts, num_bytes, reused) == \
        (SHARD, name, indexed.Counts(4, 4, 7), 20, 0)
    assert sorted(os.listdir(tmp_path)) == sorted(
        [manifest.COMMITS_DIR, name + ".bin", name + ".idx"])  # no temporary left
    assert tallies == []  # committed here: the finaliser has nothing to decide


@pytest.mark.parametrize("found", [True, False])
def test_an_input_committed_from_memory_removes_its_parts_folder_where_one_was_found(tmp_path,
                                                                                   found):
    # A killed run's part of the item: it is there whether planning saw it or not (the run's
    # end removes the folders of committed stems); the commit asks only where one was seen.
    left = tmp_path / parts.PARTS_DIR / stem_plan(1).folder / "x" / "part.bin"
    left.parent.mkdir(parents=True)
    left.write_bytes(b"old")
    run_item(tmp_path, found=found)
    committed(tmp_path)
    assert left.exists() is not found


def test_planning_notes_which_stems_parts_folders_hold_files(tmp_path):
    (tmp_path / parts.PARTS_DIR / "aaa-bbb" / "k1").mkdir(parents=True)
    (tmp_path / parts.PARTS_DIR / "aaa-bbb" / "k1" / "p.bin").write_bytes(b"")
    (tmp_path / parts.PARTS_DIR / "ccc-ddd").mkdir()
    (tmp_path / parts.PARTS_DIR / "ccc-ddd" / "k2.json").write_text("{}")
    assert parts.done_items(str(tmp_path)) == {"aaa-bbb": set(), "ccc-ddd": {"k2"}}


def test_the_finaliser_takes_a_shard_the_part_writer_committed_as_it_is(tmp_path):
    out, _, _, _ = run_item(tmp_path)
    (shard, piece), = out
    fn = sink._FinalizeShardFn(str(tmp_path), "uint16", None, RUN)
    fn.setup()
    result, = fn.process((shard, {"planned": [("fp", None)], "parts": [piece],
                                  "counts": [], "records": [], "failed": []}))  # (none combined)
    assert result.name == piece[0].committed and result.counts == indexed.Counts(4, 4, 7)


def test_batches_too_large_to_hold_go_out_as_parts_with_the_same_bytes(tmp_path, monkeypatch):
    run_item(tmp_path / "held")
    monkeypatch.setattr(sink, "HOLD_BYTES", 0)
    out, _, _, _ = run_item(tmp_path / "spilled")
    assert len(out) == 2 and not any(info.committed for _, (info, _) in out)  # two parts
    assert committed(tmp_path / "spilled") == committed(tmp_path / "held")
    # the stem's parts go once it is committed
    assert not os.listdir(tmp_path / "spilled" / parts.PARTS_DIR)


def test_an_item_of_several_is_kept_as_parts_with_its_record(tmp_path):
    out, plan, key, tallies = run_item(tmp_path, items=2)
    assert len(out) == 2 and not any(info.committed for _, (info, _) in out)
    record = parts.read_record(str(tmp_path), plan.folder, key)
    assert [p["counts"] for p in record["parts"]] == [[3, 3, 6], [1, 1, 1]]
    assert manifest.read_commit_record(str(tmp_path), SHARD) is None  # its other item is not done
    # its records, for the finaliser (summed with the other item's there)
    assert tallies == [(SHARD, sink.RecordTally(records=4, stem="doc", file="/in/doc.jsonl"))]


@pytest.mark.parametrize("max_bad_fraction", [0.1])
def test_a_declined_commit_keeps_the_item_as_parts_and_writes_no_shard(tmp_path,
                                                                         max_bad_fraction):
    out, plan, key, tallies = run_item(tmp_path, bad=2, max_bad_fraction=max_bad_fraction)
    assert manifest.read_commit_record(str(tmp_path), SHARD) is None
    assert not [n for n in os.listdir(tmp_path) if n.endswith((".bin", ".idx"))]
    record = parts.read_record(str(tmp_path), plan.folder, key)  # reusable with another fraction
    assert len(record["bad_read"]) == 2 and len(out) == 2
    (shard, tally), = tallies  # the finaliser fails the shard from it
    assert (shard, tally.records, tally.bad, tally.where) == (SHARD, 4, 2, "line 1")
    assert sink.too_many_bad(tally, max_bad_fraction, output=str(tmp_path))


def test_batches_whose_mark_never_comes_are_written_as_parts_at_the_bundles_end(tmp_path):
    """No runner here splits an item's batches from its mark, but if one did, the held batches
    must not vanish: the bundle's end writes them as parts and hands them on."""
    place = ("folder", parts.item_key(0, 0, None, ()))
    fn = sink._WritePartFn(str(tmp_path), "uint16", None, RUN)
    fn.setup()
    fn.start_bundle()
    assert [o for tb in (batch(place, 0, DOCS[0]), batch(place, 1, DOCS[1]))
            for o in fn.process(tb)] == []  # held
    out = list(fn.finish_bundle())
    assert [wv.value[0] for wv in out] == [SHARD, SHARD]
    assert [wv.value[1][0].counts for wv in out] == [indexed.Counts(3, 3, 6),
                                                     indexed.Counts(1, 1, 1)]
    for wv in out:
        assert os.path.exists(wv.value[1][0].prefix + ".bin")


@pytest.mark.parametrize("items", [1, 2])
def test_an_item_whose_batches_did_not_all_come_is_neither_recorded_nor_committed(tmp_path,
                                                                                    items):
    """The mark says how many TokenBatches the tokenize step sent for the item; where the part
    writer saw fewer in this bundle (the others went by in another, as parts handed on), it
    writes no item record and commits nothing from a part of the item: the finaliser commits
    the shard from all its parts. (A Flink run once committed a stem without its last item's
    parts; this is the guard.)"""
    plan = stem_plan(items)
    key = parts.item_key(0, 0, None, ())
    place = (plan.folder, key)
    fn = sink._WritePartFn(str(tmp_path), "uint16", None, RUN)
    fn.setup()
    fn.start_bundle()
    mark = end_mark(plan, key)
    mark.token_batches = 2  # the tokenize step sent two; this bundle sees the second only
    out, tallies = split([o for tb in (batch(place, 1, DOCS[1]), mark_batch(place, mark))
                          for o in fn.process(tb)])
    list(fn.finish_bundle())
    assert [shard for shard, _ in tallies] == [SHARD]
    assert [(s, info.counts, info.committed) for s, (info, _) in out] == \
        [(SHARD, indexed.Counts(1, 1, 1), "")]  # handed on as a part
    assert manifest.read_commit_record(str(tmp_path), SHARD) is None
    assert parts.read_record(str(tmp_path), plan.folder, key) is None


def test_the_tokenize_step_counts_the_batches_it_sends_for_an_item():
    from tests.transforms.test_tokenize_transform import NULL, config, doc_batch, tokenize_fn

    fn = tokenize_fn(NULL, config(append_eod=True))
    fn.setup()
    place = ("folder", "key")
    batches = [doc_batch({"text": ["1 2"]}, batch=0), doc_batch({"text": ["3"]}, batch=1)]
    for b in batches:
        b.place = place
    mark = ItemMark(None, "key", "end")
    marked = doc_batch({"text": []}, batch=-1)
    marked.place, marked.mark = place, mark
    out = [o for b in (*batches, marked) for o in fn._tokenize(b)[0]]
    assert mark.token_batches == 2 and out[-1].mark is mark
    fn.teardown()


def test_an_item_with_more_bad_records_than_its_mark_keeps_is_tallied_whole(tmp_path,
                                                                          monkeypatch):
    """A mark keeps at most MAX_KEPT_BAD reports (the item is then redone on a rerun, never
    recorded); its tally counts every bad record and names the first in the file, whichever
    step found it, so that the finaliser's verdict and message are right."""
    monkeypatch.setattr(parts, "MAX_KEPT_BAD", 2)
    plan = stem_plan(1)
    key = parts.item_key(0, 0, None, ())
    mark = ItemMark(plan, key, "end", path="/in/doc.jsonl", records=6, num_bytes=20)
    for offset in (50, 60, 70):
        mark.note_bad({"offset": offset, "line": offset, "reason": "not JSON",
                       "file": "/in/doc.jsonl"}, found="read")
    mark.note_bad({"offset": 5, "line": 1, "reason": "the tokenizer raised",
                   "file": "/in/doc.jsonl"}, found="tokenize")
    assert not mark.keepable and len(mark.bad_read) + len(mark.bad_tokenized) == 2
    fn = sink._WritePartFn(str(tmp_path), "uint16", None, RUN, max_bad_fraction=0.5)
    fn.setup()
    fn.start_bundle()
    out, tallies = split(list(fn.process(mark_batch((plan.folder, key), mark))))
    (shard, tally), = tallies
    assert (tally.records, tally.bad) == (9, 4)  # 6 passed on (one of them bad later) + 3
    assert (tally.where, tally.reason) == ("line 1", "the tokenizer raised")
    assert out == [] and manifest.read_commit_record(str(tmp_path), SHARD) is None


def test_the_finaliser_sums_the_tallies_of_a_stems_items(tmp_path):
    """The finaliser decides on the sum of the tallies of a stem's items, and names the first
    bad record of them all."""
    fn = sink._FinalizeShardFn(str(tmp_path), "uint16", None, RUN, max_bad_fraction=0.4)
    fn.setup()
    one = sink.RecordTally(records=10, bad=3, stem="doc", file="/in/doc.jsonl", offset=40,
                           where="line 4", reason="late")
    two = sink.RecordTally(records=10, bad=3, stem="doc", file="/in/doc.jsonl", offset=7,
                           where="line 2", reason="early")
    result, = fn.process((SHARD, {"planned": [("fp", None)], "parts": [], "counts": [],
                                  "records": [one, two], "failed": []}))
    assert result.name is not None  # 6 of 20: not more than 0.4
    fn = sink._FinalizeShardFn(str(tmp_path / "b"), "uint16", None, RUN, max_bad_fraction=0.25)
    fn.setup()
    result, = fn.process((SHARD, {"planned": [("fp", None)], "parts": [], "counts": [],
                                  "records": [one, two], "failed": []}))
    assert result.name is None and "6 of 20 records are bad" in result.failed
    assert "the first, line 2: early" in result.failed


@pytest.mark.parametrize("args, key", [((0, 0, None, ()), "000000-02bfe048c762"),
                                       ((3, 1048576, 2097152, ()), "000003-7fa716755ce9"),
                                       ((2, 0, None, [4, 5, 6]), "000002-262221731fee")])
def test_item_keys_are_those_earlier_runs_recorded_parts_under(args, key):
    # (the values the key had before it was remembered per range: a kept part stays reusable)
    assert parts.item_key(*args) == key == parts.item_key(*args)
