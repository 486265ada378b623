"""Byte-identity with Megatron-LM core_v0.16.1 ``tools/preprocess_data.py`` for every tokenizer
family beyond HuggingFace: NullTokenizer, SentencePiece (default and ``--legacy-tokenizer``
paths of SentencePieceTokenizer, GPTSentencePieceTokenizer, Llama2Tokenizer), TikTokenizer and
BertWordPiece{LowerCase,Case}.

The expected bytes in tests/data/megatron_tokenizers/FAMILY/megatron/ (gzipped) were written by
Megatron's own script (README.md there: commands and versions); FAMILY/variants.tsv lists each
variant's Megatron flags and which stored output it produced. Every variant is checked through
the tokenizer (fast: no pipeline), and each distinct output once through the whole tokenize job
with the same flags.
"""

import dataclasses
import gzip
import json
import os

import numpy as np
import pytest


from dataio import indexed
from megatron_reference import megatron_documents, read_pair, reference_write
from pipelines import beam_options
from transforms import tokenizer as tk

DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "data", "megatron_tokenizers")
FAMILIES = ("nulltok", "spm", "tiktoken", "wordpiece")
PATH_FLAGS = ("--tokenizer-model", "--vocab-file", "--merge-file", "--tokenizer-metadata")
OUT = "corpus_text_document"


def _input(family):
    return os.path.join(DATA, family, "corpus.jsonl") if family == "nulltok" \
        else os.path.join(DATA, "corpus.jsonl")


def _variants():
    rows = []
    for family in FAMILIES:
        path = os.path.join(DATA, family, "variants.tsv")
        if not os.path.exists(path):
            continue  # test_every_family_has_its_fixture fails for it
        with open(path, encoding="utf-8") as f:
            for line in f:
                name, stored, flags = line.rstrip("\n").split("\t")
                rows.append(pytest.param(family, name, stored, flags.split(),
                                         id=f"{family}-{name}"))
    return rows


VARIANTS = _variants()


def _flags(family, flags):
    """Megatron's flags as tokenbeam takes them (same names), paths made absolute."""
    out = list(flags)
    for i, flag in enumerate(out[:-1]):
        if flag in PATH_FLAGS:
            out[i + 1] = os.path.join(DATA, family, out[i + 1])
    return out


def _expected(family, stored):
    """Megatron's .bin and .idx bytes (stored gzipped: a few hundred KB per family)."""
    prefix = os.path.join(DATA, family, "megatron", stored, OUT)
    with gzip.open(prefix + ".bin.gz") as b, gzip.open(prefix + ".idx.gz") as i:
        return b.read(), i.read()


def _texts(family):
    with open(_input(family), encoding="utf-8") as f:
        return [json.loads(line)["text"] for line in f]


def test_every_family_has_its_fixture():
    families = {p.values[0] for p in VARIANTS}
    assert families == set(FAMILIES)
    for param in VARIANTS:
        family, _, stored, _ = param.values
        assert len(_expected(family, stored)[1]) > 34


@pytest.mark.parametrize("family, name, stored, flags", VARIANTS)
def test_tokenizer_gives_megatron_bytes(tmp_path, family, name, stored, flags):
    """Every variant: the tokenizer built from Megatron's own flags, Megatron's document
    assembly and the format written from the spec (tests/megatron_reference.py)."""
    flags = _flags(family, flags)
    options = beam_options.parse(["--input", "x", "--output", "y", *flags])
    spec = options.view_as(beam_options.TokenizerOptions).tokenizer_spec()
    # the backend the job would run (the fast one, routed, for the BPE model where it can)
    backend, _ = tk.choose_backend(spec, _texts(family)[:20])
    tok = tk.load_tokenizer(dataclasses.replace(spec, backend=backend))
    if family == "spm" and name.startswith("bpe_") and "--legacy-tokenizer" not in flags \
            and "--tokenizer-special-tokens" not in flags:
        assert backend == "fast", name

    texts = _texts(family)
    segments = [s for v in texts for s in (v if isinstance(v, list) else [v])]
    ids, lengths = tok.encode_batch(segments)  # one call, as the job makes (ids as one by one)
    by_text = dict(zip(segments, np.split(ids.astype(np.int64), np.cumsum(lengths)[:-1])))

    def encode(text):
        return by_text[text].tolist()

    documents = megatron_documents(texts, encode,
                                   eod=tok.eod if "--append-eod" in flags else None)
    reference_write(str(tmp_path / "got"), documents, indexed.optimal_dtype(tok.vocab_size))
    expected = _expected(family, stored)
    got = read_pair(str(tmp_path / "got"))
    assert got[1] == expected[1], "the .idx differs (lengths, documents or dtype)"
    assert got[0] == expected[0], "the .bin differs (token ids)"
