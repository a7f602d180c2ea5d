"""ND GB200/GB300 v6 scale sets in the fake answer as Azure does for vertical-connect sizes.

Azure's answers as Microsoft's GB300 end-to-end test records them (Azure/AgentBaker
e2e/scenario_gb300_managed_driver_test.go @ 338bcb23); the capacity message as a third-party GB300
script quotes it (T-gb300-vmss).
"""

from __future__ import annotations

import pytest
from azure.core.exceptions import HttpResponseError
from azure.mgmt.compute import models as compute_models
from fake_azure_support import RG, vmss_body

from azgpu.testing.models import vertical_connect

GB300 = "Standard_ND128isr_GB300_v6"
GB_IMAGE = {"publisher": "microsoft-dsvm", "offer": "ubuntu-hpc", "sku": "2404-gb", "version": "latest"}


@pytest.fixture(autouse=True)
def rack_quota(azure):
    for name in ("standardNDISRGB300V6Family", "cores"):
        azure.set_quota("eastus", name, limit=36 * 128)


def _sdk_knows(model, field: str) -> bool:
    """Older azure-mgmt-compute models (msrest, with an _attribute_map) drop fields they do not know,
    both in the body they send and in what they read; newer ones pass every field through."""
    known = getattr(model, "_attribute_map", None)
    return known is None or field in known


# Compute 2026-03-01's interconnectInstanceView and highSpeedInterconnectPlacement, which azure-mgmt-compute
# 34 (the floor) neither sends nor reads.
needs_interconnect_view = pytest.mark.skipif(
    not _sdk_knows(compute_models.VirtualMachineScaleSetVMInstanceView, "interconnect_instance_view"),
    reason="this azure-mgmt-compute does not read interconnectInstanceView")
needs_placement_field = pytest.mark.skipif(
    not _sdk_knows(compute_models.VirtualMachineScaleSet, "high_speed_interconnect_placement"),
    reason="this azure-mgmt-compute drops highSpeedInterconnectPlacement from the body it sends")


def gb_body(network, *, capacity=18, single_placement_group=False, **props):
    body = vmss_body(network["subnet"], size=GB300, capacity=capacity, image=GB_IMAGE,
                     single_placement_group=single_placement_group)
    body["properties"].update(props)
    return body


def put(clients, body, name="rack"):
    return clients.compute.virtual_machine_scale_sets.begin_create_or_update(RG, name, body).result()


def test_the_old_body_with_a_single_placement_group_is_refused_with_azures_message(clients, network):
    with pytest.raises(HttpResponseError) as info:
        put(clients, gb_body(network, single_placement_group=True))
    assert info.value.status_code == 400
    assert "Vertical Connect Feature is not available for this Virtual Machine Scale Set" in str(info.value)


def test_leaving_single_placement_group_at_its_default_is_refused_too(clients, network):
    body = gb_body(network)
    del body["properties"]["singlePlacementGroup"]
    with pytest.raises(HttpResponseError, match="Vertical Connect Feature is not available"):
        put(clients, body)


@needs_placement_field
def test_high_speed_interconnect_placement_is_refused(clients, network):
    with pytest.raises(HttpResponseError, match="Vertical Connect Feature is not available"):
        put(clients, gb_body(network, highSpeedInterconnectPlacement="Trunk"))


@pytest.mark.parametrize("capacity", [1, 17, 20, 35])
def test_capacity_not_a_whole_number_of_racks_is_refused(clients, network, capacity):
    with pytest.raises(HttpResponseError) as info:
        put(clients, gb_body(network, capacity=capacity))
    assert info.value.status_code == 400
    assert "Capacity must be a multiple of 18 for SKUs that support vertical connect" in str(info.value)


@pytest.mark.parametrize("placement,code", [("ResourceDisk", "InvalidParameter"), ("NvmeDisk", "NotSupported")])
def test_ephemeral_os_disk_only_on_cache_disk(clients, network, placement, code):
    body = gb_body(network)
    body["properties"]["virtualMachineProfile"]["storageProfile"]["osDisk"].update(
        caching="ReadOnly", diffDiskSettings={"option": "Local", "placement": placement})
    with pytest.raises(HttpResponseError) as info:
        put(clients, body)
    assert info.value.error.code == code


@needs_interconnect_view
def test_microsofts_body_is_accepted_and_fills_racks_of_18(azure, clients, network):
    body = gb_body(network, capacity=36, platformFaultDomainCount=1)
    body["properties"]["virtualMachineProfile"]["storageProfile"]["osDisk"].update(
        caching="ReadOnly", diffDiskSettings={"option": "Local", "placement": "CacheDisk"})
    put(clients, body)
    vms = list(clients.compute.virtual_machine_scale_set_vms.list(RG, "rack", expand="instanceView"))
    subgroups = [vm.instance_view.interconnect_instance_view.interconnect_subgroup_id for vm in vms]
    assert len(set(subgroups[:18])) == 1 and len(set(subgroups[18:])) == 1 and subgroups[0] != subgroups[18]
    fabrics = [azure.node(vm.id)["fabric"] for vm in vms]
    assert {f["state"] for f in fabrics} == {"Completed"}
    assert len({(f["clusterUuid"], f["cliqueId"]) for f in fabrics}) == 2


def test_deleting_one_instance_of_a_rack_is_refused(clients, network):
    put(clients, gb_body(network))
    with pytest.raises(HttpResponseError, match="Capacity must be a multiple of 18"):
        clients.compute.virtual_machine_scale_sets.begin_delete_instances(RG, "rack", {"instanceIds": ["3"]}).result()
    ids = [str(i) for i in range(18)]
    clients.compute.virtual_machine_scale_sets.begin_delete_instances(RG, "rack", {"instanceIds": ids}).result()
    assert clients.compute.virtual_machine_scale_sets.get(RG, "rack").sku.capacity == 0


@needs_interconnect_view
def test_a_rack_short_of_one_node_shows_in_the_fabric_not_in_azures_subgroups(azure, clients, network):
    azure.short_rack_next()
    put(clients, gb_body(network))
    vms = list(clients.compute.virtual_machine_scale_set_vms.list(RG, "rack", expand="instanceView"))
    assert len({vm.instance_view.interconnect_instance_view.interconnect_subgroup_id for vm in vms}) == 1
    domains = [azure.node(vm.id)["fabric"]["clusterUuid"] for vm in vms]
    assert sorted(domains.count(d) for d in set(domains)) == [1, 17]


def test_a_node_with_fabric_not_complete(azure, clients, network):
    put(clients, gb_body(network))
    node = azure.fabric_incomplete("rack/4")
    assert (node["fabric"]["state"], node["fabric"]["status"]) == ("In Progress", "N/A")


def test_other_sizes_are_not_vertical_connect(clients, network):
    assert not vertical_connect.applies(vmss_body(network["subnet"]))
