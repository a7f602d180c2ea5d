"""The tests call `create(session, request, CreateOptions(...))` (azgpu.deploy) and assert on its result, so
they document the interface callers use. A helper that takes create's options as its own keywords and builds
CreateOptions/GateOptions/CheckOptions from them (the 21-keyword shim deploy_support.py held until #30) would
let them drift back to the old interface: none may exist anywhere under tests/."""

from __future__ import annotations

import ast
from pathlib import Path

import deploy_support

TESTS = Path(__file__).resolve().parents[1]
OPTIONS = {"CreateOptions", "GateOptions", "CheckOptions"}


def _name(node: ast.expr) -> str:
    return node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""


def _calls(function: ast.AST, names: set[str]) -> list[ast.Call]:
    return [n for n in ast.walk(function) if isinstance(n, ast.Call) and _name(n.func) in names]


def create_shims(source: str) -> list[str]:
    """The functions in `source` that call a create and fill its options from their own parameters."""
    tree = ast.parse(source)
    creates = {"create"} | {alias.asname for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                            for alias in node.names if alias.name == "create" and alias.asname}
    found = []
    for function in ast.walk(tree):
        if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            continue
        if getattr(function, "name", "").startswith("test_") or not _calls(function, creates):
            continue  # a test's own parameters (pytest's parametrize) are not a wrapper's keywords
        args = function.args
        params = {a.arg for a in args.posonlyargs + args.args + args.kwonlyargs}
        params |= {a.arg for a in (args.vararg, args.kwarg) if a}
        for call in _calls(function, OPTIONS):
            values = [k.value for k in call.keywords] + list(call.args)
            if any(isinstance(n, ast.Name) and n.id in params for v in values for n in ast.walk(v)):
                found.append(f"{getattr(function, 'name', '<lambda>')} (line {function.lineno})")
                break
    return found


def test_no_test_helper_wraps_create_with_keyword_options():
    shims = {str(path.relative_to(TESTS)): found for path in sorted(TESTS.rglob("*.py"))
             if (found := create_shims(path.read_text()))}
    assert shims == {}, f"call create(session, request, CreateOptions(...)) directly instead of: {shims}"
    assert not hasattr(deploy_support, "create")


def test_the_guard_finds_the_shim_it_replaced():
    """The keyword shim as deploy_support.py held it (abridged), and a **kwargs wrapper, are both found."""
    shim = '''
from azgpu.deploy.cluster_create import create as deploy_create

def create(session, request, *, dry_run=False, check=False, max_rounds=3, check_options=None):
    gate = GateOptions(check=check, max_rounds=max_rounds, node=CheckOptions(**(check_options or {})))
    return deploy_create(session, request, CreateOptions(dry_run=dry_run, gate=gate)).as_dict()
'''
    wrapper = ("def deploy(session, request, **options):\n"
               "    return create(session, request, CreateOptions(**options))\n")
    assert create_shims(shim) == ["create (line 4)"]
    assert create_shims(wrapper) == ["deploy (line 1)"]
    # Calling create directly, with options built from constants or a test's parameters, is not a shim.
    direct = ("def helper(session, profile):\n"
              "    return create(session, request(profile), CreateOptions(dry_run=True))\n"
              "def test_x(session, fallback):\n    create(session, request(), CreateOptions(**fallback))\n")
    assert create_shims(direct) == []
