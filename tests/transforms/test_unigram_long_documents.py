"""Unigram tokenizers are never cut: a 2 MB document gives exactly the ids of encoding it whole,
for a SentencePiece unigram ``.model`` and for a HuggingFace ``Unigram`` tokenizer.json; the
decision is read from the model file (its type), and a test shows why cutting is unsafe."""

import itertools
import json
import os
import random
import shutil

import numpy as np
import pytest

from pipelines import demo
from pipelines import tokenize
from transforms import tokenizer as tk
from transforms.tokenizer import base

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


@pytest.fixture(scope="module")
def hf_unigram(tmp_path_factory):
    """A HuggingFace Unigram tokenizer.json (Metaspace, like converted T5/ALBERT models)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.Unigram())
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Metaspace()
    texts = [r["text"] for r in demo.documents(3, 600) if r["text"]]
    tok.train_from_iterator(texts, trainers.UnigramTrainer(
        vocab_size=800, special_tokens=["<unk>", "<s>", "</s>"], unk_token="<unk>",
        show_progress=False))
    folder = tmp_path_factory.mktemp("hf_unigram")
    tok.save(str(folder / "tokenizer.json"))
    with open(folder / "tokenizer_config.json", "w", encoding="utf-8") as f:
        json.dump({"eos_token": "</s>"}, f)
    return str(folder)


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


@pytest.mark.slow  # ends with a whole tokenize job
def test_huge_sentencepiece_unigram_document_equals_whole(document, tmp_path, monkeypatch):
    import sentencepiece

    whole = sentencepiece.SentencePieceProcessor(model_file=UNIGRAM).encode(document)
    spec = tk.TokenizerSpec("SentencePieceTokenizer", model=UNIGRAM, backend="auto")
    backend, why = tk.choose_backend(spec, [document])
    print(f"backend {backend}: {why}")
    tok = tk.load_tokenizer(tk.TokenizerSpec("SentencePieceTokenizer", model=UNIGRAM,
                                             backend=backend))
    calls = []
    encode_flat = tok._encode_flat
    monkeypatch.setattr(tok, "_encode_flat", lambda c: calls.append(len(c)) or encode_flat(c))
    ids, lengths = tok.encode_batch(["short", document, ""])
    assert lengths.tolist()[1] == len(whole)
    assert ids[lengths[0]:lengths[0] + lengths[1]].astype(np.int64).tolist() == whole
    assert 1 in calls  # the document went to the tokenizer alone, whole

    # and through the whole job, with EOD
    with open(tmp_path / "huge.jsonl", "w", encoding="utf-8") as f:
        f.write(json.dumps({"text": document}) + "\n")
    out = tmp_path / "out"
    assert tokenize.run(["--input", str(tmp_path / "huge.jsonl"), "--output", str(out),
                         "--tokenizer-type", "SentencePieceTokenizer", "--tokenizer-model",
                         UNIGRAM, "--append-eod", "--log-interval", "0"]) == 0
    (name,) = [n for n in os.listdir(out) if n.endswith(".bin")]
    got = np.fromfile(out / name, dtype="<u2").tolist()
    assert got == whole + [tok.eod]


@pytest.mark.slow  # a 2 MB document through an HF Unigram model, twice
def test_huge_hf_unigram_document_equals_whole(document, hf_unigram, monkeypatch):
    from tokenizers import Tokenizer

    whole = Tokenizer.from_file(os.path.join(hf_unigram, "tokenizer.json")).encode(
        document, add_special_tokens=False).ids
    spec = tk.TokenizerSpec("HuggingFaceTokenizer", model=hf_unigram, backend="auto")
    backend, why = tk.choose_backend(spec, [document])
    print(f"backend {backend}: {why}")
    tok = tk.load_tokenizer(dataclass_replace(spec, backend=backend))
    assert tok.cuts is None  # read from tokenizer.json: model type Unigram
    monkeypatch.setattr(base, "LONG_TEXT", 1000)  # even "long" at 1000 characters: still whole
    ids, lengths = tok.encode_batch([document])
    assert lengths.tolist() == [len(whole)]
    assert ids.astype(np.int64).tolist() == whole


def dataclass_replace(spec, **changes):
    import dataclasses

    return dataclasses.replace(spec, **changes)


def test_a_byte_level_bpe_is_still_cut(tmp_path):
    """The other side of the decision: the same code path does cut where it is proven."""
    folder = demo.train_bpe([r["text"] for r in demo.documents(5, 200) if r["text"]],
                            str(tmp_path / "bpe"), vocab_size=400)
    tok = tk.load_tokenizer(tk.TokenizerSpec("HuggingFaceTokenizer", model=folder))
    assert tok.cuts is not None
    shutil.rmtree(folder)
