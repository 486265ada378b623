"""Storage faults in the middle of a run: retried out loud, then one line naming the cause.

Contract:

- Every storage client tokenbeam builds (adlfs' through :mod:`dataio.azure.credentials`, the
  lease's) retries with :func:`retry_policy`: ``TOKENBEAM_AZURE_RETRIES`` retries per request
  (default 5) waiting ``TOKENBEAM_AZURE_RETRY_BACKOFF`` seconds (default 3) doubled each time,
  about 90 s in all. The first retry of an outage logs one ``warning:`` line, and so does every
  further :data:`ANNOUNCE_EVERY_SECONDS` of it (a storage outage is never silent); a request that
  gets through after retrying says so.
- A request still failing to connect after its retries raises :class:`StorageUnreachableError`
  ("storage at HOST unreachable for N s"), a :class:`~runtime.errors.RunError`.
- :func:`classify` (called by :func:`runtime.errors.describe`, the one place that turns errors
  into lines) maps what the Azure SDK, aiohttp or adlfs raise to a one-line
  :class:`StorageError`: the credential rejected (a SAS: "SAS rejected: expired?"), access
  refused (403), a container or blob gone (404), the service failing (5xx), unreachable. Each
  ends with :data:`runtime.errors.RESUME_HINT`. A container is "gone mid-run" only when this run
  checked it at its start; else it never existed: :func:`container_missing`, a
  :class:`~runtime.errors.ConfigError` (exit 2), also what the start's credential check raises.
  :func:`expired_sas` is the one reader of a SAS's expiry (mid-run and at the start). :func:`classify_text` does the same for a
  worker's exception that reaches the driver as text only.

Importing this module imports no Azure SDK.
"""

from __future__ import annotations

import os
import random
import re
import threading
import time
from urllib.parse import urlsplit

from runtime import errors, log

RETRIES_ENV = "TOKENBEAM_AZURE_RETRIES"
BACKOFF_ENV = "TOKENBEAM_AZURE_RETRY_BACKOFF"
DEFAULT_RETRIES = 5
DEFAULT_BACKOFF_SECONDS = 3.0
ANNOUNCE_EVERY_SECONDS = 30.0
_LOG = log.get("azure.storage")


class StorageError(errors.RunError):
    """A storage request failed for a reason outside tokenbeam (exit status 1)."""


class StorageUnreachableError(StorageError):
    """Requests to the storage service did not get through, retries included."""


class StorageAccessError(StorageError):
    """The service rejected the credential or refused the operation (401/403)."""


class StorageMissingError(StorageError):
    """A container or blob the run was using is gone (404)."""


class ContainerMissingError(errors.ConfigError):
    """A container named by the command line does not exist (exit status 2)."""


def _env_number(name: str, default: float, kind=float) -> float:
    text = os.environ.get(name, "").strip()
    if not text:
        return default
    try:
        value = kind(text)
    except ValueError:
        raise errors.ConfigError(f"{name}={text!r}: expected a number >= 0") from None
    if value < 0:
        raise errors.ConfigError(f"{name}={text!r}: expected a number >= 0")
    return value


def settings(*, at_most: int | None = None) -> tuple[int, float]:
    """(retries per request, first back-off in seconds) from the environment."""
    retries = int(_env_number(RETRIES_ENV, DEFAULT_RETRIES, int))
    backoff = _env_number(BACKOFF_ENV, DEFAULT_BACKOFF_SECONDS)
    return (min(retries, at_most) if at_most is not None else retries), backoff


def total_wait(retries: int, backoff: float) -> float:
    return sum(backoff * 2 ** k for k in range(retries))


# --- announcing retries -------------------------------------------------------------------------

