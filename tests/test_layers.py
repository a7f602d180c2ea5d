"""The one-way arrows of ARCHITECTURE.md: no import, at module level or inside a function, runs back up.

Layers, top down: the command line (azgpu.cli); the public face (azgpu/__init__.py) and the verbs that
talk to Azure (azgpu.deploy, azgpu.slurm); the offline core (everything else: request, spec, rules,
plan, renderers, the node-side health code, pricing ...). The fake Azure (azgpu.testing) stands beside
the product as Azure does: the product reaches it only through --simulate's two doors, and it never
imports the deploy layer or the command line (it answers HTTP as Azure would, whatever azgpu does).
"""

from __future__ import annotations

import ast

from test_import_cycles import SRC, _module_name, _resolve

# Where the product may open the fake: --simulate builds its session here, and `provision simulate`
# shapes the simulated subscription.
SIMULATE_DOORS = ("azgpu.deploy.simulate", "azgpu.cli.simulate", "azgpu.cli.simulate_faults")


def _imports(source: str, name: str, is_package: bool):
    """What each import of this source names, wherever it stands: the most specific candidate first."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            target = _resolve(name, is_package, node.level, node.module) if node.level else node.module or ""
            for a in node.names:  # `from .deploy import create` imports the module azgpu.deploy.create
                yield [f"{target}.{a.name}", target]
        elif isinstance(node, ast.Import):
            yield from ([a.name] for a in node.names)


def _layer(module: str) -> str:
    for part in ("azgpu.cli", "azgpu.deploy", "azgpu.slurm", "azgpu.testing"):
        if module == part or module.startswith(part + "."):
            return part
    return "azgpu" if module == "azgpu" else "core"


# What each layer may import (besides itself).
ALLOWED = {
    "azgpu.cli": {"azgpu", "azgpu.deploy", "azgpu.slurm", "core", "azgpu.testing"},
    "azgpu": {"azgpu.deploy", "core"},
    "azgpu.slurm": {"azgpu.deploy", "core"},
    "azgpu.deploy": {"core", "azgpu.testing"},
    "core": set(),
    "azgpu.testing": {"core"},
}


def _sources() -> dict[str, tuple[str, bool]]:
    return {_module_name(p): (p.read_text(), p.name == "__init__.py") for p in SRC.rglob("*.py")}


def violations(modules: dict[str, tuple[str, bool]]) -> list[str]:
    found = []
    for name, (source, is_package) in sorted(modules.items()):
        here = _layer(name)
        for candidates in _imports(source, name, is_package):
            target = next((c for c in candidates if c in modules), None)
            if target is None or target == name:
                continue
            there = _layer(target)
            if there == here:
                continue
            if there not in ALLOWED[here]:
                found.append(f"{name} -> {target} ({here} may not import {there})")
            elif there == "azgpu.testing" and name not in SIMULATE_DOORS:
                found.append(f"{name} -> {target} (only {', '.join(SIMULATE_DOORS)} open the fake)")
    return sorted(set(found))


def test_no_import_runs_back_up_the_layers():
    modules = _sources()
    assert {"azgpu.cli", "azgpu.plan", "azgpu.testing.fake"} <= set(modules)  # the walk sees the package
    assert violations(modules) == []


def test_the_check_finds_an_arrow_back_up():
    tree = {
        "azgpu.plan": ("def f():\n    from .deploy import create\n", False),  # inside a function counts
        "azgpu.deploy": ("", True),
        "azgpu.deploy.create": ("from ..cli import options\nfrom ..testing import FakeAzure\n", False),
        "azgpu.cli": ("", True),
        "azgpu.cli.options": ("from ..plan import f\n", False),
        "azgpu.testing": ("from .fake import FakeAzure\n", True),
        "azgpu.testing.fake": ("from azgpu.deploy.create import x\n", False),
    }
    assert violations(tree) == [
        "azgpu.deploy.create -> azgpu.cli.options (azgpu.deploy may not import azgpu.cli)",
        "azgpu.deploy.create -> azgpu.testing (only azgpu.deploy.simulate, azgpu.cli.simulate, "
        "azgpu.cli.simulate_faults open the fake)",
        "azgpu.plan -> azgpu.deploy.create (core may not import azgpu.deploy)",
        "azgpu.testing.fake -> azgpu.deploy.create (azgpu.testing may not import azgpu.deploy)",
    ]


def test_architecture_names_only_files_that_exist():
    """ARCHITECTURE.md names modules by path: a rename that forgets it fails here."""
    import re

    root = SRC.parents[1]
    text = (root / "ARCHITECTURE.md").read_text()
    named = set(re.findall(r"`([\w/]+\.(?:py|md|toml))`", text)) | set(re.findall(r"([\w/]+\.py)\b", text))
    missing = [n for n in sorted(named)
               if not any((base / n).exists() for base in (SRC, SRC / "deploy", SRC / "health", SRC / "testing", root))]
    assert len(named) > 30 and missing == []
