"""TokenizeDocuments on its own (transforms/tokenize.py): document batches written here go
through a TestPipeline; token batches come out on ``tokens``, documents the tokenizer raised on on
``errors``. Its DoFn: the tokenizer is loaded once in setup, not shipped, and no secret travels.

(The pure parts, assemble and holdout_mask, are in test_tokenize_units.py. The file is not called
test_tokenize.py: pytest's default import mode needs unique basenames, and tests/e2e/test_tokenize.py
is the job's end-to-end test.)"""

import dataclasses

import apache_beam as beam
import numpy as np
import pytest
from apache_beam.testing.util import assert_that, equal_to

from dataio import naming
from transforms import tokenize as tz
from transforms.tokenize_config import TokenizeConfig
from dataio.elements import TokenBatch
from dataio.parts import ItemMark
from transforms.documents import ERRORS_TAG
from dataio.elements import DocumentBatch
from transforms.tokenizer import TokenizerSpec
from dofn_bundle import bundle

NULL = TokenizerSpec(kind="NullTokenizer", vocab_size=1000)  # "1 2 3" -> [1, 2, 3]; EOD 1000
EOD = 1000


def doc_batch(texts, *, stem="web", item=0, batch=0, ids=None, path="/in/web.jsonl"):
    """A DocumentBatch as ReadDocuments yields it; ``texts``: {key: [value per document]}."""
    n = len(next(iter(texts.values())))
    return DocumentBatch(stem, item, batch, {k: list(v) for k, v in texts.items()},
                         list(ids) if ids else [None] * n, 10 * n, path,
                         list(range(1, n + 1)), [10 * i for i in range(n)])


def view(tb: TokenBatch):
    return (tb.shard, tb.item, tb.batch, tb.tokens.tolist(), tb.sequence_lengths.tolist(),
            tb.sequences_per_document.tolist(), tb.num_bytes)


def config(*keys, **kwargs):
    return TokenizeConfig(keys=keys or ("text",), log_interval=0, **kwargs)


def planned_names(cfg, stems=("web", "r", "d")):
    """(stem, key, holdout?) -> shard, as the driver plans them (pipelines/tokenize/planner.py)."""
    names = {}
    for stem in stems:
        for key in cfg.keys:
            name = naming.base_name(stem, key, cfg.level)
            names[stem, key, False], names[stem, key, True] = name, f"holdout/{name}"
    return names


def tokenize_documents(spec, cfg, **kwargs):
    return tz.TokenizeDocuments(spec, cfg, shard_names=planned_names(cfg), **kwargs)


def tokenize_fn(spec, cfg, **kwargs):
    return tz._TokenizeFn(spec, cfg, shard_names=planned_names(cfg), **kwargs)


def test_documents_become_token_batches_per_key_with_eod(make_pipeline):
    batches = [doc_batch({"text": ["1 2 3", ["4", "5 6"]], "title": ["7", "8"]}),
               doc_batch({"text": ["9"], "title": ["10 11"]}, item=2, batch=5)]
    with make_pipeline() as p:
        out = (p | beam.Create(batches)
               | tokenize_documents(NULL, config("text", "title", append_eod=True)))
        assert_that(out["tokens"] | beam.Map(view), equal_to([
            ("web_text_document", 0, 0, [1, 2, 3, EOD, 4, 5, 6, EOD], [4, 1, 3], [1, 2], 20),
            ("web_title_document", 0, 0, [7, EOD, 8, EOD], [2, 2], [1, 1], 20),
            ("web_text_document", 2, 5, [9, EOD], [2], [1], 10),
            ("web_title_document", 2, 5, [10, 11, EOD], [3], [1], 10)]), label="Tokens")
        assert_that(out[ERRORS_TAG], equal_to([]), label="Errors")


