"""The fast (gigatoken) backend: identical ids to the reference, or not used at all."""

import json
import platform

import numpy as np
import pytest

from pipelines import demo
from transforms import tokenizer as tk

pytest.importorskip("gigatoken", reason="gigatoken (extra 'fast') is not installed")

EXTRA = [
    json.loads('"lone \\ud800 surrogate escaped in JSON"').encode("utf-8", "surrogatepass")
    .decode("utf-8", "replace"),  # what survives of it as valid text
    "word" * 4000, "\t\t\t\tindented\n" * 50, "ZWJ 👨‍👩‍👧 family 🧑🏿‍🚀 astronaut",
    "mixed العربية and English and 中文 in one line", "\x0b\x0c\x1c\x1d\x1e\x1f",
]


def _texts():
    return tk.ADVERSARIAL + EXTRA + [d["text"] for d in demo.documents(11, 400)]


def _both(spec):
    ref = tk.load_tokenizer(spec)
    return tk.FastTokenizer(ref, spec), ref


def _assert_same(fast, ref, texts):
    got_ids, got_len = fast.encode_batch(texts)
    want_ids, want_len = ref.encode_batch(texts)
    assert got_len.tolist() == want_len.tolist()
    assert np.asarray(got_ids, dtype=np.int64).tolist() == np.asarray(want_ids).tolist()


def test_hf_byte_level_bpe_identical(hf_tokenizer):
    fast, ref = _both(tk.TokenizerSpec("HuggingFaceTokenizer", model=hf_tokenizer))
    _assert_same(fast, ref, _texts())
    assert tk.self_check(fast, ref, ["sample"]) is None


def test_sentencepiece_bpe_byte_fallback(tmp_path):
    """gigatoken matches SentencePiece on ordinary multilingual text; the texts it gets wrong
    (0.10.0: U+0085 at an edge, multi-character charsmap rules, ...; see
    tests/transforms/test_fast_routing.py) are routed to the reference, so auto picks fast and
    the routed encoder is exact on everything."""
    model = demo.train_sentencepiece([d["text"] for d in demo.documents(3, 800) if d["text"]],
                                     str(tmp_path / "sp"), vocab_size=1200)
    spec = tk.TokenizerSpec("SentencePieceTokenizer", model=model)
    fast, ref = _both(spec)
    ordinary = [d["text"] for d in demo.documents(12, 400)] + tk.ADVERSARIAL[:19]
    _assert_same(fast, ref, ordinary)
    backend, why = tk.choose_backend(dataclass_replace(spec, backend="auto"), ["x y"])
    if backend == "fast":
        _assert_same(fast, ref, _texts())
    else:
        assert "self-check found different ids" in why


def test_auto_falls_back_for_unsupported_models(tmp_path):
    model = demo.train_sentencepiece([d["text"] for d in demo.documents(4, 800) if d["text"]],
                                     str(tmp_path / "uni"), vocab_size=1200, model_type="unigram")
    spec = tk.TokenizerSpec("SentencePieceTokenizer", model=model, backend="auto")
    backend, why = tk.choose_backend(spec, ["some text"])
    if backend == "fast":  # supported after all: then it must be exact
        fast, ref = _both(spec)
        _assert_same(fast, ref, _texts())
    else:
        assert why and backend == "reference"
        with pytest.raises(tk.TokenizerConfigError, match="--tokenizer-backend fast"):
            tk.choose_backend(dataclass_replace(spec, backend="fast"), ["some text"])


def test_self_check_catches_a_difference(hf_tokenizer):
    spec = tk.TokenizerSpec("HuggingFaceTokenizer", model=hf_tokenizer)
    fast, ref = _both(spec)

    class OffByOne(tk.Tokenizer):
        def _encode_plain(self, texts):
            return [[i + 1 for i in ids] for ids in ref._encode_plain(texts)]

    assert "fast" in tk.self_check(OffByOne(), ref, ["abc"])


def test_null_and_special_tokens_use_reference(hf_tokenizer):
    assert tk.choose_backend(tk.TokenizerSpec("NullTokenizer", vocab_size=10, backend="auto"),
                             [])[0] == "reference"
    spec = tk.TokenizerSpec("HuggingFaceTokenizer", model=hf_tokenizer, add_special_tokens=True,
                            backend="auto")
    # not gigatoken; the folder's own tokenizers.Tokenizer where it gives transformers' ids
    assert tk.choose_backend(spec, [])[0] == "tokenizers"


def dataclass_replace(spec, **kw):
    import dataclasses

    return dataclasses.replace(spec, **kw)


def test_a_few_texts_encoded_one_by_one_equal_the_batch_call(hf_tokenizer):
    """Calls of at most FEW_TEXTS texts (a corpus of small files) skip gigatoken's batch call;
    the ids are the reference's either way, at the size where the path changes too."""
    from transforms.tokenizer import fast as fast_module

    fast, ref = _both(tk.TokenizerSpec("HuggingFaceTokenizer", model=hf_tokenizer))
    texts = _texts()
    for size in (1, 2, fast_module.FEW_TEXTS, fast_module.FEW_TEXTS + 1):
        for start in range(0, 60, size):
            _assert_same(fast, ref, texts[start:start + size])
    _assert_same(fast, ref, [])


