"""runners.worker_pool: listens on 127.0.0.1 only, starts SDK workers with its own
interpreter, and stops them on SIGTERM. A real pool process driven over gRPC."""

import ipaddress
import os
import signal
import subprocess
import time

import grpc
import psutil
from apache_beam.portability.api import beam_fn_api_pb2, beam_fn_api_pb2_grpc
from runner_support import PYTHON, ROOT

from runners.flink_cluster import free_port


def _loopback(ip: str) -> bool:
    addr = ipaddress.ip_address(ip)
    addr = getattr(addr, "ipv4_mapped", None) or addr   # gRPC may use ::ffff:127.0.0.1
    return addr == ipaddress.ip_address("127.0.0.1")


def _start_pool(port):
    proc = subprocess.Popen([PYTHON, "-m", "runners.worker_pool", "--host", "127.0.0.1",
                             "--port", str(port)], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True,
                            env=dict(os.environ, PATH="/usr/bin:/bin"))
    seen = []
    for line in proc.stdout:  # Beam's import warnings come first
        seen.append(line)
        if line.startswith("worker pool listening"):
            break
    if not seen or seen[-1].strip() != f"worker pool listening on 127.0.0.1:{port}":
        proc.kill()
        proc.wait()
        raise AssertionError(f"worker pool did not start: {seen}")
    return proc


def _children(pid, count, timeout=30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        kids = [c for c in psutil.Process(pid).children() if c.status() != psutil.STATUS_ZOMBIE]
        if len(kids) >= count:
            return kids
        time.sleep(0.1)
    raise AssertionError(f"expected {count} workers, have {len(kids)}")


def _start_worker(stub, worker_id):
    # No control service behind this endpoint: the worker just waits for it (about a minute).
    request = beam_fn_api_pb2.StartWorkerRequest(worker_id=worker_id)
    request.control_endpoint.url = f"127.0.0.1:{free_port()}"
    assert stub.StartWorker(request, timeout=30).error == ""


def _alive(proc):
    return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE


def test_pool_listens_on_loopback_and_cleans_up_its_workers():
    port = free_port()
    # PATH without the venv: the workers must still get this venv's interpreter.
    pool = _start_pool(port)
    try:
        listening = [c.laddr for c in psutil.Process(pool.pid).net_connections(kind="inet")
                     if c.status == psutil.CONN_LISTEN]
        assert listening and all(_loopback(addr.ip) for addr in listening), listening
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = beam_fn_api_pb2_grpc.BeamFnExternalWorkerPoolStub(channel)
            _start_worker(stub, "1-1")
            (worker,) = _children(pool.pid, 1)
            assert os.path.realpath(worker.exe()) == os.path.realpath(PYTHON)
            # Two TaskManagers sharing the pool use the same ids: a StopWorker for an id two
            # live workers have must not kill the other TaskManager's worker.
            _start_worker(stub, "1-1")
            twins = _children(pool.pid, 2)
            stub.StopWorker(beam_fn_api_pb2.StopWorkerRequest(worker_id="1-1"), timeout=30)
            time.sleep(1)
            assert all(_alive(p) for p in twins)
            _start_worker(stub, "2-1")
            (single,) = [p for p in _children(pool.pid, 3) if p.pid not in {t.pid for t in twins}]
            stub.StopWorker(beam_fn_api_pb2.StopWorkerRequest(worker_id="2-1"), timeout=30)
            single.wait(20)
            assert all(_alive(p) for p in twins)
        pool.send_signal(signal.SIGTERM)
        assert pool.wait(30) == 0
        assert not any(_alive(p) for p in twins)
    finally:
        if pool.poll() is None:
            pool.kill()
            pool.wait()


def test_a_taken_port_is_a_clear_error():
    port = free_port()
    pool = _start_pool(port)
    try:
        second = subprocess.run([PYTHON, "-m", "runners.worker_pool", "--port", str(port)],
                                cwd=ROOT, capture_output=True, text=True, timeout=60)
        assert second.returncode != 0
        assert f"cannot listen on 127.0.0.1:{port}" in second.stderr
    finally:
        pool.terminate()
        pool.wait(30)
