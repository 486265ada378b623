"""What a tokenizer file or folder is, read from its first bytes, and the flags that load it.

Given files of another kind than ``--tokenizer-type`` reads (a SentencePiece ``.model`` as a
HuggingFace folder, a ``tokenizer.json`` to SentencePieceTokenizer, a GPT-2 ``vocab.json`` as
``--tokenizer-model``, a folder with ``tokenizer.model`` and no ``tokenizer.json``, an OpenAI
``.tiktoken`` file), each library fails in its own words ("no tokenizer.json there", a protobuf
parse error called damage). :func:`mismatch` says instead, in one line, what the files are and
the ``--tokenizer-type`` and flags that fit them.

Kinds are told by content, never by name alone: a protobuf ``ModelProto`` whose first piece is
a string (SentencePiece), a JSON object opening with tokenizers' keys (HuggingFace), a JSON
object of token -> id (GPT-2 vocabulary), a JSON list of ``{rank, token_bytes}`` (Megatron's
tiktoken vocabulary), lines of ``base64 rank`` (OpenAI's ``.tiktoken``), a ``#version`` line or
pairs of symbols (GPT-2 merges), one token a line with ``[UNK]`` among them (BERT WordPiece,
whose own puts it on line 101). Only the first 64 KiB of a file is read. Anything unreadable
or unrecognised is None: the caller's own check speaks.
"""

from __future__ import annotations

import posixpath
import re
from typing import Iterator

from dataio import fs as fsutil

SENTENCEPIECE = "a SentencePiece model"
HF_JSON = "a HuggingFace tokenizer.json"
GPT2_VOCAB = "a GPT-2 vocab.json"
GPT2_MERGES = "a GPT-2 merges.txt"
TIKTOKEN_JSON = "a tiktoken vocabulary JSON"
TIKTOKEN_BPE = "an OpenAI .tiktoken file"
WORDPIECE = "a BERT WordPiece vocab.txt"

HEAD_BYTES = 64 << 10
_HF_KEYS = re.compile(rb'^\s*\{\s*"(version|truncation|padding|added_tokens|normalizer|'
                      rb'pre_tokenizer|post_processor|decoder|model)"\s*:\s*[^\s\d-]')
# (a tokenizer.json's values are never numbers: {"model": 0 opens a GPT-2 vocab.json)
_TOKEN_TO_ID = re.compile(rb'^\s*\{\s*"(?:[^"\\]|\\.)*"\s*:\s*\d+\s*[,}]')
_TIKTOKEN_LINE = re.compile(r"^[A-Za-z0-9+/]+=*\s+\d+$")


def _head(path: str) -> bytes | None:
    try:
        with fsutil.open_file(path, "rb") as f:
            return f.read(HEAD_BYTES)
    except Exception:  # noqa: BLE001 - unreadable: the caller's own check names it
        return None


def varint(data: bytes, pos: int) -> tuple[int, int]:
    """A protobuf varint at ``pos``: (its value, the position after it)."""
    value = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return value, pos


def _is_sentencepiece(head: bytes) -> bool:
    """``ModelProto``: field 1 (``pieces``, a message) first, whose own field 1 is the piece
    (a UTF-8 string)."""
    try:
        if head[:1] != b"\x0a":
            return False
        size, pos = varint(head, 1)
        if size < 2 or head[pos:pos + 1] != b"\x0a":
            return False
        length, start = varint(head, pos + 1)
        head[start:start + length].decode("utf-8")
        return length < size
    except (IndexError, UnicodeDecodeError):
        return False


def kind_of_file(path: str) -> str | None:
    """Which tokenizer file ``path`` is (one of this module's kinds), or None."""
    head = _head(path)
    if not head:
        return None
    if _is_sentencepiece(head):
        return SENTENCEPIECE
    if _HF_KEYS.match(head):
        return HF_JSON
    if head.lstrip().startswith(b"[") and b'"token_bytes"' in head:
        return TIKTOKEN_JSON
    if _TOKEN_TO_ID.match(head):
        return GPT2_VOCAB
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError:
        text = head[:-4].decode("utf-8", errors="ignore")  # a character cut at the end
    every = [line.strip() for line in text.splitlines()]
    lines = [line for line in every[:50] if line]
    if lines and lines[0].startswith("#version"):
        return GPT2_MERGES
    # a WordPiece vocabulary is one token a line; BERT's own puts [UNK] on line 101, after
    # [PAD] and 99 [unusedN] lines: its special tokens are looked for in the whole head
    specials = {line for line in every if line.startswith("[") and line.endswith("]")}
    if all(" " not in line for line in lines) and (
            "[UNK]" in specials or {"[PAD]", "[CLS]"} <= specials):
        return WORDPIECE
    if lines and all(_TIKTOKEN_LINE.match(line) for line in lines[:-1] or lines):
        return TIKTOKEN_BPE
    if len(lines) > 2 and all(len(line.split(" ")) == 2 for line in lines[:-1]):
        return GPT2_MERGES
    return None


