"""Independent reference of the Megatron format and of preprocess_data.py's document assembly,
written here from the spec (not using dataio), plus file comparison helpers for the tests."""

import os
import struct

import numpy as np


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
