"""Resource SKUs, usages and marketplace images, from the fake's own Azure-shaped data (not azgpu's profiles)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import requests
from azure.core.exceptions import ResourceNotFoundError

from azgpu.deploy.arm import rest_shape
from azgpu.testing import FakeAzure
from azgpu.testing import skus as fake_skus

ND_A100 = "Standard_ND96asr_v4"
MI300X = "Standard_ND96isr_MI300X_v5"
DATA = Path(fake_skus.__file__).parent / "data"


def _sku(clients, location="eastus", name=ND_A100):
    return next(s for s in clients.compute.resource_skus.list(filter=f"location eq '{location}'") if s.name == name)


def _names(clients, location) -> set[str]:
    return {s.name for s in clients.compute.resource_skus.list(filter=f"location eq '{location}'")}


def _caps(sku) -> dict:
    return {c.name: c.value for c in sku.capabilities}


# -- resource SKUs -------------------------------------------------------------------------------

def test_the_fake_imports_nothing_of_azgpus_beliefs():
    # The catalogs are the fake's own data: no module of azgpu.testing imports the profiles or the image catalog.
    import ast

    package = Path(fake_skus.__file__).parent
    imported = set()
    for module in package.rglob("*.py"):
        parts = ["azgpu", *module.relative_to(package.parent).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        here = parts if module.name == "__init__.py" else parts[:-1]  # the package the module sits in
        for node in ast.walk(ast.parse(module.read_text())):
            if isinstance(node, ast.ImportFrom):
                base = ".".join([*here[: len(here) - node.level + 1], *([node.module] if node.module else [])]) \
                    if node.level else node.module
                imported |= {base, *(f"{base}.{alias.name}" for alias in node.names)}
            elif isinstance(node, ast.Import):
                imported.update(alias.name for alias in node.names)
    assert "azgpu.testing.images" in imported  # the resolution works: the fake's own image module is seen
    assert not imported & {"azgpu.profiles", "azgpu.images", "azgpu.rules"}


def test_every_profile_size_has_an_entry_with_its_provenance():
    from azgpu.profiles import list_profiles

    data = json.loads((DATA / "resource_skus.json").read_text())
    names = {s["name"] for s in data["skus"]}
    sizes = {size.name for profile in list_profiles() for size in profile.sizes}
    assert sizes <= names, sizes - names
    assert {p["kind"] for p in data["provenance"].values()} == {"recorded", "written"}
    assert set(data["provenance"]) == names


def test_mi300x_is_served_as_recorded_not_as_documented(clients):
    # karpenter-provider-azure's fixture: MemoryGB 1920, 8 data disks, SMT, no ephemeral OS disk
    # (docs: 1850, 16, no SMT, yes).
    sku = _sku(clients, "westcentralus", MI300X)
    caps = _caps(sku)
    assert (sku.family, caps["MemoryGB"], caps["MaxDataDiskCount"], caps["vCPUsPerCore"],
            caps["EphemeralOSDiskSupported"]) \
        == ("Standard NDisr MI300X v5 Family", "1920", "8", "2", "False")
    assert fake_skus.provenance(MI300X)["kind"] == "recorded"


@pytest.mark.parametrize("size", ["Standard_ND128isr_NDR_GB200_v6", "Standard_ND128isr_GB300_v6"])
def test_grace_blackwell_sizes_report_no_gpus_capability(clients, size):
    caps = _caps(_sku(clients, "eastus", size))
    assert "GPUs" not in caps and caps["CpuArchitectureType"] == "Arm64"


def test_recorded_gpu_size_reports_ephemeral_placements(clients):
    caps = _caps(_sku(clients, "southcentralus", "Standard_NC24ads_A100_v4"))
    assert caps["SupportedEphemeralOSDiskPlacements"] == "ResourceDisk,CacheDisk"


def test_sku_of_nd_a100_v4_is_in_the_apis_shape(clients):
    sku = _sku(clients)
    assert (sku.resource_type, sku.tier, sku.size, sku.family, sku.locations, sku.restrictions) == (
        "virtualMachines", "Standard", "ND96asr_v4", "Standard NDASv4_A100 Family", ["eastus"], [])
    assert all(isinstance(c.value, str) for c in sku.capabilities)  # the API's values are strings


def test_a_gpu_size_can_have_no_zones_in_a_region(clients):
    assert _sku(clients, "eastus", "Standard_ND96isr_H200_v5").location_info[0].zones == []


def test_nd_a100_v4_offers_three_zones_in_eastus(clients):
    assert sorted(_sku(clients).location_info[0].zones) == ["1", "2", "3"]


def test_size_restricted_for_the_subscription_in_a_region(clients):
    restriction = _sku(clients, "westeurope", "Standard_ND96isr_H200_v5").restrictions[0]
    values = rest_shape(restriction)["values"]  # .values is a method of the newest SDK's models
    assert (restriction.type, restriction.reason_code, values, restriction.restriction_info.locations) == (
        "Location", "NotAvailableForSubscription", ["westeurope"], ["westeurope"])


def test_zone_restricted_for_the_subscription(clients):
    restriction = _sku(clients, "eastus", "Standard_ND96isr_H100_v5").restrictions[0]
    assert (restriction.type, restriction.restriction_info.zones) == ("Zone", ["1"])


def test_size_not_offered_in_some_regions(clients):
    assert MI300X not in _names(clients, "japaneast")


def test_retired_nd_v1_sizes_are_restricted_everywhere(clients):
    restrictions = _sku(clients, "eastus", "Standard_ND24rs").restrictions
    assert {r.reason_code for r in restrictions} == {"NotAvailableForSubscription"}


def test_general_sizes_come_from_recordings_too(clients):
    assert _caps(_sku(clients, name="Standard_D2s_v3"))["HyperVGenerations"] == "V1,V2"
    assert fake_skus.provenance("Standard_D2s_v3")["kind"] == "recorded"


def test_filter_returns_only_that_location(clients):
    assert {s.locations[0]
            for s in clients.compute.resource_skus.list(filter="location eq 'westeurope'")} == {"westeurope"}


def test_locations_argument_adds_a_region():
    with FakeAzure(locations=["Central India"]) as azure:
        from fake_azure_support import make_clients

        assert _sku(make_clients(azure), location="centralindia").name == ND_A100


def test_set_sku_changes_a_capability(azure, clients):
    azure.set_sku("eastus", ND_A100, AcceleratedNetworkingEnabled=False)
    assert _caps(_sku(clients))["AcceleratedNetworkingEnabled"] == "False"


def test_set_sku_can_remove_a_capability(azure, clients):
    azure.set_sku("eastus", ND_A100, GPUs=None)
    assert "GPUs" not in _caps(_sku(clients))


def test_set_sku_restriction_comes_back_in_arm_shape(azure, clients):
    azure.set_sku("eastus", ND_A100, restrictions=[{"type": "Zone", "zones": ["2"]}])
    restriction = _sku(clients).restrictions[0]
    assert (restriction.type, restriction.reason_code, restriction.restriction_info.zones) == (
        "Zone", "NotAvailableForSubscription", ["2"])


def test_set_sku_can_lift_a_default_restriction(azure, clients):
    azure.set_sku("westeurope", "Standard_ND96isr_H200_v5", restrictions=[])
    assert _sku(clients, "westeurope", "Standard_ND96isr_H200_v5").restrictions == []


def test_set_sku_offers_a_catalog_size_where_it_is_not_offered(azure, clients):
    azure.set_sku("japaneast", MI300X, zones=["1"])
    sku = _sku(clients, "japaneast", MI300X)
    assert (sku.location_info[0].zones, _caps(sku)["MemoryGB"]) == (["1"], "1920")


# -- usages --------------------------------------------------------------------------------------

def test_usages_name_the_family_like_azure(clients):
    usage = {u.name.value: u for u in clients.compute.usage.list("eastus")}
    family = usage["Standard NDASv4_A100 Family"]
    assert (family.name.localized_value, family.limit, family.current_value) == ("Standard NDASv4_A100 Family vCPUs",
                                                                                 1000, 0)
    assert (usage["cores"].limit, usage["lowPriorityCores"].limit) == (5000, 1000)


def test_a_gpu_family_without_gpus_capability_still_gets_the_gpu_limit(clients):
    usage = {u.name.value: u for u in clients.compute.usage.list("eastus")}
    assert usage["standardNDISRGB300V6Family"].limit == usage["Standard NDASv4_A100 Family"].limit


def test_set_quota_matches_family_names_ignoring_case_and_spaces(azure, clients):
    azure.set_quota("eastus", "standardNDASv4_A100Family", limit=96, usage=48)
    family = next(u for u in clients.compute.usage.list("eastus") if u.name.value == "Standard NDASv4_A100 Family")
    assert (family.limit, family.current_value) == (96, 48)


# -- marketplace images --------------------------------------------------------------------------

def test_image_versions_are_a_bare_list_in_version_order(clients):
    versions = clients.compute.virtual_machine_images.list("eastus", "microsoft-dsvm", "ubuntu-hpc", "2204")
    assert [v.name for v in versions] == ["22.04.2026061901", "22.04.2026072901"]


def raw_get(azure, path: str, api_version: str = "2026-04-01"):
    """The fake's answer as JSON on the wire, without an SDK model in between."""
    return requests.get(f"https://management.azure.com/subscriptions/{azure.subscription_id}{path}",
                        params={"api-version": api_version}, timeout=5).json()


