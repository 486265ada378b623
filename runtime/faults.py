"""Fault injection for tests and bench/fault_injection.py: kill the whole job at a named point
(or change an input under it).

The storage code calls ``checkpoint("sink.before_commit_record")`` and the like at the moments
where a crash is most likely to leave something half done (see the calls in dataio/indexed.py
and dataio/sink.py). Nothing happens unless the environment says so; the variables are read
once, at import, so an unset hook costs one global lookup and a compare per call.

``TOKENBEAM_FAULT=NAME:N``
    The N-th time (N >= 1) the job reaches checkpoint NAME, SIGKILL the job's process group:
    the driver and every worker die at once, as on a power loss or a SLURM kill, with no
    ``finally`` block, atexit hook or signal handler run. The group is that of the first process
    of the job to import this module (recorded in ``TOKENBEAM_FAULT_PGID`` for the workers it
    starts), so start the job in its own session (``subprocess.Popen(..., start_new_session=True)``)
    or it takes its parent down too. N counts per process unless TOKENBEAM_FAULT_COUNTER is set.
``TOKENBEAM_FAULT_COUNTER=PATH``
    Count hits of NAME job-wide: every hit appends one byte to PATH (O_APPEND, so processes do
    not lose each other's hits) and the hit that makes it N bytes or more kills.
``TOKENBEAM_FAULT_TRUNCATE=PATH:SIZE``
    Instead of killing, the N-th hit truncates the file PATH to SIZE bytes and the job goes on:
    an input cut short while the job reads it (with ``readers.item_started``, after planning,
    before a work item reads its bytes; for reshard, ``reshard.before_write``).
``TOKENBEAM_FAULT_SIGNAL=STOP``
    Pause instead of kill: the N-th hit (only that one) SIGSTOPs the job's process group, as a
    frozen VM or a long network partition would stall it; a SIGCONT from outside resumes it
    there (the lost-lease tests take the output over meanwhile).
``TOKENBEAM_FAULT_SIGNAL=EXIT``
    With ``TOKENBEAM_FAULT_SCOPE=process``: the process that makes the N-th hit exits with
    status 0 there, as a worker whose code called ``sys.exit`` would (the driver must not take
    that for the end of its work).
``TOKENBEAM_FAULT_SCOPE=process``
    Kill only the process that reaches the checkpoint, not its group: one ``--workers N``
    worker killed alone, as the OOM killer does (the driver must notice, see
    runners/local_runner.py). With TOKENBEAM_FAULT_COUNTER only the N-th hit job-wide kills,
    not the hits after it.
``TOKENBEAM_FAULT_TRACE=PATH``
    Append ``NAME`` and a newline to PATH for every checkpoint reached, by any process: a run
    with only this set tells a test how often each point is reached, so it can choose N.
"""

from __future__ import annotations

import os
import signal

FAULT_ENV = "TOKENBEAM_FAULT"
COUNTER_ENV = "TOKENBEAM_FAULT_COUNTER"
TRACE_ENV = "TOKENBEAM_FAULT_TRACE"
TRUNCATE_ENV = "TOKENBEAM_FAULT_TRUNCATE"
PGID_ENV = "TOKENBEAM_FAULT_PGID"
SIGNAL_ENV = "TOKENBEAM_FAULT_SIGNAL"
SCOPE_ENV = "TOKENBEAM_FAULT_SCOPE"

# Every checkpoint the code calls, in the order one shard passes them (a test picks from these).
POINTS = (
    "readers.item_started",       # a planned work item about to read its input (planning done)
    "indexed.bin_written",        # writer: .bin and .idx written under temporary names
    "indexed.between_renames",    # writer: .bin renamed to its final name, .idx not yet
    "sink.part_written",          # a part written under _parts/, its counts not yet out
    "sink.item_recorded",         # a work item's parts all written and its record too
    "sink.before_commit_record",  # final .bin/.idx in place, _commits/<shard>.json not yet
    "sink.before_cleanup",        # commit record written, stale files and parts not yet removed
    "sink.stem_committed",        # every shard of a one-item input committed, its parts not yet removed
)

