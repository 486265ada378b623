"""Records -> documents: parsing, bad-record routing, and the ``ReadDocuments`` transform.

A record's value for a JSON key is a string (one text) or a list of strings (pre-split
sentences, as Megatron accepts). A record that is bad for *any* requested key is left out of
every key's shard, so the shards of different keys of one input stay aligned document by
document. Bad records: not JSON, a blank line, not an object, a missing key, a value that is not
a string (or list of strings), invalid UTF-8, a lone surrogate escape (not encodable as UTF-8,
which the tokenizers reject), JSON nested more than 1,024 levels (orjson's limit; the standard
library, which Megatron uses, gives up near 1,000 levels, so no record Megatron reads is lost).
The tokenize step adds the documents the sentence splitter or the tokenizer raises on (see
transforms/tokenize.py): every DocumentBatch carries each document's file, line and byte offset
so that those reports name file:line too, and they go to the same ``errors`` output.

This module imports no Beam (the planner samples documents through :func:`read_documents`);
``ReadDocuments`` lives in transforms/read.py and is reachable here by name.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Iterator, Sequence

import orjson

from dataio import readers
from dataio.elements import DocumentBatch, WorkItem

ERRORS_TAG = "errors"
FAILED_TAG = "failed"
_SNIPPET = 200
MAX_JSON_DEPTH = 1024  # orjson's nesting limit


class BadRecord(ValueError):
    """A record that cannot be used; ``str(exc)`` is the reason."""


def _check_text(value, key: str, *, surrogates_possible: bool = True) -> str | list[str]:
    """The value itself (a string or a list of strings) once it is known to be usable.
    ``surrogates_possible``: False for values orjson decoded (it rejects lone surrogates), which
    saves encoding every text once more."""
    if isinstance(value, str):
        texts = [value]
    elif isinstance(value, list) and all(isinstance(v, str) for v in value):
        texts = value
    elif value is None:
        raise BadRecord(f"key {key!r} is missing or null")
    else:
        raise BadRecord(f"value of key {key!r} is not a string or list of strings "
                        f"(got {type(value).__name__}{_NOT_TEXT.get(type(value), '')})")
    for t in texts if surrogates_possible else ():
        try:
            t.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise BadRecord(f"value of key {key!r} holds a lone surrogate escape "
                            f"(\\u{ord(t[exc.start]):04x}), which is not valid Unicode text") from None
    return value


# What a value of each type says about the input, for the reason of a bad record.
_NOT_TEXT = {
    bytes: ": a binary column; store the text as a string (UTF-8) column",
    dict: ": an object, or a Parquet struct column; name a key or column that holds the text",
}


def _not_json_lines(line: bytes) -> str:
    """What is wrong with the whole file, as far as one unparsable line shows it ("" if
    nothing): UTF-16 text, or one (pretty-printed) JSON document rather than JSON Lines."""
    if line.startswith((b"\xff\xfe", b"\xfe\xff")) or b"\x00" in line[:64]:
        return ("; the file looks like UTF-16 (a byte-order mark or NUL bytes), not UTF-8: "
                "convert it, e.g. iconv -f UTF-16 -t UTF-8")
    if line.strip() in (b"[", b"{"):
        return ("; the file looks like one (pretty-printed) JSON document, not JSON Lines (one "
                "object per line): convert it, e.g. jq -c '.[]'")
    return ""


def parse_json_line(line: bytes, keys: Sequence[str]) -> dict[str, str | list[str]]:
    """The value (string or list of strings) of each key in one JSONL line; raises BadRecord."""
    try:
        return _parse_json_line(line, keys)
    except BadRecord as exc:
        hint = _not_json_lines(line) if str(exc).startswith(("not valid JSON", "invalid UTF-8")) \
            else ""
        if not hint:
            raise
        raise BadRecord(f"{exc}{hint}") from None


def _parse_json_line(line: bytes, keys: Sequence[str]) -> dict[str, str | list[str]]:
    if not line.strip():
        raise BadRecord("blank line")
    surrogates_possible = False
    try:
        obj = orjson.loads(line)  # rejects lone surrogates, escaped or not
    except orjson.JSONDecodeError as exc:
        surrogates_possible = True
        if "depth limit" in str(exc):
            # Decided by orjson's fixed limit, not by the standard library's, which depends on
            # how deep the caller's stack already is: the same line could pass on one runner
            # and fail on another.
            raise BadRecord(f"JSON nested more than {MAX_JSON_DEPTH} levels deep") from None
        # orjson is stricter than the JSON Megatron reads (huge integers, NaN): retry with the
        # standard library before calling the line bad.
        try:
            obj = json.loads(line.decode("utf-8"))
        except UnicodeDecodeError as uexc:
            raise BadRecord(f"invalid UTF-8 at byte {uexc.start} of the line") from None
        except RecursionError:
            raise BadRecord("JSON nested too deeply for Python's json module") from None
        except json.JSONDecodeError:
            raise BadRecord(f"not valid JSON ({exc})") from None
        except ValueError as jexc:  # e.g. an integer of more than 4,300 digits
            raise BadRecord(f"not readable JSON ({str(jexc)[:_SNIPPET]})") from None
    if not isinstance(obj, dict):
        raise BadRecord(f"a JSON {type(obj).__name__}, not an object")
    missing = [k for k in keys if k not in obj]
    if missing:
        raise BadRecord(f"missing key {missing[0]!r} (keys present: "
                        f"{', '.join(sorted(obj)[:10]) or 'none'}); set --json-keys")
    return {k: _check_text(obj[k], k, surrogates_possible=surrogates_possible) for k in keys}


def snippet(data) -> str:
    if isinstance(data, bytes):
        return data[:_SNIPPET * 4].decode("utf-8", errors="replace")[:_SNIPPET]
    return json.dumps(data, ensure_ascii=False, default=str)[:_SNIPPET]


@dataclasses.dataclass(frozen=True)
class BadRecordReport:
    file: str
    line: int | None
    offset: int
    reason: str
    snippet: str

    def as_json(self) -> dict:
        return dataclasses.asdict(self)


def batch_bad_record(batch: DocumentBatch, index: int, reason: str, *, key: str
                     ) -> BadRecordReport:
    """The report for document ``index`` of ``batch``, found bad for ``key`` after reading."""
    line, offset = batch.lines[index], batch.offsets[index]
    if line is None:  # only uncompressed JSONL ranges start past byte 0
        line = readers.line_number_at(batch.path, offset)
    return BadRecordReport(batch.path, line, offset, reason, snippet(batch.texts[key][index]))


def bad_record_error(report: BadRecordReport) -> BadRecord:
    """What ``--on-bad-record fail`` raises for ``report`` (wherever the record was found bad)."""
    return BadRecord(f"{report.file}:{report.line}: {report.reason} (byte offset "
                     f"{report.offset}); use --on-bad-record skip to leave bad records out and "
                     "list them in _errors/")


@dataclasses.dataclass(frozen=True)
class FailedShard:
    stem: str
    reason: str


class _Batcher:
    def __init__(self, item: WorkItem, keys, *, max_docs: int, max_bytes: int):
        self.item, self.keys, self.max_docs, self.max_bytes = item, keys, max_docs, max_bytes
        self.number = 0
        self._reset()

    def _reset(self):
        self.texts = {k: [] for k in self.keys}
        self.ids, self.num_bytes = [], 0
        self.lines, self.offsets = [], []

    def add(self, texts: dict[str, list[str]], doc_id, num_bytes: int, *, line: int | None,
            offset: int) -> DocumentBatch | None:
        for k in self.keys:
            self.texts[k].append(texts[k])
        self.ids.append(doc_id)
        self.lines.append(line)
        self.offsets.append(offset)
        self.num_bytes += num_bytes
        if len(self.ids) >= self.max_docs or self.num_bytes >= self.max_bytes:
            return self.flush()
        return None

    def flush(self) -> DocumentBatch | None:
        if not self.ids:
            return None
        batch = DocumentBatch(self.item.stem, self.item.index, self.number, self.texts, self.ids,
                              self.num_bytes, self.item.path, self.lines, self.offsets)
        self.number += 1
        self._reset()
        return batch


def read_documents(item: WorkItem, keys: Sequence[str], *, id_key: str | None = None,
                   max_docs: int = 2048, max_bytes: int = 8 << 20) -> Iterator:
    """Yield DocumentBatch for good records and BadRecordReport for bad ones, in input order."""
    batcher = _Batcher(item, keys, max_docs=max_docs, max_bytes=max_bytes)
    if item.format == "parquet":
        columns = list(dict.fromkeys([*keys, *([id_key] if id_key else [])]))
        for first_row, values in readers.read_parquet(item, columns):
            n = len(values[columns[0]]) if columns else 0
            for r in range(n):
                row = {c: values[c][r] for c in columns}
                try:
                    missing = [k for k in keys if row[k] is None]
                    if missing:
                        raise BadRecord(f"key {missing[0]!r} is missing or null")
                    texts = {k: _check_text(row[k], k) for k in keys}
                except BadRecord as exc:
                    yield BadRecordReport(item.path, first_row + r + 1, first_row + r, str(exc),
                                          snippet(row))
                    continue
                doc_id = str(row[id_key]) if id_key and row.get(id_key) is not None else None
                size = sum(len(t) if isinstance(t, str) else sum(map(len, t)) for t in texts.values())
                if (batch := batcher.add(texts, doc_id, size, line=first_row + r + 1,
                                         offset=first_row + r)) is not None:
                    yield batch
    else:
        yield from _jsonl_documents(item, list(keys), id_key, batcher)
    if (batch := batcher.flush()) is not None:
        yield batch


def _jsonl_documents(item: WorkItem, keys: list[str], id_key: str | None,
                     batcher: _Batcher) -> Iterator:
    """:func:`read_documents` of a JSON Lines item, a block of lines at a time. The usual record
    (an object whose keys all hold a string) takes the short way: orjson's parse and a type
    check; any other line goes through :func:`parse_json_line`, which says what is wrong with
    it (the same results either way: a string orjson parsed is usable text)."""
    loads, not_json = orjson.loads, orjson.JSONDecodeError
    single = keys[0] if len(keys) == 1 else None
    for lines, first_line, offsets in readers.read_jsonl_blocks(item):
        for i, offset in enumerate(offsets):
            line, lines[i] = lines[i], None  # the block's list keeps no huge line
            try:
                obj = loads(line)
            except not_json:
                obj = None
            texts = None
            if type(obj) is dict:
                if single is not None:
                    value = obj.get(single)
                    if type(value) is str:
                        texts = {single: value}
                else:
                    texts = {k: obj.get(k) for k in keys}
                    if not all(type(v) is str for v in texts.values()):
                        texts = None
            if texts is not None:
                doc_id = None
                if id_key and (value := obj.get(id_key)) is not None:
                    doc_id = str(value)
            else:
                try:
                    texts = parse_json_line(line, keys)
                except BadRecord as exc:
                    number = first_line + i if first_line is not None else \
                        readers.line_number_at(item.path, offset)
                    yield BadRecordReport(item.path, number, offset, str(exc), snippet(line))
                    continue
                doc_id = _json_id(line, id_key) if id_key else None
            size = len(line) + 1
            line = obj = None  # not kept while the batch is tokenized: one line can be 100s of MB
            if (batch := batcher.add(texts, doc_id, size,
                                     line=None if first_line is None else first_line + i,
                                     offset=offset)) is not None:
                yield batch


def _json_id(line: bytes, id_key: str) -> str | None:
    try:
        value = orjson.loads(line).get(id_key)
    except orjson.JSONDecodeError:
        value = json.loads(line.decode("utf-8")).get(id_key)
    return None if value is None else str(value)
