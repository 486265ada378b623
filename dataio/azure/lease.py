"""The output lease on Azure: one run at a time per output folder.

Contract: :func:`acquire_lease` locks an output for one run: a lock blob holding the holder's
text, under a finite lease renewed from a daemon thread; a dead holder's lease expires by
itself. Credentials are those configured for the lock blob's container
(:mod:`dataio.azure.credentials`), as for every other path.
"""

from __future__ import annotations

import threading

from runtime import errors, log
from runtime import redact as redactor
from dataio.azure.credentials import default_credential, location_and_options
from dataio.azure.storage_errors import retry_policy
from dataio.azure.urls import AzurePathError

# Lease requests: a few quick retries, short timeouts, so a renewal (every duration/3 s) never
# waits out the lease it is meant to keep.
LEASE_RETRIES = 2
LEASE_CLIENT_KWARGS = {"connection_timeout": 5, "read_timeout": 10}
LEASE_MIN_SECONDS, LEASE_MAX_SECONDS = 15, 60   # the service's bounds for a finite lease
_HOLDER_SHOWN_CHARS = 400
_LOG = log.get("azure.lease")   # under tokenbeam's logger, so that its lines reach the user


class LeaseHeldError(RuntimeError):
    """Another process holds the lease on a lock blob; ``holder`` is the text it stored."""

    def __init__(self, url: str, holder: str):
        self.url, self.holder = url, holder
        super().__init__(
            f"{url} is locked by another run: {holder or '(holder not recorded)'}. "
            "Wait for that run to finish or stop it, then rerun the same command; if it died, "
            f"its lease expires by itself within {LEASE_MAX_SECONDS} s of its last renewal.")


class LeaseLostError(errors.RunError):
    """The lease of a :class:`BlobLease` could not be kept (expired and taken, or deleted).
    ``holder``: the lock blob's metadata now (another run's), None when the blob is gone;
    ``since``: when the blob last changed (the taker wrote its text), None when gone."""

    def __init__(self, message: str, *, holder: dict | None = None, since=None):
        super().__init__(message)
        self.holder, self.since = holder, since


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
        # the text of a holder whose lease had expired (or was broken) when this one was taken
        self.previous: str | None = None
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
                    # Said once, by the commit that finds it lost (OutputGuard.verify).
                    _LOG.debug("%s", self.lost)
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
            # Known already when the run stopped for it (the renewal or a commit found it lost).
            (_LOG.debug if self.lost else _LOG.warning)(
                "lease on %s was no longer ours (%s); left the lock blob to its holder",
                self.url, error.error_code or error.status_code)
        finally:
            self._client.close()

    def __enter__(self) -> "BlobLease":
        return self

    def __exit__(self, *exc) -> None:
        self.release()


def acquire_lease(url: str, *, holder: bytes, duration_s: int = 60,
                  is_stale=None, metadata: dict[str, str] | None = None) -> BlobLease:
    """Lock ``url`` (a blob; created if absent) for this process with a finite blob lease.

    The blob's content becomes ``holder`` (a short text naming host, PID, start time), written
    under the lease; the lease is renewed every ``duration_s / 3`` s from a daemon thread, so
    when this process dies the service itself frees the lock within ``duration_s`` s. Raises
    :class:`LeaseHeldError` with the current holder's text when another process holds it, unless
    ``is_stale(text)`` says that holder is provably dead: then its lease is broken, on condition
    that the blob is unchanged since its text was read (so a live run that took it meanwhile keeps
    it), and taken; the returned lease's ``stale`` is the dead holder's text. A holder whose lease
    had expired (or was broken) is replaced: the returned lease's ``previous`` is its text.
    ``metadata`` (ASCII strings: run id, host, pid) goes on the blob with ``holder``, where a
    check (:func:`renew_lease`) reads it without downloading the text.
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
            created = True
            try:
                client.upload_blob(holder, overwrite=False, metadata=metadata)
            except HttpResponseError as error:
                if error.status_code not in (409, 412):   # exists (and maybe leased): fine
                    raise
                created = False
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
            previous = None
            try:
                if not created and stale is None:   # a holder whose lease ran out before ours
                    previous = client.download_blob(lease=lease).readall().decode("utf-8",
                                                                                  "replace")
                client.upload_blob(holder, overwrite=True, lease=lease, metadata=metadata)
            except BaseException:
                lease.release()
                raise
            taken = BlobLease(url=shown, client=client, lease=lease, duration_s=int(duration_s))
            taken.stale = stale
            taken.previous = previous if previous and previous != holder.decode("utf-8",
                                                                                "replace") else None
            return taken
        raise LeaseHeldError(shown, "(changing hands too fast to read)")
    except BaseException:
        client.close()
        raise


def renew_lease(url: str, lease_id: str) -> None:
    """Renew the lease ``lease_id`` on the lock blob ``url`` (any process may: a worker proves
    so that the run it works for still holds the output, for the next ``duration_s`` s).
    Raises :class:`LeaseLostError` when it is no longer held under that id (the lease was
    taken by another holder, or the blob is gone), carrying the blob's metadata and when it
    changed; a lease that expired with no one taking it is simply renewed."""
    from azure.core.exceptions import HttpResponseError, ResourceNotFoundError
    from azure.storage.blob import BlobLeaseClient

    client, shown = _sync_blob_client(url)
    with client:
        try:
            BlobLeaseClient(client, lease_id=lease_id).renew()
            return
        except HttpResponseError as error:
            if error.status_code not in (404, 409, 412):
                raise
            reason = error.error_code or error.status_code
        try:
            props = client.get_blob_properties()
        except ResourceNotFoundError:
            raise LeaseLostError(f"lease on {shown} lost ({reason}); the lock blob is gone") \
                from None
        raise LeaseLostError(f"lease on {shown} lost ({reason})", holder=dict(props.metadata or {}),
                             since=props.last_modified)


def _holder_text(data: bytes) -> str:
    text = redactor.redact(data.decode("utf-8", "replace").strip())
    return text if len(text) <= _HOLDER_SHOWN_CHARS else text[:_HOLDER_SHOWN_CHARS] + " ..."


def _sync_blob_client(url: str):
    """(a synchronous azure-storage-blob ``BlobClient`` for ``url`` with the credential
    configured for its container, the URL without any SAS to show in messages)."""
    from azure.storage.blob import BlobClient

    loc, options = location_and_options(url)
    if not loc.blob:
        raise AzurePathError(f"{loc.url()}: a lease needs a blob path, not a container")
    kwargs = {**LEASE_CLIENT_KWARGS,
              "retry_policy": retry_policy(asynchronous=False, at_most=LEASE_RETRIES)}
    if options.get("connection_string"):
        client = BlobClient.from_connection_string(options["connection_string"], loc.container,
                                                   loc.blob, **kwargs)
    else:
        _, credential = default_credential()
        client = BlobClient(loc.endpoint, loc.container, loc.blob, credential=credential,
                            **kwargs)
    return client, loc.url()
