"""Runner configurations: the YAML files under runners/ plus command-line overrides.

Contract:

- :func:`load` reads a YAML file (``kind: flink_slurm | flink | direct | spark_hdinsight |
  spark_synapse | spark``), lays it over the
  kind's defaults, applies overrides (``{"nodes": 2, "sdk_worker.port": 5000}``; the command
  line wins over the file), validates every value and returns a plain dict. Unknown keys, wrong
  types and malformed values raise :class:`ConfigError` naming the file, the key and the fix.
- Relative paths (``python_env``, ``cache_dir``, ``log_dir``, ``flink_home``,
  ``job_server_jar``, ... :data:`PATH_KEYS`) are made absolute, because a SLURM job runs
  elsewhere and must see the same paths: a value from the YAML file, or a default where a file
  is given, against the file's folder, so a config means the same whatever folder it is used
  from; a value from the command line (or any value when there is no file) against
  ``base_dir``, the current directory by default, as any path typed in a shell.
- :func:`resolve_flink` / :func:`resolve_job_server_jar` find the Flink distribution and the
  Beam job-server jar: the config's value, else what ``scripts/setup.sh --flink`` (or ``--spark``) provisioned
  under ``cache_dir``. They never download anything.
- :func:`split_secrets` keeps credentials out of anything written to disk.

Pure Python: no Beam import, nothing started.
"""

from __future__ import annotations

import copy
import glob
import os
import re
from typing import Any

import yaml

from runtime import errors
from runtime.redact import redact, split_secret_flags

# What every launcher runs, and the flags it sets itself (a user value would silently fight
# with them); here so that the launchers, which are commands, need not import each other.
PIPELINE_MODULE = "pipelines.tokenize"
RESERVED_FLAGS = ("--runner", "--job_endpoint", "--environment_type", "--environment_config",
                  "--parallelism", "--sdk_worker_parallelism", "--flink_master",
                  "--flink_job_server_jar", "--flink_submit_uber_jar")

FLINK_SLURM_DEFAULTS: dict[str, Any] = {
    "kind": "flink_slurm",
    # SLURM allocation
    "nodes": 1,
    "cpus_per_node": 4,
    "memory": None,
    "time": "01:00:00",
    "partition": None,
    "account": None,
    "qos": None,
    "job_name": "tokenbeam",
    "signal_before_end": 300,
    "requeue": False,
    "extra_sbatch": [],
    # software on the nodes
    "modules": [],
    "python_env": ".venv",
    "cache_dir": ".cache",
    "log_dir": "slurm-logs",
    # Flink
    "flink_home": None,
    "flink_version": None,
    "job_server_jar": None,
    "jobmanager_memory": "1024m",
    "taskmanager_memory": "4096m",
    "job_server_memory": "1g",
    "slots_per_node": None,
    "flink_tmp_dir": None,
    "startup_timeout": 300,
    "flink_conf": {},
    # Beam SDK workers
    "sdk_worker": {"parallelism": None, "port": 0},
}

FLINK_DEFAULTS: dict[str, Any] = {
    "kind": "flink",
    "flink_master": "127.0.0.1:8081",
    "flink_version": None,
    "job_server_jar": None,
    "cache_dir": ".cache",
    "python_env": None,
    "parallelism": None,
    "sdk_worker": {"worker_pool": "127.0.0.1:50000", "start_local_pool": True,
                   "parallelism": 1},
}

DIRECT_DEFAULTS: dict[str, Any] = {
    "kind": "direct",
    "workers": 1,
}

# Spark (runners/spark.py): what every Spark kind shares, then each kind's own address.
_SPARK_COMMON: dict[str, Any] = {
    "staging_dir": None,
    "cluster_staging_dir": None,
    "python_env": None,
    "driver_memory": "2g",
    "driver_cores": 1,
    "executor_memory": "4g",
    "executor_cores": 2,
    "num_executors": 2,
    "sdk_worker_parallelism": None,
    "job_server_jar": None,
    "cache_dir": ".cache",
    "name": "tokenbeam",
    "spark_conf": {},
    "poll_interval": 5,
    "request_timeout": 60,
}

SPARK_HDINSIGHT_DEFAULTS: dict[str, Any] = {
    "kind": "spark_hdinsight",
    "livy_url": None,
    "username_env": "HDINSIGHT_USERNAME",
    "password_env": "HDINSIGHT_PASSWORD",
    "queue": None,
    **_SPARK_COMMON,
}

