"""The preflight reads the subscription (SKUs, capabilities, quota, images) and reports every
finding at once before any write; --dry-run stops after it and prints the plan."""

from __future__ import annotations

import json

import pytest
from deploy_support import LOCATION, VMSS, assert_cli_error, calls, create_args, error_lines, request, writes

from azgpu.deploy import CreateOptions, create
from azgpu.errors import ValidationFailed

A100 = "Standard_ND96asr_v4"
A100_FAMILY = "standardNDASv4_A100Family"
NEEDED = 2 * 96  # two ND96asr_v4 nodes


def preflight_failure(azure, session, **values) -> list:
    """The error findings of a create that the preflight stops; asserts nothing was written."""
    with pytest.raises(ValidationFailed) as info:
        create(session, request(**values))
    assert writes(azure) == [], "the preflight must stop before any write"
    return info.value.errors


def only(findings, code):
    found = [f for f in findings if f.code == code]
    assert len(found) == 1, [(f.code, f.message) for f in findings]
    return found[0]


# -- quota -------------------------------------------------------------------------------------

def test_family_quota_shortfall_names_usage_limit_needed_and_the_increase(azure, session):
    azure.set_quota(LOCATION, A100_FAMILY, limit=200, usage=50)
    f = only(preflight_failure(azure, session), "QUOTA_INSUFFICIENT")
    assert f"usage 50 + needed {NEEDED} exceeds the limit 200" in f.message
    assert "NDASv4_A100" in f.message
    assert f"request an increase to {50 + NEEDED}" in f.remedy


def test_regional_quota_shortfall(azure, session):
    azure.set_quota(LOCATION, "cores", limit=100)
    f = only(preflight_failure(azure, session), "QUOTA_INSUFFICIENT")
    assert "vCPU quota cores in" in f.message and f"request an increase to {NEEDED}" in f.remedy


def test_spot_checks_low_priority_cores(azure, session):
    azure.set_quota(LOCATION, "lowPriorityCores", limit=100, usage=10)
    f = only(preflight_failure(azure, session, spot=True), "QUOTA_INSUFFICIENT")
    assert "vCPU quota lowPriorityCores in" in f.message and f"request an increase to {10 + NEEDED}" in f.remedy


def test_spot_does_not_need_the_family_quota(azure, session):
    azure.set_quota(LOCATION, A100_FAMILY, limit=0)
    create(session, request(spot=True))
    assert azure.resources(type=VMSS)[0]["properties"]["virtualMachineProfile"]["priority"] == "Spot"


def test_spot_does_not_need_the_regional_quota(azure, session):
    # Spot VMs count against the spot vCPU quota only (Learn, "Increase spot vCPU family quotas").
    azure.set_quota(LOCATION, "cores", limit=0)
    result = create(session, request(spot=True)).as_dict()
    assert [q["quota"] for q in result["preflight"]["quota"]] == ["lowPriorityCores"]  # the usage names
    assert azure.resources(type=VMSS)[0]["properties"]["provisioningState"] == "Succeeded"


def test_regular_nodes_need_the_family_and_the_regional_quota(azure, session):
    result = create(session, request()).as_dict()
    assert sorted(q["quota"] for q in result["preflight"]["quota"]) == ["Standard NDASv4_A100 Family", "cores"]


def test_quota_counts_only_what_a_rerun_adds(azure, session):
    create(session, request())
    azure.set_quota(LOCATION, A100_FAMILY, limit=NEEDED + 96)  # room for exactly one more node
    result = create(session, request(nodes=3)).as_dict()
    family = next(q for q in result["preflight"]["quota"] if "NDASv4" in q["quota"])
    assert (family["usage"], family["needed"]) == (NEEDED, 96)


def test_family_names_compare_without_case_or_spaces(azure, session):
    # Azure spells some families with stray spaces and odd case (facts sheet, section 4).
    azure.set_sku(LOCATION, A100, family="  Standard NDasV4_A100 FAMILY ")
    azure.set_quota(LOCATION, "Standard NDasV4_A100 FAMILY", limit=100)
    findings = preflight_failure(azure, session)
    assert "QUOTA_INSUFFICIENT" in {f.code for f in findings}


def test_odd_family_spelling_is_still_found_when_quota_suffices(azure, session):
    azure.set_sku(LOCATION, A100, family="standard NDASV4_a100 Family")
    result = create(session, request()).as_dict()
    codes = {f["code"] for f in result["preflight"]["findings"]}
    assert "QUOTA_UNKNOWN" not in codes
    assert len(result["preflight"]["quota"]) == 2  # family and regional


