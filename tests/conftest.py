"""Shared fixtures: a generated multilingual corpus, a tokenizer trained on it, and an independent
reference writer of the Megatron format (written here from the spec, not using dataio)."""

import json
import os
import struct

import numpy as np
import pytest

from pipelines import demo


def reference_write(prefix, documents, dtype):
    """Megatron MMIDIDX v1 from the spec: documents are lists of sequences (lists of ids)."""
    dtype = np.dtype(dtype)
    code = {np.dtype(np.uint16): 8, np.dtype(np.int32): 4}[dtype]
    lengths, doc_idx, chunks = [], [0], []
    for doc in documents:
        for seq in doc:
            lengths.append(len(seq))
            chunks.append(np.asarray(seq, dtype=dtype))
        doc_idx.append(len(lengths))
    lengths = np.asarray(lengths, dtype="<i4")
    pointers = np.zeros(len(lengths), dtype="<i8")
    if len(lengths):
        pointers[1:] = np.cumsum(lengths[:-1].astype(np.int64)) * dtype.itemsize
    with open(prefix + ".idx", "wb") as f:
        f.write(b"MMIDIDX\x00\x00" + struct.pack("<Q", 1) + struct.pack("<B", code))
        f.write(struct.pack("<Q", len(lengths)) + struct.pack("<Q", len(doc_idx)))
        f.write(lengths.tobytes() + pointers.tobytes() + np.asarray(doc_idx, "<i8").tobytes())
    with open(prefix + ".bin", "wb") as f:
        for c in chunks:
            f.write(c.astype(dtype.newbyteorder("<")).tobytes())


def megatron_documents(texts, encode, *, eod=None):
    """Megatron's preprocess_data.py encode(): each value is a string or a list of strings;
    empty segments dropped; EOD appended to the last sequence of a non-empty document."""
    documents = []
    for value in texts:
        segments = value if isinstance(value, list) else [value]
        seqs = [ids for ids in (list(encode(s)) for s in segments) if ids]
        if seqs and eod is not None:
            seqs[-1] = seqs[-1] + [eod]
        documents.append(seqs)
    return documents


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


def read_pair(prefix):
    with open(prefix + ".bin", "rb") as b, open(prefix + ".idx", "rb") as i:
        return b.read(), i.read()


def shard_files(folder):
    """{name: bytes} of every committed .bin/.idx directly in folder (and holdout/)."""
    out = {}
    for root, _, files in os.walk(folder):
        if os.path.basename(root).startswith("_"):
            continue
        for n in files:
            if n.endswith((".bin", ".idx")):
                rel = os.path.relpath(os.path.join(root, n), folder)
                if rel.split(os.sep)[0].startswith("_"):
                    continue
                with open(os.path.join(root, n), "rb") as f:
                    out[rel] = f.read()
    return out
