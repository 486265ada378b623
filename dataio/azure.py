"""Azure Blob Storage and ADLS Gen2 for :mod:`dataio.fs`: URL forms, credentials, commit.

URL forms (all name the same blob; each resolves to one adlfs filesystem for the storage
account plus the path ``container/blob`` inside it):

    abfs://container/path                       account from --azure-account-name,
    az://container/path                         AZURE_STORAGE_ACCOUNT_NAME or the connection string
    abfss://container@account.dfs.core.windows.net/path     (also @account.blob..., and abfs/az)
    https://account.blob.core.windows.net/container/path[?SAS]  (also .dfs.)
    http://127.0.0.1:PORT/devstoreaccount1/container/path   path-style (Azurite, or any endpoint
                                                            named by a connection string)

Credentials, tried in this order for each (account, container) unless ``--azure-auth`` forces
one: SAS token (``--azure-sas-token``, the ``?query`` of an https URL — scoped to its container —,
``AZURE_STORAGE_SAS_TOKEN``), account key (``--azure-account-key``, ``AZURE_STORAGE_KEY`` /
``AZURE_STORAGE_ACCOUNT_KEY``), connection string (Beam's ``--azure_connection_string``,
``AZURE_STORAGE_CONNECTION_STRING``), then azure-identity's ``DefaultAzureCredential``
(environment service principal, workload/managed identity — Beam's
``--azure_managed_identity_client_id`` —, Azure CLI, ...).

Contract:

- :func:`configure_from_options` (driver) resolves a credential for every Azure path it is given
  and checks each one up front with one request, retries off and short timeouts; a method the
  service rejects is reported and the next one tried. With none left it raises
  :class:`AzureCredentialError` within seconds, listing every method tried and how to provide
  one. It returns an :class:`AzurePlan`: picklable, secret-free (method names, account names,
  endpoints), to hand to workers.
- Secrets never enter a pickled transform, Beam's pipeline options or a log: secret flags are
  taken out of argv by :func:`split_secret_flags` before Beam parses it; secrets given by flag or
  URL are put into this process's environment (``TOKENBEAM_AZURE_SECRETS``) so that worker
  processes forked or spawned from it (DirectRunner multi-processing, a local worker pool, sbatch
  with ``--export=ALL``) inherit them. A worker calls :func:`configure_worker` (``DoFn.setup``)
  or simply opens a path: resolution then happens lazily, from the plan and the environment,
  with no check. Cluster workers elsewhere get their secret the same way any Azure SDK does:
  environment variables set on the worker, or a managed identity.
- Every secret seen is registered with :func:`dataio.redact.register_secret`.
- :func:`replace` commits ``source`` to ``target``: a real rename on an ADLS Gen2 hierarchical
  namespace; otherwise a server-side copy waited on until it succeeded (or, when the credential
  is a SAS, staged blocks and one block-list commit, so that no copy source with ``sig=`` is
  ever stored on a blob), then the source deleted. Either way ``target`` is complete whenever
  it exists, and no secret is stored anywhere in the storage account. Writes go through adlfs
  block blobs (staged blocks of ``block_size`` bytes, committed at close), so memory per open
  file is bounded by the block size and an unfinished upload never shows as a blob.
- :func:`acquire_lease` locks an output for one run: a lock blob holding the holder's text,
  under a finite lease renewed from a daemon thread; a dead holder's lease expires by itself.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import os
import re
import threading
import uuid
from typing import Any, Iterable, Mapping, Sequence
from urllib.parse import parse_qsl, unquote, urlsplit

from dataio import redact as redactor

AZURE_PROTOCOLS = ("abfs", "abfss", "az")
METHODS = ("sas", "account-key", "connection-string", "default")
METHOD_TITLES = {
    "sas": "SAS token (--azure-sas-token, the ?query of an https URL, AZURE_STORAGE_SAS_TOKEN)",
    "account-key": "account key (--azure-account-key, AZURE_STORAGE_KEY or "
                   "AZURE_STORAGE_ACCOUNT_KEY)",
    "connection-string": "connection string (--azure_connection_string, "
                         "AZURE_STORAGE_CONNECTION_STRING)",
    "default": "DefaultAzureCredential (environment AZURE_TENANT_ID/AZURE_CLIENT_ID/"
               "AZURE_CLIENT_SECRET, workload or managed identity "
               "[--azure_managed_identity_client_id], Azure CLI `az login`)",
}
SECRETS_ENV = "TOKENBEAM_AZURE_SECRETS"
PLAN_ENV = "TOKENBEAM_AZURE_PLAN"
STORAGE_SCOPE = "https://storage.azure.com/.default"
DEV_ACCOUNT = "devstoreaccount1"
DEFAULT_BLOCK_SIZE = 16 * 2**20
# One request each, no retries: a wrong or missing credential must fail in seconds, not after
# the storage SDK's exponential back-off (over a minute).
PROBE_CLIENT_KWARGS = {"retry_total": 0, "connection_timeout": 5, "read_timeout": 15}
COPY_POLL_MAX_SECONDS = 5.0
COPY_TIMEOUT_SECONDS = 6 * 3600
# A commit under SAS stages the target's blocks from the source: server-side blocks of this
# size (Put Block From URL takes up to 4000 MiB; smaller ones keep each request short), a few
# requests in flight.
BLOCK_FROM_URL_BYTES = 100 * 2**20
STAGE_CONCURRENCY = 4

_HOST_RE = re.compile(r"^(?P<account>[a-z0-9]{3,24})\.(?P<kind>blob|dfs)\."
                      r"(?P<suffix>core\.windows\.net|core\.chinacloudapi\.cn|"
                      r"core\.usgovcloudapi\.net)$", re.I)
_SECRET_FLAGS = {"--azure-sas-token": "azure_sas_token", "--azure_sas_token": "azure_sas_token",
                 "--azure-account-key": "azure_account_key",
                 "--azure_account_key": "azure_account_key",
                 "--azure_connection_string": "azure_connection_string",
                 "--azure-connection-string": "azure_connection_string"}


class AzureCredentialError(PermissionError):
    """No credential method could access an Azure path (the message lists what was tried)."""


class AzurePathError(ValueError):
    """An Azure URL that cannot be resolved (e.g. no storage account named anywhere)."""


# ---------------------------------------------------------------------------------------------
# URLs


@dataclasses.dataclass(frozen=True)
class AzureLocation:
    """One Azure URL, parsed. ``account`` may be ``None`` for ``abfs://container/path`` until
    :func:`_with_account` fills in the default account."""

    form: str                 # "abfs" | "abfss" | "az" | "https" | "path-style"
    account: str | None
    container: str
    blob: str                 # path inside the container, no leading "/"
    endpoint: str | None      # blob service URL without trailing "/"
    sas: str | None = dataclasses.field(default=None, repr=False, compare=False)
    host: str | None = None   # the "@host" of abfs-style URLs, kept to print URLs back

    @property
    def inner(self) -> str:
        """The path as the adlfs filesystem names it."""
        return f"{self.container}/{self.blob}".rstrip("/") if self.blob else self.container

    @property
    def scope(self) -> str:
        return f"{self.account}/{self.container}"

    def url(self, inner: str | None = None) -> str:
        """This location's URL form for ``inner`` (default: its own path), without any SAS."""
        inner = (self.inner if inner is None else inner).lstrip("/")
        if self.form in AZURE_PROTOCOLS:
            if self.host:
                container, _, rest = inner.partition("/")
                return f"{self.form}://{container}@{self.host}/{rest}"
            return f"{self.form}://{inner}"
        return f"{self.endpoint}/{inner}"


