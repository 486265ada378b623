"""Huge documents: tokenized in pieces cut only where the byte-level BPE's pre-tokenizer splits
anyway, so the ids equal those of the whole text in one call; and read without extra copies."""

import io
import json
import os
import random

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dataio import readers
from transforms import tokenizer as tk
from transforms.tokenizer import base


def _train(folder, *, add_prefix_space=False):
    """A tiny GPT-2-style byte-level BPE, trained here on text full of the cases below."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=add_prefix_space)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=600, special_tokens=["<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    rng = random.Random(0)
    tok.train_from_iterator([_adversarial(rng, 400) for _ in range(200)], trainer=trainer)
    os.makedirs(folder, exist_ok=True)
    tok.save(os.path.join(folder, "tokenizer.json"))
    return str(folder)


ATOMS = ["the", " the", "don't", "it's", "we'll", "they're", "I'm", "you've", "he'd", "'s", "'",
         "x" * 3000, "9" * 500, "3.14", "1,000", " ", "  ", "   ", "\n", "\n\n", "\t", " \n ",
         "\r\n", "Straße", "naïve", "e\u0301", "你好，世界。", "日本語のテキスト、カタカナ！",
         "한국어", "👩‍👩‍👧‍👦", "🙂", "\u00a0", "\u3000", "\u2028", "\u0085", ".", "...", "!?",
         "a.b", "x,y", "<|endoftext|>", "(", ")", "#", "  leading", "trailing  ", "’s"]


def _adversarial(rng, n):
    return "".join(rng.choice(ATOMS) + rng.choice(["", " ", "", "\n", ".", "  "])
                   for _ in range(n))


def _whole(tok, text):
    """The reference: the whole text in one call, as Megatron's encode does."""
    return list(tok.backend.encode(text, add_special_tokens=False).ids)


@pytest.fixture(scope="module")
def bpe(tmp_path_factory):
    return _train(tmp_path_factory.mktemp("bpe") / "tok")


@pytest.fixture(scope="module")
def texts():
    rng = random.Random(12)
    return [
        _adversarial(rng, 3000),
        "x" * 20_000 + " " + "y" * 20_000,  # long runs without spaces
        ("word " * 4000) + ("  " * 3000) + ("a  b   c\t\td " * 500),  # many spaces
        "\n".join(["line"] * 5000) + "\n\n\n" + " \n" * 2000,  # newlines
        " ".join(str(rng.randint(0, 10**9)) for _ in range(5000)),  # digits
        "".join(rng.choice(["你好，世界。", "日本語のテキスト、カタカナ！", "한국어 텍스트.",
                            "Москва ёжик. ", "👍🏽🇩🇪 ", "e\u0301.a"]) for _ in range(4000)),
        " ".join(rng.choice(["don't", "it's", "'s", "'ll", "we've", "'", "’re"])
                 for _ in range(6000)),  # contractions
        "<|endoftext|> a " * 3000 + "a<|endoftext|>b " * 2000,
    ]


def _check(tok, text, chunk):
    pieces = tk.split_long_text(text, tok.cuts, chunk=chunk)
    assert "".join(pieces) == text
    got = [i for p in pieces for i in _whole(tok, p)]
    assert got == _whole(tok, text)
    return pieces


@pytest.mark.parametrize("chunk", [7, 64, 1000])
def test_pieces_give_the_ids_of_the_whole_text(bpe, texts, chunk):
    tok = tk.load_tokenizer(tk.TokenizerSpec("HuggingFaceTokenizer", model=bpe))
    assert tok.cuts is tk.SPACE_AND_PUNCT_CUTS
    cut = sum(len(_check(tok, text, chunk)) > 1 for text in texts)
    assert cut >= 6  # the cases with spaces or punctuation are really cut


def test_add_prefix_space_cuts_only_at_spaces(tmp_path, texts):
    tok = tk.load_tokenizer(tk.TokenizerSpec(
        "HuggingFaceTokenizer", model=_train(tmp_path / "tok", add_prefix_space=True)))
    assert tok.cuts is tk.SPACE_CUTS
    for text in texts:
        _check(tok, text, 50)
    # a cut after punctuation would give the piece "b" a prefix space: not taken
    text = "a." * 100 + "b" * 300
    assert tk.split_long_text(text, tok.cuts, chunk=20) == [text]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(st.sampled_from(ATOMS), st.text(max_size=6)), max_size=80),
       st.integers(1, 40))
