"""The end-to-end tier: every test under tests/e2e/ runs a whole job (pipelines.*.run, a CLI
subprocess), injects faults into one, or needs a real service (Azurite, Flink, SLURM, Spark, Livy,
YARN, a live Megatron). All of them are marked slow here, by folder, so `pytest -m "not slow"` (the
unit tier) never collects one and a new file here needs no marker of its own."""

import os

import pytest

E2E = os.path.dirname(os.path.abspath(__file__))


def pytest_collection_modifyitems(config, items):
    # A conftest's hook sees the whole session's items, not only this folder's: filter by path.
    for item in items:
        if os.path.abspath(str(item.path)).startswith(E2E + os.sep):
            item.add_marker(pytest.mark.slow)
