"""Azure credentials: which one to use for each container, checked up front, never stored.

Credentials, tried in this order for each (account, container) unless ``--azure-auth`` forces
one: SAS token (``AZURE_STORAGE_SAS_TOKEN``, ``--azure-sas-token-file``, ``--azure-sas-token``,
the ``?query`` of an https URL — scoped to its container —), account key (``AZURE_STORAGE_KEY``
/ ``AZURE_STORAGE_ACCOUNT_KEY``, ``--azure-account-key-file``, ``--azure-account-key``),
connection string (Beam's ``--azure_connection_string``,
``AZURE_STORAGE_CONNECTION_STRING``), then azure-identity's ``DefaultAzureCredential``
(environment service principal, workload/managed identity — Beam's
``--azure_managed_identity_client_id`` —, Azure CLI, ...).

Contract:

- :func:`configure_from_options` (driver) resolves a credential for every Azure path it is given
  and checks each one up front with one request, retries off and short timeouts; a method the
  service rejects is reported and the next one tried. With none left it raises
  :class:`AzureCredentialError` within seconds, listing every method tried and how to provide
  one (a SAS past its ``se=`` expiry named first). A container that does not exist raises
  :func:`dataio.azure.storage_errors.container_missing` (exit 2) at once. It returns an :class:`~dataio.azure.state.AzurePlan` to hand to workers.
- :func:`prepare_argv` is the first thing a job runs: secret flags leave argv
  (:func:`runtime.redact.split_secret_flags`) and SAS queries leave URLs before Beam parses it.
  A secret given on the command line is readable by every local user (``ps``,
  ``/proc/PID/cmdline``) for as long as the job runs: one ``warning:`` line says so and names
  the ways that never put a secret on a command line, the environment variables above and the
  file flags (:data:`SECRET_FILE_FLAGS`, read by :func:`read_secret_file`).
  Secrets given by flag or URL are put into this process's environment so that worker
  processes forked or spawned from it (DirectRunner multi-processing, a local worker pool,
  sbatch with ``--export=ALL``) inherit them. A worker calls :func:`~dataio.azure.state.configure_worker`
  (``DoFn.setup``) or simply opens a path: resolution then happens lazily, from the plan and
  the environment, with no check. Cluster workers elsewhere get their secret the same way any
  Azure SDK does: environment variables set on the worker, or a managed identity. The plan
  names the method the driver used for each container, and where each account lives (the
  account of ``abfs://container/...`` URLs and any endpoint other than Azure's own), so a
  worker reads a URL as the same blob; where that method is not configured on the worker's
  machine (its nodes have their own credential), the others are tried in order, each checked
  with one request as on the driver.
- Every secret seen is registered with :func:`runtime.redact.register_secret`.
- What was resolved lives in :data:`dataio.azure.state.STATE`; :func:`reset` forgets it.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import re
from typing import Any, Iterable, Mapping, Sequence
from urllib.parse import urlsplit

from runtime import redact as redactor
from dataio.azure import storage_errors
from runtime.errors import ConfigError
from dataio.azure.state import DEFAULT_BLOCK_SIZE, METHODS, STATE, AzurePlan
from dataio.azure.urls import (AZURE_PROTOCOLS, AzureLocation, AzurePathError,
                               connection_string_account, connection_string_endpoint,
                               is_azure_url, parse, strip_sas)

METHOD_TITLES = {
    "sas": "SAS token (AZURE_STORAGE_SAS_TOKEN, --azure-sas-token-file, --azure-sas-token, "
           "the ?query of an https URL)",
    "account-key": "account key (AZURE_STORAGE_KEY or AZURE_STORAGE_ACCOUNT_KEY, "
                   "--azure-account-key-file, --azure-account-key)",
    "connection-string": "connection string (--azure_connection_string, "
                         "AZURE_STORAGE_CONNECTION_STRING)",
    "default": "DefaultAzureCredential (environment AZURE_TENANT_ID/AZURE_CLIENT_ID/"
               "AZURE_CLIENT_SECRET, workload or managed identity "
               "[--azure_managed_identity_client_id], Azure CLI `az login`)",
}
# The same, as a worker has them: its own environment or identity, no flag.
WORKER_METHOD_TITLES = {
    "sas": "SAS token (AZURE_STORAGE_SAS_TOKEN in the worker's environment)",
    "account-key": "account key (AZURE_STORAGE_KEY with AZURE_STORAGE_ACCOUNT_NAME in the "
                   "worker's environment)",
    "connection-string": "connection string (AZURE_STORAGE_CONNECTION_STRING in the worker's "
                         "environment)",
    "default": "DefaultAzureCredential (the nodes' managed identity, or AZURE_TENANT_ID/"
               "AZURE_CLIENT_ID/AZURE_CLIENT_SECRET in the worker's environment)",
}
STORAGE_SCOPE = "https://storage.azure.com/.default"

# File flags that name a file holding a secret (the path, not the secret, is on the command
# line) -> the secret option they stand for.
SECRET_FILE_FLAGS = {"azure_sas_token_file": "azure_sas_token",
                     "azure_account_key_file": "azure_account_key"}
SAFE_WAYS = ("export AZURE_STORAGE_SAS_TOKEN, AZURE_STORAGE_KEY or "
             "AZURE_STORAGE_CONNECTION_STRING, or use --azure-sas-token-file FILE / "
             "--azure-account-key-file FILE")
_LOG = logging.getLogger("tokenbeam.azure")

# One request each, no retries: a wrong or missing credential must fail in seconds, not after
# the storage SDK's exponential back-off (over a minute).
PROBE_CLIENT_KWARGS = {"retry_total": 0, "connection_timeout": 5, "read_timeout": 15}


class AzureCredentialError(PermissionError):
    """No credential method could access an Azure path (the message lists what was tried)."""


def reset() -> None:
    """Forget every credential and resolution of this process (tests; a new configuration)."""
    STATE.reset()
    from dataio import fs as fsutil
    for protocol in AZURE_PROTOCOLS:
        fsutil.set_storage_options(protocol, {})


def absorb_sas(url: str) -> str:
    """``url`` without its SAS query; the SAS is remembered for the URL's container (and put in
    the environment for worker processes)."""
    loc = parse(url)
    if loc is None or not loc.sas:
        return url
    _remember_url_sas(with_account(loc))
    return strip_sas(url)


def prepare_argv(argv: Sequence[str]) -> tuple[list[str], dict[str, str]]:
    """The first thing a job's ``run(argv)`` calls: returns argv with no secret left in it, and
    the secret options by name. Secret flags are taken out
    (:func:`runtime.redact.split_secret_flags`); an Azure URL carrying a SAS query
    (``--input=https://acct.blob.core.windows.net/c/x?sv=...&sig=...``)
    loses its query, which is remembered as that container's SAS. Everything downstream (Beam's
    options, path joins, metadata.json, job scripts) then only ever sees clean URLs."""
    clean, secrets = redactor.split_secret_flags(argv)
    out = []
    in_urls = False
    for arg in clean:
        head, eq, value = arg.partition("=") if arg.startswith("--") and "=" in arg \
            else ("", "", arg)
        if "://" in value and "?" in value:
            stripped = absorb_sas(value)
            in_urls = in_urls or stripped != value
            value = stripped
        out.append(head + eq + value)
    warn_visible_secrets([f"--{name.replace('_', '-')}" for name in secrets]
                         + (["a URL's SAS query"] if in_urls else []))
    return out, secrets


def warn_visible_secrets(where: Sequence[str]) -> None:
    """One ``warning:`` line when secrets came on the command line (``where`` names them)."""
    if where:
        _LOG.warning("a secret on the command line (%s): every local user can read it (ps, "
                     "/proc/PID/cmdline) while the job runs; %s instead",
                     ", ".join(where), SAFE_WAYS)


def read_secret_file(path: str, flag: str) -> str:
    """The secret in the file ``path`` (given as ``flag``), without its trailing newline.
    Raises :class:`runtime.errors.ConfigError` (one line naming the flag) when the file cannot
    be read or holds nothing."""
    try:
        with open(path, encoding="utf-8") as f:
            value = f.read().rstrip("\r\n")
    except (OSError, UnicodeDecodeError) as error:
        reason = error.strerror if isinstance(error, OSError) and error.strerror \
            else type(error).__name__
        raise ConfigError(f"{flag} {path}: cannot read it ({reason}); give a readable file "
                          "holding only the secret") from None
    if not value.strip():
        raise ConfigError(f"{flag} {path}: the file is empty; it must hold the secret")
    return value


def _secrets_from_files(options: Mapping[str, Any]) -> dict[str, str]:
    """The secrets named by file flags (:data:`SECRET_FILE_FLAGS`), by secret option name."""
    out = {}
    for file_option, secret_option in SECRET_FILE_FLAGS.items():
        path = _option(options, file_option)
        if not path:
            continue
        flag = "--" + file_option.replace("_", "-")
        if _option(options, secret_option):
            raise ConfigError(f"{flag} {path}, and --{secret_option.replace('_', '-')}; "
                              f"keep only {flag}, which keeps the secret off the command line")
        out[secret_option] = read_secret_file(str(path), flag)
        redactor.register_secret(out[secret_option])
    return out


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
    ``azure_sas_token_file``, ``azure_account_key_file``, ``azure_account_name``, ``azure_connection_string``, ``azure_managed_identity_client_id``,
    ``blob_service_endpoint``, ``azure_auth`` (auto|sas|account-key|connection-string|default),
    ``azure_block_size_mb`` (e.g. ``vars(args)`` merged with :func:`prepare_argv`'s dict).
    ``paths``: every path the job reads or writes; non-Azure ones are ignored. Returns the plan
    for workers, or ``None`` when no Azure path is involved and no Azure option was given.
    """
    options = dict(options or {})
    options.update(_secrets_from_files(options))
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
    with STATE.lock:
        STATE.submitting = True   # the flags reach this process (state.py: on_worker)
        if any(options.get(k) for k in ("azure_sas_token", "azure_account_key",
                                         "azure_connection_string", "azure_auth")):
            STATE.resolved.clear()   # new credentials: earlier choices no longer hold
        sas = _option(options, "azure_sas_token")
        if sas:
            STATE.secrets.sas_by_scope[""] = sas.lstrip("?")
        key = _option(options, "azure_account_key")
        account_name = _option(options, "azure_account_name")
        if key:
            STATE.secrets.keys[account_name or ""] = key
        conn = _option(options, "azure_connection_string")
        if conn:
            STATE.secrets.connection_string = conn
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
        STATE.install_plan(plan)
        accountless, endpoints = [], dict(plan.endpoints)
        for path in azure_paths:
            named = parse(str(path))
            loc = with_account(named)
            if loc.sas:
                _remember_url_sas(loc)
            _resolve(loc, check=check)
            if not named.account:
                accountless.append(loc.account)
            if loc.endpoint != f"https://{loc.account}.blob.core.windows.net":
                endpoints.setdefault(loc.account, loc.endpoint)
        # Workers read the same URL as the same blob whatever credential their machine has:
        # where an account-less URL (abfs://container/...) and each account live, as resolved
        # here (from a connection string, say), goes to them in the plan (no secret in it).
        plan = dataclasses.replace(
            plan, chosen=tuple(sorted((scope, method)
                                      for scope, (method, _) in STATE.resolved.items())),
            endpoints=tuple(sorted(endpoints.items())),
            default_account=plan.default_account or (accountless[0] if accountless else None))
        STATE.install_plan(plan)
        STATE.export_to_environment()
        return plan