def test_documents_the_tokenizer_raises_on_are_bad_records_left_out_of_every_key(make_pipeline):
    batch = doc_batch({"text": ["1", "2", "3"], "title": ["4", "not a number", "6"]})
    with make_pipeline() as p:
        out = p | beam.Create([batch]) | tokenize_documents(NULL, config("text", "title"))
        assert_that(out["tokens"] | beam.Map(lambda tb: (tb.shard, tb.tokens.tolist())),
                    equal_to([("web_text_document", [1, 3]), ("web_title_document", [4, 6])]),
                    label="Tokens")
        assert_that(out[ERRORS_TAG] | beam.Map(
            lambda e: (e[0], e[1].file, e[1].line, e[1].offset, e[1].snippet,
                       e[1].reason.startswith("the tokenizer failed on key 'title' (ValueError"))),
            equal_to([("web", "/in/web.jsonl", 2, 10, '"not a number"', True)]), label="Errors")


def test_empty_documents_are_kept_or_skipped(make_pipeline):
    batch = doc_batch({"text": ["1", [], "2"]})  # a document with no sequence
    with make_pipeline() as p:
        kept = p | "Keep" >> beam.Create([batch]) | "Kept" >> tokenize_documents(
            NULL, config(append_eod=True))
        skipped = p | "Skip" >> beam.Create([batch]) | "Skipped" >> tokenize_documents(
            NULL, config(append_eod=True, skip_empty=True))
        assert_that(kept["tokens"] | "K" >> beam.Map(view), equal_to([
            ("web_text_document", 0, 0, [1, EOD, 2, EOD], [2, 2], [1, 0, 1], 30)]), label="Kept")
        assert_that(skipped["tokens"] | "S" >> beam.Map(view), equal_to([
            ("web_text_document", 0, 0, [1, EOD, 2, EOD], [2, 2], [1, 1], 30)]), label="Skipped")


def test_holdout_documents_go_to_the_holdout_shard(make_pipeline):
    ids = [f"doc-{i}" for i in range(40)]
    texts = [str(i) for i in range(40)]
    held = tz.holdout_mask(ids, texts, 0.3)
    assert 0 < held.sum() < 40
    with make_pipeline() as p:
        out = (p | beam.Create([doc_batch({"text": texts}, ids=ids)])
               | tokenize_documents(NULL, config(holdout_fraction=0.3)))
        assert_that(out["tokens"] | beam.Map(lambda tb: (tb.shard, tb.tokens.tolist(),
                                                          tb.num_bytes)), equal_to([
            ("holdout/web_text_document", [i for i in range(40) if held[i]], 0),
            ("web_text_document", [i for i in range(40) if not held[i]], 400)]))


def test_on_bad_record_fail_stops_with_file_and_line(make_pipeline):
    batch = doc_batch({"text": ["1", "x"]})
    with pytest.raises(Exception, match=r"/in/web.jsonl:2: the tokenizer failed"):
        with make_pipeline() as p:
            _ = p | beam.Create([batch]) | tokenize_documents(NULL, config(),
                                                                on_bad_record="fail")


def test_a_trained_tokenizer_gives_its_own_ids(hf_tokenizer, hf_encode, make_pipeline):
    tok, encode, eod = hf_encode
    texts = ["Hello, world!", "", "caf\u00e9 \U0001F600 \u4e2d\u6587", "  spaces  \n\tand tabs"]
    spec = TokenizerSpec(kind="HuggingFaceTokenizer", model=hf_tokenizer)
    expected = [i for t in texts if encode(t) for i in encode(t) + [eod]]
    with make_pipeline() as p:
        out = (p | beam.Create([doc_batch({"text": texts})])
               | tokenize_documents(spec, config(append_eod=True)))
        assert_that(out["tokens"] | beam.Map(lambda tb: (tb.tokens.tolist(),
                                                          tb.sequences_per_document.tolist())),
                    equal_to([(expected, [1, 0, 1, 1])]))


