"""``python -m runners.slurm``: run a tokenbeam job on SLURM, on a Flink cluster made for it.

  python -m runners.slurm submit --config runners/flink_slurm.yaml [--nodes 2 ...]
      [--set KEY=VALUE ...] [--no-submit] [--wait] [--dry-run] -- <tokenize args>
  python -m runners.slurm status JOBID [--log-dir DIR]
  python -m runners.slurm cancel JOBID

``submit`` renders runners/templates/flink_slurm.sbatch with the config (command-line values
win over the file) and the pipeline's arguments, writes it to ``<log_dir>/scripts/`` and runs
``sbatch --chdir=<log_dir> SCRIPT``; with ``--no-submit`` it writes the script into the current
directory and prints that command instead (like ``tatm run --no-submit``). ``--wait`` blocks
until the job ends and exits with its exit status; a request the partition can never satisfy is
refused before it is submitted, where the partition's limits can be read, and a job SLURM keeps
pending for a reason that never passes (``PartitionConfig``...) is cancelled while waiting
(runners/slurm_limits.py). ``--dry-run`` goes to the pipeline (which
then only prints its plan, on the allocation, without starting Flink).

The Flink distribution and the Beam job-server jar come from the config or from what
``scripts/setup.sh --flink`` provisioned under ``cache_dir``; nothing is downloaded, and both
must sit on storage every node sees. Every rendered value is shell-quoted; secret flags are
left out of the script (the job inherits the submitting environment instead).

Exit status: submit 0 (or, with --wait, the job's), 2 for a bad configuration, 1 otherwise.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import shlex
import subprocess
import sys
import time
from importlib import resources

from runtime import cli
from runtime import errors
from runners import config as rc
from runners import slurm_limits
from runners.config import PIPELINE_MODULE, RESERVED_FLAGS
TERMINAL_STATES = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED",
                   "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE"}

# Config keys that get a dedicated flag (--nodes 2, --cpus-per-node 8, ...); anything else
# through --set KEY=VALUE.
FLAG_KEYS = {"nodes": int, "cpus_per_node": int, "memory": str, "time": str, "partition": str,
             "account": str, "qos": str, "job_name": str, "log_dir": str, "python_env": str,
             "cache_dir": str, "flink_home": str, "flink_version": str, "job_server_jar": str,
             "taskmanager_memory": str, "jobmanager_memory": str, "slots_per_node": int}


class LaunchError(errors.RunError):
    """The job could not be submitted or followed (sbatch failed, SLURM lost it...)."""


def template_text() -> str:
    return resources.files("runners").joinpath("templates/flink_slurm.sbatch").read_text()


def sbatch_options(cfg: dict) -> list[str]:
    """The #SBATCH options. Values are validated by runners.config (no spaces or quotes), and
    no path goes here: the output file is relative to --chdir, given on the sbatch command."""
    opts = [f"--job-name={cfg['job_name']}", f"--nodes={cfg['nodes']}", "--ntasks-per-node=1",
            f"--cpus-per-task={cfg['cpus_per_node']}", f"--time={cfg['time']}",
            "--output=slurm-%j.out", "--open-mode=append"]
    if cfg["memory"] is not None:
        opts.append(f"--mem={cfg['memory']}")
    for key in ("partition", "account", "qos"):
        if cfg[key]:
            opts.append(f"--{key}={cfg[key]}")
    if cfg["signal_before_end"]:
        opts.append(f"--signal=B:USR1@{cfg['signal_before_end']}")
    opts.append("--requeue" if cfg["requeue"] else "--no-requeue")
    opts.extend(cfg["extra_sbatch"])
    return opts


def _array(values) -> str:
    return "(" + " ".join(shlex.quote(str(v)) for v in values) + ")"


def settings_block(cfg: dict, *, flink_home: str, job_server_jar: str, pipeline_args: list[str],
                   workdir: str, dry_run: bool = False,
                   pipeline_module: str = PIPELINE_MODULE) -> str:
    slots = cfg["slots_per_node"] or cfg["cpus_per_node"]
    q = shlex.quote
    lines = [
        "# ---- settings (rendered; values are literal strings, hence the directive) ----",
        "# shellcheck disable=SC2016,SC2089",
        "{",
        f"LOG_ROOT={q(cfg['log_dir'])}",
        f"WORKDIR={q(workdir)}",
        f"PYTHON_ENV={q(cfg['python_env'])}",
        f"MODULES={_array(cfg['modules'])}",
        f"FLINK_HOME={q(flink_home)}",
        f"JOB_SERVER_JAR={q(job_server_jar)}",
        f"JM_MEMORY={q(cfg['jobmanager_memory'])}",
        f"TM_MEMORY={q(cfg['taskmanager_memory'])}",
        f"FLINK_TMP_BASE={q(cfg['flink_tmp_dir'] or '')}",
        f"CPUS_PER_NODE={int(cfg['cpus_per_node'])}",
        f"SLOTS={int(slots)}",
        f"SDK_PARALLELISM={int(cfg['sdk_worker']['parallelism'] or slots)}",
        f"SDK_WORKER_PORT={int(cfg['sdk_worker']['port'])}",
        f"STARTUP_TIMEOUT={int(cfg['startup_timeout'])}",
        f"SIGNAL_BEFORE_END={int(cfg['signal_before_end'])}",
        f"REQUEUE={1 if cfg['requeue'] else 0}",
        f"DRY_RUN={1 if dry_run else 0}",
        f"FLINK_CONF={_array(f'{k}={v}' for k, v in cfg['flink_conf'].items())}",
        f"PIPELINE_MODULE={q(pipeline_module)}",
        f"PIPELINE_ARGS={_array(pipeline_args)}",
        "}",
        "# ---- end of settings ----",
    ]
    return "\n".join(lines)


def render_script(cfg: dict, *, flink_home: str, job_server_jar: str, pipeline_args: list[str],
                  workdir: str, dry_run: bool = False,
                  pipeline_module: str = PIPELINE_MODULE) -> str:
    """The sbatch script text. Pure: checks nothing on disk."""
    text = template_text()
    header = "\n".join(f"#SBATCH {o}" for o in sbatch_options(cfg))
    settings = settings_block(cfg, flink_home=flink_home, job_server_jar=job_server_jar,
                              pipeline_args=pipeline_args, workdir=workdir, dry_run=dry_run,
                              pipeline_module=pipeline_module)
    for marker, value in (("#@SBATCH_OPTIONS@", header), ("#@SETTINGS@", settings)):
        if text.count(marker) != 1:
            raise AssertionError(f"template must hold {marker} exactly once")
        text = text.replace(marker, value)
    return text


def check_pipeline_args(args: list[str]) -> list[str]:
    """Refuse flags the launcher owns; returns the args with secrets removed (warnings printed)."""
    for arg in args:
        name = arg.partition("=")[0]
        if name in RESERVED_FLAGS:
            raise rc.ConfigError(f"{name}: set by the launcher (FlinkRunner on the job's own "
                                 "Flink cluster); leave it out of the pipeline arguments")
    safe, warnings = rc.split_secrets(args)
    for w in warnings:
        print(f"warning: {w}", file=sys.stderr)
    return safe


def sbatch_command(script: str, log_dir: str) -> list[str]:
    return ["sbatch", "--parsable", f"--chdir={log_dir}", script]


def submit(cfg: dict, pipeline_args: list[str], *, no_submit: bool = False,
           dry_run: bool = False, env: dict | None = None) -> tuple[str | None, str]:
    """Render and write the script; submit it unless ``no_submit``. Returns (job id, script).
    Before anything is written, a request the partition can never satisfy is refused
    (:func:`runners.slurm_limits.check_before_submit`)."""
    if not no_submit:
        slurm_limits.check_before_submit(cfg, env)
    home, version = rc.resolve_flink(cfg)
    jar = rc.resolve_job_server_jar(cfg, version)
    python = os.path.join(cfg["python_env"], "bin", "python")
    if not os.path.exists(python):
        raise rc.ConfigError(f"python_env: {python} does not exist; point python_env "
                             "(--python-env) at the environment with tokenbeam installed")
    args = check_pipeline_args(pipeline_args)
    text = render_script(cfg, flink_home=home, job_server_jar=jar, pipeline_args=args,
                         workdir=os.getcwd(), dry_run=dry_run)
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S-%f")
    name = f"{cfg['job_name']}-{stamp}.sbatch"
    os.makedirs(cfg["log_dir"], exist_ok=True)
    if no_submit:
        script = os.path.abspath(name)
    else:
        os.makedirs(os.path.join(cfg["log_dir"], "scripts"), exist_ok=True)
        script = os.path.join(cfg["log_dir"], "scripts", name)
    with open(script, "x", encoding="utf-8") as f:  # a new file: never through a planted link
        f.write(text)
    os.chmod(script, 0o750)
    cmd = sbatch_command(script, cfg["log_dir"])
    if no_submit:
        return None, script
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, env=env)
    except FileNotFoundError:
        raise LaunchError("sbatch not found: run this on a SLURM login node, or use "
                          "--no-submit to only write the script") from None
    if out.returncode != 0:
        raise LaunchError(f"sbatch failed ({out.returncode}): {out.stderr.strip()}")
    job_id = out.stdout.strip().split(";")[0]
    return job_id, script


def job_info(job_id: str, env: dict | None = None) -> dict | None:
    """``scontrol show job`` as a dict, or None when SLURM no longer knows the job."""
    out = subprocess.run(["scontrol", "show", "job", "--oneliner", str(job_id)],
                         capture_output=True, text=True, env=env)
    if out.returncode != 0 or not out.stdout.strip():
        return None
    return parse_scontrol(out.stdout)


def parse_scontrol(text: str) -> dict:
    """``Key=value Key=value ...`` -> dict; a value runs up to the next `` Key=`` (paths such
    as WorkDir may contain spaces)."""
    return slurm_limits.parse_oneliner(text)


def exit_status(info: dict) -> int:
    """The job's exit status from scontrol's ``ExitCode=rc:signal``."""
    code, _, sig = info.get("ExitCode", "0:0").partition(":")
    rc_ = int(code or 0)
    if rc_ == 0 and info.get("JobState") != "COMPLETED":
        return 128 + int(sig) if sig and int(sig) else 1
    return rc_


def wait_for(job_id: str, *, poll: float = 2.0, timeout: float | None = None,
             env: dict | None = None, out=None) -> dict:
    """Block until the job reaches a terminal state; returns its last scontrol record. A job
    pending for a reason that never passes (:func:`runners.slurm_limits.never_starts`) is
    cancelled, and :class:`LaunchError` names SLURM's reason."""
    out = out or sys.stderr
    deadline = None if timeout is None else time.monotonic() + timeout
    last_state = None
    info: dict = {}
    while True:
        info = job_info(job_id, env) or {}
        state = info.get("JobState")
        if state != last_state and state:
            print(f"job {job_id}: {state}" + (f" ({info.get('Reason')})"
                                              if info.get("Reason") not in (None, "None") else ""),
                  file=out, flush=True)
            last_state = state
        if state in TERMINAL_STATES:
            return info
        never = slurm_limits.never_starts(info, env)
        if never is not None:
            subprocess.run(["scancel", str(job_id)], capture_output=True, env=env)
            raise LaunchError(f"job {job_id} can never start: SLURM keeps it pending with "
                              f"reason {never}; cancelled it. Change the request (or the "
                              "partition) and submit again")
        if not info:
            raise LaunchError(f"job {job_id}: SLURM no longer knows it (MinJobAge passed?)")
        if deadline is not None and time.monotonic() > deadline:
            raise TimeoutError(f"job {job_id} still {state} after {timeout} s")
        time.sleep(poll)


