"""The README's Guest Health Reporting section runs as written: its bash blocks in one fresh process
against a fresh simulated subscription, and its Python block against the fake."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
HEADING = "## Handing a broken host back to Azure"


def section() -> str:
    text = (REPO / "README.md").read_text()
    start = text.index(HEADING)
    return text[start:text.index("\n## ", start + len(HEADING))]


@pytest.mark.slow
def test_the_commands_run_as_written_and_report_once(tmp_path):
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
           "AZGPU_SIMULATE_STATE": str(tmp_path / "simulate.json")}
    script = "\n".join(re.findall(r"```bash\n(.*?)```", section(), re.S))
    done = subprocess.run(["bash", "-e", "-c", script], cwd=REPO, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    rows = [line for line in done.stdout.splitlines() if line.startswith("azgpu-h100-vmss000-0-")]
    assert len(rows) == 1 and "HpcMissingGpu" in rows[0] and "NodeRemovedFromService" in rows[0]
    assert "IBPortDown  filed  NodeRemovedFromService" in done.stdout
    assert "exit 2: GHR_NOT_ONBOARDED" in done.stdout and "az provider register" in done.stderr


@pytest.mark.slow
def test_the_python_example_runs_as_written():
    (code,) = re.findall(r"```python\n(.*?)```", section(), re.S)
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "Resource.Hpc.Unhealthy.XID79FallenOffBus filed NodeRemovedFromService" in done.stdout
