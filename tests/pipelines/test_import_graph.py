"""pipelines/ and runners/ import each other without cycles, counting imports inside functions
too (a cycle broken by a function-level import is still a cycle), and the tokenize job's
modules import Beam only in graph.py."""

import ast
import os

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PACKAGES = ("pipelines", "runners")


def _modules() -> dict[str, str]:
    found = {}
    for package in PACKAGES:
        for folder, _, files in os.walk(os.path.join(ROOT, package)):
            for name in files:
                if name.endswith(".py"):
                    path = os.path.join(folder, name)
                    module = os.path.relpath(path, ROOT)[:-3].replace(os.sep, ".")
                    found[module.removesuffix(".__init__")] = path
    return found


def _imports(path: str, known) -> set[str]:
    """The project modules ``path`` imports, anywhere in it (``from a import b`` counts as
    a.b when that is a module, else as a)."""
    out = set()
    for node in ast.walk(ast.parse(open(path, encoding="utf-8").read())):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name in known)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for a in node.names:
                target = f"{node.module}.{a.name}"
                out.add(target if target in known else node.module)
    return {m for m in out if m in known}


def _graph():
    modules = _modules()
    return {m: _imports(p, modules) - {m} for m, p in modules.items()}


def test_no_import_cycle_among_pipelines_and_runners():
    graph = _graph()
    state: dict[str, int] = {}  # 1: on the path, 2: done
    cycles = []

    def visit(module, path):
        state[module] = 1
        for other in sorted(graph[module]):
            if state.get(other) == 1:
                cycles.append(path[path.index(other):] + [other])
            elif other not in state:
                visit(other, path + [other])
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])
    assert cycles == []


def test_only_the_graph_of_the_tokenize_job_imports_beam():
    for module, path in _modules().items():
        if not module.startswith("pipelines.tokenize"):
            continue
        tree = ast.parse(open(path, encoding="utf-8").read())
        beam = [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))
                and any((getattr(n, "module", None) or a.name).startswith("apache_beam")
                        for a in n.names)]
        assert not beam or module == "pipelines.tokenize.graph", module
