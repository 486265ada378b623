"""Bad records, pure parts: JSON nesting, dropping bad documents from a tokenized batch, the
per-document fallback of TokenizeDocuments, and punkt's boundary search in linear time."""

import json
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dataio import naming
from dataio.elements import WorkItem
from transforms import documents as docs
from transforms import tokenize as tz
from transforms.tokenize_config import TokenizeConfig
from transforms.tokenizer import TokenizerSpec
from dofn_bundle import bundle
from punkt_data import megatron_language_vars


# --- the parser --------------------------------------------------------------------------------

@pytest.mark.parametrize("line, reason", [
    (b"[" * 10_000 + b"]" * 10_000, "nested more than 1024 levels"),
    (b"[" * 10_000, "nested more than 1024 levels"),
    (b'{"text": "x", "meta": ' + b'{"a": ' * 3000 + b"0" + b"}" * 3000 + b"}",
     "nested more than 1024 levels"),
    (b'{"text": "x", "n": ' + b"1" * 5000 + b"}", "4300 digits"),
])
def test_records_that_break_the_parser_are_bad_records(line, reason):
    with pytest.raises(docs.BadRecord, match=reason):
        docs.parse_json_line(line, ["text"])


def test_nesting_megatron_reads_is_read_and_deeper_is_a_bad_record():
    # json.loads (Megatron's reader) stops near 1,000 levels: anything it reads is read here
    line = b'{"text": "x", "meta": ' + b"[" * 900 + b"]" * 900 + b"}"
    json.loads(line)
    assert docs.parse_json_line(line, ["text"]) == {"text": "x"}
    # within orjson's limit but with a NaN, which only the standard library reads: its
    # RecursionError is a bad record too
    line = b'{"text": "x", "n": NaN, "meta": ' + b"[" * 1020 + b"]" * 1020 + b"}"
    with pytest.raises(docs.BadRecord, match="nested too deeply"):
        docs.parse_json_line(line, ["text"])


# --- dropping documents ----------------------------------------------------------------------

# Lines of every kind read_documents meets: the usual record (its short way) and every other
# (parse_json_line's way), with and without the id key.
_LINES = [
    b'{"text": "plain", "id": 7}', b'{"text": "caf\xc3\xa9 \\n\\u00e9", "id": "a"}',
    b'{"text": ["pre", "split"], "id": 1}', b'{"text": 5}', b'{"other": "x"}', b'{"text": null}',
    b'not json', b'', b'   ', b'[1, 2]', b'"text"', b'{"text": "\\ud800"}',
    b'{"text": "x", "n": NaN}', b'{"text": "big", "n": 1' + b'0' * 30 + b'}',
    b'{"text": "bad \xff utf8"}', b'{"text": "a", "text": "b"}', b'{"text": "", "id": null}',
    b'{"text": "two", "title": "keys"}', b'{"title": "t", "text": ["x"]}',
]


def _one_by_one(lines, keys, id_key):
    """What read_documents gives, made a line at a time from parse_json_line (the long way)."""
    good, bad = [], []
    for n, line in enumerate(lines):
        try:
            texts = docs.parse_json_line(line, keys)
        except docs.BadRecord as exc:
            bad.append((n + 1, str(exc)))
            continue
        good.append((texts, docs._json_id(line, id_key) if id_key else None, n + 1))
    return good, bad


@settings(max_examples=150, deadline=None)
@given(st.lists(st.sampled_from(range(len(_LINES))), max_size=30),
       st.sampled_from([["text"], ["text", "title"]]), st.sampled_from([None, "id"]),
       st.integers(1, 5))
def test_the_short_way_reads_every_line_as_parse_json_line_does(tmp_path_factory, picks, keys,
                                                                 id_key, max_docs):
    lines = [_LINES[i] for i in picks]
    path = tmp_path_factory.mktemp("short") / "in.jsonl"
    path.write_bytes(b"".join(line + b"\n" for line in lines))
    item = WorkItem(path=str(path), stem="in", format="jsonl", index=0)
    good, bad = [], []
    for out in docs.read_documents(item, keys, id_key=id_key, max_docs=max_docs):
        if isinstance(out, docs.BadRecordReport):
            bad.append((out.line, out.reason))
            continue
        for d in range(len(out.ids)):
            good.append(({k: out.texts[k][d] for k in keys}, out.ids[d], out.lines[d]))
    assert (good, bad) == _one_by_one(lines, keys, id_key)


def test_drop_documents_keeps_the_others_in_order():
    # documents 0..3 with segments [2 ids], [] (none), [1 id, 3 ids], [1 id]
    ids = np.array([10, 11, 20, 21, 22, 23, 30])
    seg_lengths = np.array([2, 1, 3, 1])
    seg_doc = np.array([0, 2, 2, 3])
    keep = np.array([True, True, False, True])
    got_ids, got_lengths, got_doc = tz.drop_documents(ids, seg_lengths, seg_doc, keep)
    assert got_ids.tolist() == [10, 11, 30]
    assert got_lengths.tolist() == [2, 1]
    assert got_doc.tolist() == [0, 2]  # documents renumbered: 0, 1 (empty), 3 -> 2