def is_azure_url(path: str) -> bool:
    try:
        return parse(path) is not None
    except AzurePathError:
        return True


def parse(url: str) -> AzureLocation | None:
    """The :class:`AzureLocation` of ``url``, or ``None`` when it is not an Azure URL."""
    if "://" not in url:
        return None
    scheme = url.split("://", 1)[0].lower()
    parts = urlsplit(url)
    sas = _sas_of_query(url, parts.query)
    if scheme in AZURE_PROTOCOLS:
        netloc = parts.netloc
        host = None
        account = None
        if "@" in netloc:
            container, host = netloc.split("@", 1)
            match = _HOST_RE.match(host)
            if not match:
                raise AzurePathError(f"{redactor.redact(url)}: '{host}' is not an Azure storage "
                                     "host (expected ACCOUNT.dfs.core.windows.net or "
                                     "ACCOUNT.blob.core.windows.net)")
            account = match["account"].lower()
            endpoint = f"https://{account}.blob.{match['suffix']}"
        else:
            container, endpoint = netloc, None
        if not container:
            raise AzurePathError(f"{redactor.redact(url)}: no container named")
        return AzureLocation(form=scheme, account=account, container=container,
                             blob=unquote(parts.path).lstrip("/"), endpoint=endpoint, sas=sas,
                             host=host)
    if scheme not in ("http", "https"):
        return None
    match = _HOST_RE.match(parts.hostname or "")
    segments = unquote(parts.path).lstrip("/").split("/", 1)
    if match:
        account = match["account"].lower()
        container = segments[0]
        blob = segments[1] if len(segments) > 1 else ""
        if not container:
            raise AzurePathError(f"{redactor.redact(url)}: no container named")
        return AzureLocation(form="https", account=account, container=container, blob=blob,
                             endpoint=f"{scheme}://{parts.netloc}", sas=sas)
    # Path-style: http(s)://host[:port]/ACCOUNT/container/path (Azurite, private endpoints).
    account = segments[0]
    endpoint = f"{scheme}://{parts.netloc}/{account}"
    if account != DEV_ACCOUNT and endpoint.lower() not in _known_path_style_endpoints():
        return None
    rest = segments[1] if len(segments) > 1 else ""
    container, _, blob = rest.partition("/")
    if not container:
        raise AzurePathError(f"{redactor.redact(url)}: no container named")
    return AzureLocation(form="path-style", account=account, container=container, blob=blob,
                         endpoint=endpoint, sas=sas)


def _sas_of_query(url: str, query: str) -> str | None:
    if not query:
        return None
    names = {k for k, _ in parse_qsl(query, keep_blank_values=True)}
    if "sig" not in names:
        raise AzurePathError(f"{redactor.redact(url)}: only a SAS token may follow '?' in an "
                             "Azure URL")
    redactor.register_secret(query)
    redactor.register_secret(dict(parse_qsl(query)).get("sig"))
    return query


def absorb_sas(url: str) -> str:
    """``url`` without its SAS query; the SAS is remembered for the URL's container (and put in
    the environment for worker processes)."""
    loc = parse(url)
    if loc is None or not loc.sas:
        return url
    _remember_url_sas(_with_account(loc))
    return strip_sas(url)


def strip_sas(url: str) -> str:
    """``url`` without its query string when it is an Azure URL carrying a SAS."""
    loc = parse(url)
    if loc is None or not loc.sas:
        return url
    return url.split("?", 1)[0]


# ---------------------------------------------------------------------------------------------
# secrets (process-local) and the worker plan (picklable, secret-free)


@dataclasses.dataclass(frozen=True)
class AzurePlan:
    """How a worker re-resolves Azure credentials: no secret, safe to pickle and to print.

    ``chosen`` maps "account/container" scopes to the method that worked on the driver;
    secrets come from the worker's environment (``SECRETS_ENV`` and the standard
    ``AZURE_STORAGE_*`` variables) or from azure-identity.
    """

    order: tuple[str, ...] = METHODS
    chosen: tuple[tuple[str, str], ...] = ()
    endpoints: tuple[tuple[str, str], ...] = ()
    default_account: str | None = None
    managed_identity_client_id: str | None = None
    block_size: int = DEFAULT_BLOCK_SIZE
    secrets_env: str = SECRETS_ENV

    def apply(self) -> None:
        """Adopt this plan in the current process (a worker's ``DoFn.setup``)."""
        configure_worker(self)

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "AzurePlan":
        raw = json.loads(text)
        for key in ("order",):
            raw[key] = tuple(raw[key])
        for key in ("chosen", "endpoints"):
            raw[key] = tuple(tuple(pair) for pair in raw[key])
        return cls(**raw)


