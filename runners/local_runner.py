"""The local runner whose worker processes die with their driver, and whose driver notices a
dying worker (see runtime/workers.py).

``--runner`` is set to :data:`runtime.workers.RUNNER` (this class) for more than one local
worker by pipelines/options.py. Its own module: the rest of runtime/workers.py is needed before
Beam is imported (planning, ``--help``), this class only when a pipeline runs.

In multi-process mode the workers run in an environment of our own (:data:`GUARDED_URN`), whose
handler does what Beam's ``SubprocessSdkWorkerHandler`` does (start ``python -m
runners.worker_main`` with the Fn API endpoints in its environment, relay its log) except that:

* it starts the worker without a shell (``exec`` in a shell is what made the worker the
  driver's child before) and waits on it itself: a worker that ends while the job runs (the
  OOM killer, a crash) ends the job at once, see :class:`_Workers`; Beam's handler raised in a
  thread of its own (a traceback) and left the runner waiting for the dead worker's answer;
* every server it and Beam start for the workers listens on 127.0.0.1 (runtime/loopback.py).

Ending the job on a worker's death is :func:`runtime.errors.end_run` (``os._exit``, as after an
interrupt): an in-process caller (a test calling ``run()`` with ``--workers 2``) ends with it.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading

import grpc
from apache_beam.options.pipeline_options import DirectOptions
from apache_beam.portability.api import beam_fn_api_pb2_grpc, endpoints_pb2
from apache_beam.runners.portability import local_job_service
from apache_beam.runners.portability.fn_api_runner import FnApiRunner, worker_handlers
from apache_beam.transforms import environments
from apache_beam.utils import thread_pool_executor
from google.protobuf import json_format, text_format

from runtime import errors, log, loopback, workers

GUARDED_URN = "tokenbeam:env:guarded_local_worker:v1"
_LOG = log.get("workers")


class LocalRunner(FnApiRunner):
    """Beam's FnApiRunner; in multi-process mode its workers are started and watched by
    :class:`_GuardedWorkerHandler`. Otherwise unchanged."""

    def run_pipeline(self, pipeline, options):
        direct = options.view_as(DirectOptions)
        if direct.direct_running_mode != "multi_processing":
            return super().run_pipeline(pipeline, options)
        # Beam's servers for the workers (control, data, state, logging) bind every interface;
        # only this host's workers connect to them.
        loopback.install()
        job = _Workers(total=direct.direct_num_workers)
        self._default_environment = _GuardedEnvironment(job.key)
        # A mode FnApiRunner does not know keeps the environment above (multi_processing would
        # replace it with its own command) and starts the same N workers.
        direct.direct_running_mode = "multi_processing_guarded"
        try:
            return super().run_pipeline(pipeline, options)
        finally:
            direct.direct_running_mode = "multi_processing"
            job.close()


class _Workers:
    """The worker processes of one run, and what happens when one dies."""

    _runs: dict[str, "_Workers"] = {}  # key -> run (the handlers find theirs by the key)

    def __init__(self, *, total: int):
        self.total = total
        self.notes = tempfile.mkdtemp(prefix="tokenbeam-workers-")  # private (0700)
        self.key = self.notes
        self._procs: list[subprocess.Popen] = []
        self._lock = threading.Lock()
        self._closing = False
        self._dying = threading.Event()  # a worker died: the job is being ended
        self._excepthook = threading.excepthook
        threading.excepthook = self._thread_failed
        _Workers._runs[self.key] = self

    def _thread_failed(self, args) -> None:
        """A dead worker breaks its gRPC streams, and Beam's threads reading them raise, before
        or after its end is seen here: their tracebacks are noise next to the one line. Any
        other thread's failure is printed as usual."""
        if not self._dying.wait(2.0):
            self._excepthook(args)

    @classmethod
    def of(cls, key: str) -> "_Workers":
        return cls._runs[key]

    def started(self, proc: subprocess.Popen) -> int:
        """Register a started worker; returns its number (1, 2, ...)."""
        with self._lock:
            self._procs.append(proc)
            return len(self._procs)

    def closing(self) -> None:
        """The runner is stopping the workers: from now on their end is expected."""
        self._closing = True

    def ended(self, proc: subprocess.Popen, number: int) -> None:
        """Called when worker ``number`` has ended. After :meth:`closing` that is Beam stopping
        it; any end before, whatever its status (a signal, a crash, or even an exit 0: Beam
        would wait for that worker's bundles for ever), ends the job: the other workers are
        killed (and waited for, so nothing of theirs lands after the message) and the driver
        exits 1."""
        if self._closing:
            return
        with self._lock:
            if self._closing:
                return
            self._closing = True
            others = [p for p in self._procs if p is not proc]
        if not errors.ending():  # an interrupt is ending the job already
            return
        self._dying.set()
        logging.disable(logging.CRITICAL)  # Beam's runner fails in every thread from here on
        last = workers.noted_work(self.notes, proc.pid)
        for other in others:
            if other.poll() is None:
                try:
                    other.send_signal(signal.SIGKILL)
                except ProcessLookupError:
                    pass
        for other in others:
            try:
                other.wait(60)
            except subprocess.TimeoutExpired:
                pass
        message = workers.death_message(number=number, total=self.total, pid=proc.pid,
                                        status=proc.returncode, last=last)
        shutil.rmtree(self.notes, ignore_errors=True)
        errors.end_run(message)

    def close(self) -> None:
        self._closing = True
        if threading.excepthook == self._thread_failed:
            threading.excepthook = self._excepthook
        _Workers._runs.pop(self.key, None)
        shutil.rmtree(self.notes, ignore_errors=True)


