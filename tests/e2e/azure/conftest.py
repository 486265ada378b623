"""A real Azurite blob service for the Azure tests.

One Azurite per test session, on 127.0.0.1 with a port the OS picks, its data and debug log in a
temporary folder, stopped by PID. Installed by scripts/setup.d/20-azurite.sh; without it (or
without node) these tests skip and say so. Each test gets a fresh container and a process with
no Azure configuration and no AZURE_* / TOKENBEAM_AZURE_* variables.
"""

from __future__ import annotations

import uuid

import pytest

from tests.clusters.local_azurite import (ACCOUNT, DEV_KEY, Azurite, azurite_or_skip,
                                          fresh_azure_state)

__all__ = ["ACCOUNT", "DEV_KEY", "Azurite"]


@pytest.fixture(scope="session")
def azurite(tmp_path_factory):
    yield from azurite_or_skip(tmp_path_factory.mktemp("azurite"))


@pytest.fixture
def own_azurite(tmp_path):
    """An Azurite of this test alone, which it may stop (``.stop()``) to cut storage off."""
    yield from azurite_or_skip(tmp_path / "own-azurite")


@pytest.fixture(autouse=True)
def clean_azure_state(monkeypatch):
    """No Azure configuration leaks between tests, in the process or its environment."""
    yield from fresh_azure_state(monkeypatch)


@pytest.fixture
def container(azurite) -> str:
    """A fresh, existing container (3-63 lowercase characters)."""
    name = "t" + uuid.uuid4().hex[:20]
    azurite.service().create_container(name)
    return name