def test_tokenize_fn_loads_the_tokenizer_once_in_setup_and_ships_without_it(
        azure_storage_plan, ship, monkeypatch):
    from dataio import azure

    loads, adopted = [], []
    real_load = tz.load_tokenizer
    monkeypatch.setattr(tz, "load_tokenizer", lambda spec: loads.append(spec) or real_load(spec))
    monkeypatch.setattr(azure.state, "configure_worker", adopted.append)
    fn = tokenize_documents(NULL, config(append_eod=True), storage=azure_storage_plan)._fn
    assert set(vars(fn)) == {"_spec", "_config", "_storage", "_on_bad_record",
                            "_shard_names"}  # no tokenizer
    worker = ship(fn)
    assert loads == [] and adopted == []
    worker.setup()
    assert loads == [NULL] and adopted == [azure_storage_plan]
    assert worker._eod == EOD
    out = bundle(worker, *[doc_batch({"text": [str(i)]}, batch=i) for i in range(3)])
    assert [tb.tokens.tolist() for tb in out] == [[i, EOD] for i in range(3)]
    assert len(loads) == 1  # once per DoFn instance, not per batch
    assert worker._docs == 3 and worker._tokens == 6  # what it counts for the progress line


def _traced_bundle():
    """A started tokenize DoFn (NullTokenizer, EOD appended) whose encoder notes the thread
    of each call, and that list of threads."""
    import threading

    fn = tokenize_fn(NULL, config(append_eod=True))
    fn.setup()
    threads = []
    encode = fn._tok.encode_batch
    fn._tok.encode_batch = lambda texts: (threads.append(threading.current_thread()),
                                          encode(texts))[1]
    fn.start_bundle()
    return fn, threads


def _large(texts, batch):
    """A batch counted as INLINE_BYTES of input (a smaller one is encoded inline)."""
    return dataclasses.replace(doc_batch(texts, batch=batch), num_bytes=tz.INLINE_BYTES)


def test_a_batch_is_encoded_on_the_helper_thread_while_the_next_is_read():
    # Overlap: process() hands the batch to the helper thread and returns the previous batch's
    # outputs; finish_bundle() the last one's. Order, windows and counts are kept.
    import threading

    from apache_beam.utils.windowed_value import WindowedValue

    fn, threads = _traced_bundle()
    first = list(fn.process(_large({"text": ["1 2"]}, 0)))
    second = list(fn.process(_large({"text": ["3"]}, 1)))
    last = list(fn.finish_bundle())
    assert first == []  # still encoding
    assert [o.value.tokens.tolist() for o in second] == [[1, 2, EOD]]
    assert [o.value.tokens.tolist() for o in last] == [[3, EOD]]
    assert all(isinstance(o, WindowedValue) for o in second + last)
    assert threads and all(t is not threading.current_thread() for t in threads)
    fn.teardown()


def test_a_small_batch_is_encoded_inline_when_nothing_is_in_flight():
    # A batch of fewer than INLINE_BYTES (a corpus of small files) is not worth the hand-over:
    # with nothing on the helper it is encoded on the bundle's thread. Behind a batch still on
    # the helper it queues there, and comes out after that batch.
    import threading

    fn, threads = _traced_bundle()
    inline = list(fn.process(doc_batch({"text": ["0"]}, batch=0)))
    first = list(fn.process(_large({"text": ["1 2"]}, 1)))
    second = list(fn.process(doc_batch({"text": ["3"]}, batch=2)))
    last = list(fn.finish_bundle())
    assert [o.value.tokens.tolist() for o in inline] == [[0, EOD]]
    assert first == [] and [o.value.tokens.tolist() for o in second + last] == [[1, 2, EOD],
                                                                              [3, EOD]]
    assert threads[0] is threading.current_thread()
    assert all(t is not threading.current_thread() for t in threads[1:])
    fn.teardown()


def _marked(place, batch):
    """An item's end mark, as the reader sends it behind the item's last batch."""
    mark = ItemMark(None, place[1], "end")
    return DocumentBatch("doc", 0, batch, {"text": []}, [], 0, "/in/doc.jsonl", place=place,
                         mark=mark)


def test_an_items_mark_does_not_wait_for_its_last_batch():
    # The next item is read while the helper still encodes this item's last batch: process()
    # of the mark returns at once, and the mark still comes out after the batches it counts.
    import threading

    fn = tokenize_fn(NULL, config(append_eod=True))
    fn.setup()
    release = threading.Event()
    encode = fn._tok.encode_batch
    fn._tok.encode_batch = lambda texts: (release.wait(10), encode(texts))[1]
    fn.start_bundle()
    place = ("folder", "item-a")
    batch = dataclasses.replace(_large({"text": ["1 2"]}, 0), place=place)
    assert list(fn.process(batch)) == []
    assert list(fn.process(_marked(place, -1))) == []  # not blocked on the batch
    release.set()
    out = list(fn.process(_large({"text": ["3"]}, 0))) + list(fn.finish_bundle())
    values = [o.value for o in out]
    assert [v.tokens.tolist() for v in values] == [[1, 2, EOD], [], [3, EOD]]
    assert values[1].mark is not None and values[1].mark.token_batches == 1
    fn.teardown()


