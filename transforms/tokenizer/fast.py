"""The fast backend: gigatoken (Rust) in place of a reference tokenizer's encoder, with the
texts it would get wrong (routing.py) sent to the reference. Which kinds it serves, and from
what, each kind declares in registry.py (``fast``)."""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.metadata
import os
import threading
from typing import TYPE_CHECKING, Iterable, Sequence

import numpy as np

from dataio import fs as fsutil
from transforms.tokenizer import registry
from transforms.tokenizer.base import Tokenizer
from transforms.tokenizer.routing import FastRouting, sentencepiece_routing

if TYPE_CHECKING:
    from transforms.tokenizer.spec import TokenizerSpec

# A call of at most this many texts encodes them one by one (see FastTokenizer._encode_flat).
FEW_TEXTS = 16
# gigatoken keeps each of its threads' word caches for the tokenizer's lifetime, and for a
# byte-level BPE they grow with every word not seen before (about n^0.62 in the text's size n):
# over a long run they would become most of the process's memory. Such a gigatoken tokenizer is
# made again after this many bytes of text, and the memory its caches held is handed back to the
# system (glibc keeps freed memory in its per-thread arenas, fragmented: without that, the low
# point after each renewal grew and the peak with it), so that memory stays flat however long
# the run. At 679 MB -> 2.7 GB: every 512 MB, 1.18x; every 512 MB and trimmed, 1.14x; every
# 256 MB and trimmed, 1.08x, no slower. Not a SentencePiece one: its memory stays flat without
# (1.07x), and a new instance every 512 MB raised it (1.22x).
REFRESH_BYTES = 256 << 20


def _load_malloc_trim():
    """glibc's ``malloc_trim`` (hands the free memory of every arena back), or None."""
    try:
        import ctypes

        return ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):  # another C library
        return None


_malloc_trim = _load_malloc_trim()


def gigatoken_from_sentencepiece(proto: bytes):
    """gigatoken's tokenizer for a SentencePiece model. gigatoken converts the ``.model`` to a
    tokenizer JSON in Python, slowly, in every process that loads it; the JSON is kept in the
    cache folder by the model's sha256 and gigatoken's version, which loads far faster."""
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


@dataclasses.dataclass
class Prepared:
    """:meth:`FastTokenizer.prepare` of a batch of texts."""

    mask: np.ndarray | None  # True: the text goes to the reference (None: none does)
    # (index among the other texts, UTF-8 piece), in order: a list, or an iterator (lazy)
    pieces: Iterable[tuple[int, bytes]]
    num_fast: int  # how many texts those are


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
        source = registry.kind(spec.kind).fast
        if source == registry.FAST_FROM_SENTENCEPIECE:
            with fsutil.open_file(spec.model, "rb") as f:
                proto = f.read()
            self._g = gigatoken_from_sentencepiece(proto)
            self._new_g = None  # kept: see REFRESH_BYTES
            self.routing = sentencepiece_routing(proto)
        elif source == registry.FAST_FROM_RUST:  # the reference's tokenizers.Tokenizer
            self._new_g = lambda: gigatoken.Tokenizer(reference.backend)  # every REFRESH_BYTES
            self._g = self._new_g()
        else:
            raise ValueError(f"{spec.kind} has no fast backend")
        self._since_new = 0  # bytes (or characters) encoded by this self._g
        self.vocab_size, self.eod, self.bos = reference.vocab_size, reference.eod, reference.bos
        self.cuts, self.wide_ids = reference.cuts, reference.wide_ids
        self._calls = threading.local()

    def _encode_plain(self, texts):
        return self._g.encode_batch_list(texts)

    def _encode_one(self, text):
        return self._g.encode(text)

    def _encode_flat(self, texts):
        if len(texts) <= FEW_TEXTS:
            # gigatoken's batch call costs about 0.2 ms of Python (its awkward Array) whatever
            # the batch; a few texts (a corpus of small files) are encoded one by one instead
            ids = [self._encode_one(text) for text in texts]
            return (np.concatenate(ids) if ids else np.empty(0, np.uint32),
                    np.fromiter(map(len, ids), dtype=np.int64, count=len(ids)))
        layout = self._g.encode_batch(texts).layout
        offsets = np.asarray(layout.offsets.data, dtype=np.int64)
        ids = np.asarray(layout.content.data)[offsets[0]:offsets[-1]]
        if self._new_g is not None:
            self._since_new += sum(map(len, texts))
            if self._since_new >= REFRESH_BYTES:  # its caches start over (see REFRESH_BYTES)
                self._g, self._since_new = self._new_g(), 0
                if _malloc_trim is not None:
                    _malloc_trim(0)
        return ids, np.diff(offsets)

    def last_routed(self) -> int:
        """How many texts this thread's last ``encode_batch`` sent to the reference."""
        return getattr(self._calls, "routed", 0)

    def prepare(self, texts: Sequence[str], *, lazy: bool = False) -> Prepared:
        """What can be made of ``texts`` before their encoding, on any thread: which go to the
        reference (:attr:`routing`), and the others' pieces (``_pieces``) as UTF-8 bytes, which
        gigatoken reads in place (it converts a ``str`` to UTF-8 itself, about a third of its
        time on a single core). Raises on a text that is not valid Unicode (a lone surrogate).
        ``lazy``: each piece is sliced and encoded only when its call comes (a huge text's
        bytes are never all held at once)."""
        mask = utf8 = None
        if self.routing is not None and len(texts):
            if self.cuts is None and not lazy:
                # never cut: each text's bytes are its one piece, and routing reads them too
                utf8 = [t.encode("utf-8") for t in texts]
            mask = self.routing.mask(texts, utf8=utf8)
            if not mask.any():
                mask = None
        if utf8 is not None:
            if mask is not None:
                utf8 = [b for b, m in zip(utf8, mask) if not m]
            return Prepared(mask, list(enumerate(utf8)), len(utf8))
        fast = texts if mask is None else [t for t, m in zip(texts, mask) if not m]
        pieces = ((i, piece.encode("utf-8")) for i, piece in self._pieces(fast))
        return Prepared(mask, pieces if lazy else list(pieces), len(fast))

    def encode_batch(self, texts, prepared: Prepared | None = None):
        """Ids of ``texts`` (see :meth:`Tokenizer.encode_batch`): those :attr:`routing` flags
        from the reference, the rest from gigatoken, in one call each, put back in order.
        ``prepared``: what :meth:`prepare` made of these texts (on the caller's thread)."""
        if prepared is None:
            prepared = self.prepare(texts, lazy=True)
        mask = prepared.mask
        self._calls.routed = int(mask.sum()) if mask is not None else 0
        ids, lengths = self._encode_pieces(prepared.pieces, prepared.num_fast)
        if mask is not None:
            ids, lengths = self._merge(ids, lengths, mask, texts)
        # a SentencePiece reference that prepends BOS does so after its encode, as here
        if getattr(self.reference, "_prepend_bos", False) and len(lengths):
            starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
            return np.insert(ids.astype(np.int64), starts, self.bos), lengths + 1
        return ids, lengths

    def _merge(self, fast_ids, fast_lengths, mask, texts) -> tuple[np.ndarray, np.ndarray]:
        """The fast texts' ids and the reference's ids of the texts ``mask`` flags, in order."""
        # the base class's encode_batch: the BOS is added by the caller, once for every text
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

    def decode(self, ids):
        return self.reference.decode(ids)

