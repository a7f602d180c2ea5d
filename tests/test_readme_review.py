"""The README's sections on reviewing before spending and on the simulated subscription run as
written: their bash blocks, in a fresh process each, against a fresh simulated subscription."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SECTIONS = ("## Review before you spend", "## Try it without Azure")


def blocks(heading: str) -> list[str]:
    text = (REPO / "README.md").read_text()
    start = text.index(heading)
    end = text.index("\n## ", start + len(heading))
    return re.findall(r"```bash\n(.*?)```", text[start:end], re.S)


@pytest.mark.slow
@pytest.mark.parametrize("heading", SECTIONS)
def test_readme_commands_run_as_written(heading, tmp_path):
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
           "AZGPU_SIMULATE_STATE": str(tmp_path / "simulate.json")}
    script = "\n".join(blocks(heading))
    assert script.strip()
    done = subprocess.run(["bash", "-e", "-c", script], cwd=REPO, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    if heading.startswith("## Review"):
        assert "Resource changes: 6 to modify." in done.stdout  # NSG, NAT gateway and its IP, VNet, 2 scale sets
        assert "Instances to delete: 30 GPU node(s): train01-vmss001_49" in done.stdout
        assert "now 4,079.55 USD/hour for 150 node(s)" in done.stdout
    else:
        assert "exit 2: QUOTA_INSUFFICIENT" in done.stdout
