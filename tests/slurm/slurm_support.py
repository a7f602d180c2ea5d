"""Helpers for the Slurm tests: a cluster file, the CLI in a subprocess (as slurmctld runs it)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
KEY = REPO / "examples" / "demo_key.pub"


def cluster_file(directory: Path, *, nodes: int = 8, name: str = "demo", profile: str = "nd-h100-v5",
                 extra: str = "") -> Path:
    path = directory / f"{name}.toml"
    path.write_text(f'profile = "{profile}"\nnodes = {nodes}\nname = "{name}"\nlocation = "eastus"\n'
                    f'resource-group = "{name}-rg"\nssh-key = "{KEY}"\n{extra}')
    return path


def provision(*args: str, env: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "azgpu.cli", *args], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **(env or {})})


def fake_scontrol(directory: Path) -> tuple[Path, Path]:
    """An scontrol that records its arguments, one call a line (for tests without slurmctld)."""
    log = directory / "scontrol.calls"
    script = directory / "scontrol"
    script.write_text(f"#!/bin/sh\nprintf '%s\\n' \"$*\" >> '{log}'\n")
    script.chmod(0o755)
    return script, log


def status(state: Path, name: str = "demo") -> dict:
    done = provision("status", "-n", name, "-g", f"{name}-rg", "--simulate", "--simulate-state", str(state), "-o",
                     "json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def instances(state: Path, name: str = "demo") -> list[dict]:
    return [i for s in status(state, name)["scale_sets"] for i in s["instances"]]


def nodes(state: Path, name: str = "demo") -> dict[str, str]:
    """Hostname -> private IP of the simulated cluster's VMs (provision outputs)."""
    done = provision("outputs", "-n", name, "-g", f"{name}-rg", "--simulate", "--simulate-state", str(state))
    assert done.returncode == 0, done.stderr
    return {n["hostname"]: n["ip"] for d in json.loads(done.stdout)["ib_domains"] for n in d["nodes"]}
