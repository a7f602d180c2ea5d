"""Files that may hold secrets are the owner's only, and --subscription is a GUID in every mode."""

from __future__ import annotations

import os
import stat

import pytest
from test_cli_errors import render_args


@pytest.fixture
def umask_022():
    old = os.umask(0o022)
    yield
    os.umask(old)


def mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_render_writes_the_parameter_files_0600(run, tmp_path, ssh_key, umask_022):
    rc, out, err = run(*render_args(tmp_path, ssh_key, "--format", "all"))
    assert rc == 0, err
    out_dir = tmp_path / "out"
    # The parameter files carry the parameters' values (cloud-init in clear among them).
    assert mode(out_dir / "main.parameters.json") == 0o600
    assert mode(out_dir / "main.bicepparam") == 0o600
    assert mode(out_dir / "main.json") == 0o644 and mode(out_dir / "main.bicep") == 0o644


@pytest.mark.parametrize("command",
                         [["list"], ["status", "-n", "c1", "-g", "rg1"], ["destroy", "-n", "c1", "-g", "rg1", "--yes"]])
def test_a_subscription_that_is_not_a_guid_is_refused_under_simulate_too(run, tmp_path, command):
    state = tmp_path / "state.json"
    rc, out, err = run(*command, "--simulate", "--simulate-state", state, "--subscription", "my-sub/../x")
    assert rc == 2
    assert err.startswith("ERROR: [INVALID_SUBSCRIPTION] subscription 'my-sub/../x' (from --subscription) is not a "
                          "subscription ID")
    assert not state.exists()  # refused before the simulated cloud was opened


def test_a_guid_subscription_is_accepted_under_simulate(run, tmp_path):
    rc, out, err = run("list", "--simulate", "--simulate-state", tmp_path / "s.json", "--subscription",
                       "00000000-0000-0000-0000-000000000000")
    assert rc == 0, err