@environments.Environment.register_urn(GUARDED_URN, bytes)
class _GuardedEnvironment(environments.Environment):
    """The environment whose workers :class:`_GuardedWorkerHandler` starts; its payload is the
    key of the run's :class:`_Workers`."""

    def __init__(self, key: str, capabilities=None, artifacts=(), resource_hints=None):
        super().__init__(environments.python_sdk_capabilities() if capabilities is None
                         else capabilities, artifacts, resource_hints)
        self.key = key

    def __eq__(self, other):
        return super().__eq__(other) and self.key == other.key

    def __hash__(self):
        return hash((super().__hash__(), self.key))

    def to_runner_api_parameter(self, context):
        return GUARDED_URN, self.key.encode()

    @staticmethod
    def from_runner_api_parameter(payload, capabilities, artifacts, resource_hints, context):
        return _GuardedEnvironment(payload.decode(), capabilities, artifacts, resource_hints)


@worker_handlers.WorkerHandler.register_environment(GUARDED_URN, bytes)
class _GuardedWorkerHandler(worker_handlers.GrpcWorkerHandler):
    """Starts ``python -m runners.worker_main`` and waits on it (Beam's SubprocessSdkWorker,
    without the shell, with the end of the process reported to the run's :class:`_Workers`)."""

    def __init__(self, key: bytes, state, provision_info, grpc_server):
        super().__init__(state, provision_info, grpc_server)
        self._job = _Workers.of(key.decode())
        self._thread: threading.Thread | None = None

    def start_worker(self):
        self._thread = threading.Thread(target=self._run, name="tokenbeam-local-worker",
                                        daemon=True)
        self._thread.start()

    def stop_worker(self):
        if self._thread is not None:
            self._thread.join()

    def close(self):
        self._job.closing()
        super().close()

    def _run(self):
        logs = grpc.server(thread_pool_executor.shared_unbounded_instance(),
                           options=[("grpc.http2.max_pings_without_data", 0),
                                    ("grpc.http2.max_ping_strikes", 0)])
        port = logs.add_insecure_port("127.0.0.1:0")
        beam_fn_api_pb2_grpc.add_BeamFnLoggingServicer_to_server(
            local_job_service.BeamFnLoggingServicer(), logs)
        logs.start()
        descriptor = endpoints_pb2.ApiServiceDescriptor
        env = dict(os.environ,
                   CONTROL_API_SERVICE_DESCRIPTOR=text_format.MessageToString(
                       descriptor(url=self.control_address)),
                   LOGGING_API_SERVICE_DESCRIPTOR=text_format.MessageToString(
                       descriptor(url=f"localhost:{port}")),
                   PIPELINE_OPTIONS=json_format.MessageToJson(
                       self.provision_info.provision_info.pipeline_options),
                   WORKER_ID=self.worker_id)
        env[workers.NOTES_ENV] = self._job.notes
        try:
            with worker_handlers.SUBPROCESS_LOCK:
                proc = subprocess.Popen([sys.executable, "-m", "runners.worker_main"], env=env,
                                        stdin=subprocess.DEVNULL)
            number = self._job.started(proc)
            _LOG.debug("worker %d (pid %d) started", number, proc.pid)
            proc.wait()
            self._job.ended(proc, number)
        finally:
            logs.stop(0)

