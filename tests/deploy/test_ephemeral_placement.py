"""Where an ephemeral OS disk goes comes from the live SupportedEphemeralOSDiskPlacements capability of
the Resource SKUs API; drift from what the documented local disks imply is reported, the live value used."""

from __future__ import annotations

import json

import pytest
from deploy_support import LOCATION, VMSS, create_args, request, writes

from azgpu.deploy import create
from azgpu.errors import ValidationFailed
from azgpu.profiles import load_profile

H100 = "Standard_ND96isr_H100_v5"  # documented resource (temp) disk: ResourceDisk
GB200 = "Standard_ND128isr_NDR_GB200_v6"  # vertical connect: CacheDisk only (R-agentbaker-gb300)
CAPABILITY = "SupportedEphemeralOSDiskPlacements"


def placement(azure) -> str:
    (vmss,) = azure.resources(type=VMSS)
    return vmss["properties"]["virtualMachineProfile"]["storageProfile"]["osDisk"]["diffDiskSettings"]["placement"]


def drift_findings(result: dict) -> list[dict]:
    return [f for f in result["preflight"]["findings"] if f["code"] == "SKU_DRIFT" and CAPABILITY in f["message"]]


def deploy(azure, session, profile: str, size: str, live: str | None, **values) -> dict:
    if live is not None:
        azure.set_sku(LOCATION, size, **{CAPABILITY: live})
    if profile == "nd-gb200-v6":  # one NVL72 rack of 18 VMs, above the fake's default GPU family limit
        azure.set_quota(LOCATION, load_profile(profile).size(size).cap("quota_family"), limit=18 * 128)
        values.setdefault("nodes", 18)
    return create(session, request(profile, ephemeral_os_disk=True, **values)).as_dict()


@pytest.mark.parametrize("live, expected", [
    ("ResourceDisk", "ResourceDisk"),
    ("CacheDisk,ResourceDisk", "ResourceDisk"),  # cache disk placement is the older series' (Learn)
    ("NvmeDisk,ResourceDisk", "ResourceDisk"),  # the resource disk leaves the NVMe disks whole for data
    ("NvmeDisk", "NvmeDisk"),
    ("CacheDisk", "CacheDisk"),
])
def test_the_live_capability_decides_the_placement(azure, session, live, expected):
    deploy(azure, session, "nd-h100-v5", H100, live)
    assert placement(azure) == expected


def test_without_the_capability_the_documented_placement_is_used(azure, session):
    result = deploy(azure, session, "nd-h100-v5", H100, None)
    assert placement(azure) == "ResourceDisk"
    assert drift_findings(result) == []


def test_vertical_connect_size_places_it_on_the_cache_disk_as_microsoft_does(azure, session):
    # R-agentbaker-gb300: CacheDisk works; ResourceDisk is InvalidParameter and NvmeDisk NotSupported.
    result = deploy(azure, session, "nd-gb200-v6", GB200, "NvmeDisk,CacheDisk")
    assert placement(azure) == "CacheDisk"
    assert drift_findings(result) == []


def test_vertical_connect_size_offering_no_cache_disk_refuses_the_ephemeral_os_disk(azure, session):
    with pytest.raises(ValidationFailed) as info:
        deploy(azure, session, "nd-gb200-v6", GB200, "NvmeDisk")
    assert "EPHEMERAL_OS_DISK_UNSUPPORTED" in [f.code for f in info.value.errors]


def test_a_placement_the_documentation_does_not_imply_is_reported_as_drift(azure, session):
    result = deploy(azure, session, "nd-h100-v5", H100, "NvmeDisk")
    (f,) = drift_findings(result)
    assert f["severity"] == "warning"
    assert "ResourceDisk (implied by the documented local disks)" in f["message"] and "reports NvmeDisk" in f["message"]


def test_no_drift_when_the_documented_placement_is_offered(azure, session):
    assert drift_findings(deploy(azure, session, "nd-h100-v5", H100, "CacheDisk,ResourceDisk")) == []


def test_drift_is_reported_even_without_an_ephemeral_os_disk(azure, session):
    azure.set_sku(LOCATION, H100, **{CAPABILITY: "NvmeDisk"})
    result = create(session, request("nd-h100-v5")).as_dict()
    assert len(drift_findings(result)) == 1
    osdisk = azure.resources(type=VMSS)[0]["properties"]["virtualMachineProfile"]["storageProfile"]["osDisk"]
    assert "diffDiskSettings" not in osdisk


def test_no_placement_at_all_refuses_the_ephemeral_os_disk_before_any_write(azure, session):
    azure.set_sku(LOCATION, H100, **{CAPABILITY: ""})
    with pytest.raises(ValidationFailed) as info:
        create(session, request("nd-h100-v5", ephemeral_os_disk=True))
    (f,) = [f for f in info.value.errors if f.code == "EPHEMERAL_OS_DISK_UNSUPPORTED"]
    assert "reports no ephemeral OS disk placement here" in f.message and f.remedy == "drop --ephemeral-os-disk"
    assert writes(azure) == []


def test_dry_run_reports_the_drift_and_writes_nothing(azure, cli):
    azure.set_sku(LOCATION, H100, **{CAPABILITY: "NvmeDisk"})
    rc, out, err = cli(*create_args("nd-h100-v5"), "--ephemeral-os-disk", "--dry-run")
    assert rc == 0, err
    assert "[SKU_DRIFT]" in err and CAPABILITY in err
    assert writes(azure) == []
    assert json.loads(out)["dry_run"] is True


def test_the_plan_is_built_once_from_the_live_values(azure, session, monkeypatch):
    """The preflight reads the Spec, not a first Plan: one Plan, built after Azure's live values replaced
    the documented ones (here the placement), never a Plan that is patched and built again."""
    from azgpu.deploy import live_plan
    from azgpu.plan import build_plan

    built = []

    def counting(spec):
        built.append(spec)
        return build_plan(spec)

    monkeypatch.setattr(live_plan, "build_plan", counting)
    deploy(azure, session, "nd-h100-v5", H100, "NvmeDisk")
    assert placement(azure) == "NvmeDisk"
    assert [s.ephemeral_placement for s in built] == ["NvmeDisk"]