def test_any_text_cut_anywhere_allowed_gives_the_same_ids(bpe, parts, chunk):
    tok = tk.load_tokenizer(tk.TokenizerSpec("HuggingFaceTokenizer", model=bpe))
    text = "".join(parts)
    try:
        want = _whole(tok, text)
    except Exception:  # lone surrogates: the tokenizer refuses the text itself
        return
    # every allowed point at once, not only those chunk apart
    cuts = [0] + [m.start() for m in tok.cuts.finditer(text) if m.start() > 0] + [len(text)]
    assert [i for a, b in zip(cuts, cuts[1:]) for i in _whole(tok, text[a:b])] == want
    assert [i for p in tk.split_long_text(text, tok.cuts, chunk=chunk)
            for i in _whole(tok, p)] == want


@pytest.mark.parametrize("config, cuts", [
    ({}, "SPACE_AND_PUNCT_CUTS"),
    ({"normalizer": {"type": "NFC"}}, None),
    ({"truncation": {"max_length": 512}}, None),
    ({"pre_tokenizer": {"type": "ByteLevel", "use_regex": False}}, None),
    ({"pre_tokenizer": {"type": "Metaspace"}}, None),
    ({"pre_tokenizer": {"type": "Sequence", "pretokenizers": []}}, None),
    ({"model": {"type": "BPE", "dropout": 0.1}}, None),
    ({"model": {"type": "Unigram"}}, None),
    ({"added_tokens": [{"content": "<a b>", "rstrip": False}]}, None),
    ({"added_tokens": [{"content": "<mask>", "rstrip": True}]}, None),
    ({"added_tokens": [{"content": "<mask>", "lstrip": True, "rstrip": False}]},
     "SPACE_AND_PUNCT_CUTS"),
    ({"added_tokens": [{"content": "etc.", "single_word": True}]}, "SPACE_CUTS"),
    ({"pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": True, "use_regex": True}},
     "SPACE_CUTS"),
])
def test_only_proven_configurations_are_cut(config, cuts):
    base = {"normalizer": None, "truncation": None, "padding": None, "added_tokens": [],
            "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "use_regex": True},
            "model": {"type": "BPE", "dropout": None}}
    assert tk.cut_pattern({**base, **config}) is (getattr(tk, cuts) if cuts else None)


def test_rstrip_added_token_would_change_ids(tmp_path):
    """Why an rstrip added token disables cutting: the whole text and the pieces differ."""
    from tokenizers import AddedToken, Tokenizer

    folder = _train(tmp_path / "tok")
    tok = Tokenizer.from_file(os.path.join(folder, "tokenizer.json"))
    tok.add_tokens([AddedToken("<m>", rstrip=True)])
    text = "a<m> b"
    pieces = tk.split_long_text(text, tk.SPACE_AND_PUNCT_CUTS, chunk=1)
    assert pieces == ["a<m>", " b"]
    assert [i for p in pieces for i in tok.encode(p).ids] != tok.encode(text).ids
    tok.save(os.path.join(folder, "tokenizer.json"))
    loaded = tk.load_tokenizer(tk.TokenizerSpec("HuggingFaceTokenizer", model=folder))
    assert loaded.cuts is None


@pytest.mark.parametrize("backend", ["reference", "fast"])
def test_encode_batch_of_huge_texts_equals_whole(bpe, texts, monkeypatch, backend):
    if backend == "fast":
        pytest.importorskip("gigatoken")
    tok = tk.load_tokenizer(tk.TokenizerSpec("HuggingFaceTokenizer", model=bpe, backend=backend))
    batch = ["short", *texts, "", texts[0][:999]]
    want = [_whole(tok.reference if backend == "fast" else tok, t) for t in batch]
    monkeypatch.setattr(base, "LONG_TEXT", 500)  # cut every long text, many calls
    monkeypatch.setattr(base, "CALL_CHARS", 3000)
    monkeypatch.setattr(base, "FAST_CALL_CHARS", 3000)
    calls = []
    encode_flat = tok._encode_flat
    monkeypatch.setattr(tok, "_encode_flat", lambda c: calls.append(sum(map(len, c))) or
                        encode_flat(c))
    ids, lengths = tok.encode_batch(batch)
    assert lengths.tolist() == [len(w) for w in want]
    assert ids.tolist() == [i for w in want for i in w]
    assert ids.dtype == np.uint16  # vocabulary of 600: the ids take 2 bytes
    assert len(calls) > 100
    # a call holds at most CALL_CHARS characters, unless one piece is longer (no cut point)
    assert max(calls) <= 3000 or max(calls) <= max(
        len(p) for t in batch for p in tk.split_long_text(t, tok.cuts, chunk=500))