SPARK_SYNAPSE_DEFAULTS: dict[str, Any] = {
    "kind": "spark_synapse",
    "workspace": None,
    "spark_pool": None,
    "livy_api_version": "2019-11-01-preview",
    "token_scope": "https://dev.azuresynapse.net/.default",
    "managed_identity_client_id": None,
    **_SPARK_COMMON,
}

SPARK_DEFAULTS: dict[str, Any] = {
    "kind": "spark",
    "master": "spark://127.0.0.1:7077",
    "deploy_mode": "client",
    "hadoop_conf_dir": None,
    "spark_home": None,
    **_SPARK_COMMON,
}

SPARK_KINDS = ("spark_hdinsight", "spark_synapse", "spark")

DEFAULTS = {"flink_slurm": FLINK_SLURM_DEFAULTS, "flink": FLINK_DEFAULTS,
            "direct": DIRECT_DEFAULTS, "spark_hdinsight": SPARK_HDINSIGHT_DEFAULTS,
            "spark_synapse": SPARK_SYNAPSE_DEFAULTS, "spark": SPARK_DEFAULTS}

FREE_FORM = ("flink_conf", "spark_conf")  # mappings whose keys are the engine's own

PATH_KEYS = ("python_env", "cache_dir", "log_dir", "flink_home", "job_server_jar",
             "flink_tmp_dir", "spark_home", "hadoop_conf_dir")

_NAME = re.compile(r"^[A-Za-z0-9_.+:-]+$")
_SLURM_MEMORY = re.compile(r"^\d+[KMGT]?$")
_SLURM_TIME = re.compile(r"^(\d+-)?\d+(:\d{1,2}){0,2}$")
_FLINK_MEMORY = re.compile(r"^\d+\s*([kmgt]b?|bytes?)?$", re.IGNORECASE)
_JAVA_MEMORY = re.compile(r"^\d+[kmgKMG]?$")
_MODULE = re.compile(r"^[A-Za-z0-9_./+:@-]+$")
_HOSTPORT = re.compile(r"^(https?://)?[A-Za-z0-9_.\-\[\]:]+:\d{1,5}$")


class ConfigError(errors.ConfigError):
    """A bad runner configuration; the message names the file/flag, the key and the fix
    (exit status 2)."""


def _merge(base: dict, update: dict, *, where: str, prefix: str = "") -> dict:
    out = copy.deepcopy(base)
    for key, value in (update or {}).items():
        dotted = f"{prefix}{key}"
        if key not in base:
            known = ", ".join(sorted(f"{prefix}{k}" for k in base))
            raise ConfigError(f"{where}: unknown key {dotted!r}; known keys: {known}")
        if isinstance(base[key], dict) and key not in FREE_FORM:
            if not isinstance(value, dict):
                raise ConfigError(f"{where}: {dotted} must be a mapping, got {value!r}")
            out[key] = _merge(base[key], value, where=where, prefix=dotted + ".")
        else:
            out[key] = value
    return out


def _set_dotted(tree: dict, dotted: str, value, *, where: str) -> None:
    parts = dotted.split(".")
    node = tree
    for i, part in enumerate(parts[:-1]):
        if part in FREE_FORM:  # free-form engine keys contain dots themselves
            node.setdefault(part, {})[".".join(parts[i + 1:])] = value
            return
        if not isinstance(node.get(part), dict):
            raise ConfigError(f"{where}: unknown key {dotted!r}")
        node = node[part]
    if parts[-1] not in node:
        raise ConfigError(f"{where}: unknown key {dotted!r}; known keys: "
                          f"{', '.join(sorted(node))}")
    node[parts[-1]] = value


def parse_override(item: str) -> tuple[str, Any]:
    """``"sdk_worker.port=5000"`` -> ``("sdk_worker.port", 5000)`` (the value is YAML)."""
    key, sep, value = item.partition("=")
    if not sep or not key.strip():
        raise ConfigError(f"--set {item!r}: expected KEY=VALUE, e.g. --set sdk_worker.port=5000")
    return key.strip(), (yaml.safe_load(value) if value.strip() else None)


def add_override_arguments(parser, flag_keys: dict, *, kind: str) -> None:
    """``--config``, one ``--key`` flag per entry of ``flag_keys`` (name -> type) and repeatable
    ``--set KEY=VALUE``: the launchers' ways of overriding a runner config."""
    parser.add_argument("--config", default=None, help=f"runner YAML (kind: {kind})")
    for key, typ in flag_keys.items():
        parser.add_argument("--" + key.replace("_", "-"), dest="cfg_" + key, type=typ,
                            default=None, metavar=key.upper())
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="override any config value, e.g. --set sdk_worker.port=5000")