class _Outage:
    """What this process has seen of the current outage (shared by every client)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.since: float | None = None     # first failed attempt of the outage
        self.last_retry = 0.0
        self.last_said = 0.0

    def retrying(self, host: str, why: str, retries: int, backoff: float) -> None:
        now = time.monotonic()
        with self.lock:
            # A retry long after the last one starts a new outage.
            if self.since is None or now - self.last_retry > 2 * max(total_wait(retries, backoff),
                                                                     ANNOUNCE_EVERY_SECONDS):
                self.since, self.last_said = now, now
                say = (f"storage at {host} did not answer ({why}); retrying, up to {retries} "
                       f"times over about {total_wait(retries, backoff):.0f} s per request")
            elif now - self.last_said >= ANNOUNCE_EVERY_SECONDS:
                self.last_said = now
                say = (f"storage at {host} still not answering after {now - self.since:.0f} s "
                       f"({why}); retrying")
            else:
                say = None
            self.last_retry = now
        if say:
            _LOG.warning("%s", say)

    def answered(self, host: str) -> None:
        with self.lock:
            if self.since is None:
                return
            seconds, self.since = time.monotonic() - self.since, None
        _LOG.info("note: storage at %s answering again after %.0f s", host, seconds)

    def seconds(self) -> float | None:
        with self.lock:
            return None if self.since is None else time.monotonic() - self.since


OUTAGE = _Outage()


def _host(url: str | None) -> str:
    return urlsplit(url or "").netloc or "?"


def _why(error, response) -> str:
    if response is not None:
        return f"{response.status_code} {response.reason or ''}".strip()
    return _first_line(str(getattr(error, "message", None) or error)) or type(error).__name__


class _Announcing:
    """Mixed into the SDK's storage retry policies: a doubling back-off from the settings,
    announced retries, and :class:`StorageUnreachableError` once they are used up."""

    def _setup(self, retries: int, backoff: float) -> None:
        self.tokenbeam_retries, self.tokenbeam_backoff = retries, backoff

    def get_backoff_time(self, settings):   # noqa: D401 - the SDK's hook
        base = self.tokenbeam_backoff * 2 ** settings["count"]
        return random.uniform(base * 0.8, base * 1.2)

    def configure_retries(self, request):   # the SDK's hook: every retry is announced
        found = super().configure_retries(request)
        found["hook"] = lambda retry_count, location_mode, request, response, error: \
            self._retrying(found, request, error, response)
        return found

    def _retrying(self, settings, request, error, response) -> None:
        settings["tokenbeam_retried"] = True
        OUTAGE.retrying(_host(request.url), _why(error, response), self.tokenbeam_retries,
                        self.tokenbeam_backoff)

    def _answered(self, request, response):
        if OUTAGE.since is not None:
            OUTAGE.answered(_host(request.http_request.url))
        return response

    def _unreachable(self, request, error) -> StorageError:
        return _message("unreachable", status=None, code=None, detail=_why(error, None),
                        where=_host(request.http_request.url))


def retry_policy(*, asynchronous: bool, at_most: int | None = None):
    """The storage retry policy tokenbeam's clients use (see the module docstring);
    ``at_most`` caps the retries (the lease's, which must not outlast a renewal period)."""
    from azure.core.exceptions import ServiceRequestError, ServiceResponseError

    retries, backoff = settings(at_most=at_most)
    unreachable = (ServiceRequestError, ServiceResponseError)
    if asynchronous:
        from azure.storage.blob.aio import ExponentialRetry

        class AsyncAnnouncingRetry(_Announcing, ExponentialRetry):
            async def send(self, request):
                try:
                    response = await super().send(request)
                except unreachable as error:
                    raise self._unreachable(request, error) from error
                return self._answered(request, response)

        announcing = AsyncAnnouncingRetry
    else:
        from azure.storage.blob import ExponentialRetry

        class AnnouncingRetry(_Announcing, ExponentialRetry):
            def send(self, request):
                try:
                    response = super().send(request)
                except unreachable as error:
                    raise self._unreachable(request, error) from error
                return self._answered(request, response)

        announcing = AnnouncingRetry
    policy = announcing(retry_total=retries, retry_connect=retries, retry_read=retries,
                        retry_status=retries)
    policy._setup(retries, backoff)
    return policy


# --- one line per cause -------------------------------------------------------------------------

_SAS_HINT = "give a valid SAS (AZURE_STORAGE_SAS_TOKEN or --azure-sas-token-file)"
# on a worker the submitting command's flags do not reach it: its nodes' environment does
_WORKER_SAS_HINT = "give the workers a valid SAS (AZURE_STORAGE_SAS_TOKEN in their environment)"


def _first_line(text: str) -> str:
    for line in str(text).strip().splitlines():
        if line.strip():
            return line.strip()[:300]
    return ""


def _uses_sas() -> bool:
    from dataio.azure.state import STATE

    return bool(STATE.secrets.sas_by_scope) or any(
        method == "sas" for method, _ in STATE.resolved.values())


# What the service answers when it does not accept the credential at all (Azurite answers an
# expired or revoked SAS with AuthorizationFailure, Azure with AuthenticationFailed).
_REJECTED = ("AuthenticationFailed", "InvalidAuthenticationInfo", "AuthorizationFailure")


def expired_sas(tokens=None) -> str | None:
    """The expiry (``se=``) of a SAS in ``tokens`` (default: every SAS this process uses) that
    is in the past, if any."""
    import datetime as dt
    from urllib.parse import parse_qs

    from dataio.azure.state import STATE

    now = dt.datetime.now(dt.timezone.utc)
    if tokens is None:
        tokens = [*STATE.secrets.sas_by_scope.values(), os.environ.get("AZURE_STORAGE_SAS_TOKEN")]
    for sas in tokens:
        if not sas:
            continue
        expiry = (parse_qs(sas.lstrip("?")).get("se") or [None])[0]
        try:
            when = dt.datetime.fromisoformat(expiry.replace("Z", "+00:00")) if expiry else None
        except ValueError:
            continue
        if when is not None and when.tzinfo is not None and when < now:
            return expiry
    return None


def _message(kind: str, *, status: int | None, code: str | None, detail: str,
             where: str) -> errors.TokenbeamError | None:
    """The one-line error for a storage fault of ``kind`` ("auth", "http", "unreachable")."""
    from runtime import redact

    detail = redact.redact(detail)
    if ". " in detail:   # the service's first sentence says it; the rest is boilerplate
        detail = detail.split(". ", 1)[0] + "."
    at = f" ({where})" if where else ""
    if kind == "unreachable":
        seconds = OUTAGE.seconds()
        span = "" if seconds is None else f" for {seconds:.0f} s" if seconds >= 10 else \
            f" for {seconds:.1f} s"
        return StorageUnreachableError(
            f"storage unreachable{span}{at}: {detail}; check the network and the account's "
            f"endpoint, then {errors.RESUME_HINT}")
    label = " ".join(str(p) for p in (status, code) if p) or "rejected"
    if kind == "auth" or status in (401, 403):
        sas = _uses_sas()
        if code in (None, *_REJECTED) or kind == "auth":
            expired = expired_sas() if sas else None
            cause = (f"SAS rejected: it expired at {expired}" if expired else
                     "SAS rejected: expired?" if sas else
                     "credential rejected: key rotated or token expired?")
        else:
            cause = ("SAS refused this operation: expired, revoked or lacking a permission?"
                     if sas else "access refused: does the credential have the role or "
                     "permission this needs (e.g. Storage Blob Data Contributor)?")
        from dataio.azure.state import STATE

        worker = STATE.on_worker
        fix = (_WORKER_SAS_HINT if worker else _SAS_HINT) if sas else \
            "give a credential that may do this" + (" to the workers (their managed identity's "
                                                     "role, or their environment)" if worker else "")
        return StorageAccessError(f"{cause} (storage said {label}{at}: {detail}); {fix}, then "
                                  f"{errors.RESUME_HINT}")
    if status == 404 and code == "ContainerNotFound":
        missing = _container_never_checked(where)
        if missing is not None:
            return missing
    if status == 404 and code in ("ContainerNotFound", "BlobNotFound", "ResourceNotFound"):
        return StorageMissingError(
            f"{'container' if code == 'ContainerNotFound' else 'blob'} gone mid-run (storage "
            f"said {label}{at}): deleted by someone else? {errors.RESUME_HINT}")
    if status is not None and status >= 500:
        return StorageError(f"storage failing (storage said {label}{at}: {detail}) after "
                            f"retries; {errors.RESUME_HINT} once it recovers")
    return None


def container_missing(account: str | None, container: str,
                      url: str = "") -> ContainerMissingError:
    """The error for a container that does not exist (a configuration error: a rerun cannot
    help); ``url``: the path that names it."""
    from runtime import redact

    account = account or "?"
    at = f" ({redact.redact(url)})" if url else ""
    return ContainerMissingError(
        f"container '{container}' does not exist in account {account}{at}: create it (az storage "
        f"container create --name {container} --account-name {account}) or fix the path "
        "(--input, --output or the tokenizer's)")


def _container_never_checked(where: str) -> ContainerMissingError | None:
    """For a 404 ContainerNotFound at ``where``: the configuration error when this run never saw
    that container exist (it was not checked at the start, see
    :func:`dataio.azure.credentials.configure_from_options`); None when it did (or ``where``
    names no container): it is then gone mid-run."""
    from dataio.azure.state import STATE
    from dataio.azure.urls import parse

    loc = parse(where) if where else None
    if loc is None or not loc.container:
        return None
    checked = {scope for scope, _ in STATE.current_plan().chosen} | set(STATE.resolved)
    # By container name: an endpoint's URL may not name its account as the command line did.
    if any(scope.rpartition("/")[2] == loc.container for scope in checked):
        return None
    return container_missing(loc.account, loc.container, where)


def _where(exc) -> str:
    """The request's URL without its query (a SAS), when the exception carries it."""
    response = getattr(exc, "response", None)
    request = getattr(response, "request", None)
    url = getattr(request, "url", None)
    if not url:
        return ""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}{parts.path}"


