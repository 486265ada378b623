"""Exit statuses, the error base class that carries one, and the ``main()`` wrapper of a command.

Statuses (the same for every command): 0 done; 1 the data or the run failed (a file could not
be read or written, the disk filled up, another run holds the output); 2 bad command line or
configuration (a flag, a path that cannot be used); 130 / 143 interrupted by SIGINT / SIGTERM.

A failure anyone can foresee prints one line, ``error: ...``, naming the file and the fix, and
no traceback; the names in it are shown with their control characters escaped
(:func:`runtime.text.printable`), so that the line stays one line whatever a file is called.
Anything else is a bug: one summary line, then its traceback, once.

Errors raised inside Beam workers do not arrive as themselves: the in-process runner re-raises
them with `` [while running 'Step']`` appended, the multi-process runner as a RuntimeError whose
text holds the worker's traceback (once per retry). :func:`describe` finds the root cause in
either: the exception chain first, then ``module.ClassName: message`` lines of the text, matched
against the classes known to be anticipated (:class:`TokenbeamError` subclasses, classes with an
``exit_status`` attribute, those passed to :func:`anticipate`) and ``OSError``'s errno. What the
Azure SDK, aiohttp or adlfs raise (storage unreachable, a SAS rejected, a 403 or 404 mid-run) is
put into one line by :mod:`dataio.azure.storage_errors`, the one place that knows them, which
registers itself here (:func:`register_storage_errors`) when it is imported: every process that
reaches Azure has imported it, and this module stays below dataio/.
"""

from __future__ import annotations

import errno
import logging
import os
import re
import signal
import sys
import threading
import traceback
from typing import Callable, Sequence

from runtime.redact import redact
from runtime.text import printable

EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_SIGINT = 128 + signal.SIGINT  # 130, the shell's convention
EXIT_SIGTERM = 128 + signal.SIGTERM  # 143
RESUME_HINT = "rerun the same command to resume"


class TokenbeamError(Exception):
    """An anticipated failure; ``str(exc)`` is the whole message a user needs (file and fix)."""

    exit_status = EXIT_FAILED


class RunError(TokenbeamError):
    """The data or the run failed (exit status 1)."""


class ConfigError(TokenbeamError, ValueError):
    """Bad command line or configuration (exit status 2)."""

    exit_status = EXIT_USAGE


class Interrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM reached the driver. A BaseException (as KeyboardInterrupt) on purpose:
    Beam's ``except Exception`` blocks must not catch, wrap or retry it on its way out."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum
        self.exit_status = 128 + signum

    def __str__(self) -> str:
        kept = ""
        for say in _what_is_kept[-1:]:
            try:
                kept = f": {say()}"
            except Exception:  # noqa: BLE001 - the line goes out without it
                pass
        return f"interrupted ({signal.Signals(self.signum).name}){kept}; {RESUME_HINT}"


_what_is_kept: list[Callable[[], str]] = []


def on_interrupt_say(what_is_kept: Callable[[], str]) -> None:
    """``what_is_kept()`` ("14 of 32 shards committed, ...") goes into the interrupt's one line,
    however the command ends (unwound, or ended after the grace period)."""
    _what_is_kept[:] = [what_is_kept]


_ANTICIPATED: dict[str, int] = {}


def anticipate(*classes: type, status: int = EXIT_FAILED) -> None:
    """Declare exception classes (of any module) whose message is already user-ready, so that
    they print as one line with ``status`` also when a Beam worker raised them."""
    for cls in classes:
        _ANTICIPATED[f"{cls.__module__}.{cls.__qualname__}"] = status


def _status_of(exc: BaseException) -> int | None:
    status = getattr(exc, "exit_status", None)
    if isinstance(status, int):
        return status
    for cls in type(exc).__mro__:
        name = f"{cls.__module__}.{cls.__qualname__}"
        if name in _ANTICIPATED:
            return _ANTICIPATED[name]
    return None


