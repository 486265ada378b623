"""Documents -> token batches, with Megatron's ``preprocess_data.py`` semantics.

For each json key, a document's value is cut into segments: the string itself (document
level), its sentences (``--split-sentences``), or the list it already is. Every segment is
tokenized; empty segments are dropped; each remaining segment is one sequence. With
``append_eod`` the EOD id is appended to the last sequence of every non-empty document. A
document with no sequence stays an empty document (a repeated document index) unless
``skip_empty``: then a record empty under any key is left out of every key's shard (the shards
stay aligned, and none holds an empty document). With a holdout fraction, documents whose stable id hash falls below it go to the
holdout shard (``holdout/{name}``) instead.

All of it is vectorised per batch (:func:`assemble`): one tokenizer call per batch and key,
numpy for the rest. The DoFn overlaps the stages of a worker: a batch is split and encoded on a
helper thread (the native tokenizers release the GIL) while the bundle's thread reads and parses
the next batch and writes the previous one's part, so a batch's outputs come out with the next
element or at the end of the bundle (as WindowedValues in the window of their own input).

Bad records found here: a document the sentence splitter or the tokenizer raises on (say a
NullTokenizer text that is not integers) is a bad record, like a line the parser rejects: it is
left out of the shard of *every* key (so the keys' shards stay aligned), and reported with its
file, line and reason on the ``errors`` output (``--on-bad-record fail`` raises instead). Only
the batch that raised pays for finding it: that batch is redone one document per call, which
gives the same ids as the batched call, so the output bytes do not change.
"""

from __future__ import annotations

import collections
import concurrent.futures
import dataclasses
import hashlib
from typing import Callable, Mapping, Sequence

import apache_beam as beam
import numpy as np
from apache_beam.transforms.window import BoundedWindow, GlobalWindow
from apache_beam.utils.timestamp import MIN_TIMESTAMP
from apache_beam.utils.windowed_value import WindowedValue

from transforms import coders, progress
from transforms.documents import (ERRORS_TAG, BadRecordReport, bad_record_error,
                                  batch_bad_record)
from dataio.elements import DocumentBatch, TokenBatch
from dataio.storage_fn import StorageDoFn
from transforms.tokenize_config import TokenizeConfig
from transforms.tokenizer import TokenizerSpec, load_tokenizer

# Texts (documents, or sentences with --split-sentences) that the fast backend's routing sent to
# the reference tokenizer because the fast one would give other ids for them.
ROUTED_TO_REFERENCE = beam.metrics.Metrics.counter("tokenize", "texts_routed_to_reference")


def assemble(ids: np.ndarray, segment_lengths: np.ndarray, segment_doc: np.ndarray,
             num_docs: int, *, eod: int | None, skip_empty: bool):
    """Megatron's per-document assembly, vectorised over a batch.

    ``ids``/``segment_lengths``: the tokenizer output of every segment in order;
    ``segment_doc``: the document of each segment. Returns (tokens, sequence_lengths,
    sequences_per_document, kept_documents_mask).
    """
    if num_docs == 1 and len(segment_lengths) == 1 and segment_lengths[0] > 0:
        return _assemble_one(ids, int(segment_lengths[0]), eod=eod)
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


def _assemble_one(ids: np.ndarray, n: int, *, eod: int | None):
    """:func:`assemble` of one document of one non-empty segment (every document of a corpus
    of one-line files), without the dozen NumPy calls of the general case: the same arrays."""
    if eod is None:
        tokens = ids
    else:
        tokens = np.empty(n + 1, dtype=ids.dtype)
        tokens[:n] = ids
        tokens[n] = eod
    return (tokens, np.array([tokens.size], dtype=np.int64), np.ones(1, dtype=np.int64),
            np.ones(1, dtype=bool))


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


