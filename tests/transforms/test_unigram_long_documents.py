"""Unigram tokenizers are never cut: a 2 MB document gives exactly the ids of encoding it whole,
for a SentencePiece unigram ``.model`` and for a HuggingFace ``Unigram`` tokenizer.json; the
decision is read from the model file (its type), and a test shows why cutting is unsafe."""

import itertools
import os
import random
import shutil

import pytest

from pipelines import demo
from transforms import tokenizer as tk

DATA = os.path.join(os.path.dirname(os.path.dirname(__file__)), "data", "megatron_tokenizers")
UNIGRAM = os.path.join(DATA, "spm", "unigram.model")
BPE = os.path.join(DATA, "spm", "bpe.model")


def _document(seed=14, size=2_000_000):
    """About ``size`` characters of demo text in every script (CJK runs included, where a
    unigram model's near-ties live), generated from ``seed``."""
    rng = random.Random(seed)
    parts, n = [], 0
    while n < size:
        parts.append(demo.document(rng, rng.choice(demo.LANGS)))
        n += len(parts[-1]) + 1
    return "\n".join(parts)


@pytest.fixture(scope="module")
def document():
    return _document()


def test_model_type_is_read_from_the_model_file():
    with open(UNIGRAM, "rb") as f:
        assert tk.sentencepiece_model_type(f.read()) == "unigram"
    with open(BPE, "rb") as f:
        assert tk.sentencepiece_model_type(f.read()) == "bpe"
    assert tk.sentencepiece_model_type(b"") == "unigram"  # the proto's default type
    tok = tk.load_tokenizer(tk.TokenizerSpec("SentencePieceTokenizer", model=UNIGRAM))
    assert tok.model_type == "unigram" and tok.cuts is None
    assert tk.cut_pattern({"model": {"type": "Unigram"}, "pre_tokenizer": {}}) is None


def test_cutting_a_unigram_text_changes_ids_far_from_the_cut(document):
    """Why unigram texts are never cut, even at a space: the segmentation is a best path over
    the whole text, and near-ties are decided by float sums that depend on where the text
    starts. Cutting every 64K characters changes ids thousands of tokens from any cut."""
    import sentencepiece

    sp = sentencepiece.SentencePieceProcessor(model_file=UNIGRAM)
    whole = sp.encode(document)
    cuts = [0]
    while len(document) - cuts[-1] > 1 << 16:
        cuts.append(document.index(" ", cuts[-1] + (1 << 16)))
    pieces = [sp.encode(document[a:b]) for a, b in zip(cuts, cuts[1:] + [len(document)])]
    ids = [i for p in pieces for i in p]
    boundaries = list(itertools.accumulate(len(p) for p in pieces))
    diffs = [k for k, (a, b) in enumerate(zip(ids, whole)) if a != b]
    assert diffs, "no difference: the demonstration needs another seed"
    assert max(min(abs(d - b) for b in boundaries) for d in diffs) > 1000


def test_a_byte_level_bpe_is_still_cut(tmp_path):
    """The other side of the decision: the same code path does cut where it is proven."""
    folder = demo.train_bpe([r["text"] for r in demo.documents(5, 200) if r["text"]],
                            str(tmp_path / "bpe"), vocab_size=400)
    tok = tk.load_tokenizer(tk.TokenizerSpec("HuggingFaceTokenizer", model=folder))
    assert tok.cuts is not None
    shutil.rmtree(folder)