def test_a_failure_on_the_helper_thread_reaches_the_bundle():
    fn = tokenize_fn(NULL, config(), on_bad_record="fail")
    fn.setup()
    with pytest.raises(Exception, match="tokenizer failed on key 'text'"):
        bundle(fn, doc_batch({"text": ["1", "two"]}, batch=0), doc_batch({"text": ["3"]}, batch=1))
    assert bundle(fn, doc_batch({"text": ["4"]}, batch=2))[0].tokens.tolist() == [4]  # next bundle
    fn.teardown()


def test_reports_name_the_line_of_a_document_read_from_a_byte_range(tmp_path):
    # Ranges that do not start at byte 0 carry no line numbers; a report resolves it.
    path = tmp_path / "r.jsonl"
    path.write_bytes(b'{"text": "1"}\n{"text": "2"}\n{"text": "x"}\n')
    batch = DocumentBatch("r", 1, 0, {"text": ["2", "x"]}, [None, None], 20, str(path),
                          [None, None], [14, 28])
    fn = tokenize_fn(NULL, config())  # driven directly: the same DoFn the transform runs
    fn.setup()
    errors = [o.value for o in bundle(fn, batch) if isinstance(o, beam.pvalue.TaggedOutput)]
    assert [(stem, r.line, r.offset) for stem, r in errors] == [("r", 3, 28)]


def test_token_batch_order_and_counts():
    tb = TokenBatch(shard="s", item=3, batch=4, tokens=np.array([1, 2, 3]),
                       sequence_lengths=np.array([2, 1]),
                       sequences_per_document=np.array([1, 0, 1]), num_bytes=9)
    assert tb.order == (3, 4) and tb.documents == 3  # what the sink orders and counts by


def test_the_fast_backend_prepares_a_batch_on_the_bundles_thread(hf_tokenizer):
    # Routing and UTF-8 pieces are made on the bundle's thread before the hand-over; a batch
    # that cannot be prepared (a lone surrogate in a document, which only a text handed over
    # by hand holds) is left to the helper, whose per-document retry reports the document.
    spec = TokenizerSpec("HuggingFaceTokenizer", model=hf_tokenizer, backend="fast")
    fn = tokenize_fn(spec, config(append_eod=True))
    fn.setup()
    fn.start_bundle()
    good = _large({"text": ["one two", "three"]}, 0)
    prepared = fn._prepare(good)
    assert set(prepared) == {"text"} and prepared["text"].num_fast == 2
    bad = _large({"text": ["four", "lone \ud800 surrogate"]}, 1)
    assert fn._prepare(bad) is None
    lists = _large({"text": [["a", "b"], "c"]}, 2)
    assert fn._prepare(lists) is None  # pre-split documents: the helper does it all
    huge = dataclasses.replace(good, num_bytes=tz.PREPARED_BYTES + 1)
    assert fn._prepare(huge) is None  # a huge document's bytes are made call by call
    out = [o for b in (good, bad, lists) for o in fn.process(b)] + list(fn.finish_bundle())
    errors = [o.value.value for o in out if isinstance(o, beam.pvalue.TaggedOutput)]
    tokens = [o.value for o in out if not isinstance(o, beam.pvalue.TaggedOutput)]
    assert [(stem, r.line) for stem, r in errors] == [("web", 2)]
    assert [t.documents for t in tokens] == [2, 1, 2]
    ref = fn._tok.reference
    want = np.concatenate([ref.encode_batch(["one two", "three"])[0]])
    assert [i for i in tokens[0].tokens.tolist() if i != fn._eod] == want.tolist()
    fn.teardown()
