"""``python -m runners.flink``: run a tokenbeam job on a Flink cluster that already runs.

  python -m runners.flink submit --config runners/flink.yaml [--flink-master HOST:PORT]
      [--flink-version V] [--job-server-jar JAR] [--parallelism N] [--set KEY=VALUE ...]
      [--no-submit] [--dry-run] -- <tokenize args>

Runs ``python -m pipelines.tokenize`` with Beam's FlinkRunner against ``flink_master``: Beam
starts the Flink job server from ``job_server_jar`` (never downloaded), the job's Python code
runs in SDK workers started by a worker pool next to each TaskManager (EXTERNAL environment,
``sdk_worker.worker_pool``). With ``sdk_worker.start_local_pool`` the launcher runs that pool
itself for the duration of the job (a cluster on this host). Before submitting, the cluster's
REST API is asked for its Flink version (checked against the jar) and slot count (the default
parallelism). ``--no-submit`` prints the command instead; ``--dry-run`` only plans (no Flink).

Exit status: the pipeline's; 2 for a bad configuration; 1 when the cluster is unreachable.
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys

from runtime import cli
from runtime import errors
from runners import config as rc
from runners import flink_cluster
from runners.config import PIPELINE_MODULE, RESERVED_FLAGS

FLAG_KEYS = {"flink_master": str, "flink_version": str, "job_server_jar": str,
             "parallelism": int, "cache_dir": str, "python_env": str}


class FlinkError(errors.RunError):
    """The cluster cannot be reached, or the local worker pool did not come up."""


def python_of(cfg: dict) -> str:
    if cfg.get("python_env"):
        return os.path.join(cfg["python_env"], "bin", "python")
    return sys.executable


def pipeline_command(cfg: dict, pipeline_args: list[str], *, job_server_jar: str,
                     flink_version: str, parallelism: int, worker_pool: str) -> list[str]:
    """The driver's command line (pure)."""
    minor = ".".join(flink_version.split(".")[:2])
    return [python_of(cfg), "-m", PIPELINE_MODULE, *pipeline_args,
            "--runner=FlinkRunner", f"--flink_master={cfg['flink_master']}",
            f"--flink_version={minor}", f"--flink_job_server_jar={job_server_jar}",
            "--environment_type=EXTERNAL", f"--environment_config={worker_pool}",
            f"--parallelism={parallelism}",
            f"--sdk_worker_parallelism={cfg['sdk_worker']['parallelism']}"]


def _start_pool(cfg: dict) -> tuple[subprocess.Popen, str]:
    host, _, port = cfg["sdk_worker"]["worker_pool"].rpartition(":")
    port = int(port) or flink_cluster.free_port(host)
    proc = subprocess.Popen([python_of(cfg), "-m", "runners.worker_pool", "--host", host,
                             "--port", str(port)], stdin=subprocess.DEVNULL)
    try:
        flink_cluster.wait_port(f"{host}:{port}", timeout=60, pids=[proc.pid])
    except (TimeoutError, RuntimeError) as exc:
        proc.kill()
        proc.wait()
        raise FlinkError(str(exc)) from None
    return proc, f"{host}:{port}"


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def run_job(cfg: dict, pipeline_args: list[str], *, no_submit: bool = False,
            dry_run: bool = False) -> int:
    for arg in pipeline_args:
        if arg.partition("=")[0] in RESERVED_FLAGS:
            raise rc.ConfigError(f"{arg.partition('=')[0]}: set by the launcher from "
                                 "runners/flink.yaml; leave it out of the pipeline arguments")
    if dry_run:
        return subprocess.run([python_of(cfg), "-m", PIPELINE_MODULE, *pipeline_args,
                               "--dry-run"]).returncode
    try:
        info = flink_cluster.overview(cfg["flink_master"])
    except OSError as exc:
        raise FlinkError(f"Flink at {cfg['flink_master']} is not reachable ({exc}); start the "
                         "cluster or fix flink_master (--flink-master HOST:PORT)") from None
    version = cfg["flink_version"] or info.get("flink-version", "")
    if cfg["flink_version"] and not info.get("flink-version", "").startswith(cfg["flink_version"]):
        raise rc.ConfigError(f"flink_version = {cfg['flink_version']!r}, but the cluster at "
                             f"{cfg['flink_master']} runs Flink {info.get('flink-version')}")
    jar = rc.resolve_job_server_jar(cfg, version)
    parallelism = cfg["parallelism"] or max(1, int(info.get("slots-total", 1)))
    pool_proc = None
    worker_pool = cfg["sdk_worker"]["worker_pool"]
    if no_submit:
        cmd = pipeline_command(cfg, rc.split_secrets(pipeline_args)[0], job_server_jar=jar,
                               flink_version=version, parallelism=parallelism,
                               worker_pool=worker_pool)
        print(shlex.join(cmd))
        return 0
    if cfg["sdk_worker"]["start_local_pool"]:
        pool_proc, worker_pool = _start_pool(cfg)
    try:
        cmd = pipeline_command(cfg, pipeline_args, job_server_jar=jar, flink_version=version,
                               parallelism=parallelism, worker_pool=worker_pool)
        print(f"Flink {info.get('flink-version')} at {cfg['flink_master']}: "
              f"{info.get('taskmanagers')} TaskManager(s), {info.get('slots-total')} slots; "
              f"parallelism {parallelism}; workers via {worker_pool}", file=sys.stderr, flush=True)
        return subprocess.run(cmd).returncode
    finally:
        if pool_proc is not None:
            _stop(pool_proc)


def _main(argv) -> int:
    parser = cli.ArgumentParser(prog="python -m runners.flink", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("submit", help="run the tokenize job on the cluster")
    rc.add_override_arguments(s, FLAG_KEYS, kind="flink")
    s.add_argument("--no-submit", action="store_true", help="print the command, run nothing")
    s.add_argument("--dry-run", action="store_true", help="passed to the pipeline")
    s.add_argument("pipeline_args", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    pipeline_args = list(args.pipeline_args)
    if pipeline_args and pipeline_args[0] == "--":
        pipeline_args = pipeline_args[1:]
    cfg = rc.load(args.config, rc.overrides_from(args, FLAG_KEYS), kind="flink")
    if not pipeline_args:
        raise rc.ConfigError("no pipeline arguments: add `-- --input ... --output ...`")
    return run_job(cfg, pipeline_args, no_submit=args.no_submit, dry_run=args.dry_run)


def main(argv=None) -> int:
    return errors.main(_main, argv)


if __name__ == "__main__":
    sys.exit(errors.main(_main, process=True))
