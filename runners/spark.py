"""``python -m runners.spark submit|status|cancel|logs``: the tokenize job on Spark.

    python -m runners.spark submit --config runners/spark_hdinsight.yaml [--set KEY=VALUE]
        [--wait] [--no-submit] [--dry-run] -- <tokenize args>
    python -m runners.spark status --config FILE BATCH [--wait]
    python -m runners.spark cancel --config FILE BATCH
    python -m runners.spark logs   --config FILE BATCH [--lines N]

(BATCH: a Livy or Synapse batch id, or a YARN application id: ``status``, ``cancel`` and
``logs`` ask YARN's ResourceManager REST API for ``spark`` configs with ``master: yarn``.)

``submit`` does on this machine what ``python -m pipelines.tokenize`` does before its pipeline
runs (check the command line, the tokenizer and the output, take the output's lock, plan,
skip committed shards), then writes the pipeline as a small jar (runners/spark_jar.py; the
Python SDK workers start with ``tokenbeam-sdk-boot`` from ``python_env`` on the nodes), stages
it and Beam's Spark runtime (once per version) in ``staging_dir``, and submits it:

- ``spark_hdinsight``: a Livy batch (``POST {livy_url}/batches``), HTTP basic auth with the
  cluster login read from the environment variables the config names, ``X-Requested-By``;
- ``spark_synapse``: the workspace's Livy-compatible batch API, with a bearer token from
  azure-identity's ``DefaultAzureCredential``;
- ``spark``: ``spark-submit`` against a standalone ``spark://`` master (client mode) or YARN
  (``master: yarn``, client or cluster mode, the cluster named by ``hadoop_conf_dir``); the
  launcher waits for spark-submit, so this kind always waits.

The batch's last step writes ``metadata.json`` and removes the run's temporaries, so the
output is complete whether or not anyone waits. Until then a *detached hold* in the output
(dataio/lock.py) keeps other runs out; a later ``submit`` asks the cluster whether the batch
it names has ended, and takes over if so. ``--wait`` blocks until the batch ends, prints the
summary (the tail of the driver log on failure) and exits as tokenize does: 0 when every shard
is committed, 1 when one failed or the batch did. A resubmission skips committed shards.

Secrets never leave this process: not in the jar (tokenize strips secret flags before Beam
sees them), the batch request, ``--no-submit``'s files, logs or metadata. Workers on the
cluster reach Azure storage with the cluster's own identity or environment; a secret a config
gives executors itself stays off spark-submit's command line and out of Spark's UI
(runners/spark_request.py).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import shlex
import subprocess
import sys
import time

from runtime import cli
from runtime import errors
from dataio import fs as fsutil
from dataio import lock as output_lock
from runtime.redact import redact
from runtime.text import printable
from runners import config as rconfig
from runners.spark_clients import (LIVY_OK, LIVY_TERMINAL, YARN_APP_ID, BatchNotFound,
                                   LivyClient, SparkError, SynapseClient, YarnClient, batches_url,
                                   resourcemanager_urls)
from runners.spark_request import (Staged, batch_body, spark_submit_argv, spark_submit_env, stage,
                                   worker_options)

HELD_BATCHES_KEY = "batch"
YARN_ID = re.compile(r"application_\d+_\d+")
LOG_TAIL_LINES = 40


def client_for(cfg: dict):
    kind = cfg["kind"]
    if kind == "spark_hdinsight":
        user = os.environ.get(cfg["username_env"])
        password = os.environ.get(cfg["password_env"])
        if not user or not password:
            missing = [n for n, v in ((cfg["username_env"], user), (cfg["password_env"], password))
                       if not v]
            raise rconfig.ConfigError(
                f"the HDInsight cluster login is read from the environment: set "
                f"{' and '.join(missing)} (export {cfg['password_env']}=...; never a flag or a "
                "file), or point username_env/password_env at the variables you use")
        return LivyClient(cfg["livy_url"], auth=(user, password), timeout=cfg["request_timeout"])
    if kind == "spark_synapse":
        return SynapseClient(cfg)
    if cfg["master"] == "yarn":
        return YarnClient(cfg, env=spark_submit_env(cfg))
    raise rconfig.ConfigError(f"master {cfg['master']}: a standalone Spark's applications end "
                              "with the submit that waits for them; status, cancel and logs "
                              "are for spark_hdinsight, spark_synapse and master: yarn")


def _tokenize_argv(args: list[str]) -> list[str]:
    for arg in args:
        if arg == "--runner" or arg.startswith("--runner="):
            raise rconfig.ConfigError("leave --runner out of the tokenize arguments: "
                                      "runners.spark runs the job on Spark")
        if arg.startswith("--environment_") or arg == "--workers" or arg.startswith("--workers="):
            raise rconfig.ConfigError(f"{arg.split('=')[0]}: set by runners.spark (python_env, "
                                      "sdk_worker_parallelism in the config); leave it out")
    return args


def _submit(args, cfg: dict) -> int:
    import apache_beam as beam

    from pipelines import options as opts
    from pipelines.tokenize import driver, graph
    from runners.spark_jar import PipelineJarRunner

    client = asks = None

    def check(options) -> None:  # before anything is locked or written
        nonlocal client, asks
        _refuse_relative_paths(options)
        if opts.flags(options).plan_only:
            return
        client = None if cfg["kind"] == "spark" or args.no_submit else client_for(cfg)
        if client is not None:
            client.check_credentials()  # a missing credential fails now, not after the build
        if cfg["kind"] == "spark":
            spark_submit_env(cfg)  # so does a YARN master without its cluster's configuration
        # who says whether the run an output's detached hold names has ended: the batch API, or
        # for spark-submit to YARN the ResourceManager (an application outlives a launcher
        # stopped in cluster mode)
        asks = client if client is not None or args.no_submit or cfg["master"] != "yarn" \
            else client_for(cfg)

    def ended(hold: dict) -> bool:
        return asks is not None and _ended_on(asks)(hold)

    tokenize_args = _tokenize_argv(list(args.tokenize)) + (["--dry-run"] if args.dry_run else [])
    with driver.prepare(tokenize_args + worker_options(cfg), beam_free=False, check=check,
                        ended=ended, since=driver.process_started()) as run:
        job = run.job
        if job is None or not job.to_process:
            return 0 if job is None else driver.complete(run)
        output = job.output
        # The pipeline runs on the cluster under the detached hold below, not under this
        # process's lease; each executor's progress lines are its own, labelled so.
        job.guard = None
        job.config = dataclasses.replace(job.config,
                                         progress=driver.progress_plan(job, workers=None))
        where = cfg["master"] if cfg["kind"] == "spark" else batches_url(cfg)
        output_lock.hold_detached(output, job.run_id, {"runner": cfg["kind"], "cluster": where,
                                                       HELD_BATCHES_KEY: None})
        work = os.path.join(args.work_dir, job.run_id)
        os.makedirs(work, exist_ok=True)
        jar = os.path.join(work, "pipeline.jar")
        t_jar = time.monotonic()
        pipeline = beam.Pipeline(runner=PipelineJarRunner(jar), options=job.options)
        graph.build(pipeline, job, storage=run.storage, finish_argv=run.argv,
                    started=run.started)
        pipeline.run().wait_until_finish()
        t_stage = time.monotonic()
        staged = stage(cfg, jar, run_id=job.run_id)
        t_submit = time.monotonic()
        _timing("pipeline jar", t_stage - t_jar, f"{os.path.getsize(jar):,} bytes")
        _timing("staging", t_submit - t_stage, staged.runtime_jar)
        if args.no_submit:
            run.handed_off = True  # the request written runs it, with these temporaries
            return _write_request(args, cfg, staged, run_id=job.run_id, work=work,
                                  output=output)
        if cfg["kind"] == "spark":
            run.handed_off = True
            state = _run_spark_submit(cfg, staged, run_id=job.run_id, work=work,
                                      on_application=_yarn_recorder(
                                          args, cfg, output=output, run_id=job.run_id))
        else:
            body = batch_body(cfg, staged, run_id=job.run_id)
            _save_request(work, {"method": "POST", "url": batches_url(cfg) + "/batches",
                                 "body": body})   # what was sent, for the record
            batch = client.submit(body)
            run.handed_off = True
            output_lock.hold_detached(output, job.run_id, {
                "runner": cfg["kind"], "cluster": where, HELD_BATCHES_KEY: batch})
            print(f"submitted batch {batch} to {client.url} ({body['name']})", flush=True)
            _timing("submission", time.monotonic() - t_submit, "")
            if not args.wait:
                print(f"follow it: python -m runners.spark status --config {args.config} "
                      f"{batch} --wait   (logs: ... logs; stop: ... cancel)")
                return 0
            state = _wait(client, batch, poll=cfg["poll_interval"])
        # The batch has ended: its last step wrote metadata.json unless it failed before; no
        # metrics come back from the cluster (the commit records say what it did).
        status = driver.complete(run, pipeline_finishes=True)
        if state != LIVY_OK:
            if client is not None:
                _print_log_tail(client, batch)
            print(f"the Spark batch ended {state}; rerun the same command to resume "
                  "(committed shards are skipped)", file=sys.stderr)
            return 1
        return status


def _refuse_relative_paths(options) -> None:
    """The cluster's executors run elsewhere, in another folder: a relative path would name
    another file there (or none)."""
    from pipelines import options as opts

    io = tok = opts.flags(options)
    named = [("--input", p) for p in io.input or []] + [
        ("--output", io.output), ("--tokenizer-model", tok.tokenizer_model),
        ("--vocab-file", tok.vocab_file), ("--merge-file", tok.merge_file)]
    for flag, path in named:
        if path and "://" not in path and not os.path.isabs(path):
            raise rconfig.ConfigError(
                f"{flag} {path}: a relative path; the cluster's nodes resolve it in another "
                f"folder. Give an absolute path on storage the nodes share, or a URL "
                f"(abfss://...), e.g. {flag} {os.path.abspath(path)}")


def _timing(what: str, seconds: float, detail: str) -> None:
    print(f"  {what:<13} {seconds:6.1f} s  {detail}", flush=True)


def _ended_on(client):
    """``ended(hold)`` for :func:`dataio.lock.refuse_detached`: the batch a hold names has
    ended on this cluster (or the cluster no longer knows it)."""
    def ended(hold: dict) -> bool:
        batch = hold.get(HELD_BATCHES_KEY)
        # a YARN hold names one of the cluster's ResourceManagers (an HA pair has two)
        if hold.get("cluster") not in getattr(client, "urls", [client.url]) or batch is None:
            return False
        try:
            return client.state(str(batch)) in LIVY_TERMINAL
        except BatchNotFound:
            return True
    return ended


def _wait(client, batch: str, *, poll: float) -> str:
    last = None
    while True:
        state = client.state(batch)
        if state != last:
            print(f"{client.noun} {batch}: {state}", flush=True)
            last = state
        if state in LIVY_TERMINAL:
            return state
        time.sleep(poll)


def _print_log_tail(client, batch: str, lines: int = LOG_TAIL_LINES) -> None:
    try:
        tail = client.log(batch, lines)
    except SparkError as exc:
        tail = [f"(no log: {exc})"]
    print(f"--- the last {len(tail)} lines of {client.noun} {batch}'s log ---", file=sys.stderr)
    for line in tail:
        print(redact(str(line)), file=sys.stderr)


def _run_spark_submit(cfg: dict, staged: Staged, *, run_id: str, work: str,
                      on_application=None) -> str:
    """Run spark-submit and wait for it; on YARN, ``on_application(id)`` as soon as its log
    names the application it submitted."""
    argv = spark_submit_argv(cfg, staged, run_id=run_id, work=work)
    env = spark_submit_env(cfg)
    log_path = os.path.join(work, "spark-submit.log")
    print(f"spark-submit to {cfg['master']} (log: {log_path})", flush=True)
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True)
        try:
            app = None
            while (rc := proc.poll()) is None:
                if app is None and on_application is not None:
                    app = _yarn_application(log_path)
                    if app is not None:
                        on_application(app)
                time.sleep(0.5)
        except BaseException:
            os.killpg(proc.pid, 15)
            proc.wait()
            raise
    if rc != 0:
        with open(log_path, "rb") as f:
            tail = f.read().decode("utf-8", "replace").splitlines()[-LOG_TAIL_LINES:]
        print(f"--- the last {len(tail)} lines of {log_path} ---", file=sys.stderr)
        for line in tail:
            print(redact(line), file=sys.stderr)
        return "dead"
    return LIVY_OK


def _yarn_application(log_path: str) -> str | None:
    """The application id spark-submit's YARN client logged ("Submitted application ..."), if
    it has yet."""
    try:
        with open(log_path, "rb") as f:
            match = YARN_APP_ID.search(f.read().decode("utf-8", "replace"))
    except OSError:
        return None
    return match.group(1) if match else None


def _yarn_recorder(args, cfg: dict, *, output: str, run_id: str):
    """``on_application`` for :func:`_run_spark_submit` on YARN: the application id goes where
    a Livy batch id goes (the output's detached hold) and is printed with the commands that
    follow it."""
    if cfg["master"] != "yarn":
        return None

    # the hold names the ResourceManager, as a Livy batch's names its Livy: a later submit
    # asks it whether the application has ended (_ended_on)
    cluster = resourcemanager_urls(spark_submit_env(cfg)["HADOOP_CONF_DIR"])[0]

    def record(app: str) -> None:
        output_lock.hold_detached(output, run_id, {"runner": cfg["kind"], "cluster": cluster,
                                                   HELD_BATCHES_KEY: app})
        print(f"submitted application {app} to YARN; from another shell: python -m "
              f"runners.spark status --config {args.config} {app} [--wait] (logs: ... logs; "
              "stop: ... cancel; with the same --set overrides)", flush=True)
    return record


REQUEST_NAME = "batch-request.json"


def _save_request(work: str, request: dict) -> str:
    """Write the request (as submitted, or to submit) to ``work/batch-request.json``; 0600: a
    config may give executors a secret in spark_conf, and Livy's body carries it."""
    path = os.path.join(work, REQUEST_NAME)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(request, f, indent=1)
    return path


def _write_request(args, cfg: dict, staged: Staged, *, run_id: str, work: str,
                   output: str) -> int:
    """``--no-submit``: the jar is staged and the request written; the caller submits."""
    if cfg["kind"] == "spark":
        request = {"argv": spark_submit_argv(cfg, staged, run_id=run_id, work=work)}
        prefix = ""
        if cfg["master"] == "yarn":
            request["env"] = {"HADOOP_CONF_DIR": spark_submit_env(cfg)["HADOOP_CONF_DIR"]}
            prefix = f"HADOOP_CONF_DIR={shlex.quote(request['env']['HADOOP_CONF_DIR'])} "
        # a line to paste into a shell: every word quoted (paths and globs are user text)
        how = "run: " + prefix + shlex.join(request["argv"])
    else:
        url = batches_url(cfg) + "/batches"
        request = {"method": "POST", "url": url, "body": batch_body(cfg, staged, run_id=run_id)}
        auth = ("HTTP basic auth with the cluster login, header X-Requested-By: tokenbeam"
                if cfg["kind"] == "spark_hdinsight" else
                f"Authorization: Bearer <a token for {cfg['token_scope']}>")
        how = (f"POST {work}/batch-request.json's body to {url} ({auth}); nothing of that "
               "credential is in the file")
    path = _save_request(work, request)
    print(f"wrote {path} and staged {staged.job_jar}")
    print(how)
    print(f"until that batch ends, {output} is held for it ({output_lock.DETACHED_NAME} in its "
          f"_temporary/{run_id}/); if you do not submit it, remove that folder")
    return 0


# --- status / cancel / logs -----------------------------------------------------------------------

def _status(args, cfg: dict) -> int:
    client = client_for(cfg)
    if args.wait:
        state = _wait(client, args.batch, poll=cfg["poll_interval"])
    else:
        state = client.state(args.batch)
        print(f"{client.noun} {args.batch}: {state}")
    if state in LIVY_TERMINAL and state != LIVY_OK:
        _print_log_tail(client, args.batch)
        return 1
    return 0


def _cancel(args, cfg: dict) -> int:
    client = client_for(cfg)
    client.cancel(args.batch)
    deadline = time.monotonic() + max(30, 6 * cfg["poll_interval"])
    state = None
    while time.monotonic() < deadline:
        try:
            state = client.state(args.batch)
        except BatchNotFound:  # Livy forgets a batch once it is deleted
            state = "killed"
        if state in LIVY_TERMINAL:
            break
        time.sleep(1)
    print(f"{client.noun} {args.batch}: {state} (a resubmission skips the shards it committed)")
    return 0 if state in LIVY_TERMINAL else 1


def _logs(args, cfg: dict) -> int:
    client = client_for(cfg)
    for line in client.log(args.batch, args.lines):
        print(redact(str(line)))
    return 0


# --- command line --------------------------------------------------------------------------------

def default_work_dir() -> str:
    """``submit``'s ``--work-dir`` default: tokenbeam's per-user cache folder
    (:func:`dataio.fs.cache_dir`), never the checkout or the current folder."""
    return os.path.join(fsutil.cache_dir(), "spark-jobs")


def parser() -> argparse.ArgumentParser:
    p = cli.ArgumentParser(prog="python -m runners.spark",
                                description="Run the tokenize job on Spark (HDInsight through "
                                "Livy, Synapse Spark pools, a standalone Spark).")
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("submit", help="plan, build the pipeline jar, stage it, submit it")
    rconfig.add_override_arguments(s, {}, kind="spark_hdinsight | spark_synapse | spark")
    s.add_argument("--wait", action="store_true", help="block until the batch ends; exit with "
                   "tokenize's status")
    s.add_argument("--no-submit", action="store_true", help="write the jar and the request, "
                   "do not submit")
    s.add_argument("--dry-run", action="store_true", help="print the tokenize plan only")
    s.add_argument("--work-dir", default=None,
                   help="where the jar, the request and spark-submit's log are written before "
                   "staging (default: $XDG_CACHE_HOME/tokenbeam/spark-jobs, else "
                   "~/.cache/tokenbeam/spark-jobs: outside the checkout)")
    s.add_argument("tokenize", nargs=argparse.REMAINDER, help="-- then the tokenize arguments")
    for name, help_ in (("status", "the batch's state"), ("cancel", "stop the batch"),
                        ("logs", "the batch's driver log")):
        c = sub.add_parser(name, help=help_)
        rconfig.add_override_arguments(c, {}, kind="spark_hdinsight | spark_synapse | spark "
                                       "with master: yarn")
        c.add_argument("batch", help="the batch id (Livy, Synapse) or YARN application id "
                       "submit printed")
        if name == "status":
            c.add_argument("--wait", action="store_true", help="block until the batch ends")
        if name == "logs":
            c.add_argument("--lines", type=int, default=200)
    return p


def _main(argv) -> int:
    args = parser().parse_args(argv)
    if args.config is None:
        raise rconfig.ConfigError("--config FILE is required (runners/spark_hdinsight.yaml, "
                                  "runners/spark_synapse.yaml or runners/spark.yaml)")
    cfg = rconfig.load(args.config, rconfig.overrides_from(args, {}))
    if cfg["kind"] not in rconfig.SPARK_KINDS:
        raise rconfig.ConfigError(f"{args.config}: kind {cfg['kind']!r} is not a Spark kind "
                                  f"({', '.join(rconfig.SPARK_KINDS)})")
    if args.command == "submit":
        if args.tokenize[:1] == ["--"]:
            args.tokenize = args.tokenize[1:]
        if not args.tokenize:
            raise rconfig.ConfigError("give the tokenize arguments after --, e.g. -- --input "
                                      "'data/*.jsonl' --output out --tokenizer-type ...")
        args.work_dir = args.work_dir or default_work_dir()
        return _submit(args, cfg)
    if cfg["kind"] == "spark" and cfg["master"] == "yarn" and not YARN_ID.fullmatch(args.batch):
        raise rconfig.ConfigError(
            f"{printable(args.batch)}: not a YARN application id (application_<cluster start>_"
            "<number>, as submit printed it); a Livy batch id goes with spark_hdinsight.yaml")
    return {"status": _status, "cancel": _cancel, "logs": _logs}[args.command](args, cfg)


def main(argv=None) -> int:
    return errors.main(_main, argv)


if __name__ == "__main__":
    sys.exit(errors.main(_main, process=True))
