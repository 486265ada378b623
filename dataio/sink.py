"""The shard sink: token batches -> committed ``{shard}_dc=N_sc=N_tc=N.bin/.idx``.

Protocol (the same on local disk and object stores):

1. Each TokenBatch is written as a *part*, a small indexed dataset at
   ``{output}/_temporary/{run id}/{shard}/{item:06d}-{batch:06d}``. Part names are deterministic,
   so a retried bundle overwrites its own parts (each part is itself written temp-then-rename);
   the run id keeps one run's parts apart from any other's (a run removes only its own; the
   leftovers of dead runs only once the output's lock, dataio/lock.py, proves no run is alive).
2. Counts (documents, sequences, tokens; and the input bytes they came from) are combined per
   shard by a CombineFn.
3. Parts are grouped per shard together with the planned shard list (so a shard with no
   documents is still committed, empty) and any read failure of its input.
4. FinalizeShard concatenates the parts in input order into the final name (the writer renames
   ``.bin`` then ``.idx``; on local disk a lone part's ``.bin`` is hard-linked, several are
   joined by the kernel, so no token passes through Python a second time; see
   dataio/indexed.py), then writes the commit record ``{output}/_commits/{shard}.json`` last,
   removes final files of older runs with other counts, and deletes the parts. A shard is
   committed exactly when its commit record exists and names files that exist. Finalize is
   idempotent: run twice, it finds its own record and does nothing more. A worker whose driver
   has ended commits nothing more (dataio/workers.py); on Azure, neither does one whose run
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
from typing import Iterable

import apache_beam as beam
import numpy as np

from dataio import faults
from dataio import fs as fsutil
from dataio import indexed, naming, workers
from dataio.indexed import Counts
from dataio.lock import TEMPORARY_DIR
# The records, Beam-free for the planner (dataio/manifest.py), are the sink's public names too
# (bench/fault_injection.py and the tests use them here).
from dataio.manifest import (COMMITS_DIR, ERRORS_DIR, FAILURES_DIR, PartInfo, ShardResult,
                             commit_record_path, encode_result, errors_path,
                             failure_record_path, is_committed, read_commit_record,
                             temporary_dir)

__all__ = ["WriteShards", "WriteErrors", "SumCountsFn", "RecordTally", "SumTalliesFn",
           "too_many_bad", "METRICS", "ShardResult", "PartInfo",
           "COMMITS_DIR", "ERRORS_DIR", "FAILURES_DIR", "TEMPORARY_DIR", "commit_record_path",
           "errors_path", "failure_record_path", "is_committed", "read_commit_record",
           "temporary_dir"]

METRICS = "tokenbeam"  # the namespace of the sink's counters
_metric = beam.metrics.Metrics.counter
PARTS = _metric(METRICS, "parts")
SHARDS_COMMITTED = _metric(METRICS, "shards_committed")
SHARDS_FAILED = _metric(METRICS, "shards_failed")
DOCUMENTS = _metric(METRICS, "documents")
SEQUENCES = _metric(METRICS, "sequences")
TOKENS = _metric(METRICS, "tokens")
INPUT_BYTES = _metric(METRICS, "input_bytes")
BAD_RECORDS = _metric(METRICS, "bad_records")
# Every ShardResult, encoded (dataio/manifest.py encode_result): what the driver learns was
# committed. A string set holds 1 MB at most, so the driver trusts it only when it names every
# shard it planned.
SHARD_RESULTS = beam.metrics.Metrics.string_set(METRICS, "shard_results")


class SumCountsFn(beam.CombineFn):
    """(Counts, input bytes) of a shard's parts, summed; the accumulator is that pair."""

    def create_accumulator(self):
        return Counts(), 0

    def add_input(self, acc, counts):
        return acc[0] + counts[0], acc[1] + counts[1]

    def merge_accumulators(self, accs):
        total, num_bytes = Counts(), 0
        for counts, more in accs:
            total, num_bytes = total + counts, num_bytes + more
        return total, num_bytes

    def extract_output(self, acc):
        return acc


