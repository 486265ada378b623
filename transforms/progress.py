"""Progress of the tokenize step: one line for the whole job every ``--log-interval`` documents,
or a live bar when stderr is a terminal. No Beam import.

Units: MB is 10^6 bytes here and everywhere tokenbeam prints a size or a rate (the summary,
``--dry-run``); a power of two is written MiB.

Who prints what (:class:`ProgressPlan`, decided by the driver):

* one local process (the in-process runner): its :class:`Meter`, whose counts are the job's;
* ``--workers N`` local processes (``folder`` set): each worker's :class:`Meter` only notes its
  counts in a file of the driver's private folder (:func:`runtime.workers.note_counts`), and the
  driver's :class:`JobProgress` adds them up and prints the job's line (or bar): documents,
  bytes and tokens of all workers, rates since the first batch anywhere, and the ETA of the
  job's remaining bytes at that rate;
* a cluster runner's workers (Flink, Spark; ``labelled``): each process prints its own line,
  labelled with its pid and host as that process's counts only (its log is the TaskManager's or
  the executor's; the driver is elsewhere, and Beam's counters reach it only at the end).

Why files and not Beam's counters: they reach the driver with a bundle's end, and the local
runner gives each worker its share of a stage as few large bundles, so the driver would see the
counts only when most of the work is done. The files are progress only; the summary's figures
are the counters (pipelines/tokenize/outcome.py).

The ETA needs planned bytes comparable with what is counted: a compressed JSONL or a Parquet
input is counted in decoded text bytes, not in bytes on storage (the planner then passes
``planned_bytes=0``: no ETA), and a cluster's lines have none.

Lines come at batch ends (documents reach the tokenizer a batch at a time, ``--batch-documents``
at most; the driver reads the workers' counts twice a second): the first count at or past each
multiple of the interval gives one line, so an interval smaller than a batch gives a line per
batch.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import socket
import sys
import tempfile
import threading
import time

from runtime import errors, log, workers

MB = 10**6  # the unit of every size and rate tokenbeam prints
# A local worker notes its counts at most this often (a note is a small file written and
# renamed, which can take as long as a small batch does), and at each
# bundle's end.
NOTE_EVERY = 0.2


@dataclasses.dataclass(frozen=True)
class ProgressPlan:
    """What the driver tells the workers (picklable)."""

    interval: int = 10_000  # documents between lines; 0: no progress at all
    planned_bytes: int = 0  # the job's input bytes to read, all workers together; 0: unknown
    bar: bool | None = None  # None: a live bar when the reporter's stderr is a terminal
    run: str = ""  # the run's id: two runs in one process do not add to one meter
    folder: str = ""  # local worker processes: where each notes its counts for the driver
    labelled: bool = False  # a cluster's workers: each line is its own process's, labelled


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


def fraction(plan: ProgressPlan, done_bytes: int) -> float | None:
    """The job's fraction done (None: no comparable plan)."""
    if not plan.planned_bytes:
        return None
    return min(1.0, done_bytes / plan.planned_bytes)


def eta(plan: ProgressPlan, *, done_bytes: int, elapsed: float) -> str:
    """The ETA part of a line ('' when it cannot be told): the job's remaining bytes at the
    job's rate so far."""
    if not plan.planned_bytes or done_bytes <= 0 or elapsed <= 0:
        return ""
    left = max(plan.planned_bytes - done_bytes, 0.0)
    seconds = left / (done_bytes / elapsed)
    return (f"; {100.0 * fraction(plan, done_bytes):.0f}% of {plan.planned_bytes / MB:,.1f} MB "
            f"planned, ETA {duration(seconds)}")


def line(plan: ProgressPlan, *, documents: int, num_bytes: int, tokens: int, elapsed: float,
         routed: int | None = None) -> str:
    """One progress line (without a cluster worker's label)."""
    elapsed = max(elapsed, 1e-9)
    text = (f"Processed {documents:,} documents, {num_bytes / MB:,.1f} MB, {tokens:,} tokens "
            f"({documents / elapsed:,.0f} docs/s, {num_bytes / elapsed / MB:,.2f} MB/s, "
            f"{tokens / elapsed:,.0f} tokens/s)")
    if routed is not None:
        text += f"; {routed:,} texts routed to the reference tokenizer"
    return text + eta(plan, done_bytes=num_bytes, elapsed=elapsed)


