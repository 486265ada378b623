"""``python -m runners.worker_pool --port N [--host 127.0.0.1]``: a Beam SDK worker pool for
EXTERNAL environments (what Flink TaskManagers call to start Python SDK workers on a node).

Same service as ``apache_beam.runners.worker.worker_pool_main``, with three differences that
matter on a cluster node:

- it listens on ``--host`` only (default 127.0.0.1; Beam's own binds every interface), since
  the TaskManager that calls it runs on the same node;
- the SDK workers it starts run with this interpreter (Beam's runs whatever ``python`` is first
  on PATH, and a worker without apache_beam or tokenbeam never connects: the job then hangs);
- on SIGTERM/SIGINT it stops its workers before exiting (Beam's relies on atexit, which a
  signal skips, leaving orphaned workers).

Prints ``worker pool listening on HOST:PORT`` once it accepts requests.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading

import grpc
from apache_beam.portability.api import beam_fn_api_pb2_grpc
from apache_beam.runners.worker import worker_pool_main
from apache_beam.utils import thread_pool_executor


def serve(*, host: str, port: int, state_cache_size: int = 0,
          data_buffer_time_limit_ms: int = -1) -> tuple[grpc.Server, int, object]:
    """Start the pool on ``host:port``; returns (server, bound port, servicer)."""
    # The servicer spawns workers as ['python', ...]: make that name resolve to this venv.
    bin_dir = os.path.dirname(sys.executable)
    os.environ["PATH"] = bin_dir + os.pathsep + os.environ.get("PATH", "")
    server = grpc.server(thread_pool_executor.shared_unbounded_instance(),
                         options=[("grpc.http2.max_pings_without_data", 0),
                                  ("grpc.http2.max_ping_strikes", 0),
                                  # gRPC's default SO_REUSEPORT would let a second pool share
                                  # the port silently, splitting requests between the two.
                                  ("grpc.so_reuseport", 0)])
    try:
        bound = server.add_insecure_port(f"{host}:{port}")
    except RuntimeError:  # newer grpcio raises where older ones returned 0
        bound = 0
    if bound == 0:
        raise OSError(f"worker pool: cannot listen on {host}:{port} (port in use?)")
    servicer = worker_pool_main.BeamFnExternalWorkerPoolServicer(
        use_process=True, state_cache_size=state_cache_size,
        data_buffer_time_limit_ms=data_buffer_time_limit_ms)
    beam_fn_api_pb2_grpc.add_BeamFnExternalWorkerPoolServicer_to_server(servicer, server)
    server.start()
    return server, bound, servicer


def stop_workers(servicer) -> None:
    procs = list(servicer._worker_processes.values())  # noqa: SLF001 - Beam keeps no public handle
    for proc in procs:
        if proc.poll() is None:
            proc.terminate()
    for proc in procs:
        try:
            proc.wait(10)
        except Exception:  # noqa: BLE001 - a stuck worker is killed, whatever the reason
            proc.kill()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m runners.worker_pool", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on")
    parser.add_argument("--port", type=int, required=True, help="port (0: any free port)")
    parser.add_argument("--state-cache-size", type=int, default=0)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    try:
        server, bound, servicer = serve(host=args.host, port=args.port,
                                        state_cache_size=args.state_cache_size)
    except OSError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    done = threading.Event()

    def _stop(signum, _frame):
        logging.info("worker pool: signal %s, stopping workers", signum)
        done.set()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    print(f"worker pool listening on {args.host}:{bound}", flush=True)
    done.wait()
    server.stop(0)
    stop_workers(servicer)
    return 0


if __name__ == "__main__":
    sys.exit(main())
