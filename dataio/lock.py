"""One run at a time per output folder: ``{output}/_lock``.

Two runs into one folder would both do all the work, and the first to finish would delete the
other's temporaries under it. So a run takes the lock before it plans, holds it to the end, and
a second run is refused (exit status 1: nothing is wrong with its command line; run it again
once the first has finished, and it resumes) with a message naming the holder.

Local folders (and any mounted file system): ``flock`` on ``{output}/_lock``, whose text names
the holder (host, PID, start time, run id, command). The kernel drops the lock when the holder
dies, however it dies, so a lock left by a killed run is stale by construction: the next run
takes it over, says so, and may then remove every leftover of dead runs (``_temporary/``).
Over NFS, Linux maps ``flock`` onto NFS byte-range locks, which the server releases when the
client holding them dies. A file system without locks is refused (exit status 2), naming it.
The lock is opened with ``O_NOFOLLOW``, and an output whose control files or folders
(:data:`CONTROL_NAMES`: ``_lock``, ``_temporary/``, ``_commits/``..., and ``holdout/``, where
holdout shards go) are symbolic links is refused (exit status 2): a link planted there would
have the run write or delete elsewhere.

A run whose pipeline runs elsewhere and may outlive its launcher (a Spark batch submitted by
``runners/spark.py``) also leaves a *detached hold*, ``{output}/_temporary/{run id}/detached.json``
naming the batch: while it is there, a new run refuses the output even though no process holds
the lock, because the batch may still be writing. The batch's last step removes it with the
run's temporaries; a launcher that can ask the cluster (``runners.spark submit``) takes over the
holds of batches that have ended.

Azure: a lease on the blob ``{output}/_lock`` (:func:`dataio.azure.acquire_lease`), renewed
while the run lives; a killed holder stops renewing and the service frees it within the lease
time. A rerun on the machine where the holder died need not wait: when the lock's text names a
process of this machine and boot that no longer runs (:func:`holder_is_dead`), the lease is
broken (conditionally on the blob not having changed since it was read) and taken over. A
holder whose lease ran out (it was killed elsewhere, or paused: a frozen VM, a network
partition) is replaced by the next run, which says whose lock it was and how old it and the
temporaries it removes are. Other URL schemes have no lock primitive here: the run goes on
unlocked, with a warning.

A lease can run out under a live run that was paused, and another run may then take the output
over. So on Azure every commit (a commit record, a failure record, the removal of a shard's stale
files, metadata.json) and every other deletion or write made in the output once the lock is
taken (the take-over's removal of ``_temporary/``, the removal of the records, error reports
and temporaries of the shards a run redoes, ``_errors/``, a run's removal of its own
temporaries) first renews the lease by its id (:class:`OutputGuard`, which workers carry: they
are other processes; a batch of deletions renews once per :data:`RENEW_EVERY` seconds, see
:func:`renewing`); a run whose lease was taken stops with :class:`OutputLostError`, touching
nothing more. Only the parts a run writes under its own ``_temporary/{run id}/`` go unchecked
(nobody else reads or removes them; the next take-over does). What remains: a request sent
within a lease period (60 s) of a successful renewal is safe, because no other run can take the
lease before it expires; only a pause of more than 60 s falling between the renewal and the
request right after it (milliseconds apart, at most :data:`RENEW_EVERY` s in a batch) could
still delete or commit after a take-over. No condition on one blob can be made to depend on the
lease of another, so that window cannot be closed on Azure.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import errno
import fcntl
import json
import os
import socket
import sys
import time
import uuid

from runtime import errors
from dataio import fs as fsutil

LOCK_NAME = "_lock"


class OutputLockedError(errors.RunError):
    """Another live run holds the output (exit status 1)."""


class OutputLostError(errors.RunError):
    """This run no longer holds its output: another run took it over (exit status 1)."""


def new_run_id() -> str:
    """Unique per run, sortable by start time: names the run's ``_temporary/{run id}/``."""
    return dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ") + "-" + uuid.uuid4().hex[:8]


