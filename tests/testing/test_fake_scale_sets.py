"""Scale sets, their instances, NICs and extensions through the real Compute and Network clients."""

from __future__ import annotations

import pytest
from azure.core.exceptions import ResourceNotFoundError
from fake_azure_support import LOCATION, RG, create_vmss

from azgpu.deploy.arm import rest_shape

FAMILY = "Standard NDASv4_A100 Family"


def test_create_succeeds_with_the_requested_model(clients, network):
    vmss = create_vmss(clients, network)
    assert (vmss.provisioning_state, vmss.sku.name, vmss.sku.capacity) == ("Succeeded", "Standard_ND96asr_v4", 3)
    assert vmss.single_placement_group is True


def test_create_makes_capacity_instances_named_like_azure(clients, network):
    create_vmss(clients, network)
    vms = list(clients.compute.virtual_machine_scale_set_vms.list(RG, "vmss"))
    assert [(vm.instance_id, vm.name, vm.os_profile.computer_name) for vm in vms] == [
        ("0", "vmss_0", "node000000"), ("1", "vmss_1", "node000001"), ("2", "vmss_2", "node000002")]


def test_instances_get_private_ips_in_subnet_order(clients, network):
    create_vmss(clients, network)
    nics = clients.network.network_interfaces.list_virtual_machine_scale_set_network_interfaces(RG, "vmss")
    assert sorted(n.ip_configurations[0].private_ip_address for n in nics) == ["10.0.0.4", "10.0.0.5", "10.0.0.6"]


def test_a_second_scale_set_continues_in_the_same_subnet(clients, network):
    create_vmss(clients, network, capacity=2)
    create_vmss(clients, network, name="other", capacity=1)
    nics = clients.network.network_interfaces.list_virtual_machine_scale_set_network_interfaces(RG, "other")
    assert [n.ip_configurations[0].private_ip_address for n in nics] == ["10.0.0.6"]


def test_per_instance_nic_listing(clients, network):
    create_vmss(clients, network)
    nics = list(clients.network.network_interfaces.list_virtual_machine_scale_set_vm_network_interfaces(RG, "vmss",
                                                                                                        "1"))
    assert [(n.name, n.ip_configurations[0].private_ip_address) for n in nics] == [("nic", "10.0.0.5")]
    assert nics[0].virtual_machine.id.endswith("/virtualMachineScaleSets/vmss/virtualMachines/1")


def test_public_ips_exist_when_the_nic_config_asks_for_them(clients, network):
    create_vmss(clients, network, public_ip=True)
    ips = list(clients.network.public_ip_addresses.list_virtual_machine_scale_set_public_ip_addresses(RG, "vmss"))
    assert len({ip.ip_address for ip in ips}) == 3


def test_no_public_ips_without_a_public_ip_configuration(clients, network):
    create_vmss(clients, network)
    assert list(clients.network.public_ip_addresses.list_virtual_machine_scale_set_public_ip_addresses(RG,
                                                                                                       "vmss")) == []


def test_create_raises_family_and_regional_usage_by_capacity_times_vcpus(azure, clients, network):
    before = azure.usage(LOCATION, FAMILY), azure.usage(LOCATION, "cores")
    create_vmss(clients, network)
    usage = {u.name.value: u.current_value for u in clients.compute.usage.list(LOCATION)}
    assert (usage[FAMILY] - before[0], usage["cores"] - before[1]) == (288, 288)


def test_spot_scale_sets_count_against_low_priority_cores_only(azure, clients, network):
    create_vmss(clients, network, spot=True, capacity=1)
    assert (azure.usage(LOCATION, "lowPriorityCores"), azure.usage(LOCATION, FAMILY)) == (96, 0)


def test_instance_view_of_an_instance_is_provisioned_and_running(clients, network):
    create_vmss(clients, network)
    view = clients.compute.virtual_machine_scale_set_vms.get_instance_view(RG, "vmss", "2")
    assert [s.code for s in view.statuses] == ["ProvisioningState/succeeded", "PowerState/running"]


def test_listing_instances_with_expand_includes_instance_views(clients, network):
    create_vmss(clients, network)
    vms = clients.compute.virtual_machine_scale_set_vms.list(RG, "vmss", expand="instanceView")
    assert all(vm.instance_view.statuses[1].code == "PowerState/running" for vm in vms)


def test_scale_set_instance_view_summarises_instances(clients, network):
    create_vmss(clients, network)
    view = clients.compute.virtual_machine_scale_sets.get_instance_view(RG, "vmss")
    assert [(s.code, s.count) for s in view.virtual_machine.statuses_summary] == [("ProvisioningState/succeeded", 3)]


