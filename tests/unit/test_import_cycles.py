"""No import cycle among farm's modules, nor among its packages (farm.engine, farm.report, ...).

The imports are read from the source with `ast`, every one of them: module level, inside
functions, and under `if TYPE_CHECKING:` (a cycle hidden there is still two modules that need each
other). A module importing its own package's `__init__` counts as an edge too.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import farm

ROOT = Path(farm.__file__).resolve().parent


def _modules() -> dict[str, Path]:
    found = {}
    for path in ROOT.rglob("*.py"):
        parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


MODULES = _modules()


def _resolve(name: str) -> str | None:
    """The farm module a dotted import name lands in (`farm.store.Metric` -> `farm.store`)."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _imported(module: str, path: Path) -> Iterator[tuple[str, int]]:
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([node.module] if node.module else [])])
            names = [base] + [f"{base}.{alias.name}" for alias in node.names]
        for name in names:
            target = _resolve(name) if name.split(".")[0] == "farm" else None
            if target is not None and target != module:
                yield target, node.lineno


def _graph() -> dict[str, dict[str, int]]:
    """module -> {imported module: line of the first import}"""
    graph: dict[str, dict[str, int]] = {}
    for module, path in MODULES.items():
        edges: dict[str, int] = {}
        for target, line in _imported(module, path):
            edges.setdefault(target, line)
        graph[module] = edges
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one node (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in sorted(graph.get(node, ())):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def _package(module: str) -> str:
    return ".".join(module.split(".")[:2])


def _describe(cycle: list[str], graph: dict[str, dict[str, int]], of: dict[str, str]) -> str:
    members = set(cycle)
    edges = [
        f"{module} -> {target} ({MODULES[module].relative_to(ROOT.parent)}:{line})"
        for module, targets in graph.items()
        for target, line in targets.items()
        if of.get(module, module) in members
        and of.get(target, target) in members
        and of.get(module, module) != of.get(target, target)
    ]
    return " | ".join(sorted(edges))


def test_the_reader_sees_imports_of_every_kind() -> None:
    # The engine's runner imports the scheduler at module level; the reader must see that edge,
    # else an empty graph would pass the tests below.
    graph = _graph()
    assert "farm.engine.scheduler" in graph["farm.engine.runner"]
    assert len(graph) == len(MODULES) > 100
    assert sum(len(edges) for edges in graph.values()) > 300


def test_no_import_cycle_between_modules() -> None:
    graph = _graph()
    cycles = _cycles({module: set(edges) for module, edges in graph.items()})
    identity = {module: module for module in graph}
    assert not cycles, "; ".join(_describe(cycle, graph, identity) for cycle in cycles)


def test_no_import_cycle_between_packages() -> None:
    graph = _graph()
    packages: dict[str, set[str]] = {}
    for module, edges in graph.items():
        here = _package(module)
        packages.setdefault(here, set()).update(p for p in map(_package, edges) if p != here)
    cycles = _cycles(packages)
    of = {module: _package(module) for module in graph}
    assert not cycles, "; ".join(_describe(cycle, graph, of) for cycle in cycles)


def test_a_cycle_is_found_and_named() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []
