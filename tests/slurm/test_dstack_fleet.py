"""`provision outputs --format dstack-fleet` against dstack's documented SSH fleet schema (and
dstack's own model classes where the package is installed)."""

from __future__ import annotations

import ipaddress

import pytest
import yaml

from azgpu.dstack_fleet import FLEET_KEYS, HOST_KEYS, SSH_KEYS, fleet_files, fleets


def _out(public: bool, domains: int = 2, infiniband: bool = True) -> dict:
    return {"cluster": "demo", "size": "Standard_ND96isr_H100_v5", "infiniband": infiniband,
            "nccl_env": {"NCCL_IB_PCI_RELAXED_ORDERING": 1, "NCCL_TOPO_FILE": "/opt/microsoft/ndv5/topo.xml"},
            "ib_domains": [{"scale_set": f"demo-vmss00{d}", "nodes": [
                {"hostname": f"demo-00{d}-00000{i}", "ip": f"10.0.{d}.{4 + i}",
                 "public_ip": f"20.0.{d}.{4 + i}" if public else None, "instance_id": str(i)} for i in range(3)]}
                for d in range(domains)]}


def _check_documented(fleet: dict) -> None:
    """dstack.ai/docs/reference/dstack.yml/fleet/: the fields and their types."""
    assert set(fleet) <= set(FLEET_KEYS) and fleet["type"] == "fleet" and fleet["placement"] in ("any", "cluster")
    ssh = fleet["ssh_config"]
    assert set(ssh) <= set(SSH_KEYS) and isinstance(ssh["user"], str) and isinstance(ssh["identity_file"], str)
    for host in ssh["hosts"]:
        assert set(host) <= set(HOST_KEYS)
        if "internal_ip" in host:  # dstack validates it as a private IP
            assert ipaddress.ip_address(host["internal_ip"]).is_private
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in fleet.get("env", {}).items())


@pytest.mark.parametrize("public", [True, False])
def test_one_cluster_fleet_per_infiniband_domain(public):
    files = fleet_files(_out(public), user="ops", identity_file="~/.ssh/demo")
    assert sorted(files) == ["demo-vmss000.dstack.yml", "demo-vmss001.dstack.yml"]
    for name, text in files.items():
        fleet = yaml.safe_load(text)
        _check_documented(fleet)
        assert fleet["name"] == name.split(".")[0] and fleet["placement"] == "cluster"
        assert fleet["ssh_config"]["user"] == "ops" and fleet["ssh_config"]["identity_file"] == "~/.ssh/demo"
        hosts = fleet["ssh_config"]["hosts"]
        d = name[len("demo-vmss00")]
        if public:
            assert hosts[0] == {"hostname": f"20.0.{d}.4", "internal_ip": f"10.0.{d}.4"}
        else:
            assert hosts == [{"hostname": f"10.0.{d}.{4 + i}"} for i in range(3)]
        assert fleet["env"] == {"NCCL_IB_PCI_RELAXED_ORDERING": "1", "NCCL_TOPO_FILE": "/opt/microsoft/ndv5/topo.xml"}


def test_without_infiniband_all_nodes_are_one_fleet():
    (fleet,) = fleets(_out(True, infiniband=False))
    assert fleet["name"] == "demo" and len(fleet["ssh_config"]["hosts"]) == 6


def test_dstack_model_accepts_the_fleets():
    models = pytest.importorskip("dstack._internal.core.models.fleets",
                                 reason="dstack is not installed (pip install dstack to check its own model)")
    for text in fleet_files(_out(True)).values():
        conf = models.FleetConfiguration.model_validate(yaml.safe_load(text))
        assert conf.placement == models.InstanceGroupPlacement.CLUSTER
        assert [h.internal_ip for h in conf.ssh_config.hosts] == ["10.0.0.4", "10.0.0.5", "10.0.0.6"] or \
            [h.internal_ip for h in conf.ssh_config.hosts] == ["10.0.1.4", "10.0.1.5", "10.0.1.6"]


def test_cli_writes_one_file_per_domain(run, tmp_path, ssh_key):
    state = tmp_path / "s.json"
    sim = ["--simulate", "--simulate-latency", "0", "--simulate-state", str(state)]
    rc, _, err = run("create", "--profile", "nd-h100-v5", "-n", "demo", "-g", "demo-rg", "-l", "eastus", "--nodes", "3",
                     "--ssh-key", ssh_key, *sim, "-o", "none")
    assert rc == 0, err
    rc, out, err = run("outputs", "-n", "demo", "-g", "demo-rg", "--format", "dstack-fleet", "--ssh-user", "me",
                       "--out-dir", tmp_path / "fleets", *sim)
    assert rc == 0, err
    fleet = yaml.safe_load((tmp_path / "fleets" / "demo-vmss000.dstack.yml").read_text())
    _check_documented(fleet)
    assert fleet["ssh_config"]["user"] == "me" and len(fleet["ssh_config"]["hosts"]) == 3
    rc, out, err = run("outputs", "-n", "demo", "-g", "demo-rg", "--format", "hostfile", "--ssh-user", "me", *sim)
    assert rc == 2 and "OPTION_NOT_FOR_FORMAT" in err
