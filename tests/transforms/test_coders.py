"""transforms/coders.py: the batches' coder sizes them without pickling and round-trips them."""

from __future__ import annotations

import pickle

import apache_beam as beam
import numpy as np

from transforms import coders
from transforms import tokenize as tz
from transforms.tokenize_config import TokenizeConfig
from dataio.elements import TokenBatch
from dataio.elements import DocumentBatch
from transforms.read import ReadDocuments
from transforms.tokenizer import TokenizerSpec


def _batch():
    return DocumentBatch("web", 0, 0, {"text": ["a b", "c"]}, [None, None], 12, "/in/web.jsonl",
                         [1, 2], [0, 6])


def test_size_comes_from_the_element_not_from_pickling(monkeypatch):
    coder = coders.BatchCoder()
    tb = TokenBatch(shard="s", item=0, batch=0, tokens=np.arange(10, dtype=np.uint16),
                       sequence_lengths=np.array([4, 6]),
                       sequences_per_document=np.array([1, 1]), num_bytes=30)
    monkeypatch.setattr(pickle, "dumps", lambda *a, **k: (_ for _ in ()).throw(AssertionError))
    impl = coder.get_impl()
    assert impl.estimate_size(_batch()) == 12
    assert impl.estimate_size(tb) == 20 + 2 * 8 + 2 * 8


def test_round_trip():
    coder = coders.BatchCoder()
    batch = _batch()
    assert coder.decode(coder.encode(batch)) == batch
    tb = TokenBatch(shard="s", item=1, batch=2, tokens=np.arange(5),
                       sequence_lengths=np.array([5]), sequences_per_document=np.array([1]),
                       num_bytes=9)
    back = coder.decode(coder.encode(tb))
    assert back.tokens.tolist() == [0, 1, 2, 3, 4] and back.order == (1, 2)


def test_the_transforms_batch_outputs_use_it():
    p = beam.Pipeline()
    read = p | beam.Create([]) | ReadDocuments(["text"])
    tokens = read["documents"] | tz.TokenizeDocuments(
        TokenizerSpec(kind="NullTokenizer", vocab_size=10), TokenizeConfig(keys=("text",)),
        shard_names={})
    for pcoll in (read["documents"], tokens["tokens"]):
        assert isinstance(beam.coders.registry.get_coder(pcoll.element_type), coders.BatchCoder)
