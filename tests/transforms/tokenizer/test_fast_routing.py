"""The fast backend on SentencePiece BPE models: texts it would get wrong go to the reference.

The routed encoder (gigatoken, with the texts ``FastRouting`` flags sent to sentencepiece) must
give exactly the reference's ids on the adversarial suite and on every code point
U+0000-U+10FFFF (surrogates excepted) in several contexts: alone (a text's start and end),
between spaces, inside a word, repeated, after a character the charsmap rewrites, before a
combining mark and around line breaks. Code points are batched into documents so that both
libraries see a few thousand texts per context, not a million.
"""

import io
import json
import os

import numpy as np
import pytest

from pipelines import demo
from transforms import tokenizer as tk
from transforms.tokenizer import check, fast

pytest.importorskip("gigatoken", reason="gigatoken (extra 'fast') is not installed")


@pytest.fixture(autouse=True)
def _cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


def _train(tmp_path, name, **options):
    import sentencepiece as spm

    texts = [d["text"] for d in demo.documents(3, 600) if d["text"]]
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(texts), model_writer=model, vocab_size=1000, model_type="bpe",
        byte_fallback=True, character_coverage=1.0, bos_id=1, eos_id=2, unk_id=0, pad_id=-1,
        minloglevel=2, num_threads=2, **options)
    path = tmp_path / f"{name}.model"
    path.write_bytes(model.getvalue())
    return str(path)


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """nmt_nfkc (SentencePiece's default: a charsmap with multi-character rules, extra
    whitespace removed) and identity normalisation with extra whitespace removed (Llama-style
    pieces, where "\\t" alone differs)."""
    tmp = tmp_path_factory.mktemp("spm")
    return {"nmt_nfkc": _train(tmp, "nmt"),
            "identity": _train(tmp, "identity", normalization_rule_name="identity",
                               split_digits=True, allow_whitespace_only_pieces=True)}


def _both(model):
    spec = tk.TokenizerSpec("SentencePieceTokenizer", model=model)
    ref = tk.load_tokenizer(spec)
    return tk.FastTokenizer(ref, spec), ref


def _differences(fast, ref, texts):
    got_ids, got_len = fast.encode_batch(texts)
    want_ids, want_len = ref.encode_batch(texts)
    if np.array_equal(got_len, want_len) and np.array_equal(got_ids.astype(np.int64),
                                                            want_ids.astype(np.int64)):
        return []
    got_at = np.concatenate([[0], np.cumsum(got_len)])
    want_at = np.concatenate([[0], np.cumsum(want_len)])
    return [texts[i] for i in range(len(texts))
            if got_ids[got_at[i]:got_at[i + 1]].tolist()
            != want_ids[want_at[i]:want_at[i + 1]].tolist()]


def test_characterisation(models):
    """What each model's routing flags, from its normaliser spec (see transforms.tokenizer)."""
    nmt = tk.sentencepiece_routing(open(models["nmt_nfkc"], "rb").read())
    ident = tk.sentencepiece_routing(open(models["identity"], "rb").read())
    assert nmt.edge == {"\x85"}  # nmt_nfkc turns every other White_Space character into " "
    assert ident.edge >= set("\t\n\v\f\r\x85\xa0\u3000\u2581")
    for text in ("\uff76\uff9e", "\u1100\u1161", "\uff21\u0301", "a </s> b", "\x85x"):
        assert nmt.needs_reference(text), text
    for text in ("\tindented", "line\n", "\u3000x"):
        assert ident.needs_reference(text) and not nmt.needs_reference(text), text
    for text in ("a\tb", "caf\u00e9 na\u00efve", "\u0915\u093e", "\ud55c\uad6d\uc5b4", "x\r\ny",
                 "\U0001F469\u200d\U0001F469"):
        assert not nmt.needs_reference(text), text
        assert not ident.needs_reference(text), text


def test_adversarial_and_corpus(models, tmp_path):
    texts = tk.ADVERSARIAL + tk.ROUTING_PROBES + [d["text"] for d in demo.documents(21, 600)]
    for name, model in models.items():
        fast, ref = _both(model)
        assert _differences(fast, ref, texts) == [], name
        spec = tk.TokenizerSpec("SentencePieceTokenizer", model=model, backend="auto")
        assert tk.choose_backend(spec, texts[-50:])[0] == "fast", name


def test_routed_counts_and_bos(models):
    spec = tk.TokenizerSpec("Llama2Tokenizer", model=models["identity"], add_special_tokens=True)
    ref = tk.load_tokenizer(spec)
    fast = tk.FastTokenizer(ref, spec)
    texts = ["plain text", "\tindented", "", "ends with a newline\n", "more plain text"]
    assert _differences(fast, ref, texts) == []
    assert fast.last_routed() == 2
    fast.encode_batch(["nothing to route"])
    assert fast.last_routed() == 0