def holder_text(run_id: str, *, command: str = "") -> str:
    return json.dumps({"host": socket.gethostname(), "pid": os.getpid(),
                       "started": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
                       "run_id": run_id, "command": command[:500],
                       "boot_id": _boot_id(), "pid_start": _process_start(os.getpid())})


def _boot_id() -> str | None:
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            return f.read().strip()
    except OSError:
        return None


def _process_start(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (``/proc/PID/stat`` field 22), which
    tells a live holder from an unrelated process that reuses its PID."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    return int(stat[stat.rindex(b")") + 2:].split()[19])


def holder_is_dead(text: str) -> bool:
    """True only when the lock's text provably names a process that no longer runs: written on
    this machine since its last boot (same host name and kernel boot id) by a PID that is gone or
    now belongs to a process started at another time. Anything else (another host, a text that
    is not ours, no boot id) is presumed alive: its lease runs out by itself."""
    try:
        h = json.loads(text)
        host, pid, boot = h["host"], int(h["pid"]), h.get("boot_id")
    except (ValueError, KeyError, TypeError):
        return False
    if host != socket.gethostname() or not boot or boot != _boot_id():
        return False
    started = _process_start(pid)
    return started is None or (h.get("pid_start") is not None and started != h["pid_start"])


def describe_holder(text: str) -> str:
    """``run R, host H, pid P, started T (N h ago)`` from a lock's text (the raw text if it is not
    ours)."""
    try:
        h = json.loads(text)
        run = f"run {h['run_id']}, " if h.get("run_id") else ""
        age = _ago(h["started"])
        return f"{run}host {h['host']}, pid {h['pid']}, started {h['started']}{age}"
    except (ValueError, KeyError, TypeError, AttributeError):
        return text.strip()[:200] or "unknown holder"


def age_text(seconds: float) -> str:
    """``45 s``, ``12 min``, ``3 h 5 min``, ``2 d 4 h``."""
    seconds = max(0, int(seconds))
    if seconds < 120:
        return f"{seconds} s"
    minutes, hours, days = seconds // 60, seconds // 3600, seconds // 86400
    if hours < 2:
        return f"{minutes} min"
    if days < 2:
        return f"{hours} h {minutes % 60} min"
    return f"{days} d {hours % 24} h"


def _ago(when) -> str:
    """`` (N ago)`` for an ISO time or datetime; empty when it cannot be read."""
    try:
        if isinstance(when, str):
            when = dt.datetime.fromisoformat(when.replace("Z", "+00:00"))
        if when.tzinfo is None:
            when = when.replace(tzinfo=dt.timezone.utc)
        return f" ({age_text((dt.datetime.now(dt.timezone.utc) - when).total_seconds())} ago)"
    except (ValueError, TypeError, AttributeError):
        return ""


def holder_metadata(text: str) -> dict[str, str]:
    """The holder's run id, host, PID and start, as blob metadata (ASCII header values)."""
    try:
        h = json.loads(text)
    except ValueError:
        return {}
    return {key: str(h[key]).encode("ascii", "backslashreplace").decode()[:200]
            for key in ("run_id", "host", "pid", "started") if h.get(key) is not None}


def _run_started(run_id: str) -> str:
    """`` (started N ago)`` from a run id's leading UTC time (see :func:`new_run_id`)."""
    try:
        started = dt.datetime.strptime(run_id[:16], "%Y%m%dT%H%M%SZ")
    except ValueError:
        return ""
    return _ago(started.replace(tzinfo=dt.timezone.utc)).replace(" (", " (started ", 1)