class _Secrets:
    """Secrets of this process. Refuses to be pickled so none can ride along in a transform."""

    def __init__(self):
        self.sas_by_scope: dict[str, str] = {}   # "acct/container", "acct" or "" -> SAS
        self.keys: dict[str, str] = {}           # account or "" -> key
        self.connection_string: str | None = None

    def __reduce__(self):
        raise TypeError("Azure secrets are process-local and must not be pickled")

    def to_env_json(self) -> str:
        return json.dumps({"sas": self.sas_by_scope, "keys": self.keys,
                           "connection_string": self.connection_string})

    def merge_env_json(self, text: str) -> None:
        raw = json.loads(text)
        for scope, sas in (raw.get("sas") or {}).items():
            self.sas_by_scope.setdefault(scope, sas)
        for account, key in (raw.get("keys") or {}).items():
            self.keys.setdefault(account, key)
        if raw.get("connection_string") and not self.connection_string:
            self.connection_string = raw["connection_string"]
        for value in [*self.sas_by_scope.values(), *self.keys.values(), self.connection_string]:
            redactor.register_secret(value)


_lock = threading.RLock()
_secrets = _Secrets()
_plan: AzurePlan | None = None
_resolved: dict[str, tuple[str, dict[str, Any]]] = {}   # scope -> (method, storage options)
_credentials: dict[str | None, tuple[Any, Any]] = {}    # client id -> (aio, sync) credential
_hns: dict[str, bool] = {}                                # account -> hierarchical namespace
_block_from_url: dict[str, bool] = {}                     # account -> has Put Block From URL


def reset() -> None:
    """Forget every credential and resolution of this process (tests; a new configuration)."""
    global _secrets, _plan
    with _lock:
        _secrets = _Secrets()
        _plan = None
        _resolved.clear()
        _credentials.clear()
        _hns.clear()
        _block_from_url.clear()
        os.environ.pop(PLAN_ENV, None)
        os.environ.pop(SECRETS_ENV, None)
    from dataio import fs as fsutil
    for protocol in AZURE_PROTOCOLS:
        fsutil.set_storage_options(protocol, {})


def _known_path_style_endpoints() -> set[str]:
    found = set()
    plan = _plan
    if plan:
        found.update(e.lower() for _, e in plan.endpoints)
    conn = _secrets.connection_string or os.environ.get("AZURE_STORAGE_CONNECTION_STRING")
    if conn:
        endpoint = parse_connection_string(conn).get("blobendpoint")
        if endpoint:
            found.add(endpoint.rstrip("/").lower())
    return found


def parse_connection_string(conn: str) -> dict[str, str]:
    """Fields of a connection string, keys lower-cased (values may be secrets)."""
    fields = {}
    for part in conn.split(";"):
        if "=" in part:
            key, value = part.split("=", 1)
            fields[key.strip().lower()] = value.strip()
    return fields


def _connection_string_account(conn: str) -> str | None:
    fields = parse_connection_string(conn)
    if fields.get("accountname"):
        return fields["accountname"]
    endpoint = fields.get("blobendpoint", "")
    match = _HOST_RE.match(urlsplit(endpoint).hostname or "")
    if match:
        return match["account"].lower()
    if endpoint:
        return urlsplit(endpoint).path.strip("/").split("/")[0] or None
    return None


def split_secret_flags(argv: Sequence[str]) -> tuple[list[str], dict[str, str]]:
    """``argv`` without the secret flags (``--azure-sas-token``, ``--azure-account-key``,
    ``--azure_connection_string``), and their values by option name. Call this before Beam
    parses argv: Beam serialises every pipeline option into the job it submits."""
    clean: list[str] = []
    secrets: dict[str, str] = {}
    items = list(argv)
    i = 0
    while i < len(items):
        arg = items[i]
        name, eq, value = arg.partition("=")
        if name in _SECRET_FLAGS:
            if not eq:
                if i + 1 >= len(items):
                    raise AzurePathError(f"{name} needs a value")
                value = items[i + 1]
                i += 1
            secrets[_SECRET_FLAGS[name]] = value
            redactor.register_secret(value)
        else:
            clean.append(arg)
        i += 1
    return clean, secrets


def prepare_argv(argv: Sequence[str]) -> tuple[list[str], dict[str, str]]:
    """The first thing a job's ``run(argv)`` calls: returns argv with no secret left in it, and
    the secret options. Secret flags are taken out (:func:`split_secret_flags`); an Azure URL
    carrying a SAS query (``--input=https://acct.blob.core.windows.net/c/x?sv=...&sig=...``)
    loses its query, which is remembered as that container's SAS. Everything downstream (Beam's
    options, path joins, metadata.json, job scripts) then only ever sees clean URLs."""
    clean, secrets = split_secret_flags(argv)
    out = []
    for arg in clean:
        head, eq, value = arg.partition("=") if arg.startswith("--") and "=" in arg \
            else ("", "", arg)
        if "://" in value and "?" in value:
            value = absorb_sas(value)
        out.append(head + eq + value)
    return out, secrets


# ---------------------------------------------------------------------------------------------
# configuration (driver and worker)


def _option(options: Mapping[str, Any], *names: str):
    for name in names:
        value = options.get(name)
        if value not in (None, ""):
            return value
    return None


