"""Unigram tokenizers are never cut: a 2 MB document gives exactly the ids of encoding it whole,
for a SentencePiece unigram ``.model`` and for a HuggingFace ``Unigram`` tokenizer.json; the
decision is read from the model file (its type), and a test shows why cutting is unsafe.

The whole-job runs; the unit tests are in tests/transforms/test_unigram_long_documents.py."""

import json
import os

import numpy as np
import pytest

from pipelines import demo
from pipelines import tokenize
from transforms import tokenizer as tk
from transforms.tokenizer import base
from tests.transforms.test_unigram_long_documents import UNIGRAM
from tests.transforms.test_unigram_long_documents import document  # noqa: F401 (fixture)


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