# -- SKU availability, restrictions, zones -------------------------------------------------------

def test_size_restricted_for_the_subscription(azure, session):
    azure.set_sku(LOCATION, A100, restrictions=[{"type": "Location", "reasonCode": "NotAvailableForSubscription"}])
    f = only(preflight_failure(azure, session), "SKU_RESTRICTED")
    assert "NotAvailableForSubscription" in f.message and "-l/--location" in f.remedy


def test_zone_restriction_matters_only_with_that_zone(azure, session):
    azure.set_sku(LOCATION, A100, restrictions=[{"type": "Zone", "zones": ["2"]}])
    f = only(preflight_failure(azure, session, zone="2"), "SKU_RESTRICTED")
    assert "zone 2" in f.message and "--zone" in f.remedy


def test_zone_restriction_elsewhere_does_not_block(azure, session):
    azure.set_sku(LOCATION, A100, restrictions=[{"type": "Zone", "zones": ["2"]}])
    create(session, request(zone="1"))
    assert azure.resources(type=VMSS)[0]["zones"] == ["1"]


def test_zone_not_offered(azure, session):
    azure.set_sku(LOCATION, A100, zones=["1", "2"])
    f = only(preflight_failure(azure, session, zone="3"), "ZONE_NOT_OFFERED")
    assert "zones: 1, 2" in f.message and "--zone 1" in f.remedy


def test_zone_asked_where_the_size_has_no_zones(azure, session):
    # Common for GPU sizes: locationInfo.zones is empty, the size is regional only.
    azure.set_sku(LOCATION, A100, zones=[])
    f = only(preflight_failure(azure, session, zone="1"), "ZONE_NOT_OFFERED")
    assert "has no availability zones in eastus" in f.message and "drop --zone" in f.remedy


def test_fallback_zones_where_the_size_has_none_fail_before_any_write(azure, session):
    azure.set_sku(LOCATION, A100, zones=[])
    with pytest.raises(ValidationFailed) as info:
        create(session, request(), CreateOptions(zones=["1", "2"]))
    assert [(f.code, "drop --zones" in f.remedy) for f in info.value.errors] == [("ZONE_NOT_OFFERED", True)] * 2
    assert writes(azure) == []


def test_fallback_zone_the_size_lacks_is_named_with_the_ones_it_has(azure, session):
    azure.set_sku(LOCATION, A100, zones=["1", "2"])
    with pytest.raises(ValidationFailed) as info:
        create(session, request(zone="1"), CreateOptions(zones=["1", "3"]))
    [f] = info.value.errors
    assert (f.code, "no zone 3" in f.message, f.remedy) == ("ZONE_NOT_OFFERED", True, "pass --zones 1 2, or no --zones")
    assert writes(azure) == []


def test_cli_zone_where_the_size_has_no_zones_exits_2_without_writing(azure, cli):
    azure.set_sku(LOCATION, A100, zones=[])
    rc, out, err = cli(*create_args(), "--zone", "2")
    assert_cli_error(rc, err, 2, "ZONE_NOT_OFFERED", "drop --zone")
    assert writes(azure) == []


def test_size_not_offered_in_the_location(azure, session):
    # brazilsouth is a real region the fake offers no SKUs in.
    f = only(preflight_failure(azure, session, location="brazilsouth"), "SKU_NOT_OFFERED")
    assert A100 in f.message and "brazilsouth" in f.message


# -- capabilities: the live value wins ---------------------------------------------------------

def test_generation_drift_is_a_warning(azure, session):
    azure.set_sku(LOCATION, A100, HyperVGenerations="V1,V2")
    result = create(session, request()).as_dict()
    drift = [f for f in result["preflight"]["findings"] if f["code"] == "SKU_DRIFT"]
    assert len(drift) == 1 and drift[0]["severity"] == "warning" and "HyperVGenerations" in drift[0]["message"]


def test_accelerated_networking_drift_turns_it_off_in_the_plan(azure, session):
    azure.set_sku(LOCATION, A100, AcceleratedNetworkingEnabled=False)
    result = create(session, request()).as_dict()
    assert any(f["code"] == "SKU_DRIFT" and "AcceleratedNetworkingEnabled" in f["message"]
               for f in result["preflight"]["findings"])
    put = next(r for r in calls(azure, "PUT", path="virtualMachineScaleSets"))
    nic = put.body["properties"]["virtualMachineProfile"]["networkProfile"]["networkInterfaceConfigurations"][0]
    assert nic["properties"]["enableAcceleratedNetworking"] is False


