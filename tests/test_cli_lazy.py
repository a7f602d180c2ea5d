"""Commands load their modules on first use: the table in azgpu.cli says which module makes which
command, and a command that does not talk to Azure loads none of the others."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from azgpu.cli import COMMANDS, LazyGroup

KEY = Path(__file__).resolve().parents[1] / "examples" / "demo_key.pub"


def test_the_table_names_every_command_the_modules_register():
    group = LazyGroup("provision")
    for module in sorted({m for modules in COMMANDS.values() for m in modules}):
        group.load(module)
    assert set(group.commands) == set(COMMANDS)


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_each_command_loads_from_its_own_modules(name):
    assert LazyGroup("provision").get_command(None, name) is not None


def test_an_unknown_command_loads_nothing():
    group = LazyGroup("provision")
    assert group.get_command(None, "crate") is None and not group.loaded


def test_render_loads_no_other_command_module(tmp_path):
    code = ("import json, sys\nfrom azgpu.cli import main\n"
            f"rc = main(['render', '--profile', 'nd-a100-v4', '-n', 'demo', '-l', 'eastus', '--ssh-key', "
            f"{str(KEY)!r}, '--out-dir', {str(tmp_path)!r}, '-o', 'none'])\n"
            "print(json.dumps([rc, sorted(m for m in sys.modules if m.startswith('azgpu.cli.'))]))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    rc, modules = json.loads(done.stdout.splitlines()[-1])
    assert rc == 0, done.stderr
    assert set(modules) == {"azgpu.cli.offline", "azgpu.cli.options"}
