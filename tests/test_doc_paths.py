"""What README.md and docs/ name in the project exists: file paths in backquotes
(`pipelines/tokenize/driver.py`, `runners/flink_slurm.yaml`), `from X import Y` lines, the modules
of `python -m X`, and dotted names (`dataio.locations.same_location`). A module that moves
fails here until the pages follow it (tests/test_readme.py checks the commands' flags)."""

from __future__ import annotations

import importlib
import importlib.util
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("pipelines", "transforms", "dataio", "runtime", "runners")
TOPS = PACKAGES + ("tests", "bench", "scripts", "docs", "notes")
PAGES = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
_PKG = "|".join(PACKAGES)

PATH = re.compile(r"`([A-Za-z_][\w./-]*\.(?:py|yaml|yml|sh|sbatch|txt|xml|java)|[a-z_]+/[\w/]+/)`")
FROM_IMPORT = re.compile(rf"^\s*(?:>>> )?from ((?:{_PKG})[\w.]*) import ([\w, ()]+)", re.M)
PYTHON_M = re.compile(rf"python3? -m ((?:{_PKG})(?:\.\w+)*)\b(?![.<])")
DOTTED = re.compile(rf"`((?:{_PKG})(?:\.\w+)+)`")


def missing_paths(text: str) -> list[str]:
    out = []
    for path in PATH.findall(text):
        if "/" in path and path.split("/")[0] in TOPS:
            if not (REPO / path).exists() and not list(REPO.glob(path)):
                out.append(f"{path}: no such file")
    return out


def _module(name: str):
    try:
        if importlib.util.find_spec(name) is None:
            return None
    except ModuleNotFoundError:
        return None
    return importlib.import_module(name)


def missing_names(text: str) -> list[str]:
    out = []
    for module_name, names in FROM_IMPORT.findall(text):
        module = _module(module_name)
        if module is None:
            out.append(f"from {module_name}: no such module")
            continue
        for name in (n.strip(" ()").split(" as ")[0].strip() for n in names.split(",")):
            if name and not hasattr(module, name) and _module(f"{module_name}.{name}") is None:
                out.append(f"from {module_name} import {name}: no such name")
    for module_name in PYTHON_M.findall(text):
        if _module(module_name) is None:
            out.append(f"python -m {module_name}: no such module")
    for dotted in DOTTED.findall(text):
        parts = dotted.split(".")
        for i in range(len(parts), 0, -1):
            obj = _module(".".join(parts[:i]))
            if obj is not None:
                break
        found = obj is not None
        for attr in parts[i:] if found else ():
            if not hasattr(obj, attr):
                found = False
                break
            obj = getattr(obj, attr)
        if not found:
            out.append(f"{dotted}: not found")
    return out


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(REPO).as_posix())
def test_named_paths_and_imports_exist(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    problems = missing_paths(text) + missing_names(text)
    assert not problems, f"{page.relative_to(REPO)}: " + "; ".join(problems)


def test_the_checker_sees_stale_names() -> None:
    stale = ("see `pipelines/_tokenize_plan.py` and `dataio/errors.py`;\n"
             "from dataio.readers import find_inputs\n"
             "python -m dataio.worker_main; `transforms.tokenizer.no_such_name`\n")
    assert missing_paths(stale) == ["pipelines/_tokenize_plan.py: no such file",
                                    "dataio/errors.py: no such file"]
    assert missing_names(stale) == ["from dataio.readers import find_inputs: no such name",
                                    "python -m dataio.worker_main: no such module",
                                    "transforms.tokenizer.no_such_name: not found"]
    assert missing_names("from dataio.discovery import find_inputs\n"
                         "python -m pipelines.<name>; `runners.spark`") == []
