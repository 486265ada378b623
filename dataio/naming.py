"""Output shard names: ``{stem}_{key}_{level}_dc={documents}_sc={sequences}_tc={tokens}``.

``dc`` counts every document in the file (empty ones included, = D - 1 of the index), ``sc``
every sequence (N) and ``tc`` every token (the sum of the sequence lengths).

A shard name never holds a control character (C0 and C1 controls, DEL, the Unicode line and
paragraph separators): a name becomes a Megatron ``--data-path`` entry, a shell word in
``data_path.sh``, a CSV field, a line of a listing, and a newline or escape there ends a line
(or a comment) early for the reader. The planner refuses such an input with one line
(:func:`base_name` raises :class:`UnsafeNameError`), as it refuses an input path that is not
valid UTF-8 (a Linux file name holds any bytes; a work item carries its path as text). Every
other name that becomes an output name (merge's ``--output``, ``count --rename``'s new names,
reshard's templates) goes through :func:`refuse_control_characters`.

Whatever tokenbeam prints (its log lines, ``error:`` lines, listings) shows a name through
:func:`printable`, so that no file or folder name can end a line early, forge one, or send a
terminal escape: ``runtime/log.py`` and ``runtime/errors.py`` apply it to every message.
"""

from __future__ import annotations

import re

from runtime import errors
from runtime.text import printable

_COUNTS = re.compile(r"_dc=(\d+)_sc=(\d+)_tc=(\d+)$")
LEVELS = ("document", "sentence")


# C0 controls (newline, tab, escape...), DEL, C1 controls (U+0085 is a newline to Python), and
# U+2028/U+2029, which end a line for Python's str.splitlines and JavaScript.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
# A file name's bytes that are not UTF-8, as Python decodes them (surrogateescape: U+DC80-U+DCFF);
# such text cannot be written as UTF-8 (a terminal, a JSON file, a Beam coder).
_NOT_UTF8 = re.compile(r"[\ud800-\udfff]")


class UnsafeNameError(errors.ConfigError):
    """An input whose name would put a control character into a shard name (exit status 2)."""


def refuse_control_characters(name: str, *, where: str) -> str:
    """``name`` (a shard name or a part of one), or :class:`UnsafeNameError` saying that
    ``where`` (the input file or flag it comes from) would put a control character into a
    shard name."""
    if _NOT_UTF8.search(name):
        raise UnsafeNameError(
            f"{printable(where)}: '{printable(name)}' is not valid UTF-8, which a shard name "
            "must be; rename it in UTF-8")
    found = _CONTROL.search(name)
    if found:
        raise UnsafeNameError(
            f"{printable(where)}: '{printable(name)}' would put the control character "
            f"{printable(found.group())} into a shard name, which breaks Megatron's --data-path "
            "and shell scripts; rename it without control characters (newline, tab, escape...)")
    return name


def refuse_not_utf8(path: str) -> str:
    """``path`` (an input), or :class:`UnsafeNameError` when its name is not valid UTF-8 (a
    Linux file name holds any bytes), which no shard name, record or message can carry."""
    found = _NOT_UTF8.search(path)
    if found:
        raise UnsafeNameError(
            f"input {printable(path)}: the name is not valid UTF-8 (shown "
            f"{printable(found.group())}), which tokenbeam cannot carry into shard names and "
            "records; rename it in UTF-8 (e.g. convmv -f latin1 -t utf8 --notest NAME)")
    return path


def base_name(stem: str, key: str, level: str, *, source: str | None = None) -> str:
    """``{stem}_{key}_{level}``; raises :class:`UnsafeNameError` naming ``source`` (the input
    file the stem comes from) when the name would hold a control character."""
    if level not in LEVELS:
        raise ValueError(f"level must be one of {LEVELS}, got {level!r}")
    refuse_not_utf8(source or stem)
    where = f"input {source or stem}" if _CONTROL.search(stem) else f"--json-keys {key}"
    return refuse_control_characters(f"{stem}_{key}_{level}", where=where)


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