def test_self_check_cache(models, monkeypatch):
    spec = tk.TokenizerSpec("SentencePieceTokenizer", model=models["nmt_nfkc"], backend="auto")
    backend, why = tk.choose_backend(spec, ["a sample"])
    assert backend == "fast" and "cached" not in why
    path = tk.check_cache_path()
    assert path.startswith(os.environ["XDG_CACHE_HOME"])
    with open(path, encoding="utf-8") as f:
        assert [e["backend"] for e in json.load(f).values()] == ["fast"]

    def no_check(*args, **kwargs):
        raise AssertionError("the self-check ran again")

    monkeypatch.setattr(check, "_check_fast", no_check)
    backend, why = tk.choose_backend(spec, ["another sample"])
    assert backend == "fast" and "cached" in why
    monkeypatch.undo()
    monkeypatch.setenv("XDG_CACHE_HOME", os.path.dirname(os.path.dirname(path)))
    with open(path, "w", encoding="utf-8") as f:
        f.write("{not json")
    backend, why = tk.choose_backend(spec, ["a sample"])
    assert backend == "fast" and "cached" not in why  # corrupt: checked again, rewritten
    with open(path, encoding="utf-8") as f:
        assert len(json.load(f)) == 1


def test_unigram_has_no_fast_backend_and_is_cached_so(tmp_path):
    model = demo.train_sentencepiece([d["text"] for d in demo.documents(4, 400) if d["text"]],
                                     str(tmp_path / "uni"), vocab_size=600, model_type="unigram")
    spec = tk.TokenizerSpec("SentencePieceTokenizer", model=model, backend="auto")
    for _ in range(2):
        backend, why = tk.choose_backend(spec, ["x"])
        assert backend == "reference" and "BPE" in why


def test_gigatoken_conversion_is_cached_and_a_damaged_cache_is_rewritten(models, tmp_path,
                                                                          monkeypatch):
    # The .model -> gigatoken JSON conversion is kept in the cache folder; a damaged file there
    # is converted again, and the ids stay gigatoken's own.
    import glob

    import gigatoken

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    proto = open(models["nmt_nfkc"], "rb").read()
    direct = gigatoken.Tokenizer.from_sentencepiece(proto)
    texts = ["Hello world", "  two  spaces ", "日本語のテキスト", "\x01 control"]
    want = direct.encode_batch_list(texts)
    assert fast.gigatoken_from_sentencepiece(proto).encode_batch_list(texts) == want
    [cached] = glob.glob(str(tmp_path / "xdg" / "tokenbeam" / "gigatoken" / "*.json"))
    assert fast.gigatoken_from_sentencepiece(proto).encode_batch_list(texts) == want
    with open(cached, "wb") as f:
        f.write(b'{"not": "a tokenizer"')
    assert fast.gigatoken_from_sentencepiece(proto).encode_batch_list(texts) == want
    assert gigatoken.Tokenizer.from_json(open(cached, "rb").read()).encode_batch_list(texts) == want


def test_texts_prepared_on_another_thread_give_the_same_ids(models):
    # The tokenize step prepares a batch (routing, UTF-8 pieces) on the bundle's thread and
    # encodes it on its helper: the ids are the reference's, routed texts and a long text (a
    # SentencePiece text is never cut) among them, and the routed count is the helper's call's.
    import threading

    from transforms.tokenizer.base import LONG_TEXT

    fast, ref = _both(models["identity"])
    long_text = " ".join(f"word{i} العربية 中文" for i in range(LONG_TEXT // 8))
    texts = ["plain text", "\tindented", "", long_text, "ends with a newline\n", "é" * 40]
    prepared = fast.prepare(texts)
    assert prepared.mask.tolist() == [False, True, False, False, True, False]
    assert len(prepared.pieces) == prepared.num_fast == 4
    assert all(isinstance(piece, bytes) for _, piece in prepared.pieces)
    out = {}

    def helper():
        out["ids"], out["lengths"] = fast.encode_batch(texts, prepared=prepared)
        out["routed"] = fast.last_routed()

    thread = threading.Thread(target=helper)
    thread.start()
    thread.join()
    want_ids, want_lengths = ref.encode_batch(texts)
    assert out["lengths"].tolist() == want_lengths.tolist()
    assert np.asarray(out["ids"], np.int64).tolist() == np.asarray(want_ids, np.int64).tolist()
    assert out["routed"] == 2
    unprepared_ids, _ = fast.encode_batch(texts)
    assert unprepared_ids.tolist() == out["ids"].tolist()


def test_a_text_that_is_not_valid_unicode_cannot_be_prepared(models):
    fast, _ = _both(models["identity"])
    with pytest.raises(UnicodeEncodeError):
        fast.prepare(["fine", "lone \ud800 surrogate"])


@pytest.mark.parametrize("literals", [("<s>", "</s>"), ("▁▁", "é<", "<unk>"), ("中文",)])
def test_literals_found_in_utf8_bytes_as_in_the_text(literals):
    # Routing searches the literals in the texts' UTF-8 bytes when it has them: the same texts.
    from transforms.tokenizer.routing import FastRouting

    routing = FastRouting(literals=literals)
    texts = ["", "plain", "<s", "a</s>", "<s>", "x<unk", "<unk>x", "▁", "▁▁ lead", "é<z",
             "e<", "中", "中文", "文中文", "\U0001F600<s>", "<\u0301s>", "s>", "<" * 50]
    utf8 = [t.encode() for t in texts]
    assert routing.mask(texts, utf8=utf8).tolist() == routing.mask(texts).tolist()
    assert any(routing.mask(texts).tolist())