def overrides_from(args, flag_keys: dict) -> dict:
    """The overrides given by :func:`add_override_arguments`' flags (``--set`` last)."""
    out = {key: getattr(args, "cfg_" + key) for key in flag_keys
           if getattr(args, "cfg_" + key) is not None}
    out.update(parse_override(item) for item in args.set)
    return out


def load(path: str | None, overrides: dict | None = None, *, kind: str | None = None,
         base_dir: str | None = None) -> dict:
    """Defaults < YAML file < overrides, validated, paths made absolute (file values against
    the file's folder, overrides against ``base_dir``)."""
    where = path or "defaults"
    data: dict = {}
    if path:
        try:
            with open(path, encoding="utf-8") as f:
                data = yaml.safe_load(f) or {}
        except FileNotFoundError:
            raise ConfigError(f"--config {path}: no such file (the shipped ones are "
                              "runners/flink_slurm.yaml, runners/flink.yaml, "
                              "runners/direct.yaml, runners/spark_hdinsight.yaml, "
                              "runners/spark_synapse.yaml, runners/spark.yaml)") from None
        except yaml.YAMLError as exc:
            raise ConfigError(f"{path}: not valid YAML: {exc}") from None
        if not isinstance(data, dict):
            raise ConfigError(f"{path}: expected a mapping of settings at the top level")
    file_kind = data.get("kind", kind)
    if kind and file_kind != kind:
        raise ConfigError(f"{where}: kind is {file_kind!r}, but this launcher needs a "
                          f"{kind!r} config (e.g. runners/{kind}.yaml)")
    if file_kind not in DEFAULTS:
        raise ConfigError(f"{where}: kind must be one of {', '.join(DEFAULTS)}, "
                          f"got {file_kind!r}")
    cfg = _merge(DEFAULTS[file_kind], data, where=where)
    for dotted, value in (overrides or {}).items():
        _set_dotted(cfg, dotted, value, where="command line")
    validate(cfg, where=where)
    shell_dir = os.path.abspath(base_dir or os.getcwd())
    config_dir = os.path.dirname(os.path.abspath(path)) if path else shell_dir
    typed = set(overrides or {})
    for key in PATH_KEYS:
        if cfg.get(key):
            base = shell_dir if key in typed else config_dir
            cfg[key] = os.path.normpath(os.path.join(base, os.path.expanduser(str(cfg[key]))))
    return cfg


def _check(cond: bool, where: str, key: str, value, fix: str) -> None:
    if not cond:
        raise ConfigError(f"{where}: {key} = {value!r} is invalid: {fix}")


def _int(cfg: dict, key: str, where: str, *, minimum: int = 0, optional: bool = False) -> None:
    value = cfg[key]
    if value is None and optional:
        return
    _check(isinstance(value, int) and not isinstance(value, bool) and value >= minimum,
           where, key, value, f"expected a whole number >= {minimum}")


def _str_or_none(cfg: dict, key: str, where: str, pattern: re.Pattern, fix: str) -> None:
    value = cfg[key]
    if value is None:
        return
    _check(isinstance(value, (str, int)) and bool(pattern.match(str(value))), where, key, value,
           fix)


