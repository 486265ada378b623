"""Tokenizer layer: long texts cut into pieces give exactly the ids of the whole text."""

import os

import numpy as np
import pytest

from pipelines import demo
from transforms import tokenizer as tk
from transforms.tokenizer import base


@pytest.fixture(scope="module")
def long_text():
    docs = [d["text"] for d in demo.documents(5, 600)]
    return "\n\n".join(docs) + "  trailing  spaces\t\t and  runs   of   blanks " * 50


def test_hf_pieces_equal_whole(hf_tokenizer, long_text):
    tok = tk.load_tokenizer(tk.TokenizerSpec("HuggingFaceTokenizer", model=hf_tokenizer))
    assert tok.cuts is tk.SPACE_AND_PUNCT_CUTS
    pieces = tk.split_long_text(long_text, tok.cuts, chunk=5000)
    assert len(pieces) > 10 and "".join(pieces) == long_text
    whole = tok._encode_one(long_text)
    assert [i for p in pieces for i in tok._encode_one(p)] == list(whole)


def test_sentencepiece_is_never_cut(long_text, tmp_path, monkeypatch):
    # No cut is proven safe for SentencePiece (its normalizer rewrites whitespace): whole texts.
    model = demo.train_sentencepiece(long_text.split("\n\n")[:300], str(tmp_path / "sp"),
                                     vocab_size=900)
    tok = tk.load_tokenizer(tk.TokenizerSpec("SentencePieceTokenizer", model=model))
    assert tok.cuts is None
    assert tk.split_long_text(long_text, tok.cuts, chunk=5000) == [long_text]
    monkeypatch.setattr(base, "LONG_TEXT", 4000)
    ids, lengths = tok.encode_batch([long_text])
    assert ids.tolist() == list(tok._encode_one(long_text))


def test_encode_batch_cuts_long_texts(hf_tokenizer, long_text, monkeypatch):
    tok = tk.load_tokenizer(tk.TokenizerSpec("HuggingFaceTokenizer", model=hf_tokenizer))
    texts = ["short one", long_text, "", long_text[:777]]
    expected = [tok._encode_one(t) for t in texts]
    monkeypatch.setattr(base, "LONG_TEXT", 4000)  # force cutting and several bounded calls
    monkeypatch.setattr(base, "CALL_CHARS", 20000)
    ids, lengths = tok.encode_batch(texts)
    assert lengths.tolist() == [len(e) for e in expected]
    assert ids.tolist() == [i for e in expected for i in e]


def test_no_cut_inside_a_word():
    text = "x" * 50_000
    assert tk.split_long_text(text, tk.SPACE_AND_PUNCT_CUTS, chunk=1000) == [text]


NULL_FORMS = ["1 2 3", "+5 -5 0005 1_000 00_1", "\u0663\u0661 \u0967", "  7\t8\n9  ", "",
              "-9223372036854775808 9223372036854775807", " ".join(map(str, range(3000)))]


def test_null_tokenizer_reads_every_form_int_reads():
    """NullTokenizer's batch path (numpy's str -> int64) gives int()'s ids on every form Python
    accepts (sign, leading zeros, underscores, other scripts' digits, any whitespace)."""
    tok = tk.load_tokenizer(tk.TokenizerSpec("NullTokenizer", vocab_size=1000))
    ids, lengths = tok.encode_batch(NULL_FORMS)
    want = [int(x) for text in NULL_FORMS for x in text.split()]
    assert ids.tolist() == want
    assert lengths.tolist() == [len(text.split()) for text in NULL_FORMS]


@pytest.mark.parametrize("text,error", [("1 two", ValueError), ("1.0", ValueError),
                                        ("0x10", ValueError), ("\u00b2", ValueError),
                                        ("9223372036854775808", OverflowError)])
def test_null_tokenizer_refuses_what_int_refuses(text, error):
    tok = tk.load_tokenizer(tk.TokenizerSpec("NullTokenizer", vocab_size=1000))
    with pytest.raises(error):
        tok.encode_batch(["1 2", text])


TIKTOKEN_VOCAB = os.path.join(os.path.dirname(__file__), "..", "..", "data",
                              "megatron_tokenizers", "tiktoken", "vocab.json")


def test_tiktoken_gives_encode_with_specials_ids_with_or_without_specials():
    """TikTokenizer encodes texts without a special token by tiktoken's encode_ordinary (the
    fast call) and the others with special tokens allowed; in every mix the ids are those of
    tiktoken's encode with special tokens allowed, in order (Megatron's default path)."""
    tok = tk.load_tokenizer(tk.TokenizerSpec("TikTokenizer", model=TIKTOKEN_VOCAB,
                                             tiktoken_pattern="v2", vocab_size=2024))
    texts = ["plain text, no special", "a </s> inside", "", "<s>start", "x <SPECIAL_999> y",
             "near miss < s> <SPECIAL_1000> </ s>", "more plain text \u00e9\u4e2d", "<unk>"]
    for batch in (texts, texts[:1], [texts[1]], texts[::-1]):
        ids, lengths = tok.encode_batch(batch)
        want = tok._enc.encode_batch(batch, allowed_special="all")
        assert lengths.tolist() == [len(w) for w in want]
        assert ids.tolist() == [i for w in want for i in w]
    ids, _ = tok.encode_batch(["a </s> b"])
    assert tok.eod in ids.tolist()  # the special token, not its characters


@pytest.mark.parametrize("calls", [[[5, 7, 9]], [[5, 7], [9]], [[], [5, 7, 9]], [[5], [], [7, 9]]])
def test_id_buffer_gives_the_calls_ids_in_its_dtype_copied(calls):
    buffer = base.IdBuffer(np.uint16)
    given = [np.array(c, dtype=np.uint32) for c in calls]
    for ids in given:
        buffer.extend(ids)
    out = buffer.array()
    assert out.dtype == np.uint16 and out.tolist() == [5, 7, 9]
    for ids in given:
        ids[:] = 1  # the library reusing its memory changes nothing handed on
    assert out.tolist() == [5, 7, 9]
    assert buffer.array().tolist() == []  # emptied


@pytest.mark.parametrize("calls", [[[5, 70_000]], [[5], [70_000]], [[70_000], [5]]])
def test_id_buffer_widens_for_an_id_its_dtype_cannot_hold(calls):
    buffer = base.IdBuffer(np.uint16)
    for ids in calls:
        buffer.extend(np.array(ids, dtype=np.uint32))
    out = buffer.array()
    assert out.dtype == np.int64 and sorted(out.tolist()) == [5, 70_000]