def configure_from_options(options: Mapping[str, Any] | None = None, *,
                           paths: Iterable[str] = (), check: bool = True) -> AzurePlan | None:
    """Register Azure credentials for this process from parsed options and check them.

    ``options``: a mapping with any of ``azure_sas_token``, ``azure_account_key``,
    ``azure_account_name``, ``azure_connection_string``, ``azure_managed_identity_client_id``,
    ``blob_service_endpoint``, ``azure_auth`` (auto|sas|account-key|connection-string|default),
    ``azure_block_size_mb`` (e.g. ``vars(args)`` merged with :func:`split_secret_flags`' dict).
    ``paths``: every path the job reads or writes; non-Azure ones are ignored. Returns the plan
    for workers, or ``None`` when no Azure path is involved and no Azure option was given.
    """
    options = dict(options or {})
    azure_paths = [p for p in paths if p and is_azure_url(str(p))]
    given = [k for k in ("azure_sas_token", "azure_account_key", "azure_connection_string",
                         "azure_managed_identity_client_id", "azure_account_name",
                         "blob_service_endpoint") if options.get(k)]
    if not azure_paths and not given:
        return None
    forced = (_option(options, "azure_auth") or "auto").lower()
    if forced != "auto" and forced not in METHODS:
        raise AzurePathError(f"--azure-auth {forced}: choose auto, " + ", ".join(METHODS))
    block_mb = _option(options, "azure_block_size_mb")
    with _lock:
        if any(options.get(k) for k in ("azure_sas_token", "azure_account_key",
                                         "azure_connection_string", "azure_auth")):
            _resolved.clear()   # new credentials: earlier choices no longer hold
        sas = _option(options, "azure_sas_token")
        if sas:
            _secrets.sas_by_scope[""] = sas.lstrip("?")
        key = _option(options, "azure_account_key")
        account_name = _option(options, "azure_account_name")
        if key:
            _secrets.keys[account_name or ""] = key
        conn = _option(options, "azure_connection_string")
        if conn:
            _secrets.connection_string = conn
        for value in (sas, key, conn):
            redactor.register_secret(value)
        endpoints = []
        endpoint = _option(options, "blob_service_endpoint")
        default_account = account_name or os.environ.get("AZURE_STORAGE_ACCOUNT_NAME")
        if endpoint:
            endpoint = endpoint.rstrip("/")
            loc = parse(endpoint + "/x")
            account = (loc.account if loc else None) or default_account
            if account:
                endpoints.append((account, endpoint))
                default_account = default_account or account
        plan = AzurePlan(order=(forced,) if forced != "auto" else METHODS,
                         endpoints=tuple(endpoints), default_account=default_account,
                         managed_identity_client_id=_option(
                             options, "azure_managed_identity_client_id"),
                         block_size=int(float(block_mb) * 2**20) if block_mb
                         else DEFAULT_BLOCK_SIZE)
        _install_plan(plan)
        for path in azure_paths:
            loc = _with_account(parse(str(path)))
            if loc.sas:
                _remember_url_sas(loc)
            _resolve(loc, check=check)
        plan = dataclasses.replace(plan, chosen=tuple(sorted(
            (scope, method) for scope, (method, _) in _resolved.items())))
        _install_plan(plan)
        _export_to_environment()
        return plan


def configure_worker(plan: AzurePlan | None = None) -> None:
    """On a worker (``DoFn.setup``): adopt the driver's plan; secrets come from the
    environment. Cheap and idempotent; paths resolve lazily on first use."""
    with _lock:
        if plan is not None and _plan != plan:
            _install_plan(plan)
        _load_environment()


def _install_plan(plan: AzurePlan) -> None:
    global _plan
    _plan = plan
    os.environ[PLAN_ENV] = plan.to_json()


def _current_plan() -> AzurePlan:
    """The plan of this process: installed by configure, else the one a driver left in the
    environment (a worker), else the defaults. Adopting one also loads inherited secrets."""
    global _plan
    if _plan is None:
        text = os.environ.get(PLAN_ENV)
        _plan = AzurePlan.from_json(text) if text else AzurePlan(
            default_account=os.environ.get("AZURE_STORAGE_ACCOUNT_NAME"))
        _load_environment()
    return _plan


def _load_environment() -> None:
    text = os.environ.get(_plan.secrets_env if _plan else SECRETS_ENV)
    if text:
        _secrets.merge_env_json(text)


def _export_to_environment() -> None:
    """Secrets given by flag or URL go into this process's environment so that worker processes
    started from it inherit them (the value is never printed, pickled or written to a file)."""
    if _secrets.sas_by_scope or _secrets.keys or _secrets.connection_string:
        os.environ[_current_plan().secrets_env] = _secrets.to_env_json()


def _remember_url_sas(loc: AzureLocation) -> None:
    with _lock:
        if _secrets.sas_by_scope.get(loc.scope) != loc.sas:
            _secrets.sas_by_scope[loc.scope] = loc.sas
            _resolved.pop(loc.scope, None)
            _export_to_environment()


def _with_account(loc: AzureLocation) -> AzureLocation:
    if loc.account and loc.endpoint:
        return loc
    plan = _current_plan()
    account = loc.account or plan.default_account
    conn = _secrets.connection_string or os.environ.get("AZURE_STORAGE_CONNECTION_STRING")
    if not account and conn:
        account = _connection_string_account(conn)
    if not account:
        account = os.environ.get("AZURE_STORAGE_ACCOUNT_NAME")
    if not account:
        raise AzurePathError(
            f"{loc.url()}: no storage account named. Use "
            f"abfss://{loc.container}@ACCOUNT.dfs.core.windows.net/{loc.blob} or "
            f"https://ACCOUNT.blob.core.windows.net/{loc.inner}, or set --azure-account-name, "
            "AZURE_STORAGE_ACCOUNT_NAME or a connection string")
    endpoint = loc.endpoint or dict(plan.endpoints).get(account)
    if not endpoint and conn and _connection_string_account(conn) == account:
        endpoint = _connection_string_endpoint(conn)
    endpoint = endpoint or f"https://{account}.blob.core.windows.net"
    return dataclasses.replace(loc, account=account, endpoint=endpoint.rstrip("/"))


def _connection_string_endpoint(conn: str) -> str | None:
    fields = parse_connection_string(conn)
    if fields.get("blobendpoint"):
        return fields["blobendpoint"].rstrip("/")
    if fields.get("usedevelopmentstorage", "").lower() == "true":
        return f"http://127.0.0.1:10000/{DEV_ACCOUNT}"
    if fields.get("accountname"):
        protocol = fields.get("defaultendpointsprotocol", "https")
        suffix = fields.get("endpointsuffix", "core.windows.net")
        return f"{protocol}://{fields['accountname']}.blob.{suffix}"
    return None