def validate(cfg: dict, *, where: str = "config") -> None:
    kind = cfg["kind"]
    if kind == "flink_slurm":
        _int(cfg, "nodes", where, minimum=1)
        _int(cfg, "cpus_per_node", where, minimum=1)
        _int(cfg, "signal_before_end", where)
        _int(cfg, "startup_timeout", where, minimum=1)
        _int(cfg, "slots_per_node", where, minimum=1, optional=True)
        _str_or_none(cfg, "memory", where, _SLURM_MEMORY, "SLURM memory per node such as 32G or "
                     "64000 (MB); null for the partition's default")
        _check(isinstance(cfg["time"], str) and bool(_SLURM_TIME.match(cfg["time"])), where,
               "time", cfg["time"], "a SLURM time limit such as \"04:00:00\" or \"1-12:00:00\" "
               "(quote it in YAML)")
        for key in ("partition", "account", "qos", "job_name"):
            _str_or_none(cfg, key, where, _NAME, "letters, digits and _ . + : - only")
        _check(isinstance(cfg["requeue"], bool), where, "requeue", cfg["requeue"],
               "true or false")
        _check(isinstance(cfg["extra_sbatch"], list) and all(
            isinstance(x, str) and x.startswith("-") and not any(c in x for c in "\n\r\0")
            for x in cfg["extra_sbatch"]), where, "extra_sbatch", cfg["extra_sbatch"],
            "a list of sbatch options, one line each, e.g. [\"--constraint=cpu\", \"--exclusive\"]")
        _check(isinstance(cfg["modules"], list) and all(
            isinstance(m, str) and _MODULE.match(m) for m in cfg["modules"]), where, "modules",
            cfg["modules"], "a list of module names such as [\"java/17\"]")
        for key in ("jobmanager_memory", "taskmanager_memory"):
            _check(isinstance(cfg[key], str) and bool(_FLINK_MEMORY.match(cfg[key])), where, key,
                   cfg[key], "a Flink memory size such as 1024m or 4g")
        _check(isinstance(cfg["job_server_memory"], str)
               and bool(_JAVA_MEMORY.match(cfg["job_server_memory"])), where,
               "job_server_memory", cfg["job_server_memory"], "a JVM heap size such as 1g")
        _check(cfg["flink_tmp_dir"] is None or (isinstance(cfg["flink_tmp_dir"], str) and not any(
            c in cfg["flink_tmp_dir"] for c in ",|:\n")), where, "flink_tmp_dir",
            cfg["flink_tmp_dir"], "a path without , | : or newlines (Flink splits its temp "
            "folder list at those), or null for the job folder")
        _check(isinstance(cfg["flink_conf"], dict), where, "flink_conf", cfg["flink_conf"],
               "a mapping of Flink configuration keys to values")
        for key, value in cfg["flink_conf"].items():
            _check(isinstance(value, (str, int, float, bool)) and not any(
                c in f"{key}{value}" for c in "\n\r\0"), where, f"flink_conf.{key}", value,
                "a single-line scalar")
        worker = cfg["sdk_worker"]
        _int(worker, "parallelism", where, minimum=1, optional=True)
        _check(isinstance(worker["port"], int) and 0 <= worker["port"] <= 65535, where,
               "sdk_worker.port", worker["port"], "0 (pick a free port) or a port number")
        if cfg["time"] and cfg["signal_before_end"] >= _seconds(cfg["time"]):
            raise ConfigError(f"{where}: signal_before_end = {cfg['signal_before_end']} s is not "
                              f"shorter than time = {cfg['time']}; lower it")
    elif kind == "flink":
        _check(isinstance(cfg["flink_master"], str) and bool(_HOSTPORT.match(cfg["flink_master"])),
               where, "flink_master", cfg["flink_master"], "HOST:PORT of the Flink REST endpoint")
        _int(cfg, "parallelism", where, minimum=1, optional=True)
        worker = cfg["sdk_worker"]
        _check(isinstance(worker["worker_pool"], str)
               and bool(_HOSTPORT.match(worker["worker_pool"])), where, "sdk_worker.worker_pool",
               worker["worker_pool"], "HOST:PORT where each TaskManager reaches its node's "
               "worker pool (port 0 with start_local_pool: any free port)")
        _check(isinstance(worker["start_local_pool"], bool), where, "sdk_worker.start_local_pool",
               worker["start_local_pool"], "true or false")
        _int(worker, "parallelism", where, minimum=1)
    elif kind in SPARK_KINDS:
        _validate_spark(cfg, where)
    else:
        _int(cfg, "workers", where, minimum=1)
    if cfg.get("flink_version") is not None:
        _check(bool(re.match(r"^\d+\.\d+(\.\d+)?$", str(cfg["flink_version"]))), where,
               "flink_version", cfg["flink_version"], "a Flink version such as \"1.19\" (quoted)")
        cfg["flink_version"] = str(cfg["flink_version"])