def _remember_url_sas(loc: AzureLocation) -> None:
    with STATE.lock:
        if STATE.secrets.sas_by_scope.get(loc.scope) != loc.sas:
            STATE.secrets.sas_by_scope[loc.scope] = loc.sas
            STATE.resolved.pop(loc.scope, None)
            STATE.export_to_environment()


def with_account(loc: AzureLocation) -> AzureLocation:
    """``loc`` with its account and blob endpoint filled in: the URL's own, else the plan's
    default account, a connection string's, or ``AZURE_STORAGE_ACCOUNT_NAME``."""
    if loc.account and loc.endpoint:
        return loc
    plan = STATE.current_plan()
    account = loc.account or plan.default_account
    conn = STATE.secrets.connection_string or os.environ.get("AZURE_STORAGE_CONNECTION_STRING")
    if not account and conn:
        account = connection_string_account(conn)
    if not account:
        account = os.environ.get("AZURE_STORAGE_ACCOUNT_NAME")
    if not account:
        raise AzurePathError(
            f"{loc.url()}: no storage account named. Use "
            f"abfss://{loc.container}@ACCOUNT.dfs.core.windows.net/{loc.blob} or "
            f"https://ACCOUNT.blob.core.windows.net/{loc.inner}, or set --azure-account-name, "
            "AZURE_STORAGE_ACCOUNT_NAME or a connection string")
    endpoint = loc.endpoint or dict(plan.endpoints).get(account)
    if not endpoint and conn and connection_string_account(conn) == account:
        endpoint = connection_string_endpoint(conn)
    endpoint = endpoint or f"https://{account}.blob.core.windows.net"
    return dataclasses.replace(loc, account=account, endpoint=endpoint.rstrip("/"))


