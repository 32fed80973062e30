"""The import graph of pyodide_app and build_tools (module-level and function-level imports, from the
source): the runtime never imports the build layer, and no two modules import each other, directly or
around a cycle."""

from __future__ import annotations

import ast

from .conftest import ROOT

PACKAGES = ("pyodide_app", "build_tools")


def modules() -> dict[str, ast.Module]:
    found = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            found[name] = (path, ast.parse(path.read_text()))
    return found


def import_edges() -> dict[str, set[str]]:
    found = modules()
    edges = {name: set() for name in found}
    for name, (path, tree) in found.items():
        package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = package[: len(package) - node.level + 1] if node.level else []
                module = ".".join(base + ([node.module] if node.module else []))
                targets = [module] + [f"{module}.{alias.name}" for alias in node.names]
            else:
                continue
            for target in targets:
                while target and target not in found:
                    target = target.rpartition(".")[0]
                if target and target != name:
                    edges[name].add(target)
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    state, stack, found = {}, [], []

    def visit(node):
        state[node] = "open"
        stack.append(node)
        for succ in sorted(edges[node]):
            if state.get(succ) == "open":
                found.append(stack[stack.index(succ) :] + [succ])
            elif succ not in state:
                visit(succ)
        stack.pop()
        state[node] = "done"

    for node in sorted(edges):
        if node not in state:
            visit(node)
    return found


def test_the_runtime_never_imports_the_build_layer():
    edges = import_edges()
    assert len(edges) > 40  # the walk found the packages
    wrong = sorted(
        (a, b)
        for a, targets in edges.items()
        for b in targets
        if a.startswith("pyodide_app") and b.startswith("build_tools")
    )
    assert wrong == []


def test_there_are_no_import_cycles():
    assert cycles(import_edges()) == []


def test_the_cycle_finder_finds_one():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == [["a", "b", "c", "a"]]
