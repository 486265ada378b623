"""Tokenizers as Megatron-LM's ``tools/preprocess_data.py`` uses them, behind one batch interface.

A :class:`TokenizerSpec` is the picklable description (kind + file paths + switches) that travels
with the pipeline; :func:`load_tokenizer` builds the heavy object on a worker. Every tokenizer
encodes a *batch* of texts into one flat id array plus per-text lengths, which is what the
shard writer consumes, so no per-token Python objects survive past the tokenizer call.

Semantics (Megatron core_v0.16.1, the reference for byte-identical output):

- HuggingFaceTokenizer: ``tokenizer.json`` (a file, or a folder holding one). Ids are
  ``encode(text, add_special_tokens=False)`` unless ``add_special_tokens``; vocab size is
  ``len(tokenizer)`` including added tokens; the EOD id is ``eos_token`` of the
  ``tokenizer_config.json`` beside it (else the tokenizer's own post-processor/config has none).
- SentencePieceTokenizer / GPTSentencePieceTokenizer / Llama2Tokenizer: a ``.model``; ids of
  ``encode(text)``; BOS is prepended only with ``add_special_tokens`` (Megatron's new tokenizer
  system adds none); EOD = the model's eos id; vocab size = piece count.
- GPT2BPETokenizer: ``vocab.json`` + ``merges.txt`` run as byte-level BPE with GPT-2's
  pre-tokenizer; EOD = id of ``<|endoftext|>``; vocab size = size of vocab.json (50257 for GPT-2).
- NullTokenizer: whitespace-separated integers, vocab size from ``vocab_size``.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import importlib.metadata
import itertools
import json
import os
import re
from typing import Iterator, Sequence

import numpy as np

from dataio import fs as fsutil

HF_KINDS = ("HuggingFaceTokenizer",)
SP_KINDS = ("SentencePieceTokenizer", "GPTSentencePieceTokenizer", "Llama2Tokenizer")
GPT2_KINDS = ("GPT2BPETokenizer",)
NULL_KINDS = ("NullTokenizer",)
KINDS = HF_KINDS + SP_KINDS + GPT2_KINDS + NULL_KINDS
# NeMo's --tokenizer-library names, accepted as aliases of Megatron's --tokenizer-type.
LIBRARY_ALIASES = {"huggingface": "HuggingFaceTokenizer", "sentencepiece": "SentencePieceTokenizer",
                   "megatron": "GPT2BPETokenizer"}


class TokenizerConfigError(ValueError):
    """A tokenizer that cannot be built as configured; the message names the flag and fix."""


@dataclasses.dataclass(frozen=True)
class TokenizerSpec:
    kind: str
    model: str | None = None
    vocab_file: str | None = None
    merge_file: str | None = None
    add_special_tokens: bool = False
    eod_id: int | None = None  # explicit override
    vocab_size: int | None = None  # NullTokenizer only
    backend: str = "reference"

    def files(self) -> list[str]:
        """The files that define this tokenizer (hashed into metadata and resume keys)."""
        if self.kind in HF_KINDS:
            folder = hf_folder(self.model)
            names = [os.path.join(folder, n) for n in ("tokenizer.json", "tokenizer_config.json",
                                                       "special_tokens_map.json")]
            return [n for n in names if fsutil.exists(n)]
        if self.kind in SP_KINDS:
            return [self.model]
        if self.kind in GPT2_KINDS:
            return [self.vocab_file, self.merge_file]
        return []


def resolve_kind(tokenizer_type: str | None, tokenizer_library: str | None) -> str:
    if tokenizer_type:
        if tokenizer_type not in KINDS:
            raise TokenizerConfigError(f"--tokenizer-type {tokenizer_type} is not supported; "
                                       f"choose one of {', '.join(KINDS)}")
        return tokenizer_type
    if tokenizer_library:
        if tokenizer_library not in LIBRARY_ALIASES:
            raise TokenizerConfigError(f"--tokenizer-library {tokenizer_library} is not supported; "
                                       f"choose one of {', '.join(LIBRARY_ALIASES)}")
        return LIBRARY_ALIASES[tokenizer_library]
    raise TokenizerConfigError("no tokenizer: give --tokenizer-type (e.g. HuggingFaceTokenizer) "
                               "and --tokenizer-model")


def hf_folder(model: str | None) -> str:
    if not model:
        raise TokenizerConfigError("HuggingFaceTokenizer needs --tokenizer-model: a tokenizer.json "
                                   "file or a folder holding one (no hub downloads)")
    if model.endswith(".json"):
        return os.path.dirname(model) or "."
    return model


def file_digest(path: str) -> str:
    h = hashlib.sha256()
    with fsutil.open_file(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def _read_text(path: str) -> str:
    with fsutil.open_file(path, "rb") as f:
        return f.read().decode("utf-8")


# Long texts are tokenized in pieces, so that memory follows the piece, not the text: tokenizers
# keep tens of bytes of state per input byte (alignments, token strings, offsets), so one call on
# a 300 MB document needs gigabytes. A text longer than LONG_TEXT characters is cut about every
# LONG_TEXT characters, only where the tokenizer's own pre-tokenizer provably splits (see
# cut_pattern), and one tokenizer call gets at most CALL_CHARS characters of pieces.
LONG_TEXT = 1 << 16
CALL_CHARS = 1 << 20

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
        out = _IdBuffer(self.id_dtype)
        length_parts, owners = [], []
        call, call_chars = [], 0
        for owner, piece in itertools.chain(self._pieces(texts), [(-1, None)]):
            if piece is None or (call and call_chars + len(piece) > CALL_CHARS):
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
        if len(owners) == len(texts):
            return ids, piece_lengths
        lengths = np.zeros(len(texts), dtype=np.int64)
        np.add.at(lengths, np.asarray(owners, dtype=np.int64), piece_lengths)
        return ids, lengths

    def decode(self, ids) -> str:
        raise NotImplementedError


class _IdBuffer:
    """Ids appended call by call into one array that grows in place. A large NumPy array is its
    own ``mmap`` and ``resize`` is ``realloc``, which remaps it without copying, and pages not yet
    written take no memory: the ids of a huge text cost their size, not twice it (as collecting
    the calls' arrays and concatenating them would)."""

    def __init__(self, dtype):
        self._array = np.empty(0, dtype=dtype)
        self._size = 0

    def extend(self, ids) -> None:
        if len(ids) and self._array.dtype.itemsize < 8 \
                and int(ids.max()) > np.iinfo(self._array.dtype).max:
            # an id the narrow dtype cannot hold (never for a consistent tokenizer): widen, so
            # the writer, not a silent wrap-around here, decides whether it fits the shard
            self._array = self._array.astype(np.int64)
        need = self._size + len(ids)
        if need > self._array.size:
            # refcheck=False: no view of the buffer exists (ids are copied in, never viewed)
            self._array.resize(max(need, 2 * self._array.size, 1 << 16), refcheck=False)
        self._array[self._size:need] = ids
        self._size = need

    def array(self) -> np.ndarray:
        self._array.resize(self._size, refcheck=False)
        array, self._array = self._array, np.empty(0, dtype=self._array.dtype)
        return array


def _flatten(id_lists, dtype=np.int64) -> tuple[np.ndarray, np.ndarray]:
    lengths = np.fromiter((len(ids) for ids in id_lists), dtype=np.int64, count=len(id_lists))
    if not lengths.sum():
        return np.empty(0, dtype=dtype), lengths
    flat = np.fromiter((i for ids in id_lists for i in ids), dtype=dtype, count=int(lengths.sum()))
    return flat, lengths


class HuggingFaceTokenizer(Tokenizer):
    library = "tokenizers"

    def __init__(self, spec: TokenizerSpec):
        import tokenizers

        folder = hf_folder(spec.model)
        path = spec.model if spec.model.endswith(".json") else os.path.join(folder, "tokenizer.json")
        if not fsutil.exists(path):
            raise TokenizerConfigError(f"--tokenizer-model {spec.model}: no tokenizer.json there "
                                       "(only local or fsspec files are read; nothing is "
                                       "downloaded from a hub)")
        config_text = _read_text(path)
        self._tok = tokenizers.Tokenizer.from_str(config_text)
        self.library_version = tokenizers.__version__
        self.vocab_size = self._tok.get_vocab_size(with_added_tokens=True)
        self._special = spec.add_special_tokens
        # special tokens would be added to every piece
        self.cuts = None if self._special else cut_pattern(json.loads(config_text))
        config = self._config(folder)
        self.eod = self._token_id(config.get("eos_token"))
        self.bos = self._token_id(config.get("bos_token"))

    @staticmethod
    def _config(folder: str) -> dict:
        path = os.path.join(folder, "tokenizer_config.json")
        if not fsutil.exists(path):
            return {}
        return json.loads(_read_text(path))

    def _token_id(self, token) -> int | None:
        if isinstance(token, dict):
            token = token.get("content")
        return self._tok.token_to_id(token) if token else None

    @property
    def backend(self):
        return self._tok

    def _encode_plain(self, texts):
        return [e.ids for e in self._tok.encode_batch_fast(texts, add_special_tokens=self._special)]

    def decode(self, ids):
        return self._tok.decode([int(i) for i in ids], skip_special_tokens=False)


class SentencePieceTokenizer(Tokenizer):
    library = "sentencepiece"

    def __init__(self, spec: TokenizerSpec):
        import sentencepiece

        if not spec.model:
            raise TokenizerConfigError(f"{spec.kind} needs --tokenizer-model pointing at a .model")
        with fsutil.open_file(spec.model, "rb") as f:
            self._sp = sentencepiece.SentencePieceProcessor(model_proto=f.read())
        self.library_version = sentencepiece.__version__
        self.vocab_size = self._sp.get_piece_size()
        self.eod = self._sp.eos_id() if self._sp.eos_id() >= 0 else None
        self.bos = self._sp.bos_id() if self._sp.bos_id() >= 0 else None
        self._prepend_bos = spec.add_special_tokens and self.bos is not None

    def _encode_plain(self, texts):
        return self._sp.encode(texts)

    def encode_batch(self, texts):
        ids, lengths = super().encode_batch(texts)
        if not self._prepend_bos or not len(lengths):
            return ids, lengths
        starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
        return np.insert(ids, starts, self.bos), lengths + 1

    def decode(self, ids):
        return self._sp.decode([int(i) for i in ids])


class GPT2BPETokenizer(HuggingFaceTokenizer):
    """GPT-2's vocab.json + merges.txt as byte-level BPE (GPT-2's regex pre-tokenizer)."""

    def __init__(self, spec: TokenizerSpec):  # noqa: super().__init__ reads a tokenizer.json
        import tokenizers
        from tokenizers import decoders, models, pre_tokenizers

        if not (spec.vocab_file and spec.merge_file):
            raise TokenizerConfigError("GPT2BPETokenizer needs --vocab-file (vocab.json) and "
                                       "--merge-file (merges.txt)")
        vocab = json.loads(_read_text(spec.vocab_file))
        merges = [tuple(line.split(" ")) for line in _read_text(spec.merge_file).splitlines()
                  if line and not line.startswith("#version")]
        tok = tokenizers.Tokenizer(models.BPE(vocab=vocab, merges=merges))
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
        tok.decoder = decoders.ByteLevel()
        self._tok = tok
        self.library_version = tokenizers.__version__
        self.vocab_size = len(vocab)
        self._special = False
        self.cuts = cut_pattern(json.loads(tok.to_str()))
        self.eod = vocab.get("<|endoftext|>")
        self.bos = None


class NullTokenizer(Tokenizer):
    library = "builtin"
    cuts = SPACE_CUTS  # whitespace-separated integers: a cut before a space splits nothing
    wide_ids = True  # any integer the text holds

    def __init__(self, spec: TokenizerSpec):
        if spec.vocab_size is None:
            raise TokenizerConfigError("NullTokenizer needs --vocab-size")
        self.vocab_size = spec.vocab_size
        self.eod = spec.vocab_size - 1

    def _encode_plain(self, texts):
        return [[int(t) for t in text.split()] for text in texts]

    def decode(self, ids):
        return " ".join(str(int(i)) for i in ids)


class FastTokenizer(Tokenizer):
    """gigatoken (Rust) in place of a reference tokenizer's encoder; everything else (vocab size,
    EOD, BOS, decode) stays the reference's. Only used where :func:`self_check` found identical
    ids, or where the user forced ``--tokenizer-backend fast`` (still self-checked)."""

    name = "fast"
    library = "gigatoken"

    def __init__(self, reference: Tokenizer, spec: TokenizerSpec):
        import gigatoken

        self.reference = reference
        self.library_version = importlib.metadata.version("gigatoken")
        if spec.kind in SP_KINDS:
            with fsutil.open_file(spec.model, "rb") as f:
                self._g = gigatoken.Tokenizer.from_sentencepiece(f.read())
        else:  # HF tokenizer.json, or GPT-2 files already assembled as a tokenizers.Tokenizer
            self._g = gigatoken.Tokenizer(reference.backend)
        self.vocab_size, self.eod, self.bos = reference.vocab_size, reference.eod, reference.bos
        self.cuts, self.wide_ids = reference.cuts, reference.wide_ids

    def _encode_plain(self, texts):
        return self._g.encode_batch_list(texts)

    def _encode_one(self, text):
        return self._g.encode(text)

    def _encode_flat(self, texts):
        layout = self._g.encode_batch(texts).layout
        offsets = np.asarray(layout.offsets.data, dtype=np.int64)
        ids = np.asarray(layout.content.data)[offsets[0]:offsets[-1]]
        return ids, np.diff(offsets)

    def encode_batch(self, texts):
        ids, lengths = super().encode_batch(texts)
        if isinstance(self.reference, SentencePieceTokenizer) and self.reference._prepend_bos \
                and len(lengths):
            starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
            return np.insert(ids.astype(np.int64), starts, self.bos), lengths + 1
        return ids, lengths

    def decode(self, ids):
        return self.reference.decode(ids)


# Text that tends to break tokenizer re-implementations: every script, emoji with ZWJ and skin
# tones, flags, combining marks, whitespace runs, tabs, control characters, CRLF, very long
# words, digits, code. Always part of the self-check, next to a sample of the real input.
ADVERSARIAL = [
    "", " ", "  ", "\t", "\n", "\r\n", "a  b\t\tc \n\n d", "   leading", "trailing   ",
    "The quick brown fox. It's 3.14159 — isn't it? I'll, we've, they'd.",
    "Straße größer Ärger café naïve façade", "Москва́ ёжик Ъ", "مرحبا بالعالم، كيف حالك؟",
    "你好，世界。日本語のテキスト、カタカナ！", "한국어 텍스트", "हिन्दी पाठ ।", "ไทย ภาษา", "עברית",
    "👩‍👩‍👧‍👦 👍🏽 🏳️‍🌈 🇩🇪🇯🇵 ❤️ e\u0301 n\u0303", "\u0000\u0001\u0007\u001b[0m\u007f\u0085",
    "\u200b\u200d\ufeff\u2028\u2029\u00a0 nbsp", "x" * 5000, "ab" * 3000 + " " + "9" * 700,
    "def f(x):\n\treturn x**2  # comment\n\n\nclass A: pass\r\n",
    "{\"json\": [1, 2.5e-3, null], 'q': \"\\\\n\"}", "<|endoftext|> literal special text",
    "1234567890 12 345 6789 0.000001", "ＡＢＣ ｱｲｳ ①②③ ﬁ ﬀ", "\U0001F600" * 50,
]


SAMPLE_CHARS = 1 << 16


def self_check(fast: Tokenizer, reference: Tokenizer, samples: Sequence[str]) -> str | None:
    """None when ``fast`` gives the reference's ids on every text, else the first difference.
    Samples are compared on their first SAMPLE_CHARS characters: the first record of an input can
    be one huge document, and the driver would tokenize it twice here."""
    texts = list(ADVERSARIAL) + [s[:SAMPLE_CHARS] for s in samples]
    got_ids, got_lengths = fast.encode_batch(texts)
    want_ids, want_lengths = reference.encode_batch(texts)
    if np.array_equal(got_lengths, want_lengths) and np.array_equal(
            np.asarray(got_ids, dtype=np.int64), np.asarray(want_ids, dtype=np.int64)):
        return None
    starts = np.concatenate([[0], np.cumsum(want_lengths)])
    fast_starts = np.concatenate([[0], np.cumsum(got_lengths)])
    for i, text in enumerate(texts):
        want = want_ids[starts[i]:starts[i + 1]].tolist()
        got = got_ids[fast_starts[i]:fast_starts[i + 1]].tolist()
        if want != got:
            return f"text {i} ({text[:40]!r}...): fast {got[:8]}... != reference {want[:8]}..."
    return "outputs differ"


def choose_backend(spec: TokenizerSpec, samples: Sequence[str]) -> tuple[str, str]:
    """The backend to run (``fast`` or ``reference``) and why, for ``spec.backend`` auto/fast/
    reference. Raises TokenizerConfigError when ``fast`` was demanded but cannot be exact."""
    if spec.backend == "reference":
        return "reference", "--tokenizer-backend reference"
    reference = load_tokenizer(dataclasses.replace(spec, backend="reference"))
    why_not = None
    if spec.kind in NULL_KINDS:
        why_not = "NullTokenizer has no fast backend"
    elif spec.add_special_tokens and spec.kind in HF_KINDS + GPT2_KINDS:
        why_not = "--add-special-tokens is only supported by the reference backend"
    else:
        try:
            fast = load_tokenizer(dataclasses.replace(spec, backend="fast"))
        except ImportError:
            why_not = "gigatoken is not installed (pip install 'tokenbeam[fast]')"
        except Exception as exc:  # noqa: BLE001 - any load failure means "not supported"
            why_not = f"gigatoken does not support this tokenizer ({type(exc).__name__}: {exc})"
        else:
            why_not = self_check(fast, reference, samples)
            if why_not:
                why_not = f"self-check found different ids: {why_not}"
    if why_not is None:
        return "fast", f"gigatoken gave identical ids on {len(ADVERSARIAL)} adversarial texts " \
                       f"and {len(samples)} input samples"
    if spec.backend == "fast":
        raise TokenizerConfigError(f"--tokenizer-backend fast: {why_not}; use auto or reference")
    return "reference", why_not


@functools.lru_cache(maxsize=8)
def load_tokenizer(spec: TokenizerSpec) -> Tokenizer:
    """Build the tokenizer (on a worker: call from ``DoFn.setup``). ``spec.backend`` must be
    resolved (``reference`` or ``fast``) by :func:`choose_backend` first; ``auto`` loads the
    reference. Cached per spec: the driver, and the in-process runner's DoFns, load a tokenizer
    once (both backends encode safely from several threads)."""
    if spec.backend == "fast":
        return FastTokenizer(load_tokenizer(dataclasses.replace(spec, backend="reference")), spec)
    return _load_reference(spec)


def _load_reference(spec: TokenizerSpec) -> Tokenizer:
    if spec.kind in HF_KINDS:
        tok = HuggingFaceTokenizer(spec)
    elif spec.kind in SP_KINDS:
        tok = SentencePieceTokenizer(spec)
    elif spec.kind in GPT2_KINDS:
        tok = GPT2BPETokenizer(spec)
    elif spec.kind in NULL_KINDS:
        tok = NullTokenizer(spec)
    else:
        raise TokenizerConfigError(f"unknown tokenizer kind {spec.kind}")
    if spec.eod_id is not None:
        tok.eod = spec.eod_id
    return tok


def describe(spec: TokenizerSpec, tok: Tokenizer) -> dict:
    """The tokenizer's entry in metadata.json (and part of every shard's resume key)."""
    return {
        "kind": spec.kind,
        "model": spec.model,
        "files": [{"path": p, "sha256": file_digest(p)} for p in spec.files()],
        "vocab_size": tok.vocab_size,
        "eod_id": tok.eod,
        "add_special_tokens": spec.add_special_tokens,
        "backend": tok.name,
        "library": getattr(tok, "reference", tok).library,
        "library_version": getattr(tok, "reference", tok).library_version,
        "backend_library": tok.library,
        "backend_version": tok.library_version,
    }
