"""The tokenize pipeline as a small jar that Spark runs with Beam's ``SparkPipelineRunner``.

Beam's own way (``--runner=SparkRunner --output_executable_path=job.jar``) starts the Java job
server on this machine (a JVM, ~10 s, its gRPC servers on every interface) and writes a copy of
its ~100 MB jar holding the pipeline, for every job. The jar it writes is a zip: the job
server's classes plus ``BEAM-PIPELINE/`` (the pipeline and its options as JSON, staged
artifacts, a manifest naming the job). Beam's Python SDK writes that same ``BEAM-PIPELINE/``
layout itself for ``--spark_submit_uber_jar`` (``abstract_job_service.UberJarBeamJob``);
:class:`PipelineJarRunner` reuses it without the copy: the per-job jar holds only
``BEAM-PIPELINE/`` (kilobytes) and the job-server jar goes beside it as the job's runtime,
staged once per version (``spark.jars`` / Livy's ``jars``). ``SparkPipelineRunner.main`` reads
the pipeline from the class path, which holds both jars, so the cluster sees exactly the jar
Beam would have made. No JVM and no job server run here; the artifact staging server Beam
starts in-process is bound to 127.0.0.1 (runtime/loopback.py).
"""

from __future__ import annotations

import os
import time
import zipfile

from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.portability.api import beam_job_api_pb2
from apache_beam.runners.portability import abstract_job_service, portable_runner

MAIN_CLASS = "org.apache.beam.runners.spark.SparkPipelineRunner"


class SparkJobOptions(PipelineOptions):
    """Options of Beam's Java Spark runner that its Python SDK does not declare; declared here
    so that they travel in the jar's pipeline options."""

    @classmethod
    def _add_argparse_args(cls, parser):
        parser.add_argument("--storage_level", default=None,
                            help="Spark storage level of cached datasets (MEMORY_AND_DISK, ...)")
MANIFEST = ("Manifest-Version: 1.0\r\nCreated-By: tokenbeam\r\n"
            f"Main-Class: {MAIN_CLASS}\r\n\r\n")


class _JarJob(abstract_job_service.UberJarBeamJob):
    """Writes the pipeline into ``jar_path`` instead of running it."""

    def __init__(self, jar_path: str, job_id, job_name, pipeline, options):
        super().__init__(None, job_id, job_name, pipeline, options)
        self._target = jar_path

    def prepare(self):
        self._jar = self._target
        with zipfile.ZipFile(self._jar, "w", compression=zipfile.ZIP_DEFLATED) as z:
            z.writestr("META-INF/MANIFEST.MF", MANIFEST)
        self._start_artifact_service(self._jar, self._artifact_port)

    def run(self):
        self._stop_artifact_service()  # writes pipeline.json, options, manifest; closes the jar
        self.set_state(beam_job_api_pb2.JobState.DONE)

    def cancel(self):
        self.set_state(beam_job_api_pb2.JobState.CANCELLED)

    def get_state_stream(self):
        # Read lazily: the runner opens the stream before it calls run().
        seen = 0
        while True:
            for state in self._state_history[seen:]:
                seen += 1
                yield state
                if self.is_terminal_state(state[0]):
                    return
            time.sleep(0.01)

    get_message_stream = get_state_stream


class _JarJobService(abstract_job_service.AbstractJobServiceServicer):
    def __init__(self, jar_path: str):
        super().__init__()
        self._jar_path = jar_path

    def start(self):
        return self

    def stop(self):
        pass

    def create_beam_job(self, preparation_id, job_name, pipeline, options):
        return _JarJob(self._jar_path, preparation_id, job_name, pipeline, options)


class PipelineJarRunner(portable_runner.PortableRunner):
    """``beam.Pipeline(runner=PipelineJarRunner(path), options=...)``: ``run()`` writes the
    pipeline jar to ``path`` and returns a result that is already DONE. The options must name
    the environment the cluster starts (PROCESS, see runners/sdk_boot.py)."""

    def __init__(self, jar_path: str):
        super().__init__()
        self._jar_path = os.path.abspath(jar_path)

    def default_job_server(self, options):
        return _JarJobService(self._jar_path)

    def run_pipeline(self, pipeline, options):
        from runtime import loopback

        loopback.install()
        return super().run_pipeline(pipeline, options)


def pipeline_entries(jar_path: str) -> dict[str, bytes]:
    """The ``BEAM-PIPELINE/`` entries of a jar (for tests and ``--no-submit`` checks)."""
    with zipfile.ZipFile(jar_path) as z:
        return {n: z.read(n) for n in z.namelist() if n.startswith("BEAM-PIPELINE/")}

