"""Which of azgpu's modules one simulated `provision create --check --replace-unhealthy --report-to-azure`
runs code in, and which call each other both ways (a value going back up).

    python tools/module_walk.py        # one JSON object on stdout

It onboards a fresh simulated subscription to Guest Health Reporting, makes the first new node faulty,
and runs the command in-process under sys.setprofile (every thread): a module counts when one of its
functions is called; code that runs while a module loads (its body, class bodies, decorators) does
not, nor does the fake (azgpu.testing). An edge is a call from a function of one module to a function
of another; "two_way" lists the pairs that call each other, hooks included, and "up" the calls from a
lower layer of ARCHITECTURE.md into a higher one (the offline core calling into deploy, deploy into
the command line). "up_by_name" keeps those whose caller imports the module it calls: a lower layer
reaching up on its own, against the one-way arrows. The others are hooks: functions the higher layer
handed down (progress and notices the CLI gave create, a resolver the deployer gave expr).
"""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import sys
import tempfile
import threading
from pathlib import Path

KEY = Path(__file__).resolve().parents[1] / "examples" / "demo_key.pub"
# Higher number, higher layer; the longest matching prefix decides (the package face sits with deploy).
LAYERS = {"azgpu.cli": 3, "azgpu.deploy": 2, "azgpu.slurm": 2, "azgpu": 1}


def layer(module: str) -> int:
    if module == "azgpu":
        return 2
    return LAYERS[max((p for p in LAYERS if module == p or module.startswith(p + ".")), key=len)]


def imports(module: str) -> set[str]:
    """The azgpu modules a module's source names in its imports (relative ones resolved)."""
    spec = importlib.util.find_spec(module)
    tree = ast.parse(Path(spec.origin).read_text())
    package = module if spec.origin.endswith("__init__.py") else module.rpartition(".")[0]
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = importlib.util.resolve_name("." * node.level + (node.module or ""), package) if node.level \
                else node.module or ""
            out |= {base, *(f"{base}.{a.name}" for a in node.names)}
        elif isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
    return out


def main() -> int:
    called: set[str] = set()
    edges: set[tuple[str, str]] = set()

    def profile(frame, event, arg):
        if event != "call":
            return
        name = frame.f_globals.get("__name__", "")
        if not name.startswith("azgpu") or name.startswith("azgpu.testing"):
            return
        back = frame
        while back is not None:
            if back.f_code.co_name == "<module>" and back.f_globals.get("__name__") != "__main__":
                return  # a module loading
            back = back.f_back
        called.add(name)
        caller = frame.f_back.f_globals.get("__name__", "") if frame.f_back else ""
        if caller.startswith("azgpu") and not caller.startswith("azgpu.testing") and caller != name:
            edges.add((caller, name))

    with tempfile.TemporaryDirectory() as tmp:
        for var in ("XDG_STATE_HOME", "XDG_CACHE_HOME", "XDG_CONFIG_HOME"):
            os.environ[var] = tmp
        os.chdir(tmp)
        from azgpu.cli import main as provision

        state = os.path.join(tmp, "sim.json")
        for setup in (["simulate", "ghr", "--provider-state", "Registered", "--reporter"],
                      ["simulate", "fault", "--next", "1", "--gpus", "7"]):
            provision([*setup, "-o", "none", "--simulate-state", state])
        sys.setprofile(profile)
        threading.setprofile(profile)
        try:
            rc = provision(["create", "--profile", "nd-a100-v4", "-n", "c1", "-g", "rg1", "-l", "eastus", "--nodes",
                            "3",
                            "--ssh-key", str(KEY), "--check", "--replace-unhealthy", "--report-to-azure", "--yes",
                            "--insight-timeout", "60", "-o", "none", "--simulate", "--simulate-latency", "0",
                            "--simulate-state", state])
        finally:
            sys.setprofile(None)
            threading.setprofile(None)
    two_way = sorted({tuple(sorted(e)) for e in edges if (e[1], e[0]) in edges})
    up = sorted(e for e in edges if layer(e[0]) < layer(e[1]))
    up_by_name = [e for e in up if e[1] in imports(e[0])]
    json.dump({"rc": rc, "modules": len(called), "edges": len(edges), "two_way": two_way, "up": up,
               "up_by_name": up_by_name,
               "called": sorted(called)}, sys.stdout, indent=1)
    print()
    return rc


if __name__ == "__main__":
    sys.exit(main())