def describe_temporaries(output: str) -> str:
    """What is left in ``{output}/_temporary/``: ``runs R1 (started 3 h ago), R2 (...)``;
    empty when nothing is."""
    root = fsutil.join(output, TEMPORARY_DIR)
    try:
        names = sorted(fsutil.list_names(root)) if fsutil.exists(root) else []
    except FileNotFoundError:
        names = []
    if not names:
        return ""
    shown = ", ".join(f"{name}{_run_started(name)}" for name in names[:10])
    more = f" and {len(names) - 10} more" if len(names) > 10 else ""
    return f"run{'s' if len(names) > 1 else ''} {shown}{more}"


@dataclasses.dataclass(frozen=True)
class OutputGuard:
    """What a process needs to prove, right before it commits, that its run still holds the
    output: the Azure lock blob, the run, its lease id. Picklable and secret-free (the lease id
    lets one renew or release this lock, which the account's credential allows anyway), so
    workers carry it (dataio/sink.py). See the module docstring for the window that remains."""

    output: str
    lock_url: str
    run_id: str
    lease_id: str

    def verify(self) -> None:
        """Renew the lease (so it is ours for another lease period); raise
        :class:`OutputLostError` when another run has it."""
        from dataio import azure

        try:
            azure.renew_lease(self.lock_url, self.lease_id)
        except azure.LeaseLostError as lost:
            raise OutputLostError(lost_message(self.output, self.run_id, lost)) from None


RENEW_EVERY = 15.0  # seconds: a quarter of the 60 s lease


def renewing(guard: OutputGuard | None, *, every: float = RENEW_EVERY):
    """A check to call before each deletion or write of a batch (a take-over's clean-up, the
    removals before a run): renews the lease (:meth:`OutputGuard.verify`) the first time and
    then whenever the last renewal is ``every`` seconds old, so every request of the batch goes
    out within a lease period of a renewal for one request per ``every`` seconds, not one per
    file. A no-op without a guard (a local flock, or no lock)."""
    last = None

    def check() -> None:
        nonlocal last
        if guard is None:
            return
        if last is None or time.monotonic() - last >= every:
            guard.verify()
            last = time.monotonic()

    return check


def _last_finished(output: str) -> dict:
    """``run_id`` and ``finished`` of the run that wrote ``{output}/metadata.json`` last."""
    try:
        found = json.loads(fsutil.read_bytes(fsutil.join(output, "metadata.json")))
        return {k: found[k] for k in ("run_id", "finished") if isinstance(found.get(k), str)}
    except Exception:  # noqa: BLE001 - absent or unreadable: the message says less
        return {}


def lost_message(output: str, run_id: str, lost) -> str:
    """The one line of a run that lost its output (``lost``: a LeaseLostError)."""
    holder = lost.holder
    if holder is None:   # the taker has released the lock since; metadata.json may name it
        last = _last_finished(output)
        whom = (f"lost the output's lease to run {last['run_id']} (which finished at "
                f"{last.get('finished', '?')} and released the lock)"
                if last.get("run_id") and last["run_id"] != run_id else
                "lost the output's lease to another run (which has released it since: the "
                "lock is gone)")
    else:
        who = holder.get("run_id") or "(not named yet)"
        where = f" on host {holder['host']}, pid {holder.get('pid', '?')}" \
            if holder.get("host") else ""
        since = lost.since.isoformat(timespec="seconds") if lost.since else "?"
        whom = f"lost the output's lease to run {who}{where} at {since}"
    return (f"{output}: {whom}; stopping — nothing more is committed by this run ({run_id}), "
            "which lost the output while paused or cut off longer than the lease")


@dataclasses.dataclass
class OutputLock:
    """Held until :meth:`release` (or the end of a ``with`` block)."""

    path: str
    run_id: str
    stale: str | None = None  # the holder text a dead run left, when this run took over
    expired: str | None = None  # the text of a holder whose lease had run out, when taken
    _fd: int | None = None
    _lease: object = None
    _unregister: object = None

    def __post_init__(self):
        # An interrupt that cannot unwind still gives the lease back (the kernel drops flock).
        self._unregister = errors.release_on_interrupt(self.release)

    @property
    def exclusive(self) -> bool:
        """True when this run provably is the only one (False: storage without a lock)."""
        return self._fd is not None or self._lease is not None

    def release(self) -> None:
        if self._unregister is not None:
            self._unregister()
            self._unregister = None
        if self._lease is not None:
            self._lease.release()
            self._lease = None
        if self._fd is not None:
            # Unlink while still holding it: a run that opened this inode and now gets the
            # lock sees it is no longer the file at LOCK_NAME, and retries (see _acquire_local).
            try:
                if os.fstat(self._fd).st_ino == os.stat(self.path).st_ino:
                    os.unlink(self.path)
            except OSError:
                pass
            os.close(self._fd)
            self._fd = None

    def check(self) -> None:
        """Raise when the lock was lost (an Azure lease that could not be renewed)."""
        if self._lease is not None and hasattr(self._lease, "check"):
            self._lease.check()

    @property
    def output(self) -> str:
        return self.path.rsplit("/", 1)[0]

    def guard(self) -> OutputGuard | None:
        """The check workers make before each commit (None where the lock cannot be lost while
        its holder lives: a local flock, or no lock at all)."""
        if self._lease is None:
            return None
        return OutputGuard(output=self.output, lock_url=self._lease.url, run_id=self.run_id,
                           lease_id=self._lease.lease_id)

    def verify(self) -> None:
        """Raise :class:`OutputLostError` unless this run still holds the output (renews)."""
        guard = self.guard()
        if guard is not None:
            guard.verify()

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc is None:
            self.release()
            return
        # The first error is the one to report: a release that fails too (storage down: the
        # usual reason for both) is a warning beside it.
        try:
            self.release()
        except Exception as failed:  # noqa: BLE001
            from runtime import log

            log.get("lock").warning(
                "could not release the lock %s (%s); it frees itself within a minute",
                self.path, errors.cause(failed))


def acquire(output: str, *, run_id: str, command: str = "") -> OutputLock:
    """Take the output's lock or raise :class:`OutputLockedError` naming the holder. The
    output folder must exist (local) — :func:`pipelines.tokenize` probes it first."""
    path = fsutil.join(output, LOCK_NAME)
    text = holder_text(run_id, command=command)
    if fsutil.is_local(output):
        return _acquire_local(path.removeprefix("file://"), run_id=run_id, text=text)
    from dataio import azure

    if azure.is_azure_url(output) and hasattr(azure, "acquire_lease"):
        try:
            lease = azure.acquire_lease(path, holder=text.encode(), is_stale=holder_is_dead,
                                        metadata=holder_metadata(text))
        except azure.LeaseHeldError as exc:
            raise OutputLockedError(f"{exc} Or choose another --output.") from None
        return OutputLock(path, run_id, stale=lease.stale, expired=lease.previous, _lease=lease)
    print(f"warning: {output}: no lock for this storage; do not start two runs into it",
          file=sys.stderr)
    return OutputLock(path, run_id)


def _acquire_local(path: str, *, run_id: str, text: str) -> OutputLock:
    fsutil.refuse_links(os.path.dirname(path), CONTROL_NAMES)
    for _ in range(10):
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            if exc.errno == errno.ELOOP:  # a link planted since refuse_links looked
                raise fsutil.link_refusal(path) from None
            raise
        if os.fstat(fd).st_nlink > 1:  # a hard link to another file: writing it would clobber it
            os.close(fd)
            raise fsutil.LinkedControlFileError(
                f"{path!r} is a hard link to another file; remove it, then rerun")
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            held = _read(fd)
            os.close(fd)
            raise OutputLockedError(
                f"{os.path.dirname(path)} is in use by another run ({describe_holder(held)}; "
                f"lock {path}); wait for it to finish or stop it, or choose another --output")
        except OSError as exc:
            os.close(fd)
            if exc.errno in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS):
                raise errors.ConfigError(
                    f"{path}: this file system cannot lock files ({exc.strerror}); put --output "
                    "on one that can (local disk, NFSv4, Lustre with -o flock)") from None
            raise
        try:
            same = os.fstat(fd).st_ino == os.stat(path).st_ino
        except FileNotFoundError:
            same = False
        if not same:  # the holder released and unlinked it between our open and flock
            os.close(fd)
            continue
        left = _read(fd)
        os.ftruncate(fd, 0)
        os.pwrite(fd, text.encode(), 0)
        os.fsync(fd)
        return OutputLock(path, run_id, stale=left or None, _fd=fd)
    raise OutputLockedError(f"{path}: could not take the lock (other runs keep starting); retry")


