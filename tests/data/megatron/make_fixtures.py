"""Writes the Megatron-made fixtures in this folder with megatron-core's own IndexedDatasetBuilder.

Run with a python that has megatron-core 0.16.1 (and torch) installed, from anywhere::

    /path/to/megatron-venv/bin/python tests/data/megatron/make_fixtures.py

It rewrites, next to this script:

- ``mc_uint16.bin/.idx``   DOCUMENTS with dtype uint16, through ``add_document(tokens, lengths)``
- ``mc_int32.bin/.idx``    INT32_DOCUMENTS with dtype int32, through ``add_item`` + ``end_document``
- ``mc_uint16_b.bin/.idx`` SECOND_DOCUMENTS, uint16 (a second input for the merge)
- ``mc_merged.bin/.idx``   a builder fed ``add_index(mc_uint16)`` then ``add_index(mc_uint16_b)``
- ``mc_empty.bin/.idx``    a builder finalized with no document (a 0-byte ``.bin``)
- ``documents.json``       the documents above (lists of sequences) and the versions used

The tests (tests/dataio/test_megatron_interop.py) read these with tokenbeam's reader and
compare them with what tokenbeam's writer makes from ``documents.json``; they never import
megatron-core, so CI needs only the committed bytes.
"""

from __future__ import annotations

import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))

# Inner lists are sequences. Covered: several sequences per document, an empty document (in
# the middle and at the end), a zero-length sequence inside a document, the extreme ids of the
# dtype, and a longer sequence.
DOCUMENTS = [
    [[1, 2, 3], [4, 5]],
    [],
    [[6]],
    [[7, 8, 9, 10]],
    [[0, 65499, 65535, 1]],
    [[11, 12], [], [13]],
    [list(range(100, 400))],
    [],
]
INT32_DOCUMENTS = [
    [[1, 2, 3], [4, 5]],
    [],
    [[65536, 70000], [2**31 - 1]],
    [[0]],
    [[11, 12], [], [13]],
    [list(range(65000, 65600))],
    [],
]
SECOND_DOCUMENTS = [[[21, 22]], [], [[23, 24, 25], [26]]]


def flat(document):
    return [token for sequence in document for token in sequence]


def main() -> int:
    import megatron.core
    import torch
    from megatron.core.datasets.indexed_dataset import IndexedDataset, IndexedDatasetBuilder

    def path(name, suffix):
        return os.path.join(HERE, name + suffix)

    def build_with_add_document(name, documents, dtype):
        builder = IndexedDatasetBuilder(path(name, ".bin"), dtype=dtype)
        for doc in documents:
            builder.add_document(flat(doc), [len(s) for s in doc])
        builder.finalize(path(name, ".idx"))

    build_with_add_document("mc_uint16", DOCUMENTS, np.uint16)
    build_with_add_document("mc_uint16_b", SECOND_DOCUMENTS, np.uint16)

    builder = IndexedDatasetBuilder(path("mc_int32", ".bin"), dtype=np.int32)
    for doc in INT32_DOCUMENTS:
        for sequence in doc:
            builder.add_item(torch.tensor(sequence, dtype=torch.int64))
        builder.end_document()
    builder.finalize(path("mc_int32", ".idx"))

    builder = IndexedDatasetBuilder(path("mc_merged", ".bin"), dtype=np.uint16)
    builder.add_index(os.path.join(HERE, "mc_uint16"))
    builder.add_index(os.path.join(HERE, "mc_uint16_b"))
    builder.finalize(path("mc_merged", ".idx"))

    builder = IndexedDatasetBuilder(path("mc_empty", ".bin"), dtype=np.uint16)
    builder.finalize(path("mc_empty", ".idx"))

    # Megatron reads back what it wrote (the empty one only without mmap: see the notes).
    for name, docs in (("mc_uint16", DOCUMENTS), ("mc_int32", INT32_DOCUMENTS),
                       ("mc_merged", DOCUMENTS + SECOND_DOCUMENTS)):
        ds = IndexedDataset(os.path.join(HERE, name))
        sequences = [s for doc in docs for s in doc]
        assert [ds[i].tolist() for i in range(len(ds))] == sequences, name
    assert len(IndexedDataset(os.path.join(HERE, "mc_empty"), mmap=False)) == 0

    with open(os.path.join(HERE, "documents.json"), "w", encoding="utf-8") as f:
        json.dump({
            "made_by": "tests/data/megatron/make_fixtures.py",
            "megatron_core": megatron.core.__version__,
            "torch": torch.__version__,
            "numpy": np.__version__,
            "datasets": {
                "mc_uint16": {"dtype": "uint16", "api": "add_document", "documents": DOCUMENTS},
                "mc_int32": {"dtype": "int32", "api": "add_item+end_document",
                             "documents": INT32_DOCUMENTS},
                "mc_uint16_b": {"dtype": "uint16", "api": "add_document",
                                "documents": SECOND_DOCUMENTS},
                "mc_merged": {"dtype": "uint16", "api": "add_index(mc_uint16, mc_uint16_b)",
                              "documents": DOCUMENTS + SECOND_DOCUMENTS},
                "mc_empty": {"dtype": "uint16", "api": "finalize with no document",
                             "documents": []},
            },
        }, f, separators=(",", ":"))
        f.write("\n")
    print(f"wrote fixtures with megatron-core {megatron.core.__version__} into {HERE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
