"""``python -m runners.worker_pool --port N [--host 127.0.0.1]``: a Beam SDK worker pool for
EXTERNAL environments (what Flink TaskManagers call to start Python SDK workers on a node).

The same gRPC service as ``apache_beam.runners.worker.worker_pool_main`` (one SDK worker
process per StartWorker request), with these differences, each of which broke a job here:

- it listens on ``--host`` only (default 127.0.0.1; Beam's binds every interface), since the
  TaskManager calling it runs on the same host, and never shares its port (gRPC's default
  SO_REUSEPORT let a second pool bind the same port and take half the requests);
- workers run with this interpreter (Beam's runs whatever ``python`` is first on PATH; a worker
  without apache_beam or tokenbeam never connects and the job hangs) and write to the pool's
  own stdout/stderr (Beam's pipes stdout and never reads it, so a chatty worker blocks);
- several TaskManagers may share one pool (virtual SLURM nodes on one host): they number their
  workers alike ("1-1", "1-2", ...), so a StopWorker for an id that more than one live worker
  has is not acted on (Beam's kills whichever registered last, i.e. another TaskManager's
  busy worker); those workers end when their TaskManager closes their control stream;
- on SIGTERM/SIGINT it stops its workers before exiting (Beam's relies on atexit, which a
  signal skips, leaving orphans).

Prints ``worker pool listening on HOST:PORT`` once it accepts requests.
"""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
import threading

import grpc
from apache_beam.portability.api import beam_fn_api_pb2, beam_fn_api_pb2_grpc
from apache_beam.utils import thread_pool_executor

from runtime import errors, log

_LOG = log.get("worker_pool")


class PoolError(errors.RunError):
    """The pool cannot start (its port is taken, or its address is not this host's)."""


def worker_command(python: str, *, control_url: str, worker_id: str, state_cache_size: int,
                   data_buffer_time_limit_ms: int) -> list[str]:
    """The SDK worker's command line (what Beam's own pool runs, with an explicit python)."""
    code = ("from apache_beam.runners.worker.sdk_worker import SdkHarness; "
            f"SdkHarness({control_url!r}, worker_id={worker_id!r}, "
            f"state_cache_size={int(state_cache_size)}, "
            f"data_buffer_time_limit_ms={int(data_buffer_time_limit_ms)}).run()")
    return [python, "-c", code]


def _stop(procs, timeout: float = 10.0) -> None:
    for proc in procs:
        if proc.poll() is None:
            proc.terminate()
    for proc in procs:
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class WorkerPool(beam_fn_api_pb2_grpc.BeamFnExternalWorkerPoolServicer):
    def __init__(self, *, python: str = sys.executable, state_cache_size: int = 0,
                 data_buffer_time_limit_ms: int = -1):
        self._python = python
        self._state_cache_size = state_cache_size
        self._data_buffer_time_limit_ms = data_buffer_time_limit_ms
        self._workers: dict[str, list[subprocess.Popen]] = {}
        self._lock = threading.Lock()

    def StartWorker(self, request, context):  # noqa: N802 - gRPC method name
        cmd = worker_command(self._python, control_url=request.control_endpoint.url,
                             worker_id=request.worker_id,
                             state_cache_size=self._state_cache_size,
                             data_buffer_time_limit_ms=self._data_buffer_time_limit_ms)
        try:
            proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, close_fds=True)
        except OSError as exc:
            return beam_fn_api_pb2.StartWorkerResponse(error=f"cannot start worker: {exc}")
        with self._lock:
            live = [p for p in self._workers.get(request.worker_id, []) if p.poll() is None]
            self._workers[request.worker_id] = live + [proc]
        _LOG.info("started worker %s (pid %d) for %s", request.worker_id, proc.pid,
                  request.control_endpoint.url)
        return beam_fn_api_pb2.StartWorkerResponse()

    def StopWorker(self, request, context):  # noqa: N802 - gRPC method name
        with self._lock:
            live = [p for p in self._workers.get(request.worker_id, []) if p.poll() is None]
            self._workers[request.worker_id] = live
        if len(live) == 1:
            _LOG.info("stopping worker %s (pid %d)", request.worker_id, live[0].pid)
            threading.Thread(target=_stop, args=(live,), daemon=True).start()
        elif len(live) > 1:
            _LOG.info("worker id %s is used by %d live workers (TaskManagers sharing this "
                      "pool); each ends with its control stream", request.worker_id, len(live))
        return beam_fn_api_pb2.StopWorkerResponse()

    def stop_all(self) -> None:
        with self._lock:
            procs = [p for ps in self._workers.values() for p in ps]
            self._workers.clear()
        _stop(procs)


def serve(*, host: str, port: int, state_cache_size: int = 0,
          data_buffer_time_limit_ms: int = -1) -> tuple[grpc.Server, int, WorkerPool]:
    """Start the pool on ``host:port``; returns (server, bound port, pool)."""
    server = grpc.server(thread_pool_executor.shared_unbounded_instance(),
                         options=[("grpc.http2.max_pings_without_data", 0),
                                  ("grpc.http2.max_ping_strikes", 0),
                                  ("grpc.so_reuseport", 0)])
    try:
        bound = server.add_insecure_port(f"{host}:{port}")
    except RuntimeError:  # newer grpcio raises where older ones returned 0
        bound = 0
    if bound == 0:
        raise OSError(f"worker pool: cannot listen on {host}:{port} (port in use?)")
    pool = WorkerPool(state_cache_size=state_cache_size,
                      data_buffer_time_limit_ms=data_buffer_time_limit_ms)
    beam_fn_api_pb2_grpc.add_BeamFnExternalWorkerPoolServicer_to_server(pool, server)
    server.start()
    return server, bound, pool


def _main(argv) -> int:
    parser = argparse.ArgumentParser(prog="python -m runners.worker_pool", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on")
    parser.add_argument("--port", type=int, required=True, help="port (0: any free port)")
    parser.add_argument("--state-cache-size", type=int, default=0)
    parser.add_argument("--log-level", choices=list(log.LEVELS), default=None,
                        help=f"as the tokenize job's; its workers inherit it (default: "
                             f"${log.LEVEL_ENV}, else {log.DEFAULT_LEVEL})")
    args = parser.parse_args(argv)
    log.setup(args.log_level)
    try:
        server, bound, pool = serve(host=args.host, port=args.port,
                                    state_cache_size=args.state_cache_size)
    except OSError as exc:
        raise PoolError(str(exc)) from None
    done = threading.Event()

    def _on_signal(signum, _frame):
        _LOG.info("signal %s: stopping the workers", signum)
        done.set()

    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    print(f"worker pool listening on {args.host}:{bound}", flush=True)
    done.wait()
    server.stop(0)
    pool.stop_all()
    return 0


def main(argv=None) -> int:
    return errors.main(_main, argv)


if __name__ == "__main__":
    sys.exit(errors.main(_main, process=True))
