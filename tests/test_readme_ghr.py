"""The README's Guest Health Reporting Python block prints what it says, in a fresh process (its bash
blocks run, and their output is checked, in tests/test_docs.py with the rest of the README)."""

from __future__ import annotations

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
def test_the_python_example_runs_as_written():
    (code,) = re.findall(r"```python\n(.*?)```", section(), re.S)
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "Resource.Hpc.Unhealthy.XID79FallenOffBus filed NodeRemovedFromService" in done.stdout
