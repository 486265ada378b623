"""``tokenbeam-sdk-boot --id=ID --provision_endpoint=HOST:PORT``: start a Beam Python SDK worker
for a runner that uses the PROCESS environment (Spark on HDInsight / Synapse, see runners/spark.py).

The runner (the Java SparkPipelineRunner in each executor) starts this command once per SDK
worker with the worker's id and the address of its provision service. It does what Beam's Go
``boot`` binary does for an environment that is already installed (no artifacts are staged: the
node's Python must have tokenbeam and its dependencies, which the HDInsight script action and
the Synapse pool requirements in runners/templates/ install):

1. ask the provision service for the worker's information (gRPC metadata ``worker_id``);
2. export what ``apache_beam.runners.worker.sdk_worker_main`` reads: ``WORKER_ID``,
   ``PIPELINE_OPTIONS`` (JSON), ``CONTROL_API_SERVICE_DESCRIPTOR`` / ``LOGGING_API_…`` /
   ``STATUS_API_…`` (text protos), ``SEMI_PERSISTENT_DIRECTORY``, ``RUNNER_CAPABILITIES``;
3. replace itself with ``python -m apache_beam.runners.worker.sdk_worker_main`` (same Python).

Anything missing (tokenbeam or Beam not importable, provision service unreachable) is one line
on stderr naming the fix, and exit status 2; the executor's log shows it.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import tempfile

PROVISION_TIMEOUT_S = float(os.environ.get("TOKENBEAM_BOOT_TIMEOUT", "60"))


def parse_args(argv) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="tokenbeam-sdk-boot", description=__doc__.split("\n")[0])
    parser.add_argument("--id", required=True, help="the SDK worker's id (given by the runner)")
    parser.add_argument("--provision_endpoint", required=True,
                        help="HOST:PORT of the runner's provision service")
    parser.add_argument("--semi_persistent_directory", default=None,
                        help="scratch folder for the worker (default: a new temporary folder)")
    # Beam's boot accepts these too; the provision service gives the same values.
    for name in ("--logging_endpoint", "--artifact_endpoint", "--control_endpoint"):
        parser.add_argument(name, default=None, help=argparse.SUPPRESS)
    args, _unknown = parser.parse_known_args(argv)
    return args


def provision_info(endpoint: str, worker_id: str, *, timeout: float = PROVISION_TIMEOUT_S):
    """The worker's ``ProvisionInfo`` from the runner."""
    import grpc
    from apache_beam.portability.api import beam_provision_api_pb2, beam_provision_api_pb2_grpc

    with grpc.insecure_channel(endpoint) as channel:
        grpc.channel_ready_future(channel).result(timeout=timeout)
        stub = beam_provision_api_pb2_grpc.ProvisionServiceStub(channel)
        response = stub.GetProvisionInfo(beam_provision_api_pb2.GetProvisionInfoRequest(),
                                         metadata=[("worker_id", worker_id)], timeout=timeout)
    return response.info


def worker_environment(info, *, worker_id: str, semi_persistent_dir: str) -> dict[str, str]:
    """The variables ``sdk_worker_main`` reads, from a ``ProvisionInfo``."""
    from google.protobuf import json_format, text_format

    env = {
        "WORKER_ID": worker_id,
        "PIPELINE_OPTIONS": json_format.MessageToJson(info.pipeline_options),
        "SEMI_PERSISTENT_DIRECTORY": semi_persistent_dir,
        "RUNNER_CAPABILITIES": " ".join(info.runner_capabilities),
        "CONTROL_API_SERVICE_DESCRIPTOR": text_format.MessageToString(info.control_endpoint),
        "LOGGING_API_SERVICE_DESCRIPTOR": text_format.MessageToString(info.logging_endpoint),
    }
    if info.HasField("status_endpoint"):
        env["STATUS_API_SERVICE_DESCRIPTOR"] = text_format.MessageToString(info.status_endpoint)
    return env


def _missing_packages() -> list[str]:
    return [name for name in ("apache_beam", "pipelines", "transforms", "dataio")
            if importlib.util.find_spec(name) is None]


def main(argv=None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    missing = _missing_packages()
    if missing:
        print(f"tokenbeam-sdk-boot: {sys.executable} cannot import {', '.join(missing)}: install "
              "tokenbeam in the Python the cluster's nodes run (runners/templates/ has the HDInsight "
              "script action and the Synapse requirements)", file=sys.stderr)
        return 2
    try:
        info = provision_info(args.provision_endpoint, args.id)
    except Exception as exc:  # grpc.FutureTimeoutError, grpc.RpcError: the runner is gone
        print(f"tokenbeam-sdk-boot: no answer from the runner's provision service at "
              f"{args.provision_endpoint} ({type(exc).__name__}: {exc}); the executor that "
              "started this worker has probably stopped", file=sys.stderr)
        return 2
    scratch = args.semi_persistent_directory or tempfile.mkdtemp(prefix="tokenbeam-sdk-")
    env = {**os.environ, **worker_environment(info, worker_id=args.id, semi_persistent_dir=scratch)}
    sys.stdout.flush()
    sys.stderr.flush()
    command = [sys.executable, "-m", "apache_beam.runners.worker.sdk_worker_main"]
    os.execve(sys.executable, command, env)
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main())
