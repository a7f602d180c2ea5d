"""The Guest Health Reporting page's Python block prints what it says, in a fresh process (its bash
blocks run, and their output is checked, in tests/test_docs.py with the rest of the docs)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PAGE = REPO / "docs" / "guest-health-reporting.md"


def section() -> str:
    return PAGE.read_text()


@pytest.mark.slow
@pytest.mark.docs
def test_the_python_example_runs_as_written():
    # The page's one Python block (test_docs.py runs it too, in the page's own Python, after its shell lines).
    (code,) = re.findall(r"```python\n(.*?)```", section(), re.S)
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "Resource.Hpc.Unhealthy.XID79FallenOffBus filed NodeRemovedFromService" in done.stdout