SPACE_MESSAGES = ("no space left on the device", "disk quota exceeded")
_OS_FIXES = {
    errno.ENOSPC: ("no space left on the device", f"free some space, then {RESUME_HINT}"),
    errno.EDQUOT: ("disk quota exceeded", f"free some space, then {RESUME_HINT}"),
    errno.EROFS: ("read-only file system", "give --output a writable folder"),
    errno.EACCES: ("permission denied", "give --output a folder this user can write"),
    errno.EPERM: ("operation not permitted", "give --output a folder this user can write"),
    errno.ENOTDIR: ("a file is in the way where a folder is needed",
                    "give --output a folder (it is created if missing)"),
}


def os_error_message(code: int, filename: str | None, detail: str = "") -> str | None:
    """The one-line message for an OSError a user can fix (disk full, read-only, ...)."""
    if code not in _OS_FIXES:
        return None
    what, fix = _OS_FIXES[code]
    where = f"{filename}: " if filename else ""
    return f"{where}{what}{detail}; {fix}"


_BEAM_SUFFIX = re.compile(r" \[while running '[^']*'\]$")
_EXC_LINE = re.compile(r"^([A-Za-z_][\w.]*): (.+)$", re.MULTILINE)
_ERRNO = re.compile(r"^\[Errno (\d+)\] [^:]*(?:: '(.*)')?")


def _clean(message: str) -> str:
    """The message as one line: Beam's `` [while running 'Step']`` suffixes dropped, the rest
    of its text kept, control characters escaped (a path holding a newline or an escape
    neither ends the line early nor forges another)."""
    message = message.strip()
    while _BEAM_SUFFIX.search(message):
        message = _BEAM_SUFFIX.sub("", message).rstrip()
    return printable(message)


def _chain(exc: BaseException):
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ or exc.__context__


def describe(exc: BaseException) -> tuple[str, int] | None:
    """``(one-line message, exit status)`` when ``exc`` (or its root cause, also one a Beam
    worker raised) is anticipated; None for a bug."""
    for link in _chain(exc):
        status = _status_of(link)
        if status is not None:
            return _clean(str(link)), status
        storage = _storage_error(link)
        if storage is not None:
            return _clean(str(storage)), storage.exit_status
        if isinstance(link, OSError) and link.errno is not None:
            message = os_error_message(link.errno, link.filename)
            if message is not None:
                return _clean(message), EXIT_FAILED
    # A worker's exception, as text: the first anticipated "module.Class: message" line.
    text = "\n".join(str(link) for link in _chain(exc))
    for match in _EXC_LINE.finditer(text):
        name, message = match.group(1), match.group(2)
        if name in _ANTICIPATED:
            return _clean(message), _ANTICIPATED[name]
        if name.startswith(_STORAGE_MODULES) and _STORAGE_CLASSIFIERS:
            storage = _STORAGE_CLASSIFIERS[0][1](name, message, text)
            if storage is not None:
                return _clean(str(storage)), storage.exit_status
        cls = _resolve(name)
        if cls is not None and isinstance(getattr(cls, "exit_status", None), int):
            return _clean(message), cls.exit_status
        if cls is not None and issubclass(cls, OSError):
            found = _ERRNO.match(message)
            if found:
                friendly = os_error_message(int(found.group(1)), found.group(2))
                if friendly is not None:
                    return _clean(friendly), EXIT_FAILED
    return None


_STORAGE_MODULES = ("azure.", "aiohttp")
# (classify(exc), classify_text(name, message, text)) of dataio/azure/storage_errors.py
_STORAGE_CLASSIFIERS: list[tuple[Callable, Callable]] = []


def register_storage_errors(classify: Callable, classify_text: Callable) -> None:
    """Called by the module that knows a storage SDK's exceptions, once, on its import."""
    _STORAGE_CLASSIFIERS[:] = [(classify, classify_text)]


def _storage_error(exc: BaseException) -> TokenbeamError | None:
    """A storage SDK's exception as one line (dataio/azure/storage_errors.py), else None."""
    if not (type(exc).__module__ or "").startswith(_STORAGE_MODULES) or not _STORAGE_CLASSIFIERS:
        return None
    return _STORAGE_CLASSIFIERS[0][0](exc)


