"""``python -m runners.loopback MODULE [ARGS...]``: run ``python -m MODULE ARGS...`` with every gRPC
server it starts bound to 127.0.0.1 instead of every interface.

Why: with ``--flink_submit_uber_jar`` Beam's Python FlinkRunner stages the job's artifacts through
a gRPC server it starts in the driver on ``[::]:<port>`` (hard-coded; ``--artifact_port`` picks
only the port), and only the driver itself ever connects to it (``localhost:<port>``). The
launcher runs the pipeline driver through this module so that the server is not reachable from
other machines while it lives. Only wildcard addresses are rewritten; an explicit host is kept
(runtime/loopback.py, which ``--workers N`` runs use too).
"""

from __future__ import annotations

import runpy
import sys

from runtime import errors
from runtime.loopback import install


def _main(argv) -> int:
    if not argv:
        raise errors.ConfigError("usage: python -m runners.loopback MODULE [ARGS...]")
    install()
    sys.argv = [argv[0], *argv[1:]]
    # The module's own exit (sys.exit(status)) ends this run; errors.main passes its status on.
    runpy.run_module(argv[0], run_name="__main__", alter_sys=True)
    return 0


def main(argv=None) -> int:
    return errors.main(_main, argv)


if __name__ == "__main__":
    sys.exit(errors.main(_main, process=True))
