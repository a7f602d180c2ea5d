"""Resource SKUs, usages and marketplace images, seeded from azgpu's own profiles."""

from __future__ import annotations

import pytest
from azure.core.exceptions import ResourceNotFoundError

from azgpu.testing import FakeAzure
from azgpu.testing.skus import SizeSpec, sku_json

ND_A100 = "Standard_ND96asr_v4"


def _sku(clients, location="eastus", name=ND_A100):
    return next(s for s in clients.compute.resource_skus.list(filter=f"location eq '{location}'") if s.name == name)


def _caps(sku) -> dict:
    return {c.name: c.value for c in sku.capabilities}


def test_sku_of_nd_a100_v4_carries_its_profile_facts(clients):
    sku = _sku(clients)
    assert (sku.resource_type, sku.family, sku.locations, sku.restrictions) == (
        "virtualMachines", "Standard NDASv4_A100 Family", ["eastus"], [])
    assert {k: _caps(sku)[k] for k in ("vCPUs", "GPUs", "MemoryGB", "HyperVGenerations", "CpuArchitectureType",
                                       "RdmaEnabled", "AcceleratedNetworkingEnabled", "TrustedLaunchDisabled",
                                       "MaxNetworkInterfaces", "MaxDataDiskCount")} == {
        "vCPUs": "96", "GPUs": "8", "MemoryGB": "900", "HyperVGenerations": "V2", "CpuArchitectureType": "x64",
        "RdmaEnabled": "True", "AcceleratedNetworkingEnabled": "True", "TrustedLaunchDisabled": "True",
        "MaxNetworkInterfaces": "8", "MaxDataDiskCount": "32"}


def test_sku_offers_three_zones(clients):
    assert _sku(clients).location_info[0].zones == ["1", "2", "3"]


def test_general_sizes_are_seeded_too(clients):
    assert _caps(_sku(clients, name="Standard_D2s_v5"))["HyperVGenerations"] == "V1,V2"


def test_filter_returns_only_that_location(clients):
    assert {s.locations[0] for s in clients.compute.resource_skus.list(filter="location eq 'westeurope'")} == {"westeurope"}


def test_locations_argument_adds_a_region():
    with FakeAzure(locations=["Central India"]) as azure:
        from fake_azure_support import make_clients

        assert _sku(make_clients(azure), location="centralindia").name == ND_A100


def test_set_sku_changes_a_capability(azure, clients):
    azure.set_sku("eastus", ND_A100, AcceleratedNetworkingEnabled=False)
    assert _caps(_sku(clients))["AcceleratedNetworkingEnabled"] == "False"


def test_set_sku_restriction_comes_back_in_arm_shape(azure, clients):
    azure.set_sku("eastus", ND_A100, restrictions=[{"type": "Zone", "zones": ["2"]}])
    restriction = _sku(clients).restrictions[0]
    assert (restriction.type, restriction.reason_code, restriction.restriction_info.zones) == (
        "Zone", "NotAvailableForSubscription", ["2"])


def test_retired_size_is_restricted_for_the_subscription():
    sku = sku_json(SizeSpec("Standard_Old", "standardOldFamily", 4, 16, retired="2023-09-06"), "eastus")
    assert sku["restrictions"] == [{"type": "Location", "values": ["eastus"], "restrictionInfo": {"locations": ["eastus"]},
                                    "reasonCode": "NotAvailableForSubscription"}]


def test_usages_name_the_family_like_azure(clients):
    usage = {u.name.value: u for u in clients.compute.usage.list("eastus")}
    family = usage["Standard NDASv4_A100 Family"]
    assert (family.name.localized_value, family.limit, family.current_value) == ("Standard NDASv4_A100 Family vCPUs", 1000, 0)
    assert (usage["cores"].limit, usage["lowPriorityCores"].limit) == (5000, 1000)


def test_set_quota_matches_family_names_ignoring_case_and_spaces(azure, clients):
    azure.set_quota("eastus", "standardNDASv4_A100Family", limit=96, usage=48)
    family = next(u for u in clients.compute.usage.list("eastus") if u.name.value == "Standard NDASv4_A100 Family")
    assert (family.limit, family.current_value) == (96, 48)


def test_image_versions_list_and_get(clients):
    versions = clients.compute.virtual_machine_images.list("eastus", "microsoft-dsvm", "ubuntu-hpc", "2204")
    image = clients.compute.virtual_machine_images.get("eastus", "microsoft-dsvm", "ubuntu-hpc", "2204", versions[-1].name)
    assert (image.hyper_v_generation, image.architecture) == ("V2", "x64")  # flat: every SDK generation has it


def test_added_image_version_is_listed_in_order(azure, clients):
    azure.add_image("eastus", "microsoft-dsvm", "ubuntu-hpc", "2204", "2026.01.15")
    versions = clients.compute.virtual_machine_images.list("eastus", "microsoft-dsvm", "ubuntu-hpc", "2204")
    assert [v.name for v in versions][-1] == "2026.01.15"


def test_arm64_image_reports_its_architecture(azure, clients):
    azure.add_image("eastus", "contoso", "grace", "hpc", "1.0.0", architecture="Arm64")
    assert clients.compute.virtual_machine_images.get("eastus", "contoso", "grace", "hpc", "1.0.0").architecture == "Arm64"


def test_unknown_image_is_not_found(clients):
    with pytest.raises(ResourceNotFoundError):
        clients.compute.virtual_machine_images.list("eastus", "nobody", "nothing", "none")
