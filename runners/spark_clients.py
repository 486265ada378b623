"""The clients ``python -m runners.spark`` follows a submitted job with: Livy's batch REST API
(HDInsight), a Synapse Spark pool's (Livy's, with an Azure AD token) and YARN's ResourceManager
(the applications ``spark-submit --master yarn`` starts). Each has ``state(id)`` in Livy's
names (:data:`LIVY_TERMINAL`), ``info``, ``log(id, lines)``, ``cancel(id)`` and
``check_credentials()``; :func:`runners.spark.client_for` picks one for a config.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time

from runtime import errors
from runtime.redact import redact
from runners import config as rconfig

LIVY_TERMINAL = {"success", "dead", "killed", "error"}
LIVY_OK = "success"


class SparkError(errors.RunError):
    """The cluster refused or failed a request (exit status 1)."""


class LivyClient:
    """Livy's batch REST API (HDInsight's gateway, or any Livy 0.7+)."""

    runner = "livy"
    noun = "batch"

    def __init__(self, base_url: str, *, auth=None, timeout: float = 60.0):
        import requests

        self.url = base_url.rstrip("/")
        self._session = requests.Session()
        self._session.headers["X-Requested-By"] = "tokenbeam"  # Livy's CSRF protection
        self._auth = auth
        self._timeout = timeout

    def _headers(self) -> dict:
        return {}

    def request(self, method: str, path: str, *, ok=(200, 201), **kwargs) -> dict:
        import requests

        url = f"{self.url}{path}"
        try:
            response = self._session.request(method, url, auth=self._auth, timeout=self._timeout,
                                             headers=self._headers(), **kwargs)
        except requests.RequestException as exc:
            raise SparkError(f"{url}: no answer ({type(exc).__name__}: "
                             f"{redact(str(exc))[:300]}); check the address in the config and "
                             "that this machine can reach it") from None
        if response.status_code in (401, 403):
            raise SparkError(f"{method} {url}: refused ({response.status_code}): "
                             f"{redact(response.text)[:300]}; {self.auth_hint()}")
        if response.status_code == 404:
            raise BatchNotFound(f"{method} {url}: not found (404): {redact(response.text)[:200]}")
        if response.status_code not in ok:
            raise SparkError(f"{method} {url}: HTTP {response.status_code}: "
                             f"{redact(response.text)[:500]}")
        return response.json() if response.content else {}

    def auth_hint(self) -> str:
        return "check the cluster login in the environment variables the config names"

    def check_credentials(self) -> None:
        """Nothing to fetch for basic auth (the cluster checks it on the first request)."""

    def submit(self, body: dict) -> str:
        return str(self.request("POST", "/batches", json=body)["id"])

    def state(self, batch: str) -> str:
        return self.request("GET", f"/batches/{batch}/state")["state"]

    def info(self, batch: str) -> dict:
        return self.request("GET", f"/batches/{batch}")

    def log(self, batch: str, lines: int) -> list[str]:
        total = self.request("GET", f"/batches/{batch}/log", params={"from": 0, "size": 0})
        start = max(0, int(total.get("total", 0)) - lines)
        return self.request("GET", f"/batches/{batch}/log",
                            params={"from": start, "size": lines}).get("log", [])

    def cancel(self, batch: str) -> None:
        self.request("DELETE", f"/batches/{batch}")


def batches_url(cfg: dict) -> str:
    """The base URL under which ``/batches`` lives, for a Livy or Synapse config."""
    if cfg["kind"] == "spark_synapse":
        return (f"{cfg['workspace'].rstrip('/')}/livyApi/versions/{cfg['livy_api_version']}"
                f"/sparkPools/{cfg['spark_pool']}")
    return cfg["livy_url"].rstrip("/")


class SynapseClient(LivyClient):
    """A Synapse Spark pool's batch API: Livy's, under the workspace's ``livyApi`` path, with
    a bearer token from ``DefaultAzureCredential``."""

    runner = "synapse"

    def __init__(self, cfg: dict):
        super().__init__(batches_url(cfg), timeout=cfg["request_timeout"])
        self._scope = cfg["token_scope"]
        self._client_id = cfg["managed_identity_client_id"]
        self._credential = None
        self._token = None

    def _headers(self) -> dict:
        if self._token is None or self._token.expires_on - time.time() < 300:
            self._token = self._get_token()
        return {"Authorization": f"Bearer {self._token.token}"}

    def _get_token(self):
        from azure.core.exceptions import ClientAuthenticationError
        from azure.identity import DefaultAzureCredential

        if self._credential is None:
            kwargs = {"process_timeout": 10, "retry_total": 1}
            if self._client_id:
                kwargs["managed_identity_client_id"] = self._client_id
            self._credential = DefaultAzureCredential(**kwargs)
        try:
            return self._credential.get_token(self._scope)
        except ClientAuthenticationError as exc:
            tried = " ".join(str(exc).split())[:900]
            raise SparkError(f"no Azure credential for the Synapse workspace {self.url.split('/livyApi')[0]} "
                             f"(scope {self._scope}): {tried}. Sign in (az login), or set "
                             "AZURE_CLIENT_ID/AZURE_TENANT_ID/AZURE_CLIENT_SECRET, or run where a "
                             "managed identity is assigned; the identity needs the Synapse "
                             "role 'Synapse Compute Operator' on the pool") from None

    def check_credentials(self) -> None:
        self._headers()

    def auth_hint(self) -> str:
        return ("the identity DefaultAzureCredential found has no Synapse role on this pool "
                "(it needs 'Synapse Compute Operator' or higher)")

    def state(self, batch: str) -> str:
        return self.info(batch)["state"]

    def log(self, batch: str, lines: int) -> list[str]:
        return list(self.info(batch).get("log") or [])[-lines:]


class BatchNotFound(SparkError):
    """The cluster does not know this batch (never submitted, or forgotten since it ended)."""


# --- YARN: applications that spark-submit --master yarn started ----------------------------------

YARN_APP_ID = re.compile(r"\bSubmitted application (application_\d+_\d+)")  # spark-submit's log


def _hadoop_properties(conf_dir: str, name: str = "yarn-site.xml") -> dict[str, str]:
    """The ``name``/``value`` pairs of a Hadoop configuration file, ``${other}`` expanded."""
    import xml.etree.ElementTree as ET

    path = os.path.join(conf_dir, name)
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError) as exc:
        raise rconfig.ConfigError(f"hadoop_conf_dir: cannot read {path} ({exc}); point "
                                  "hadoop_conf_dir at the cluster's Hadoop configuration") from None
    props = {}
    for prop in root.iter("property"):
        key, value = prop.findtext("name"), prop.findtext("value")
        if key and value is not None:
            props[key.strip()] = value.strip()
    pattern = re.compile(r"\$\{([^}]+)\}")
    for _ in range(5):  # Hadoop expands nested references too (a few levels suffice)
        props = {k: pattern.sub(lambda m: props.get(m.group(1), m.group(0)), v)
                 for k, v in props.items()}
    return props


def resourcemanager_urls(conf_dir: str) -> list[str]:
    """The ResourceManager web addresses ``yarn-site.xml`` names (every RM of an HA pair, as
    HDInsight's two head nodes; the standby redirects to the active one)."""
    props = _hadoop_properties(conf_dir)
    https = props.get("yarn.http.policy", "HTTP_ONLY").upper() == "HTTPS_ONLY"
    key, port = ("yarn.resourcemanager.webapp.https.address", 8090) if https else \
        ("yarn.resourcemanager.webapp.address", 8088)
    ids = [""]
    if props.get("yarn.resourcemanager.ha.enabled", "false").lower() == "true":
        ids = ["." + i.strip() for i in props.get("yarn.resourcemanager.ha.rm-ids", "").split(",")
               if i.strip()] or [""]
    urls = []
    for suffix in ids:
        address = props.get(key + suffix) or props.get(key)
        host = props.get("yarn.resourcemanager.hostname" + suffix) or props.get(
            "yarn.resourcemanager.hostname")
        if not address or "${" in address:
            address = f"{host}:{port}" if host else None
        if address:
            urls.append(f"{'https' if https else 'http'}://{address}")
    if not urls:
        raise rconfig.ConfigError(f"hadoop_conf_dir: {conf_dir}/yarn-site.xml names no "
                                  "ResourceManager (yarn.resourcemanager.webapp.address or "
                                  "yarn.resourcemanager.hostname)")
    return urls


class _NoRest(SparkError):
    """The ResourceManager's REST API is not there (a web proxy, a secured cluster, a server
    that answers its own 404 page): the ``yarn`` CLI is tried instead."""


def _livy_state(state: str, final: str) -> str:
    """A YARN application's state (and final status) as Livy names a batch's."""
    state, final = state.upper(), final.upper()
    if "KILLED" in (state, final):
        return "killed"
    if state == "FAILED" or (state == "FINISHED" and final != "SUCCEEDED"):
        return "dead"
    if state == "FINISHED":
        return LIVY_OK
    return state.lower() or "unknown"


class YarnClient:
    """YARN's ResourceManager REST API (``/ws/v1/cluster/apps/{id}``) for the applications
    ``spark-submit --master yarn`` starts: the same ``state``/``log``/``cancel`` as
    :class:`LivyClient`, with YARN's states mapped to Livy's (FINISHED + SUCCEEDED: success;
    FAILED or FINISHED + FAILED: dead; KILLED: killed; ACCEPTED, RUNNING, ...: lowercased).
    Where the REST API does not answer as one (a secured cluster refuses its writes), the
    ``yarn`` CLI on PATH does the same (``yarn application -status|-kill``, ``yarn logs``)."""

    runner = "yarn"
    noun = "application"

    def __init__(self, cfg: dict, *, env: dict):
        """``env``: spark-submit's environment (its HADOOP_CONF_DIR names the cluster)."""
        import requests

        self.env = env
        self.urls = resourcemanager_urls(self.env["HADOOP_CONF_DIR"])
        self.url = self.urls[0]
        self._session = requests.Session()
        self._timeout = cfg["request_timeout"]

    def _cli(self, *args: str, ok_codes=(0,)) -> str:
        yarn = shutil.which("yarn", path=self.env.get("PATH"))
        if yarn is None:
            raise SparkError(f"{self.url}: the ResourceManager's REST API did not answer, and "
                             "there is no `yarn` command on PATH to ask instead; run this on a "
                             "machine with the Hadoop client (an HDInsight head node)")
        proc = subprocess.run([yarn, *args], capture_output=True, text=True, env=self.env,
                              timeout=max(60, self._timeout * 2))
        out = proc.stdout + proc.stderr
        if re.search(r"doesn't exist|could not be found|not found", out) and proc.returncode:
            raise BatchNotFound(f"yarn {' '.join(args)}: {redact(out.strip().splitlines()[-1])}")
        if proc.returncode not in ok_codes:
            tail = " | ".join(out.strip().splitlines()[-3:])
            raise SparkError(f"yarn {' '.join(args)} exited {proc.returncode}: {redact(tail)[:500]}")
        return proc.stdout

    def request(self, method: str, url_or_path: str, *, ok=(200, 202), text=False, **kwargs):
        import requests

        urls = [url_or_path] if "://" in url_or_path else [u + url_or_path for u in self.urls]
        failure = None
        for url in urls:
            try:
                response = self._session.request(method, url, timeout=self._timeout, **kwargs)
            except requests.RequestException as exc:
                failure = (f"{url}: no answer ({type(exc).__name__}: {redact(str(exc))[:300]}); "
                           "check hadoop_conf_dir's yarn-site.xml and that this machine reaches "
                           "the ResourceManager")
                continue  # an HA pair: the other ResourceManager may be the one up
            if response.status_code == 404:
                if "json" not in response.headers.get("Content-Type", ""):
                    raise _NoRest(f"{method} {url}: 404 without YARN's JSON")
                raise BatchNotFound(f"{method} {url}: not found (404): "
                                    f"{redact(response.text)[:200]}")
            if response.status_code in (401, 403):
                raise _NoRest(f"{method} {url}: refused ({response.status_code}): "
                              f"{redact(response.text)[:300]}")
            if response.status_code not in ok:
                raise SparkError(f"{method} {url}: HTTP {response.status_code}: "
                                 f"{redact(response.text)[:500]}")
            if "://" not in url_or_path:
                self.url = url[:-len(url_or_path)]  # the ResourceManager that answered
            return response.text if text else (response.json() if response.content else {})
        raise _NoRest(failure)

    def check_credentials(self) -> None:
        """Nothing to fetch: an unsecured ResourceManager answers anyone on its network."""

    def info(self, app: str) -> dict:
        return self.request("GET", f"/ws/v1/cluster/apps/{app}").get("app", {})

    def state(self, app: str) -> str:
        try:
            info = self.info(app)
            return _livy_state(info.get("state", ""), info.get("finalStatus", ""))
        except _NoRest:
            report = self._cli("application", "-status", app)
            state = re.search(r"^\s*State\s*:\s*(\w+)", report, re.M)
            final = re.search(r"^\s*Final-State\s*:\s*(\w+)", report, re.M)
            return _livy_state(state.group(1) if state else "", final.group(1) if final else "")

    def log(self, app: str, lines: int) -> list[str]:
        """The tail of the application master's ``stderr`` (in cluster mode, the Spark
        driver's log) from its NodeManager's REST API; where that fails, ``yarn logs`` (a
        finished application's aggregated logs)."""
        logs_url = self._am_logs_url(app)
        match = re.match(r"(https?://[^/]+)/node/containerlogs/([^/]+)", logs_url)
        if not match:
            raise SparkError(f"application {app}: YARN names no application master's log yet "
                             "(not started?); try again once it runs")
        node, container = match.groups()
        try:
            text = self.request("GET", f"{node}/ws/v1/node/containerlogs/{container}/stderr",
                                params={"size": -max(lines, 1) * 400}, text=True)
        except _NoRest:
            text = self._cli("logs", "-applicationId", app, "-containerId", container,
                             "-log_files", "stderr", "-size", str(-max(lines, 1) * 400))
        return text.splitlines()[-lines:]

    def _am_logs_url(self, app: str) -> str:
        """The application master container's log URL (``http://NODE/node/containerlogs/
        CONTAINER/USER``): the RM's ``amContainerLogs``, else the ``yarn`` CLI's report of the
        latest attempt's AM container."""
        try:
            return self.info(app).get("amContainerLogs") or ""
        except _NoRest:
            attempts = re.findall(r"\b(container_\w+)", self._cli("applicationattempt", "-list",
                                                                    app))
            if not attempts:
                return ""
            report = self._cli("container", "-status", attempts[-1])
            match = re.search(r"LOG-URL\s*:\s*(\S+)", report)
            return match.group(1) if match else ""

    def cancel(self, app: str) -> None:
        try:
            self.request("PUT", f"/ws/v1/cluster/apps/{app}/state", json={"state": "KILLED"})
        except _NoRest:
            self._cli("application", "-kill", app)
