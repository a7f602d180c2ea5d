"""The walk of one simulated `create --check --replace-unhealthy --report-to-azure` (tools/module_walk.py):
no lower layer calls up on its own, and every pair of modules that call each other both ways does so
through a function one of them hands the other (a hook), never by importing each other."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# Each pair calls back only through what it was handed, so neither imports the other back:
HOOKS = {
    ("azgpu.cli.deploy", "azgpu.cli.options"),  # options' decorator calls the command function it wraps
    ("azgpu.deploy.arm", "azgpu.deploy.run_command"),  # run_command hands arm's poller its accepted/give_up
    ("azgpu.deploy.deployer", "azgpu.expr"),  # the deployer hands expr the resolver of ARM references
}


def test_no_module_calls_up_and_every_two_way_pair_is_a_hook():
    done = subprocess.run([sys.executable, str(REPO / "tools" / "module_walk.py")], capture_output=True, text=True,
                          timeout=600, cwd=REPO)
    assert done.returncode == 0, done.stderr[-2000:]
    walk = json.loads(done.stdout)
    assert walk["rc"] == 0 and walk["up_by_name"] == []
    assert {tuple(sorted(pair)) for pair in walk["two_way"]} <= HOOKS, walk["two_way"]
