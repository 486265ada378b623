"""The shard sink: token batches -> committed ``{shard}_dc=N_sc=N_tc=N.bin/.idx``.

Protocol (the same on local disk and object stores):

1. Each TokenBatch is written as a *part*, a small indexed dataset under the output's
   ``_parts/{stem folder}/{item key}/`` (dataio/parts.py; ``_temporary/{run id}/{shard}/`` for
   a batch planned without a place). Part names are deterministic, so a retried bundle
   overwrites its own parts (each part is itself written temp-then-rename). Once every part of
   a work item is written, the item's record is written beside them: the item is done, whatever
   happens to the run, and a rerun hands its parts on instead of reading it again (the reader
   sends its "reused" mark; dataio/parts.py). The worker that finishes an input's last item
   commits the input's shards at once (steps 4-5 below, the same code), without waiting for the
   rest of the run; the final step then finds them committed. An input of one item (a small
   file) skips the parts: its batches are held in memory until its mark (up to ``HOLD_BYTES``)
   and written once, straight to the shards' final names. An item is recorded or committed
   early only when the part writer saw every batch the tokenize step sent for it (the count in
   its mark); otherwise its parts go on to step 4. Commit records are made durable by one
   filesystem sync per bundle, not an fsync each.
2. Counts (documents, sequences, tokens; and the input bytes they came from) are combined per
   shard by a CombineFn.
3. Parts are grouped per shard together with the planned shard list (so a shard with no
   documents is still committed, empty) and any read failure of its input.
4. FinalizeShard concatenates the parts in input order into the final name (the writer renames
   ``.bin`` then ``.idx``; on local disk a lone part's ``.bin`` is hard-linked, several are
   joined by the kernel, so no token passes through Python a second time; see
   dataio/indexed.py), then writes the commit record ``{output}/_commits/{shard}.json`` last,
   removes final files of older runs with other counts (the driver removes the input's kept
   parts once all its shards are committed: pipelines/tokenize/outcome.py ``finish``). A shard is
   committed exactly when its commit record exists and names files that exist. Finalize is
   idempotent: run twice, it finds its own record and does nothing more. A worker whose driver
   has ended commits nothing more (runtime/workers.py); on Azure, neither does one whose run
   lost the output's lease to another run: each record written and each stale file removed is
   preceded by a renewal of the lease (dataio/lock.py OutputGuard).
5. A shard whose input failed gets ``{output}/_failures/{shard}.json`` instead and no files;
   so does a shard whose input's records are too often bad (:class:`RecordTally`, combined per
   shard beside the counts): every record bad, or more than ``max_bad_fraction`` of them. An
   input of bad records only (a wrong ``--json-keys`` key, UTF-16, one pretty-printed JSON
   document) must not commit an empty shard and exit 0.

What was committed flows back through the pipeline: WriteShards returns a ShardResult per
planned shard, and the figures of a run are Beam counters (namespace :data:`METRICS`: parts,
shards_committed, shards_failed, documents, sequences, tokens, input_bytes of committed shards;
bad_records written by WriteErrors) and every ShardResult (a string set), which the driver reads
from the runner's result.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
import signal
import zlib
from typing import Iterable

import apache_beam as beam
import numpy as np
from apache_beam.transforms.window import GlobalWindow
from apache_beam.utils.timestamp import MIN_TIMESTAMP
from apache_beam.utils.windowed_value import WindowedValue

from runtime import faults
from dataio import fs as fsutil
from dataio.storage_fn import StorageDoFn
from dataio import indexed, naming, parts
from runtime import workers
from dataio.indexed import Counts
from dataio.lock import TEMPORARY_DIR
from dataio.readers import PARQUET_SUFFIXES
# The records, Beam-free for the planner (dataio/manifest.py), are the sink's public names too
# (bench/fault_injection.py and the tests use them here).
from dataio.manifest import (COMMITS_DIR, ERRORS_DIR, FAILURES_DIR, commit_record_path,
                             encode_result, errors_path, failure_record_path, is_committed,
                             read_commit_record, temporary_dir)
from dataio.elements import PartInfo, ShardResult

__all__ = ["WriteShards", "WriteErrors", "SumCountsFn", "RecordTally",
           "too_many_bad", "METRICS", "ShardResult", "PartInfo",
           "COMMITS_DIR", "ERRORS_DIR", "FAILURES_DIR", "TEMPORARY_DIR", "commit_record_path",
           "errors_path", "failure_record_path", "is_committed", "read_commit_record",
           "temporary_dir"]

METRICS = "tokenbeam"  # the namespace of the sink's counters
# The batches of kept work items the part writer holds in memory, at most (tokens and index
# arrays; see _WritePartFn): past it, they are written as parts. Small: it spares the many small
# inputs of a corpus their parts, while a large input's memory stays that of one batch or two.
HOLD_BYTES = 16 << 20
_metric = beam.metrics.Metrics.counter
PARTS = _metric(METRICS, "parts")
SHARDS_COMMITTED = _metric(METRICS, "shards_committed")
SHARDS_FAILED = _metric(METRICS, "shards_failed")
DOCUMENTS = _metric(METRICS, "documents")
SEQUENCES = _metric(METRICS, "sequences")
TOKENS = _metric(METRICS, "tokens")
INPUT_BYTES = _metric(METRICS, "input_bytes")
REUSED_BYTES = _metric(METRICS, "reused_bytes")  # input bytes of items an earlier run finished
BAD_RECORDS = _metric(METRICS, "bad_records")
# Every ShardResult, encoded (dataio/manifest.py encode_result): what the driver learns was
# committed. Beam keeps at most 1 MB in a string set (about 10,000 results), so they are spread
# over RESULT_SETS sets by a hash of the shard's name (about 2.5 million shards), and the driver
# reads the commit record of any shard they do not name.
SHARD_RESULTS = "shard_results_"
RESULT_SETS = 256
_RESULT_SETS = [beam.metrics.Metrics.string_set(METRICS, f"{SHARD_RESULTS}{k:03d}")
                for k in range(RESULT_SETS)]


def report_result(result: ShardResult) -> None:
    """Hand ``result`` to the driver (through the runner's metrics)."""
    _RESULT_SETS[zlib.crc32(result.shard.encode("utf-8", "surrogatepass")) % RESULT_SETS].add(
        encode_result(result))


TALLIES = "tallies"  # the part writer's output of (shard, RecordTally) per item
COMMITTED = "committed"  # and of (shard, (PartInfo, counts)) of each shard it committed itself


class SumCountsFn(beam.CombineFn):
    """(Counts, input bytes, of them reused) of a shard's parts, summed: the counts in its name.
    Each input is a part as the part writer hands it on, (PartInfo, that triple); the
    accumulator is the triple. Reused bytes: of items whose parts an earlier run kept
    (dataio/parts.py)."""

    def create_accumulator(self):
        return Counts(), 0, 0

    def add_input(self, acc, part):
        _, counts = part
        return acc[0] + counts[0], acc[1] + counts[1], acc[2] + counts[2]

    def merge_accumulators(self, accs):
        total, num_bytes, reused = Counts(), 0, 0
        for counts, more, more_reused in accs:
            total, num_bytes, reused = total + counts, num_bytes + more, reused + more_reused
        return total, num_bytes, reused

    def extract_output(self, acc):
        return acc


@dataclasses.dataclass(frozen=True)
class RecordTally:
    """What one input's records came to: ``records`` read, ``bad`` of them (the parser's and
    the tokenizer's bad records), and the first bad one in the file (smallest byte offset, or
    row for Parquet): where it is and why. The part writer tallies each work item from its mark
    (an input's tallies add up with ``+``); the sink decides with it whether the input's shards
    may be committed (:func:`too_many_bad`)."""

    records: int = 0
    bad: int = 0
    stem: str = ""
    file: str = ""
    offset: int = -1  # of the first bad record; -1: none
    where: str = ""  # the first bad record's "line N" (JSONL) or "row N" (Parquet)
    reason: str = ""

    def __add__(self, other: "RecordTally") -> "RecordTally":
        first = self if other.offset < 0 or 0 <= self.offset <= other.offset else other
        return dataclasses.replace(first, records=self.records + other.records,
                                   bad=self.bad + other.bad, stem=self.stem or other.stem)


def too_many_bad(tally: RecordTally, max_bad_fraction: float, *, output: str) -> str | None:
    """Why an input's shards must fail rather than commit, or None: every record bad (unless
    ``max_bad_fraction`` is 1), or more than ``max_bad_fraction`` of them."""
    if not tally.bad:
        return None
    records = max(tally.records, tally.bad)
    if tally.bad >= records and max_bad_fraction < 1:
        what = f"every record is bad ({records} of {records})" if records > 1 else \
            "its one record is bad"
    elif tally.bad > max_bad_fraction * records:
        what = (f"{tally.bad} of {records} records are bad ({tally.bad / records:.1%}, more "
                f"than --max-bad-fraction {max_bad_fraction:g})")
    else:
        return None
    where = tally.where or f"byte offset {tally.offset}"
    listed = errors_path(output, tally.stem) if tally.stem else fsutil.join(output, ERRORS_DIR)
    return (f"{tally.file}: {what}, listed in {listed}; the first, {where}: {tally.reason}. "
            "Fix the input or the flags and rerun (--max-bad-fraction 1 commits what is good)")


def _stop_if_driver_gone() -> None:
    if workers.driver_gone():
        # The driver was killed or interrupted and a rerun may own the output already: this
        # worker must not commit. (Its watchdog is about to kill it anyway.)
        os.kill(os.getpid(), signal.SIGKILL)


class _Committer:
    """Commits one shard from its parts (both where a stem's one item is finished, by
    :class:`_WritePartFn`, and at the end, by :class:`_FinalizeShardFn`): merge, commit record,
    stale files removed; each record written and file removed only while the output is ours."""

    def __init__(self, output: str, dtype: str, *, run_id: str = "", guard=None,
                 stale: dict[str, tuple[str, ...]] | None = None, counted_names: bool = True):
        self._output, self._dtype, self._run_id = output, dtype, run_id
        self._counted_names = counted_names  # False: Megatron's names (--output-prefix)
        self._guard = guard  # dataio.lock.OutputGuard: still ours? (None: cannot be lost)
        self._stale = stale  # as WriteShards' ``stale``
        self._unsynced = False  # commit records written since the last sync()

    def still_ours(self) -> None:
        _stop_if_driver_gone()
        if self._guard is not None:
            self._guard.verify()

    def fail(self, shard: str, reason: str) -> None:
        record = {"shard": shard, "reason": reason, "at": _now()}
        self.still_ours()
        fsutil.write_bytes_atomic(failure_record_path(self._output, shard),
                                  json.dumps(record, indent=1).encode())

    def name_of(self, shard: str, counts: Counts) -> str:
        return (naming.with_counts(shard, counts.documents, counts.sequences, counts.tokens)
                if self._counted_names else shard)

    def commit(self, shard: str, *, fingerprint: str, resume_key, parts: list[PartInfo],
               counts: Counts, input_bytes: int, reused_bytes: int) -> str:
        """Commit ``shard`` (unless it is already, with this fingerprint); returns its name."""
        name = self.name_of(shard, counts)
        final = fsutil.join(self._output, name)
        committed, _ = is_committed(self._output, shard, fingerprint)
        if committed:
            return name
        try:
            self._merge(parts, final, counts)
        except FileNotFoundError:
            # a part gone: the run that took the output over (this one paused past its
            # lease) removed this run's temporaries; say that, not the missing file
            self.still_ours()
            raise
        self._record(shard, name, fingerprint=fingerprint, resume_key=resume_key, counts=counts,
                     input_bytes=input_bytes, reused_bytes=reused_bytes)
        return name

    def commit_batches(self, shard: str, *, fingerprint: str, resume_key, batches: list,
                       input_bytes: int) -> tuple[str, Counts]:
        """Commit ``shard`` from TokenBatches held in memory (an input of one work item): its
        final files are written once, under their final name, with no part between; returns
        the name and counts."""
        counts = Counts(sum(tb.documents for tb in batches),
                        sum(int(tb.sequence_lengths.size) for tb in batches),
                        sum(int(tb.tokens.size) for tb in batches))
        name = self.name_of(shard, counts)
        # Not asked whether it is committed already: it was not when planned, and only another
        # attempt of this item may have committed it since, with these same bytes.
        self.still_ours()  # final-named files are written only while the output is ours
        with indexed.IndexedDatasetWriter(fsutil.join(self._output, name),
                                          dtype=self._dtype) as writer:
            for tb in sorted(batches, key=lambda tb: tb.order):
                writer.add_batch(tb.tokens, tb.sequence_lengths, tb.sequences_per_document)
        self._record(shard, name, fingerprint=fingerprint, resume_key=resume_key, counts=counts,
                     input_bytes=input_bytes, reused_bytes=0, written=True)
        return name, counts

    def _record(self, shard: str, name: str, *, fingerprint: str, resume_key, counts: Counts,
                input_bytes: int, reused_bytes: int, written: bool = False) -> None:
        """The commit record (the shard is committed from here on), then stale files removed.
        Not fsynced one by one: the DoFn syncs the output's filesystem once per bundle
        (:func:`dataio.fs.sync_filesystem`). A power cut before that may lose records (their
        shards are redone), never leave one whose files are not whole: a record names its files'
        sizes, and a shard whose files differ from them is not committed (manifest.is_committed).
        ``written``: the files were written here from ``counts`` (their sizes follow from them),
        not merged from parts (their sizes are asked)."""
        final = fsutil.join(self._output, name)
        bin_size, idx_size = (indexed.file_sizes(counts, self._dtype) if written else
                              (fsutil.size(final + ".bin"), fsutil.size(final + ".idx")))
        record = {"shard": shard, "name": name, "fingerprint": fingerprint,
                  "documents": counts.documents, "sequences": counts.sequences,
                  "tokens": counts.tokens, "input_bytes": input_bytes,
                  "reused_bytes": reused_bytes, "run_id": self._run_id,
                  "bin_size": bin_size, "idx_size": idx_size, "committed_at": _now(),
                  **({"resume_key": resume_key} if resume_key else {})}
        faults.checkpoint("sink.before_commit_record")
        self.still_ours()
        fsutil.write_bytes_atomic(commit_record_path(self._output, shard),
                                  (json.dumps(record) + "\n").encode(), durable=False)
        self._unsynced = True
        faults.checkpoint("sink.before_cleanup")
        self.still_ours()
        fsutil.remove(failure_record_path(self._output, shard))
        self._remove_stale(shard, name)

    def sync(self) -> None:
        """Make the commit records written since the last sync durable (with the files they
        name): one filesystem sync, not an fsync per record."""
        if self._unsynced:
            fsutil.sync_filesystem(self._output)
            self._unsynced = False

    def _merge(self, parts: Iterable[PartInfo], final: str, counts: Counts) -> None:
        parts = sorted(parts, key=lambda p: p.order)
        with indexed.IndexedDatasetWriter(final, dtype=self._dtype) as writer:
            if len(parts) == 1:
                # The part is the shard: its .bin is linked into place, not copied (local disk;
                # the part stays until the commit is recorded, so a retry finds it again).
                writer.adopt(parts[0].prefix)
            for part in parts if len(parts) > 1 else ():
                writer.add_index(part.prefix)  # .bin appended by the kernel on local disk
            if Counts(writer.document_count, writer.sequence_count, writer.token_count) != counts:
                raise RuntimeError(f"{final}: parts hold {writer.document_count} documents, "
                                   f"{writer.sequence_count} sequences, {writer.token_count} "
                                   f"tokens but the counts combined to {counts}")

    def _remove_stale(self, shard: str, name: str) -> None:
        """The final files of ``shard`` under other counts than ``name`` (older runs'), each
        removed: those the planner listed (no listing per commit: constant work per shard),
        else (a caller that planned none) those a listing of the shard's folder finds."""
        if self._stale is not None:
            for old in self._stale.get(shard, ()):
                if old != name:
                    for suffix in (".bin", ".idx"):
                        self.still_ours()
                        fsutil.remove(fsutil.join(self._output, old + suffix))
            return
        folder = fsutil.join(self._output, os.path.dirname(shard)) if os.path.dirname(shard) \
            else self._output
        base = os.path.basename(shard)
        current = os.path.basename(name)
        for entry in fsutil.list_names(folder):
            stem = indexed.prefix_of(entry)
            if stem != current and naming.strip_counts(stem) == base and \
                    entry.endswith((".bin", ".idx")):
                fsutil.remove(fsutil.join(folder, entry))


class _WritePartFn(StorageDoFn):
    """TokenBatch -> a part; an item's mark (dataio/parts.py ItemMark) -> its item record, or
    (reused) its kept parts handed on; a stem of one item is then committed at once.

    The batches of a kept work item are held in memory until its mark (up to
    :data:`HOLD_BYTES` in all; past that they are written as parts). An input of one item, the
    common case of a corpus of many small files, is then written once, straight to its shards'
    final names, with no part, item record or parts folder between: a file's cost beyond its
    bytes is its final files and commit record. An item of a stem of several, and any item
    whose batches did not all fit, is written as parts (its record names them), as before."""

    def __init__(self, output: str, dtype: str, storage=None, run_id: str = "", guard=None,
                 max_bad_fraction: float = 1.0, stale: dict[str, tuple[str, ...]] | None = None,
                 counted_names: bool = True):
        self._output, self._dtype, self._storage = output, dtype, storage
        self._temporary = temporary_dir(output, run_id)
        self._run_id, self._max_bad_fraction = run_id, max_bad_fraction
        self._committer = _Committer(output, dtype, run_id=run_id, guard=guard, stale=stale,
                                     counted_names=counted_names)

    def setup(self):
        super().setup()
        self._done_keys: dict[str, set[str]] = {}  # stem folder -> its items known done
        self.start_bundle()

    def start_bundle(self):
        # An item's batches and its mark come in one bundle (a retried bundle starts again).
        # place -> (shard, PartInfo, input bytes) of the parts written for the item there
        self._written: dict[tuple, list] = {}
        self._held: dict[tuple, list] = {}  # place -> its TokenBatches not yet written
        self._held_bytes = 0
        self._spilled: set[tuple] = set()  # places whose batches went out as parts

    def finish_bundle(self):
        # Batches whose mark did not come in this bundle (no runner here splits an item from
        # its mark, but none may be lost if one does): written as parts, which the finaliser
        # commits, as it does those of an item kept in no record.
        for place in list(self._held):
            for shard, value in self._spill(place):
                yield WindowedValue((shard, value), MIN_TIMESTAMP, (GlobalWindow(),))
        self._committer.sync()

    def process(self, tb):
        if tb.mark is not None:
            yield from self._on_mark(tb.mark)
            return
        if not tb.place or tb.place in self._spilled:
            yield self._write_part(tb)
            faults.checkpoint("sink.part_written")
            return
        self._held.setdefault(tb.place, []).append(tb)
        self._held_bytes += tb.estimated_size()
        faults.checkpoint("sink.part_written")  # (held: written at its mark, or as a part)
        if self._held_bytes > HOLD_BYTES:
            for place in list(self._held):
                yield from self._spill(place)

    def _spill(self, place: tuple):
        """The held batches of the item at ``place`` written as parts (and any later ones)."""
        self._spilled.add(place)
        for tb in self._held.pop(place, ()):
            self._held_bytes -= tb.estimated_size()
            yield self._write_part(tb)

    def _write_part(self, tb):
        item, batch = tb.order
        if tb.place:
            prefix = parts.part_prefix(self._output, *tb.place, tb.shard, batch)
        else:
            prefix = fsutil.join(self._temporary, tb.shard, f"{item:06d}-{batch:06d}")
        with indexed.IndexedDatasetWriter(prefix, dtype=self._dtype) as writer:
            writer.add_batch(tb.tokens, tb.sequence_lengths, tb.sequences_per_document)
        PARTS.inc()
        counts = Counts(tb.documents, int(tb.sequence_lengths.size), int(tb.tokens.size))
        info = PartInfo(order=tb.order, prefix=prefix, counts=counts)
        if tb.place:
            self._written.setdefault(tb.place, []).append((tb.shard, info, tb.num_bytes))
        return tb.shard, (info, (counts, tb.num_bytes, 0))

    def _on_mark(self, mark):
        plan = mark.plan
        if mark.kind == "end":
            place = (plan.folder, mark.key)
            seen = len(self._held.get(place, ())) + len(self._written.get(place, ()))
            if mark.token_batches is not None and seen != mark.token_batches:
                # Some of the item's batches went by in another bundle (written as parts there
                # and handed on): this bundle cannot record or commit the item whole. Its parts
                # all reach the finaliser, which commits its shards from them; a rerun after a
                # kill redoes the item.
                yield from self._spill(place)
                self._written.pop(place, None)
                yield from self._tallies(mark)
                return
            held = None  # the item's batches, where its commit from them was declined
            if plan.items == 1 and mark.keepable and place not in self._spilled:
                # An input of one item: its shards written once, from memory, and committed.
                held = self._held.get(place, [])
                faults.checkpoint("sink.item_recorded")
                committed = self._commit_stem(mark, [self._item_record(mark, [])], held=held)
                if committed is not None:
                    self._held.pop(place, None)
                    self._held_bytes -= sum(tb.estimated_size() for tb in held)
                    for shard, piece in committed:  # (no counts to combine: they are its own)
                        yield beam.pvalue.TaggedOutput(COMMITTED, (shard, piece))
                    return
                # too many bad records: written as parts and its record kept, as below
            yield from self._spill(place)
            record = self._item_record(mark, self._written.pop(place, []))
            if not mark.keepable:
                # too many bad records to keep: the item is redone on a rerun; the finaliser
                # fails its shards
                yield from self._tallies(mark)
                return
            if plan.items == 1:
                # Committed from its parts (they did not all fit in memory); its record is kept
                # only where its commit is declined (too many bad records), so that a rerun
                # with another --max-bad-fraction reuses it.
                if held is None:
                    faults.checkpoint("sink.item_recorded")
                    if self._commit_stem(mark, [record]) is not None:
                        return
                parts.write_record(self._output, plan.folder, mark.key, record)
                yield from self._tallies(mark)  # (the finaliser fails its shards)
                return
            # every part of the item is written: from now on it is done, whatever happens
            parts.write_record(self._output, plan.folder, mark.key, record)
            faults.checkpoint("sink.item_recorded")
        else:
            record = mark.record
            written = self._parts_of(plan, mark.key, record)
            REUSED_BYTES.inc(sum(b for _, _, b in written))
            for shard, info, num_bytes in written:
                yield shard, (info, (info.counts, num_bytes, num_bytes))
        # The item's records, for the finaliser, should its shards not be committed here.
        yield from self._tallies(mark)
        records = {mark.key: record}
        if plan.items > 1:
            if not self._all_done(plan, mark.key):
                return  # not all done yet: the worker of the last one commits
            # the stem's other items, as the records of the run(s) that finished them say
            records.update({key: parts.read_record(self._output, plan.folder, key)
                            for key in plan.keys if key != mark.key})
            if any(r is None for r in records.values()):
                return
        self._commit_stem(mark, [records[key] for key in plan.keys or [mark.key]])

    def _tallies(self, mark):
        """(shard, RecordTally of the item's records) for each shard of the item's stem, for
        the finaliser, which sums them per shard: whether the stem's records are too often bad
        (its shards then fail) where this step did not commit them itself."""
        if mark.kind == "end":  # every bad record counted, kept in the mark or not
            tally = _tallied(RecordTally(records=mark.records + mark.bad_read_count,
                                         bad=mark.bad_read_count + mark.bad_tokenized_count,
                                         stem=mark.plan.stem, file=mark.path), mark.first_bad)
        else:  # (an item is recorded only with all its bad records)
            tally, _ = _tally_of(mark.plan.stem, mark.path, [mark.record])
        for shard, _, _ in mark.plan.shards:
            yield beam.pvalue.TaggedOutput(TALLIES, (shard, tally))

    def _all_done(self, plan, key: str) -> bool:
        """Whether every item of a stem of several has its record. Each record this worker has
        seen is remembered and the others asked in order up to the first missing, so a stem of
        K items costs O(K) requests per worker, not a listing of K entries per item."""
        seen = self._done_keys.setdefault(plan.folder, set())
        seen.add(key)
        for other in plan.keys:
            if other not in seen:
                if not fsutil.exists(parts.record_path(self._output, plan.folder, other)):
                    return False
                seen.add(other)
        return True

    def _parts_of(self, plan, key: str, record: dict) -> list:
        """(shard, PartInfo, input bytes) of each part an item record names."""
        return [(p["shard"], PartInfo(order=tuple(p["order"]), counts=Counts(*p["counts"]),
                                      prefix=parts.prefix_of(self._output, plan.folder, key,
                                                             p["name"])),
                 p["num_bytes"]) for p in record["parts"]]

    def _item_record(self, mark, written: list) -> dict:
        return {"stem": mark.plan.stem, "key": mark.key, "run_id": self._run_id,
                "records": mark.records, "bad_read": mark.bad_read,
                "bad_tokenized": mark.bad_tokenized, "file_bytes": mark.file_bytes,
                "num_bytes": mark.num_bytes,
                "parts": [{"shard": shard, "order": list(info.order),
                           "name": os.path.basename(info.prefix),
                           "counts": [info.counts.documents, info.counts.sequences,
                                      info.counts.tokens],
                           "num_bytes": num_bytes,
                           **dict(zip(("bin_size", "idx_size"),
                                      indexed.file_sizes(info.counts, self._dtype)))}
                          for shard, info, num_bytes in written]}

    def _commit_stem(self, mark, records: list[dict], *, held: list | None = None
                     ) -> list | None:
        """Commit every shard of a stem whose items are all done (``records``: their item
        records), its bad records listed first; unless its records are too often bad (the last
        step fails its shards then: None). Items recorded by another run count as reused. Two
        workers finishing a stem's last items at once may both commit it: the same bytes, each
        step atomic, so the second commit changes nothing. ``held``: the TokenBatches of a stem
        of one item, written straight to its shards (no parts); the list returned then holds
        what the finaliser gets of each shard written (its parts otherwise)."""
        plan = mark.plan
        tally, reports = _tally_of(plan.stem, mark.path, records)
        if too_many_bad(tally, self._max_bad_fraction, output=self._output):
            return None
        reading = workers.last_note()  # the item this worker reads meanwhile (the tokenize
        # step runs one batch behind the reader), noted again once the commit is done
        workers.note_work(f"committing the shards of {naming.printable(mark.path)}")
        if reports:
            self._committer.still_ours()
            fsutil.write_bytes_atomic(errors_path(self._output, plan.stem),
                                      error_lines(reports).encode("utf-8"))
        out = []
        if held is not None:
            for shard, fingerprint, resume_key in plan.shards:
                mine = [tb for tb in held if tb.shard == shard]
                input_bytes = sum(tb.num_bytes for tb in mine)
                name, counts = self._committer.commit_batches(
                    shard, fingerprint=fingerprint, resume_key=resume_key, batches=mine,
                    input_bytes=input_bytes)
                if mine:
                    info = PartInfo(order=min(tb.order for tb in mine), committed=name,
                                    prefix=fsutil.join(self._output, name), counts=counts)
                    out.append((shard, (info, (counts, input_bytes, 0))))
        else:
            written = [(shard, info, num_bytes, record["run_id"] != self._run_id)
                       for record in records
                       for shard, info, num_bytes in self._parts_of(plan, record["key"], record)]
            for shard, fingerprint, resume_key in plan.shards:
                mine = [(info, b, reused) for s, info, b, reused in written if s == shard]
                self._committer.commit(shard, fingerprint=fingerprint, resume_key=resume_key,
                                       parts=[info for info, _, _ in mine],
                                       counts=sum((info.counts for info, _, _ in mine), Counts()),
                                       input_bytes=sum(b for _, b, _ in mine),
                                       reused_bytes=sum(b for _, b, reused in mine if reused))
        faults.checkpoint("sink.stem_committed")
        if plan.items == 1 and (held is None or plan.found):
            # (several items: another worker may be committing them too; one committed from
            # memory: its folder holds only what an earlier run or another attempt left, which
            # the run's end removes, and asking costs a request per input)
            parts.remove_folder(self._output, plan.folder)
        if reading:
            workers.note_work(reading)
        return out


def _tally_of(stem: str, path: str, records: list[dict]) -> tuple[RecordTally, list[dict]]:
    """The RecordTally of items of the input ``path`` (their item records, or what they hold:
    ``records`` read, ``bad_read`` and ``bad_tokenized`` reports), and their bad records'
    reports by offset."""
    bad_read = [r for record in records for r in record["bad_read"]]
    reports = sorted(bad_read + [r for record in records for r in record["bad_tokenized"]],
                     key=lambda r: r["offset"])
    tally = RecordTally(records=sum(r["records"] for r in records) + len(bad_read),
                        bad=len(reports), stem=stem, file=path)
    return _tallied(tally, reports[0] if reports else None), reports


def _tallied(tally: RecordTally, first: dict | None) -> RecordTally:
    """``tally`` naming ``first`` (a BadRecordReport as a dict) as its first bad record."""
    if first is None:
        return tally
    unit = "row" if tally.file.lower().endswith(PARQUET_SUFFIXES) else "line"
    return dataclasses.replace(tally, offset=first["offset"], reason=first["reason"],
                               where=f"{unit} {first['line']}")


class _FinalizeShardFn(StorageDoFn):
    def __init__(self, output: str, dtype: str, storage=None, run_id: str = "", guard=None,
                 max_bad_fraction: float = 1.0, stale: dict[str, tuple[str, ...]] | None = None,
                 counted_names: bool = True):
        self._output, self._dtype, self._storage = output, dtype, storage
        self._temporary = temporary_dir(output, run_id)
        self._max_bad_fraction = max_bad_fraction
        self._committer = _Committer(output, dtype, run_id=run_id, guard=guard, stale=stale,
                                     counted_names=counted_names)

    def finish_bundle(self):
        self._committer.sync()

    def process(self, element):
        shard, grouped = element
        planned = list(grouped["planned"])
        if not planned:
            return
        # (fingerprint, what it hashes), or the fingerprint alone
        fingerprint, resume_key = planned[0] if isinstance(planned[0], tuple) else (planned[0], None)
        pieces = list(grouped["parts"])  # (PartInfo, (counts, input bytes, of them reused))
        parts_of_shard: list[PartInfo] = [info for info, _ in pieces]
        if pieces and all(info.committed for info in parts_of_shard):
            counts, input_bytes, reused_bytes = pieces[0][1]  # committed by the part writer
        else:
            counts, input_bytes, reused_bytes = next(iter(grouped["counts"]),
                                                     (Counts(), 0, 0))
        failures = list(grouped["failed"])
        tallies = list(grouped.get("records", ()))
        tally = sum(tallies, RecordTally()) if tallies else None
        too_bad = tally and too_many_bad(tally, self._max_bad_fraction, output=self._output)
        if too_bad and not failures:
            failures = [too_bad]
        # this run's temporaries (parts kept under _parts/ go once their stem is committed)
        temporaries = fsutil.join(self._temporary, shard)
        workers.note_work(f"committing shard {shard}")  # for the driver, should this worker die
        _stop_if_driver_gone()
        if failures:
            self._committer.fail(shard, failures[0])
            fsutil.remove_tree(temporaries)
            SHARDS_FAILED.inc()
            result = ShardResult(shard, None, counts, input_bytes=input_bytes, failed=failures[0])
            report_result(result)
            yield result
            return
        if parts_of_shard and all(p.committed for p in parts_of_shard):
            name = parts_of_shard[0].committed  # by the part writer, from memory, this run
        else:
            name = self._committer.commit(shard, fingerprint=fingerprint, resume_key=resume_key,
                                          parts=parts_of_shard, counts=counts,
                                          input_bytes=input_bytes, reused_bytes=reused_bytes)
            fsutil.remove_tree(temporaries)
        # Counted once per shard (a retried bundle's counts are not committed metrics).
        SHARDS_COMMITTED.inc()
        DOCUMENTS.inc(counts.documents)
        SEQUENCES.inc(counts.sequences)
        TOKENS.inc(counts.tokens)
        INPUT_BYTES.inc(input_bytes)
        result = ShardResult(shard, name, counts, input_bytes=input_bytes)
        report_result(result)
        yield result


def error_lines(reports: Iterable[dict]) -> str:
    """The lines of an ``_errors/{stem}.jsonl`` file: one report (BadRecordReport as JSON) each,
    in the order given (by offset)."""
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in reports)


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


