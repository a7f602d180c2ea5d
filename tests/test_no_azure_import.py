"""The offline commands never import the Azure SDK (it is imported lazily by deploy only)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from azgpu.profiles import profiles_dir

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJOgAYClhajeh3m7rJp5Bf+XHzOywcIepjITM9B6OJMg azgpu-test"
REQUEST = ["--profile", "nd-a100-v4", "-n", "demo", "-l", "eastus", "--ssh-key", KEY, "--nodes", "150"]

COMMANDS = {
    "render": ["render", *REQUEST, "--out-dir", "out"],
    "plan": ["plan", *REQUEST],
    "validate": ["validate", *REQUEST],
    "profiles list": ["profiles", "list"],
    "profiles show": ["profiles", "show", "ndv2", "-o", "table"],
    "images list": ["images", "list", "-o", "yaml"],
    "simulate --help": ["simulate", "--help"],
    "list --help": ["list", "--help"],
    "certify --dry-run --size": ["certify", "--dry-run", "--size", "Standard_ND96isr_H100_v5", "--nodes", "64",
                                 "--level", "extended"],
    "certify --help": ["certify", "--help"],
}

PROBE = """
import sys
from azgpu.cli import main
rc = main(sys.argv[1:])
loaded = sorted(m for m in sys.modules if m == "azure" or m.startswith("azure."))
assert not loaded, f"Azure SDK modules imported: {loaded}"
sys.exit(rc)
"""


@pytest.mark.parametrize("argv", COMMANDS.values(), ids=COMMANDS.keys())
def test_offline_command_imports_no_azure_module(tmp_path, argv):
    assert profiles_dir().is_dir()
    done = subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout
