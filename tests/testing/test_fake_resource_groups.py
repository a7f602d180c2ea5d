"""Resource groups and the generic resource listings, through the real ResourceManagementClient."""

from __future__ import annotations

import pytest
from azure.core.exceptions import HttpResponseError, ResourceNotFoundError
from fake_azure_support import RG, build_network, create_vmss


def test_create_answers_201_then_200_on_update(azure, clients):
    clients.resource.resource_groups.create_or_update(RG, {"location": "eastus"})
    clients.resource.resource_groups.create_or_update(RG, {"location": "eastus", "tags": {"k": "v"}})
    assert [r.status for r in azure.requests if r.method == "PUT"] == [201, 200]


def test_get_returns_location_and_tags(clients):
    clients.resource.resource_groups.create_or_update(RG, {"location": "East US", "tags": {"k": "v"}})
    group = clients.resource.resource_groups.get(RG)
    assert (group.name, group.location, group.tags, group.properties.provisioning_state) == (RG, "eastus", {"k": "v"},
                                                                                             "Succeeded")


def test_check_existence_is_a_head_request(azure, clients):
    clients.resource.resource_groups.create_or_update(RG, {"location": "eastus"})
    assert clients.resource.resource_groups.check_existence(RG) is True
    assert clients.resource.resource_groups.check_existence("absent") is False
    assert [r.method for r in azure.requests[-2:]] == ["HEAD", "HEAD"]


def test_list_returns_every_group(clients):
    for name in ("a", "b"):
        clients.resource.resource_groups.create_or_update(name, {"location": "eastus"})
    assert sorted(g.name for g in clients.resource.resource_groups.list()) == ["a", "b"]


def test_get_of_a_missing_group_is_resource_group_not_found(clients):
    with pytest.raises(ResourceNotFoundError) as err:
        clients.resource.resource_groups.get("absent")
    assert err.value.error.code == "ResourceGroupNotFound"


def test_moving_a_group_to_another_location_is_refused(clients):
    clients.resource.resource_groups.create_or_update(RG, {"location": "eastus"})
    with pytest.raises(HttpResponseError) as err:
        clients.resource.resource_groups.create_or_update(RG, {"location": "westus2"})
    assert err.value.error.code == "InvalidResourceGroupLocation"


def test_delete_removes_the_group_and_everything_in_it(azure, clients, network):
    create_vmss(clients, network)
    clients.resource.resource_groups.begin_delete(RG).result()
    assert azure.resources() == []
    assert clients.resource.resource_groups.check_existence(RG) is False


def test_list_by_resource_group_shows_top_level_resources_only(clients, network):
    create_vmss(clients, network)
    listed = {(r.type, r.name) for r in clients.resource.resources.list_by_resource_group(RG)}
    assert listed == {
        ("Microsoft.Network/networkSecurityGroups", "nsg"),
        ("Microsoft.Network/virtualNetworks", "vnet"),
        ("Microsoft.Compute/virtualMachineScaleSets", "vmss"),
    }


def test_list_by_resource_group_filters_by_tag(clients, network):
    create_vmss(clients, network)
    found = clients.resource.resources.list_by_resource_group(RG,
                                                              filter="tagName eq 'azgpu-cluster' and tagValue eq 'c1'")
    assert [r.name for r in found] == ["vmss"]


def test_list_by_resource_group_of_a_missing_group_is_not_found(clients):
    with pytest.raises(ResourceNotFoundError) as err:
        list(clients.resource.resources.list_by_resource_group("absent"))
    assert err.value.error.code == "ResourceGroupNotFound"


def test_subscription_wide_listing_filters_by_tag(azure, clients):
    build_network(clients)
    azure.add_resource(f"/subscriptions/{azure.subscription_id}/resourceGroups/{RG}/providers/Microsoft.Storage/storageAccounts/keep",
                       {"location": "eastus", "tags": {"owner": "someone-else"}})
    found = clients.resource.resources.list(filter="tagName eq 'owner'")
    assert [r.name for r in found] == ["keep"]