def test_sentencepiece_and_unproven_tokenizers_are_encoded_whole(tmp_path, monkeypatch):
    from tokenizers import Tokenizer, normalizers

    folder = _train(tmp_path / "tok")
    tok = Tokenizer.from_file(os.path.join(folder, "tokenizer.json"))
    tok.normalizer = normalizers.NFC()
    tok.save(os.path.join(folder, "tokenizer.json"))
    loaded = tk.load_tokenizer(tk.TokenizerSpec("HuggingFaceTokenizer", model=folder))
    assert loaded.cuts is None
    monkeypatch.setattr(base, "LONG_TEXT", 10)
    calls = []
    encode_flat = loaded._encode_flat
    monkeypatch.setattr(loaded, "_encode_flat", lambda c: calls.append(list(c)) or encode_flat(c))
    text = "word " * 100
    ids, _ = loaded.encode_batch([text])
    assert calls == [[text]] and ids.tolist() == _whole(loaded, text)


def test_self_check_samples_only_the_start_of_a_huge_document(bpe, monkeypatch):
    ref = tk.load_tokenizer(tk.TokenizerSpec("HuggingFaceTokenizer", model=bpe))
    seen = []
    monkeypatch.setattr(ref, "_encode_flat", lambda c: seen.extend(map(len, c)) or
                        tk.Tokenizer._encode_flat(ref, c))
    assert tk.self_check(ref, ref, ["word " * 1_000_000]) is None
    assert max(seen) <= tk.SAMPLE_CHARS


# --- reading a line far longer than a block ----------------------------------------------------

@settings(max_examples=200, deadline=None)
# (a CR ends a line too: test_tokenize_units.py checks CR, CR LF and mixed line ends)
@given(st.lists(st.binary(max_size=60).map(lambda b: b.replace(b"\n", b"").replace(b"\r", b"")),
                max_size=12),
       st.booleans(), st.integers(1, 40), st.integers(0, 200))
def test_split_lines_matches_a_plain_split(lines, final_newline, block, end):
    data = b"\n".join(lines) + (b"\n" if final_newline and lines else b"")
    old = readers._BLOCK
    readers._BLOCK = block
    try:
        got = [(r.data, r.line, r.offset)
               for r in readers._split_lines(io.BytesIO(data), base=0, end=None, first_line=1)]
        ranged = [(r.data, r.offset) for r in readers._split_lines(
            io.BytesIO(data), base=0, end=end, first_line=1)]
    finally:
        readers._BLOCK = old
    want, offset = [], 0
    parts = data.split(b"\n")
    if parts and parts[-1] == b"":
        parts.pop()
    for n, part in enumerate(parts):
        want.append((part, n + 1, offset))
        offset += len(part) + 1
    assert got == want
    assert ranged == [(d, o) for d, _, o in want if o < end]


def test_a_huge_line_is_joined_once_and_not_kept(monkeypatch):
    """The line of one huge document: its blocks joined once (peak about twice the line, where
    `join + block` and `split` copies made it four times), and the reader keeps no reference to
    it once it is yielded (so it is freed as soon as the caller drops it)."""
    import sys
    import tracemalloc

    monkeypatch.setattr(readers, "_BLOCK", 1 << 16)
    doc = json.dumps({"text": "word " * 400_000}).encode()  # 2 MB, 31 blocks
    data = b'{"text": "a"}\n' + doc + b"\n" + b'{"text": "b"}'
    records = readers._split_lines(io.BytesIO(data), base=0, end=None, first_line=1)
    assert next(records).data == b'{"text": "a"}'
    tracemalloc.start()
    try:
        huge = next(records)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert huge.data == doc and huge.offset == 14 and huge.line == 2
    assert peak < 2.5 * len(doc), peak / len(doc)
    refs = sys.getrefcount(huge.data)  # outside `assert`: pytest's rewriting holds values
    assert refs == 2  # the record's, and getrefcount's argument
    last = next(records)
    assert last.data == b'{"text": "b"}' and last.line == 3 and last.offset == 15 + len(doc)


def test_added_token_with_punctuation_disables_punctuation_cuts(tmp_path):
    """Why: an added token ``etc.`` (single_word) matches at a piece's end but not before a
    letter in the whole text, so a cut after its ``.`` would change the ids."""
    from tokenizers import AddedToken, Tokenizer

    folder = _train(tmp_path / "tok")
    tok = Tokenizer.from_file(os.path.join(folder, "tokenizer.json"))
    tok.add_tokens([AddedToken("etc.", single_word=True)])
    text = "see etc.and more"
    pieces = tk.split_long_text(text, tk.SPACE_AND_PUNCT_CUTS, chunk=1)
    assert [i for p in pieces for i in tok.encode(p).ids] != tok.encode(text).ids
    tok.save(os.path.join(folder, "tokenizer.json"))
    loaded = tk.load_tokenizer(tk.TokenizerSpec("HuggingFaceTokenizer", model=folder))
    assert loaded.cuts is tk.SPACE_CUTS
    pieces = tk.split_long_text(text, loaded.cuts, chunk=1)
    assert [i for p in pieces for i in tok.encode(p).ids] == tok.encode(text).ids
