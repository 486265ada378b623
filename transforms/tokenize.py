"""Documents -> token batches, with Megatron's ``preprocess_data.py`` semantics.

For each json key, a document's value is cut into segments: the string itself (document
level), its sentences (``--split-sentences``), or the list it already is. Every segment is
tokenized; empty segments are dropped; each remaining segment is one sequence. With
``append_eod`` the EOD id is appended to the last sequence of every non-empty document. A
document with no sequence stays an empty document (a repeated document index) unless
``skip_empty``. With a holdout fraction, documents whose stable id hash falls below it go to the
holdout shard (``holdout/{name}``) instead.

All of it is vectorised per batch (:func:`assemble`): one tokenizer call per batch and key,
numpy for the rest.
"""

from __future__ import annotations

import dataclasses
import hashlib
import sys
import time
from typing import Callable, Sequence

import apache_beam as beam
import numpy as np

from dataio import naming
from transforms.documents import DocumentBatch
from transforms.tokenizer import TokenizerSpec, load_tokenizer

HOLDOUT_DIR = "holdout"


@dataclasses.dataclass
class TokenBatch:
    """Documents of one batch for one shard: flat tokens, every sequence's length, and the
    number of sequences of each document (0 = empty document)."""

    shard: str  # relative shard name without counts, e.g. "holdout/x_text_document"
    item: int
    batch: int
    tokens: np.ndarray
    sequence_lengths: np.ndarray
    sequences_per_document: np.ndarray
    num_bytes: int

    @property
    def order(self) -> tuple[int, int]:
        return self.item, self.batch

    @property
    def documents(self) -> int:
        return len(self.sequences_per_document)


def assemble(ids: np.ndarray, segment_lengths: np.ndarray, segment_doc: np.ndarray,
             num_docs: int, *, eod: int | None, skip_empty: bool):
    """Megatron's per-document assembly, vectorised over a batch.

    ``ids``/``segment_lengths``: the tokenizer output of every segment in order;
    ``segment_doc``: the document of each segment. Returns (tokens, sequence_lengths,
    sequences_per_document, kept_documents_mask).
    """
    keep = segment_lengths > 0
    if keep.all():
        lengths = segment_lengths.astype(np.int64)
        docs_of_seq = segment_doc
    else:
        lengths = segment_lengths[keep].astype(np.int64)
        docs_of_seq = segment_doc[keep]
    per_doc = np.bincount(docs_of_seq, minlength=num_docs).astype(np.int64)
    tokens = ids
    if eod is not None and lengths.size:
        last_seq = np.cumsum(per_doc)[per_doc > 0] - 1
        ends = np.cumsum(lengths)[last_seq]
        tokens = np.insert(ids, ends, eod)
        lengths = lengths.copy()
        lengths[last_seq] += 1
    kept = per_doc > 0 if skip_empty else np.ones(num_docs, dtype=bool)
    return tokens, lengths, per_doc[kept], kept


def holdout_mask(ids: Sequence[str | None], fallback_texts: Sequence, fraction: float) -> np.ndarray:
    """True for documents that go to holdout: a stable 64-bit hash of the document id (or of its
    text when it has no id) below ``fraction`` of the hash range. Same on every run and runner."""
    if fraction <= 0:
        return np.zeros(len(ids), dtype=bool)
    threshold = int(fraction * 2**64)
    out = np.empty(len(ids), dtype=bool)
    for i, (doc_id, text) in enumerate(zip(ids, fallback_texts)):
        key = doc_id if doc_id is not None else (text if isinstance(text, str) else "\n".join(text))
        digest = hashlib.blake2b(key.encode("utf-8", "surrogatepass"), digest_size=8).digest()
        out[i] = int.from_bytes(digest, "big") < threshold
    return out


def _select(tokens, lengths, per_doc, mask):
    """The documents of ``mask`` (a boolean per document) out of an assembled batch."""
    seq_doc = np.repeat(np.arange(len(per_doc)), per_doc)
    seq_mask = mask[seq_doc]
    tok_mask = np.repeat(seq_mask, lengths)
    return tokens[tok_mask], lengths[seq_mask], per_doc[mask]


