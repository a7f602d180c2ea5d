"""What a cold `provision render` imports: only what rendering uses (issue #31, cold start <= 1.6 times
`import jinja2`). Each module named here was imported at the start of every command once, or is imported
only by the paths that need it (terminal tables, -o yaml, --query, the Azure SDK, az's config file)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from azgpu.cli import COMMANDS

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJOgAYClhajeh3m7rJp5Bf+XHzOywcIepjITM9B6OJMg azgpu-test"
REQUEST = ["--profile", "nd-a100-v4", "-n", "demo", "-l", "eastus", "--ssh-key", KEY, "--nodes", "16"]

# Never needed to write templates: rich draws terminal tables, yaml and jmespath serve -o yaml and --query,
# configparser reads az's config file (absent here), the Azure SDK talks to Azure.
NEVER = ("azure", "rich", "yaml", "jmespath", "configparser", "azgpu.deploy", "azgpu.health", "azgpu.slurm")

PROBE = """
import json, sys
from azgpu.cli import main
rc = main(sys.argv[1:])
print(json.dumps([rc, sorted(sys.modules)]))
"""


def loaded(tmp_path, argv: list[str]) -> set[str]:
    env = {**os.environ, "AZURE_CONFIG_DIR": str(tmp_path / "no-az-config")}
    env.pop("AZURE_DEFAULTS_GROUP", None)
    env.pop("AZURE_DEFAULTS_LOCATION", None)
    done = subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    rc, modules = json.loads(done.stdout.splitlines()[-1])
    assert rc == 0
    return set(modules)


def unwanted(modules: set[str], names) -> list[str]:
    return sorted(m for m in modules if any(m == n or m.startswith(n + ".") for n in names))


@pytest.mark.parametrize("fmt", ["all", "arm", "bicep"])
def test_render_imports_nothing_it_does_not_use(tmp_path, fmt):
    modules = loaded(tmp_path, ["render", *REQUEST, "--format", fmt, "--out-dir", "out", "-o", "none"])
    # azgpu.capacity checks --capacity-reservation-group, which this request does not give.
    assert unwanted(modules, (*NEVER, "azgpu.capacity")) == []
    # Bicep is written in Python (render/bicep.py): no template engine for a skeleton of a few lines.
    assert "jinja2" not in modules


def test_help_imports_no_command(tmp_path):
    # --help lists the commands from cli.SUMMARY (tests/test_cli_help.py): no command's module, nor the plan,
    # nor a library that only one command's run needs.
    modules = loaded(tmp_path, ["--help"])
    commands = {f"azgpu.cli.{m}" for ms in COMMANDS.values() for m in ms}
    never = (*NEVER, *commands, "jinja2", "azgpu.plan", "azgpu.spec", "azgpu.profiles", "azgpu.certify",
             "azgpu.testing")
    assert unwanted(modules, never) == []
