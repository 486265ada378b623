"""A real Azurite blob service for the Azure tests.

One Azurite per test session, on 127.0.0.1 with a port the OS picks, its data and debug log in a
temporary folder, stopped by PID. Installed by scripts/setup.d/20-azurite.sh; without it (or
without node) these tests skip and say so. Each test gets a fresh container and a process with
no Azure configuration and no AZURE_* / TOKENBEAM_AZURE_* variables.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import shutil
import signal
import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ACCOUNT = "devstoreaccount1"
# Azurite's fixed, public development key (documented by Microsoft; not a secret).
DEV_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
_LISTENING = re.compile(r"successfully listens on (http://127\.0\.0\.1:(\d+))")


def _azurite_binary() -> str | None:
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
        _stop(self.proc)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}/{ACCOUNT}"

    @property
    def connection_string(self) -> str:
        return (f"DefaultEndpointsProtocol=http;AccountName={ACCOUNT};AccountKey={DEV_KEY};"
                f"BlobEndpoint={self.endpoint};")

    def url(self, container: str, path: str = "") -> str:
        return f"{self.endpoint}/{container}/{path}".rstrip("/")

    def service(self):
        from azure.storage.blob import BlobServiceClient
        return BlobServiceClient.from_connection_string(self.connection_string, retry_total=0)

    def container_sas(self, container: str, **permissions) -> str:
        from azure.storage.blob import ContainerSasPermissions, generate_container_sas
        perms = permissions or dict(read=True, write=True, list=True, delete=True,
                                    create=True, add=True)
        return generate_container_sas(ACCOUNT, container, account_key=DEV_KEY,
                                      permission=ContainerSasPermissions(**perms),
                                      expiry=dt.datetime.now(dt.timezone.utc)
                                      + dt.timedelta(hours=2))

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


@pytest.fixture(scope="session")
def azurite(tmp_path_factory):
    yield from _run_azurite(tmp_path_factory.mktemp("azurite"))


@pytest.fixture
def own_azurite(tmp_path):
    """An Azurite of this test alone, which it may stop (``.stop()``) to cut storage off."""
    yield from _run_azurite(tmp_path / "own-azurite")


def _run_azurite(base: Path):
    binary = _azurite_binary()
    if not binary:
        pytest.skip("Azurite is not installed: run `bash scripts/setup.sh --test` "
                    "(needs node and npm) or set TOKENBEAM_AZURITE to azurite-blob")
    if shutil.which("node") is None:
        pytest.skip("node is not on PATH, so Azurite cannot run")
    base.mkdir(parents=True, exist_ok=True)
    data, debug_log = base / "data", base / "debug.log"
    data.mkdir()
    log = open(base / "azurite.out", "w+")
    proc = subprocess.Popen(
        [binary, "--blobHost", "127.0.0.1", "--blobPort", "0", "--location", str(data),
         "--skipApiVersionCheck", "--disableTelemetry", "--loose", "--debug", str(debug_log)],
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        port = None
        for _ in range(600):   # up to about 60 s on a busy machine
            log.seek(0)
            match = _LISTENING.search(log.read())
            if match:
                port = int(match.group(2))
                break
            if proc.poll() is not None:
                break
            time.sleep(0.1)
        if port is None:
            log.seek(0)
            raise RuntimeError(f"Azurite did not start (exit {proc.poll()}):\n{log.read()}")
        yield Azurite(port=port, debug_log=debug_log, data_dir=data, proc=proc)
    finally:
        _stop(proc)
        log.close()


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


_ENV_PREFIXES = ("AZURE_", "TOKENBEAM_AZURE_", "IDENTITY_", "MSI_")


@pytest.fixture(autouse=True)
def clean_azure_state(monkeypatch):
    """No Azure configuration leaks between tests, in the process or its environment."""
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


@pytest.fixture
def container(azurite) -> str:
    """A fresh, existing container (3-63 lowercase characters)."""
    name = "t" + uuid.uuid4().hex[:20]
    azurite.service().create_container(name)
    return name