# Reached by the reshard job only (so not in POINTS, which a tokenize run passes every one of).
RESHARD_POINTS = (
    "reshard.before_write",       # a planned shard about to read its inputs (measuring done)
    "reshard.between_renames",    # reshard's commit: a shard renamed into place, maybe not all
)

# Reached once per run by the process that takes the output's lock (not a shard's path, so not
# in POINTS): the lost-lease tests pause a run there, before it removes or writes anything.
LOCK_POINTS = (
    "tokenize.locked",            # the output's lock just taken; take-over clean-up not yet done
)


def _parse(spec: str | None) -> tuple[str, int] | None:
    if not spec:
        return None
    name, sep, count = spec.rpartition(":")
    if not sep or not name or not count.isdigit() or int(count) < 1:
        raise ValueError(f"{FAULT_ENV}={spec!r}: expected NAME:N with N >= 1, e.g. "
                         "sink.before_commit_record:2")
    return name, int(count)


_TARGET = _parse(os.environ.get(FAULT_ENV))
_PAUSE = os.environ.get(SIGNAL_ENV, "KILL").upper() == "STOP"
_EXIT = os.environ.get(SIGNAL_ENV, "KILL").upper() == "EXIT"
if os.environ.get(SIGNAL_ENV, "KILL").upper() not in ("KILL", "STOP", "EXIT"):
    raise ValueError(f"{SIGNAL_ENV}={os.environ[SIGNAL_ENV]!r}: expected KILL, STOP or EXIT")
_COUNTER = os.environ.get(COUNTER_ENV) or None
_TRACE = os.environ.get(TRACE_ENV) or None
_TRUNCATE = os.environ.get(TRUNCATE_ENV) or None
_ALONE = os.environ.get(SCOPE_ENV) == "process"
_ACTIVE = _TARGET is not None or _TRACE is not None
_hits = 0
if _TARGET is not None and _TRUNCATE is None and PGID_ENV not in os.environ:
    # The first process of the job records its group; the workers it starts inherit it.
    os.environ[PGID_ENV] = str(os.getpgrp())


def checkpoint(name: str) -> None:
    """A point where a crash is worth testing; a no-op unless TOKENBEAM_FAULT(_TRACE) is set."""
    if not _ACTIVE:
        return
    _reached(name)


def _append(path: str, data: bytes) -> int:
    """Append ``data`` to ``path``; returns the file's size just after this write (other
    processes' appends after it not counted)."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, data)
        # The offset O_APPEND left this descriptor at is set with the write, atomically; the
        # file's size (fstat) may already include another process's append, so two processes
        # could both see 2 and neither the 1 that should kill.
        return os.lseek(fd, 0, os.SEEK_CUR)
    finally:
        os.close(fd)


def _reached(name: str) -> None:
    global _hits
    if _TRACE is not None:
        _append(_TRACE, name.encode() + b"\n")
    if _TARGET is None or name != _TARGET[0]:
        return
    if _COUNTER is not None:
        hits = _append(_COUNTER, b"x")
    else:
        _hits += 1
        hits = _hits
    if _TRUNCATE is not None:
        if hits == _TARGET[1]:
            path, _, size = _TRUNCATE.rpartition(":")
            os.truncate(path, int(size))
    elif _PAUSE:
        if hits == _TARGET[1]:
            _signal_job(signal.SIGSTOP)
    elif _ALONE:
        if hits == _TARGET[1]:
            if _EXIT:
                os._exit(0)
            os.kill(os.getpid(), signal.SIGKILL)
    elif hits >= _TARGET[1]:
        kill_job()


def kill_job() -> None:
    """SIGKILL the job's process group (and this process, should it be in another group)."""
    _signal_job(signal.SIGKILL)
    os.kill(os.getpid(), signal.SIGKILL)


def _signal_job(signum: int) -> None:
    for pgid in {int(os.environ.get(PGID_ENV, os.getpgrp())), os.getpgrp()}:
        try:
            os.killpg(pgid, signum)
        except (ProcessLookupError, PermissionError):
            pass
    if os.getpgrp() != int(os.environ.get(PGID_ENV, os.getpgrp())):
        os.kill(os.getpid(), signum)
