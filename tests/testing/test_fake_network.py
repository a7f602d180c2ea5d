"""NSGs, virtual networks and subnets through the real NetworkManagementClient."""

from __future__ import annotations

import pytest
from azure.core.exceptions import HttpResponseError, ResourceNotFoundError
from fake_azure_support import LOCATION, RG, build_network, create_vmss


@pytest.fixture
def group(clients):
    clients.resource.resource_groups.create_or_update(RG, {"location": LOCATION})


def test_nsg_create_get_list_delete(group, clients):
    rule = {"name": "ssh", "properties": {"priority": 100, "direction": "Inbound", "access": "Allow", "protocol": "Tcp",
                                          "sourceAddressPrefix": "*", "sourcePortRange": "*",
                                          "destinationAddressPrefix": "*", "destinationPortRange": "22"}}
    created = clients.network.network_security_groups.begin_create_or_update(
        RG, "nsg", {"location": LOCATION, "properties": {"securityRules": [rule]}}).result()
    assert created.provisioning_state == "Succeeded"
    assert clients.network.network_security_groups.get(RG, "nsg").security_rules[0].destination_port_range == "22"
    assert [n.name for n in clients.network.network_security_groups.list(RG)] == ["nsg"]
    clients.network.network_security_groups.begin_delete(RG, "nsg").result()
    assert list(clients.network.network_security_groups.list(RG)) == []


def test_vnet_returns_inline_subnets_with_ids(clients):
    ids = build_network(clients)
    vnet = clients.network.virtual_networks.get(RG, "vnet")
    assert [(s.name, s.address_prefix, s.id) for s in vnet.subnets] == [("compute", "10.0.0.0/24", ids["subnet"])]


def test_subnet_get_reads_the_vnet_subnet(clients, network):
    subnet = clients.network.subnets.get(RG, "vnet", "compute")
    assert (subnet.id, subnet.network_security_group.id) == (network["subnet"], network["nsg"])


def test_subnet_create_adds_it_to_the_vnet(clients, network):
    clients.network.subnets.begin_create_or_update(RG, "vnet", "login",
                                                   {"properties": {"addressPrefix": "10.0.1.0/24"}}).result()
    assert sorted(s.name for s in clients.network.virtual_networks.get(RG, "vnet").subnets) == ["compute", "login"]


def test_subnet_delete_removes_it(clients, network):
    clients.network.subnets.begin_delete(RG, "vnet", "compute").result()
    with pytest.raises(ResourceNotFoundError):
        clients.network.subnets.get(RG, "vnet", "compute")


def test_vnet_list_and_delete(clients, network):
    assert [v.name for v in clients.network.virtual_networks.list(RG)] == ["vnet"]
    clients.network.virtual_networks.begin_delete(RG, "vnet").result()
    assert list(clients.network.virtual_networks.list(RG)) == []


def test_vnet_in_a_missing_group_is_resource_group_not_found(clients):
    with pytest.raises(ResourceNotFoundError) as err:
        clients.network.virtual_networks.begin_create_or_update("absent", "vnet", {"location": LOCATION})
    assert err.value.error.code == "ResourceGroupNotFound"


def test_get_of_a_missing_vnet_is_resource_not_found(group, clients):
    with pytest.raises(ResourceNotFoundError) as err:
        clients.network.virtual_networks.get(RG, "absent")
    assert err.value.error.code == "ResourceNotFound"


def test_subnet_referencing_a_missing_nsg_is_an_invalid_reference(group, clients):
    missing = (f"/subscriptions/{clients.network._config.subscription_id}/resourceGroups/{RG}"
               "/providers/Microsoft.Network/networkSecurityGroups/absent")
    subnet = {"name": "s", "properties": {"addressPrefix": "10.0.0.0/24", "networkSecurityGroup": {"id": missing}}}
    body = {"location": LOCATION, "properties": {"addressSpace": {"addressPrefixes": ["10.0.0.0/16"]},
                                                 "subnets": [subnet]}}
    with pytest.raises(HttpResponseError) as err:
        clients.network.virtual_networks.begin_create_or_update(RG, "vnet", body)
    assert (err.value.status_code, err.value.error.code) == (400, "InvalidResourceReference")


def test_subnet_outside_the_address_space_is_refused(clients, network):
    with pytest.raises(HttpResponseError) as err:
        clients.network.subnets.begin_create_or_update(RG, "vnet", "far",
                                                       {"properties": {"addressPrefix": "192.168.0.0/24"}})
    assert err.value.error.code == "NetcfgSubnetRangeOutsideVnet"


def test_deleting_a_vnet_whose_subnet_a_scale_set_uses_is_refused(clients, network):
    create_vmss(clients, network)
    with pytest.raises(HttpResponseError) as err:
        clients.network.virtual_networks.begin_delete(RG, "vnet")
    assert (err.value.status_code, err.value.error.code) == (400, "InUseSubnetCannotBeDeleted")


def test_deleting_a_used_subnet_is_refused(clients, network):
    create_vmss(clients, network)
    with pytest.raises(HttpResponseError) as err:
        clients.network.subnets.begin_delete(RG, "vnet", "compute")
    assert err.value.error.code == "InUseSubnetCannotBeDeleted"


def test_deleting_an_nsg_in_use_is_refused(clients, network):
    with pytest.raises(HttpResponseError) as err:
        clients.network.network_security_groups.begin_delete(RG, "nsg")
    assert (err.value.status_code, err.value.error.code) == (400, "InUseNetworkSecurityGroupCannotBeDeleted")


def test_deleting_a_missing_nsg_succeeds_as_arm_does(group, clients):
    clients.network.network_security_groups.begin_delete(RG, "absent").result()
