"""Tokenizers as Megatron-LM's ``tools/preprocess_data.py`` uses them, behind one batch interface.

A :class:`TokenizerSpec` is the picklable description (kind + file paths + switches) that travels
with the pipeline; :func:`load_tokenizer` builds the heavy object on a worker. Every tokenizer
encodes a *batch* of texts into one flat id array plus per-text lengths, which is what the
shard writer consumes, so no per-token Python objects survive past the tokenizer call.

Semantics (Megatron core_v0.16.1, the reference for byte-identical output):

- HuggingFaceTokenizer: ``tokenizer.json`` (a file, or a folder holding one, with its configs)
  loaded by transformers' ``AutoTokenizer`` as Megatron loads it (transforms/hf_auto.py: the
  configs' effects, Megatron's special-token fallbacks, ``--tokenizer-special-tokens``). Ids
  are ``convert_tokens_to_ids(tokenize(text))``, ``tokenizer(text).input_ids`` with
  ``add_special_tokens``; vocab size is ``len(tokenizer)``; EOD = the eos token's id (the sep
  token's when the folder names no eos). The Rust tokenizer transformers built
  (:class:`HFBackendTokenizer`) and gigatoken built from it stand in only after the
  self-check.
- SentencePieceTokenizer / GPTSentencePieceTokenizer / Llama2Tokenizer: a ``.model``; ids of
  ``encode(text)``; BOS is prepended only with ``add_special_tokens`` (Megatron's new tokenizer
  system adds none); EOD = the model's eos id; vocab size = piece count. With ``legacy``
  (Megatron's ``--legacy-tokenizer``, the ``megatron.training.tokenizer`` classes):
  SentencePieceTokenizer adds ``<CLS> <SEP> <EOD> <MASK>`` and the pad/bos/eos pieces (``<PAD>``
  etc. when the model has none) as special tokens after the pieces it lacks, so the vocabulary
  grows and EOD = the id of ``<EOD>``; those strings written in a text are matched (leftmost
  first, ties in that order) and become their ids, the text between them is encoded alone;
  Llama2Tokenizer prepends the bos id to every text (every sentence); GPTSentencePieceTokenizer
  is unchanged. With ``special_tokens`` (``--tokenizer-special-tokens`` with
  ``--tokenizer-sentencepiece-legacy``, Megatron's default path): the library wrapper's legacy
  mode, see ``SentencePieceTokenizer._wrapper_specials``.
- GPT2BPETokenizer: ``vocab.json`` + ``merges.txt`` run as byte-level BPE with GPT-2's
  pre-tokenizer; EOD = id of ``<|endoftext|>``; vocab size = size of vocab.json (50257 for GPT-2).
- NullTokenizer: ``int()`` of each whitespace-separated part (Megatron splits on ``' '`` and
  raises on an empty part; same ids wherever it does not); ``vocab_size`` N: EOD = N,
  vocabulary N + 1.
- TikTokenizer: a tiktoken-format JSON vocabulary (a list of ``{rank, token_bytes, token_str}``)
  through the ``tiktoken`` library, its first ``vocab_size - num_special_tokens`` ranks shifted
  up by ``num_special_tokens``; ids 0.. hold the special tokens (``<unk> <s> </s>`` ... then
  ``<SPECIAL_i>`` fillers); EOD = the id of ``</s>``; vocabulary ``vocab_size``. The default
  path encodes special-token strings in a text as their ids (``allowed_special="all"``), the
  legacy path as ordinary text.
- BertWordPieceLowerCase / BertWordPieceCase: a WordPiece ``vocab.txt`` run through BERT's own
  basic tokenizer (clean, CJK spacing, optional lower case and accent stripping, punctuation
  split) and greedy longest-match WordPiece; ``[BOS]`` and ``[EOS]`` are added after the
  vocabulary when absent, EOD = ``[EOS]``.
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
import threading
from typing import Iterator, Sequence

import numpy as np

from dataio import fs as fsutil
from dataio import locations
from transforms import hf_auto, hf_resolved, tokenizer_files

HF_KINDS = ("HuggingFaceTokenizer",)
SP_KINDS = ("SentencePieceTokenizer", "GPTSentencePieceTokenizer", "Llama2Tokenizer")
GPT2_KINDS = ("GPT2BPETokenizer",)
NULL_KINDS = ("NullTokenizer",)
TIKTOKEN_KINDS = ("TikTokenizer",)
WORDPIECE_KINDS = ("BertWordPieceLowerCase", "BertWordPieceCase")
KINDS = HF_KINDS + SP_KINDS + GPT2_KINDS + NULL_KINDS + TIKTOKEN_KINDS + WORDPIECE_KINDS
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
    vocab_size: int | None = None  # NullTokenizer, TikTokenizer
    backend: str = "reference"
    legacy: bool = False  # Megatron's --legacy-tokenizer
    tiktoken_pattern: str | None = None  # v1 or v2 (TikTokenizer)
    tiktoken_num_special_tokens: int = 1000
    # --tokenizer-special-tokens: TikTokenizer's; a SentencePiece type's (with
    # --tokenizer-sentencepiece-legacy); None where Megatron ignores them (tokenizer_flags.py)
    special_tokens: tuple[str, ...] | None = None
    # A HuggingFace folder's Rust tokenizer as the driver resolved and self-checked it, set by
    # for_workers(): workers build the fast/tokenizers backend from it without transformers.
    # Not a setting (options() and files() leave it out: resume keys do not see it).
    resolved: hf_resolved.ResolvedHF | None = dataclasses.field(default=None, repr=False)

    def options(self) -> dict:
        """The switches beyond kind, files and EOD that change the ids (metadata, resume key);
        empty for the configurations that existed before them, so their keys do not move."""
        out = {}
        if self.legacy:
            out["legacy"] = True
        if self.kind in HF_KINDS and self.special_tokens:
            out["special_tokens"] = list(self.special_tokens)
        if self.kind in TIKTOKEN_KINDS:
            out.update(vocab_size=self.vocab_size, pattern=self.tiktoken_pattern,
                       num_special_tokens=self.tiktoken_num_special_tokens,
                       special_tokens=list(self.special_tokens or []) or None)
        elif self.special_tokens and self.kind in SP_KINDS:
            out["special_tokens"] = list(self.special_tokens)
        return out

    def files(self) -> list[str]:
        """The files that define this tokenizer (hashed into metadata and resume keys)."""
        if self.kind in HF_KINDS:
            folder = hf_folder(self.model)
            named = self.model if self.model.endswith(".json") else None
            files = [p for p in hf_auto.folder_files(folder)
                     if not (named and os.path.basename(p) == "tokenizer.json")]
            # Megatron hands --vocab-file/--merge-file to AutoTokenizer too
            extra = [p for p in (self.vocab_file, self.merge_file) if p]
            return ([named] if named and fsutil.exists(named) else []) + files + extra
        if self.kind in SP_KINDS:
            return [self.model]
        if self.kind in GPT2_KINDS:
            return [self.vocab_file, self.merge_file]
        if self.kind in TIKTOKEN_KINDS:
            return [self.model]
        if self.kind in WORDPIECE_KINDS:
            return [self.vocab_file]
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
# The fast backend (gigatoken) keeps about 6 bytes of state per character and spreads one call
# over its threads, text by text: its calls take a whole batch (8 MB by default). Measured on a
# 20M-character document: 0.32 s in calls of 1M characters, 0.13 s in calls of 16M (+100 MB).
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
        out = _IdBuffer(self.id_dtype)
        length_parts, owners = [], []
        call, call_chars = [], 0
        limit = FAST_CALL_CHARS if self.name == "fast" else CALL_CHARS
        for owner, piece in itertools.chain(self._pieces(texts), [(-1, None)]):
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


class _RustTokenizer(Tokenizer):
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


class HuggingFaceTokenizer(Tokenizer):
    """The reference for a HuggingFace folder: transformers' AutoTokenizer as Megatron builds
    and calls it (transforms/hf_auto.py). ``backend`` is the ``tokenizers.Tokenizer`` it ended
    up with (config effects included), which :class:`HFBackendTokenizer` and gigatoken encode
    with wherever the self-check finds them identical."""

    library = "transformers"

    def __init__(self, spec: TokenizerSpec):
        import tokenizers

        try:
            transformers = hf_auto.quiet_transformers()
        except ImportError:
            raise TokenizerConfigError("HuggingFaceTokenizer needs transformers 5 (pip install "
                                       "'transformers>=5.24,<6'): Megatron loads the folder "
                                       "with its AutoTokenizer") from None
        folder = hf_folder(spec.model)
        path = spec.model if spec.model.endswith(".json") else os.path.join(folder, "tokenizer.json")
        if not fsutil.exists(path):
            raise TokenizerConfigError(f"--tokenizer-model {spec.model}: no tokenizer.json there "
                                       "(only local or fsspec files are read; nothing is "
                                       "downloaded from a hub)")
        files = [path, *[p for p in hf_auto.folder_files(folder)
                         if os.path.basename(p) != "tokenizer.json"]]
        local = hf_auto.local_folder(folder, files, tokenizer_json=path)
        if custom := hf_auto.custom_code(local):
            raise TokenizerConfigError(
                f"--tokenizer-model {spec.model}: its {custom} names its own tokenizer code "
                "(auto_map), which tokenbeam never runs (Megatron only with "
                "--trust-remote-code); use a folder whose tokenizer_class transformers has "
                "built in")
        try:
            self._hf = hf_auto.load(local, vocab_file=hf_auto.local_file(spec.vocab_file),
                                    merge_file=hf_auto.local_file(spec.merge_file),
                                    special_tokens=spec.special_tokens, legacy=spec.legacy)
        except (OSError, ValueError, KeyError, AttributeError, TypeError) as exc:
            if not all(_parses(p) for p in files):
                raise  # a damaged file: named by _load_reference
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
            raise TokenizerConfigError(
                f"--tokenizer-model {spec.model}: transformers' AutoTokenizer cannot load this "
                f"folder ({type(exc).__name__}: {first}); Megatron loads it the same way, so "
                "fix its tokenizer_config.json (e.g. a tokenizer_class transformers 5 "
                "has)") from None
        self._tok = self._hf.backend_tokenizer
        # transformers' calls run without truncation or padding and leave its Rust tokenizer
        # so after the first call; set so now, for the backends that encode with it directly
        self._tok.no_truncation()
        self._tok.no_padding()
        self.library_version = transformers.__version__
        self.tokenizers_version = tokenizers.__version__
        self.vocab_size = len(self._hf)
        self._special = spec.add_special_tokens
        # special tokens would be added to every piece; the cut rules hold for the tokenizer
        # transformers ended up with, and tokenize() maps each token to its id on its own
        self.cuts = None if self._special else cut_pattern(json.loads(self._tok.to_str()))
        self.eod = hf_auto.token_id(self._hf, self._hf.eos_token)
        self._folder_eod = self.eod  # before any --eod-id (_build_reference)
        self.bos = hf_auto.token_id(self._hf, self._hf.bos_token)
        self._path = path

    def ids_as_before(self) -> bool:
        """Whether tokenizer.json read alone by ``tokenizers`` (what tokenbeam encoded with
        before transformers loaded folders, issue 25) gives these ids: same vocabulary size and
        ids on the probe texts, the folder's special tokens among them. Where not, the configs
        change the ids, and shards committed before must not be kept (describe: the key moves).
        Found once per tokenizer (the driver asks for the workers' record and for describe)."""
        return self._ids_as_before

    @functools.cached_property
    def _ids_as_before(self) -> bool:
        import tokenizers

        with fsutil.open_file(self._path, "rb") as f:
            plain = tokenizers.Tokenizer.from_str(f.read().decode("utf-8"))
        plain.no_truncation()
        plain.no_padding()
        if plain.get_vocab_size(with_added_tokens=True) != self.vocab_size:
            return False
        texts = list(ADVERSARIAL) + probe_texts(self)
        before = [e.ids for e in plain.encode_batch_fast(texts, add_special_tokens=self._special)]
        try:
            return before == [list(ids) for ids in self._encode_plain(texts)]
        except ValueError:  # a text without ids (no unk_token): tokenbeam failed it before too
            return False

    @functools.cached_property
    def resolved(self) -> hf_resolved.ResolvedHF:
        """What workers need to build the Rust backends without transformers."""
        return hf_resolved.ResolvedHF.of(self._tok, vocab_size=self.vocab_size,
                                         eod=self._folder_eod, bos=self.bos,
                                         transformers_version=self.library_version,
                                         configs_change_ids=not self.ids_as_before())

    @functools.cached_property
    def backend(self):
        """The Rust tokenizer the fast and tokenizers backends encode with: made from
        :attr:`resolved`'s bytes, so that the self-check runs on what workers build."""
        return self.resolved.build()

    def _encode_plain(self, texts):
        return hf_auto.megatron_ids(self._hf, texts, include_special=self._special)

    def decode(self, ids):
        return self._tok.decode([int(i) for i in ids], skip_special_tokens=False)


class HFBackendTokenizer(_RustTokenizer):
    """The ``tokenizers.Tokenizer`` transformers built for a HuggingFace folder, encoding on its
    own (Rust, batched, threaded) in place of transformers' Python calls: only where the
    self-check found the reference's ids. Vocabulary, EOD, BOS and cuts are the reference's."""

    name = "tokenizers"

    def __init__(self, reference: HuggingFaceTokenizer | ResolvedHFTokenizer):
        self.reference = reference
        self._tok = reference.backend
        self.library_version = reference.tokenizers_version
        self._special = reference._special
        self.vocab_size, self.eod, self.bos = reference.vocab_size, reference.eod, reference.bos
        self.cuts = reference.cuts


class ResolvedHFTokenizer(Tokenizer):
    """A worker's stand-in for :class:`HuggingFaceTokenizer` under the Rust backends: the
    tokenizer, vocabulary, EOD and BOS the driver resolved (``spec.resolved``,
    transforms/hf_resolved.py), without transformers. It is not a backend itself: Megatron's
    ids come from transformers' calls, which it does not make."""

    library = "transformers"

    def __init__(self, spec: TokenizerSpec):
        resolved = spec.resolved
        self.resolved = resolved
        self.backend = resolved.build()
        self.library_version = resolved.transformers_version
        self.tokenizers_version = resolved.tokenizers_version
        self.vocab_size, self.eod, self.bos = resolved.vocab_size, resolved.eod, resolved.bos
        self._special = spec.add_special_tokens
        self.cuts = None if self._special else cut_pattern(json.loads(resolved.json_text()))

    def _encode_plain(self, texts):
        raise TokenizerConfigError("a HuggingFace folder's reference ids come from "
                                   "transformers; load the spec with backend='reference'")

    def decode(self, ids):
        return self.backend.decode([int(i) for i in ids], skip_special_tokens=False)


def _proto_fields(data: bytes):
    """(field number, wire type, value) of one protobuf message level: ints for varints,
    bytes for length-delimited fields (fixed-width fields skipped as raw bytes)."""
    pos = 0
    while pos < len(data):
        key, pos = tokenizer_files.varint(data, pos)
        field, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = tokenizer_files.varint(data, pos)
        elif wire == 2:
            size, pos = tokenizer_files.varint(data, pos)
            value, pos = data[pos:pos + size], pos + size
        elif wire in (1, 5):
            width = 8 if wire == 1 else 4
            value, pos = data[pos:pos + width], pos + width
        else:
            raise ValueError(f"unsupported protobuf wire type {wire}")
        yield field, wire, value


SP_MODEL_TYPES = {1: "unigram", 2: "bpe", 3: "word", 4: "char"}


def sentencepiece_model_type(model_proto: bytes) -> str:
    """The algorithm a SentencePiece ``.model`` was trained as, read from the model itself
    (``ModelProto.trainer_spec`` = field 2, ``TrainerSpec.model_type`` = field 3; absent means
    the proto's default, unigram)."""
    for field, wire, value in _proto_fields(model_proto):
        if field == 2 and wire == 2:
            for inner, inner_wire, kind in _proto_fields(value):
                if inner == 3 and inner_wire == 0:
                    return SP_MODEL_TYPES.get(kind, f"type {kind}")
            return "unigram"
    return "unigram"


def sentencepiece_cut_pattern(model_type: str) -> re.Pattern | None:
    """Where a long text may be cut for a SentencePiece model of ``model_type``: nowhere.

    unigram: the ids are the best path through a lattice over the whole normalised text, and
    near-ties between segmentations (score gaps of 1e-4) are decided by floating-point sums
    that run from the start of the text, so a cut anywhere can change ids far from it (a 2 MB
    document cut into 1 MB pieces changed 38 of 691,699 ids). bpe/word/char: the whitespace
    and normaliser handling around a cut is not proven here. Whole texts cost memory (see
    README, Memory), never correctness."""
    del model_type  # every type says no today; the argument keeps the decision per model
    return None


class SentencePieceTokenizer(Tokenizer):
    library = "sentencepiece"

    def __init__(self, spec: TokenizerSpec):
        import sentencepiece

        if not spec.model:
            raise TokenizerConfigError(f"{spec.kind} needs --tokenizer-model pointing at a .model")
        with fsutil.open_file(spec.model, "rb") as f:
            proto = f.read()
        self._sp = sentencepiece.SentencePieceProcessor(model_proto=proto)
        self.model_type = sentencepiece_model_type(proto)
        self.cuts = sentencepiece_cut_pattern(self.model_type)
        self.library_version = sentencepiece.__version__
        self.vocab_size = self._sp.get_piece_size()
        self.eod = self._sp.eos_id() if self._sp.eos_id() >= 0 else None
        self.bos = self._sp.bos_id() if self._sp.bos_id() >= 0 else None
        self._prepend_bos = spec.add_special_tokens and self.bos is not None
        self._specials: dict[str, int] = {}
        self._special_re = None
        # the id dropped from the start of a segment between two special tokens (None: none)
        self._trim_after_special: int | None = None
        if spec.legacy and spec.kind == "Llama2Tokenizer":
            # the legacy class prepends bos to every tokenize() call, empty texts included
            self._prepend_bos = self.bos is not None
        elif spec.legacy and spec.kind == "SentencePieceTokenizer":
            self._legacy_specials()
        elif spec.special_tokens and not spec.legacy:
            self._wrapper_specials(spec.special_tokens)

    def _wrapper_specials(self, tokens: Sequence[str]) -> None:
        """Megatron's ``--tokenizer-sentencepiece-legacy`` wrapper with ``--tokenizer-special-
        tokens`` (megatron/core/tokenizers/text/libraries/sentencepiece_tokenizer.py): a token
        the model lacks (``piece_to_id`` gives the unk id, ``<unk>`` itself included) gets the
        next id after the pieces, one it has keeps its piece id; the text is split at them as
        for the legacy class, and a segment between two special tokens loses its first id when
        that is the id of ``▁`` (the last segment keeps it, as in Megatron)."""
        unk = self._sp.unk_id()
        for token in tokens:
            piece = self._sp.piece_to_id(token)
            if piece == unk and token not in self._specials:
                self._specials[token] = self.vocab_size
                self.vocab_size += 1
            elif piece != unk:
                self._specials[token] = piece
        self._trim_after_special = self._sp.piece_to_id("\u2581")
        self._special_re = re.compile("|".join(re.escape(t) for t in self._specials))

    def _legacy_specials(self) -> None:
        """Megatron's legacy SentencePieceTokenizer vocabulary: the pieces, then each special
        token the model lacks, in this order; EOD is ``<EOD>``."""
        pieces = {self._sp.id_to_piece(i): i for i in range(self._sp.get_piece_size())}

        def piece_or(piece_id: int, fallback: str) -> str:
            size = self._sp.get_piece_size()
            return self._sp.id_to_piece(piece_id) if 0 <= piece_id < size else fallback

        names = ["<CLS>", "<SEP>", "<EOD>", "<MASK>", piece_or(self._sp.pad_id(), "<PAD>"),
                 piece_or(self._sp.bos_id(), "<BOS>"), piece_or(self._sp.eos_id(), "<EOS>")]
        for name in names:
            if name not in pieces:
                pieces[name] = len(pieces)
            self._specials.setdefault(name, pieces[name])
        self.vocab_size = len(pieces)
        self.eod = self._specials["<EOD>"]
        self.bos = self._specials[names[5]]
        # Megatron takes the leftmost occurrence of any special token, the first-added on a
        # tie: an alternation in insertion order matches exactly that
        self._special_re = re.compile("|".join(re.escape(t) for t in self._specials))

    def _encode_plain(self, texts):
        if self._special_re is None:
            return self._sp.encode(texts)
        segments, layout = [], []
        for text in texts:
            parts, start = [], 0
            for m in self._special_re.finditer(text):
                parts.append((len(segments), start > 0))
                segments.append(text[start:m.start()])
                parts.append((-1 - self._specials[m.group()], False))
                start = m.end()
            parts.append((len(segments), False))
            segments.append(text[start:])
            layout.append(parts)
        encoded = self._sp.encode(segments)
        trim = self._trim_after_special
        out = []
        for parts in layout:
            ids = []
            for p, between in parts:
                if p < 0:
                    ids.append(-1 - p)
                elif between and trim is not None and encoded[p][:1] == [trim]:
                    ids.extend(encoded[p][1:])
                else:
                    ids.extend(encoded[p])
            out.append(ids)
        return out

    def encode_batch(self, texts):
        ids, lengths = super().encode_batch(texts)
        if not self._prepend_bos or not len(lengths):
            return ids, lengths
        starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
        return np.insert(ids, starts, self.bos), lengths + 1

    def decode(self, ids):
        return self._sp.decode([int(i) for i in ids if int(i) < self._sp.get_piece_size()])


class GPT2BPETokenizer(_RustTokenizer):
    """GPT-2's vocab.json + merges.txt as byte-level BPE (GPT-2's regex pre-tokenizer)."""

    def __init__(self, spec: TokenizerSpec):
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
    """Megatron's NullTokenizer (both paths): EOD = ``--vocab-size`` N, vocabulary N + 1 (so
    the dtype is chosen for N + 1). Megatron reads ``[int(x) for x in text.split(' ')]``; this
    reads ``text.split()``, which gives the same ids on every text Megatron accepts (each part
    is then an integer with at most surrounding whitespace) and is lenient where Megatron
    raises and writes nothing: an empty text is an empty document, runs of whitespace
    separate."""

    library = "builtin"
    wide_ids = True  # any integer the text holds

    def __init__(self, spec: TokenizerSpec):
        if spec.vocab_size is None:
            raise TokenizerConfigError("NullTokenizer needs --vocab-size N (EOD = N, as in "
                                       "Megatron)")
        self.vocab_size = spec.vocab_size + 1
        self.eod = spec.vocab_size

    def _encode_plain(self, texts):
        return [list(_null_ids(text)) for text in texts]

    def _encode_flat(self, texts):
        # one int64 array filled part by part: a huge text never becomes a list of Python ints
        lengths = np.zeros(len(texts), dtype=np.int64)
        out = _IdBuffer(np.int64)
        for i, text in enumerate(texts):
            for part in _null_parts(text):
                ids = np.fromiter(_null_ids(part), dtype=np.int64)
                out.extend(ids)
                lengths[i] += len(ids)
        return out.array(), lengths

    def decode(self, ids):
        return " ".join(str(int(i)) for i in ids)


def _null_parts(text: str, size: int = 1 << 20) -> Iterator[str]:
    """``text`` in parts of about ``size`` characters, cut at a space that is dropped, so the
    parts' ``split()`` lists concatenate to the whole text's."""
    start = 0
    while len(text) - start > size:
        cut = text.find(" ", start + size)
        if cut < 0:
            break
        yield text[start:cut]
        start = cut + 1
    yield text[start:] if start else text


def _null_ids(text: str) -> Iterator[int]:
    return (int(x) for x in text.split())


# Megatron's two pre-tokenizer patterns for tiktoken vocabularies (--tiktoken-pattern v1|v2).
TIKTOKEN_PATTERNS = {
    "v1": r"[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+",
    "v2": (r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"
           r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*"
           r"|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"),
}
# The special tokens each path starts from (ids 0..); the rest up to num_special_tokens are
# fillers <SPECIAL_i>.
TIKTOKEN_SPECIALS = {False: ("<unk>", "<s>", "</s>", "<mask>", "<pad>", "<cls>", "<sep>"),
                     True: ("<unk>", "<s>", "</s>")}


class TikTokenizer(Tokenizer):
    library = "tiktoken"

    def __init__(self, spec: TokenizerSpec):
        import base64

        try:
            import tiktoken
        except ImportError:
            raise TokenizerConfigError("TikTokenizer needs the tiktoken package: pip install "
                                       "tiktoken (or tokenbeam's base install)") from None
        check_tiktoken_spec(spec)
        specials = list(spec.special_tokens or TIKTOKEN_SPECIALS[spec.legacy])
        specials += [f"<SPECIAL_{i}>" for i in range(len(specials),
                                                     spec.tiktoken_num_special_tokens)]
        if len(set(specials)) != len(specials):
            raise TokenizerConfigError("--tokenizer-special-tokens: special tokens must be "
                                       "unique")
        inner = spec.vocab_size - spec.tiktoken_num_special_tokens
        try:
            entries = json.loads(_read_text(spec.model))
            ranks = {}
            for i, entry in enumerate(entries[:inner]):
                token = base64.b64decode(entry["token_bytes"])
                if entry["rank"] != i or (i < 256 and token != bytes([i])):
                    raise ValueError(f"entry {i} has rank {entry['rank']}")
                ranks[token] = i + spec.tiktoken_num_special_tokens
        except (ValueError, KeyError, TypeError) as exc:
            raise TokenizerConfigError(
                f"--tokenizer-model {spec.model}: not a tiktoken vocabulary JSON (a list of "
                f"{{rank, token_bytes, token_str}} in rank order, the 256 bytes first): "
                f"{exc}") from None
        if len(ranks) != inner:
            raise TokenizerConfigError(
                f"--vocab-size {spec.vocab_size}: {spec.model} holds {len(ranks)} ranks, but "
                f"--vocab-size minus --tiktoken-num-special-tokens "
                f"({spec.tiktoken_num_special_tokens}) needs {inner}; give --vocab-size "
                f"{len(ranks) + spec.tiktoken_num_special_tokens} or less")
        self._special_ids = {t: i for i, t in enumerate(specials)}
        self._enc = tiktoken.Encoding(name="tokenbeam", pat_str=TIKTOKEN_PATTERNS[
            spec.tiktoken_pattern], mergeable_ranks=ranks, special_tokens=self._special_ids)
        self._allow_special = not spec.legacy
        self.library_version = tiktoken.__version__
        self.vocab_size = spec.vocab_size
        self.eod = self._special_ids["</s>"]
        self.bos = self._special_ids["<s>"]

    def _encode_plain(self, texts):
        if self._allow_special:
            return self._enc.encode_batch(texts, allowed_special="all")
        return self._enc.encode_ordinary_batch(texts)

    def decode(self, ids):
        return self._enc.decode([int(i) for i in ids])


def check_tiktoken_spec(spec: TokenizerSpec) -> None:
    """The TikTokenizer flags Megatron asserts on, as one-line errors naming the flag."""
    if not spec.model:
        raise TokenizerConfigError("TikTokenizer needs --tokenizer-model: the tiktoken "
                                   "vocabulary JSON")
    if spec.vocab_size is None:
        raise TokenizerConfigError("TikTokenizer needs --vocab-size V: special tokens plus the "
                                   "vocabulary's ranks kept (Megatron's default is 131072)")
    if spec.tiktoken_pattern not in TIKTOKEN_PATTERNS:
        raise TokenizerConfigError("TikTokenizer needs --tiktoken-pattern v1 or v2 (the "
                                   "pre-tokenizer the vocabulary was trained with)")
    specials = spec.special_tokens or TIKTOKEN_SPECIALS[spec.legacy]
    if not len(specials) <= spec.tiktoken_num_special_tokens < spec.vocab_size:
        raise TokenizerConfigError(
            f"--tiktoken-num-special-tokens {spec.tiktoken_num_special_tokens}: must be at "
            f"least the {len(specials)} special tokens and below --vocab-size "
            f"{spec.vocab_size}")
    missing = [t for t in TIKTOKEN_SPECIALS[spec.legacy] if t not in specials]
    if missing:
        raise TokenizerConfigError(f"--tokenizer-special-tokens must include "
                                   f"{' '.join(missing)}")


class WordPieceTokenizer(Tokenizer):
    """BERT's WordPiece as Megatron's BertWordPiece tokenizers run it (pure Python, like
    Megatron's; Python's ``unicodedata`` decides categories, so the same Python version gives
    the same ids)."""

    library = "builtin"
    MAX_WORD = 200  # longer words become [UNK]

    def __init__(self, spec: TokenizerSpec):
        import io

        if not spec.vocab_file:
            raise TokenizerConfigError(f"{spec.kind} needs --vocab-file: the WordPiece "
                                       "vocab.txt")
        vocab: dict[str, int] = {}
        # universal newlines and strip(), as BERT's load_vocab reads the file
        for i, line in enumerate(io.StringIO(_read_text(spec.vocab_file), newline=None)):
            vocab[line.strip()] = i
        missing = [t for t in ("[UNK]",) if t not in vocab]
        if missing:
            raise TokenizerConfigError(f"--vocab-file {spec.vocab_file}: no {missing[0]} "
                                       "line; give a BERT WordPiece vocab.txt")
        for token in ("[BOS]", "[EOS]"):
            vocab.setdefault(token, len(vocab))
        self._vocab = vocab
        self._unk = vocab["[UNK]"]
        self._lower = spec.kind == "BertWordPieceLowerCase"
        self.vocab_size = len(vocab)
        self.eod = vocab["[EOS]"]
        self.bos = vocab["[BOS]"]

    def _encode_plain(self, texts):
        return [self._encode_text(t) for t in texts]

    def _encode_text(self, text: str) -> list[int]:
        ids = []
        for word in _bert_words(text, lower=self._lower):
            ids.extend(self._word_ids(word))
        return ids

    def _word_ids(self, word: str) -> list[int]:
        if len(word) > self.MAX_WORD:
            return [self._unk]
        ids, start = [], 0
        while start < len(word):
            for end in range(len(word), start, -1):
                piece = word[start:end] if start == 0 else "##" + word[start:end]
                if piece in self._vocab:
                    ids.append(self._vocab[piece])
                    start = end
                    break
            else:
                return [self._unk]
        return ids

    def decode(self, ids):
        inv = {i: t for t, i in self._vocab.items()}
        return " ".join(inv.get(int(i), "[UNK]") for i in ids).replace(" ##", "")


def _bert_char_class(char: str) -> str:
    """'drop' (NUL, U+FFFD, control and format characters), 'space', 'cjk', 'punct' or ''."""
    import unicodedata

    if char in "\t\n\r ":
        return "space"
    cp = ord(char)
    cat = unicodedata.category(char)
    if cp == 0 or cp == 0xFFFD or cat in ("Cc", "Cf"):
        return "drop"
    if cat == "Zs":
        return "space"
    if (0x4E00 <= cp <= 0x9FFF or 0x3400 <= cp <= 0x4DBF or 0x20000 <= cp <= 0x2A6DF
            or 0x2A700 <= cp <= 0x2B73F or 0x2B740 <= cp <= 0x2B81F or 0x2B820 <= cp <= 0x2CEAF
            or 0xF900 <= cp <= 0xFAFF or 0x2F800 <= cp <= 0x2FA1F):
        return "cjk"
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126 \
            or cat.startswith("P"):
        return "punct"
    return ""


def _bert_words(text: str, *, lower: bool) -> list[str]:
    """BERT's basic tokenizer: control characters out, whitespace to spaces, CJK characters
    set apart, split on Python whitespace; per word: lower case and strip accents (NFD, drop
    Mn) when ``lower``, then every punctuation character is a word of its own."""
    import unicodedata

    cleaned = []
    for char in text:
        kind = _bert_char_class(char)
        if kind == "drop":
            continue
        cleaned.append(" " if kind == "space" else f" {char} " if kind == "cjk" else char)
    words = []
    for word in "".join(cleaned).split():
        if lower:
            word = "".join(c for c in unicodedata.normalize("NFD", word.lower())
                           if unicodedata.category(c) != "Mn")
        current = []
        for char in word:
            if _bert_char_class(char) == "punct":
                if current:
                    words.append("".join(current))
                    current = []
                words.append(char)
            else:
                current.append(char)
        if current:
            words.append("".join(current))
    # BERT joins the pieces with spaces and splits again: a piece holding whitespace (a
    # lower-cased or decomposed character can be one) falls apart there
    return [w for piece in words for w in piece.split()]


# --- Which texts the fast backend gets wrong, per SentencePiece model --------------------------
#
# gigatoken serves a SentencePiece BPE (byte fallback) model by converting it to a tokenizer.json
# (gigatoken/_load/sentencepiece.py): the model's precompiled charsmap as HuggingFace's
# ``Precompiled`` normalizer, ``Strip`` + ``Replace(" {2,}", " ")`` for
# remove_extra_whitespaces, ``Prepend("▁")`` for add_dummy_prefix, the control and user-defined
# pieces as added tokens, and BPE merges recovered from the piece scores. Its BPE gives
# SentencePiece's ids (every code point, alone and in contexts, checked), but four of those
# steps differ from SentencePiece's own normalizer (normalizer.cc) on some texts:
#
# 1. Multi-character charsmap rules. SentencePiece replaces the longest charsmap key at each
#    position, across grapheme boundaries. ``Precompiled`` works per grapheme cluster: a cluster
#    under 6 bytes is replaced whole by the rule of its *shortest* key prefix, else char by char.
#    So "ｶﾞ" stays カ + U+3099 (SentencePiece: ガ), conjoining jamo stay apart, and
#    U+113C2 U+113C2 (Unicode 16) is not composed. Needs a key's first two characters in a row.
# 2. A cluster that starts with a character the charsmap rewrites: the whole cluster becomes
#    that character's replacement, so what follows in the cluster is lost ("Ａ\u0301" -> "A",
#    "é\u0301" -> "é"; SentencePiece keeps the accent). Needs a rewritten character followed
#    by one that extends a cluster (Extend, ZWJ, SpacingMark, CR LF, Hangul syllable
#    sequences, regional-indicator pairs; after a Prepend character, anything).
# 3. remove_extra_whitespaces: SentencePiece strips only spaces (and ▁, the escaped space,
#    at the end); ``Strip`` strips every White_Space character. So a text that starts or ends
#    (after spaces and removed characters) with a character whose replacement holds tab,
#    newline, U+0085, U+00A0, U+3000, ... or ▁ differs (identity normalisation: "\t" is [] for
#    gigatoken, ▁ + <0x09> for SentencePiece; nmt_nfkc: only U+0085 survives to the edges).
# 4. add_dummy_prefix without remove_extra_whitespaces: SentencePiece adds ▁ to any non-empty
#    input, ``Prepend`` only to a non-empty normalised text: a text of removed characters only.
# 5. Control and user-defined pieces ("<s>", "</s>") are matched in the text by gigatoken
#    (added tokens) and never by SentencePiece's encode: a text holding one differs.
#
# A text that can meet none of these goes to gigatoken; the others (rare in real corpora) to
# the reference. All character classes come from the model's own normalizer spec and pieces.

_SPACE_SYMBOL = "\u2581"
_UNICODE_WHITE_SPACE = set("\t\n\v\f\r \x85\xa0\u1680\u2028\u2029\u202f\u205f\u3000") | {
    chr(c) for c in range(0x2000, 0x200B)}
# SentencePiece piece types (sentencepiece_model.proto)
_SP_CONTROL, _SP_USER_DEFINED = 3, 4


def _charsmap_rules(blob: bytes) -> tuple[dict[str, str], set[str], set[str]]:
    """A precompiled charsmap (darts-clone double array of UTF-8 keys + NUL-terminated
    replacements) as: the replacement of each single-character key, the first characters of
    the multi-character keys, and the characters that follow one of those first characters in
    a key. Every code point is looked up at once (numpy), then one character deeper from the
    first characters: a fraction of a second for a nmt_nfkc map (225k keys)."""
    if len(blob) < 4:
        return {}, set(), set()
    trie_size = int.from_bytes(blob[:4], "little")
    units = np.frombuffer(blob[4:4 + trie_size], dtype="<u4").astype(np.int64)
    replacements = blob[4 + trie_size:]

    def offset(u):
        return (u >> 10) << ((u & (1 << 9)) >> 6)

    def step(pos, byte):
        """Child of each node ``pos`` by ``byte`` (-1: none); and whether it ends a key."""
        cand = pos ^ byte
        ok = (pos >= 0) & (cand < len(units))
        unit = np.where(ok, units[np.where(ok, cand, 0)], 0)
        ok &= (unit & ((1 << 31) | 0xFF)) == byte
        return np.where(ok, cand ^ offset(unit), -1), ok & (((unit >> 8) & 1) == 1)

    def children(pos, labels):
        """(parent row, label, child node) of every child of the nodes ``pos`` by ``labels``."""
        cand = pos[:, None] ^ labels[None, :]
        ok = cand < len(units)
        unit = np.where(ok, units[np.where(ok, cand, 0)], 0)
        rows, cols = np.nonzero(ok & ((unit & ((1 << 31) | 0xFF)) == labels[None, :]))
        return rows, labels[cols], cand[rows, cols] ^ offset(unit[rows, cols])

    points = np.array([c for c in range(1, 0x110000) if not 0xD800 <= c <= 0xDFFF], np.int64)
    utf8 = _utf8_bytes(points)
    root = int(offset(units[0]))
    pos = np.full(len(points), root, dtype=np.int64)
    leaf = np.zeros(len(points), dtype=bool)
    for k in range(4):
        more = utf8[:, k] > 0
        stepped, stepped_leaf = step(pos[more], utf8[more, k])
        pos[more], leaf[more] = stepped, stepped_leaf
    single = {}
    for point, node in zip(points[leaf].tolist(), pos[leaf].tolist()):
        value = int(units[node] & ((1 << 31) - 1))
        end = replacements.index(b"\0", value)
        single[chr(point)] = replacements[value:end].decode("utf-8", "replace")
    inside = np.flatnonzero(pos >= 0)
    starts = np.unique(children(pos[inside], np.arange(1, 256, dtype=np.int64))[0])
    firsts = {chr(int(points[inside[i]])) for i in starts}
    # one whole UTF-8 character on from each first character's node
    rows, lead, node = children(pos[inside[starts]], np.arange(1, 256, dtype=np.int64))
    size = np.select([lead < 0x80, lead >> 5 == 6, lead >> 4 == 14, lead >> 3 == 30],
                     [1, 2, 3, 4], 0)
    seconds: set[str] = set()
    partial = [(lead[size == n][:, None], node[size == n], n - 1) for n in (1, 2, 3, 4)]
    while partial:
        done, left = [], []
        for prefix, nodes, need in partial:
            if need == 0:
                done.append(prefix)
                continue
            rows, byte, child = children(nodes, np.arange(0x80, 0xC0, dtype=np.int64))
            left.append((np.concatenate([prefix[rows], byte[:, None]], axis=1), child, need - 1))
        for prefix in done:
            seconds.update(bytes(row).decode("utf-8", "replace") for row in prefix.tolist())
        partial = left
    seconds.discard("\ufffd")  # a partial key (bytes that are not a character) never matches
    return single, firsts, seconds


def _utf8_bytes(points: np.ndarray) -> np.ndarray:
    """The UTF-8 bytes of each code point, as rows of 4 (0 after the last byte)."""
    out = np.zeros((len(points), 4), dtype=np.int64)
    one, two, three = points < 0x80, (points >= 0x80) & (points < 0x800), \
        (points >= 0x800) & (points < 0x10000)
    four = points >= 0x10000
    out[one, 0] = points[one]
    p = points[two]
    out[two, 0], out[two, 1] = 0xC0 | (p >> 6), 0x80 | (p & 0x3F)
    p = points[three]
    out[three, 0], out[three, 1], out[three, 2] = (0xE0 | (p >> 12), 0x80 | ((p >> 6) & 0x3F),
                                                   0x80 | (p & 0x3F))
    p = points[four]
    out[four, 0], out[four, 1] = 0xF0 | (p >> 18), 0x80 | ((p >> 12) & 0x3F)
    out[four, 2], out[four, 3] = 0x80 | ((p >> 6) & 0x3F), 0x80 | (p & 0x3F)
    return out


_GRAPHEME_PROPERTIES = {"prepend": r"\p{GCB=Prepend}", "ri": r"\p{GCB=Regional_Indicator}",
                        "L": r"\p{GCB=L}", "V": r"\p{GCB=V}", "T": r"\p{GCB=T}",
                        "LV": r"\p{GCB=LV}", "LVT": r"\p{GCB=LVT}"}
# What may follow the first character inside a cluster (GB9, GB9a); unassigned code points too,
# as a newer Unicode than the ``regex`` module's may make one an extender.
_EXTENDERS = r"[\p{GCB=Extend}\p{GCB=ZWJ}\p{GCB=SpacingMark}\p{Cn}]"


@functools.lru_cache(maxsize=1)
def _grapheme_classes() -> dict:
    """Grapheme_Cluster_Break classes (the ``regex`` module's Unicode data): small ones as sets
    of characters, the extenders as a list of code point ranges."""
    import regex

    everything = "".join(map(chr, range(0xD800))) + "".join(map(chr, range(0xE000, 0x110000)))

    def point(index: int) -> int:
        return index if index < 0xD800 else index + 0x800

    out: dict = {name: frozenset(regex.findall(prop, everything))
                 for name, prop in _GRAPHEME_PROPERTIES.items()}
    out["extend"] = [(point(m.start()), point(m.end() - 1))
                     for m in regex.finditer(_EXTENDERS + "+", everything)]
    return out


def _table_set(table: np.ndarray, chars, bit: int) -> None:
    """Set ``bit`` in ``table`` for ``chars``: characters, or (first, last) code point ranges."""
    for item in chars:
        if isinstance(item, tuple):
            table[item[0]:item[1] + 1] |= bit
        else:
            table[ord(item)] |= bit


@dataclasses.dataclass
class FastRouting:
    """Which texts a fast backend would get wrong for one model (see the comment above):
    :meth:`mask` is True for those. Built by :func:`sentencepiece_routing`.

    Cost per batch: the texts as one UTF-32 array and two table lookups per character (rules
    1, 2: a character pair, bit ``b`` of ``first`` on the left and of ``second`` on the right);
    per text, set lookups of its first and last characters (rules 3, 4) and one regex search
    for the literals (rule 5)."""

    first: np.ndarray | None = None  # uint8 per code point (rules 1, 2)
    second: np.ndarray | None = None
    edge_skip: str = ""  # characters Strip and SentencePiece both see through at the edges
    edge: frozenset = frozenset()  # rule 3: these at an edge (after edge_skip characters)
    removed_only: str = ""  # rule 4: a text of only these characters
    literals: tuple[str, ...] = ()  # rule 5
    describe: dict = dataclasses.field(default_factory=dict)

    def __post_init__(self):
        self._edge_first = frozenset(self.edge) | frozenset(self.edge_skip)
        if not all(self.literals):
            raise ValueError(f"an empty routing literal: {self.literals!r}")
        self._literal_re = re.compile("|".join(map(re.escape, self.literals)))

    def needs_reference(self, text: str) -> bool:
        return bool(self.mask([text])[0])

    def _pairs(self, texts: Sequence[str]) -> np.ndarray:
        """Texts holding a flagged character pair."""
        out = np.zeros(len(texts), dtype=bool)
        points = np.frombuffer("".join(texts).encode("utf-32-le", "surrogatepass"),
                               dtype=np.uint32)
        if len(points) < 2:
            return out
        hit = np.flatnonzero(self.second[points[1:]] & self.first[points[:-1]]) + 1
        if len(hit):
            ends = np.cumsum(np.fromiter(map(len, texts), dtype=np.int64, count=len(texts)))
            owner = np.searchsorted(ends, hit, side="right")
            starts = ends - np.fromiter(map(len, texts), dtype=np.int64, count=len(texts))
            out[owner[hit > starts[owner]]] = True  # both characters in the same text
        return out

    def mask(self, texts: Sequence[str]) -> np.ndarray:
        out = self._pairs(texts) if self.first is not None else np.zeros(len(texts), bool)
        edge, edge_first, skip = self.edge, self._edge_first, self.edge_skip
        removed = self.removed_only
        if self.literals and len(texts):
            # one search per text (re's literal-prefix scan: 1 GB/s here, 2x `in` per literal)
            search = self._literal_re.search
            out |= np.fromiter((search(t) is not None for t in texts), dtype=bool,
                               count=len(texts))
        if not (edge or removed):
            return out
        for i, text in enumerate(texts):
            if out[i] or not text:
                continue
            if edge and ((text[0] in edge_first and text.lstrip(skip)[:1] in edge)
                         or (text[-1] in edge_first and text.rstrip(skip)[-1:] in edge)):
                out[i] = True
            elif removed and text[0] in removed and not text.lstrip(removed):
                out[i] = True
        return out


def sentencepiece_routing(model_proto: bytes) -> FastRouting:
    """The :class:`FastRouting` of a SentencePiece BPE model that gigatoken serves, from the
    model's normalizer spec (charsmap, add_dummy_prefix, remove_extra_whitespaces) and pieces."""
    normalizer: dict = {}
    literals = []
    for field, wire, value in _proto_fields(model_proto):
        # A piece: piece(1), type(3). Most are NORMAL (type absent or 1); only a message holding
        # the byte 0x18 (the key of field 3 as a varint) can hold another type: parse only those.
        if field == 1 and wire == 2 and b"\x18" in value:
            piece, kind = "", 1
            for f, w, v in _proto_fields(value):
                if f == 1 and w == 2:
                    piece = v.decode("utf-8", "replace")
                elif f == 3 and w == 0:
                    kind = v
            if kind in (_SP_CONTROL, _SP_USER_DEFINED) and piece:
                literals.append(piece)
        elif field == 3 and wire == 2:
            normalizer = {f: v for f, _, v in _proto_fields(value)}
    dummy_prefix = bool(normalizer.get(3, 1))
    extra_ws = bool(normalizer.get(4, 1))
    single, firsts, others = _charsmap_rules(normalizer.get(2, b""))
    rewritten = set(single)

    def norm(c: str) -> str:
        return single.get(c, c)

    branches = []  # (second characters, first characters) of pairs that route
    if firsts:  # rule 1: a multi-character key can start here
        branches.append((others, firsts))
    if rewritten:  # rule 2: a rewritten character that starts a cluster of two or more
        g = _grapheme_classes()  # (0.2 s: only for models whose charsmap rewrites something)
        branches.append((g["extend"], rewritten))
        spaces_or_nothing = extra_ws and not norm("\r").strip(" ") and not norm("\n").strip(" ")
        if "\r" in rewritten and not spaces_or_nothing:
            branches.append(({"\n"}, {"\r"}))
        for after, before in (({"L", "V", "LV", "LVT"}, "L"), ({"V", "T"}, "V"),
                              ({"V", "T"}, "LV"), ({"T"}, "T"), ({"T"}, "LVT"), ({"ri"}, "ri")):
            firsts_here = rewritten & g[before]
            if firsts_here:
                branches.append((set().union(*(g[a] for a in after)), firsts_here))
        prepend = rewritten & g["prepend"]  # a Prepend character joins whatever follows
        if prepend:
            branches.append(([(0, 0x10FFFF)], prepend))
    first = second = None
    if branches:
        first = np.zeros(0x110000, dtype=np.uint16)
        second = np.zeros(0x110000, dtype=np.uint16)
        for bit, (seconds, firsts_of) in enumerate(branches):
            _table_set(second, seconds, 1 << bit)
            _table_set(first, firsts_of, 1 << bit)
    edge, edge_skip = frozenset(), ""
    if extra_ws:
        candidates = _UNICODE_WHITE_SPACE | {_SPACE_SYMBOL} | rewritten
        edge = frozenset(c for c in candidates
                         if any(ch in _UNICODE_WHITE_SPACE - {" "} or ch == _SPACE_SYMBOL
                                for ch in norm(c)))
        edge_skip = "".join(sorted(c for c in rewritten | {" "}
                                   if not norm(c).strip(" ") and c not in edge))
    removed_only = ""
    if dummy_prefix and not extra_ws:
        removed_only = "".join(sorted(c for c in rewritten if norm(c) == ""))
    return FastRouting(first=first, second=second, edge_skip=edge_skip, edge=edge,
                       removed_only=removed_only, literals=tuple(literals),
                       describe={"multi_char_rules": len(firsts), "rewritten": len(rewritten),
                                 "edge_characters": len(edge), "literals": literals})


def _gigatoken_from_sentencepiece(proto: bytes):
    """gigatoken's tokenizer for a SentencePiece model. gigatoken converts the ``.model`` to a
    tokenizer JSON in Python (0.34 s for a 32k model, in every process that loads it); the JSON
    is kept in the cache folder by the model's sha256 and gigatoken's version (0.05 s to load)."""
    import gigatoken

    try:
        from gigatoken._load.sentencepiece import sentencepiece_to_tokenizer_json
    except ImportError:  # moved in another gigatoken version: convert every time
        return gigatoken.Tokenizer.from_sentencepiece(proto)
    version = importlib.metadata.version("gigatoken")
    path = os.path.join(fsutil.cache_dir(), "gigatoken",
                        f"{hashlib.sha256(proto).hexdigest()}-{version}.json")
    try:
        with open(path, "rb") as f:
            return gigatoken.Tokenizer.from_json(f.read())
    except Exception:  # noqa: BLE001 - not converted yet, or a damaged file (whatever the
        pass  # JSON loader raises on it): converted and written again
    data = sentencepiece_to_tokenizer_json(proto)
    fsutil.write_cache_file(path, data.encode() if isinstance(data, str) else data)
    return gigatoken.Tokenizer.from_json(data)


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
        # texts the fast backend would get wrong go to the reference (None: no known ones)
        self.routing: FastRouting | None = None
        if spec.kind in SP_KINDS:
            with fsutil.open_file(spec.model, "rb") as f:
                proto = f.read()
            self._g = _gigatoken_from_sentencepiece(proto)
            self.routing = sentencepiece_routing(proto)
        else:  # HF tokenizer.json, or GPT-2 files already assembled as a tokenizers.Tokenizer
            self._g = gigatoken.Tokenizer(reference.backend)
        self.vocab_size, self.eod, self.bos = reference.vocab_size, reference.eod, reference.bos
        self.cuts, self.wide_ids = reference.cuts, reference.wide_ids
        self._calls = threading.local()

    def _encode_plain(self, texts):
        return self._g.encode_batch_list(texts)

    def _encode_one(self, text):
        return self._g.encode(text)

    def _encode_flat(self, texts):
        layout = self._g.encode_batch(texts).layout
        offsets = np.asarray(layout.offsets.data, dtype=np.int64)
        ids = np.asarray(layout.content.data)[offsets[0]:offsets[-1]]
        return ids, np.diff(offsets)

    def last_routed(self) -> int:
        """How many texts this thread's last ``encode_batch`` sent to the reference."""
        return getattr(self._calls, "routed", 0)

    def _routed(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """Ids of ``texts``: those :attr:`routing` flags from the reference, the rest from
        gigatoken, in one call each, put back in order."""
        mask = self.routing.mask(texts) if self.routing is not None and len(texts) else None
        self._calls.routed = int(mask.sum()) if mask is not None else 0
        if not self._calls.routed:
            return super().encode_batch(texts)
        fast_ids, fast_lengths = super().encode_batch([t for t, m in zip(texts, mask) if not m])
        # the base class's encode_batch: the BOS is added below, once for every text
        ref_ids, ref_lengths = Tokenizer.encode_batch(self.reference,
                                                      [t for t, m in zip(texts, mask) if m])
        lengths = np.empty(len(texts), dtype=np.int64)
        lengths[~mask], lengths[mask] = fast_lengths, ref_lengths
        out = np.empty(int(lengths.sum()), dtype=np.result_type(fast_ids.dtype, ref_ids.dtype))
        starts = np.cumsum(lengths) - lengths
        for ids, part_lengths, which in ((fast_ids, fast_lengths, ~mask),
                                         (ref_ids, ref_lengths, mask)):
            if len(ids):
                within = np.arange(len(ids)) - np.repeat(np.cumsum(part_lengths) - part_lengths,
                                                         part_lengths)
                out[np.repeat(starts[which], part_lengths) + within] = ids
        return out, lengths

    def encode_batch(self, texts):
        ids, lengths = self._routed(texts)
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


# Texts each of which meets one of the known differences of gigatoken from SentencePiece (see
# "Which texts the fast backend gets wrong"): the routing must send every one to the reference.
ROUTING_PROBES = [
    "\t", "a\t", "\tb", " \x85 ", "x\x85", "\u3000x\u3000", "x \u2581", "\u2581",
    "\uff76\uff9e", "\u1100\u1161", "\U000113c2\U000113c2", "\uff21\u0301", "e\u0301\u0301",
    "\u00a0\u0301", "x\r\ny", "\u200b", "a </s> b", "<s>", "<unk>", "\u0600\u0661",
]
SAMPLE_CHARS = 1 << 16


def probe_texts(reference: Tokenizer) -> list[str]:
    """Texts made from a HuggingFace folder's own special and added tokens (as the config
    left them: named in tokenizer_config.json, added by Megatron, the unknown-token literal),
    each alone, glued between words, spaced, and in other case: where a config's effects
    (splitting on special tokens, split_special_tokens, lower-casing, a prefix space) show."""
    hf = getattr(reference, "_hf", None)
    if hf is None:
        return []
    tokens = sorted({str(t) for t in hf.all_special_tokens}
                    | {str(t) for t in hf.get_added_vocab()})[:200]
    out = []
    for t in tokens:
        out += [t, f"a{t}b", f" {t} ", f"x {t}{t} y", t.lower(), t.upper()]
    out += [" ".join(tokens), "".join(tokens), "Hello World, HELLO É Ö ß", " the The THE"]
    return out


def self_check(fast: Tokenizer, reference: Tokenizer, samples: Sequence[str]) -> str | None:
    """None when ``fast`` gives the reference's ids on every text, else the first difference.
    A fast backend with routing must be exact through it (the texts it routes are encoded by
    the reference): this checks the routing, not global agreement. Samples are compared on
    their first SAMPLE_CHARS characters: the first record of an input can be one huge
    document, and the driver would tokenize it twice here."""
    texts = list(ADVERSARIAL) + list(ROUTING_PROBES) + probe_texts(reference) + [
        s[:SAMPLE_CHARS] for s in samples]
    got_ids, got_lengths = fast.encode_batch(texts)
    try:
        want_ids, want_lengths = reference.encode_batch(texts)
    except Exception:  # noqa: BLE001 - the reference refuses a text: which, and why
        for i, text in enumerate(texts):
            try:
                reference.encode_batch([text])
            except Exception as exc:  # noqa: BLE001
                return (f"text {i} ({text[:40]!r}...): the reference fails on it ({exc}), "
                        "the fast one does not")
        raise
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


# The self-check's outcome is kept per tokenizer files, options and library versions in a
# small JSON file, so that later runs with the same tokenizer skip it. Bump CHECK_VERSION when
# the check or the routing changes (4: HuggingFace folders checked on the tokenizer rebuilt
# from the bytes workers get, transforms/hf_resolved.py).
CHECK_VERSION = 4


def check_cache_path() -> str:
    return os.path.join(fsutil.cache_dir(), "backend-check.json")


def _check_key(spec: TokenizerSpec) -> str:
    versions = {}
    for package in ("gigatoken", "tokenizers", "sentencepiece", "regex",  # regex: GCB data
                    "transformers"):
        try:
            versions[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            versions[package] = None
    key = {"check": CHECK_VERSION, "kind": spec.kind, "versions": versions,
           "files": [file_digest(p) for p in spec.files()], "options": spec.options(),
           "add_special_tokens": spec.add_special_tokens, "eod_id": spec.eod_id}
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()


def _read_check_cache() -> dict:
    try:
        with open(check_cache_path(), encoding="utf-8") as f:
            cache = json.load(f)
        return cache if isinstance(cache, dict) else {}
    except (OSError, ValueError):
        return {}  # missing or corrupt: checked again, and rewritten


def _write_check_cache(key: str, entry: dict) -> None:
    path = check_cache_path()
    cache = _read_check_cache()
    cache[key] = entry
    # a read-only home: the check runs every time
    fsutil.write_cache_file(path, json.dumps(cache, indent=1, sort_keys=True).encode())


def _check_fast(spec: TokenizerSpec, reference: Tokenizer,
                samples: Sequence[str]) -> tuple[str | None, str]:
    """(why fast cannot be used or None, what was checked)."""
    try:
        fast = load_tokenizer(dataclasses.replace(spec, backend="fast"))
    except ImportError:
        return "gigatoken is not installed (pip install 'tokenbeam[fast]')", ""
    except Exception as exc:  # noqa: BLE001 - any load failure means "not supported"
        first = (str(exc).strip().splitlines() or [""])[0]  # Rust errors add a location
        return f"gigatoken does not support this tokenizer ({type(exc).__name__}: {first})", ""
    why_not = self_check(fast, reference, samples)
    if why_not:
        return f"self-check found different ids: {why_not}", ""
    checked = (f"gigatoken gave identical ids on {_probe_count(reference)} adversarial "
               f"texts and {len(samples)} input samples")
    if fast.routing is not None:
        checked += ("; the kinds of text it gets wrong with this model's normaliser and pieces "
                    "go to the reference")
    return None, checked


def _probe_count(reference: Tokenizer) -> int:
    return len(ADVERSARIAL) + len(ROUTING_PROBES) + len(probe_texts(reference))


def _check_hf_backend(reference: Tokenizer, samples: Sequence[str]) -> tuple[str | None, str]:
    """(why the folder's own tokenizers.Tokenizer cannot stand in for transformers or None,
    what was checked)."""
    why_not = self_check(HFBackendTokenizer(reference), reference, samples)
    if why_not:
        return f"its tokenizers.Tokenizer gave other ids than transformers ({why_not})", ""
    return None, (f"the folder's tokenizers.Tokenizer gave transformers' ids on "
                  f"{_probe_count(reference)} adversarial texts and {len(samples)} input samples")


def choose_backend(spec: TokenizerSpec, samples: Sequence[str]) -> tuple[str, str]:
    """The backend to run and why, for ``spec.backend`` auto/fast/reference: ``fast``
    (gigatoken), ``tokenizers`` (a HuggingFace folder's own Rust tokenizer, as transformers
    built it) or ``reference``. Raises TokenizerConfigError when ``fast`` was demanded but
    cannot be exact. The self-check's outcome is cached (:func:`check_cache_path`)."""
    if spec.backend == "reference":
        return "reference", "--tokenizer-backend reference"
    reference = load_tokenizer(dataclasses.replace(spec, backend="reference"))
    no_fast = None
    if spec.kind in NULL_KINDS + TIKTOKEN_KINDS + WORDPIECE_KINDS:
        no_fast = f"{spec.kind} has no fast backend"
    elif spec.legacy and spec.kind in SP_KINDS:
        no_fast = "--legacy-tokenizer is only supported by the reference backend"
    elif spec.special_tokens and spec.kind in SP_KINDS:
        no_fast = "--tokenizer-special-tokens is only supported by the reference backend"
    elif spec.add_special_tokens and spec.kind in HF_KINDS + GPT2_KINDS:
        no_fast = "--add-special-tokens is only supported by the reference backend"
    if no_fast and (spec.kind not in HF_KINDS or spec.backend == "fast"):
        if spec.backend == "fast":
            raise TokenizerConfigError(f"--tokenizer-backend fast: {no_fast}; use auto or "
                                       "reference")
        return "reference", no_fast
    key = _check_key(spec)
    cached = _read_check_cache().get(key)
    if isinstance(cached, dict) and cached.get("backend") in ("fast", "tokenizers", "reference"):
        chosen, why_not = cached["backend"], cached.get("why_not")
        checked = f"{cached.get('checked')} (cached self-check)"
    else:
        chosen, why_not, checked = _check_backends(spec, reference, samples, no_fast)
        if "not installed" not in (why_not or ""):
            _write_check_cache(key, {"backend": chosen, "why_not": why_not, "checked": checked})
    if chosen != "fast" and spec.backend == "fast":
        raise TokenizerConfigError(f"--tokenizer-backend fast: {why_not}; use auto or reference")
    return chosen, why_not if chosen == "reference" else checked


def _check_backends(spec: TokenizerSpec, reference: Tokenizer, samples: Sequence[str],
                    no_fast: str | None) -> tuple[str, str | None, str]:
    """(backend, why gigatoken is not used or None, what was checked): gigatoken when exact;
    for a HuggingFace folder then its own tokenizers.Tokenizer when exact; else the reference."""
    why_not, checked = (no_fast, "") if no_fast else _check_fast(spec, reference, samples)
    if why_not is None:
        return "fast", None, checked
    if spec.kind in HF_KINDS:
        why_hf, checked_hf = _check_hf_backend(reference, samples)
        if why_hf is None:
            return "tokenizers", why_not, f"{checked_hf}; gigatoken not used: {why_not}"
        why_not = f"{why_not}; {why_hf}: tokenized by transformers, as Megatron does"
    return "reference", why_not, ""


@functools.lru_cache(maxsize=8)
def load_tokenizer(spec: TokenizerSpec) -> Tokenizer:
    """Build the tokenizer (on a worker: call from ``DoFn.setup``). ``spec.backend`` must be
    resolved (``reference`` or ``fast``) by :func:`choose_backend` first; ``auto`` loads the
    reference. Cached per spec: the driver, and the in-process runner's DoFns, load a tokenizer
    once (both backends encode safely from several threads)."""
    if spec.backend not in ("fast", "tokenizers") and spec.resolved is not None:
        return load_tokenizer(dataclasses.replace(spec, resolved=None))
    if spec.backend == "fast":
        return FastTokenizer(_rust_base(spec), spec)
    if spec.backend == "tokenizers" and spec.kind in HF_KINDS:
        return HFBackendTokenizer(_rust_base(spec))
    return _load_reference(spec)


def _rust_base(spec: TokenizerSpec) -> Tokenizer:
    """What a Rust backend of ``spec`` is built on: the driver's resolved HuggingFace
    tokenizer where the spec carries one this process can rebuild (no transformers), else the
    reference tokenizer."""
    if spec.kind in HF_KINDS and spec.resolved is not None and spec.resolved.usable_here():
        tok = ResolvedHFTokenizer(spec)
        if spec.eod_id is not None:  # as _build_reference
            tok.eod = spec.eod_id
        return tok
    return load_tokenizer(dataclasses.replace(spec, backend="reference", resolved=None))


def for_workers(spec: TokenizerSpec) -> TokenizerSpec:
    """``spec`` (its backend chosen by :func:`choose_backend`) with what workers need to build
    a HuggingFace folder's Rust backend without transformers: the driver's resolved tokenizer,
    the one its self-check ran on. Other specs are returned as they are."""
    if spec.kind not in HF_KINDS or spec.backend not in ("fast", "tokenizers"):
        return spec
    reference = load_tokenizer(dataclasses.replace(spec, backend="reference", resolved=None))
    return dataclasses.replace(spec, resolved=reference.resolved)


def _load_reference(spec: TokenizerSpec) -> Tokenizer:
    """The reference tokenizer of ``spec``. A tokenizer file that exists but cannot be parsed
    (truncated, damaged, not the format its flag asks for) raises TokenizerConfigError naming
    it, on the driver's check and on every worker alike, whatever its library raised."""
    try:
        return _build_reference(spec)
    except (TokenizerConfigError, ImportError, OSError, MemoryError):
        raise  # already says what is wrong; a file that cannot be read; a missing library
    except Exception as exc:  # noqa: BLE001 - each library raises its own kind on a bad file
        raise TokenizerConfigError(_damaged_message(spec, exc)) from None


def _damaged_message(spec: TokenizerSpec, exc: Exception) -> str:
    """One line naming the flag and the file its library could not parse (the first text file
    that is not valid UTF-8, or JSON file that is not JSON, else every file of the tokenizer)
    and the fix."""
    flags = {spec.vocab_file: "--vocab-file", spec.merge_file: "--merge-file"}
    files = [p for p in spec.files() if p]
    bad = [p for p in files if not p.endswith(".model") and not _parses(p)][:1] or files
    named = ", ".join(f"{flags.get(p, '--tokenizer-model')} {p}" for p in bad) or spec.kind
    reason = str(exc).splitlines()[0][:160] if str(exc) else type(exc).__name__
    return (f"{named}: not a usable {spec.kind} file: damaged or truncated? ({type(exc).__name__}:"
            f" {reason}); copy it again from its source (compare its sha256 with the original's)")


def _parses(path: str) -> bool:
    """A text file that is UTF-8 (and JSON, for a ``.json``)."""
    try:
        text = _read_text(path)
        if path.endswith(".json"):
            json.loads(text)
    except (OSError, ValueError):  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        return False
    return True


def _build_reference(spec: TokenizerSpec) -> Tokenizer:
    if spec.kind in HF_KINDS:
        tok = HuggingFaceTokenizer(spec)
    elif spec.kind in SP_KINDS:
        tok = SentencePieceTokenizer(spec)
    elif spec.kind in GPT2_KINDS:
        tok = GPT2BPETokenizer(spec)
    elif spec.kind in NULL_KINDS:
        tok = NullTokenizer(spec)
    elif spec.kind in TIKTOKEN_KINDS:
        tok = TikTokenizer(spec)
    elif spec.kind in WORDPIECE_KINDS:
        tok = WordPieceTokenizer(spec)
    else:
        raise TokenizerConfigError(f"unknown tokenizer kind {spec.kind}")
    if spec.eod_id is not None:
        tok.eod = spec.eod_id
    return tok


def describe(spec: TokenizerSpec, tok: Tokenizer) -> dict:
    """The tokenizer's entry in metadata.json (and part of every shard's resume key: its
    digests, not its paths, which are recorded resolved so that they name the files from any
    folder). A HuggingFace folder whose configs change the ids from those of its tokenizer.json
    alone adds ``loader: transformers`` to the options: shards committed before issue 25 with the
    same files are then redone, not kept; other folders keep their keys."""
    options = spec.options()
    reference = getattr(tok, "reference", tok)
    if isinstance(reference, HuggingFaceTokenizer):
        changed = not reference.ids_as_before()
    else:  # a worker's, or the driver's built as the workers build it: the driver's finding
        changed = isinstance(reference, ResolvedHFTokenizer) and \
            reference.resolved.configs_change_ids
    if changed:
        options = {**options, "loader": "transformers"}
    return {
        "kind": spec.kind,
        "model": locations.resolved(spec.model),
        "files": [{"path": locations.resolved(p), "sha256": file_digest(p)} for p in spec.files()],
        "vocab_size": tok.vocab_size,
        "eod_id": tok.eod,
        "add_special_tokens": spec.add_special_tokens,
        **({"options": options} if options else {}),
        "backend": tok.name,
        "library": getattr(tok, "reference", tok).library,
        "library_version": getattr(tok, "reference", tok).library_version,
        "backend_library": tok.library,
        "backend_version": tok.library_version,
    }
