"""Shared fixtures: a generated multilingual corpus and a tokenizer trained on it. The
independent format reference the tests compare against is in tests/megatron_reference.py."""

import json
import os

import pytest

from pipelines import demo


@pytest.fixture(scope="session")
def corpus_dir(tmp_path_factory):
    """Three JSONL files: several scripts, code, emoji, empty and long documents."""
    root = tmp_path_factory.mktemp("corpus")
    for k in range(3):
        records = list(demo.documents(100 + k, 240, long_every=61, empty_every=37))
        records.insert(5, {"id": "ws", "lang": "xx", "text": "  leading\tand trailing  \n"})
        records.insert(9, {"id": "ctl", "lang": "xx", "text": "nul\u0000 bell\u0007 \u2028 sep"})
        demo.write_jsonl(str(root / f"c{k}_web.jsonl"), records)
    return root


@pytest.fixture(scope="session")
def corpus_texts(corpus_dir):
    texts = {}
    for path in sorted(corpus_dir.glob("*.jsonl")):
        texts[path.name] = [json.loads(line)["text"] for line in path.open(encoding="utf-8")]
    return texts


@pytest.fixture(scope="session")
def hf_tokenizer(corpus_texts, tmp_path_factory):
    folder = tmp_path_factory.mktemp("tok") / "bpe"
    texts = [t for ts in corpus_texts.values() for t in ts if t]
    return demo.train_bpe(texts, str(folder), vocab_size=1200)


@pytest.fixture(scope="session")
def hf_encode(hf_tokenizer):
    import tokenizers

    tok = tokenizers.Tokenizer.from_file(os.path.join(hf_tokenizer, "tokenizer.json"))
    return tok, (lambda s: tok.encode(s, add_special_tokens=False).ids), \
        tok.token_to_id("<|endoftext|>")
