"""The local runner whose worker processes die with their driver (see dataio/workers.py).

``--runner`` is set to :data:`dataio.workers.RUNNER` (this class) for more than one local
worker by pipelines/options.py. Its own module: the rest of dataio/workers.py is needed before
Beam is imported (planning, ``--help``), this class only when a pipeline runs.
"""

from __future__ import annotations

import shlex
import sys

from apache_beam.options.pipeline_options import DirectOptions
from apache_beam.runners.portability.fn_api_runner import FnApiRunner
from apache_beam.transforms import environments


class LocalRunner(FnApiRunner):
    """Beam's FnApiRunner; in multi-process mode its workers are started by
    ``dataio.worker_main`` (see dataio/workers.py). Otherwise unchanged."""

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
