"""Local worker processes die with their driver.

With ``--workers N`` Beam's FnApiRunner starts N ``sdk_worker_main`` processes through
``/bin/sh -c`` (dash does not exec, and Beam's clean-up kills only the shell). Left alone they
outlive a driver that is killed or interrupted, and go on reading, writing parts and committing
shards for seconds, overlapping an immediate rerun. :class:`LocalRunner` (``--runner`` is set
to it, in runners/local_runner.py, for more than one worker by pipelines/options.py) starts
each worker as ``python -m runners.worker_main`` instead (no shell), which calls
:func:`guard_worker` before it takes any work:

* ``PR_SET_PDEATHSIG``: the kernel SIGKILLs the worker the moment the driver thread that
  started it ends, however the driver ends, ``kill -9`` included (no shell between);
* a watchdog thread waits on a pidfd of the driver and SIGKILLs the worker when the driver
  ends, should the parent not be the driver after all; a driver already gone at start-up (a
  race) makes the worker exit at once;
* :func:`driver_gone` lets the sink check, right before a commit, that the driver still runs;
* SIGINT and SIGTERM are ignored: Ctrl-C (and SLURM's or ``kill -TERM -PGID``'s SIGTERM)
  reaches the whole process group, and only the driver answers it (one line, not a traceback
  per worker); the driver's exit then stops the workers;
* the worker's own stderr logging is silenced: its log reaches the driver through Beam's
  logging service (warnings and up printed there once), and a failing bundle is reported by
  the driver's main() (runtime/errors.py).

The other way round, a worker that dies (the OOM killer's SIGKILL, a crash) would leave Beam's
runner waiting for its answer for ever. The driver waits on each worker process itself
(runners/local_runner.py): the moment one ends while the job runs, it stops the others
(SIGKILL: the commit protocol is built for it, nothing half-done looks committed), and ends
the job with one line (:func:`death_message`) and exit status 1; the rerun resumes. For that
line each worker notes what it is working on (:func:`note_work`, a file per worker in a
private folder of the driver's, :data:`NOTES_ENV`).

The same kind of note carries ``--workers N``'s progress: each worker process notes its
counts (:func:`note_counts`) in a private folder of the driver's, which adds them up into the
job's one progress line (transforms/progress.py).
"""

from __future__ import annotations

import ctypes
import json
import os
import select
import signal
import threading

from runtime.text import printable

DRIVER_ENV = "TOKENBEAM_DRIVER_PID"
NOTES_ENV = "TOKENBEAM_WORKER_NOTES"  # the driver's folder where workers note their work
# runners/local_runner.py's class as a --runner value, by name: Beam imports it from that string,
# and neither pipelines/ (which sets it) nor this Beam-free module may import runners/.
RUNNER = "runners.local_runner.LocalRunner"
_PR_SET_PDEATHSIG = 1


def is_local_worker() -> bool:
    """This process is a worker the local runner started (``--workers N``): it runs on the
    driver's machine, in the driver's environment."""
    return bool(os.environ.get(NOTES_ENV))


def mark_driver() -> None:
    """Called in the driver: workers started from now on know whom to die with."""
    os.environ[DRIVER_ENV] = str(os.getpid())


_driver_fd: int | None = None


def driver_gone() -> bool:
    """True in a worker whose driver has ended (exited, killed, or a zombie); False in the
    driver itself and wherever the driver is unknown."""
    if _driver_fd is None:
        return False
    return bool(select.select([_driver_fd], [], [], 0)[0])


def _watch(fd: int) -> None:
    select.select([fd], [], [])  # readable once the driver has ended
    os.kill(os.getpid(), signal.SIGKILL)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def guard_worker() -> bool:
    """Tie this process's life to the driver's; True when it did (False: not a worker, or no
    pidfd on this platform)."""
    driver = os.environ.get(DRIVER_ENV)
    if not driver or not driver.isdigit() or int(driver) == os.getpid():
        return False
    global _driver_fd
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # SLURM and `kill -TERM -PGID` hit all of us
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass  # not Linux
    try:
        _driver_fd = os.pidfd_open(int(driver))
    except (OSError, AttributeError):  # gone already, or no pidfd (Linux < 5.3, not Linux)
        if not _alive(int(driver)):
            os._exit(1)
        return False
    threading.Thread(target=_watch, args=(_driver_fd,), name="tokenbeam-driver-watch",
                     daemon=True).start()
    return True


_noted: list[str] = []  # this process's last note


def last_note() -> str | None:
    """What this process noted last (to note it again after an aside, e.g. a commit)."""
    return _noted[-1] if _noted else None