def classify(exc: BaseException) -> errors.TokenbeamError | None:
    """The one-line error for an exception of the Azure SDK, aiohttp or adlfs; None when it is
    not a storage fault this module knows."""
    if isinstance(exc, StorageError):
        return exc
    module = type(exc).__module__ or ""
    if not module.startswith(("azure.", "aiohttp")):
        return None
    names = {cls.__name__ for cls in type(exc).__mro__}
    detail = _first_line(getattr(exc, "reason", None) or getattr(exc, "message", None)
                         or str(exc)) or type(exc).__name__
    if names & {"ServiceRequestError", "ServiceResponseError", "ClientConnectionError",
                "ClientConnectorError", "ServerDisconnectedError", "ClientPayloadError"}:
        return _message("unreachable", status=None, code=None, detail=detail, where="")
    status = getattr(exc, "status_code", None)
    code = getattr(exc, "error_code", None)
    code = getattr(code, "value", code)
    if "ClientAuthenticationError" in names:
        return _message("auth", status=status, code=code, detail=detail, where=_where(exc))
    if "HttpResponseError" in names:
        return _message("http", status=status, code=code, detail=detail, where=_where(exc))
    return None


_CODE = re.compile(r"ErrorCode:\s*(\w+)")
_STATUS = re.compile(r"(?:Status code|status_code|StatusCode)[=: ]+(\d{3})")
_CODE_STATUS = {"AuthenticationFailed": 403, "AuthorizationFailure": 403,
                "AuthorizationPermissionMismatch": 403, "InvalidAuthenticationInfo": 401,
                "ContainerNotFound": 404, "BlobNotFound": 404, "ResourceNotFound": 404,
                "ServerBusy": 503, "InternalError": 500, "OperationTimedOut": 500}


def classify_text(name: str, message: str, text: str) -> errors.TokenbeamError | None:
    """:func:`classify` for an exception known only as a ``module.Class: message`` line of a
    worker's traceback (``text`` is the whole text, where the service's error code follows)."""
    cls = name.rpartition(".")[2]
    if not name.startswith(("azure.", "aiohttp.")):
        return None
    if cls in ("ServiceRequestError", "ServiceResponseError") or name.startswith("aiohttp."):
        return _message("unreachable", status=None, code=None, detail=_first_line(message),
                        where="")
    tail = text[text.find(message):] if message in text else text
    code_match = _CODE.search(tail)
    code = code_match.group(1) if code_match else None
    status_match = _STATUS.search(tail)
    status = int(status_match.group(1)) if status_match else _CODE_STATUS.get(code or "")
    if cls == "ClientAuthenticationError":
        return _message("auth", status=status, code=code, detail=_first_line(message), where="")
    if cls in ("HttpResponseError", "ResourceNotFoundError", "ResourceExistsError",
               "ResourceModifiedError"):
        return _message("http", status=status, code=code, detail=_first_line(message), where="")
    return None


errors.register_storage_errors(classify, classify_text)
