"""The dataio/azure unit tests start from a process with no Azure configuration, as the service
tests do (tests/e2e/azure/conftest.py), without starting Azurite."""

import pytest

from tests.clusters.local_azurite import fresh_azure_state


@pytest.fixture(autouse=True)
def clean_azure_state(monkeypatch):
    yield from fresh_azure_state(monkeypatch)