def note_work(what: str) -> None:
    """In a local worker: ``what`` is the work item it starts on (e.g. ``reading a.jsonl bytes
    0-1000``), for the driver's message should the worker die. A no-op elsewhere.

    Noted 3 times per input, so it is one ``pwrite`` into a file the process keeps open (a file
    created, written and renamed over the last one cost 0.15 ms, 0.4 ms per one-line input):
    the note's length, a newline, the note, all in the file's first page, which the kernel
    writes whole or not at all should the worker be killed (:func:`noted_work` reads it)."""
    _noted[:] = [what]
    folder = os.environ.get(NOTES_ENV)
    if not folder:
        return
    data = what.encode("utf-8", "replace")[:_NOTE_BYTES].decode("utf-8", "ignore").encode()
    try:
        os.pwrite(_note_file(folder), b"%08d\n" % len(data) + data, 0)
    except OSError:
        pass  # the driver is gone (its folder with it): nothing to tell


_NOTE_BYTES = 3000  # a note is cut to this (its length line and it stay within one page)
_note_fd: dict[tuple[str, int], int] = {}  # (folder, pid) -> the open note file


def _note_file(folder: str) -> int:
    key = (folder, os.getpid())  # (a forked process notes in its own file)
    fd = _note_fd.get(key)
    if fd is None:
        fd = _note_fd[key] = os.open(os.path.join(folder, str(key[1])),
                                     os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600)
    return fd


def noted_work(folder: str, pid: int) -> str | None:
    """What worker ``pid`` last noted in ``folder`` (None: nothing yet)."""
    try:
        with open(os.path.join(folder, str(pid)), "rb") as f:
            head = f.read(9)
            text = f.read(int(head[:8])) if head[8:] == b"\n" else b""
    except (OSError, ValueError):
        return None
    return text.decode("utf-8", "replace") or None


_COUNTS = ".counts"


def note_counts(folder: str, counts: dict) -> None:
    """In a local worker: this process's progress ``counts`` (JSON-able), replacing its last
    note in the driver's ``folder`` (whole: a kill mid-write leaves the previous one)."""
    path = os.path.join(folder, f"{os.getpid()}{_COUNTS}")
    try:
        with open(path + ".tmp", "w", encoding="utf-8") as f:
            json.dump(counts, f)
        os.replace(path + ".tmp", path)
    except OSError:
        pass  # the driver is gone (its folder with it): nothing to tell


def noted_counts(folder: str) -> list[dict]:
    """The last counts each worker noted in ``folder`` (one dict per worker process)."""
    try:
        names = [n for n in os.listdir(folder) if n.endswith(_COUNTS)]
    except OSError:
        return []
    found = []
    for name in names:
        try:
            with open(os.path.join(folder, name), encoding="utf-8") as f:
                found.append(json.load(f))
        except (OSError, ValueError):
            pass  # gone meanwhile
    return found


def death_message(*, number: int, total: int, pid: int, status: int, last: str | None) -> str:
    """The one line for a local worker that ended while the job ran (``status``: its exit
    status, negative for a signal as ``subprocess`` gives it)."""
    if status < 0:
        try:
            name = signal.Signals(-status).name
        except ValueError:
            name = f"signal {-status}"
        how = f"was killed by {name}" + (" (out of memory?)" if -status == signal.SIGKILL else "")
    else:
        how = f"exited with status {status}"
    if last:  # one line, whatever the file name holds
        last = printable(last)
    doing = f"its last work item: {last}" if last else "it had taken no work yet"
    return (f"worker {number} of {total} (pid {pid}) {how}; {doing}; the other workers were "
            "stopped; rerun the same command to resume")


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity, e.g. a SLURM or cgroup cpuset)."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def capped_workers(requested: int, *, cores: int, items: int) -> tuple[int, str]:
    """``--workers N``: (processes, why): N, or fewer where more could not run at once. A
    process beyond the cores only competes for them, and one beyond the work items has nothing
    to do but start (Megatron's habitual --workers 64 made a run on 2 cores 14x slower)."""
    useful = max(1, min(cores, items))
    if requested <= useful:
        return requested, "--workers"
    limit = (f"{cores} usable core{'s' * (cores != 1)}" if useful == cores
             else f"{items} work item{'s' * (items != 1)}")
    return useful, (f"--workers {requested} capped at {useful}: no more than the {limit}; "
                    "more processes only compete for the cores")


def auto_workers(*, backend: str, cores: int, items: int) -> tuple[int, str]:
    """``--workers auto``: (processes, why). The fast backend encodes a batch on native threads
    over every core already, so a second process only adds its start-up and competes for the
    same cores (bench/throughput.py: 2 workers slower than 1 on 2 cores); the reference backend
    gains from one process per core, but not from more processes than work items."""
    if backend == "fast":
        return 1, f"auto: the fast backend's threads use the {cores} cores"
    n = max(1, min(cores, items))
    limit = f"{cores} cores" if n == cores else f"{items} work items"
    return n, f"auto: {backend} backend, one per core, at most one per work item ({limit})"