def test_image_answer_carries_the_apis_field_names(azure):
    body = raw_get(azure,
                   "/providers/Microsoft.Compute/locations/eastus/publishers/microsoft-dsvm/artifacttypes/vmimage"
                          "/offers/ubuntu-hpc/skus/2204/versions/22.04.2026072901")
    assert {"osDiskImage", "dataDiskImages", "features", "hyperVGeneration", "architecture",
            "automaticOSUpgradeProperties", "imageDeprecationStatus"} <= set(body["properties"])
    assert "osImage" not in body["properties"]


def test_gen1_and_gen2_skus_keep_their_real_generation(clients):
    get = clients.compute.virtual_machine_images.get
    gen1 = get("eastus", "OpenLogic", "CentOS-HPC", "7_9", "7.9.2022040100")
    gen2 = get("eastus", "OpenLogic", "CentOS-HPC", "7_9-gen2", "7.9.2022040101")
    assert (gen1.hyper_v_generation, gen2.hyper_v_generation) == ("V1", "V2")


def test_alma_linux_hpc_image_carries_its_purchase_plan(clients):
    image = clients.compute.virtual_machine_images.get("eastus", "almalinux", "almalinux-hpc", "8_10-hpc-gen2",
                                                       "8.10.2026072901")
    plan = image.plan
    assert (plan.publisher, plan.product, plan.name) == ("almalinux", "almalinux-hpc", "8_10-hpc-gen2")


