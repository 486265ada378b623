"""Damaged and hostile Megatron datasets, one per way an ``.idx`` (or its ``.bin``) can lie: every
reader of the format (validate, the loader, inspect, count, merge) must refuse each with one line.

:func:`make` writes the good dataset :data:`DOCS` (uint16; N=4 sequences of 3, 2, 1, 4 tokens;
D=5, document_indices 0 2 2 3 4; 10 tokens) and applies one case's damage. The ``.idx`` layout
(dataio/indexed.py): header 34 bytes, lengths at 34, pointers at 34+4N = 50, document_indices
at 34+12N = 82, end at 122.
"""

from __future__ import annotations

import struct

import numpy as np

from dataio import indexed as ix

DOCS = [[[1, 2, 3], [4, 5]], [], [[6]], [[7, 8, 9, 10]]]
N, D = 4, 5
LENGTHS, POINTERS, DOC_INDICES = 34, 34 + 4 * N, 34 + 12 * N


def _i32(value):
    return struct.pack("<i", value)


def _i64(value):
    return struct.pack("<q", value)


def _u64(value):
    return struct.pack("<Q", value)


# name -> (file suffix, offset or None for "truncate to", bytes or the size to truncate to)
CASES: dict[str, tuple] = {
    "bad_magic": (".idx", 0, b"XXIDIDX\x00\x00"),
    "legacy_magic": (".idx", 0, b"TNTIDX\x00\x00\x00"),
    "version_2": (".idx", 9, _u64(2)),
    "float_dtype_code": (".idx", 17, bytes([6])),
    "unknown_dtype_code": (".idx", 17, bytes([42])),
    "wider_dtype_code": (".idx", 17, bytes([4])),          # int32: the .bin is too short
    "empty_idx": (".idx", None, 0),
    "idx_shorter_than_header": (".idx", None, 20),
    "idx_truncated_arrays": (".idx", None, 100),
    "idx_trailing_bytes": (".idx", 122, b"\0" * 8),
    "huge_sequence_count": (".idx", 18, _u64(1 << 62)),
    "empty_document_indices": (".idx", 26, _u64(0)),       # D=0: "-1 documents"
    "huge_document_count": (".idx", 26, _u64(1 << 62)),
    "negative_length": (".idx", LENGTHS + 4, _i32(-2)),
    "huge_length": (".idx", LENGTHS + 12, _i32(2**31 - 1)),
    "negative_pointer": (".idx", POINTERS + 8, _i64(-4096)),
    "huge_pointer": (".idx", POINTERS + 24, _i64(1 << 60)),
    "odd_pointer": (".idx", POINTERS + 8, _i64(7)),
    "document_indices_not_from_0": (".idx", DOC_INDICES, _i64(1)),
    "document_indices_decrease": (".idx", DOC_INDICES + 16, _i64(1)),
    "document_indices_end_short": (".idx", DOC_INDICES + 32, _i64(3)),
    "document_indices_past_end": (".idx", DOC_INDICES + 32, _i64(1 << 40)),
    "negative_document_index": (".idx", DOC_INDICES + 8, _i64(-5)),
    "bin_truncated": (".bin", None, 18),
    "bin_too_long": (".bin", 20, b"\0\0\0\0"),
}


def make(folder, case: str, name: str = "d") -> str:
    """The good dataset at ``folder/name`` damaged as ``case`` says; returns its prefix."""
    prefix = str(folder / name)
    ix.write_documents(prefix, DOCS, dtype=np.uint16)
    suffix, offset, data = CASES[case]
    with open(prefix + suffix, "r+b") as f:
        if offset is None:
            f.truncate(data)
        else:
            f.seek(offset)
            f.write(data)
    return prefix