def documents_with_tokens(encoded, num_docs: int) -> np.ndarray:
    """``--skip-empty`` with any number of keys: True for each document that has a token under
    every key. ``encoded``: each key's (ids, segment_lengths, segment_doc). A record empty under
    one key is dropped from every key's shard, so the keys' shards stay aligned document by
    document and none holds an empty document."""
    keep = np.ones(num_docs, dtype=bool)
    for _, segment_lengths, segment_doc in encoded:
        keep &= np.bincount(segment_doc[segment_lengths > 0], minlength=num_docs) > 0
    return keep


def drop_documents(ids: np.ndarray, segment_lengths: np.ndarray, segment_doc: np.ndarray,
                   keep: np.ndarray):
    """The segments of the documents ``keep`` (a boolean per document) out of a tokenizer output,
    with the documents renumbered 0.. in order; returns (ids, segment_lengths, segment_doc)."""
    seg_keep = keep[segment_doc]
    new_index = np.cumsum(keep) - 1
    return (ids[np.repeat(seg_keep, segment_lengths)], segment_lengths[seg_keep],
            new_index[segment_doc[seg_keep]])


def _describe(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:300]}" if text else type(exc).__name__


coders.register(TokenBatch)


# A batch of fewer input bytes is tokenized on the bundle's thread, not handed to the helper
# (whose hand-over costs more than such a batch's encoding).
INLINE_BYTES = 16 << 10

# A batch of more input bytes (it holds a huge document) is not prepared on the bundle's thread:
# its pieces' UTF-8 bytes are made one call at a time on the helper, not all held at once.
PREPARED_BYTES = 32 << 20

ShardNames = Mapping[tuple[str, str, bool], str]  # (stem, key, holdout?) -> relative shard name


