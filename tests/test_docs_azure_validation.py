"""docs/azure-validation.md's code blocks run as written, under tests/test_readme.py's rules."""

from __future__ import annotations

import sys

import test_readme
from test_readme import simulated  # noqa: F401 - the harness's fixture

PAGE = test_readme.REPO / "docs" / "azure-validation.md"


def test_the_pages_blocks_run_as_written(simulated, run, monkeypatch, tmp_path):  # noqa: F811
    monkeypatch.setattr(test_readme, "README", PAGE)
    # The page assigns a policy in the simulated cloud: a state file of its own, whatever the environment says.
    monkeypatch.setenv("AZGPU_SIMULATE_STATE", str(tmp_path / "simulated.json"))
    transcript: list = []
    found = test_readme.run_readme(run, monkeypatch, transcript)
    assert {b.language for b in found} >= {"bash", "text"}
    what_if = next(out for line, out, _ in transcript if "--what-if" in line and "--nodes 3" in line)
    # The sample output the page shows is what the command prints (its legend and cost lines left out).
    sample = [line for line in next(b.code for b in found if b.language == "text").splitlines() if line]
    printed = [line for line in what_if.splitlines() if line in sample]
    assert printed == sample
    denied = next(err for line, _, err in transcript if "--dry-run" in line)
    assert "--name no-nd-a100 --scope /subscriptions/" in denied
    assert sys.modules["test_readme"] is test_readme