def test_list_and_list_all(clients, network):
    create_vmss(clients, network)
    assert [v.name for v in clients.compute.virtual_machine_scale_sets.list(RG)] == ["vmss"]
    assert [v.name for v in clients.compute.virtual_machine_scale_sets.list_all()] == ["vmss"]


def test_update_to_more_capacity_adds_instances(clients, network):
    create_vmss(clients, network)
    updated = clients.compute.virtual_machine_scale_sets.begin_update(RG, "vmss", {"sku": {"capacity": 5}}).result()
    ids = [vm.instance_id for vm in clients.compute.virtual_machine_scale_set_vms.list(RG, "vmss")]
    assert (updated.sku.capacity, ids) == (5, ["0", "1", "2", "3", "4"])


def test_update_to_less_capacity_removes_the_highest_instances(clients, network):
    create_vmss(clients, network)
    clients.compute.virtual_machine_scale_sets.begin_update(RG, "vmss", {"sku": {"capacity": 1}}).result()
    assert [vm.instance_id for vm in clients.compute.virtual_machine_scale_set_vms.list(RG, "vmss")] == ["0"]


def test_delete_removes_instances_nics_and_usage(azure, clients, network):
    before = azure.usage(LOCATION, FAMILY)
    create_vmss(clients, network, public_ip=True)
    clients.compute.virtual_machine_scale_sets.begin_delete(RG, "vmss").result()
    assert azure.usage(LOCATION, FAMILY) == before
    assert [r["type"] for r in azure.resources(resource_group=RG)] == [
        "Microsoft.Network/networkSecurityGroups", "Microsoft.Network/virtualNetworks"]


def test_get_after_delete_is_resource_not_found(clients, network):
    create_vmss(clients, network)
    clients.compute.virtual_machine_scale_sets.begin_delete(RG, "vmss").result()
    with pytest.raises(ResourceNotFoundError) as err:
        clients.compute.virtual_machine_scale_sets.get(RG, "vmss")
    assert err.value.error.code == "ResourceNotFound"


EXTENSION = {"properties": {"publisher": "Microsoft.HpcCompute", "type": "NvidiaGpuDriverLinux",
                            "typeHandlerVersion": "1.6", "autoUpgradeMinorVersion": True}}


def test_extension_create_get_list(clients, network):
    create_vmss(clients, network)
    created = clients.compute.virtual_machine_scale_set_extensions.begin_create_or_update(RG, "vmss", "gpu",
                                                                                          EXTENSION).result()
    got = clients.compute.virtual_machine_scale_set_extensions.get(RG, "vmss", "gpu")
    listed = [e.name for e in clients.compute.virtual_machine_scale_set_extensions.list(RG, "vmss")]
    assert (created.provisioning_state, rest_shape(got)["properties"]["type"], listed) == ("Succeeded",
                                                                                           "NvidiaGpuDriverLinux",
                                                                                           ["gpu"])


def test_extension_is_part_of_the_scale_set_model(clients, network):
    create_vmss(clients, network)
    clients.compute.virtual_machine_scale_set_extensions.begin_create_or_update(RG, "vmss", "gpu", EXTENSION).result()
    vmss = clients.compute.virtual_machine_scale_sets.get(RG, "vmss")
    assert [e.name for e in vmss.virtual_machine_profile.extension_profile.extensions] == ["gpu"]


def test_extension_delete(clients, network):
    create_vmss(clients, network)
    clients.compute.virtual_machine_scale_set_extensions.begin_create_or_update(RG, "vmss", "gpu", EXTENSION).result()
    clients.compute.virtual_machine_scale_set_extensions.begin_delete(RG, "vmss", "gpu").result()
    with pytest.raises(ResourceNotFoundError):
        clients.compute.virtual_machine_scale_set_extensions.get(RG, "vmss", "gpu")


def test_an_instance_view_answer_leaves_the_stored_instance_as_it_was(azure, clients, network):
    """$expand=instanceView adds the view to the answer, never to the stored instance (with_view copies what it
    changes): a later plain GET has no instanceView, as Azure's has none."""
    create_vmss(clients, network)
    listed = list(clients.compute.virtual_machine_scale_set_vms.list(RG, "vmss", expand="instanceView"))
    one = clients.compute.virtual_machine_scale_set_vms.get(RG, "vmss", "0", expand="instanceView")
    assert listed[0].instance_view.statuses and one.instance_view.statuses
    assert clients.compute.virtual_machine_scale_set_vms.get(RG, "vmss", "0").instance_view is None
    stored = azure.resources(type="Microsoft.Compute/virtualMachineScaleSets/virtualMachines")
    assert stored and all("instanceView" not in vm["properties"] for vm in stored)
