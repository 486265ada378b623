"""Output shard names: ``{stem}_{key}_{level}_dc={documents}_sc={sequences}_tc={tokens}``.

``dc`` counts every document in the file (empty ones included, = D - 1 of the index), ``sc``
every sequence (N) and ``tc`` every token (the sum of the sequence lengths).
"""

from __future__ import annotations

import re

_COUNTS = re.compile(r"_dc=(\d+)_sc=(\d+)_tc=(\d+)$")
LEVELS = ("document", "sentence")


def base_name(stem: str, key: str, level: str) -> str:
    if level not in LEVELS:
        raise ValueError(f"level must be one of {LEVELS}, got {level!r}")
    return f"{stem}_{key}_{level}"


def with_counts(base: str, documents: int, sequences: int, tokens: int) -> str:
    return f"{base}_dc={documents}_sc={sequences}_tc={tokens}"


def shard_name(stem: str, key: str, level: str, documents: int, sequences: int,
               tokens: int) -> str:
    return with_counts(base_name(stem, key, level), documents, sequences, tokens)


def parse_counts(name: str) -> tuple[int, int, int] | None:
    """``(dc, sc, tc)`` from a name ending in counts, else None."""
    m = _COUNTS.search(name)
    return (int(m.group(1)), int(m.group(2)), int(m.group(3))) if m else None


def strip_counts(name: str) -> str:
    return _COUNTS.sub("", name)
