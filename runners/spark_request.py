"""What a Spark batch is made of: the staged jars, the Spark conf, Livy's batch request and
spark-submit's command line (runners/spark.py submits them).

Where a config gives executors a secret itself (``spark_conf:
{spark.executorEnv.AZURE_STORAGE_KEY: ...}``), :func:`spark_conf` extends
``spark.redaction.regex`` (Spark's default pattern, plus every name of
:data:`runtime.redact.SECRET_NAMES` and ``sig=``) so that Spark's event log, UI and History
Server show it redacted, and ``spark-submit`` gets such entries through a properties file only
this user can read, never on its command line (:func:`spark_submit_argv`).
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil

from dataio import file_hashes
from dataio import fs as fsutil
from runtime.redact import secret_name_pattern
from runners import config as rconfig

RUNTIME_PREFIX = "beam-spark-runtime-"


@dataclasses.dataclass
class Staged:
    job_jar: str          # where this machine wrote it
    runtime_jar: str
    job_jar_cluster: str  # the same files, as the cluster names them
    runtime_jar_cluster: str


def runtime_jar(cfg: dict) -> str:
    jar = cfg.get("job_server_jar") or os.path.join(cfg["cache_dir"], "jars",
                                                     "spark-job-server.jar")
    if not os.path.isfile(jar):
        raise rconfig.ConfigError(
            f"job_server_jar: {jar} does not exist. Run `bash scripts/setup.sh --spark` (it "
            "builds Beam's Spark 3 job-server jar with Maven, ~2 min), or set job_server_jar to a "
            "beam-runners-spark-3-job-server jar you have")
    return os.path.realpath(jar)


def cluster_name(cfg: dict, path: str) -> str:
    """``path`` under ``staging_dir`` as the cluster names it."""
    staging = cfg["staging_dir"].rstrip("/")
    theirs = (cfg["cluster_staging_dir"] or staging).rstrip("/")
    return theirs + path[len(staging):] if path.startswith(staging) else path


def stage(cfg: dict, job_jar: str, *, run_id: str) -> Staged:
    """Copy the job jar to ``staging_dir/jobs/{run id}/`` and the runtime to
    ``staging_dir/runtime/`` (skipped when that version is there already)."""
    runtime = runtime_jar(cfg)
    digest = file_hashes.content_hash(runtime).partition(":")[2][:16]
    staging = cfg["staging_dir"].rstrip("/")
    runtime_target = fsutil.join(staging, "runtime", f"{RUNTIME_PREFIX}{digest}.jar")
    job_target = fsutil.join(staging, "jobs", run_id, "pipeline.jar")
    if not (fsutil.exists(runtime_target) and fsutil.size(runtime_target) == os.path.getsize(runtime)):
        _copy(runtime, runtime_target)
    _copy(job_jar, job_target)
    return Staged(job_target, runtime_target, cluster_name(cfg, job_target),
                  cluster_name(cfg, runtime_target))


def _copy(local: str, target: str) -> None:
    if fsutil.is_local(target):
        os.makedirs(os.path.dirname(target), exist_ok=True)
        tmp = f"{target}.part-{os.getpid()}"
        shutil.copyfile(local, tmp)
        os.replace(tmp, target)
        return
    fs, path = fsutil.filesystem_and_path(target)
    fs.put_file(local, path)


ENVIRONMENT_CACHE_MS = 600_000
# Spark's own default spark.redaction.regex (kept: the launcher only adds to it).
SPARK_DEFAULT_REDACTION = "(?i)secret|password|token|access[.]?key"
REDACTION_KEY = "spark.redaction.regex"
SECRET_PROPERTIES = "spark-secrets.conf"


def redaction_regex(user: str | None = None) -> str:
    """``spark.redaction.regex``: Spark's default pattern, the names tokenbeam knows as
    secrets (Azure's account key, SAS, connection string, client secret, tokenbeam's own
    variables) and any pattern the config gave."""
    ours = f"{SPARK_DEFAULT_REDACTION}|{secret_name_pattern()}"
    return f"(?:{user})|{ours}" if user and user != ours else ours


def spark_conf(cfg: dict) -> dict[str, str]:
    """The config's ``spark_conf`` as strings, with ``spark.redaction.regex`` extended (Spark
    matches it against every property's name and value in its event log and UI, executor
    environment variables included)."""
    conf = {k: str(v) for k, v in cfg["spark_conf"].items()}
    conf[REDACTION_KEY] = redaction_regex(conf.get(REDACTION_KEY))
    return conf


def secret_conf(conf: dict[str, str]) -> dict[str, str]:
    """The entries of ``conf`` whose name or value looks like a secret."""
    pattern = re.compile(secret_name_pattern())
    return {k: v for k, v in conf.items()
            if k != REDACTION_KEY and (pattern.search(k) or pattern.search(v))}


def _properties_escape(text: str, *, key: bool) -> str:
    out = []
    for i, ch in enumerate(text):
        if ch == "\\":
            out.append("\\\\")
        elif ch in "\n\r\t\f":
            out.append({"\n": "\\n", "\r": "\\r", "\t": "\\t", "\f": "\\f"}[ch])
        elif ch in "=: #!" and (key or (i == 0 and ch in " #!")):
            out.append("\\" + ch)
        else:
            out.append(ch)
    return "".join(out)


def write_secret_properties(path: str, secrets: dict[str, str], *, spark_home: str) -> str:
    """Write ``secrets`` as a Java properties file only this user can read (0600, never
    through a symlink), after the cluster's ``spark-defaults.conf`` (a ``--properties-file``
    replaces it). Returns ``path``."""
    conf_dir = os.environ.get("SPARK_CONF_DIR") or os.path.join(
        os.environ.get("SPARK_HOME") or spark_home, "conf")
    defaults = ""
    try:
        with open(os.path.join(conf_dir, "spark-defaults.conf"), encoding="utf-8") as f:
            defaults = f.read()
    except OSError:
        pass
    lines = [f"{_properties_escape(k, key=True)}={_properties_escape(v, key=False)}"
             for k, v in secrets.items()]
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        os.fchmod(f.fileno(), 0o600)
        f.write(defaults.rstrip("\n") + "\n" if defaults.strip() else "")
        f.write("# secret-looking spark_conf entries (runners/spark_request.py)\n" + "\n".join(lines)
                + "\n")
    return path


def worker_options(cfg: dict) -> list[str]:
    """The Beam options that make the cluster start Python SDK workers with our boot."""
    boot = os.path.join(cfg["python_env"], "bin", "tokenbeam-sdk-boot")
    parallelism = cfg["sdk_worker_parallelism"] or cfg["executor_cores"]
    return ["--environment_type=PROCESS",
            "--environment_config=" + json.dumps({"command": boot}),
            f"--sdk_worker_parallelism={parallelism}",
            # Beam's default (0) starts the Python workers anew for every Spark stage and
            # closes them after it: ~5 stages x the SDK's start-up per job. Cached, an
            # executor's workers serve every stage.
            f"--environment_cache_millis={ENVIRONMENT_CACHE_MS}",
            # Beam's Spark runner derives its default storage level from the runner option,
            # which a portable job does not have ("No Runner was specified").
            "--storage_level=MEMORY_AND_DISK"]


def batch_body(cfg: dict, staged: Staged, *, run_id: str) -> dict:
    """The Livy / Synapse batch request (nothing secret in it)."""
    body = {
        "name": f"{cfg['name']}-{run_id}",
        "file": staged.job_jar_cluster,
        "className": "org.apache.beam.runners.spark.SparkPipelineRunner",
        "jars": [staged.runtime_jar_cluster],
        "driverMemory": cfg["driver_memory"],
        "driverCores": cfg["driver_cores"],
        "executorMemory": cfg["executor_memory"],
        "executorCores": cfg["executor_cores"],
        "numExecutors": cfg["num_executors"],
        "conf": spark_conf(cfg),
    }
    if cfg["kind"] == "spark_hdinsight" and cfg.get("queue"):
        body["queue"] = cfg["queue"]
    if cfg["kind"] == "spark_synapse":
        body["tags"] = {"tokenbeam-run": run_id}
    return body


def spark_submit_argv(cfg: dict, staged: Staged, *, run_id: str, work: str) -> list[str]:
    """spark-submit's command line. Secret-looking ``spark_conf`` entries are not on it: they
    go to ``work/spark-secrets.conf`` (:func:`write_secret_properties`), given as
    ``--properties-file``."""
    home = cfg.get("spark_home")
    if home:
        submit = os.path.join(home, "bin", "spark-submit")
    else:
        submit = shutil.which("spark-submit") or os.path.join(cfg["cache_dir"], "spark", "home",
                                                              "bin", "spark-submit")
    if not os.path.exists(submit):
        raise rconfig.ConfigError(f"spark_home: no spark-submit at {submit}; set spark_home to "
                                  "your Spark 3.5 (or `pip install pyspark==3.5.8` gives one: its package folder)")
    argv = [submit, "--master", cfg["master"], "--deploy-mode", cfg["deploy_mode"],
            "--class", "org.apache.beam.runners.spark.SparkPipelineRunner",
            "--name", f"{cfg['name']}-{run_id}", "--jars", staged.runtime_jar_cluster,
            "--driver-memory", cfg["driver_memory"], "--executor-memory", cfg["executor_memory"],
            "--executor-cores", str(cfg["executor_cores"])]
    if cfg["master"] == "yarn":
        argv += ["--driver-cores", str(cfg["driver_cores"]),
                 "--num-executors", str(cfg["num_executors"])]
    else:
        argv += ["--total-executor-cores", str(cfg["executor_cores"] * cfg["num_executors"])]
    conf = spark_conf(cfg)
    secrets = secret_conf(conf)
    if secrets:
        spark_home = os.path.dirname(os.path.dirname(os.path.realpath(submit)))
        argv += ["--properties-file", write_secret_properties(
            os.path.join(work, SECRET_PROPERTIES), secrets, spark_home=spark_home)]
    for key, value in conf.items():
        if key not in secrets:
            argv += ["--conf", f"{key}={value}"]
    return argv + [staged.job_jar_cluster]


def spark_submit_env(cfg: dict) -> dict:
    """spark-submit's environment: for YARN, HADOOP_CONF_DIR names the cluster."""
    env = dict(os.environ)
    if cfg["master"] != "yarn":
        return env
    conf_dir = cfg["hadoop_conf_dir"] or env.get("HADOOP_CONF_DIR") or env.get("YARN_CONF_DIR")
    if not conf_dir or not os.path.isfile(os.path.join(conf_dir, "yarn-site.xml")):
        where = f"{conf_dir} has no yarn-site.xml" if conf_dir else "none is set"
        raise rconfig.ConfigError(
            f"master: yarn needs the cluster's Hadoop configuration ({where}): set "
            "hadoop_conf_dir (or HADOOP_CONF_DIR) to the folder holding its yarn-site.xml and "
            "core-site.xml (/etc/hadoop/conf on an HDInsight head node)")
    env["HADOOP_CONF_DIR"] = conf_dir
    return env
