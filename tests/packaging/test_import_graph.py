"""The project's import graph: no cycles (counting imports inside functions too, so a cycle cannot hide behind a
function-level import), dependencies point one way between the packages, and the public library imports nothing
from the rest of the agent package."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = ("agents", "disequilibrium", "envs", "experiments", "synthesis")
LAYERS = ("synthesis", "envs", "disequilibrium", "agents", "experiments")
"""``synthesis`` ← ``envs`` ← ``disequilibrium`` ← ``agents`` ← ``experiments``: a package imports only from its left."""


def modules(root: Path = ROOT) -> dict[str, Path]:
    found = {}
    for folder in FOLDERS:
        for path in (root / folder).rglob("*.py"):
            parts = path.relative_to(root).with_suffix("").parts
            found["scars." + ".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def import_graph(sources: dict[str, str]) -> dict[str, set[str]]:
    """Module → the project modules it imports anywhere in its body, inside functions too (``from a import b``
    counts ``a.b`` when ``a.b`` is a module). Imports under ``if TYPE_CHECKING:`` do not count: they never run, and
    they are how two modules annotate with each other's types."""
    graph: dict[str, set[str]] = {m: set() for m in sources}

    def resolve(name: str) -> str | None:
        while name and name not in sources:
            name = name.rpartition(".")[0]
        return name or None

    for module, source in sources.items():
        tree = ast.parse(source)
        typing_only = {
            id(inner)
            for node in ast.walk(tree)
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
            for inner in ast.walk(node)
        }
        for node in ast.walk(tree):
            if id(node) in typing_only:
                continue
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [f"{node.module}.{a.name}" for a in node.names]
            for name in names:
                target = resolve(name) if name.startswith("scars.") else None
                if target is not None and target != module:
                    graph[module].add(target)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
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
    return found


def test_the_cycle_check_fires_on_a_cycle_hidden_in_a_function():
    sources = {
        "scars.a": "from scars.b import f\n",
        "scars.b": "def f():\n    from scars.a import g\n",
        "scars.c": "import scars.a\n",
        "scars.d": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from scars.e import E\n",
        "scars.e": "from scars.d import D\n",
    }
    assert cycles(import_graph(sources)) == [["scars.a", "scars.b"]]


def test_the_project_has_no_import_cycle():
    sources = {m: p.read_text() for m, p in modules().items()}
    assert cycles(import_graph(sources)) == []


def test_dependencies_point_one_way_and_the_library_stays_in_its_room():
    sources = {m: p.read_text() for m, p in modules().items()}
    upward = []
    for module, targets in import_graph(sources).items():
        layer = LAYERS.index(module.split(".")[1])
        for target in targets:
            if LAYERS.index(target.split(".")[1]) > layer:
                upward.append(f"{module} -> {target}")
            if (
                module.startswith("scars.agents.runtime")
                and target.startswith("scars.agents.")
                and not (target.startswith("scars.agents.runtime"))
            ):
                upward.append(f"{module} -> {target} (the public library into the agent package)")
    assert upward == []