_URL = re.compile(r"^https?://[A-Za-z0-9_.\-\[\]:]+(/[^\s?#]*)?$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_STAGING = re.compile(r"^(abfss?|wasbs?|az|adl|hdfs)://|^/")


def _validate_spark(cfg: dict, where: str) -> None:
    kind = cfg["kind"]
    if kind == "spark_hdinsight":
        _check(isinstance(cfg["livy_url"], str) and bool(_URL.match(cfg["livy_url"])), where,
               "livy_url", cfg["livy_url"], "the cluster's Livy endpoint, e.g. "
               "https://CLUSTER.azurehdinsight.net/livy")
        for key in ("username_env", "password_env"):
            _check(isinstance(cfg[key], str) and bool(_ENV_NAME.match(cfg[key])), where, key,
                   cfg[key], "the NAME of an environment variable (the value itself never goes "
                   "into a file or a flag)")
        _str_or_none(cfg, "queue", where, _NAME, "a YARN queue name")
    elif kind == "spark_synapse":
        _check(isinstance(cfg["workspace"], str) and bool(_URL.match(cfg["workspace"])), where,
               "workspace", cfg["workspace"], "the workspace's development endpoint, e.g. "
               "https://WORKSPACE.dev.azuresynapse.net")
        _check(isinstance(cfg["spark_pool"], str) and bool(_NAME.match(cfg["spark_pool"])),
               where, "spark_pool", cfg["spark_pool"], "the Apache Spark pool's name")
        _str_or_none(cfg, "livy_api_version", where, _NAME, "e.g. 2019-11-01-preview")
        _check(isinstance(cfg["token_scope"], str) and cfg["token_scope"].startswith("https://"),
               where, "token_scope", cfg["token_scope"], "https://dev.azuresynapse.net/.default")
    else:
        _check(isinstance(cfg["master"], str) and (cfg["master"] == "yarn" or cfg[
            "master"].startswith(("spark://", "local"))), where, "master", cfg["master"],
            "spark://HOST:PORT, or yarn (the cluster named by hadoop_conf_dir)")
        _check(cfg["deploy_mode"] in ("client", "cluster") and (
            cfg["deploy_mode"] == "client" or cfg["master"] == "yarn"), where, "deploy_mode",
            cfg["deploy_mode"], "client, or cluster with master: yarn (the driver then runs "
            "in YARN's application master)")
        _check(cfg["hadoop_conf_dir"] is None or isinstance(cfg["hadoop_conf_dir"], str), where,
               "hadoop_conf_dir", cfg["hadoop_conf_dir"], "null (HADOOP_CONF_DIR or "
               "YARN_CONF_DIR from the environment) or the folder holding yarn-site.xml")
    _check(isinstance(cfg["staging_dir"], str) and bool(_STAGING.match(cfg["staging_dir"])),
           where, "staging_dir", cfg["staging_dir"], "a folder the cluster reads: "
           "abfss://CONTAINER@ACCOUNT.dfs.core.windows.net/PATH, wasbs://..., or an absolute "
           "local path for a cluster that shares this machine's files")
    _check(cfg["cluster_staging_dir"] is None or isinstance(cfg["cluster_staging_dir"], str),
           where, "cluster_staging_dir", cfg["cluster_staging_dir"], "null or the same folder "
           "as the cluster names it")
    _check(isinstance(cfg["python_env"], str) and cfg["python_env"].startswith("/"), where,
           "python_env", cfg["python_env"], "the absolute path, ON THE CLUSTER'S NODES, of the "
           "venv or conda env with tokenbeam installed (runners/templates/ sets one up)")
    for key in ("driver_memory", "executor_memory"):
        _check(isinstance(cfg[key], str) and bool(_JAVA_MEMORY.match(cfg[key])), where, key,
               cfg[key], "a JVM memory size such as 4g or 28g")
    for key in ("driver_cores", "executor_cores", "num_executors", "poll_interval",
                "request_timeout"):
        _int(cfg, key, where, minimum=1)
    _int(cfg, "sdk_worker_parallelism", where, minimum=1, optional=True)
    _check(isinstance(cfg["name"], str) and bool(_NAME.match(cfg["name"])), where, "name",
           cfg["name"], "letters, digits and _ . + : - only")
    _check(isinstance(cfg["spark_conf"], dict) and all(
        isinstance(k, str) and k.startswith("spark.") and isinstance(v, (str, int, float, bool))
        for k, v in cfg["spark_conf"].items()), where, "spark_conf", cfg["spark_conf"],
        "a mapping of spark.* keys to single values")


def _seconds(limit: str) -> int:
    """SLURM time limit -> seconds (formats M, M:S, H:M:S, D-H, D-H:M, D-H:M:S)."""
    days = 0
    if "-" in limit:
        d, limit = limit.split("-", 1)
        days = int(d)
        parts = [int(p) for p in limit.split(":")] + [0] * (3 - len(limit.split(":")))
        h, m, s = parts[:3]
    else:
        parts = [int(p) for p in limit.split(":")]
        if len(parts) == 1:
            h, m, s = 0, parts[0], 0
        elif len(parts) == 2:
            h, m, s = 0, parts[0], parts[1]
        else:
            h, m, s = parts
    return ((days * 24 + h) * 60 + m) * 60 + s


# --- locating what the job needs ---------------------------------------------------------------

def _flink_dist_version(home: str) -> str | None:
    for jar in glob.glob(os.path.join(home, "lib", "flink-dist*.jar")):
        m = re.search(r"-(\d+\.\d+(?:\.\d+)?)\.jar$", jar)
        if m:
            return m.group(1)
    return None


def resolve_flink(cfg: dict) -> tuple[str, str]:
    """(FLINK_HOME, version): ``flink_home``, else ``cache_dir/flink/<flink_version>``, else
    ``cache_dir/flink/home``; checked against ``flink_version`` when both are given."""
    home = cfg.get("flink_home")
    wanted = cfg.get("flink_version")
    cache = cfg.get("cache_dir") or ""
    if not home and wanted:
        stamps = sorted(glob.glob(os.path.join(cache, "flink", f"{wanted}*", ".installed")))
        if stamps:
            with open(stamps[-1], encoding="utf-8") as f:
                home = f.read().strip()
    if not home:
        home = os.path.join(cache, "flink", "home")
    home = os.path.realpath(home)
    version = _flink_dist_version(home) if os.path.isdir(home) else None
    if version is None:
        raise ConfigError(f"flink_home: no Flink distribution at {home} (no lib/flink-dist-*.jar)."
                          " Run `bash scripts/setup.sh --flink` to provision one under "
                          f"{cache or 'cache_dir'}, or set flink_home (--flink-home) to your "
                          "Flink's folder (the one holding bin/ and lib/)")
    if wanted and not (version == wanted or version.startswith(wanted + ".")):
        raise ConfigError(f"flink_version = {wanted!r}, but {home} holds Flink {version}; "
                          "fix one of flink_version / flink_home")
    return home, version


def resolve_job_server_jar(cfg: dict, flink_version: str | None = None) -> str:
    """The Beam Flink job-server jar: ``job_server_jar``, else the one provisioned in
    ``cache_dir/jars``. Never downloaded: Beam would otherwise fetch it at run time."""
    jar = cfg.get("job_server_jar")
    cache = cfg.get("cache_dir") or ""
    if not jar:
        jar = os.path.join(cache, "jars", "flink-job-server.jar")
    if not os.path.isfile(jar):
        raise ConfigError(f"job_server_jar: {jar} does not exist. Run `bash scripts/setup.sh "
                          "--flink`, or set job_server_jar (--job-server-jar) to a "
                          "beam-runners-flink-<flink minor>-job-server-<beam>.jar you have")
    jar = os.path.realpath(jar)
    m = re.search(r"beam-runners-flink-(\d+\.\d+)-job-server", os.path.basename(jar))
    if flink_version and m and not flink_version.startswith(m.group(1)):
        raise ConfigError(f"job_server_jar {os.path.basename(jar)} is built for Flink "
                          f"{m.group(1)}, but the cluster runs Flink {flink_version}; use the "
                          f"beam-runners-flink-{'.'.join(flink_version.split('.')[:2])}-job-server "
                          "jar")
    return jar


# --- secrets -----------------------------------------------------------------------------------

def split_secrets(args: list[str]) -> tuple[list[str], list[str]]:
    """(args safe to write down, warnings). Secret flags (``--azure-sas-token X``, as
    :func:`runtime.redact.split_secret_flags` knows them) are dropped, so the job falls back to
    the environment (sbatch passes the submitter's); a credential inside another argument (a SAS
    query in a URL, a connection string) is masked."""
    kept, secrets = split_secret_flags(args)
    warnings = [f"--{name.replace('_', '-')}: a secret, not written into the job; export it in "
                "the environment instead (e.g. AZURE_STORAGE_SAS_TOKEN, AZURE_STORAGE_KEY, "
                "AZURE_STORAGE_CONNECTION_STRING): the job inherits the environment it is "
                "submitted from" for name in secrets]
    safe: list[str] = []
    for i, arg in enumerate(kept):
        clean = redact(arg)
        if clean != arg:
            warnings.append(f"argument {i + 1} ({clean}) holds a credential; it was masked in "
                            "the job. Give the credential through the environment instead")
        safe.append(clean)
    return safe, warnings