# ---------------------------------------------------------------------------------------------
# resolution: candidates in order, storage options, the up-front check


def _candidate_secret(loc: AzureLocation, method: str) -> str | None:
    """The secret ``method`` would use for ``loc`` (None: this method is not provided)."""
    if method == "sas":
        for scope in (loc.scope, loc.account, ""):
            if scope in _secrets.sas_by_scope:
                return _secrets.sas_by_scope[scope]
        env = os.environ.get("AZURE_STORAGE_SAS_TOKEN")
        return env.lstrip("?") if env else None
    if method == "account-key":
        if loc.account in _secrets.keys:
            return _secrets.keys[loc.account]
        if "" in _secrets.keys:
            return _secrets.keys[""]
        env = os.environ.get("AZURE_STORAGE_KEY") or os.environ.get("AZURE_STORAGE_ACCOUNT_KEY")
        env_account = os.environ.get("AZURE_STORAGE_ACCOUNT_NAME") or os.environ.get(
            "AZURE_STORAGE_ACCOUNT")
        if env and (not env_account or env_account == loc.account):
            return env
        return None
    if method == "connection-string":
        conn = _secrets.connection_string or os.environ.get("AZURE_STORAGE_CONNECTION_STRING")
        if conn and _connection_string_account(conn) in (None, loc.account):
            return conn
        return None
    return "default"


def _storage_options(loc: AzureLocation, method: str, secret: str) -> dict[str, Any]:
    # SAS and key go through a connection string: it is the one adlfs input that takes an
    # explicit endpoint, http included (adlfs builds https://{account_host} otherwise).
    block = {"blocksize": _current_plan().block_size}
    if method == "sas":
        return {"connection_string": f"BlobEndpoint={loc.endpoint};"
                                     f"SharedAccessSignature={secret}", **block}
    if method == "account-key":
        protocol = urlsplit(loc.endpoint).scheme
        return {"connection_string": f"DefaultEndpointsProtocol={protocol};AccountName="
                                     f"{loc.account};AccountKey={secret};"
                                     f"BlobEndpoint={loc.endpoint};", **block}
    if method == "connection-string":
        return {"connection_string": secret, **block}
    aio_credential, _ = _default_credential()
    options = {"account_name": loc.account, "credential": aio_credential, **block}
    host = loc.endpoint.split("://", 1)[1]
    if host != f"{loc.account}.blob.core.windows.net":
        options["account_host"] = host
    return options


def _default_credential(*, probe: bool = False):
    """(aio, sync) DefaultAzureCredential of this process; with ``probe``, a sync one for the
    up-front check whose token requests are retried at most once, immediately (the default
    managed-identity retries back off for about 5 s where no identity endpoint answers)."""
    from azure.identity import DefaultAzureCredential

    client_id = _current_plan().managed_identity_client_id
    kwargs = {"process_timeout": 10}
    if client_id:
        kwargs["managed_identity_client_id"] = client_id
    if probe:
        return DefaultAzureCredential(retry_total=1, **kwargs)
    with _lock:
        if client_id not in _credentials:
            from azure.identity.aio import DefaultAzureCredential as AioDefaultAzureCredential
            _credentials[client_id] = (AioDefaultAzureCredential(**kwargs),
                                       DefaultAzureCredential(**kwargs))
        return _credentials[client_id]


def _resolve(loc: AzureLocation, *, check: bool) -> dict[str, Any]:
    """Storage options for ``loc``'s scope, resolving (and with ``check``, probing) once."""
    with _lock:
        if loc.scope in _resolved:
            return _resolved[loc.scope][1]
        plan = _current_plan()
        chosen = dict(plan.chosen).get(loc.scope)
        order = (chosen,) if chosen else plan.order
        tried: list[tuple[str, str]] = []
        for method in order:
            secret = _candidate_secret(loc, method)
            if secret is None:
                tried.append((method, "not provided"))
                continue
            options = _storage_options(loc, method, secret)
            if check:
                problem = _probe(loc, method, options)
                if problem is not None:
                    tried.append((method, problem))
                    continue
            _resolved[loc.scope] = (method, options)
            _register_default_protocol_options(loc, options)
            return options
        raise AzureCredentialError(_failure_message(loc, tried))


def _register_default_protocol_options(loc: AzureLocation, options: dict[str, Any]) -> None:
    # Plain fsspec calls (fsspec.open("abfs://...", **fs.storage_options("abfs"))) get the
    # default account's options; dataio.fs itself always resolves per account.
    if loc.account == _current_plan().default_account or len(_resolved) == 1:
        from dataio import fs as fsutil
        for protocol in AZURE_PROTOCOLS:
            fsutil.set_storage_options(protocol, options)


def _probe(loc: AzureLocation, method: str, options: dict[str, Any]) -> str | None:
    """One request with ``method``'s credential: None if it authenticates, else the reason.
    Raises :class:`AzureCredentialError` when the endpoint cannot be reached at all (no
    credential would help)."""
    from azure.core.exceptions import (ClientAuthenticationError, HttpResponseError,
                                       ResourceNotFoundError, ServiceRequestError)
    from azure.storage.blob import BlobServiceClient

    try:
        if method == "default":
            credential = _default_credential(probe=True)
            quiet = logging.getLogger("azure.identity")
            level = quiet.level
            quiet.setLevel(logging.ERROR)   # its warning repeats what our message says
            try:
                credential.get_token(STORAGE_SCOPE)
            except ClientAuthenticationError as error:
                return _first_lines(str(error), 12)
            finally:
                quiet.setLevel(level)
            service = BlobServiceClient(account_url=loc.endpoint, credential=credential,
                                        **PROBE_CLIENT_KWARGS)
        else:
            service = BlobServiceClient.from_connection_string(options["connection_string"],
                                                               **PROBE_CLIENT_KWARGS)
        container = service.get_container_client(loc.container)
        prefix = re.split(r"[*?\[]", loc.blob, maxsplit=1)[0]
        try:
            next(iter(container.list_blobs(name_starts_with=prefix or None,
                                           results_per_page=1).by_page()), None)
            return None
        except ResourceNotFoundError:
            return None   # the container does not exist yet: the credential was accepted
        except HttpResponseError as error:
            if error.status_code != 403 or "PermissionMismatch" not in str(error.error_code) \
                    and "ResourceTypeMismatch" not in str(error.error_code):
                raise
        # Authenticated but not allowed to list (e.g. a read-only or write-only SAS): a HEAD
        # on the path itself tells an accepted credential (200/404) from a rejected one.
        try:
            container.get_blob_client(prefix or "_").get_blob_properties()
        except ResourceNotFoundError:
            pass
        except HttpResponseError as error:
            if error.status_code == 403 and "PermissionMismatch" in str(error.error_code):
                return None   # accepted; what it may do is checked by the operation itself
            raise
        return None
    except ServiceRequestError as error:
        raise AzureCredentialError(
            f"cannot reach Azure Blob Storage at {loc.endpoint} for "
            f"{redactor.redact(loc.url())}: {_first_lines(redactor.redact(str(error)), 2)}. "
            "Check the account name, endpoint and network.") from None
    except HttpResponseError as error:
        code = error.error_code or error.status_code
        return f"rejected by the service ({code}): " + \
            _first_lines(redactor.redact(str(error.reason or error.message)), 1)
    except ValueError as error:   # malformed connection string or SAS
        return "unusable: " + _first_lines(redactor.redact(str(error)), 1)


def _first_lines(text: str, n: int) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    out = " | ".join(line.strip() for line in lines[:n])
    return redactor.redact(out + (" ..." if len(lines) > n else ""))


def _failure_message(loc: AzureLocation, tried: list[tuple[str, str]]) -> str:
    lines = [f"No working Azure credential for {redactor.redact(loc.url())} "
             f"(account '{loc.account}', container '{loc.container}'). Tried, in order:"]
    for i, (method, outcome) in enumerate(tried, 1):
        lines.append(f"  {i}. {METHOD_TITLES[method]}: {redactor.redact(outcome)}")
    lines.append(
        "Provide one: --azure-sas-token TOKEN or export AZURE_STORAGE_SAS_TOKEN; "
        "export AZURE_STORAGE_KEY; --azure_connection_string or export "
        "AZURE_STORAGE_CONNECTION_STRING; or sign in for DefaultAzureCredential (`az login`, "
        "a managed identity with --azure_managed_identity_client_id, or AZURE_TENANT_ID/"
        "AZURE_CLIENT_ID/AZURE_CLIENT_SECRET). --azure-auth METHOD tries only that method.")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# filesystem access (called by dataio.fs)


def filesystem_and_path(url: str):
    """(adlfs filesystem for the URL's account and credential, ``container/blob``)."""
    import fsspec

    loc, options = _location_and_options(url)
    return fsspec.filesystem("abfs", **options), loc.inner


def _location_and_options(url: str):
    """(the parsed location with its account, the adlfs options of its credential)."""
    loc = parse(url)
    if loc is None:
        raise AzurePathError(f"{redactor.redact(url)} is not an Azure URL")
    with _lock:
        loc = _with_account(loc)
        if loc.sas:
            _remember_url_sas(loc)
        # Scopes the driver checked are trusted (workers resolve them without a request);
        # any other scope is checked here, so a library call fails as fast as the CLI.
        return loc, _resolve(loc, check=loc.scope not in dict(_current_plan().chosen))


def url_like(pattern: str, inner: str) -> str:
    """The URL, in ``pattern``'s form (scheme, account host, endpoint), of ``inner``."""
    return parse(pattern).url(inner)


def method_for(url: str) -> str | None:
    """The credential method in use for ``url``'s scope (None until resolved)."""
    loc = parse(url)
    if loc is None:
        return None
    loc = _with_account(loc)
    entry = _resolved.get(loc.scope)
    return entry[0] if entry else None


# ---------------------------------------------------------------------------------------------
# commit


def replace(fs, source: str, target: str) -> None:
    """Move ``source`` to ``target`` (both ``container/blob`` on ``fs``), replacing it.

    ADLS Gen2 with a hierarchical namespace: one atomic rename. Flat namespace: the content is
    committed under ``target`` in one request at the end (a server-side copy waited on until
    it succeeded, or a block list), then the source deleted; ``target`` only ever shows the
    previous or the complete new content.

    No secret may be stored in the account: a Copy Blob keeps its source URL in the target's
    ``x-ms-copy-source`` property for the blob's lifetime, so a copy is used only when the
    source URL carries no query (account key, connection string with a key, Entra ID). With a
    SAS, blocks are staged under ``target`` (Put Block From URL: the SAS travels in one
    request's header and is kept nowhere; where the service lacks that call, e.g. Azurite, the
    bytes are streamed through in bounded blocks) and the block list committed.
    """
    from fsspec.asyn import sync

    if _hierarchical_namespace(fs) and _rename_on_dfs(fs, source, target):
        fs.invalidate_cache()
        return
    sync(fs.loop, _commit_copy, fs, source, target)
    fs.rm_file(source)
    fs.invalidate_cache()


async def _commit_copy(fs, source: str, target: str) -> None:
    src_container, src_blob, _ = fs.split_path(source)
    dst_container, dst_blob, _ = fs.split_path(target)
    async with fs.service_client.get_blob_client(src_container, src_blob) as source_client, \
            fs.service_client.get_blob_client(dst_container, dst_blob) as target_client:
        if urlsplit(source_client.url).query:
            await _commit_by_blocks(source_client, target_client, source, target)
        else:
            await _copy_and_wait(source_client, target_client, source, target)


async def _copy_and_wait(source_client, target_client, source: str, target: str) -> None:
    from azure.core.exceptions import ResourceNotFoundError

    try:
        result = await target_client.start_copy_from_url(source_client.url)
    except ResourceNotFoundError as error:
        raise FileNotFoundError(f"{source}: no such blob to commit") from error
    status = result.get("copy_status")
    delay, waited = 0.05, 0.0
    while status == "pending":
        if waited > COPY_TIMEOUT_SECONDS:
            await target_client.abort_copy(result["copy_id"])
            raise TimeoutError(f"server-side copy {source} -> {target} still pending after "
                               f"{waited:.0f} s; aborted")
        await asyncio.sleep(delay)
        waited += delay
        delay = min(delay * 2, COPY_POLL_MAX_SECONDS)
        status = (await target_client.get_blob_properties()).copy.status
    if status != "success":
        raise OSError(f"server-side copy {source} -> {target} ended with status {status}")


async def _commit_by_blocks(source_client, target_client, source: str, target: str) -> None:
    """Stage ``source``'s bytes as blocks of ``target`` and commit the block list: ``target``
    appears (or changes) only at the commit, complete. Blocks left by a killed attempt stay
    uncommitted (invisible, discarded by the service) and a rerun's commit names only its own."""
    from azure.core import MatchConditions
    from azure.core.exceptions import HttpResponseError, ResourceNotFoundError

    try:
        props = await source_client.get_blob_properties()
    except ResourceNotFoundError as error:
        raise FileNotFoundError(f"{source}: no such blob to commit") from error
    # Fixed-width ids (the service wants every block id of a blob the same length), unique per
    # attempt so that blocks staged by an earlier, killed attempt are never committed.
    attempt = uuid.uuid4().hex
    account = source_client.account_name
    server_side = _block_from_url.get(account, True)
    if server_side:
        try:
            ids = await _stage_blocks(props.size, BLOCK_FROM_URL_BYTES, attempt,
                                      lambda block_id, offset, length:
                                      target_client.stage_block_from_url(
                                          block_id, source_client.url, source_offset=offset,
                                          source_length=length))
        except HttpResponseError as error:
            if error.status_code != 501:   # 501: this service has no Put Block From URL
                raise
            _block_from_url[account] = server_side = False
    if not server_side:
        async def stream(block_id, offset, length):
            download = await source_client.download_blob(
                offset, length, etag=props.etag, match_condition=MatchConditions.IfNotModified)
            await target_client.stage_block(block_id, await download.readall())

        ids = await _stage_blocks(props.size, _current_plan().block_size, attempt, stream)
    await target_client.commit_block_list(ids, content_settings=props.content_settings,
                                          metadata=props.metadata or None)


async def _stage_blocks(size: int, block_bytes: int, attempt: str, stage) -> list[str]:
    """Call ``stage(block_id, offset, length)`` for every block of a ``size``-byte blob, at
    most ``STAGE_CONCURRENCY`` at once (memory: that many blocks when streaming)."""
    spans = [(f"{attempt}{i:08d}", offset, min(block_bytes, size - offset))
             for i, offset in enumerate(range(0, size, block_bytes))]
    gate = asyncio.Semaphore(STAGE_CONCURRENCY)

    async def one(span):
        async with gate:
            await stage(*span)

    tasks = [asyncio.ensure_future(one(span)) for span in spans]
    try:
        await asyncio.gather(*tasks)
    except BaseException:
        for task in tasks:   # the first failure decides; the rest must not run on unobserved
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
    return [block_id for block_id, _, _ in spans]


def _hierarchical_namespace(fs) -> bool:
    account = getattr(fs, "account_name", None) or fs.service_client.account_name
    if account in _hns:
        return _hns[account]
    from fsspec.asyn import sync

    async def query():
        return (await fs.service_client.get_account_information()).get("is_hns_enabled")

    try:
        enabled = bool(sync(fs.loop, query))
    except Exception:   # a container-scoped SAS may not read account information: assume flat
        enabled = False
    _hns[account] = enabled
    return enabled


def _rename_on_dfs(fs, source: str, target: str) -> bool:
    """Rename through the Data Lake (dfs) endpoint; False when that client is unavailable."""
    try:
        from azure.storage.filedatalake import DataLakeServiceClient
    except ImportError:
        return False
    options = fs.storage_options
    src_container, src_path, _ = fs.split_path(source)
    dst_container, dst_path, _ = fs.split_path(target)
    if options.get("connection_string"):
        service = DataLakeServiceClient.from_connection_string(options["connection_string"])
    else:
        _, credential = _default_credential()
        account_url = fs.account_url.replace(".blob.", ".dfs.")
        service = DataLakeServiceClient(account_url=account_url, credential=credential)
    with service:
        client = service.get_file_client(src_container, src_path)
        client.rename_file(f"{dst_container}/{dst_path}")
    return True


# ---------------------------------------------------------------------------------------------
# output lease: one run at a time per output folder


# Lease requests: a few quick retries, short timeouts, so a renewal (every duration/3 s) never
# waits out the lease it is meant to keep.
LEASE_CLIENT_KWARGS = {"retry_total": 2, "connection_timeout": 5, "read_timeout": 10}
LEASE_MIN_SECONDS, LEASE_MAX_SECONDS = 15, 60   # the service's bounds for a finite lease
_HOLDER_SHOWN_CHARS = 400


class LeaseHeldError(RuntimeError):
    """Another process holds the lease on a lock blob; ``holder`` is the text it stored."""

    def __init__(self, url: str, holder: str):
        self.url, self.holder = url, holder
        super().__init__(
            f"{url} is locked by another run: {holder or '(holder not recorded)'}. "
            "Wait for that run to finish or stop it, then rerun the same command; if it died, "
            f"its lease expires by itself within {LEASE_MAX_SECONDS} s of its last renewal.")


class LeaseLostError(RuntimeError):
    """The lease of a :class:`BlobLease` could not be kept (expired and taken, or deleted)."""


