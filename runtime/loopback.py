"""Every gRPC server this process starts binds 127.0.0.1 instead of every interface.

Beam's Python servers take no address: the FnApiRunner's control, data, state and logging
servers (fn_api_runner/worker_handlers.py ``GrpcServer``), the logging server it starts per
``--workers`` process (local_job_service.py ``SubprocessSdkWorker``) and the FlinkRunner's
artifact server all call ``add_insecure_port('[::]:0')``, i.e. listen on every interface,
unauthenticated, although only processes on this host ever connect (to ``localhost:PORT``).
:func:`install` makes ``grpc.server(...)`` return servers whose wildcard addresses are rewritten
to 127.0.0.1; an explicit host is kept. Used by runners/local_runner.py (``--workers N``),
runners/spark_jar.py and ``python -m runners.loopback`` (docs/slurm-flink.md, "Network exposure").
"""

from __future__ import annotations

_WILDCARDS = ("[::]:", "0.0.0.0:", "*:")


def loopback_address(address: str) -> str:
    """``[::]:123`` / ``0.0.0.0:123`` / ``*:123`` / ``:123`` -> ``127.0.0.1:123``; others unchanged."""
    for prefix in _WILDCARDS:
        if address.startswith(prefix):
            return "127.0.0.1:" + address[len(prefix):]
    if address.startswith(":"):
        return "127.0.0.1" + address
    return address


def install() -> None:
    """Make ``grpc.server(...)`` return servers whose wildcard ports bind to 127.0.0.1 (once per
    process; calling it again changes nothing)."""
    import grpc

    original = grpc.server
    if getattr(original, "tokenbeam_loopback", False):
        return

    def server(*args, **kwargs):
        srv = original(*args, **kwargs)
        add = srv.add_insecure_port
        srv.add_insecure_port = lambda address: add(loopback_address(address))
        return srv

    server.tokenbeam_loopback = True
    grpc.server = server