def test_the_driver_keeps_what_transformers_resolved_and_loads_it_no_more(hf_tokenizer, tmp_path,
                                                                            monkeypatch):
    """for_workers keeps the resolved HuggingFace tokenizer in the cache folder (keyed as the
    self-check's verdict): a later run's driver builds its backend from it without transformers;
    a damaged record is resolved again and rewritten."""
    from transforms.tokenizer import check, load

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    spec = tk.TokenizerSpec("HuggingFaceTokenizer", model=hf_tokenizer, backend="fast")
    first = tk.for_workers(spec)
    assert first.resolved is not None
    record, = (tmp_path / "tokenbeam" / "hf-resolved").glob("*.json")

    def no_load(*args, **kwargs):
        raise AssertionError("the reference was loaded again")

    monkeypatch.setattr(load, "for_workers", no_load)
    assert tk.for_workers(spec).resolved == first.resolved
    monkeypatch.undo()
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    record.write_text('{"tokenizer_json": "not base64!"}')
    assert check.for_workers(spec).resolved == first.resolved
    assert tk.for_workers(spec).resolved == first.resolved  # rewritten whole
    assert "not base64" not in record.read_text()


def test_a_long_text_prepared_is_cut_into_pieces_and_gives_the_same_ids(hf_tokenizer):
    from transforms.tokenizer.base import LONG_TEXT

    fast, ref = _both(tk.TokenizerSpec("HuggingFaceTokenizer", model=hf_tokenizer))
    long_text = " ".join(f"word{i} العربية 中文 😀" for i in range(LONG_TEXT // 4))
    texts = ["short", long_text, "", "mixed العربية"]
    prepared = fast.prepare(texts)
    assert prepared.mask is None and prepared.num_fast == 4
    owners = [owner for owner, _ in prepared.pieces]
    assert owners.count(1) > 1 and owners == sorted(owners)  # cut, in order
    assert b"".join(p for o, p in prepared.pieces if o == 1) == long_text.encode()
    lazy = fast.prepare(texts, lazy=True)
    assert not isinstance(lazy.pieces, list)  # sliced and encoded as the calls come
    want_ids, want_lengths = ref.encode_batch(texts)
    for given in (prepared, lazy, None):
        ids, lengths = fast.encode_batch(texts, prepared=given)
        assert lengths.tolist() == want_lengths.tolist()
        assert np.asarray(ids, np.int64).tolist() == np.asarray(want_ids, np.int64).tolist()


def test_the_gigatoken_tokenizer_is_made_again_after_refresh_bytes(hf_tokenizer, monkeypatch):
    """Its word caches grow with every new word for the tokenizer's lifetime: after
    REFRESH_BYTES of text a new one takes over and the memory the old one's caches held is
    handed back (memory stays flat in a long run), and the ids stay the reference's across
    the change."""
    from transforms.tokenizer import fast as fast_module

    fast, ref = _both(tk.TokenizerSpec("HuggingFaceTokenizer", model=hf_tokenizer))
    texts = [d["text"] for d in demo.documents(5, 200)]
    size = sum(len(t.encode("utf-8")) for t in texts)  # gigatoken is given UTF-8 bytes
    monkeypatch.setattr(fast_module, "REFRESH_BYTES", size * 2 + 1)
    trims = []
    monkeypatch.setattr(fast_module, "_malloc_trim", trims.append)
    first = fast._g
    _assert_same(fast, ref, texts)
    _assert_same(fast, ref, texts)
    assert fast._g is first and trims == []  # 2 * size: not yet
    _assert_same(fast, ref, texts)
    assert fast._g is not first and fast._since_new == 0 and trims == [0]
    _assert_same(fast, ref, texts)  # the new one, cold, gives the same ids
    assert fast._since_new == size


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc",
                    reason="malloc_trim is glibc's; another C library keeps its free memory")
def test_the_memory_of_a_renewed_tokenizer_can_be_handed_back_on_glibc():
    from transforms.tokenizer import fast as fast_module

    assert fast_module._malloc_trim is not None
    assert fast_module._malloc_trim(0) in (0, 1)  # 1: some memory was handed back


def test_a_sentencepiece_gigatoken_tokenizer_is_kept(tmp_path, monkeypatch):
    """Its memory stays flat without a new instance (and one every REFRESH_BYTES raised it)."""
    from transforms.tokenizer import fast as fast_module

    texts = [d["text"] for d in demo.documents(3, 300) if d["text"]]
    model = demo.train_sentencepiece(texts, str(tmp_path / "sp"), vocab_size=1000)
    fast, ref = _both(tk.TokenizerSpec("SentencePieceTokenizer", model=model))
    monkeypatch.setattr(fast_module, "REFRESH_BYTES", 1)
    first = fast._g
    _assert_same(fast, ref, texts)
    _assert_same(fast, ref, texts)
    assert fast._g is first
