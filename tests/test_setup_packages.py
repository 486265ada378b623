"""setup.py lists every package of the tree: an installed tokenbeam (what cluster nodes run,
runners/templates/) must hold the same modules as the checkout the tests import."""

import ast
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SKIP = {"tests", "bench", "scripts", "build"}


def _listed() -> set[str]:
    with open(os.path.join(ROOT, "setup.py"), encoding="utf-8") as f:
        tree = ast.parse(f.read())
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg == "packages":
            return set(ast.literal_eval(node.value))
    raise AssertionError("setup.py names no packages")


def _in_tree() -> set[str]:
    found = set()
    for folder, dirs, files in os.walk(ROOT):
        rel = os.path.relpath(folder, ROOT)
        top = rel.split(os.sep)[0]
        dirs[:] = [d for d in dirs if not d.startswith(".") and d != "__pycache__"]
        if rel != "." and top not in SKIP and "__init__.py" in files:
            found.add(rel.replace(os.sep, "."))
    return found


def test_every_package_is_in_setup_py():
    assert _in_tree() - _listed() == set()
