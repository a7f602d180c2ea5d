"""The az CLI's configured defaults for the resource group and the location, as az reads them: the
[defaults] section of AZURE_CONFIG_DIR/config (~/.azure/config), overridden by AZURE_DEFAULTS_GROUP
and AZURE_DEFAULTS_LOCATION; a flag or a cluster file wins; --verbose says where a value came from."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from azgpu import azdefaults


@pytest.fixture
def az_config(tmp_path, monkeypatch):
    folder = tmp_path / "azure"
    folder.mkdir()
    monkeypatch.setenv("AZURE_CONFIG_DIR", str(folder))
    # What `az config set defaults.group=cfg-rg defaults.location=westus2` writes.
    (folder / "config").write_text("[core]\noutput = json\n\n[defaults]\ngroup = cfg-rg\nlocation = westus2\n")
    return folder / "config"


def test_the_config_file_is_read(az_config):
    found = azdefaults.defaults()
    assert found["resource_group"][0] == "cfg-rg" and found["location"][0] == "westus2"
    assert str(az_config) in found["location"][1]


def test_the_home_config_without_azure_config_dir(monkeypatch):
    monkeypatch.delenv("AZURE_CONFIG_DIR")
    (Path.home() / ".azure").mkdir()
    (Path.home() / ".azure" / "config").write_text("[defaults]\ngroup = home-rg\n")
    assert azdefaults.defaults() == {"resource_group": ("home-rg", f"the az CLI's defaults "
                                                                    f"({Path.home() / '.azure' / 'config'} "
                                                                    "[defaults] group)")}


def test_the_environment_wins_over_the_file(az_config, monkeypatch):
    monkeypatch.setenv("AZURE_DEFAULTS_GROUP", "env-rg")
    found = azdefaults.defaults()
    assert found["resource_group"] == ("env-rg", "the environment variable AZURE_DEFAULTS_GROUP")
    assert found["location"][0] == "westus2"


def test_no_config_no_defaults(tmp_path, monkeypatch):
    monkeypatch.setenv("AZURE_CONFIG_DIR", str(tmp_path / "none"))
    assert azdefaults.defaults() == {}


def test_a_broken_config_file_is_ignored(az_config):
    az_config.write_text("this is not ini\n[defaults\n")
    assert azdefaults.defaults() == {}


def test_plan_takes_the_location_and_verbose_says_whence(az_config, run, ssh_key):
    rc, out, err = run("plan", "--profile", "nd-a100-v4", "-n", "c1", "--ssh-key", ssh_key, "--query", "location",
                       "--verbose")
    assert rc == 0, err
    assert json.loads(out) == "westus2"
    assert f"-l/--location westus2 from the az CLI's defaults ({az_config} [defaults] location)" in err


def test_a_flag_wins_and_verbose_says_so(az_config, run, ssh_key):
    rc, out, err = run("plan", "--profile", "nd-a100-v4", "-n", "c1", "--ssh-key", ssh_key, "-l", "eastus",
                       "--query", "location", "--verbose")
    assert rc == 0 and json.loads(out) == "eastus"
    assert "-l/--location eastus from the command line" in err


def test_a_cluster_file_wins_over_the_defaults(az_config, run, ssh_key, tmp_path):
    (tmp_path / "c.toml").write_text('profile = "nd-a100-v4"\nname = "c1"\nlocation = "eastus2"\n')
    rc, out, err = run("plan", "-f", tmp_path / "c.toml", "--ssh-key", ssh_key, "--query", "location", "--verbose")
    assert rc == 0 and json.loads(out) == "eastus2", err
    assert f"-l/--location eastus2 from the cluster file {tmp_path / 'c.toml'}" in err


def test_cluster_commands_take_the_default_group(az_config, run, monkeypatch, tmp_path, ssh_key):
    monkeypatch.setenv("AZGPU_SIMULATE_STATE", str(tmp_path / "sim.json"))
    rc, out, err = run("create", "--profile", "nd-a100-v4", "-n", "c1", "--nodes", "2", "--ssh-key", ssh_key,
                       "--simulate", "--simulate-latency", "0", "--query", "resource_group")
    assert rc == 0, err
    assert json.loads(out) == "cfg-rg"
    rc, out, err = run("status", "-n", "c1", "--simulate", "--simulate-latency", "0", "--verbose", "-o", "none")
    assert rc == 0, err
    assert "-g/--resource-group cfg-rg from the az CLI's defaults" in err
    rc, _, err = run("destroy", "-n", "c1", "--simulate", "--simulate-latency", "0", "--yes", "-o", "none")
    assert rc == 0, err
