"""Local worker processes die with their driver.

With ``--workers N`` Beam's FnApiRunner starts N ``sdk_worker_main`` processes through
``/bin/sh -c`` (dash does not exec, and Beam's clean-up kills only the shell). Left alone they
outlive a driver that is killed or interrupted, and go on reading, writing parts and committing
shards for seconds, overlapping an immediate rerun. :class:`LocalRunner` (``--runner`` is set
to it for ``--workers`` > 1 by pipelines/options.py) starts each worker as
``exec python -m dataio.worker_main`` instead, which calls :func:`guard_worker` before it
takes any work:

* ``PR_SET_PDEATHSIG``: the kernel SIGKILLs the worker the moment the driver thread that
  started it ends, however the driver ends, ``kill -9`` included (``exec``: no shell between);
* a watchdog thread waits on a pidfd of the driver and SIGKILLs the worker when the driver
  ends, should the parent not be the driver after all; a driver already gone at start-up (a
  race) makes the worker exit at once;
* :func:`driver_gone` lets the sink check, right before a commit, that the driver still runs;
* SIGINT and SIGTERM are ignored: Ctrl-C (and SLURM's or ``kill -TERM -PGID``'s SIGTERM)
  reaches the whole process group, and only the driver answers it (one line, not a traceback
  per worker); the driver's exit then stops the workers;
* the worker's own stderr logging is silenced: its log reaches the driver through Beam's
  logging service (warnings and up printed there once), and a failing bundle is reported by
  the driver's main() (dataio/errors.py).
"""

from __future__ import annotations

import ctypes
import os
import select
import shlex
import signal
import sys
import threading

from apache_beam.options.pipeline_options import DirectOptions
from apache_beam.runners.portability.fn_api_runner import FnApiRunner
from apache_beam.transforms import environments

DRIVER_ENV = "TOKENBEAM_DRIVER_PID"
RUNNER = "dataio.workers.LocalRunner"  # a --runner value Beam resolves by import
_PR_SET_PDEATHSIG = 1


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


class LocalRunner(FnApiRunner):
    """Beam's FnApiRunner; in multi-process mode its workers are started by
    ``dataio.worker_main`` (see the module docstring). Otherwise unchanged."""

    def run_pipeline(self, pipeline, options):
        direct = options.view_as(DirectOptions)
        if direct.direct_running_mode != "multi_processing":
            return super().run_pipeline(pipeline, options)
        self._default_environment = environments.SubprocessSDKEnvironment.from_command_string(
            command_string=f"exec {shlex.quote(sys.executable)} -m dataio.worker_main")
        # A mode FnApiRunner does not know keeps the environment above (multi_processing would
        # replace it with its own command) and starts the same N workers.
        direct.direct_running_mode = "multi_processing_guarded"
        try:
            return super().run_pipeline(pipeline, options)
        finally:
            direct.direct_running_mode = "multi_processing"