@dataclasses.dataclass(frozen=True)
class TokenizeConfig:
    keys: tuple[str, ...]
    level: str = "document"  # or "sentence"
    append_eod: bool = False
    skip_empty: bool = False
    holdout_fraction: float = 0.0
    splitter: str = "auto"
    lang: str = "english"
    keep_newlines: bool = False
    log_interval: int = 10_000


class _TokenizeFn(beam.DoFn):
    def __init__(self, spec: TokenizerSpec, config: TokenizeConfig, *, storage=None):
        self._spec, self._config, self._storage = spec, config, storage

    def setup(self):
        if self._storage is not None:
            self._storage.apply()
        self._tok = load_tokenizer(self._spec)
        self._eod = self._tok.eod if self._config.append_eod else None
        self._split: Callable[[str], list[str]] | None = None
        if self._config.level == "sentence":
            from transforms.sentences import make_splitter

            self._split = make_splitter(splitter=self._config.splitter, lang=self._config.lang,
                                        keep_newlines=self._config.keep_newlines)
        self._docs = self._bytes = self._tokens = 0
        self._next_log = self._config.log_interval
        self._start = time.monotonic()

    def _segments(self, value) -> list[str]:
        if isinstance(value, list):
            return value
        if self._split is not None:
            return self._split(value)
        return [value]

    def process(self, batch: DocumentBatch):
        cfg = self._config
        first_key = batch.texts[cfg.keys[0]]
        hold = holdout_mask(batch.ids, first_key, cfg.holdout_fraction)
        for key in cfg.keys:
            segments, seg_doc = [], []
            for d, value in enumerate(batch.texts[key]):
                segs = self._segments(value)
                segments.extend(segs)
                seg_doc.extend([d] * len(segs))
            ids, seg_lengths = self._tok.encode_batch(segments)
            tokens, lengths, per_doc, kept = assemble(
                ids, seg_lengths, np.asarray(seg_doc, dtype=np.int64), len(batch),
                eod=self._eod, skip_empty=cfg.skip_empty)
            name = naming.base_name(batch.stem, key, cfg.level)
            if hold.any():
                kept_hold = hold[kept]
                parts = [(f"{HOLDOUT_DIR}/{name}", kept_hold), (name, ~kept_hold)]
                # the unsplit batch's byte count is attributed to the training shard
                for shard, mask in parts:
                    if not mask.any():
                        continue
                    t, l, p = _select(tokens, lengths, per_doc, mask)
                    yield TokenBatch(shard, batch.item, batch.batch, t, l, p,
                                     0 if shard != name else batch.num_bytes)
            else:
                yield TokenBatch(name, batch.item, batch.batch, tokens, lengths, per_doc,
                                 batch.num_bytes)
            self._tokens += int(tokens.size)
        self._progress(len(batch), batch.num_bytes)

    def _progress(self, docs: int, num_bytes: int) -> None:
        self._docs += docs
        self._bytes += num_bytes
        if self._config.log_interval and self._docs >= self._next_log:
            self._next_log = (self._docs // self._config.log_interval + 1) * self._config.log_interval
            elapsed = max(time.monotonic() - self._start, 1e-9)
            print(f"Processed {self._docs} documents ({self._docs / elapsed:.1f} docs/s, "
                  f"{self._bytes / elapsed / 2**20:.2f} MB/s, {self._tokens / elapsed:.0f} tokens/s).",
                  file=sys.stderr, flush=True)


class TokenizeDocuments(beam.PTransform):
    """DocumentBatch -> TokenBatch (one per shard the batch touches)."""

    def __init__(self, spec: TokenizerSpec, config: TokenizeConfig, *, storage=None):
        super().__init__()
        self._fn = _TokenizeFn(spec, config, storage=storage)

    def expand(self, batches):
        return batches | "Tokenize" >> beam.ParDo(self._fn)