class Meter:
    """Counts of this process; :meth:`add` after each batch logs a line when one is due (or,
    in a local worker process, notes its counts for the driver)."""

    def __init__(self, plan: ProgressPlan, *, clock=time.monotonic, stream=None):
        self.plan = plan
        self._clock = clock
        self._stream = stream
        self._lock = threading.Lock()
        self._start: float | None = None  # the first batch's arrival (begin), not set-up
        self._started_wall: float | None = None  # the same on the wall clock, for the driver
        self.documents = self.num_bytes = self.tokens = 0
        self.routed: int | None = None  # texts routed to the reference (fast backend only)
        self._next = plan.interval
        self._bar = None
        self._log = log.get("progress")
        self._noted_at = float("-inf")  # a local worker's last note of its counts
        self._unnoted = False

    def begin(self, *, at: float | None = None) -> None:
        """A batch has reached the tokenizer: rates count from the first (the worker's start-up
        and the stages before, reading included, are not tokenizing). ``at``: when, on this
        meter's clock (the driver's: the first batch of any worker)."""
        if self._start is None:
            with self._lock:
                if self._start is None:
                    self._start = self._clock() if at is None else at
                    self._started_wall = time.time()

    def _use_bar(self) -> bool:
        if self.plan.labelled:
            return False
        if self.plan.bar is not None:
            return self.plan.bar
        stream = self._stream or sys.stderr
        if not (hasattr(stream, "isatty") and stream.isatty()):
            return False
        try:  # a terminal of no width (`script` without one) would show no bar: lines instead
            return os.get_terminal_size(stream.fileno()).columns > 0
        except (AttributeError, OSError, ValueError):
            return True

    def add(self, *, documents: int, num_bytes: int, tokens: int,
            routed: int | None = None) -> str | None:
        """Add one batch (``routed``: its texts routed to the reference tokenizer, None without
        routing); returns the line logged, if one was due (None with a bar, and in a local
        worker process, whose counts go to the driver)."""
        if not self.plan.interval:
            return None
        self.begin()
        with self._lock:
            self.documents += documents
            self.num_bytes += num_bytes
            self.tokens += tokens
            if routed is not None:
                self.routed = (self.routed or 0) + routed
            if self.plan.folder:
                self._unnoted = True
                if self._clock() - self._noted_at >= NOTE_EVERY:
                    self._note()
                return None
            if self._use_bar():
                self._update_bar(num_bytes)
                return None
            if self.documents < self._next:
                return None
            self._next = (self.documents // self.plan.interval + 1) * self.plan.interval
            text = line(self.plan, documents=self.documents, num_bytes=self.num_bytes,
                        tokens=self.tokens, elapsed=self._clock() - self._start,
                        routed=self.routed)
            if self.plan.labelled:
                text = f"worker {os.getpid()}@{socket.gethostname()} (this process only): {text}"
        self._log.info("%s", text)
        return text

    def _note(self) -> None:
        """(Under the lock.) This worker's counts, for the driver."""
        workers.note_counts(self.plan.folder, {
            "documents": self.documents, "bytes": self.num_bytes, "tokens": self.tokens,
            "routed": self.routed, "started": self._started_wall})
        self._noted_at, self._unnoted = self._clock(), False

    def flush(self) -> None:
        """Note the counts not noted yet (a local worker, at the end of a bundle: before the
        driver's last read, which comes after the pipeline's last bundle)."""
        with self._lock:
            if self.plan.folder and self._unnoted:
                self._note()

    def _update_bar(self, num_bytes: int) -> None:
        if self._bar is None:
            from tqdm import tqdm

            # unit_divisor 1000: tqdm's "MB" is then 10^6 bytes, as in the lines and the summary
            self._bar = tqdm(total=self.plan.planned_bytes or None, unit="B", unit_scale=True,
                             unit_divisor=1000, desc="tokenize", leave=False,
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


def worker_folder() -> str:
    """A private folder (0700) where ``--workers N`` local processes note their counts."""
    return tempfile.mkdtemp(prefix="tokenbeam-progress-")


class JobProgress:
    """The driver's side of ``--workers N``: every ``poll`` seconds it adds up the counts the
    local worker processes noted in ``plan.folder`` and feeds the job's total to one
    :class:`Meter` (the job's line, or its bar on a terminal). Each worker's counts only grow,
    so the job's do too. :meth:`close` reads them a last time, ends the bar and removes the
    folder."""

    def __init__(self, plan: ProgressPlan, *, poll: float = 0.5, clock=time.monotonic,
                 stream=None):
        self.folder = plan.folder
        self.meter = Meter(dataclasses.replace(plan, folder=""), clock=clock, stream=stream)
        self._clock = clock
        self._told = {"documents": 0, "bytes": 0, "tokens": 0, "routed": 0}
        self._poll = poll
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="tokenbeam-progress",
                                        daemon=True)
        self._forget = lambda: None

    def start(self) -> "JobProgress":
        log.ensure()
        # an interrupt or a dead worker ends the driver without unwinding: the folder goes too
        self._forget = errors.release_on_interrupt(self._remove)
        self._thread.start()
        return self

    def _remove(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)

    def _watch(self) -> None:
        while not self._stop.wait(self._poll):
            self.update()

    def update(self) -> str | None:
        """Read the workers' counts once; returns the line logged, if one was due."""
        noted = workers.noted_counts(self.folder)
        total = {k: sum(int(n.get(k) or 0) for n in noted) for k in self._told}
        delta = {k: total[k] - self._told[k] for k in total}
        if not any(delta.values()):
            return None
        started = [float(n["started"]) for n in noted if n.get("started")]
        if started:  # the first batch of any worker, on this process's clock
            self.meter.begin(at=self._clock() - max(0.0, time.time() - min(started)))
        self._told = total
        routed = delta["routed"] if any(n.get("routed") is not None for n in noted) else None
        return self.meter.add(documents=delta["documents"], num_bytes=delta["bytes"],
                              tokens=delta["tokens"], routed=routed)

    def close(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        self.update()
        self.meter.close()
        self._forget()
        self._remove()


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
