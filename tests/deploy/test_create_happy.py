"""`create` succeeds for every deployable series, with the real SDK clients against the fake Azure."""

from __future__ import annotations

import time

import pytest
from deploy_support import (
    ALL_SERIES,
    LOCATION,
    NAME,
    NAT,
    NIC,
    NSG,
    PIP,
    RG,
    RG_TYPE,
    VM,
    VMSS,
    VNET,
    calls,
    request,
    writes,
)

from azgpu.deploy import create
from azgpu.errors import ValidationFailed
from azgpu.profiles import load_profile

GB = ("nd-gb200-v6", "nd-gb300-v6")


def nodes_for(profile: str) -> int:
    return 18 if profile in GB else 3  # GB: one NVL72 rack of 18 VMs


def deploy(azure, session, profile: str) -> dict:
    size = load_profile(profile).default_size
    nodes = nodes_for(profile)
    if profile in GB:
        # 18 x 128 vCPUs is above the fake's default GPU family limit of 1000.
        family = load_profile(profile).size(size).cap("quota_family")
        azure.set_quota(LOCATION, family, limit=nodes * 128)
    return create(session, request(profile, nodes=nodes)).as_dict()


@pytest.mark.parametrize("profile", ALL_SERIES)
def test_every_resource_is_tagged_with_cluster_and_profile(azure, session, profile):
    deploy(azure, session, profile)
    resources = [r for t in (NSG, PIP, NAT, VNET, VMSS) for r in azure.resources(type=t, resource_group=RG)]
    assert {r["type"] for r in resources} == {NSG, PIP, NAT, VNET, VMSS}
    for r in resources:
        assert {k: r["tags"].get(k) for k in ("managed-by", "azgpu-cluster", "azgpu-profile")} == \
               {"managed-by": "azgpu", "azgpu-cluster": NAME, "azgpu-profile": profile}, r["id"]


@pytest.mark.parametrize("profile", ALL_SERIES)
def test_scale_sets_are_uniform_with_single_placement_group_for_infiniband(azure, session, profile):
    deploy(azure, session, profile)
    infiniband = load_profile(profile).size(load_profile(profile).default_size).infiniband
    scale_sets = azure.resources(type=VMSS, resource_group=RG)
    assert scale_sets
    for vmss in scale_sets:
        props = vmss["properties"]
        assert props["orchestrationMode"] == "Uniform"
        # Vertical-connect racks (GB200/GB300) span placement groups (R-agentbaker-gb300, docs/gb-racks.md).
        vertical = load_profile(profile).vertical_connect
        assert props["singlePlacementGroup"] is (infiniband and not vertical)
        assert props["provisioningState"] == "Succeeded"


def test_infiniband_series_are_the_ones_with_single_placement_group():
    # Guards the parametrized test above from passing vacuously: only NG has no InfiniBand.
    no_ib = [p for p in ALL_SERIES if not load_profile(p).size(load_profile(p).default_size).infiniband]
    assert no_ib == ["ng"]


@pytest.mark.parametrize("profile", ALL_SERIES)
def test_instances_equal_nodes_each_with_a_private_ip(azure, session, profile):
    result = deploy(azure, session, profile)
    vms = azure.resources(type=VM, resource_group=RG)
    nics = azure.resources(type=NIC, resource_group=RG)
    assert len(vms) == len(nics) == nodes_for(profile) == result["nodes"]
    assert all(n["properties"]["ipConfigurations"][0]["properties"]["privateIPAddress"] for n in nics)


@pytest.mark.parametrize("profile", ALL_SERIES)
def test_create_reports_every_resource_succeeded(azure, session, profile):
    result = deploy(azure, session, profile)
    assert result["resource_group_created"] is True
    assert {r["state"] for r in result["resources"]} == {"succeeded"}
    assert len(result["resources"]) == sum(len(azure.resources(type=t)) for t in (NSG, PIP, NAT, VNET, VMSS))


def test_created_resource_group_is_tagged_as_made_by_azgpu(azure, session):
    create(session, request())
    (group,) = azure.resources(type=RG_TYPE)
    assert (group["name"], group["location"]) == (RG, LOCATION)
    assert group["tags"] == {"managed-by": "azgpu", "azgpu-cluster": NAME, "azgpu-created": "true"}


def test_existing_resource_group_is_used_untouched(azure, session):
    azure.add_resource(f"/subscriptions/{azure.subscription_id}/resourceGroups/{RG}",
                       {"location": LOCATION, "tags": {"owner": "me"}})
    result = create(session, request()).as_dict()
    assert result["resource_group_created"] is False
    assert [r.path for r in calls(azure, "PUT") if "/providers/" not in r.path] == []  # no PUT of the group
    (group,) = azure.resources(type=RG_TYPE)
    assert group["tags"] == {"owner": "me"}


@pytest.mark.parametrize("profile", GB)
def test_grace_sizes_deploy_the_profiles_arm64_image(azure, session, profile):
    deploy(azure, session, profile)
    (vmss,) = azure.resources(type=VMSS, resource_group=RG)
    ref = vmss["properties"]["virtualMachineProfile"]["storageProfile"]["imageReference"]
    image = session.compute.virtual_machine_images.get(LOCATION, ref["publisher"], ref["offer"], ref["sku"],
                                                       _latest(session, ref))
    assert str(getattr(image.architecture, "value", image.architecture)) == "Arm64"


def _latest(session, ref) -> str:
    versions = session.compute.virtual_machine_images.list(LOCATION, ref["publisher"], ref["offer"], ref["sku"])
    return versions[-1].name


def test_grace_size_with_an_x64_image_is_refused_before_any_write(azure, session):
    with pytest.raises(ValidationFailed) as info:
        create(session, request("nd-gb300-v6", image="ubuntu-hpc-2204"))
    assert "IMAGE_ARCHITECTURE" in {f.code for f in info.value.errors}
    assert writes(azure) == []


def test_happy_path_is_fast_and_sleeps_only_virtually(azure, session):
    start = time.monotonic()
    create(session, request("nd-a100-v4", nodes=6, max_ib_domain=2))
    assert time.monotonic() - start < 5
    assert len(azure.resources(type=VMSS)) == 3