def test_fewer_data_disks_than_requested_is_an_error(azure, session):
    azure.set_sku(LOCATION, A100, MaxDataDiskCount=2)
    f = only(preflight_failure(azure, session, data_disks=4), "DATA_DISKS_OVER_LIMIT")
    assert "--data-disks 2" in f.remedy


# -- images --------------------------------------------------------------------------------------

def test_image_missing_in_the_location(azure, session):
    azure.add_image("westus2", "contoso", "hpc", "2204", "1.0.0")
    f = only(preflight_failure(azure, session, image="contoso:hpc:2204:latest"), "IMAGE_NOT_FOUND")
    assert "contoso:hpc:2204" in f.message and LOCATION in f.message


def test_image_present_in_the_location_deploys(azure, session):
    azure.add_image(LOCATION, "contoso", "hpc", "2204", "1.0.0")
    create(session, request(image="contoso:hpc:2204:latest"))
    ref = azure.resources(type=VMSS)[0]["properties"]["virtualMachineProfile"]["storageProfile"]["imageReference"]
    assert (ref["publisher"], ref["offer"], ref["sku"]) == ("contoso", "hpc", "2204")


def test_image_version_missing(azure, session):
    f = only(preflight_failure(azure, session, image="microsoft-dsvm:ubuntu-hpc:2204:1.2.3"), "IMAGE_NOT_FOUND")
    assert "1.2.3" in f.message


def test_live_image_generation_is_checked(azure, session):
    azure.add_image(LOCATION, "contoso", "hpc", "gen1", "1.0.0", hyper_v_generation="V1")
    codes = {f.code for f in preflight_failure(azure, session, image="contoso:hpc:gen1:latest")}
    assert "IMAGE_GENERATION" in codes


# -- all at once ---------------------------------------------------------------------------------

def test_every_finding_is_reported_at_once(azure, session):
    azure.set_quota(LOCATION, A100_FAMILY, limit=10)
    azure.set_quota(LOCATION, "cores", limit=10)
    azure.set_sku(LOCATION, A100, MaxDataDiskCount=1)
    codes = [f.code for f in preflight_failure(azure, session, data_disks=4, image="contoso:none:1:latest")]
    assert sorted(codes) == ["DATA_DISKS_OVER_LIMIT", "IMAGE_NOT_FOUND", "QUOTA_INSUFFICIENT", "QUOTA_INSUFFICIENT"]


def test_cli_prints_every_preflight_error_and_exits_2_without_writing(azure, cli):
    azure.set_quota(LOCATION, A100_FAMILY, limit=10)
    azure.set_sku(LOCATION, A100, MaxDataDiskCount=1)
    rc, out, err = cli(*create_args("nd-a100-v4", "--data-disks", 4))
    assert rc == 2 and "Traceback" not in err
    assert {line.split("]")[0] for line in error_lines(err)} == {"ERROR: [QUOTA_INSUFFICIENT",
                                                                 "ERROR: [DATA_DISKS_OVER_LIMIT"}
    assert "  remedy: request an increase to 192" in err
    assert writes(azure) == []


# -- --dry-run -----------------------------------------------------------------------------------

def test_dry_run_prints_the_plan_and_writes_nothing(azure, cli):
    rc, out, err = cli(*create_args("nd-a100-v4", "--dry-run", nodes=6), "--max-ib-domain", 2)
    assert rc == 0, err
    result = json.loads(out)
    assert result["dry_run"] is True
    assert [s["name"] for s in result["scale_sets"]] == ["c1-vmss000", "c1-vmss001", "c1-vmss002"]
    assert {q["quota"] for q in result["preflight"]["quota"]} >= {"cores"}
    assert writes(azure) == []
    assert azure.resources() == []


def test_dry_run_still_fails_on_preflight_errors(azure, cli):
    azure.set_quota(LOCATION, "cores", limit=10)
    rc, out, err = cli(*create_args("nd-a100-v4", "--dry-run"))
    assert_cli_error(rc, err, 2, "QUOTA_INSUFFICIENT", "request an increase to 192")
    assert writes(azure) == []


def test_a_restricted_zone_in_zones_is_refused_as_with_zone(azure, cli):
    """--zones 1 where zone 1 is restricted: refused as --zone 1 is, not a regional scale set deployed instead."""
    azure.set_sku(LOCATION, A100, restrictions=[{"type": "Zone", "zones": ["1"]}])
    for flags in (["--zone", "1"], ["--zones", "1"]):
        since = len(azure.requests)
        rc, out, err = cli(*create_args(), *flags)
        assert rc == 2 and "ERROR: [SKU_RESTRICTED]" in err and "zone 1" in err, (flags, err)
        assert writes(azure, since) == [], flags