def _candidate_secret(loc: AzureLocation, method: str) -> str | None:
    """The secret ``method`` would use for ``loc`` (None: this method is not provided)."""
    if method == "sas":
        for scope in (loc.scope, loc.account, ""):
            if scope in STATE.secrets.sas_by_scope:
                return STATE.secrets.sas_by_scope[scope]
        env = os.environ.get("AZURE_STORAGE_SAS_TOKEN")
        return env.lstrip("?") if env else None
    if method == "account-key":
        if loc.account in STATE.secrets.keys:
            return STATE.secrets.keys[loc.account]
        if "" in STATE.secrets.keys:
            return STATE.secrets.keys[""]
        env = os.environ.get("AZURE_STORAGE_KEY") or os.environ.get("AZURE_STORAGE_ACCOUNT_KEY")
        env_account = os.environ.get("AZURE_STORAGE_ACCOUNT_NAME") or os.environ.get(
            "AZURE_STORAGE_ACCOUNT")
        if env and (not env_account or env_account == loc.account):
            return env
        return None
    if method == "connection-string":
        conn = STATE.secrets.connection_string or os.environ.get("AZURE_STORAGE_CONNECTION_STRING")
        if conn and connection_string_account(conn) in (None, loc.account):
            return conn
        return None
    return "default"


