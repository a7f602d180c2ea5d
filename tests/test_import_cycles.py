"""No module of azgpu imports, at module level, a module that imports it back (directly or around a loop).

Cycles made modules load only in one order and hid which one owned what (cli <-> cli_deploy,
profiles -> rules -> profiles). A second test holds imports inside functions to the same rule, since
such an import only hides a loop. A third counts imports under TYPE_CHECKING too: nothing runs them, but
a type one module names from another is a dependency all the same (interface <-> health_gate once was one).
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "azgpu"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _resolve(current: str, is_package: bool, level: int, target: str | None) -> str:
    base = current.split(".") if is_package else current.split(".")[:-1]
    if level > 1:
        base = base[: len(base) - (level - 1)]
    return ".".join([*base, *([target] if target else [])])


def _statements(tree: ast.Module, anywhere: bool, typing: bool = False):
    """The import statements that run: at module level, or (anywhere) inside functions too; those under
    TYPE_CHECKING, which only type checkers read, only with typing."""
    todo = list(tree.body)
    while todo:
        node = todo.pop(0)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test) and not typing:
            continue
        yield node
        if anywhere:
            todo.extend(ast.iter_child_nodes(node))


def _edges(anywhere: bool = False, typing: bool = False) -> dict[str, set[str]]:
    modules = {_module_name(p): p for p in SRC.rglob("*.py")}
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for name, path in modules.items():
        tree = ast.parse(path.read_text())
        for node in _statements(tree, anywhere, typing):
            if isinstance(node, ast.ImportFrom):
                if node.level == 0:
                    if not (node.module or "").startswith("azgpu"):
                        continue
                    target = node.module
                else:
                    target = _resolve(name, path.name == "__init__.py", node.level, node.module)
                candidates = [f"{target}.{a.name}" for a in node.names] + [target]
            elif isinstance(node, ast.Import):
                candidates = [a.name for a in node.names if a.name.startswith("azgpu")]
            else:
                continue
            for candidate in candidates:
                if candidate in modules and candidate != name:
                    graph[name].add(candidate)
                    break
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            # A package's __init__ importing its own submodules is how packages are built, not a cycle.
            if nxt.startswith(node + "."):
                continue
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_no_module_level_import_cycles():
    graph = _edges()
    assert "azgpu.cli.deploy" in graph and "azgpu.rules" in graph  # the walk sees the package
    assert _cycle(graph) is None, " -> ".join(_cycle(graph))


def test_no_import_cycle_hides_inside_a_function():
    """An import inside a function that closes a loop only moves the cycle to run time: the modules
    still depend on each other both ways (deploy's create, health gate and whatif once did)."""
    graph = _edges(anywhere=True)
    assert _cycle(graph) is None, " -> ".join(_cycle(graph))


def test_no_import_cycle_even_of_types():
    """A type-only import (under TYPE_CHECKING) that closes a loop is still two modules that need each other:
    the type belongs in a module both import (deploy/interface.py, health/model.py)."""
    graph = _edges(anywhere=True, typing=True)
    assert _cycle(graph) is None, " -> ".join(_cycle(graph))


def test_type_only_imports_are_counted():
    """The walk sees an import under TYPE_CHECKING (reservations names the preflight's type that way)."""
    assert "azgpu.deploy.interface" in _edges(anywhere=True, typing=True)["azgpu.deploy.reservations"]
    assert "azgpu.deploy.interface" not in _edges(anywhere=True)["azgpu.deploy.reservations"]


def test_the_check_finds_a_cycle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