def _read(fd: int) -> str:
    data = os.pread(fd, 1 << 16, 0)
    return data.decode("utf-8", "replace")


# --- detached holds ----------------------------------------------------------------------------

DETACHED_NAME = "detached.json"
TEMPORARY_DIR = "_temporary"  # where runs keep their temporaries (dataio/sink.py uses this name)
# What tokenbeam keeps in an output folder besides the shards (dataio/manifest.py names the
# records; tests/dataio/test_control_links.py keeps the lists in step), and the one folder in it
# that shards are written to and stale shards deleted from (holdout/: dataio/dataset.py
# HOLDOUT_DIR; shard names hold no other folder). None may be a symbolic link: a run would write
# or delete through it, outside the output (see dataio/fs.py "Links").
CONTROL_NAMES = (LOCK_NAME, TEMPORARY_DIR, "_commits", "_failures", "_errors", "_parts",
                 "metadata.json", "holdout", "_commits/holdout", "_failures/holdout")


def detached_path(output: str, run_id: str) -> str:
    return fsutil.join(output, TEMPORARY_DIR, run_id, DETACHED_NAME)


def hold_detached(output: str, run_id: str, info: dict) -> None:
    """Record that run ``run_id`` continues without this process (``info`` names where: runner,
    cluster, batch id); written or rewritten under the output's lock."""
    record = {"run_id": run_id, "host": socket.gethostname(),
              "since": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), **info}
    fsutil.write_bytes_atomic(detached_path(output, run_id), json.dumps(record).encode())


def detached_holds(output: str) -> list[dict]:
    """The detached holds left in ``output`` (each with its ``path``)."""
    root = fsutil.join(output, TEMPORARY_DIR)
    if not fsutil.exists(root):
        return []
    holds = []
    for name in sorted(fsutil.list_names(root)):
        path = fsutil.join(root, name, DETACHED_NAME)
        if fsutil.exists(path):
            try:
                hold = json.loads(fsutil.read_bytes(path))
            except ValueError:
                hold = {"run_id": name}
            holds.append({**hold, "path": path})
    return holds


def describe_detached(hold: dict) -> str:
    batch = f"batch {hold['batch']}" if hold.get("batch") else "a batch (submission pending)"
    where = f" on {hold['cluster']}" if hold.get("cluster") else ""
    return (f"{hold.get('runner', 'a detached run')} {batch}{where} (run {hold.get('run_id')}, "
            f"since {hold.get('since', '?')}, from host {hold.get('host', '?')})")


def refuse_detached(output: str, *, ended=None) -> list[dict]:
    """Raise :class:`OutputLockedError` when a detached run may still be writing ``output``;
    ``ended(hold)`` (when given) says whether the run it names has ended for sure. Returns the
    holds of ended runs (their temporaries may go)."""
    gone = []
    for hold in detached_holds(output):
        if ended is not None and ended(hold):
            gone.append(hold)
            continue
        raise OutputLockedError(
            f"{output} is in use by {describe_detached(hold)}; wait for it to end (python -m "
            "runners.spark status --config CONFIG BATCH --wait) and run again through "
            f"runners.spark, or, if it has ended, remove {hold['path']}")
    return gone