def test_deprecated_image_says_so(clients):
    image = clients.compute.virtual_machine_images.get("eastus", "OpenLogic", "CentOS-HPC", "7_9-gen2",
                                                       "7.9.2022040101")
    status = image.image_deprecation_status
    assert (status.image_state, status.alternative_option.value) == ("Deprecated", "almalinux-hpc")


def test_added_image_version_is_listed_in_order(azure, clients):
    azure.add_image("eastus", "microsoft-dsvm", "ubuntu-hpc", "2204", "2026.01.15")
    versions = clients.compute.virtual_machine_images.list("eastus", "microsoft-dsvm", "ubuntu-hpc", "2204")
    assert [v.name for v in versions][-1] == "2026.01.15"


def test_arm64_image_reports_its_architecture(azure, clients):
    azure.add_image("eastus", "contoso", "grace", "hpc", "1.0.0", architecture="Arm64")
    assert clients.compute.virtual_machine_images.get("eastus", "contoso", "grace", "hpc",
                                                      "1.0.0").architecture == "Arm64"


def test_added_image_with_plan_features_and_deprecation(azure, clients):
    azure.add_image("eastus", "contoso", "hpc", "paid", "1.0.0",
                    plan={"publisher": "contoso", "product": "hpc", "name": "paid"},
                    features=[{"name": "SecurityType", "value": "TrustedLaunchSupported"}],
                    deprecation={"imageState": "ScheduledForDeprecation",
                                 "scheduledDeprecationTime": "2030-01-01T00:00:00+00:00"})
    props = clients.compute.virtual_machine_images.get("eastus", "contoso", "hpc", "paid", "1.0.0")  # flat: every SDK
    assert (props.plan.name, props.features[0].value, props.image_deprecation_status.image_state) == (
        "paid", "TrustedLaunchSupported", "ScheduledForDeprecation")


def test_unknown_image_is_not_found(clients):
    with pytest.raises(ResourceNotFoundError):
        clients.compute.virtual_machine_images.list("eastus", "nobody", "nothing", "none")


def test_the_catalog_read_for_usages_is_the_location_s_catalog_with_its_overrides(azure):
    """Usages read the catalog without copying it (skus.read_only): the same sizes as in_location, and a size
    set_sku offers in a location counts there too."""
    catalog = azure._skus
    assert [s["name"] for s in catalog.read_only("eastus")] == [s["name"] for s in catalog.in_location("eastus")]
    assert MI300X not in [s["name"] for s in catalog.read_only("japaneast")]
    azure.set_sku("japaneast", MI300X, zones=["1"])
    assert [s for s in catalog.read_only("japaneast") if s["name"] == MI300X] == \
           [s for s in catalog.in_location("japaneast") if s["name"] == MI300X]
    assert catalog.read_only("nowhere") == []
