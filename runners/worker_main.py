"""``python -m runners.worker_main``: Beam's SDK worker, tied to the driver (runtime/workers.py).

Started by :class:`runners.local_runner.LocalRunner` with the environment Beam gives its own
``apache_beam.runners.worker.sdk_worker_main``, which it then runs unchanged.
"""

import logging
import sys


class _WithoutTracebacks:
    """Beam's worker prints a failed bundle's traceback to stderr besides sending it to the
    driver, which reports the failure once (runtime/errors.py); progress lines pass."""

    def __init__(self, stream):
        self._stream, self._dropped = stream, False

    def write(self, text: str) -> int:
        if text.startswith("Traceback (most recent call last):"):
            self._dropped = True
            return len(text)
        if self._dropped and text == "\n":  # print()'s end of that traceback
            self._dropped = False
            return len(text)
        self._dropped = False
        return self._stream.write(text)

    def __getattr__(self, name):
        return getattr(self._stream, name)


if __name__ == "__main__":
    sys.stderr = _WithoutTracebacks(sys.stderr)
    # Before apache_beam is imported: its import-time warnings then find a handler and set up
    # none of their own. The worker's log reaches the driver through Beam's logging service
    # (warnings and up, printed there once); a failing bundle is reported by the driver's main().
    silent = logging.StreamHandler()
    silent.setLevel(logging.CRITICAL + 1)
    logging.getLogger().addHandler(silent)

    import pipelines

    pipelines.leave_beam_azure_unloaded()
    from runtime import errors, log, workers

    log.setup(others=False)  # tokenbeam's lines at the driver's --log-level (from its environment)

    workers.guard_worker()
    errors.quiet_bundle_failures()
    from apache_beam.runners.worker import sdk_worker_main

    sdk_worker_main.main(sys.argv)
