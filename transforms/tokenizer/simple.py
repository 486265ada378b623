"""The small families, each a few dozen lines on a library or on plain Python:

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

import json
import re
from typing import TYPE_CHECKING, Iterator

import numpy as np

from transforms.tokenizer.base import (IdBuffer, RustTokenizer, Tokenizer, TokenizerConfigError,
                                       cut_pattern, read_text)

if TYPE_CHECKING:
    from transforms.tokenizer.spec import TokenizerSpec


class GPT2BPETokenizer(RustTokenizer):
    """GPT-2's vocab.json + merges.txt as byte-level BPE (GPT-2's regex pre-tokenizer)."""

    def __init__(self, spec: TokenizerSpec):
        import tokenizers
        from tokenizers import decoders, models, pre_tokenizers

        if not (spec.vocab_file and spec.merge_file):
            raise TokenizerConfigError("GPT2BPETokenizer needs --vocab-file (vocab.json) and "
                                       "--merge-file (merges.txt)")
        vocab = json.loads(read_text(spec.vocab_file))
        merges = [tuple(line.split(" ")) for line in read_text(spec.merge_file).splitlines()
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
        out = IdBuffer(np.int64)
        for i, text in enumerate(texts):
            for part in _null_parts(text):
                # numpy turns each str into an int64 with Python's int(): the same ids, the
                # same errors (ValueError, OverflowError past int64) as int() in a loop, and
                # 2-3x faster than a generator of int()s
                ids = np.array(part.split(), dtype=np.int64)
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
            entries = json.loads(read_text(spec.model))
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
        self._special_re = re.compile("|".join(map(re.escape, specials)))
        self.library_version = tiktoken.__version__
        self.vocab_size = spec.vocab_size
        self.eod = self._special_ids["</s>"]
        self.bos = self._special_ids["<s>"]

    def _encode_plain(self, texts):
        if not self._allow_special:
            return self._enc.encode_ordinary_batch(texts)
        # tiktoken's encode with special tokens allowed gives encode_ordinary's ids on a text
        # holding none of them (its Rust loop finds no special match and encodes the whole
        # text with the same regex), at a third of the cost: only texts that hold one take
        # the slow call
        holds = [self._special_re.search(text) is not None for text in texts]
        if not any(holds):
            return self._enc.encode_ordinary_batch(texts)
        out = self._enc.encode_ordinary_batch([t for t, h in zip(texts, holds) if not h])
        special = iter(self._enc.encode_batch([t for t, h in zip(texts, holds) if h],
                                              allowed_special="all"))
        ordinary = iter(out)
        return [next(special) if h else next(ordinary) for h in holds]

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
        for i, line in enumerate(io.StringIO(read_text(spec.vocab_file), newline=None)):
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

