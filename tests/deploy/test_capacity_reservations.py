"""Capacity reservations: create --capacity-reservation-group deploys into a group with room and is
refused before any write when the group has none; reserve checks Learn's and the SKU's rules first
and sends the REST examples' bodies; release deletes only what azgpu created; the capacity report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import requests
from deploy_support import LOCATION, RG, VMSS, calls, create_args, request, writes
from test_azure_examples import shape_differences

from azgpu import build_request, validate
from azgpu.capacity import reserve_findings
from azgpu.deploy import reservations
from deploy_support import create
from azgpu.errors import ValidationFailed
from azgpu.plan import build_plan

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "azure" / "compute"
A100 = "Standard_ND96asr_v4"
CRG_RG, GROUP = "crg-rg", "gpus"
ARM = "https://management.azure.com"


def group_id(azure, name: str = GROUP) -> str:
    return (f"/subscriptions/{azure.subscription_id}/resourceGroups/{CRG_RG}/providers/Microsoft.Compute/"
            f"capacityReservationGroups/{name}")


def example(name: str) -> dict:
    return json.loads((FIXTURES / f"{name}.json").read_text())


@pytest.fixture
def reservable(azure):
    azure.set_sku(LOCATION, A100, CapacityReservationSupported="True", SupportedCapacityReservationTypes="Targeted,Block")
    return azure


def reserve(session, count: int = 4, **kw):
    args = {"resource_group": CRG_RG, "group": GROUP, "name": "a100", "location": LOCATION, "size": A100,
            "count": count, "zone": None, "reservation_type": "Targeted", **kw}
    return reservations.create_reservation(session, **args)


# -- offline ----------------------------------------------------------------------------------------

def findings(**values):
    try:
        return validate(build_request(**{"profile": "nd-a100-v4", "name": "c1", "resource_group": RG,
                                         "location": LOCATION, "nodes": 2, **values}), command="plan").findings
    except ValidationFailed as exc:
        return exc.findings


def test_group_option_rules_before_azure():
    gid = "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/x/providers/Microsoft.Compute/" \
          "capacityReservationGroups/g"
    assert "INVALID_CAPACITY_RESERVATION_GROUP" in {f.code for f in findings(capacity_reservation_group="g")}
    codes = {f.code: f for f in findings(capacity_reservation_group=gid, spot=True)}
    assert codes["CAPACITY_RESERVATION_SPOT"].is_error
    conflict = codes["CAPACITY_RESERVATION_PLACEMENT_GROUP"]
    assert conflict.severity == "warning" and "singlePlacementGroup=false" in conflict.message
    assert "capacity-reservation-associate-virtual-machine-scale-set" in conflict.source and "--check" in conflict.remedy


def test_plan_associates_the_scale_sets_and_drops_the_single_placement_group():
    gid = "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/x/providers/Microsoft.Compute/" \
          "capacityReservationGroups/g"
    spec = validate(request(capacity_reservation_group=gid), command="create")
    body = build_plan(spec).scale_sets[0].body
    assert body["properties"]["singlePlacementGroup"] is False
    assert body["properties"]["virtualMachineProfile"]["capacityReservation"] == {"capacityReservationGroup": {"id": gid}}
    plain = build_plan(validate(request(), command="create")).scale_sets[0].body
    assert plain["properties"]["singlePlacementGroup"] is True and "capacityReservation" not in \
        plain["properties"]["virtualMachineProfile"]


@pytest.mark.parametrize("count, ok", [(1, True), (16, True), (64, True), (3, False), (65, False), (0, False)])
def test_block_capacities(count, ok):
    bad = [f for f in reserve_findings(reservation_type="Block", count=count, name="r", group="g") if f.is_error]
    assert (not bad) == ok
    if count == 3:
        assert "--count 4" in bad[0].remedy


# -- reserve over the fake ----------------------------------------------------------------------------

def test_reserve_sends_the_examples_bodies(reservable, session):
    result = reserve(session, zone="1", count=2)
    assert result["provisioning_state"] == "Succeeded"
    group_put, res_put = calls(reservable, "PUT", path="/capacityReservationGroups/")
    real_group = example("TargetedCapacityReservationGroup_CreateOrUpdate")["parameters"]["parameters"]
    # sharingProfile: azgpu shares no reservation with other subscriptions.
    tags = {"only_real": {"tags.department"}, "only_fake": {"tags.managed-by"}}
    assert shape_differences(real_group, group_put.body, only_real={"properties.sharingProfile", *tags["only_real"]},
                             only_fake=tags["only_fake"]) == []
    real_res = example("BlockCapacityReservation_CreateOrUpdate")["parameters"]["parameters"]
    # scheduleProfile: a future (scheduled) reservation; azgpu reserves from now.
    assert shape_differences(real_res, res_put.body, only_real={"properties", *tags["only_real"]},
                             only_fake=tags["only_fake"]) == []
    assert res_put.body["sku"] == {"name": A100, "capacity": 2} and res_put.api_version == "2026-04-01"


def test_fake_reservation_has_the_examples_shape(reservable, session):
    reserve(session)
    got = requests.get(f"{ARM}{group_id(reservable)}/capacityReservations/a100",
                       params={"api-version": "2026-04-01", "$expand": "instanceView"}, timeout=5).json()
    real = example("CapacityReservation_Get")["responses"]["200"]["body"]
    # The fake leaves out times it does not keep; it tags what azgpu creates, as the example tags.
    assert shape_differences(real, got, only_real={"properties.provisioningTime", "properties.timeCreated",
                                                   "zones", "tags.department"}, only_fake={"tags.managed-by", "type"}) == []


def test_reserve_refuses_a_size_that_cannot_be_reserved(azure, session):
    found = reservations.reserve_preflight(session, location=LOCATION, size=A100, count=2, zone=None,
                                           reservation_type="Targeted")
    assert [f.code for f in found] == ["CAPACITY_RESERVATION_UNSUPPORTED"]


def test_reserve_refuses_block_where_the_sku_lists_only_targeted(azure, session):
    azure.set_sku(LOCATION, A100, CapacityReservationSupported="True", SupportedCapacityReservationTypes="Targeted")
    found = reservations.reserve_preflight(session, location=LOCATION, size=A100, count=2, zone=None,
                                           reservation_type="Block")
    assert [f.code for f in found] == ["CAPACITY_RESERVATION_TYPE_UNSUPPORTED"]


def test_reserve_needs_quota_for_the_reserved_vms(reservable, session):
    reservable.set_quota(LOCATION, "standardNDASv4_A100Family", limit=100)
    found = reservations.reserve_preflight(session, location=LOCATION, size=A100, count=2, zone=None,
                                           reservation_type="Targeted")
    assert [f.code for f in found] == ["QUOTA_INSUFFICIENT"] and "provision quota request" in found[0].remedy


# -- create into a group --------------------------------------------------------------------------------

def test_create_deploys_into_a_group_with_room(reservable, session):
    reserve(session, count=4)
    result = create(session, request(capacity_reservation_group=group_id(reservable), nodes=3))
    assert result["preflight"]["capacity_reservation"]["reservations"][0]["free"] == 4
    vmss = reservable.resources(type=VMSS, resource_group=RG)[0]
    assert vmss["properties"]["virtualMachineProfile"]["capacityReservation"]["capacityReservationGroup"]["id"] \
        == group_id(reservable)
    _group, held = reservations.read_group(session, group_id(reservable))
    assert (held[0].reserved, held[0].used, held[0].free) == (4, 3, 1)


@pytest.mark.parametrize("case, code", [("full", "CAPACITY_RESERVATION_FULL"), ("missing", "CAPACITY_RESERVATION_GROUP_NOT_FOUND"),
                                        ("zone", "CAPACITY_RESERVATION_ZONE")])
def test_create_is_refused_before_any_write(reservable, session, case, code):
    if case != "missing":
        reserve(session, count=2, zone="1" if case == "zone" else None)
    since = len(reservable.requests)
    with pytest.raises(ValidationFailed) as info:
        create(session, request(capacity_reservation_group=group_id(reservable), nodes=3 if case == "full" else 2))
    assert code in {f.code for f in info.value.errors}
    assert writes(reservable, since) == []


def test_full_reservation_says_how_many_land_outside(reservable, session):
    reserve(session, count=2)
    with pytest.raises(ValidationFailed) as info:
        create(session, request(capacity_reservation_group=group_id(reservable), nodes=3))
    f = next(f for f in info.value.errors if f.code == "CAPACITY_RESERVATION_FULL")
    assert "1 would deploy outside the reservation" in f.message and "--capacity 3" in f.remedy


# -- release ---------------------------------------------------------------------------------------------

def test_release_deletes_only_azgpus_groups_and_asks(reservable, session):
    reserve(session)
    assert reservations.delete_reservations(session, CRG_RG, GROUP, confirm=lambda names: False)["deleted"] == []
    assert reservable.get(group_id(reservable)) is not None
    done = reservations.delete_reservations(session, CRG_RG, GROUP, confirm=lambda names: names == ["a100"])
    assert done["deleted"] == ["a100", GROUP] and reservable.get(group_id(reservable)) is None
    reservable.add_resource(group_id(reservable, "theirs"), {"location": LOCATION, "properties": {}})
    with pytest.raises(Exception) as info:
        reservations.delete_reservations(session, CRG_RG, "theirs", confirm=lambda names: True)
    assert info.value.code == "CAPACITY_RESERVATION_GROUP_NOT_OURS"


# -- the command line in simulation -----------------------------------------------------------------------

@pytest.fixture
def shape(run, state_file):
    def _shape(*args):
        rc, out, err = run("simulate", *args, "--simulate-state", state_file)
        assert rc == 0, err
    return _shape


def test_cli_reserve_create_and_capacity_report(sim, shape, state_file):
    shape("sku", "capability", "-l", LOCATION, "--size", A100, "--name", "CapacityReservationSupported", "--value", "True")
    rc, out, err = sim("reserve", "-g", CRG_RG, "--group", GROUP, "-l", LOCATION, "--profile", "nd-a100-v4",
                       "--count", "3", "--dry-run")
    assert rc == 0 and json.loads(out)["dry_run"] and json.loads(out)["cost"]["status"] == "known"
    rc, out, err = sim("reserve", "-g", CRG_RG, "--group", GROUP, "-l", LOCATION, "--profile", "nd-a100-v4",
                       "--count", "3")
    assert rc == 2 and "CONFIRMATION_REQUIRED" in err
    rc, out, err = sim("reserve", "-g", CRG_RG, "--group", GROUP, "-l", LOCATION, "--profile", "nd-a100-v4",
                       "--count", "3", "--yes")
    assert rc == 0, err
    gid = json.loads(out)["group"]
    rc, out, err = sim("capacity", "--profile", "nd-a100-v4", "--nodes", "4", "-l", LOCATION,
                       "--capacity-reservation-group", gid)
    report = json.loads(out)
    assert rc == 1 and report["verdict"] == "short"
    line = next(c for c in report["checks"] if c["check"] == "reservation")
    assert line["status"] == "short" and "raise its capacity to 4" in line["remedy"]
    rc, out, err = sim(*create_args(), "--capacity-reservation-group", gid, "--nodes", "4")
    assert rc == 2 and "CAPACITY_RESERVATION_FULL" in err and "CAPACITY_RESERVATION_PLACEMENT_GROUP" in err
    rc, out, err = sim(*create_args(), "--capacity-reservation-group", gid)
    assert rc == 0, err
    rc, out, err = sim("release", "-g", CRG_RG, "--group", GROUP, "--yes")
    assert rc == 2 and "CAPACITY_RESERVATION_GROUP_IN_USE" in err
    assert sim("destroy", "-n", "c1", "-g", RG, "--yes")[0] == 0
    rc, out, err = sim("release", "-g", CRG_RG, "--group", GROUP, "--yes")
    assert rc == 0 and json.loads(out)["deleted"] == ["standard-nd96asr-v4", GROUP]


def test_capacity_report_lines_and_remedies(sim, shape):
    shape("quota", "set", "-l", LOCATION, "--name", "standardNDASv4_A100Family", "--limit", "96")
    shape("sku", "restrict", "-l", "westus2", "--size", A100)
    rc, out, err = sim("capacity", "--profile", "nd-a100-v4", "--nodes", "2", "-l", LOCATION, "--zones", "1", "4",
                       "--fallback-locations", "westus2")
    report = json.loads(out)
    assert rc == 1 and report["verdict"] == "blocked"
    by = {(c["location"], c["zone"], c["check"]): c for c in report["checks"]}
    assert by[(LOCATION, "", "quota (family)")]["status"] == "short"
    assert "provision quota request" in by[(LOCATION, "", "quota (family)")]["remedy"]
    assert by[(LOCATION, "4", "sku")]["status"] == "blocked"
    assert by[("westus2", "", "sku")]["status"] == "blocked"
    assert by[(LOCATION, "", "quota (spot)")]["status"] == "info"
    rc, out, err = sim("capacity", "--profile", "nd-a100-v4", "--nodes", "1", "-l", LOCATION)
    assert rc == 0 and json.loads(out)["verdict"] == "ok"


def test_block_reservation_where_the_size_lists_it(reservable, session, sim, shape):
    result = reserve(session, count=8, reservation_type="Block", group="blocks")
    assert result["type"] == "Block"
    group_put = calls(reservable, "PUT", path="/capacityReservationGroups/blocks")[0]
    assert group_put.body["properties"] == {"reservationType": "Block"}
    shape("sku", "capability", "-l", LOCATION, "--size", A100, "--name", "CapacityReservationSupported", "--value", "True")
    rc, out, err = sim("reserve", "-g", CRG_RG, "--group", "b", "-l", LOCATION, "--size", A100, "--count", "3",
                       "--type", "Block", "--yes")
    assert rc == 2 and "INVALID_BLOCK_CAPACITY" in err and "--count 4" in err