class WriteShards(beam.PTransform):
    """TokenBatch -> ShardResult per planned shard (committed, or failed with a reason).

    ``planned``: PCollection of (shard, fingerprint) for every shard this run must produce, or
    (shard, (fingerprint, resume key)): the resume key (what the fingerprint hashes) goes into the
    commit record, so that a later run can say what changed.
    ``failed``: PCollection of (shard, reason) for shards whose input could not be read.
    ``guard``: the output lock's :class:`dataio.lock.OutputGuard` (Azure), checked before
    every commit.
    ``records``: PCollection of (shard, RecordTally) of the shard's input (any number per shard:
    they are summed), or None; a shard whose input has too many bad records (:func:`too_many_bad`
    with ``max_bad_fraction``) fails instead of committing.
    ``stale``: shard -> names (relative to ``output``, with counts, no suffix) of the shard's
    final files that older runs left (the planner's one listing per folder: manifest.final_files);
    a commit under another name removes them. None: each commit lists its folder to find them
    (work that grows with the folder: a pipeline of many shards passes the plan's).
    ``counted_names``: False commits each shard under its name alone, without counts
    (Megatron's ``P_{key}_{level}``: ``--output-prefix``).
    """

    def __init__(self, output: str, *, dtype, planned, failed, storage=None, run_id: str = "",
                 guard=None, records=None, max_bad_fraction: float = 1.0,
                 stale: dict[str, tuple[str, ...]] | None = None, counted_names: bool = True):
        super().__init__()
        self._counted_names = counted_names
        self._output, self._dtype = output, np.dtype(dtype).name
        self._planned, self._failed, self._storage = planned, failed, storage
        self._run_id, self._guard = run_id, guard
        self._records, self._max_bad_fraction = records, max_bad_fraction
        self._stale = stale

    def expand(self, token_batches):
        # Each part with its counts (summed by a combiner: the counts in the shard's name); each
        # shard the part writer committed itself, with its counts (nothing to sum); and each
        # item's tally (summed by the finaliser). Steps per shard are a cost per file in a
        # corpus of many small files: the last two take none of their own.
        written = token_batches | "WriteParts" >> beam.ParDo(
            _WritePartFn(self._output, self._dtype, self._storage, self._run_id,
                         guard=self._guard, max_bad_fraction=self._max_bad_fraction,
                         stale=self._stale, counted_names=self._counted_names)
        ).with_outputs(TALLIES, COMMITTED, main="parts")
        tallies = written[TALLIES]
        if self._records is not None:
            tallies = (tallies, self._records) | "AllTallies" >> beam.Flatten()
        counts = written.parts | "CountPerShard" >> beam.CombinePerKey(SumCountsFn())
        pieces = (written.parts, written[COMMITTED]) | "AllParts" >> beam.Flatten()
        gathered = {"planned": self._planned, "parts": pieces, "counts": counts,
                    "records": tallies, "failed": self._failed}
        grouped = gathered | "GatherParts" >> beam.CoGroupByKey()
        return grouped | "FinalizeShard" >> beam.ParDo(
            _FinalizeShardFn(self._output, self._dtype, self._storage, self._run_id,
                             guard=self._guard, max_bad_fraction=self._max_bad_fraction,
                             stale=self._stale, counted_names=self._counted_names))


class _WriteErrorsFn(StorageDoFn):
    def __init__(self, output: str, storage=None, guard=None):
        self._output, self._storage = output, storage
        self._guard = guard  # dataio.lock.OutputGuard: written only while the output is ours

    def process(self, element):
        stem, reports = element
        reports = sorted(reports, key=lambda r: r.offset)
        lines = error_lines(r.as_json() for r in reports)
        if self._guard is not None:
            self._guard.verify()
        fsutil.write_bytes_atomic(errors_path(self._output, stem), lines.encode("utf-8"))
        BAD_RECORDS.inc(len(reports))
        yield stem, len(reports)


class WriteErrors(beam.PTransform):
    """(stem, BadRecordReport) -> ``{output}/_errors/{stem}.jsonl`` sorted by offset, each
    written only while the output is still ours (``guard``: as for :class:`WriteShards`)."""

    def __init__(self, output: str, *, storage=None, guard=None):
        super().__init__()
        self._output, self._storage, self._guard = output, storage, guard

    def expand(self, errors):
        return (errors | "GroupErrors" >> beam.GroupByKey()
                | "WriteErrorFiles" >> beam.ParDo(
                    _WriteErrorsFn(self._output, self._storage, self._guard)))