def _storage_options(loc: AzureLocation, method: str, secret: str) -> dict[str, Any]:
    # SAS and key go through a connection string: it is the one adlfs input that takes an
    # explicit endpoint, http included (adlfs builds https://{account_host} otherwise).
    block = {"blocksize": STATE.current_plan().block_size}
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
    aio_credential, _ = default_credential()
    options = {"account_name": loc.account, "credential": aio_credential, **block}
    host = loc.endpoint.split("://", 1)[1]
    if host != f"{loc.account}.blob.core.windows.net":
        options["account_host"] = host
    return options


def default_credential(*, probe: bool = False):
    """(aio, sync) DefaultAzureCredential of this process; with ``probe``, a sync one for the
    up-front check whose token requests are retried at most once, immediately (the default
    managed-identity retries back off for about 5 s where no identity endpoint answers)."""
    from azure.identity import DefaultAzureCredential

    client_id = STATE.current_plan().managed_identity_client_id
    kwargs = {"process_timeout": 10}
    if client_id:
        kwargs["managed_identity_client_id"] = client_id
    if probe:
        return DefaultAzureCredential(retry_total=1, **kwargs)
    with STATE.lock:
        if client_id not in STATE.credentials:
            from azure.identity.aio import DefaultAzureCredential as AioDefaultAzureCredential
            STATE.credentials[client_id] = (AioDefaultAzureCredential(**kwargs),
                                       DefaultAzureCredential(**kwargs))
        return STATE.credentials[client_id]