def job_folder(info: dict, job_id: str) -> str | None:
    workdir = info.get("WorkDir")
    if not workdir:
        return None
    restarts = int(info.get("Restarts", "0") or 0)
    return os.path.join(workdir, str(job_id) + (f".r{restarts}" if restarts else ""))


def _tail(path: str, lines: int = 15) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except OSError:
        return ""


# --- command line -------------------------------------------------------------------------------

def _parser() -> argparse.ArgumentParser:
    parser = cli.ArgumentParser(prog="python -m runners.slurm", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("submit", help="render (and submit) the sbatch script")
    rc.add_override_arguments(s, FLAG_KEYS, kind="flink_slurm")
    s.add_argument("--no-submit", action="store_true",
                   help="write the script into the current directory and print the command")
    s.add_argument("--wait", action="store_true", help="block until the job ends")
    s.add_argument("--timeout", type=float, default=None, help="with --wait: give up after S s")
    s.add_argument("--dry-run", action="store_true", help="passed to the pipeline")
    s.add_argument("pipeline_args", nargs=argparse.REMAINDER,
                   help="-- then the arguments of python -m pipelines.tokenize")
    st = sub.add_parser("status", help="state, exit status and job folder of a job")
    st.add_argument("job_id")
    c = sub.add_parser("cancel", help="cancel a job (its trap stops Flink)")
    c.add_argument("job_id")
    return parser


def _main(argv) -> int:
    args = _parser().parse_args(argv)
    if args.cmd == "status":
        info = job_info(args.job_id)
        if info is None:
            raise LaunchError(f"job {args.job_id}: unknown to SLURM (finished more than "
                              "MinJobAge ago?)")
        print(f"job {args.job_id}: {info.get('JobState')} reason={info.get('Reason')} "
              f"exit={info.get('ExitCode')} nodes={info.get('NodeList')}")
        folder = job_folder(info, args.job_id)
        if folder:
            print(f"job folder: {folder}")
        return 0
    if args.cmd == "cancel":
        return subprocess.run(["scancel", str(args.job_id)]).returncode
    pipeline_args = list(args.pipeline_args)
    if pipeline_args and pipeline_args[0] == "--":
        pipeline_args = pipeline_args[1:]
    cfg = rc.load(args.config, rc.overrides_from(args, FLAG_KEYS), kind="flink_slurm")
    if not pipeline_args:
        raise rc.ConfigError("no pipeline arguments: add `-- --input ... --output ...` "
                             "(those of python -m pipelines.tokenize)")
    job_id, script = submit(cfg, pipeline_args, no_submit=args.no_submit, dry_run=args.dry_run)
    if job_id is None:
        print(f"wrote {script}")
        print(shlex.join(sbatch_command(script, cfg["log_dir"])))
        return 0
    print(f"submitted job {job_id}; script {script}; logs {cfg['log_dir']}/{job_id}/", flush=True)
    if not args.wait:
        print(job_id)
        return 0
    try:
        info = wait_for(job_id, timeout=args.timeout)
    except TimeoutError as exc:
        raise LaunchError(str(exc)) from None
    status = exit_status(info)
    folder = job_folder(info, job_id) or os.path.join(cfg["log_dir"], job_id)
    tail = _tail(os.path.join(folder, "pipeline.log"))
    if tail:
        print(f"--- {folder}/pipeline.log (end) ---\n{tail}", end="")
    print(f"job {job_id}: {info.get('JobState')}, exit status {status}; logs in {folder}")
    return status


def main(argv=None) -> int:
    return errors.main(_main, argv)


if __name__ == "__main__":
    sys.exit(errors.main(_main, process=True))
