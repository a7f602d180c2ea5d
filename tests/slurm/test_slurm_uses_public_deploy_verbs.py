"""azgpu.slurm reaches Azure only through azgpu.deploy's public verbs: it imports the package (never one
of its modules) and only names the package exports, so deploy's modules can change inside."""

from __future__ import annotations

import ast
from pathlib import Path

import azgpu.deploy as deploy

SLURM = Path(deploy.__file__).resolve().parents[1] / "slurm"


def _imports_from_deploy(source: str) -> list[tuple[str, list[str]]]:
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "deploy" and node.level == 2:
            found.append((node.module, [a.name for a in node.names]))
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("azgpu.deploy"):
            found.append((node.module.removeprefix("azgpu."), [a.name for a in node.names]))
        elif isinstance(node, ast.Import):
            found += [(a.name.removeprefix("azgpu."), []) for a in node.names if a.name.startswith("azgpu.deploy")]
    return found


def violations(sources: dict[str, str]) -> list[str]:
    out = []
    for name, source in sorted(sources.items()):
        for module, names in _imports_from_deploy(source):
            if module != "deploy":
                out.append(f"{name}: imports azgpu.{module} (use azgpu.deploy's exports)")
            out += [f"{name}: imports {n} (not in azgpu.deploy.__all__)" for n in names if n not in deploy.__all__]
            out += [f"{name}: imports {n} (a private name)" for n in names if n.startswith("_") and n in deploy.__all__]
    return out


def test_slurm_imports_only_the_deploy_packages_exports():
    sources = {p.name: p.read_text() for p in SLURM.glob("*.py")}
    assert "power.py" in sources
    assert violations(sources) == []


def test_the_check_finds_a_private_import():
    bad = {"x.py": "def f():\n    from ..deploy.lifecycle import _nodes\n    from ..deploy import _private\n"}
    assert violations(bad) == ["x.py: imports azgpu.deploy.lifecycle (use azgpu.deploy's exports)",
                               "x.py: imports _nodes (not in azgpu.deploy.__all__)",
                               "x.py: imports _private (not in azgpu.deploy.__all__)"]


def test_a_private_name_is_refused_even_if_the_package_exported_it(monkeypatch):
    monkeypatch.setattr(deploy, "__all__", [*deploy.__all__, "_nodes"])
    assert violations({"x.py": "from ..deploy import _nodes, create\n"}) == ["x.py: imports _nodes (a private name)"]