# --- the tokenize step's per-document fallback ---------------------------------------------------

def _batch(tmp_path, texts):
    path = tmp_path / "d.jsonl"
    path.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
    item = WorkItem(path=str(path), stem="d", format="jsonl", index=0, start=0, end=None)
    [batch] = list(docs.read_documents(item, ["text"]))
    return batch


def _tokenize_fn(**config):
    cfg = TokenizeConfig(keys=("text",), append_eod=True, log_interval=0, **config)
    name = naming.base_name("d", "text", cfg.level)  # as the driver plans it
    fn = tz._TokenizeFn(TokenizerSpec("NullTokenizer", vocab_size=50), cfg,
                        shard_names={("d", "text", False): name,
                                     ("d", "text", True): f"holdout/{name}"})
    fn.setup()
    calls = []
    encode = fn._tok.encode_batch
    fn._tok.encode_batch = lambda texts: (calls.append(len(texts)), encode(texts))[1]
    return fn, calls


def test_only_a_batch_that_raises_is_redone_per_document(tmp_path):
    fn, calls = _tokenize_fn()
    [out] = bundle(fn, _batch(tmp_path, ["1 2", "3", "4 5 6"]))
    assert calls == [3]  # a good batch: one tokenizer call
    assert out.tokens.tolist() == [1, 2, 50, 3, 50, 4, 5, 6, 50]
    calls.clear()
    outs = bundle(fn, _batch(tmp_path, ["1 2", "3 three", "", "4 5 6"]))
    assert calls == [4, 1, 1, 1, 1]  # the batch, then each document on its own
    [error] = [o.value for o in outs if hasattr(o, "tag")]
    [tokens] = [o for o in outs if not hasattr(o, "tag")]
    stem, report = error
    assert (stem, report.line, report.offset) == ("d", 2, len('{"text": "1 2"}\n'))
    assert "ValueError" in report.reason and "three" in report.snippet
    assert tokens.tokens.tolist() == [1, 2, 50, 4, 5, 6, 50]
    assert tokens.sequences_per_document.tolist() == [1, 0, 1]  # the empty document stays


def test_a_batch_of_only_bad_documents_yields_no_tokens(tmp_path):
    fn, _ = _tokenize_fn()
    outs = bundle(fn, _batch(tmp_path, ["x", "y z"]))
    assert [o.value[1].line for o in outs] == [1, 2]


def test_on_bad_record_fail_raises_with_file_and_line(tmp_path):
    fn, _ = _tokenize_fn()
    fn._on_bad_record = "fail"
    with pytest.raises(docs.BadRecord, match=r"d\.jsonl:2: the tokenizer failed on key 'text'"):
        bundle(fn, _batch(tmp_path, ["1", "two"]))


# --- punkt's boundary search -------------------------------------------------------------------

punkt = pytest.importorskip("nltk.tokenize.punkt", reason="NLTK is not installed")


# Megatron-LM's CustomLanguageVars, compiled by NLTK itself: the pattern to be equal to
_MegatronLanguageVars = megatron_language_vars()


_ALPHABET = list("ab1.?!,;:-()\"'") + [" ", "  ", "\n", "\t", "\x1c", "\u00a0", "\u201d", "Mr",
                                       " The", "etc.", "\u3002"]


def _match_key(m):
    return m.span(), m.group("after_tok"), m.group("next_tok"), m.span("next_tok")


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(_ALPHABET), max_size=40))
def test_keep_newlines_boundary_search_gives_nltks_matches(pieces):
    from transforms import sentences

    text = "".join(pieces)
    fast = sentences._language_vars(keep_newlines=True)().period_context_re()
    nltk_own = _MegatronLanguageVars().period_context_re()
    assert [_match_key(m) for m in fast.finditer(text)] == \
        [_match_key(m) for m in nltk_own.finditer(text)]


def test_keep_newlines_sentences_equal_nltks():
    from transforms import sentences

    rng = random.Random(7)
    ours = punkt.PunktSentenceTokenizer(lang_vars=sentences._language_vars(keep_newlines=True)())
    theirs = punkt.PunktSentenceTokenizer(lang_vars=_MegatronLanguageVars())
    words = ["word", "Mr.", "etc.", "end.", "Why?", "Yes!", "(a.)", '"q."', "x.y", "--", "\n",
             "\n\n", "  ", "A", "The", "3.14", "\x1c", "aaaa" * 20]
    for _ in range(300):
        text = " ".join(rng.choice(words) for _ in range(rng.randrange(30)))
        assert ours.tokenize(text) == theirs.tokenize(text), text
