"""The fake's reads cost what they read, not what the subscription holds: at 10,000 nodes a read that
scans every NIC (a subnet's GET, a new scale set's free addresses) made the runs quadratic. Counted,
not timed: how many NIC ip configurations a read looks at."""

from __future__ import annotations

import pytest
from fake_azure_support import RG, create_vmss

from azgpu.testing.models import instances
from azgpu.testing.store import Store


@pytest.fixture
def two_subnets(clients, network) -> dict:
    clients.network.subnets.begin_create_or_update(RG, "vnet", "other",
                                                   {"properties": {"addressPrefix": "10.0.1.0/24"}}).result()
    other = {**network, "subnet": network["subnet"].rsplit("/", 1)[0] + "/other"}
    create_vmss(clients, network, "small", capacity=2)
    return {"compute": network, "other": other}


def _counting(monkeypatch) -> list:
    seen = []
    real = instances.subnet_ref

    def counted(ip_config):
        seen.append(ip_config.get("id"))
        return real(ip_config)

    monkeypatch.setattr(instances, "subnet_ref", counted)
    return seen


def test_a_subnets_get_looks_only_at_its_own_nics(clients, two_subnets, monkeypatch):
    seen = _counting(monkeypatch)
    assert len(clients.network.subnets.get(RG, "vnet", "compute").ip_configurations) == 2
    few = len(seen)
    create_vmss(clients, two_subnets["other"], "big", capacity=8)
    seen.clear()
    subnet = clients.network.subnets.get(RG, "vnet", "compute")
    assert len(subnet.ip_configurations) == 2 and all("/small/" in c.id for c in subnet.ip_configurations)
    assert len(seen) == few  # 8 more NICs in another subnet: not one more looked at
    assert len(clients.network.subnets.get(RG, "vnet", "other").ip_configurations) == 8


def test_free_addresses_look_only_at_the_subnets_nics(azure, clients, two_subnets, monkeypatch):
    create_vmss(clients, two_subnets["other"], "big", capacity=8)
    seen = _counting(monkeypatch)
    backend = azure._backend
    assert instances.free_addresses(backend, two_subnets["compute"]["subnet"]) == 256 - 5 - 2
    assert len(seen) == 2
    seen.clear()
    assert instances.free_addresses(backend, two_subnets["other"]["subnet"]) == 256 - 5 - 8
    assert len(seen) == 8


def _nic(name: str, subnet: str) -> dict:
    return {"id": f"/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/networkInterfaces/{name}",
            "type": "Microsoft.Network/networkInterfaces",
            "properties": {"ipConfigurations": [{"id": f"{name}/ip", "properties": {"subnet": {"id": subnet}}}]}}


def test_the_indexes_follow_puts_deletes_and_a_loaded_state():
    a, b = "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/virtualNetworks/v/subnets/A", "…/B"
    store = Store()
    for name, subnet in (("n1", a), ("n2", b), ("n3", a.upper())):
        store.put(_nic(name, subnet))
    assert [n["id"][-2:] for n in store.nics_in(a)] == ["n1", "n3"]
    store.put(_nic("n1", b))  # moved to another subnet
    assert [n["id"][-2:] for n in store.nics_in(a)] == ["n3"]
    assert [n["id"][-2:] for n in store.nics_in(b)] == ["n2", "n1"]
    store.delete(store.nics_in(b)[0]["id"])
    assert [n["id"][-2:] for n in store.of_type("microsoft.network/NetworkInterfaces")] == ["n1", "n3"]
    loaded = Store()
    loaded.load_json(store.to_json())
    assert [n["id"][-2:] for n in loaded.nics_in(b)] == ["n1"]
    assert [n["id"][-2:] for n in loaded.of_type("Microsoft.Network/networkInterfaces")] == ["n1", "n3"]