@dataclasses.dataclass(frozen=True)
class RecordTally:
    """What one input's records came to: ``records`` read, ``bad`` of them (the parser's and
    the tokenizer's bad records), and the first bad one in the file (smallest byte offset, or
    row for Parquet): where it is and why. The reader tallies every input; the sink decides with
    it whether the input's shards may be committed (:func:`too_many_bad`)."""

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


class SumTalliesFn(beam.CombineFn):
    """RecordTallies summed (the first bad record kept)."""

    def create_accumulator(self):
        return RecordTally()

    def add_input(self, acc, tally):
        return acc + tally

    def merge_accumulators(self, accs):
        total = RecordTally()
        for acc in accs:
            total = total + acc
        return total

    def extract_output(self, acc):
        return acc


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


class _WritePartFn(beam.DoFn):
    def __init__(self, output: str, dtype: str, storage=None, run_id: str = ""):
        self._output, self._dtype, self._storage = output, dtype, storage
        self._temporary = temporary_dir(output, run_id)

    def setup(self):
        if self._storage is not None:
            self._storage.apply()

    def process(self, tb):
        item, batch = tb.order
        prefix = fsutil.join(self._temporary, tb.shard, f"{item:06d}-{batch:06d}")
        with indexed.IndexedDatasetWriter(prefix, dtype=self._dtype) as writer:
            writer.add_batch(tb.tokens, tb.sequence_lengths, tb.sequences_per_document)
        faults.checkpoint("sink.part_written")
        PARTS.inc()
        counts = Counts(tb.documents, int(tb.sequence_lengths.size), int(tb.tokens.size))
        yield tb.shard, (PartInfo(order=tb.order, prefix=prefix, counts=counts),
                         (counts, tb.num_bytes))


