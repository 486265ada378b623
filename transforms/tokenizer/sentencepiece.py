"""The SentencePiece family (SentencePieceTokenizer, GPTSentencePieceTokenizer, Llama2Tokenizer):
a ``.model`` run by the ``sentencepiece`` library as Megatron runs it.

Ids of ``encode(text)``; BOS is prepended only with ``add_special_tokens`` (Megatron's new
tokenizer system adds none); EOD = the model's eos id; vocab size = piece count. With ``legacy``
(Megatron's ``--legacy-tokenizer``, the ``megatron.training.tokenizer`` classes):
SentencePieceTokenizer adds ``<CLS> <SEP> <EOD> <MASK>`` and the pad/bos/eos pieces (``<PAD>``
etc. when the model has none) as special tokens after the pieces it lacks, so the vocabulary
grows and EOD = the id of ``<EOD>``; those strings written in a text are matched (leftmost
first, ties in that order) and become their ids, the text between them is encoded alone;
Llama2Tokenizer prepends the bos id to every text (every sentence); GPTSentencePieceTokenizer
is unchanged. With ``special_tokens`` (``--tokenizer-special-tokens`` with
``--tokenizer-sentencepiece-legacy``, Megatron's default path): the library wrapper's legacy
mode, see ``SentencePieceTokenizer._wrapper_specials``.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Sequence

import numpy as np

from dataio import fs as fsutil
from transforms.tokenizer.base import Tokenizer, TokenizerConfigError
from transforms.tokenizer.files import varint

if TYPE_CHECKING:
    from transforms.tokenizer.spec import TokenizerSpec


def proto_fields(data: bytes):
    """(field number, wire type, value) of one protobuf message level: ints for varints,
    bytes for length-delimited fields (fixed-width fields skipped as raw bytes)."""
    pos = 0
    while pos < len(data):
        key, pos = varint(data, pos)
        field, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = varint(data, pos)
        elif wire == 2:
            size, pos = varint(data, pos)
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
    for field, wire, value in proto_fields(model_proto):
        if field == 2 and wire == 2:
            for inner, inner_wire, kind in proto_fields(value):
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
    docs/benchmarks.md, "Memory for huge documents"), never correctness."""
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

