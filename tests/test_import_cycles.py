"""No import cycles among tokenbeam's own modules (DESIGN.md rule 15): an ast walk of every
import, top-level and inside functions (an import moved into a function still closes a cycle,
it only hides it until run time)."""

from __future__ import annotations

import ast
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGES = ("runtime", "dataio", "transforms", "pipelines", "runners")


def _modules() -> dict[str, str]:
    """dotted name -> file, for every module of the packages."""
    found = {}
    for package in PACKAGES:
        for folder, dirs, files in os.walk(os.path.join(ROOT, package)):
            dirs[:] = [d for d in dirs if not d.startswith((".", "__"))]
            for name in files:
                if name.endswith(".py"):
                    rel = os.path.relpath(os.path.join(folder, name), ROOT)[:-3]
                    dotted = rel.replace(os.sep, ".")
                    found[dotted.removesuffix(".__init__")] = os.path.join(folder, name)
    return found


def _resolve(name: str, modules: dict[str, str]) -> str | None:
    """The longest project module that ``name`` (a module or module.attribute) names."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def import_graph() -> dict[str, set[str]]:
    modules = _modules()
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for module, path in modules.items():
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), path)
        package = module if path.endswith("__init__.py") else module.rpartition(".")[0]
        for node in ast.walk(tree):
            targets = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")
                    base = ".".join(parts[:len(parts) - node.level + 1] + ([base] if base else []))
                # `from pkg import sub` needs pkg.sub (pkg itself may still be initialising,
                # as when pkg/__init__.py imports its own submodules); `from m import name`, m
                targets = [f"{base}.{a.name}" for a in node.names]
            for target in targets:
                hit = _resolve(target, modules)
                if hit and hit != module:
                    graph[module].add(hit)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected component of more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_the_walk_sees_function_level_imports():
    graph = cycles({"a": {"b"}, "b": {"a"}, "c": set()})
    assert graph == [["a", "b"]]
    assert "dataio.fs" in import_graph()["dataio.readers"]


def test_no_import_cycles():
    found = cycles(import_graph())
    assert not found, "import cycles: " + "; ".join(" <-> ".join(c) for c in found)


def test_lower_layers_never_import_higher_ones():
    # DESIGN.md: pipelines -> transforms -> dataio -> runtime; runners may use pipelines.
    allowed = {"runtime": {"runtime"}, "dataio": {"runtime", "dataio"},
               "transforms": {"runtime", "dataio", "transforms"},
               "pipelines": {"runtime", "dataio", "transforms", "pipelines"}}
    wrong = [(m, t) for m, targets in import_graph().items() for t in targets
             if m.split(".")[0] in allowed and t.split(".")[0] not in allowed[m.split(".")[0]]]
    assert not wrong, wrong


def test_only_the_graph_of_the_tokenize_job_imports_beam():
    """The planner, checks and driver stay Beam-free (--help and --dry-run need no Beam): in the
    tokenize package only graph.py imports it."""
    for module, path in _modules().items():
        if not module.startswith("pipelines.tokenize"):
            continue
        tree = ast.parse(open(path, encoding="utf-8").read())
        beam = [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))
                and any((getattr(n, "module", None) or a.name).startswith("apache_beam")
                        for a in n.names)]
        assert not beam or module == "pipelines.tokenize.graph", module