def _resolve(loc: AzureLocation, *, check: bool) -> dict[str, Any]:
    """Storage options for ``loc``'s scope, resolving (and with ``check``, probing) once."""
    with STATE.lock:
        if loc.scope in STATE.resolved:
            return STATE.resolved[loc.scope][1]
        plan = STATE.current_plan()
        chosen = dict(plan.chosen).get(loc.scope)
        order = plan.order
        tried: list[tuple[str, str]] = []
        if chosen and _candidate_secret(loc, chosen) is not None:
            order = (chosen,)
        elif chosen:
            # The driver's method is not configured on this machine (a cluster node with its
            # own credential: a managed identity, its own SAS or key): the others, in order,
            # each checked with one request as on the driver, so none fails minutes later.
            tried.append((chosen, "not provided on this machine (the driver used it)"))
            order = tuple(m for m in plan.order if m != chosen)
            check = True
        for method in order:
            secret = _candidate_secret(loc, method)
            if secret is None:
                tried.append((method, "not provided"))
                continue
            options = _storage_options(loc, method, secret)
            if check:
                problem = _probe(loc, method, options)
                expired = storage_errors.expired_sas([secret]) if method == "sas" else None
                if problem is not None and expired:
                    problem = f"SAS rejected: it expired at {expired} ({problem})"
                if problem is not None:
                    tried.append((method, problem))
                    continue
            STATE.resolved[loc.scope] = (method, options)
            _register_default_protocol_options(loc, options)
            return options
        raise AzureCredentialError(_failure_message(loc, tried))


def _register_default_protocol_options(loc: AzureLocation, options: dict[str, Any]) -> None:
    # Plain fsspec calls (fsspec.open("abfs://...", **fs.storage_options("abfs"))) get the
    # default account's options; dataio.fs itself always resolves per account.
    if loc.account == STATE.current_plan().default_account or len(STATE.resolved) == 1:
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
            credential = default_credential(probe=True)
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
        except ResourceNotFoundError as error:
            _container_must_exist(loc, error)
            return None   # the credential was accepted
        except HttpResponseError as error:
            if error.status_code != 403 or "PermissionMismatch" not in str(error.error_code) \
                    and "ResourceTypeMismatch" not in str(error.error_code):
                raise
        # Authenticated but not allowed to list (e.g. a read-only or write-only SAS): a HEAD
        # on the path itself tells an accepted credential (200/404) from a rejected one.
        try:
            container.get_blob_client(prefix or "_").get_blob_properties()
        except ResourceNotFoundError as error:
            _container_must_exist(loc, error)
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
    except storage_errors.ContainerMissingError:
        raise   # no credential would help (a ValueError, as ConfigError is)
    except ValueError as error:   # malformed connection string or SAS
        return "unusable: " + _first_lines(redactor.redact(str(error)), 1)


def _container_must_exist(loc: AzureLocation, error) -> None:
    """A 404 to the probe: the credential was accepted, but a container that does not exist is
    a configuration error now (no rerun would help, nor is it ever "gone mid-run")."""
    if str(getattr(error.error_code, "value", error.error_code)) == "ContainerNotFound":
        raise storage_errors.container_missing(loc.account, loc.container,
                                               strip_sas(loc.url())) from None


def _first_lines(text: str, n: int) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    out = " | ".join(line.strip() for line in lines[:n])
    return redactor.redact(out + (" ..." if len(lines) > n else ""))


# What fixes a missing credential on a worker (a Spark executor, a Flink TaskManager's SDK worker,
# a SLURM node): flags and `az login` reach only the submitting machine.
WORKER_FIX = (
    "This is a worker: flags and `az login` on the submitting machine do not reach it. Give "
    "the worker nodes a credential of their own: best a managed identity assigned to the "
    "cluster's nodes (DefaultAzureCredential finds it; a user-assigned one is named by "
    "--azure_managed_identity_client_id, which travels with the job), with a role on the "
    "storage account (Storage Blob Data Contributor); or AZURE_STORAGE_SAS_TOKEN, "
    "AZURE_STORAGE_KEY with AZURE_STORAGE_ACCOUNT_NAME, or AZURE_STORAGE_CONNECTION_STRING in "
    "the environment the workers start in (Spark: spark.executorEnv.NAME in the config's "
    "spark_conf, or the cluster's spark-env; SLURM: exported before submitting, sbatch passes "
    "it on).")


