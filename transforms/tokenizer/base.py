"""What every tokenizer shares: the batch interface (:class:`Tokenizer`), the one-line error,
and where long texts may be cut so that memory follows a piece, not the whole text.

A tokenizer encodes a *batch* of texts into one flat id array plus per-text lengths, which is
what the shard writer consumes, so no per-token Python objects survive past the tokenizer call.
No kind is named here: the families (hf.py, sentencepiece.py, simple.py) subclass
:class:`Tokenizer`, and registry.py says which class serves which ``--tokenizer-type``.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
from typing import Iterable, Iterator, Sequence

import numpy as np

from dataio import fs as fsutil


class TokenizerConfigError(ValueError):
    """A tokenizer that cannot be built as configured; the message names the flag and fix."""



def file_digest(path: str) -> str:
    h = hashlib.sha256()
    with fsutil.open_file(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def read_text(path: str) -> str:
    with fsutil.open_file(path, "rb") as f:
        return f.read().decode("utf-8")


def parses(path: str) -> bool:
    """A text file that is UTF-8 (and JSON, for a ``.json``)."""
    try:
        text = read_text(path)
        if path.endswith(".json"):
            json.loads(text)
    except (OSError, ValueError):  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        return False
    return True


# Long texts are tokenized in pieces, so that memory follows the piece, not the text: tokenizers
# keep tens of bytes of state per input byte (alignments, token strings, offsets), so one call on
# a 300 MB document needs gigabytes. A text longer than LONG_TEXT characters is cut about every
# LONG_TEXT characters, only where the tokenizer's own pre-tokenizer provably splits (see
# cut_pattern), and one tokenizer call gets at most CALL_CHARS characters of pieces.
LONG_TEXT = 1 << 16
CALL_CHARS = 1 << 20
# The fast backend (gigatoken) keeps about 6 bytes of state per character and spreads one call
# over its threads, text by text: its calls take a whole batch (8 MB by default), as fewer,
# larger calls keep its threads busy.
FAST_CALL_CHARS = 1 << 23

# What Unicode calls White_Space: what ``\s`` matches in the tokenizers' regex engines.
_WHITE_SPACE = "\t\n\v\f\r \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
# (a) just before a plain space (U+0020) that has a non-space character on each side.
_CUT_AT_SPACE = f"(?<=[^{_WHITE_SPACE}])(?= [^{_WHITE_SPACE}])"
# (b) between common sentence punctuation and a letter or digit of a script written without
# spaces (or ASCII): every character named here has the same Unicode category in every
# version (P* before, L*/Nd after), so the tokenizer's \p{L}/\p{N} agree with this list.
_PUNCT = ".,!?;:\u3001\u3002\uff01\uff0c\uff1a\uff1b\uff1f"
_CUT_AFTER_PUNCT = (f"(?<=[{_PUNCT}])"
                    "(?=[A-Za-z0-9\u3041-\u3096\u30a1-\u30fa\u4e00-\u9fa5\uac00-\ud7a3])")
SPACE_CUTS = re.compile(_CUT_AT_SPACE)
SPACE_AND_PUNCT_CUTS = re.compile(f"{_CUT_AT_SPACE}|{_CUT_AFTER_PUNCT}")


def cut_pattern(config: dict) -> re.Pattern | None:
    """Where a HuggingFace ``tokenizer.json`` (as a dict) may be cut so that tokenizing the pieces
    one by one gives exactly the ids of the whole text; None when no cut is proven safe (then
    texts are tokenized whole, whatever their length).

    Proven for byte-level BPE (GPT-2 and the many tokenizers built like it): no normalizer, the
    ByteLevel pre-tokenizer with its built-in GPT-2 regex ``'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+|
    ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+``, a BPE model without dropout, no truncation or
    padding, and added tokens with no whitespace inside and no ``rstrip``. Then:

    - The regex has no look-behind and no anchor, so its matches from a position on depend only
      on the text from there on; and every character is matched by some alternative.
    - (a) ``X␣Y`` (X, Y not whitespace): no alternative matches a space after a non-space
      character (a space is only ever a match's first character, or part of an all-whitespace
      match), so the match holding X ends at X, in the whole text and in the left piece alike,
      and the next match starts at the space in both. ``add_prefix_space`` adds nothing to a
      piece that starts with a space.
    - (b) punctuation P (not ``'``, which starts the contractions) then a letter or digit: the
      match holding P is a ``[^\\s\\p{L}\\p{N}]+`` run, which stops before the letter; the next
      match starts at the letter. Only without ``add_prefix_space`` (it would add a space to the
      piece).
    - Added tokens are matched before the regex, on the same text; one without whitespace never
      spans the space of (a); ``lstrip`` takes the same space either way, ``rstrip`` would take
      the space after X in the whole text but not in the piece, so it disables cutting. An
      added token holding one of the punctuation marks of (b) (``etc.``, ``<a.b>``) could be
      cut by (b), or matched differently at a piece's end (``single_word``): it disables (b).
    - BPE then works inside each pre-token, so equal pre-tokens give equal ids.
    """
    if any(config.get(k) is not None for k in ("normalizer", "truncation", "padding")):
        return None
    model, pre = config.get("model") or {}, config.get("pre_tokenizer") or {}
    if model.get("type") != "BPE" or model.get("dropout") not in (None, 0, 0.0):
        return None
    if pre.get("type") != "ByteLevel" or not pre.get("use_regex", True):
        return None
    space, punct = re.compile(f"[{_WHITE_SPACE}]"), re.compile(f"[{_PUNCT}]")
    after_punct = not pre.get("add_prefix_space")
    for token in config.get("added_tokens") or []:
        content = token.get("content") or ""
        if not content or token.get("rstrip") or space.search(content):
            return None
        if punct.search(content):
            after_punct = False
    return SPACE_AND_PUNCT_CUTS if after_punct else SPACE_CUTS


def cut_points(text: str, pattern: re.Pattern, *, chunk: int | None = None) -> Iterator[int]:
    """Positions to cut ``text`` at: the first point ``pattern`` allows at least ``chunk``
    characters after the previous cut, and so on. Text with no allowed point (one enormous word)
    is not cut there. Lazy, so the pieces are sliced one at a time."""
    chunk = chunk or LONG_TEXT
    start, n = 0, len(text)
    while n - start > chunk + chunk // 2:
        m = pattern.search(text, start + chunk)
        if m is None or n - m.start() < chunk // 2:
            return
        start = m.start()
        yield start


def split_long_text(text: str, pattern: re.Pattern | None, *,
                    chunk: int | None = None) -> list[str]:
    """``text`` cut at :func:`cut_points` (whole when ``pattern`` is None)."""
    if pattern is None:
        return [text]
    cuts = [0, *cut_points(text, pattern, chunk=chunk), len(text)]
    return [text[a:b] for a, b in zip(cuts, cuts[1:])]


class Tokenizer:
    """The batch interface every backend implements: subclasses provide ``_encode_plain``."""

    name = "reference"
    library = ""
    library_version = ""
    vocab_size: int
    eod: int | None
    bos: int | None = None
    # Where long texts may be cut (see cut_pattern); None: always tokenized whole.
    cuts: re.Pattern | None = None
    wide_ids = False  # ids may be any integer (NullTokenizer): int64, never narrowed

    @property
    def id_dtype(self) -> np.dtype:
        """The dtype of the ids ``encode_batch`` returns: the smallest that holds every id of the
        vocabulary and the EOD/BOS ids (uint16 for vocabularies up to 65,536, as the shards
        store them, else uint32), so that a huge document's ids, and the copies made of them
        downstream, cost 2 or 4 bytes per token rather than 8."""
        if self.wide_ids:
            return np.dtype(np.int64)
        vocab = getattr(self, "vocab_size", None)
        if vocab is None:
            return np.dtype(np.uint32)
        top = max(vocab, *((i or 0) + 1 for i in (getattr(self, "eod", None), self.bos)))
        return np.dtype(np.uint16 if top <= 1 << 16 else np.uint32)

    def _encode_plain(self, texts: list[str]) -> list:
        """One id sequence per text, in one tokenizer call."""
        raise NotImplementedError

    def _encode_one(self, text: str):
        return self._encode_plain([text])[0]

    def _encode_flat(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """One tokenizer call: concatenated ids and per-text lengths."""
        return _flatten(self._encode_plain(texts), np.int64 if self.wide_ids else np.uint32)

    def _pieces(self, texts: Sequence[str]) -> Iterator[tuple[int, str]]:
        """(text index, piece) of every text in order; a long text is sliced piece by piece."""
        for i, text in enumerate(texts):
            if len(text) <= LONG_TEXT or self.cuts is None:
                yield i, text
                continue
            start = 0
            for cut in cut_points(text, self.cuts):
                yield i, text[start:cut]
                start = cut
            yield i, text[start:] if start else text

    def encode_batch(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """Ids of every text, concatenated, and each text's id count.

        Memory beyond the texts themselves: the ids (``id_dtype``, written into one growing
        buffer) and one call's worth of tokenizer state; a piece is sliced just before its call.
        """
        return self._encode_pieces(self._pieces(texts), len(texts))

    def _encode_pieces(self, pieces: Iterable[tuple[int, str | bytes]], num_texts: int
                       ) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`encode_batch` of ``num_texts`` texts given as their (text index, piece) in
        order (:meth:`_pieces`; a piece may be its UTF-8 bytes where ``_encode_flat`` takes
        them), the pieces grouped into calls of at most ``CALL_CHARS`` (``FAST_CALL_CHARS``)."""
        out = IdBuffer(self.id_dtype)
        length_parts, owners = [], []
        call, call_chars = [], 0
        limit = FAST_CALL_CHARS if self.name == "fast" else CALL_CHARS
        for owner, piece in itertools.chain(pieces, [(-1, None)]):
            if piece is None or (call and call_chars + len(piece) > limit):
                if call:
                    ids, lengths = self._encode_flat(call)
                    out.extend(ids)
                    length_parts.append(lengths)
                    del ids
                call, call_chars = [], 0
            if piece is not None:
                call.append(piece)
                owners.append(owner)
                call_chars += len(piece)
        del call
        ids = out.array()
        piece_lengths = np.concatenate(length_parts) if length_parts else np.empty(0, np.int64)
        piece_lengths = piece_lengths.astype(np.int64, copy=False)
        if len(owners) == num_texts:
            return ids, piece_lengths
        lengths = np.zeros(num_texts, dtype=np.int64)
        np.add.at(lengths, np.asarray(owners, dtype=np.int64), piece_lengths)
        return ids, lengths

    def decode(self, ids) -> str:
        raise NotImplementedError


class IdBuffer:
    """Ids appended call by call into one array that grows in place. A large NumPy array is its
    own ``mmap`` and ``resize`` is ``realloc``, which remaps it without copying, and pages not yet
    written take no memory: the ids of a huge text cost their size, not twice it (as collecting
    the calls' arrays and concatenating them would). The ids of one call alone (a batch of small
    texts) go into no grown buffer, only copied in the dtype: about 30 us a batch less, a good
    part of what a one-line file costs."""

    def __init__(self, dtype):
        self._array = np.empty(0, dtype=dtype)
        self._size = 0
        self._first = None  # the first call's ids, until a second call comes
        self._limit = np.iinfo(dtype).max if np.dtype(dtype).itemsize < 8 else None

    def extend(self, ids) -> None:
        if self._first is None and not self._size:
            self._first = ids
            return
        if self._first is not None:
            first, self._first = self._first, None
            self._append(first)
        self._append(ids)

    def _append(self, ids) -> None:
        if self._too_wide(ids):
            # an id the narrow dtype cannot hold (never for a consistent tokenizer): widen, so
            # the writer, not a silent wrap-around here, decides whether it fits the shard
            self._array = self._array.astype(np.int64)
        need = self._size + len(ids)
        if need > self._array.size:
            # refcheck=False: no view of the buffer exists (ids are copied in, never viewed)
            self._array.resize(max(need, 2 * self._array.size, 1 << 16), refcheck=False)
        self._array[self._size:need] = ids
        self._size = need

    def _too_wide(self, ids) -> bool:
        return (self._limit is not None and self._array.dtype.itemsize < 8 and len(ids) > 0
                and int(ids.max()) > self._limit)

    def array(self) -> np.ndarray:
        if self._first is not None:
            ids, self._first = self._first, None
            # a copy: the tokenizer library may reuse the memory it handed out
            return np.array(ids, dtype=np.int64 if self._too_wide(ids) else self._array.dtype)
        self._array.resize(self._size, refcheck=False)
        array, self._array = self._array, np.empty(0, dtype=self._array.dtype)
        self._size = 0
        return array


def _flatten(id_lists, dtype=np.int64) -> tuple[np.ndarray, np.ndarray]:
    lengths = np.fromiter((len(ids) for ids in id_lists), dtype=np.int64, count=len(id_lists))
    if not lengths.sum():
        return np.empty(0, dtype=dtype), lengths
    # chain.from_iterable walks the lists in C: half the time of a generator expression
    flat = np.fromiter(itertools.chain.from_iterable(id_lists), dtype=dtype,
                       count=int(lengths.sum()))
    return flat, lengths


class RustTokenizer(Tokenizer):
    """A ``tokenizers.Tokenizer``'s own batch encode (Rust, on its threads)."""

    library = "tokenizers"
    _tok = None
    _special = False

    @property
    def backend(self):
        return self._tok

    def _encode_plain(self, texts):
        return [e.ids for e in self._tok.encode_batch_fast(texts, add_special_tokens=self._special)]

    def decode(self, ids):
        return self._tok.decode([int(i) for i in ids], skip_special_tokens=False)

