"""Where a real Megatron-LM core_v0.16.1 is, for the tests that re-run it live (the committed
fixtures it made are checked without it, in every run).

- the python: ``TOKENBEAM_MEGATRON_PYTHON`` (``MEGATRON_PYTHON`` is read too, as the fixture
  scripts under tests/data spell it), else ``.cache/megatron-venv/bin/python``; it needs
  megatron-core 0.16.1 and torch (CPU is enough), and whatever the test names besides;
- the checkout (for ``tools/``): ``MEGATRON_LM``, else ``.cache/megatron-lm``.
"""

from __future__ import annotations

import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def megatron_python() -> str | None:
    for name in ("TOKENBEAM_MEGATRON_PYTHON", "MEGATRON_PYTHON"):
        if os.environ.get(name):
            return os.environ[name]
    cached = os.path.join(ROOT, ".cache", "megatron-venv", "bin", "python")
    return cached if os.path.exists(cached) else None


def megatron_checkout() -> str | None:
    given = os.environ.get("MEGATRON_LM") or os.path.join(ROOT, ".cache", "megatron-lm")
    return given if os.path.isfile(os.path.join(given, "tools", "preprocess_data.py")) else None


def python_or_skip(needs: str = "") -> str:
    python = megatron_python()
    if python is None or not os.path.exists(python):
        pytest.skip(f"no python with megatron-core here ({python or 'none given'}): set "
                    "TOKENBEAM_MEGATRON_PYTHON to one (megatron-core 0.16.1, torch"
                    f"{', ' + needs if needs else ''}) or create .cache/megatron-venv; "
                    "the committed outputs are checked without it")
    return python


def live_or_skip(needs: str = "") -> tuple[str, str]:
    """(python, Megatron-LM checkout), or skip saying what is missing."""
    python = python_or_skip(needs)
    checkout = megatron_checkout()
    if checkout is None:
        pytest.skip("no Megatron-LM core_v0.16.1 checkout: set MEGATRON_LM to one (its tools/ "
                    "are run) or put it at .cache/megatron-lm; the committed outputs are "
                    "checked without it")
    return python, checkout