class BlobLease:
    """A held lease on a lock blob, renewed from a daemon thread every ``duration_s / 3`` s.

    Made by :func:`acquire_lease`. :meth:`release` (also on leaving a ``with`` block) stops
    renewing and deletes the blob under the lease; it is idempotent. ``lost`` is ``None`` while
    the lease is kept, else why it was lost; :meth:`check` raises :class:`LeaseLostError` then.
    """

    def __init__(self, *, url: str, client, lease, duration_s: int):
        self.url = url
        self.duration_s = duration_s
        self.lost: str | None = None
        self.stale: str | None = None   # a dead holder's text, when this lease was taken over
        self._client = client
        self._lease = lease
        self._stop = threading.Event()
        self._released = False
        self._guard = threading.Lock()
        self._thread = threading.Thread(target=self._keep, name="tokenbeam-lease-renewal",
                                        daemon=True)
        self._thread.start()

    @property
    def lease_id(self) -> str:
        return self._lease.id

    def _keep(self) -> None:
        from azure.core.exceptions import HttpResponseError

        while not self._stop.wait(self.duration_s / 3):
            try:
                self._lease.renew()
            except HttpResponseError as error:
                if error.status_code in (404, 409, 412):   # deleted, or another's lease now
                    self.lost = (f"lease on {self.url} lost: "
                                 f"{error.error_code or error.status_code}")
                    logging.getLogger(__name__).warning("%s", self.lost)
                    return
                # anything else is transient: two more tries before the lease can expire
            except Exception:   # network trouble: the same
                pass

    def check(self) -> None:
        """Raise :class:`LeaseLostError` when the lease could not be kept."""
        if self.lost:
            raise LeaseLostError(f"{self.lost}; another run may be writing the same output. "
                                 "Rerun the same command once it has finished.")

    def release(self) -> None:
        """Stop renewing, delete the lock blob under the lease (which ends it). Idempotent; never
        deletes a blob whose lease someone else took meanwhile."""
        from azure.core.exceptions import HttpResponseError, ResourceNotFoundError

        with self._guard:
            if self._released:
                return
            self._released = True
        self._stop.set()
        self._thread.join(timeout=LEASE_CLIENT_KWARGS["read_timeout"] * 3)
        try:
            self._client.delete_blob(lease=self._lease)
        except ResourceNotFoundError:
            pass
        except HttpResponseError as error:
            if error.status_code not in (409, 412):
                raise
            logging.getLogger(__name__).warning(
                "lease on %s was no longer ours (%s); left the lock blob to its holder",
                self.url, error.error_code or error.status_code)
        finally:
            self._client.close()

    def __enter__(self) -> "BlobLease":
        return self

    def __exit__(self, *exc) -> None:
        self.release()


def acquire_lease(url: str, *, holder: bytes, duration_s: int = 60,
                  is_stale=None) -> BlobLease:
    """Lock ``url`` (a blob; created if absent) for this process with a finite blob lease.

    The blob's content becomes ``holder`` (a short text naming host, PID, start time), written
    under the lease; the lease is renewed every ``duration_s / 3`` s from a daemon thread, so
    when this process dies the service itself frees the lock within ``duration_s`` s. Raises
    :class:`LeaseHeldError` with the current holder's text when another process holds it, unless
    ``is_stale(text)`` says that holder is provably dead: then its lease is broken, on condition
    that the blob is unchanged since its text was read (so a live run that took it meanwhile keeps
    it), and taken; the returned lease's ``stale`` is the dead holder's text.
    Credentials are those configured for the URL's container (as for every other path).
    """
    from azure.core import MatchConditions
    from azure.core.exceptions import HttpResponseError, ResourceNotFoundError
    from azure.storage.blob import BlobLeaseClient

    if not LEASE_MIN_SECONDS <= int(duration_s) <= LEASE_MAX_SECONDS:
        raise ValueError(f"duration_s={duration_s}: a blob lease lasts "
                         f"{LEASE_MIN_SECONDS} to {LEASE_MAX_SECONDS} s")
    if isinstance(holder, str):
        holder = holder.encode("utf-8")
    client, shown = _sync_blob_client(url)
    stale = None
    try:
        for _ in range(5):   # each retry follows a holder releasing between two of our calls
            try:
                client.upload_blob(holder, overwrite=False)
            except HttpResponseError as error:
                if error.status_code not in (409, 412):   # exists (and maybe leased): fine
                    raise
            try:
                lease = client.acquire_lease(lease_duration=int(duration_s))
            except ResourceNotFoundError:
                continue
            except HttpResponseError as error:
                if error.status_code != 409:
                    raise
                try:
                    download = client.download_blob()
                    current = download.readall()
                except ResourceNotFoundError:
                    continue
                text = current.decode("utf-8", "replace")
                if is_stale is not None and is_stale(text):
                    try:
                        BlobLeaseClient(client).break_lease(
                            lease_break_period=0, etag=download.properties.etag,
                            match_condition=MatchConditions.IfNotModified)
                    except HttpResponseError as error:   # gone, or changed since read
                        if error.status_code not in (404, 409, 412):
                            raise
                    stale = text
                    continue
                raise LeaseHeldError(shown, _holder_text(current)) from None
            try:
                client.upload_blob(holder, overwrite=True, lease=lease)
            except BaseException:
                lease.release()
                raise
            taken = BlobLease(url=shown, client=client, lease=lease, duration_s=int(duration_s))
            taken.stale = stale
            return taken
        raise LeaseHeldError(shown, "(changing hands too fast to read)")
    except BaseException:
        client.close()
        raise


def _holder_text(data: bytes) -> str:
    text = redactor.redact(data.decode("utf-8", "replace").strip())
    return text if len(text) <= _HOLDER_SHOWN_CHARS else text[:_HOLDER_SHOWN_CHARS] + " ..."


def _sync_blob_client(url: str):
    """(a synchronous azure-storage-blob ``BlobClient`` for ``url`` with the credential
    configured for its container, the URL without any SAS to show in messages)."""
    from azure.storage.blob import BlobClient

    loc, options = _location_and_options(url)
    if not loc.blob:
        raise AzurePathError(f"{loc.url()}: a lease needs a blob path, not a container")
    if options.get("connection_string"):
        client = BlobClient.from_connection_string(options["connection_string"], loc.container,
                                                   loc.blob, **LEASE_CLIENT_KWARGS)
    else:
        _, credential = _default_credential()
        client = BlobClient(loc.endpoint, loc.container, loc.blob, credential=credential,
                            **LEASE_CLIENT_KWARGS)
    return client, loc.url()