def cause(exc: BaseException) -> str:
    """A short cause of ``exc`` for a warning beside another error (``storage unreachable for
    90 s``, ``SAS rejected: expired?``): its one line's first clause, or its class and text."""
    known = describe(exc)
    if known is None:
        return f"{type(exc).__name__}: {_clean(str(exc))}"[:200]
    return known[0].split(" (", 1)[0].split("; ", 1)[0]


def _resolve(name: str) -> type | None:
    """The class a traceback line names, if its module is loaded here (never imports)."""
    module, _, attr = name.rpartition(".")
    import builtins

    owner = sys.modules.get(module) if module else builtins
    cls = getattr(owner, attr, None) if owner is not None else None
    return cls if isinstance(cls, type) and issubclass(cls, BaseException) else None


# Beam logs a failing bundle's traceback where it fails (the worker, then the runner relaying the
# worker's log, then the runner again per retry) before the failure itself reaches main(),
# which reports it once: one line when anticipated, else its traceback.
_FAILURE_LOGGERS = ("apache_beam.runners.common", "apache_beam.runners.worker.sdk_worker",
                    "apache_beam.runners.portability.local_job_service",
                    "apache_beam.runners.portability.fn_api_runner.fn_runner")


class _DropBundleFailures(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        relayed = record.name == "apache_beam.runners.portability.local_job_service"
        if relayed and "No semi_persistent_directory found" in record.getMessage()[:400]:
            return False  # every local worker says it at start; nothing to act on
        if record.levelno < logging.ERROR:
            return True
        if relayed:
            return "severity: ERROR" not in record.getMessage()[:200]
        return False


_DROP = _DropBundleFailures()


def quiet_bundle_failures() -> None:
    """Leave the reporting of a failed bundle to :func:`main` (safe to call more than once)."""
    for name in _FAILURE_LOGGERS:
        logger = logging.getLogger(name)
        if _DROP not in logger.filters:
            logger.addFilter(_DROP)


_fired: list[int] = []  # the signals received, in order
_at_exit: list[Callable[[], None]] = []
_reported = threading.Event()  # the interrupt's line is printed (once, by whoever is first)
GRACE_SECONDS = 3.0  # after a signal, how long the run may take to unwind before it is ended


def release_on_interrupt(callback: Callable[[], None]) -> Callable[[], None]:
    """Run ``callback`` (e.g. give back an Azure lease) should an interrupt end the process
    without unwinding; returns a function that unregisters it."""
    _at_exit.append(callback)
    return lambda: _at_exit.remove(callback) if callback in _at_exit else None


def _hard_exit(signum: int) -> None:
    """End now: print the line, give back what must be given back, exit with the status. As
    safe as kill -9, which the commit protocol is built for; workers die with the driver."""
    if not _reported.is_set():
        _reported.set()
        print(Interrupted(signum), file=sys.stderr, flush=True)
    _exit_now(128 + signum)


def _exit_now(status: int) -> None:
    """Give back what must be given back (the output's lock, a lease), flush stdout, exit."""
    for callback in list(_at_exit):
        try:
            callback()
        except Exception:  # noqa: BLE001 - best effort on the way out
            pass
    try:
        sys.stdout.flush()
    except Exception:  # noqa: BLE001
        pass
    os._exit(status)


_ending = threading.Event()  # a thread is about to call end_run(): main() reports nothing else
ENDING_WAIT_SECONDS = 60.0


def ending() -> bool:
    """Say that this thread is about to call :func:`end_run` (after stopping what it must), so
    that what the main thread raises meanwhile (Beam's runner failing one way or another) is
    not reported in its stead. False when an interrupt is being reported already."""
    if _reported.is_set() or _fired:
        return False
    _ending.set()
    return True


def end_run(message: str, status: int = EXIT_FAILED) -> None:
    """End the process now from any thread, as :func:`_hard_exit` does for an interrupt: print
    ``error: message`` (once; not after an interrupt, whose line wins), give back what must be
    given back (the output's lock, a lease), exit with ``status``. For a failure the main thread
    cannot learn in time (a local worker died: Beam's runner would wait for it for ever)."""
    if _reported.is_set() or _fired:
        return
    _reported.set()
    print(f"error: {_clean(redact(message))}", file=sys.stderr, flush=True)
    _exit_now(status)


def _on_signal(signum, frame):
    if _fired:
        _hard_exit(_fired[0])  # a second signal: the user means it
    _fired.append(signum)
    # From here on the runner's threads fail one after another (their workers are going):
    # what they would print is noise next to the one line the user gets.
    logging.disable(logging.CRITICAL)
    threading.excepthook = lambda args: None
    # Unwind (lock released, own temporaries removed) — unless some library catches the
    # exception (Beam's worker loop catches everything), then end after a grace period.
    timer = threading.Timer(GRACE_SECONDS, _hard_exit, args=(signum,))
    timer.daemon = True
    timer.start()
    raise Interrupted(signum)


def main(command: Callable[[Sequence[str]], int], argv: Sequence[str] | None = None, *,
         process: bool = False) -> int:
    """Run ``command(argv)`` and turn what it raises into one line on stderr and the status.

    ``process=True`` (the command line, not in-process callers such as tests): SIGINT and
    SIGTERM become :class:`Interrupted`, and after an interrupt the process ends at once
    (``os._exit``) rather than waiting on threads the runner leaves behind; local workers die
    with it (see runtime/workers.py)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    quiet_bundle_failures()
    _what_is_kept.clear()  # an earlier in-process command's, not this one's
    if process:
        signal.signal(signal.SIGINT, _on_signal)
        signal.signal(signal.SIGTERM, _on_signal)
    try:
        status = command(argv)
    except SystemExit as exc:  # argparse: --help (0) or a usage error it has printed (2)
        status = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else EXIT_USAGE)
    except BrokenPipeError:  # stdout's reader left (``| head``): stop quietly, as cat does
        _silence_stdout()
        status = 128 + signal.SIGPIPE
    except KeyboardInterrupt as exc:  # Interrupted, or SIGINT without our handler (in-process)
        status = _report(exc if isinstance(exc, Interrupted) else Interrupted(signal.SIGINT))
    except Exception as exc:  # noqa: BLE001 - the one place that turns errors into statuses
        status = _report(exc)
    if process and _fired:
        _hard_exit(_fired[0])  # the runner's threads would keep the process alive
    return status


def _silence_stdout() -> None:
    """Point stdout at /dev/null, so that flushing it at exit raises no second BrokenPipeError
    (Python's advice for a closed pipe)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass  # stdout is not a real file (tests capture it): nothing is flushed at exit


def _report_interrupt(signum: int) -> int:
    if not _reported.is_set():
        _reported.set()
        print(Interrupted(signum), file=sys.stderr, flush=True)
    return 128 + signum


def _report(exc: BaseException) -> int:
    if _ending.is_set():  # end_run() prints the cause and ends the process (give it time)
        threading.Event().wait(ENDING_WAIT_SECONDS)

    known = describe(exc)
    if known is not None:
        message, status = known
        if _fired or status in (EXIT_SIGINT, EXIT_SIGTERM):
            return _report_interrupt(_fired[0] if _fired else status - 128)
        print(f"error: {redact(message)}", file=sys.stderr, flush=True)
        return status
    if _fired:  # whatever the interrupt broke on its way out
        return _report_interrupt(_fired[0])
    print(f"error: unexpected {type(exc).__name__} (a bug; please report it with the "
          "traceback below)", file=sys.stderr)
    text = redact("".join(traceback.format_exception(exc)))  # its lines, no escape sequence
    print("\n".join(printable(line) for line in text.split("\n")), file=sys.stderr, end="",
          flush=True)
    return EXIT_FAILED