class _TokenizeFn(StorageDoFn):
    def __init__(self, spec: TokenizerSpec, config: TokenizeConfig, *, shard_names: ShardNames,
                 on_bad_record="skip", storage=None):
        self._spec, self._config, self._storage = spec, config, storage
        self._shard_names = dict(shard_names)
        self._on_bad_record = on_bad_record

    def setup(self):
        super().setup()
        self._tok = load_tokenizer(self._spec)
        self._eod = self._tok.eod if self._config.append_eod else None
        self._split: Callable[[str], list[str]] | None = None
        if self._config.level == "sentence":
            from transforms.sentences import make_splitter

            self._split = make_splitter(splitter=self._config.splitter, lang=self._config.lang,
                                        keep_newlines=self._config.keep_newlines)
        self._docs = self._bytes = self._tokens = self._routed = 0  # this instance's
        self._told = (0, 0)  # tokens and routed texts already added to the process's meter
        self._last_routed = getattr(self._tok, "last_routed", None)
        if getattr(self._tok, "routing", None) is None:
            self._last_routed = None
        self._meter = progress.meter(dataclasses.replace(
            self._config.progress or progress.ProgressPlan(), interval=self._config.log_interval))
        self._helper = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="tokenize")
        self._bad_of_item: dict[tuple, list[dict]] = {}  # item's place -> its bad records
        self._batches_of_item: dict[tuple, int] = {}  # item's place -> TokenBatches sent

    def _segments(self, value) -> list[str]:
        if isinstance(value, list):
            return value
        if self._split is not None:
            return self._split(value)
        return [value]

    def start_bundle(self):
        # (future of a batch's outputs, its window and timestamp), oldest first: at most one
        # batch of documents, and the marks of items whose last batch it is, in flight
        self._pending: collections.deque = collections.deque()

    def process(self, batch: DocumentBatch, window=beam.DoFn.WindowParam,
                timestamp=beam.DoFn.TimestampParam):
        # Overlap: this batch is split and encoded on the helper thread (the native tokenizers
        # release the GIL) while Beam reads and parses the next one on this thread; a batch's
        # outputs come out with the next batch, or at the end of the bundle.
        if not isinstance(window, BoundedWindow):  # called by hand, not by a runner (tests)
            window, timestamp = GlobalWindow(), MIN_TIMESTAMP
        self._meter.begin()  # progress rates count from the first batch
        pending = self._pending
        if not pending and (batch.mark is not None or batch.num_bytes < INLINE_BYTES):
            # Nothing in flight, and a mark or a batch too small for the hand-over to the
            # helper to pay (a corpus of many small files): done on this thread.
            outputs, routed = self._tokenize(batch)
            yield from self._emit_now(outputs, routed, window, timestamp)
            return
        # The helper takes its work in order, so an item's mark still follows its batches.
        prepared = self._prepare(batch)
        pending.append((self._helper.submit(self._tokenize, batch, prepared), window, timestamp))
        if batch.mark is not None:
            # Not waited for: this thread goes on to read the next item's first batch while the
            # helper encodes this item's last one (one input file after another stays overlapped).
            return
        while len(pending) > 1:
            yield from self._emit(*pending.popleft())

    def finish_bundle(self):
        pending = self._pending
        while pending:
            yield from self._emit(*pending.popleft())
        self._meter.flush()  # a local worker's last counts reach the driver's progress line

    def teardown(self):
        if getattr(self, "_meter", None) is not None:
            self._meter.close()  # a live bar ends before the driver's summary
        helper = getattr(self, "_helper", None)
        if helper is not None:
            helper.shutdown(wait=True, cancel_futures=True)

    @classmethod
    def _emit(cls, future, window, timestamp):
        yield from cls._emit_now(*future.result(), window, timestamp)

    @staticmethod
    def _emit_now(outputs, routed, window, timestamp):
        if routed:
            ROUTED_TO_REFERENCE.inc(routed)  # Beam's counters: on the bundle's thread
        for out in outputs:
            if isinstance(out, beam.pvalue.TaggedOutput):
                yield beam.pvalue.TaggedOutput(out.tag, WindowedValue(out.value, timestamp, (window,)))
            else:
                yield WindowedValue(out, timestamp, (window,))

    def _prepare(self, batch: DocumentBatch) -> dict | None:
        """What the fast backend makes of each key's documents before encoding them (routing,
        UTF-8 pieces: ``FastTokenizer.prepare``), done on the bundle's thread while the helper
        encodes the batch before, so that the helper, the slower of the two, is left the
        encoding. None where there is nothing to prepare: another backend, sentences,
        documents given as lists, or a batch holding a huge document, whose UTF-8 bytes are
        better made piece by piece (then the helper does it all, as before)."""
        prepare = getattr(self._tok, "prepare", None)
        if (prepare is None or self._split is not None or batch.mark is not None
                or batch.num_bytes > PREPARED_BYTES):
            return None
        out = {}
        for key in self._config.keys:
            values = batch.texts[key]
            if not all(type(v) is str for v in values):
                return None
            try:
                out[key] = prepare(values)
            except Exception:  # noqa: BLE001 - the helper's own call finds the document out
                return None
        return out

    def _tokenize(self, batch: DocumentBatch, prepared: dict | None = None) -> tuple[list, int]:
        """(outputs, texts routed to the reference) of one batch; runs on the helper thread."""
        self._routed_now = 0
        outputs = list(self._outputs(batch, prepared or {}))
        if batch.place and batch.mark is None:  # counted for the item's mark (the sink checks)
            sent = sum(isinstance(out, TokenBatch) for out in outputs)
            self._batches_of_item[batch.place] = self._batches_of_item.get(batch.place, 0) + sent
        return outputs, self._routed_now

    def _outputs(self, batch: DocumentBatch, prepared: dict):
        if batch.mark is not None:
            yield from self._pass_mark(batch)
            return
        cfg = self._config
        bad: dict[int, tuple[str, str]] = {}  # document -> (key, reason); bad for one key = for all
        # Every key is split and encoded before anything is yielded: a document found bad for
        # the last key must be left out of the first key's shard too.
        segmented = {key: self._split_documents(batch.texts[key], key=key, bad=bad)
                     for key in cfg.keys}
        encoded = {key: self._encode(*segmented.pop(key), key=key, bad=bad,
                                     prepared=prepared.get(key)) for key in cfg.keys}
        hold = holdout_mask(batch.ids, batch.texts[cfg.keys[0]], cfg.holdout_fraction)
        num_docs = len(batch)
        if bad:
            for d in sorted(bad):
                key, reason = bad[d]
                report = batch_bad_record(batch, d, reason, key=key)
                if self._on_bad_record == "fail":
                    raise bad_record_error(report)
                if batch.place:  # kept in the item's mark, which comes after its last batch
                    self._bad_of_item.setdefault(batch.place, []).append(report.as_json())
                yield beam.pvalue.TaggedOutput(ERRORS_TAG, (batch.stem, report))
            keep = np.ones(num_docs, dtype=bool)
            keep[list(bad)] = False
            encoded = {key: drop_documents(*encoded[key], keep) for key in cfg.keys}
            hold, num_docs = hold[keep], int(keep.sum())
            if not num_docs:
                self._progress(len(batch), batch.num_bytes)
                return
        if cfg.skip_empty:
            # Left out of every key's shard alike, so that document i of each comes from one record.
            keep = documents_with_tokens(encoded.values(), num_docs)
            if not keep.all():
                encoded = {key: drop_documents(*encoded[key], keep) for key in cfg.keys}
                hold, num_docs = hold[keep], int(keep.sum())
        for key in cfg.keys:
            ids, seg_lengths, seg_doc = encoded.pop(key)
            tokens, lengths, per_doc, kept = assemble(
                ids, seg_lengths, seg_doc, num_docs, eod=self._eod, skip_empty=False)
            name = self._shard_names[batch.stem, key, False]
            if hold.any():
                kept_hold = hold[kept]
                parts = [(self._shard_names[batch.stem, key, True], kept_hold), (name, ~kept_hold)]
                # the unsplit batch's byte count is attributed to the training shard
                for shard, mask in parts:
                    if not mask.any():
                        continue
                    t, l, p = _select(tokens, lengths, per_doc, mask)
                    yield TokenBatch(shard=shard, item=batch.item, batch=batch.batch, tokens=t,
                                     sequence_lengths=l, sequences_per_document=p,
                                     num_bytes=0 if shard != name else batch.num_bytes,
                                     place=batch.place)
            else:
                yield TokenBatch(shard=name, item=batch.item, batch=batch.batch, tokens=tokens,
                                 sequence_lengths=lengths, sequences_per_document=per_doc,
                                 num_bytes=batch.num_bytes, place=batch.place)
            self._tokens += int(tokens.size)
        self._progress(len(batch), batch.num_bytes)

    def _pass_mark(self, batch: DocumentBatch):
        """An item's mark goes on to the sink, behind the item's batches: with what this step
        found bad in the item ("end"), or reporting again what it found then ("reused")."""
        mark = batch.mark
        if mark.kind == "end":
            mark.token_batches = self._batches_of_item.pop(batch.place, 0)
            for report in self._bad_of_item.pop(batch.place, ()):
                mark.note_bad(report, found="tokenize")
        else:
            for found in mark.record.get("bad_tokenized", ()):
                report = BadRecordReport(**found)
                if self._on_bad_record == "fail":
                    raise bad_record_error(report)
                yield beam.pvalue.TaggedOutput(ERRORS_TAG, (batch.stem, report))
        empty = np.empty(0, np.int64)
        yield TokenBatch(shard="", item=batch.item, batch=batch.batch, tokens=empty,
                         sequence_lengths=empty, sequences_per_document=empty, num_bytes=0,
                         place=batch.place, mark=mark)

    def _split_documents(self, values, *, key: str, bad: dict) -> tuple[list[str], list[int]]:
        """Every document's segments in order, and the document of each segment; a document the
        splitter raises on gets no segments and goes into ``bad``."""
        segments, seg_doc = [], []
        for d, value in enumerate(values):
            try:
                segs = self._segments(value)
            except MemoryError:
                raise
            except Exception as exc:  # noqa: BLE001 - whatever the splitter raises on this text
                bad.setdefault(d, (key, f"the sentence splitter failed on key {key!r} "
                                        f"({_describe(exc)})"))
                continue
            segments.extend(segs)
            seg_doc.extend([d] * len(segs))
        return segments, seg_doc

    def _encode(self, segments: list[str], seg_doc: list[int], *, key: str, bad: dict,
                prepared=None):
        """(ids, segment_lengths, segment_doc) of ``segments``: one tokenizer call; if it raises,
        one call per document, and the documents that raise on their own go into ``bad``.
        ``prepared``: the fast backend's ``prepare`` of ``segments`` (the documents)."""
        try:
            if prepared is not None:
                ids, seg_lengths = self._tok.encode_batch(segments, prepared=prepared)
            else:
                ids, seg_lengths = self._tok.encode_batch(segments)
            self._count_routed()
            return ids, seg_lengths, np.asarray(seg_doc, dtype=np.int64)
        except MemoryError:
            raise
        except Exception:  # noqa: BLE001 - found out below, one document at a time
            pass
        id_parts, length_parts, doc_parts = [], [], []
        start = 0
        while start < len(segments):
            d = seg_doc[start]
            stop = start + 1
            while stop < len(segments) and seg_doc[stop] == d:
                stop += 1
            if d not in bad:
                try:
                    ids, seg_lengths = self._tok.encode_batch(segments[start:stop])
                    self._count_routed()
                except MemoryError:
                    raise
                except Exception as exc:  # noqa: BLE001 - whatever the tokenizer raises on it
                    bad[d] = (key, f"the tokenizer failed on key {key!r} ({_describe(exc)})")
                else:
                    id_parts.append(ids)
                    length_parts.append(seg_lengths)
                    doc_parts.append(np.full(stop - start, d, dtype=np.int64))
            start = stop
        if not id_parts:
            return (np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0, np.int64))
        return np.concatenate(id_parts), np.concatenate(length_parts), np.concatenate(doc_parts)

    def _count_routed(self) -> None:
        """Texts the fast backend sent to the reference in the last call (its routing: see
        transforms.tokenizer.FastRouting), for the progress line and the Beam counter."""
        if self._last_routed is not None:
            routed = self._last_routed()  # this thread's last call
            self._routed += routed
            self._routed_now += routed

    def _progress(self, docs: int, num_bytes: int) -> None:
        self._docs += docs
        self._bytes += num_bytes
        # the meter adds up every instance of this process: it is given this batch's counts
        (tokens, routed), self._told = self._told, (self._tokens, self._routed)
        self._meter.add(documents=docs, num_bytes=num_bytes, tokens=self._tokens - tokens,
                        routed=None if self._last_routed is None else self._routed - routed)


class TokenizeDocuments(beam.PTransform):
    """DocumentBatch -> TokenBatch (main output ``tokens``: one per shard the batch touches),
    and (stem, BadRecordReport) on ``errors`` (transforms.documents.ERRORS_TAG) for documents
    the splitter or tokenizer raised on.

    ``shard_names``: the shard each (input stem, json key, holdout or not) goes to, as the
    driver planned them (the names are decided once, there)."""

    def __init__(self, spec: TokenizerSpec, config: TokenizeConfig, *, shard_names: ShardNames,
                 on_bad_record="skip", storage=None):
        super().__init__()
        self._fn = _TokenizeFn(spec, config, shard_names=shard_names,
                               on_bad_record=on_bad_record, storage=storage)

    def expand(self, batches):
        # typed, so that Beam sizes the batches with coders.BatchCoder, not by pickling them
        return batches | "Tokenize" >> beam.ParDo(self._fn).with_output_types(
            TokenBatch).with_outputs(ERRORS_TAG, main="tokens")
