"""State kept in a JSON file between FakeAzure instances, as --simulate runs separate CLI processes."""

from __future__ import annotations

from fake_azure_support import LOCATION, RG, build_network, create_vmss, make_clients, vmss_body

from azgpu.testing import FakeAzure

FAMILY = "Standard NDASv4_A100 Family"


def test_resources_survive_into_a_second_instance(tmp_path):
    state = tmp_path / "azure.json"
    with FakeAzure(state_file=state) as first:
        c = make_clients(first)
        create_vmss(c, build_network(c))
    with FakeAzure(state_file=state) as second:
        c = make_clients(second)
        ips = [n.ip_configurations[0].private_ip_address
               for n in c.network.network_interfaces.list_virtual_machine_scale_set_network_interfaces(RG, "vmss")]
        assert (c.compute.virtual_machine_scale_sets.get(RG, "vmss").provisioning_state, ips) == (
            "Succeeded", ["10.0.0.4", "10.0.0.5", "10.0.0.6"])


def test_usage_and_overrides_survive(tmp_path):
    state = tmp_path / "azure.json"
    with FakeAzure(state_file=state) as first:
        first.set_quota(LOCATION, FAMILY, limit=500)
        first.set_sku(LOCATION, "Standard_ND96asr_v4", zones=["1"])
        c = make_clients(first)
        create_vmss(c, build_network(c))
    with FakeAzure(state_file=state) as second:
        usage = next(u for u in make_clients(second).compute.usage.list(LOCATION) if u.name.value == FAMILY)
        sku = next(s for s in make_clients(second).compute.resource_skus.list(filter=f"location eq '{LOCATION}'")
                   if s.name == "Standard_ND96asr_v4")
        assert (usage.limit, usage.current_value, sku.location_info[0].zones) == (500, 288, ["1"])


def test_state_is_saved_after_each_change_not_only_at_exit(tmp_path):
    state = tmp_path / "azure.json"
    with FakeAzure(state_file=state) as first:
        make_clients(first).resource.resource_groups.create_or_update(RG, {"location": LOCATION})
        assert FakeAzure(state_file=state).get(first.resources()[0]["id"])["name"] == RG


def test_operation_started_in_one_process_finishes_in_the_next_after_lro_seconds(tmp_path):
    state, now = tmp_path / "azure.json", [1000.0]
    with FakeAzure(state_file=state, lro_seconds=60, clock=lambda: now[0]) as first:
        c = make_clients(first)
        net = build_network_no_wait(c, now)
        c.compute.virtual_machine_scale_sets.begin_create_or_update(RG, "vmss", vmss_body(net["subnet"]), polling=False)
    now[0] += 59
    with FakeAzure(state_file=state, lro_seconds=60, clock=lambda: now[0]) as second:
        assert make_clients(second).compute.virtual_machine_scale_sets.get(RG, "vmss").provisioning_state == "Creating"
    now[0] += 1
    with FakeAzure(state_file=state, lro_seconds=60, clock=lambda: now[0]) as third:
        assert make_clients(third).compute.virtual_machine_scale_sets.get(RG, "vmss").provisioning_state == "Succeeded"


def build_network_no_wait(c, now) -> dict:
    """The network with the given clock: start each operation, then let the clock pass it."""
    c.resource.resource_groups.create_or_update(RG, {"location": LOCATION})
    nsg = c.network.network_security_groups.begin_create_or_update(RG, "nsg", {"location": LOCATION}, polling=False)
    vnet_body = {"location": LOCATION, "properties": {"addressSpace": {"addressPrefixes": ["10.0.0.0/16"]},
                                                      "subnets": [{"name": "compute",
                                                                   "properties": {"addressPrefix": "10.0.0.0/24"}}]}}
    c.network.virtual_networks.begin_create_or_update(RG, "vnet", vnet_body, polling=False)
    now[0] += 60
    vnet = c.network.virtual_networks.get(RG, "vnet")
    assert (vnet.provisioning_state, nsg is not None) == ("Succeeded", True)
    return {"subnet": vnet.subnets[0].id}


def test_reset_forgets_everything(azure, clients):
    build_network(clients)
    azure.reset()
    assert (azure.resources(), azure.requests, azure.sleeps) == ([], [], [])
    assert list(clients.resource.resource_groups.list()) == []
