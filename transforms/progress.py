"""Progress of the tokenize step in a worker process: a line every ``--log-interval`` documents,
or a live bar when stderr is a terminal. No Beam import.

What a worker knows is its own work: the documents, input bytes and tokens that went through
the tokenizer in this process (every DoFn instance of the process adds to one :class:`Meter`).
What the driver planned travels in :class:`ProgressPlan`: the job's planned input bytes and the
number of local worker processes. From them comes the ETA:

* one worker: the job's remaining bytes at this worker's rate so far;
* N workers: the ETA of this worker's even share (planned bytes / N), i.e. of the job if the
  workers go alike; the work items are not all the same size, so the last worker may take
  longer. The line says so ("ETA of its share").
* no ETA when the planned bytes are not comparable with what is counted: a compressed JSONL or
  a Parquet input is counted in decoded text bytes, not in bytes on storage (the planner then
  passes ``planned_bytes=0``), and on a cluster runner, whose worker count is not ours.

Lines come at batch ends (documents reach the tokenizer a batch at a time, ``--batch-documents``
at most): the first batch end at or past each multiple of the interval gives one line, so an
interval smaller than a batch gives a line per batch.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import threading
import time

from dataio import log


@dataclasses.dataclass(frozen=True)
class ProgressPlan:
    """What the driver tells the workers (picklable)."""

    interval: int = 10_000  # documents between lines; 0: no progress at all
    planned_bytes: int = 0  # the job's input bytes to read, all workers together; 0: unknown
    workers: int = 1  # local worker processes sharing those bytes
    bar: bool | None = None  # None: a live bar when stderr is a terminal and workers == 1
    run: str = ""  # the run's id: two runs in one process do not add to one meter


def planned_bytes(inputs) -> int:
    """The bytes a run will count, from ``(format, size)`` of each input it reads: their sum
    when every input is plain JSONL (its lines' bytes are counted), else 0 (unknown: a
    compressed or Parquet input is counted in decoded text, not in bytes on storage)."""
    inputs = list(inputs)
    if not inputs or any(fmt != "jsonl" for fmt, _ in inputs):
        return 0
    return sum(size for _, size in inputs)


def duration(seconds: float) -> str:
    """``1:02:03`` / ``2:03`` for an ETA."""
    seconds = max(0, int(round(seconds)))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def eta(plan: ProgressPlan, *, done_bytes: int, elapsed: float) -> str:
    """The ETA part of a line ('' when it cannot be told)."""
    if not plan.planned_bytes or done_bytes <= 0 or elapsed <= 0:
        return ""
    share = plan.planned_bytes / max(plan.workers, 1)
    left = max(share - done_bytes, 0.0)
    seconds = left / (done_bytes / elapsed)
    if plan.workers > 1:
        percent = min(100.0, 100.0 * done_bytes / share)
        return (f"; {percent:.0f}% of its share ({plan.planned_bytes / 2**20:,.1f} MB planned / "
                f"{plan.workers} workers), ETA of its share {duration(seconds)}")
    percent = min(100.0, 100.0 * done_bytes / plan.planned_bytes)
    return (f"; {percent:.0f}% of {plan.planned_bytes / 2**20:,.1f} MB planned, "
            f"ETA {duration(seconds)}")


def line(plan: ProgressPlan, *, documents: int, num_bytes: int, tokens: int, elapsed: float,
         routed: int | None = None) -> str:
    """One progress line (without the worker's name)."""
    elapsed = max(elapsed, 1e-9)
    text = (f"Processed {documents:,} documents, {num_bytes / 2**20:,.1f} MB, {tokens:,} tokens "
            f"({documents / elapsed:,.0f} docs/s, {num_bytes / elapsed / 2**20:,.2f} MB/s, "
            f"{tokens / elapsed:,.0f} tokens/s)")
    if routed is not None:
        text += f"; {routed:,} texts routed to the reference tokenizer"
    return text + eta(plan, done_bytes=num_bytes, elapsed=elapsed)


class Meter:
    """Counts of this process; :meth:`add` after each batch logs a line when one is due."""

    def __init__(self, plan: ProgressPlan, *, clock=time.monotonic, stream=None):
        self.plan = plan
        self._clock = clock
        self._stream = stream
        self._lock = threading.Lock()
        self._start: float | None = None  # the first batch's arrival (begin), not set-up
        self.documents = self.num_bytes = self.tokens = 0
        self.routed: int | None = None  # texts routed to the reference (fast backend only)
        self._next = plan.interval
        self._bar = None
        self._log = log.get("progress")

    def begin(self) -> None:
        """A batch has reached the tokenizer: rates count from the first (the worker's start-up
        and the stages before, reading included, are not tokenizing)."""
        if self._start is None:
            with self._lock:
                if self._start is None:
                    self._start = self._clock()

    def _use_bar(self) -> bool:
        if self.plan.bar is not None:
            return self.plan.bar
        stream = self._stream or sys.stderr
        return self.plan.workers <= 1 and hasattr(stream, "isatty") and stream.isatty()

    def _name(self) -> str:
        return f"worker {os.getpid()}: " if self.plan.workers > 1 else ""

    def add(self, *, documents: int, num_bytes: int, tokens: int,
            routed: int | None = None) -> str | None:
        """Add one batch (``routed``: its texts routed to the reference tokenizer, None without
        routing); returns the line logged, if one was due (None with a bar)."""
        if not self.plan.interval:
            return None
        self.begin()
        with self._lock:
            self.documents += documents
            self.num_bytes += num_bytes
            self.tokens += tokens
            if routed is not None:
                self.routed = (self.routed or 0) + routed
            if self._use_bar():
                self._update_bar(num_bytes)
                return None
            if self.documents < self._next:
                return None
            self._next = (self.documents // self.plan.interval + 1) * self.plan.interval
            text = self._name() + line(self.plan, documents=self.documents,
                                       num_bytes=self.num_bytes, tokens=self.tokens,
                                       elapsed=self._clock() - self._start, routed=self.routed)
        self._log.info("%s", text)
        return text

    def _update_bar(self, num_bytes: int) -> None:
        if self._bar is None:
            from tqdm import tqdm

            self._bar = tqdm(total=self.plan.planned_bytes or None, unit="B", unit_scale=True,
                             unit_divisor=1024, desc="tokenize", leave=False,
                             file=self._stream or sys.stderr, dynamic_ncols=True)
        postfix = {"docs": f"{self.documents:,}", "tokens": f"{self.tokens:,}"}
        if self.routed:
            postfix["routed"] = f"{self.routed:,}"
        self._bar.set_postfix(postfix, refresh=False)
        self._bar.update(num_bytes)

    def close(self) -> None:
        with self._lock:
            if self._bar is not None:
                self._bar.close()
                self._bar = None


_meters: dict[ProgressPlan, Meter] = {}
_meters_lock = threading.Lock()


def meter(plan: ProgressPlan) -> Meter:
    """The process's meter for ``plan`` (one per job: every DoFn instance adds to it)."""
    log.ensure()
    with _meters_lock:
        found = _meters.get(plan)
        if found is None:
            found = _meters[plan] = Meter(plan)
        return found


def close_all() -> None:
    """Close live bars (before the summary is printed) and forget the meters."""
    with _meters_lock:
        meters = list(_meters.values())
        _meters.clear()
    for m in meters:
        m.close()