class _FinalizeShardFn(beam.DoFn):
    def __init__(self, output: str, dtype: str, storage=None, run_id: str = "", guard=None,
                 max_bad_fraction: float = 1.0, stale: dict[str, tuple[str, ...]] | None = None):
        self._output, self._dtype, self._storage = output, dtype, storage
        self._temporary = temporary_dir(output, run_id)
        self._guard = guard  # dataio.lock.OutputGuard: still ours? (None: cannot be lost)
        self._max_bad_fraction = max_bad_fraction
        self._stale = stale  # as WriteShards' ``stale``

    def _still_ours(self) -> None:
        _stop_if_driver_gone()
        if self._guard is not None:
            self._guard.verify()

    def setup(self):
        if self._storage is not None:
            self._storage.apply()

    def process(self, element):
        shard, grouped = element
        planned = list(grouped["planned"])
        if not planned:
            return
        # (fingerprint, what it hashes), or the fingerprint alone
        fingerprint, resume_key = planned[0] if isinstance(planned[0], tuple) else (planned[0], None)
        parts: list[PartInfo] = sorted(grouped["parts"], key=lambda p: p.order)
        counts, input_bytes = next(iter(grouped["counts"]), (Counts(), 0))
        failures = list(grouped["failed"])
        tally = next(iter(grouped.get("records", ())), None)
        too_bad = tally and too_many_bad(tally, self._max_bad_fraction, output=self._output)
        if too_bad and not failures:
            failures = [too_bad]
        parts_dir = fsutil.join(self._temporary, shard)
        workers.note_work(f"committing shard {shard}")  # for the driver, should this worker die
        _stop_if_driver_gone()
        if failures:
            record = {"shard": shard, "reason": failures[0], "at": _now()}
            self._still_ours()
            fsutil.write_bytes_atomic(failure_record_path(self._output, shard),
                                      json.dumps(record, indent=1).encode())
            fsutil.remove_tree(parts_dir)
            SHARDS_FAILED.inc()
            result = ShardResult(shard, None, counts, input_bytes=input_bytes, failed=failures[0])
            SHARD_RESULTS.add(encode_result(result))
            yield result
            return
        name = naming.with_counts(shard, counts.documents, counts.sequences, counts.tokens)
        final = fsutil.join(self._output, name)
        committed, _ = is_committed(self._output, shard, fingerprint)
        if not committed:
            try:
                self._merge(parts, final, counts)
            except FileNotFoundError:
                # a part gone: the run that took the output over (this one paused past its
                # lease) removed this run's temporaries; say that, not the missing file
                self._still_ours()
                raise
            record = {"shard": shard, "name": name, "fingerprint": fingerprint,
                      "documents": counts.documents, "sequences": counts.sequences,
                      "tokens": counts.tokens, "input_bytes": input_bytes,
                      "bin_size": fsutil.size(final + ".bin"),
                      "idx_size": fsutil.size(final + ".idx"), "committed_at": _now(),
                      **({"resume_key": resume_key} if resume_key else {})}
            faults.checkpoint("sink.before_commit_record")
            self._still_ours()
            fsutil.write_bytes_atomic(commit_record_path(self._output, shard),
                                      json.dumps(record, indent=1).encode())
            faults.checkpoint("sink.before_cleanup")
            self._still_ours()
            fsutil.remove(failure_record_path(self._output, shard))
            self._remove_stale(shard, name)
        fsutil.remove_tree(parts_dir)
        # Counted once per shard (a retried bundle's counts are not committed metrics).
        SHARDS_COMMITTED.inc()
        DOCUMENTS.inc(counts.documents)
        SEQUENCES.inc(counts.sequences)
        TOKENS.inc(counts.tokens)
        INPUT_BYTES.inc(input_bytes)
        result = ShardResult(shard, name, counts, input_bytes=input_bytes)
        SHARD_RESULTS.add(encode_result(result))
        yield result

    def _merge(self, parts: Iterable[PartInfo], final: str, counts: Counts) -> None:
        parts = list(parts)
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
                        self._still_ours()
                        fsutil.remove(fsutil.join(self._output, old + suffix))
            return
        folder = fsutil.join(self._output, os.path.dirname(shard)) if os.path.dirname(shard) \
            else self._output
        base = os.path.basename(shard)
        current = os.path.basename(name)
        for entry in fsutil.list_names(folder):
            stem = indexed.prefix_of(entry)
            if stem != current and naming.strip_counts(stem) == base and \
                    naming.parse_counts(stem) is not None and entry.endswith((".bin", ".idx")):
                fsutil.remove(fsutil.join(folder, entry))


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
    """

    def __init__(self, output: str, *, dtype, planned, failed, storage=None, run_id: str = "",
                 guard=None, records=None, max_bad_fraction: float = 1.0,
                 stale: dict[str, tuple[str, ...]] | None = None):
        super().__init__()
        self._output, self._dtype = output, np.dtype(dtype).name
        self._planned, self._failed, self._storage = planned, failed, storage
        self._run_id, self._guard = run_id, guard
        self._records, self._max_bad_fraction = records, max_bad_fraction
        self._stale = stale

    def expand(self, token_batches):
        parts = token_batches | "WriteParts" >> beam.ParDo(
            _WritePartFn(self._output, self._dtype, self._storage, self._run_id))
        counts = (parts | "PartCounts" >> beam.MapTuple(lambda shard, pc: (shard, pc[1]))
                  | "CountPerShard" >> beam.CombinePerKey(SumCountsFn()))
        part_infos = parts | "PartInfos" >> beam.MapTuple(lambda shard, pc: (shard, pc[0]))
        gathered = {"planned": self._planned, "parts": part_infos, "counts": counts,
                    "failed": self._failed}
        if self._records is not None:
            gathered["records"] = (self._records
                                   | "TallyPerShard" >> beam.CombinePerKey(SumTalliesFn()))
        grouped = gathered | "GatherParts" >> beam.CoGroupByKey()
        return grouped | "FinalizeShard" >> beam.ParDo(
            _FinalizeShardFn(self._output, self._dtype, self._storage, self._run_id,
                             guard=self._guard, max_bad_fraction=self._max_bad_fraction,
                             stale=self._stale))


class _WriteErrorsFn(beam.DoFn):
    def __init__(self, output: str, storage=None, guard=None):
        self._output, self._storage = output, storage
        self._guard = guard  # dataio.lock.OutputGuard: written only while the output is ours

    def setup(self):
        if self._storage is not None:
            self._storage.apply()

    def process(self, element):
        stem, reports = element
        reports = sorted(reports, key=lambda r: r.offset)
        lines = "".join(json.dumps(r.as_json(), ensure_ascii=False) + "\n" for r in reports)
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
