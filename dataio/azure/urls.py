"""Azure URLs: every form that names a blob, parsed into one :class:`AzureLocation`.

Forms (all name the same blob; each resolves to one adlfs filesystem for the storage account
plus the path ``container/blob`` inside it):

    abfs://container/path                       account from --azure-account-name,
    az://container/path                         AZURE_STORAGE_ACCOUNT_NAME or the connection string
    abfss://container@account.dfs.core.windows.net/path     (also @account.blob..., and abfs/az)
    https://account.blob.core.windows.net/container/path[?SAS]  (also .dfs.)
    http://127.0.0.1:PORT/devstoreaccount1/container/path   path-style (Azurite, or any endpoint
                                                            named by a connection string)

Contract: :func:`parse` returns ``None`` for a URL that is not Azure's and raises
:class:`AzurePathError` for an Azure URL it cannot use. A SAS query is kept apart from the
path (``AzureLocation.sas``, never in its repr) and registered with :mod:`runtime.redact`.
Connection strings are read here too (:func:`parse_connection_string`). No network access.
"""

from __future__ import annotations

import dataclasses
import os
import re
from urllib.parse import parse_qsl, unquote, urlsplit

from runtime import redact as redactor
from dataio.azure.state import STATE

AZURE_PROTOCOLS = ("abfs", "abfss", "az")
DEV_ACCOUNT = "devstoreaccount1"

_HOST_RE = re.compile(r"^(?P<account>[a-z0-9]{3,24})\.(?P<kind>blob|dfs)\."
                      r"(?P<suffix>core\.windows\.net|core\.chinacloudapi\.cn|"
                      r"core\.usgovcloudapi\.net)$", re.I)


class AzurePathError(ValueError):
    """An Azure URL that cannot be resolved (e.g. no storage account named anywhere)."""


@dataclasses.dataclass(frozen=True)
class AzureLocation:
    """One Azure URL, parsed. ``account`` may be ``None`` for ``abfs://container/path`` until
    :func:`dataio.azure.credentials.with_account` fills in the default account."""

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
    if account != DEV_ACCOUNT and endpoint.lower() not in known_path_style_endpoints():
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


def strip_sas(url: str) -> str:
    """``url`` without its query string when it is an Azure URL carrying a SAS."""
    loc = parse(url)
    if loc is None or not loc.sas:
        return url
    return url.split("?", 1)[0]


def url_like(pattern: str, inner: str) -> str:
    """The URL, in ``pattern``'s form (scheme, account host, endpoint), of ``inner``."""
    return parse(pattern).url(inner)


def known_path_style_endpoints() -> set[str]:
    """Blob endpoints (lower-cased) whose URLs name the account in the path: the plan's and
    the connection string's (a private endpoint, an emulator other than Azurite's default)."""
    found = set()
    plan = STATE.plan
    if plan:
        found.update(e.lower() for _, e in plan.endpoints)
    conn = STATE.secrets.connection_string or os.environ.get("AZURE_STORAGE_CONNECTION_STRING")
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


def connection_string_account(conn: str) -> str | None:
    """The storage account a connection string names (its AccountName, else its endpoint's)."""
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


def connection_string_endpoint(conn: str) -> str | None:
    """The blob endpoint a connection string names, explicitly or by its parts."""
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