def kinds_in_folder(folder: str) -> Iterator[tuple[str, str]]:
    """(kind, file) of each tokenizer file recognised directly in ``folder``, HuggingFace's
    tokenizer.json first, then tokenizer.model, vocab.json, merges.txt, vocab.txt, the rest
    (read one by one: a caller that has found what it wants reads no more)."""
    try:
        names = fsutil.list_names(folder)
    except Exception:  # noqa: BLE001
        return
    order = ["tokenizer.json", "tokenizer.model", "vocab.json", "merges.txt", "vocab.txt"]
    ranked = sorted(names, key=lambda n: (order.index(n) if n in order else len(order),
                                          not n.endswith((".model", ".tiktoken", ".json",
                                                          ".txt")), n))
    for name in ranked[:12]:
        path = posixpath.join(folder.rstrip("/"), name)
        kind = kind_of_file(path)
        if kind is not None:
            yield kind, path


def _sibling(path: str, name: str) -> str:
    folder = posixpath.dirname(path)
    other = posixpath.join(folder, name) if folder else name
    return other if fsutil.exists(other) else name


def flags_for(kind: str, path: str) -> str:
    """The flags that load a file of ``kind`` at ``path`` (the missing partner file, when
    there is one, named as it usually is beside it)."""
    if kind == SENTENCEPIECE:
        return f"--tokenizer-type SentencePieceTokenizer --tokenizer-model {path}"
    if kind == HF_JSON:
        folder = posixpath.dirname(path)
        given = folder if posixpath.basename(path) == "tokenizer.json" and folder else path
        return f"--tokenizer-type HuggingFaceTokenizer --tokenizer-model {given}"
    if kind == GPT2_VOCAB:
        return (f"--tokenizer-type GPT2BPETokenizer --vocab-file {path} --merge-file "
                f"{_sibling(path, 'merges.txt')}")
    if kind == GPT2_MERGES:
        return (f"--tokenizer-type GPT2BPETokenizer --vocab-file "
                f"{_sibling(path, 'vocab.json')} --merge-file {path}")
    if kind == TIKTOKEN_JSON:
        return (f"--tokenizer-type TikTokenizer --tokenizer-model {path} (with --vocab-size "
                "and --tiktoken-pattern)")
    if kind == WORDPIECE:
        return (f"--tokenizer-type BertWordPieceLowerCase (or BertWordPieceCase) --vocab-file "
                f"{path} --legacy-tokenizer")
    raise ValueError(kind)


def _suggestion(kind: str, path: str) -> str:
    if kind == TIKTOKEN_BPE:
        return ("Megatron's TikTokenizer reads tiktoken's JSON list form ([{\"rank\", "
                "\"token_bytes\", \"token_str\"}, ...]), not this text form: convert it, then "
                "give --tokenizer-type TikTokenizer --tokenizer-model FILE.json")
    return f"did you mean {flags_for(kind, path)}?"


def mismatch(kind: str, wanted: dict[str, tuple[str, ...]],
             given: dict[str, str | None]) -> str | None:
    """One line when the files ``given`` (flag -> path) are of another kind than
    ``--tokenizer-type kind`` reads (``wanted``: flag -> the file kinds that fit it, as the
    kind declares in registry.py): what they are and the flags that fit them; None when they
    fit, are missing or unreadable, or are not recognised (the load's own checks speak then)."""
    if not wanted:
        return None
    # the files of the flags this type reads; while one is missing, also a file given under a
    # flag it does not read (GPT2BPETokenizer with --tokenizer-model vocab.json)
    flags = list(wanted)
    if not all(given.get(f) for f in wanted):
        flags += [f for f in given if f not in wanted]
    for flag in flags:
        path = given.get(flag)
        if not path:
            continue
        fits = wanted.get(flag, ())
        if fsutil.exists(path) and _is_folder(path):
            if HF_JSON in fits and "tokenizer.json" in fsutil.list_names(path):
                continue  # whatever else it holds; a damaged one is named when loaded
            first = None
            for what, inside in kinds_in_folder(path):
                if what in fits:
                    first = None  # a file that fits is in it: the folder check names it
                    break
                first = first or (what, inside)
            if first is None:
                continue
            what, inside = first
            name = posixpath.basename(inside)
            named = "" if what.endswith(name) else f" ({name})"
            return (f"--tokenizer-type {kind}: {flag} {path} holds {what}{named}"
                    f"{_no_hf_json(wanted)}; "
                    f"{_suggestion(what, inside)}")
        what = kind_of_file(path)
        if what is None or what in fits:
            continue
        reads = f"not {' or '.join(fits)}" if fits else f"{kind} reads no {flag}"
        return (f"--tokenizer-type {kind}: {flag} {path} is {what}, {reads}; "
                f"{_suggestion(what, path)}")
    return None


def _no_hf_json(wanted: dict) -> str:
    return " and no tokenizer.json" if any(HF_JSON in fits for fits in wanted.values()) else ""


def _is_folder(path: str) -> bool:
    fs, inner = fsutil.filesystem_and_path(path)
    try:
        return fs.isdir(inner)
    except Exception:  # noqa: BLE001
        return False
