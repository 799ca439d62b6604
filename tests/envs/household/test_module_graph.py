"""The household package's own imports form no cycle, and none is hidden in a function (issue 23).

Read from the source with ``ast``: every ``scars.envs.household.*`` import at module level is an edge; the graph
must be acyclic. A function-level import of a project module is refused (it is how a cycle hides); function-level
imports of the optional extras (textworld, alfworld) stay, since they are what makes those extras optional.
"""

from __future__ import annotations

import ast
from pathlib import Path

import scars.envs.household as household

PACKAGE = "scars.envs.household"
ROOT = Path(household.__file__).parent


def _imports(tree: ast.Module) -> tuple[set[str], list[tuple[int, str]]]:
    """(modules this module imports at top level, (line, module) of project imports inside functions)."""
    top: set[str] = set()
    nested: list[tuple[int, str]] = []

    def names(node: ast.AST) -> list[str]:
        if isinstance(node, ast.ImportFrom) and node.module:
            return [node.module]
        if isinstance(node, ast.Import):
            return [a.name for a in node.names]
        return []

    for node in tree.body:
        top.update(names(node))
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for inner in ast.walk(node):
                nested += [(inner.lineno, n) for n in names(inner) if n.startswith("scars.")]
    return top, nested


def _graph() -> tuple[dict[str, set[str]], dict[str, list[tuple[int, str]]]]:
    graph, nested = {}, {}
    for path in sorted(ROOT.glob("*.py")):
        name = path.stem
        top, inside = _imports(ast.parse(path.read_text()))
        graph[name] = {m.rsplit(".", 1)[1] for m in top if m.startswith(PACKAGE + ".")}
        nested[name] = inside
    return graph, nested


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt) :] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_household_imports_have_no_cycle():
    graph, _ = _graph()
    assert {"world", "spec", "game_file", "textworld_game", "textworld_env", "env"} <= set(graph)
    assert _cycle(graph) is None, f"import cycle: {' -> '.join(_cycle(graph) or [])}"


def test_no_project_import_hides_in_a_function():
    _, nested = _graph()
    hidden = {m: v for m, v in nested.items() if v}
    assert not hidden, f"function-level imports of project modules: {hidden}"


def test_the_cycle_check_finds_a_cycle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None
