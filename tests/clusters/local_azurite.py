"""A throw-away Azurite blob service (npm ``azurite``, installed by scripts/setup.d/20-azurite.sh)
for the tests and the benchmarks (not shipped).

:func:`run_azurite` starts one on 127.0.0.1, its data and debug log under a folder, and stops it
by PID when the generator is closed: on a port the OS picks, or on a given port inside a private
network namespace (``prefix``: ``ip netns exec NAME``; the Spark tests run their cluster there,
see tests/clusters/local_spark.py). :class:`Azurite` gives its endpoint, connection string and a
service client (which only a process in the same network namespace can use).
"""

from __future__ import annotations

import datetime as dt
import os
import re
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ACCOUNT = "devstoreaccount1"
# Azurite's fixed, public development key (documented by Microsoft; not a secret).
DEV_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
_LISTENING = re.compile(r"successfully listens on (http://127\.0\.0\.1:(\d+))")


def connection_string(port: int) -> str:
    """The connection string of an Azurite on 127.0.0.1:``port`` (account key included)."""
    return (f"DefaultEndpointsProtocol=http;AccountName={ACCOUNT};AccountKey={DEV_KEY};"
            f"BlobEndpoint=http://127.0.0.1:{port}/{ACCOUNT};")


def container_sas(container: str, hours: float = 2, **permissions) -> str:
    """A SAS for ``container`` of the development account (which need not exist yet), valid
    for ``hours``; read, write, list, delete, create and add unless ``permissions`` say."""
    from azure.storage.blob import ContainerSasPermissions, generate_container_sas

    perms = permissions or dict(read=True, write=True, list=True, delete=True, create=True,
                                add=True)
    return generate_container_sas(ACCOUNT, container, account_key=DEV_KEY,
                                  permission=ContainerSasPermissions(**perms),
                                  expiry=dt.datetime.now(dt.timezone.utc)
                                  + dt.timedelta(hours=hours))


def missing() -> str | None:
    """Why Azurite cannot run here (None when it can)."""
    if not azurite_binary():
        return ("Azurite is not installed: run `bash scripts/setup.sh --test` (needs node and "
                "npm) or set TOKENBEAM_AZURITE to azurite-blob")
    if shutil.which("node") is None:
        return "node is not on PATH, so Azurite cannot run"
    return None


class NotInstalled(RuntimeError):
    """Azurite (or node) is missing: the caller skips, saying why."""


def azurite_binary() -> str | None:
    explicit = os.environ.get("TOKENBEAM_AZURITE")
    if explicit:
        return explicit
    cached = ROOT / ".cache" / "azurite" / "node_modules" / ".bin" / "azurite-blob"
    if cached.exists():
        return str(cached)
    return shutil.which("azurite-blob")


@dataclass
class Azurite:
    port: int
    debug_log: Path
    data_dir: Path
    proc: subprocess.Popen | None = None

    def stop(self) -> None:
        """Stop this Azurite (its port then refuses connections): storage unreachable."""
        stop(self.proc)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}/{ACCOUNT}"

    @property
    def connection_string(self) -> str:
        return connection_string(self.port)

    def url(self, container: str, path: str = "") -> str:
        return f"{self.endpoint}/{container}/{path}".rstrip("/")

    def service(self):
        from azure.storage.blob import BlobServiceClient
        return BlobServiceClient.from_connection_string(self.connection_string, retry_total=0)

    def container_sas(self, container: str, **permissions) -> str:
        return container_sas(container, **permissions)

    def responses(self) -> list[int]:
        """Status codes of every request Azurite has answered so far (from its debug log)."""
        text = self.debug_log.read_text(errors="replace") if self.debug_log.exists() else ""
        return [int(m) for m in re.findall(r"End response\. .*?StatusCode=(\d+)", text)]

    def settled_responses(self, expected_at_least: int = 0) -> list[int]:
        """:meth:`responses` once the (asynchronously written) debug log has caught up."""
        previous = None
        for _ in range(100):
            current = self.responses()
            if current == previous and len(current) >= expected_at_least:
                return current
            previous = current
            time.sleep(0.05)
        return self.responses()


