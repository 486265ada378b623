"""tokenbeam's log: one format for its own messages, the chatter of Beam and other libraries
shown only at ``--log-level debug``.

:func:`setup` (the driver, before Beam is imported; a local worker, from the environment)
configures two things:

* the ``tokenbeam`` logger (:func:`get`: ``tokenbeam.<name>``) at the chosen level, writing to
  the process's current ``sys.stderr`` (tests replace it) one line per message: the message as
  it is at INFO, prefixed ``warning:`` / ``debug:`` otherwise, as ``runtime.errors.main`` prefixes
  ``error:``; what a message puts into its text (``%s`` arguments: paths, names) is shown with
  its control characters escaped (:func:`runtime.text.printable`, applied by the redacting
  filter of :mod:`runtime.redact`, which every record of the log passes);
* the root logger, where Beam, gRPC and the rest log: at ``debug`` their INFO and up, as
  ``LEVEL logger: message``; at any other level nothing. Beam's start-up lines (``apitools not
  found`` at import, the SDK harness's INFO lines) are noise to someone tokenizing a corpus;
  failures reach the user through ``runtime.errors.main`` anyway.

The level travels to worker processes started from this one in :data:`LEVEL_ENV` (local
``--workers N`` processes and a worker pool's SDK workers inherit it); a worker on another
machine that was not given it logs at INFO.
"""

from __future__ import annotations

import logging
import os
import sys

LEVELS = ("debug", "info", "warning", "error")
# Loggers of libraries that write a record per request at INFO: the Azure SDK's, every request's
# URL and headers (about 1 KB; millions in a large run). Below debug they say nothing, wherever
# the process logs: a Flink or Spark SDK worker relays its root logger's INFO records to the
# runner's log (the TaskManager's, the executor's stderr).
PER_REQUEST_LOGGERS = ("azure.core.pipeline.policies.http_logging_policy",)
DEFAULT_LEVEL = "info"
LEVEL_ENV = "TOKENBEAM_LOG_LEVEL"
ROOT_NAME = "tokenbeam"


class _CurrentStderr(logging.StreamHandler):
    """Writes to whatever ``sys.stderr`` is at the time of the message, not at set-up."""

    def __init__(self):
        super().__init__(sys.stderr)

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, _value):
        pass  # always the current sys.stderr


class _OwnFormat(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        message = super().format(record)
        if record.levelno == logging.INFO:
            return message
        return f"{record.levelname.lower()}: {message}"


class _Tagged:
    """Marks the handlers this module installed, so that :func:`setup` replaces its own."""


def _own(handler: logging.Handler) -> logging.Handler:
    handler._tokenbeam = _Tagged  # type: ignore[attr-defined]
    return handler


def _replace_own_handlers(logger: logging.Logger, handler: logging.Handler) -> None:
    for old in [h for h in logger.handlers if getattr(h, "_tokenbeam", None) is _Tagged]:
        logger.removeHandler(old)
    logger.addHandler(_own(handler))


def level_number(level: str) -> int:
    if level not in LEVELS:
        raise ValueError(f"log level {level!r}: expected one of {', '.join(LEVELS)}")
    return getattr(logging, level.upper())


def setup(level: str | None = None, *, others: bool = True) -> str:
    """Configure the log of this process at ``level`` (default: :data:`LEVEL_ENV`, else info)
    and pass it on to processes started from here; returns the level used. Safe to call again
    (the last call wins). ``others=False``: leave the root logger alone (an SDK worker, whose
    root logger Beam relays to the driver, which shows or hides those records)."""
    if level is None:
        level = os.environ.get(LEVEL_ENV, DEFAULT_LEVEL)
        if level not in LEVELS:
            level = DEFAULT_LEVEL
    number = level_number(level)
    os.environ[LEVEL_ENV] = level
    own = logging.getLogger(ROOT_NAME)
    own.setLevel(number)
    own.propagate = False  # never through Beam's handlers (a worker's would relay it)
    handler = _CurrentStderr()
    handler.setFormatter(_OwnFormat("%(message)s"))
    _replace_own_handlers(own, handler)
    from runtime.redact import install_logging_filter  # secrets never reach a log line

    install_logging_filter(own)
    for name in PER_REQUEST_LOGGERS:
        logging.getLogger(name).setLevel(logging.NOTSET if level == "debug" else logging.WARNING)
    if not others:
        return level
    root = logging.getLogger()
    others = _CurrentStderr()
    if level == "debug":
        others.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
        others.setLevel(logging.INFO)  # their DEBUG is thousands of lines of gRPC and bundles
        if root.level > logging.INFO or root.level == logging.NOTSET:
            root.setLevel(logging.INFO)
    else:
        # A handler that prints nothing: with none, ``logging.warning()`` (Beam's apitools
        # line) would install basicConfig's, and Python's last resort would print warnings.
        others.setLevel(logging.CRITICAL + 1)
    _replace_own_handlers(root, others)
    install_logging_filter(root)
    return level


def ensure() -> None:
    """Set up from the environment unless this process did already (a worker started by a
    runner that does not run ``runners.worker_main``: a Flink or Spark SDK worker); the root
    logger is left to that worker."""
    if not any(getattr(h, "_tokenbeam", None) is _Tagged
               for h in logging.getLogger(ROOT_NAME).handlers):
        setup(others=False)


def get(name: str) -> logging.Logger:
    """The logger ``tokenbeam.<name>`` (configured by :func:`setup`)."""
    return logging.getLogger(f"{ROOT_NAME}.{name}")


def level_from_argv(argv) -> str:
    """The ``--log-level`` of a command line, read before it is parsed (Beam's import logs
    before the parser runs); the default when absent or not one of :data:`LEVELS` (the parser
    then reports the bad value)."""
    argv = list(argv)
    found = DEFAULT_LEVEL
    for i, arg in enumerate(argv):
        if arg == "--log-level" and i + 1 < len(argv):
            found = argv[i + 1]
        elif arg.startswith("--log-level="):
            found = arg.split("=", 1)[1]
    return found if found in LEVELS else DEFAULT_LEVEL


def harness_level(level: str) -> str:
    """The Beam SDK harness's log level (``--default_sdk_harness_log_level``) for ours: its INFO
    lines only at debug."""
    return "INFO" if level == "debug" else "WARNING"
