"""The synchronous checks ARM makes on a scale-set PUT, with ARM's codes and HTTP statuses."""

from __future__ import annotations

import pytest
from azure.core.exceptions import HttpResponseError, ResourceNotFoundError
from fake_azure_support import LOCATION, RG, create_vmss, vmss_body

FAMILY = "Standard NDASv4_A100 Family"


def _refused(clients, body, name="vmss") -> HttpResponseError:
    with pytest.raises(HttpResponseError) as err:
        clients.compute.virtual_machine_scale_sets.begin_create_or_update(RG, name, body)
    return err.value


def test_scale_set_in_a_missing_group_is_resource_group_not_found(clients, network):
    with pytest.raises(ResourceNotFoundError) as err:
        clients.compute.virtual_machine_scale_sets.begin_create_or_update("absent", "vmss",
                                                                          vmss_body(network["subnet"]))
    assert err.value.error.code == "ResourceGroupNotFound"


def test_missing_subnet_is_an_invalid_reference(clients, network):
    err = _refused(clients, vmss_body(network["vnet"] + "/subnets/absent"))
    assert (err.status_code, err.error.code) == (400, "InvalidResourceReference")


def test_missing_nsg_is_an_invalid_reference(clients, network):
    err = _refused(clients, vmss_body(network["subnet"], nsg_id=network["nsg"] + "-absent"))
    assert (err.status_code, err.error.code) == (400, "InvalidResourceReference")


def test_subnet_in_another_region_is_an_invalid_reference(clients, network):
    body = vmss_body(network["subnet"])
    body["location"] = "westus2"
    assert _refused(clients, body).error.code == "InvalidResourceReference"


def test_changing_orchestration_mode_is_not_allowed(clients, network):
    create_vmss(clients, network)
    err = _refused(clients, vmss_body(network["subnet"], orchestration="Flexible"))
    assert (err.status_code, err.error.code) == (409, "PropertyChangeNotAllowed")


def test_single_placement_group_cannot_go_from_false_to_true(clients, network):
    create_vmss(clients, network, single_placement_group=False)
    err = _refused(clients, vmss_body(network["subnet"], single_placement_group=True))
    assert (err.status_code, err.error.code) == (409, "PropertyChangeNotAllowed")


def test_single_placement_group_may_go_from_true_to_false(clients, network):
    create_vmss(clients, network)
    assert create_vmss(clients, network, single_placement_group=False).single_placement_group is False


def test_size_not_offered_in_the_region_is_sku_not_available(clients, network):
    err = _refused(clients, vmss_body(network["subnet"], size="Standard_ND999_v9"))
    assert (err.status_code, err.error.code) == (409, "SkuNotAvailable")


def test_location_restricted_size_is_sku_not_available(azure, clients, network):
    azure.set_sku(LOCATION, "Standard_ND96asr_v4",
                  restrictions=[{"type": "Location", "reasonCode": "NotAvailableForSubscription"}])
    assert _refused(clients, vmss_body(network["subnet"])).error.code == "SkuNotAvailable"


def test_zone_restriction_refuses_only_requests_for_that_zone(azure, clients, network):
    azure.set_sku(LOCATION, "Standard_ND96asr_v4", restrictions=[{"type": "Zone", "zones": ["1"]}])
    assert _refused(clients, vmss_body(network["subnet"], zones=["1"])).error.code == "SkuNotAvailable"
    assert create_vmss(clients, network, zones=["2"]).provisioning_state == "Succeeded"


def test_retired_size_is_sku_not_available(clients, network):
    # ND v1 retired in 2023: its profile marks it retired, so the fake restricts it.
    assert _refused(clients, vmss_body(network["subnet"], size="Standard_ND24rs")).error.code == "SkuNotAvailable"


def test_family_quota_exceeded_is_operation_not_allowed_with_azures_message(azure, clients, network):
    azure.set_quota(LOCATION, FAMILY, limit=200, usage=8)
    err = _refused(clients, vmss_body(network["subnet"], capacity=3))
    assert (err.status_code, err.error.code) == (409, "OperationNotAllowed")
    assert err.error.message.startswith(
        "Operation could not be completed as it results in exceeding approved Standard NDASv4_A100 Family Cores quota. "
        "Additional details - Deployment Model: Resource Manager, Location: eastus, Current Limit: 200, "
        "Current Usage: 8, Additional Required: 288, (Minimum) New Limit Required: 296.")


def test_regional_quota_exceeded_names_total_regional_cores(azure, clients, network):
    azure.set_quota(LOCATION, "cores", limit=100)
    err = _refused(clients, vmss_body(network["subnet"], capacity=2))
    assert "exceeding approved Total Regional Cores quota" in err.error.message


def test_spot_quota_is_low_priority_cores(azure, clients, network):
    azure.set_quota(LOCATION, "lowPriorityCores", limit=96)
    err = _refused(clients, vmss_body(network["subnet"], capacity=2, spot=True))
    assert "exceeding approved LowPriorityCores quota" in err.error.message


def test_spot_does_not_count_against_the_regional_or_family_quota(azure, clients, network):
    # Learn, "Increase spot vCPU family quotas": spot VMs count against the spot vCPU quota only.
    azure.set_quota(LOCATION, "cores", limit=0)
    azure.set_quota(LOCATION, FAMILY, limit=0)
    create_vmss(clients, network, spot=True, capacity=2)
    assert (azure.usage(LOCATION, "lowPriorityCores"), azure.usage(LOCATION, "cores")) == (192, 0)


def test_scale_set_usage_counts_against_the_next_request(azure, clients, network):
    azure.set_quota(LOCATION, FAMILY, limit=300)
    create_vmss(clients, network, capacity=3)
    assert _refused(clients, vmss_body(network["subnet"], capacity=1),
                    name="second").error.code == "OperationNotAllowed"


def test_unknown_platform_image_is_platform_image_not_found(clients, network):
    image = {"publisher": "microsoft-dsvm", "offer": "ubuntu-hpc", "sku": "9999", "version": "latest"}
    err = _refused(clients, vmss_body(network["subnet"], image=image))
    assert (err.status_code, err.error.code) == (404, "PlatformImageNotFound")


def test_gen1_image_on_a_gen2_only_size_is_refused(clients, network):
    image = {"publisher": "Canonical", "offer": "0001-com-ubuntu-server-jammy", "sku": "22_04-lts", "version": "latest"}
    err = _refused(clients, vmss_body(network["subnet"], image=image))
    assert (err.status_code, err.error.code) == (400, "BadRequest")
    assert "cannot boot Hypervisor Generation '1'" in err.error.message


def test_subnet_without_room_for_the_instances_is_full(clients):
    from fake_azure_support import build_network

    small = build_network(clients, prefix="10.0.0.0/29")  # 8 addresses, 3 usable
    err = _refused(clients, vmss_body(small["subnet"], capacity=4))
    assert (err.status_code, err.error.code) == (400, "SubnetIsFull")