def _failure_message(loc: AzureLocation, tried: list[tuple[str, str]]) -> str:
    # An expired SAS is the cause to name first (the list below says it too).
    expired = [outcome.split(" (", 1)[0] for method, outcome in tried
               if method == "sas" and outcome.startswith("SAS rejected: it expired at ")]
    where = ("AZURE_STORAGE_SAS_TOKEN in the worker's environment" if STATE.on_worker else
             "AZURE_STORAGE_SAS_TOKEN, --azure-sas-token-file or the URL's ?query")
    cause = f"{expired[0]}: give a valid SAS ({where}). " if expired else ""
    lines = [f"{cause}No working Azure credential for {redactor.redact(loc.url())} "
             f"(account '{loc.account}', container '{loc.container}'). Tried, in order:"]
    titles = WORKER_METHOD_TITLES if STATE.on_worker else METHOD_TITLES
    for i, (method, outcome) in enumerate(tried, 1):
        lines.append(f"  {i}. {titles[method]}: {redactor.redact(outcome)}")
    if STATE.on_worker:
        lines.append(WORKER_FIX)
        return "\n".join(lines)
    lines.append(
        "Provide one: export AZURE_STORAGE_SAS_TOKEN or --azure-sas-token-file FILE; "
        "export AZURE_STORAGE_KEY or --azure-account-key-file FILE; export "
        "AZURE_STORAGE_CONNECTION_STRING; or sign in for DefaultAzureCredential (`az login`, "
        "a managed identity with --azure_managed_identity_client_id, or AZURE_TENANT_ID/"
        "AZURE_CLIENT_ID/AZURE_CLIENT_SECRET). --azure-auth METHOD tries only that method.")
    return "\n".join(lines)


def filesystem_and_path(url: str):
    """(adlfs filesystem for the URL's account and credential, ``container/blob``)."""
    import fsspec

    loc, options = location_and_options(url)
    fs = fsspec.filesystem("abfs", **options)
    if not getattr(fs.service_client, "_tokenbeam_retries", False):
        fs.service_client = _service_client(fs, options)
    return fs, loc.inner


def _service_client(fs, options: dict[str, Any]):
    """The asynchronous service client adlfs would build for ``options``, but retrying as
    every tokenbeam client does: out loud, then one line (dataio/azure/storage_errors.py).
    adlfs builds its client once, in ``__init__``, and takes no retry settings, so the instance
    (cached by fsspec) gets this one instead."""
    from azure.storage.blob.aio import BlobServiceClient

    from dataio.azure.storage_errors import retry_policy

    policy = retry_policy(asynchronous=True)
    if options.get("connection_string"):
        client = BlobServiceClient.from_connection_string(options["connection_string"],
                                                          retry_policy=policy)
    else:
        client = BlobServiceClient(account_url=fs.account_url, credential=options["credential"],
                                   retry_policy=policy)
    client._tokenbeam_retries = True
    return client


def location_and_options(url: str):
    """(the parsed location with its account, the adlfs options of its credential)."""
    loc = parse(url)
    if loc is None:
        raise AzurePathError(f"{redactor.redact(url)} is not an Azure URL")
    with STATE.lock:
        loc = with_account(loc)
        if loc.sas:
            _remember_url_sas(loc)
        # Scopes the driver checked are trusted (workers resolve them without a request);
        # any other scope is checked here, so a library call fails as fast as the CLI.
        return loc, _resolve(loc, check=loc.scope not in dict(STATE.current_plan().chosen))


def method_for(url: str) -> str | None:
    """The credential method in use for ``url``'s scope (None until resolved)."""
    loc = parse(url)
    if loc is None:
        return None
    loc = with_account(loc)
    entry = STATE.resolved.get(loc.scope)
    return entry[0] if entry else None