def run_azurite(base: Path, *, prefix: tuple[str, ...] = (), port: int = 0):
    """Generator: start Azurite (data, logs under ``base``), yield its :class:`Azurite`, stop it
    by PID when closed. ``prefix`` runs it through another command (``ip netns exec NAME``);
    ``port`` 0 lets the OS pick. Raises :class:`NotInstalled` when it cannot run here."""
    why = missing()
    if why:
        raise NotInstalled(why)
    binary = azurite_binary()
    base = Path(base)
    base.mkdir(parents=True, exist_ok=True)
    data, debug_log = base / "data", base / "debug.log"
    data.mkdir()
    log = open(base / "azurite.out", "w+")
    proc = subprocess.Popen(
        [*prefix, binary, "--blobHost", "127.0.0.1", "--blobPort", str(port),
         "--location", str(data), "--skipApiVersionCheck", "--disableTelemetry", "--loose",
         "--debug", str(debug_log)],
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        found = None
        for _ in range(600):   # up to about 60 s on a busy machine
            log.seek(0)
            match = _LISTENING.search(log.read())
            if match:
                found = int(match.group(2))
                break
            if proc.poll() is not None:
                break
            time.sleep(0.1)
        if found is None:
            log.seek(0)
            raise RuntimeError(f"Azurite did not start (exit {proc.poll()}):\n{log.read()}")
        yield Azurite(port=found, debug_log=debug_log, data_dir=data, proc=proc)
    finally:
        stop(proc)
        log.close()


def stop(proc: subprocess.Popen | None) -> None:
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)


# --- copying folders in and out (also as a command, for processes in a network namespace) ---

def upload(connection_string: str, container: str, local_dir: str, prefix: str) -> None:
    """Every file of ``local_dir`` (not recursive) to ``container/prefix/``; creates the
    container when it is missing."""
    from azure.core.exceptions import ResourceExistsError
    from azure.storage.blob import BlobServiceClient

    service = BlobServiceClient.from_connection_string(connection_string)
    try:
        service.create_container(container)
    except ResourceExistsError:
        pass
    client = service.get_container_client(container)
    for name in sorted(os.listdir(local_dir)):
        path = os.path.join(local_dir, name)
        if os.path.isfile(path):
            with open(path, "rb") as f:
                client.upload_blob(f"{prefix}/{name}", f, overwrite=True)


def download(connection_string: str, container: str, prefix: str, local_dir: str) -> None:
    """Every blob under ``container/prefix/`` into ``local_dir``, keeping relative paths."""
    from azure.storage.blob import BlobServiceClient

    client = BlobServiceClient.from_connection_string(connection_string) \
        .get_container_client(container)
    for blob in client.list_blobs(name_starts_with=prefix.rstrip("/") + "/"):
        target = os.path.join(local_dir, blob.name[len(prefix.rstrip("/")) + 1:])
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "wb") as f:
            f.write(client.download_blob(blob.name).readall())


def main(argv=None) -> int:
    """``python -m tests.clusters.local_azurite upload|download CONTAINER PREFIX DIR``, with
    the connection string in AZURE_STORAGE_CONNECTION_STRING (never on a command line)."""
    import sys

    command, container, prefix, folder = (argv if argv is not None else sys.argv[1:])
    conn = os.environ["AZURE_STORAGE_CONNECTION_STRING"]
    if command == "upload":
        upload(conn, container, folder, prefix)
    elif command == "download":
        download(conn, container, prefix, folder)
    else:
        raise SystemExit(f"unknown command {command!r}: upload or download")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


def azurite_or_skip(base):
    """:func:`run_azurite` for a pytest fixture: yields the service, stops it after; skips the
    test (saying why) where Azurite is not installed."""
    import pytest

    started = run_azurite(base)
    try:
        service = next(started)
    except NotInstalled as exc:
        pytest.skip(str(exc))
    try:
        yield service
    finally:
        started.close()


_ENV_PREFIXES = ("AZURE_", "TOKENBEAM_AZURE_", "IDENTITY_", "MSI_")


def fresh_azure_state(monkeypatch):
    """A generator fixture body: no AZURE_* / TOKENBEAM_AZURE_* variables, no Azure state in the
    process (dataio.azure, adlfs's instance cache) before and after the test. Used autouse by
    tests/e2e/azure/ and tests/dataio/azure/."""
    for name in list(os.environ):
        if name.startswith(_ENV_PREFIXES):
            monkeypatch.delenv(name)
    from dataio import azure
    azure.reset()
    _clear_fsspec_cache()
    yield
    azure.reset()
    _clear_fsspec_cache()


def _clear_fsspec_cache():
    try:
        from adlfs import AzureBlobFileSystem
        AzureBlobFileSystem.clear_instance_cache()
    except ImportError:
        pass
