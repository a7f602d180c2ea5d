"""Capacity reservations: create --capacity-reservation-group deploys into a group with room and is
refused before any write when the group has none; reserve checks Learn's, the REST specification's and the
SKU's rules first and sends the REST examples' bodies (Block: scheduleProfile); release deletes only what
azgpu created, and no Block reservation before its end; quota is counted once; the capacity report.

The world's half comes from its sources: the example bodies of the REST specification (tests/fixtures/azure/
compute), the sentences of Learn's pages quoted below, and the ScheduleProfile windows of the specification.
"""

from __future__ import annotations

import json
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest
import requests
from deploy_support import LOCATION, RG, VMSS, calls, create_args, request, writes
from test_azure_examples import shape_differences

from azgpu import build_request, validate
from azgpu.capacity import reserve_findings, schedule_findings
from azgpu.deploy import create, reservations
from azgpu.errors import AzgpuError, ValidationFailed
from azgpu.plan import build_plan

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "azure" / "compute"
A100, A100_FAMILY = "Standard_ND96asr_v4", "standardNDASv4_A100Family"
GB300 = "Standard_ND128isr_GB300_v6"
CRG_RG, GROUP = "crg-rg", "gpus"
ARM = "https://management.azure.com"
# Learn's sentences (capacity-reservation-associate-virtual-machine-scale-set.md; virtual-machine-scale-sets-
# placement-groups.md; capacity-reservation-overview.md).
SPG_FALSE = "the singlePlacementGroup property must be set to False"
SPG_NO_IB = "Large scale (SPG=false) does not support InfiniBand networking"


def group_id(azure, name: str = GROUP, rg: str = CRG_RG) -> str:
    return (f"/subscriptions/{azure.subscription_id}/resourceGroups/{rg}/providers/Microsoft.Compute/"
            f"capacityReservationGroups/{name}")


def example(name: str) -> dict:
    return json.loads((FIXTURES / f"{name}.json").read_text())


def tomorrow() -> date:
    return datetime.now(UTC).date() + timedelta(days=1)


@pytest.fixture
def reservable(azure, monkeypatch):
    azure.set_sku(LOCATION, A100, CapacityReservationSupported="True",
                  SupportedCapacityReservationTypes="Targeted,Block")
    # azgpu reads Block schedules against the wall clock; here that is the fake's, which tests move.
    monkeypatch.setattr(reservations, "utc_now", lambda: datetime.fromtimestamp(azure.now(), UTC))
    return azure


def advance_to(azure, when: datetime) -> None:
    azure.sleep(max(0.0, when.timestamp() - azure.now()))


def window_start() -> datetime:
    """A Block reservation starting tomorrow holds VMs from 12:00 UTC that day (BlockCapacityReservation_
    CreateOrUpdate.json, 2025-04-01: start "2025-08-01" answered as "2025-08-01T12:00:00Z")."""
    return datetime.combine(tomorrow(), datetime.min.time(), UTC) + timedelta(hours=12)


def reserve(session, count: int = 4, *, group: str = GROUP, name: str | None = "a100", size: str = A100,
            zone: str | None = None, reservation_type: str = "Targeted", days: int | None = None, **kw):
    schedule = None
    if reservation_type == "Block":
        schedule, bad = schedule_findings("Block", start=str(tomorrow()), days=days or 2, weeks=None)
        assert not bad
    plan = reservations.reserve_check(session, reservations.ReservePlan(
        resource_group=CRG_RG, group=group, name=name, location=LOCATION, size=size, count=count, zone=zone,
        reservation_type=reservation_type, schedule=schedule), **kw)
    if plan.errors:
        raise ValidationFailed(plan.findings)
    return reservations.create_reservation(session, plan)


def in_group(azure, **values):
    return request(capacity_reservation_group=group_id(azure), accept_reservation_infiniband_risk=True, **values)


# -- offline ----------------------------------------------------------------------------------------

def findings(profile: str = "nd-a100-v4", **values):
    try:
        return validate(build_request(**{"profile": profile, "name": "c1", "resource_group": RG,
                                         "location": LOCATION, "nodes": 18 if "gb" in profile else 2, **values}),
                        command="plan").findings
    except ValidationFailed as exc:
        return exc.findings


GID = "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/x/providers/Microsoft.Compute/" \
      "capacityReservationGroups/g"


def test_group_option_rules_before_azure():
    assert "INVALID_CAPACITY_RESERVATION_GROUP" in {f.code for f in findings(capacity_reservation_group="g")}
    codes = {f.code: f for f in findings(capacity_reservation_group=GID, spot=True)}
    assert codes["CAPACITY_RESERVATION_SPOT"].is_error


def test_infiniband_in_a_group_is_an_error_with_both_learn_sentences():
    refused = {f.code: f for f in findings(capacity_reservation_group=GID)}["CAPACITY_RESERVATION_INFINIBAND"]
    assert refused.is_error and SPG_FALSE in refused.message and SPG_NO_IB in refused.message
    assert "capacity-reservation-associate-virtual-machine-scale-set" in refused.source
    assert "virtual-machine-scale-sets-placement-groups" in refused.source
    assert "--accept-reservation-infiniband-risk" in refused.remedy
    accepted = {f.code: f for f in findings(capacity_reservation_group=GID, accept_reservation_infiniband_risk=True)}
    assert "CAPACITY_RESERVATION_INFINIBAND" not in accepted
    assert accepted["CAPACITY_RESERVATION_PLACEMENT_GROUP"].severity == "warning"
    assert "--check" in accepted["CAPACITY_RESERVATION_PLACEMENT_GROUP"].remedy


def test_gb_sizes_in_a_group_keep_working():
    codes = {f.code for f in findings("nd-gb300-v6", capacity_reservation_group=GID) if f.is_error}
    assert not codes & {"CAPACITY_RESERVATION_INFINIBAND", "CAPACITY_RESERVATION_PLACEMENT_GROUP"}


@pytest.mark.parametrize("zone", [None, "1"])
def test_scale_sets_in_a_group_carry_a_fault_domain_count_azure_accepts(zone):
    spec = validate(request(capacity_reservation_group=GID, accept_reservation_infiniband_risk=True, zone=zone),
                    command="create")
    body = build_plan(spec).scale_sets[0].body
    # Learn: "The fault domain count for a Virtual Machine Scale Set is limited to 3, enforced at deployment";
    # left out, a regional Uniform scale set gets 5 (virtual-machine-scale-sets-manage-fault-domains.md).
    assert body["properties"]["platformFaultDomainCount"] == 1
    assert body["properties"]["singlePlacementGroup"] is False
    assert body["properties"]["virtualMachineProfile"]["capacityReservation"] == \
        {"capacityReservationGroup": {"id": GID}}
    plain = build_plan(validate(request(zone=zone), command="create")).scale_sets[0].body
    assert plain["properties"]["singlePlacementGroup"] is True and "capacityReservation" not in \
        plain["properties"]["virtualMachineProfile"] and "platformFaultDomainCount" not in plain["properties"]


NOON = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)  # after 11:30 UTC
MORNING = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


@pytest.mark.parametrize("now, start, days, weeks, code", [
    (MORNING, "2026-03-02", 1, None, None),  # today, before 11:30 UTC
    (NOON, "2026-03-02", 1, None, "INVALID_BLOCK_START"),  # "requests must be submitted before 11:30 AM UTC"
    (NOON, "2026-03-01", 1, None, "INVALID_BLOCK_START"),
    (NOON, "2026-04-27", 14, None, None),  # 56 days ahead
    (NOON, "2026-04-28", 1, None, "INVALID_BLOCK_START"),
    (NOON, "2026-03-03", 0, None, "INVALID_BLOCK_WINDOW"),
    (NOON, "2026-03-03", 15, None, "INVALID_BLOCK_WINDOW"),
    (NOON, "2026-03-03", None, 3, None),
    (NOON, "2026-03-03", None, 26, None),
    (NOON, "2026-03-03", None, 2, "INVALID_BLOCK_WINDOW"),
    (NOON, "2026-03-03", None, 27, "INVALID_BLOCK_WINDOW"),
    (NOON, "2026-03-03", 3, 3, "INVALID_BLOCK_WINDOW"),
    (NOON, "03/03/2026", 3, None, "INVALID_BLOCK_START"),
    (NOON, "2026-02-30", 3, None, "INVALID_BLOCK_START"),
    (NOON, "+1", 3, None, None),
    (NOON, "+57", 3, None, "INVALID_BLOCK_START"),
    (MORNING, "today", 1, None, None),
    (NOON, None, 3, None, "BLOCK_SCHEDULE_REQUIRED"),
    (NOON, "2026-03-03", None, None, "BLOCK_SCHEDULE_REQUIRED"),
])
def test_block_windows_as_the_specification_states_them(now, start, days, weeks, code):
    schedule, bad = schedule_findings("Block", start=start, days=days, weeks=weeks, now=now)
    assert [f.code for f in bad if f.is_error] == ([code] if code else [])
    if code is None:
        first = now.date() + timedelta(days=int(start[1:])) if start.startswith("+") else \
            now.date() if start == "today" else date.fromisoformat(start)
        assert schedule.start == first
        assert (schedule.end - schedule.start).days == (days if days is not None else 7 * weeks)


def test_targeted_takes_no_schedule():
    schedule, bad = schedule_findings("Targeted", start="2026-03-03", days=2, weeks=None)
    assert schedule is None and [f.code for f in bad] == ["SCHEDULE_NOT_BLOCK"] and "--type Block" in bad[0].remedy


@pytest.mark.parametrize("count, ok", [(1, True), (16, True), (64, True), (3, False), (65, False), (0, False)])
def test_block_capacities(count, ok):
    bad = [f for f in reserve_findings(reservation_type="Block", count=count, name="r", group="g",
                                       start=str(tomorrow()), days=2) if f.is_error]
    assert (not bad) == ok
    if count == 3:
        assert "--count 4" in bad[0].remedy


@pytest.mark.parametrize("count, racks, left", [(1, 0, 1), (2, 0, 2), (4, 0, 4), (8, 0, 8), (16, 0, 16), (32, 1, 14),
                                                (64, 3, 10)])
def test_block_capacity_in_whole_gb_racks(count, racks, left):
    got = {f.code: f for f in reserve_findings(reservation_type="Block", count=count, name="r", group="g", size=GB300,
                                               rack=18, start=str(tomorrow()), days=2)}
    if racks == 0:
        assert got["BLOCK_CAPACITY_NO_RACK"].is_error and "--count 32" in got["BLOCK_CAPACITY_NO_RACK"].remedy
    else:
        said = got["BLOCK_CAPACITY_RACKS"]
        assert said.severity == "warning" and f"holds {racks} whole NVL72 rack(s) of 18" in said.message
        assert f"other {left} reserved VMs" in said.message and f"--nodes {racks * 18}" in said.remedy


def test_targeted_on_nd_series_warns_with_learns_list():
    said = {f.code: f for f in reserve_findings(reservation_type="Targeted", count=2, name="r", group="g", size=A100)}
    warning = said["TARGETED_RESERVATION_SERIES"]
    assert warning.severity == "warning" and "ND-series" in warning.message
    assert "capacity-reservation-overview" in warning.source and "--type Block" in warning.remedy
    ng = reserve_findings(reservation_type="Targeted", count=2, name="r", group="g", size="Standard_NG8ads_V620_v1")
    assert not ng, "Learn lists NGads V620 among the series that support reservations"


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
    # A zonal group holds every zone the size has here: a group's zones are fixed at its creation.
    assert group_put.body["zones"] == ["1", "2", "3"]
    real_res = example("BlockCapacityReservation_CreateOrUpdate")["parameters"]["parameters"]
    # properties: the example is a Block reservation; a Targeted one has no schedule.
    assert shape_differences(real_res, res_put.body, only_real={"properties", *tags["only_real"]},
                             only_fake=tags["only_fake"]) == []
    assert res_put.body["sku"] == {"name": A100, "capacity": 2} and res_put.api_version == "2026-04-01"


def test_block_reservation_carries_the_examples_schedule(reservable, session):
    result = reserve(session, count=8, reservation_type="Block", group="blocks", zone="1", days=3)
    assert result["type"] == "Block"
    group_put = calls(reservable, "PUT", path="/capacityReservationGroups/blocks")[0]
    assert group_put.body["properties"] == {"reservationType": "Block"}
    res_put = calls(reservable, "PUT", path="/capacityReservationGroups/blocks/capacityReservations/")[0]
    real = example("BlockCapacityReservation_CreateOrUpdate")["parameters"]["parameters"]
    assert shape_differences(real, res_put.body, only_real={"tags.department"}, only_fake={"tags.managed-by"}) == []
    assert res_put.body["properties"]["scheduleProfile"] == {"start": str(tomorrow()),
                                                             "end": str(tomorrow() + timedelta(days=3))}


def test_fake_reservation_has_the_examples_shape(reservable, session):
    reserve(session)
    got = requests.get(f"{ARM}{group_id(reservable)}/capacityReservations/a100",
                       params={"api-version": "2026-04-01", "$expand": "instanceView"}, timeout=5).json()
    real = example("CapacityReservation_Get")["responses"]["200"]["body"]
    # The fake leaves out times it does not keep; it tags what azgpu creates, as the example tags.
    assert shape_differences(real, got, only_real={"properties.provisioningTime", "properties.timeCreated", "zones",
                                                   "tags.department"}, only_fake={"tags.managed-by", "type"}) == []


def check(session, **kw):
    args = {"resource_group": CRG_RG, "group": GROUP, "name": None, "location": LOCATION, "size": A100, "count": 2,
            "zone": None, "reservation_type": "Targeted", **kw}
    unowned = args.pop("allow_unowned", False)
    return reservations.reserve_check(session, reservations.ReservePlan(**args), allow_unowned=unowned)


def test_reserve_refuses_a_size_that_cannot_be_reserved(azure, session):
    assert [f.code for f in check(session).errors] == ["CAPACITY_RESERVATION_UNSUPPORTED"]


def test_reserve_refuses_a_type_the_sku_does_not_list(azure, session):
    azure.set_sku(LOCATION, A100, CapacityReservationSupported="True", SupportedCapacityReservationTypes="Targeted")
    unsupported = ["CAPACITY_RESERVATION_TYPE_UNSUPPORTED"]
    assert [f.code for f in check(session, reservation_type="Block").errors] == unsupported
    azure.set_sku(LOCATION, A100, CapacityReservationSupported="True", SupportedCapacityReservationTypes="Block")
    refused = check(session).errors
    assert [f.code for f in refused] == unsupported and "--type Block" in refused[0].remedy


def test_reserve_needs_quota_for_the_reserved_vms(reservable, session):
    reservable.set_quota(LOCATION, A100_FAMILY, limit=100)
    found = check(session).errors
    assert [f.code for f in found] == ["QUOTA_INSUFFICIENT"] and "provision quota request" in found[0].remedy
    # Named as every quota azgpu shows: the usage API's name.value, the name 'provision quota request' files.
    assert found[0].message.startswith("vCPU quota Standard NDASv4_A100 Family in eastus: ")


# -- create into a group --------------------------------------------------------------------------------

def test_create_deploys_into_a_group_with_room(reservable, session):
    reserve(session, count=4)
    result = create(session, in_group(reservable, nodes=3)).as_dict()
    assert result["preflight"]["capacity_reservation"]["reservations"][0]["free"] == 4
    vmss = reservable.resources(type=VMSS, resource_group=RG)[0]
    assert vmss["properties"]["virtualMachineProfile"]["capacityReservation"]["capacityReservationGroup"]["id"] \
        == group_id(reservable)
    held = reservations.read_group(session, group_id(reservable)).reservations
    assert (held[0].reserved, held[0].used, held[0].free) == (4, 3, 1)


@pytest.mark.parametrize("zone", [None, "2"])
def test_regional_and_zonal_scale_sets_send_at_most_three_fault_domains(reservable, session, zone):
    reserve(session, count=2, zone=zone)
    create(session, in_group(reservable, zone=zone))
    put = [r for r in calls(reservable, "PUT", path="/virtualMachineScaleSets/") if r.body and "sku" in r.body]
    assert put and all(r.body["properties"]["platformFaultDomainCount"] <= 3 for r in put)


@pytest.mark.parametrize("case, code", [("full", "CAPACITY_RESERVATION_FULL"), ("zone", "CAPACITY_RESERVATION_ZONE"),
                                        ("missing", "CAPACITY_RESERVATION_GROUP_NOT_FOUND")])
def test_create_is_refused_before_any_write(reservable, session, case, code):
    if case != "missing":
        reserve(session, count=2, zone="1" if case == "zone" else None)
    since = len(reservable.requests)
    with pytest.raises(ValidationFailed) as info:
        create(session, in_group(reservable, nodes=3 if case == "full" else 2))
    assert code in {f.code for f in info.value.errors}
    assert writes(reservable, since) == []


def test_full_reservation_says_how_many_land_outside(reservable, session):
    reserve(session, count=2)
    with pytest.raises(ValidationFailed) as info:
        create(session, in_group(reservable, nodes=3))
    f = next(f for f in info.value.errors if f.code == "CAPACITY_RESERVATION_FULL")
    assert "1 would deploy outside the reservation" in f.message and "--count 3" in f.remedy


def test_a_full_block_reservation_is_not_told_to_update_its_capacity(reservable, session):
    reserve(session, count=2, reservation_type="Block")
    advance_to(reservable, window_start() + timedelta(hours=1))
    with pytest.raises(ValidationFailed) as info:
        create(session, in_group(reservable, nodes=3))
    f = next(f for f in info.value.errors if f.code == "CAPACITY_RESERVATION_FULL")
    assert "capacity reservation update" not in f.remedy and "--capacity " not in f.remedy
    assert "cannot be updated" in f.remedy and "at most 2" in f.remedy


def test_a_group_with_the_size_in_two_zones_serves_a_zone_2_cluster(reservable, session):
    reserve(session, count=2, zone="1", name=None)
    reserve(session, count=2, zone="2", name=None)
    held = reservations.read_group(session, group_id(reservable)).of_size(A100)
    assert sorted(h.zones[0] for h in held) == ["1", "2"]
    result = create(session, in_group(reservable, zone="2")).as_dict()
    assert result["preflight"]["capacity_reservation"]["reservation"].endswith("-z2")
    used = {h.zones[0]: h.used for h in reservations.read_group(session, group_id(reservable)).of_size(A100)}
    assert used == {"1": 0, "2": 2}


# -- quota, counted once ---------------------------------------------------------------------------------

def test_a_cluster_in_a_group_that_reserves_it_needs_no_more_quota(reservable, session):
    """Learn: "Because the reservation itself requires a quota, the quota checks are omitted for VM deployment
    up to the reserved quantity" (capacity-reservation-overview.md)."""
    reservable.set_quota(LOCATION, A100_FAMILY, limit=4 * 96)
    reserve(session, count=4)
    assert reservable.usage(LOCATION, A100_FAMILY) == 4 * 96, "the reservation holds its VMs' quota"
    result = create(session, in_group(reservable, nodes=4)).as_dict()
    family = next(q for q in result["preflight"]["quota"] if "NDASv4" in q["quota"])
    assert (family["usage"], family["needed"], family["limit"]) == (384, 0, 384)
    assert reservable.usage(LOCATION, A100_FAMILY) == 4 * 96, "the reserved VMs are not counted twice"


def test_nodes_beyond_the_reservation_need_quota(reservable, session):
    reservable.set_quota(LOCATION, A100_FAMILY, limit=3 * 96)
    reserve(session, count=2)
    since = len(reservable.requests)
    with pytest.raises(ValidationFailed) as info:
        create(session, in_group(reservable, nodes=4))
    codes = {f.code for f in info.value.errors}
    assert "QUOTA_INSUFFICIENT" in codes and writes(reservable, since) == []


def test_quota_request_asks_for_nothing_the_reservation_holds(reservable, session):
    from azgpu.deploy import quota_requests as qr

    reservable.set_quota(LOCATION, A100_FAMILY, limit=4 * 96)
    reserve(session, count=4)
    assert qr.shortfalls(session, in_group(reservable, nodes=4)) == []
    assert [s.needed for s in qr.shortfalls(session, in_group(reservable, nodes=5))] == [96]


# -- ownership --------------------------------------------------------------------------------------------

def test_release_deletes_only_azgpus_groups_and_asks(reservable, session):
    reserve(session)
    assert reservations.delete_reservations(session, CRG_RG, GROUP, confirm=lambda names: False)["deleted"] == []
    assert reservable.get(group_id(reservable)) is not None
    done = reservations.delete_reservations(session, CRG_RG, GROUP, confirm=lambda names: names == ["a100", GROUP])
    assert done["deleted"] == ["a100", GROUP] and reservable.get(group_id(reservable)) is None
    reservable.add_resource(group_id(reservable, "theirs"), {"location": LOCATION, "properties": {}})
    with pytest.raises(AzgpuError) as info:
        reservations.delete_reservations(session, CRG_RG, "theirs", confirm=lambda names: True)
    assert info.value.code == "CAPACITY_RESERVATION_GROUP_NOT_OURS"


def test_release_leaves_a_reservation_azgpu_did_not_create(reservable, session):
    reserve(session)
    theirs = f"{group_id(reservable)}/capacityReservations/theirs"
    reservable.add_resource(theirs, {"location": LOCATION, "sku": {"name": "Standard_ND96amsr_A100_v4", "capacity": 1},
                                     "properties": {"provisioningState": "Succeeded"}})
    done = reservations.delete_reservations(session, CRG_RG, GROUP, confirm=lambda names: True)
    assert done["deleted"] == ["a100"]
    assert {"reservation": "theirs", "size": "Standard_ND96amsr_A100_v4", "why": "not created by azgpu"} in done["left"]
    assert reservable.get(theirs) is not None and reservable.get(group_id(reservable)) is not None


def test_reserve_never_lowers_a_reservation_below_its_running_vms(reservable, session):
    reserve(session, count=4)
    create(session, in_group(reservable, nodes=4))
    since = len(reservable.requests)
    with pytest.raises(ValidationFailed) as info:
        reserve(session, count=1)
    refused = next(f for f in info.value.errors if f.code == "CAPACITY_RESERVATION_IN_USE")
    assert "--count 4" in refused.remedy and writes(reservable, since) == []
    assert reservations.read_group(session, group_id(reservable)).reservations[0].reserved == 4


def test_reserve_raises_an_overallocated_reservation(reservable, session):
    """Learn, "Overallocate capacity reservation": VMs beyond the capacity are allocated against it too
    (virtualMachinesAllocated longer than capacity); raising the capacity takes no VM's guarantee away."""
    reserve(session, count=4)
    create(session, in_group(reservable, nodes=4))
    rid = f"{group_id(reservable)}/capacityReservations/a100"
    stored = reservable.get(rid)
    reservable.add_resource(rid, {**stored, "sku": {**stored["sku"], "capacity": 2}})  # lowered outside azgpu
    held = reservations.read_group(session, group_id(reservable)).reservations[0]
    assert (held.reserved, held.used, held.free) == (2, 4, 0)
    assert reserve(session, count=3)["changes"] == {"reservation": "a100", "from": 2, "to": 3, "in_use": 4}
    with pytest.raises(ValidationFailed) as info:
        reserve(session, count=2)
    assert "--count 3 or more" in next(f for f in info.value.errors if f.code == "CAPACITY_RESERVATION_IN_USE").remedy


def test_reserve_never_lowers_an_in_use_reservation_the_instance_view_does_not_describe(reservable, session):
    """A group answered without its instance view (no utilizationInfo): the VMs associated with the reservation
    (virtualMachinesAssociated, CapacityReservation_Get.json) still say what it holds."""
    reserve(session, count=4)
    create(session, in_group(reservable, nodes=4))
    answer = requests.get(f"{ARM}{group_id(reservable)}", params={"api-version": "2026-04-01"}, timeout=5).json()
    assert "instanceView" not in answer["properties"]
    reservable.inject(method="GET", path=f"capacityReservationGroups/{GROUP}$", status=200, body=answer, times=None)
    since = len(reservable.requests)
    with pytest.raises(ValidationFailed) as info:
        reserve(session, count=1)
    assert "CAPACITY_RESERVATION_IN_USE" in {f.code for f in info.value.errors} and writes(reservable, since) == []


def test_reserve_changes_a_reservation_it_did_not_create_only_when_asked(reservable, session):
    reserve(session, count=2)
    rid = f"{group_id(reservable)}/capacityReservations/a100"
    stored = reservable.get(rid)
    reservable.add_resource(rid, {**stored, "tags": {"owner": "someone"}})
    since = len(reservable.requests)
    with pytest.raises(ValidationFailed) as info:
        reserve(session, count=3)
    assert "CAPACITY_RESERVATION_NOT_OURS" in {f.code for f in info.value.errors} and writes(reservable, since) == []
    reserve(session, count=3, allow_unowned=True)
    changed = reservable.get(rid)
    assert changed["sku"]["capacity"] == 3 and changed["tags"] == {"owner": "someone"}, "its tags stay its own"


def test_reserve_converges_and_finds_the_reservation_of_the_size_and_zone(reservable, session):
    first = reserve(session, count=2, name=None)
    since = len(reservable.requests)
    again = reserve(session, count=2, name=None)
    assert again["reservation"] == first["reservation"] and again.get("unchanged") and writes(reservable, since) == []
    with pytest.raises(ValidationFailed) as info:
        reserve(session, count=2, name="another")
    assert "CAPACITY_RESERVATION_EXISTS" in {f.code for f in info.value.errors}


def test_a_reservation_whose_creation_failed_is_sent_again(reservable, session):
    """Learn ("Create a capacity reservation"): "Capacity reservation creation succeeds or fails in its entirety";
    a failed one is kept in provisioning state Failed and holds nothing, so a re-run sends it again rather than
    calling it unchanged."""
    reservable.inject(method="PUT", path="/capacityReservations/a100$", operation_error="AllocationFailed")
    with pytest.raises(AzgpuError) as info:
        reserve(session, count=4)
    assert info.value.exit_code == 1
    assert reservations.read_group(session, group_id(reservable)).reservations[0].state == "Failed"
    since = len(reservable.requests)
    again = reserve(session, count=4)
    assert not again.get("unchanged") and again["provisioning_state"] == "Succeeded"
    assert [r.method for r in writes(reservable, since)] == ["PUT"]


def test_create_into_a_failed_reservation_is_refused_before_any_write(reservable, session):
    reservable.inject(method="PUT", path="/capacityReservations/a100$", operation_error="AllocationFailed")
    with pytest.raises(AzgpuError):
        reserve(session, count=4)
    since = len(reservable.requests)
    with pytest.raises(ValidationFailed) as info:
        create(session, in_group(reservable, nodes=2))
    refused = next(f for f in info.value.errors if f.code == "CAPACITY_RESERVATION_FAILED")
    assert "provision reserve" in refused.remedy and "--count 4" in refused.remedy
    assert writes(reservable, since) == []
    from azgpu.deploy.capacity_report import capacity_for
    from azgpu.profiles import find_size

    got = capacity_for(session, vm=find_size(A100)[1], nodes=2, locations=[LOCATION], zones=[], spot=False,
                 group_id=group_id(reservable))
    line = next(r for r in got["checks"] if r["check"] == "reservation")
    assert got["verdict"] == "blocked" and "Failed" in line["detail"], got["checks"]


# -- Block reservations: the schedule, the price, release ---------------------------------------------------

def test_release_of_an_allocated_block_reservation_waits_for_its_end(reservable, session):
    reserve(session, count=2, reservation_type="Block", days=2)
    advance_to(reservable, window_start() + timedelta(hours=1))
    since = len(reservable.requests)
    with pytest.raises(ValidationFailed) as info:
        reservations.delete_reservations(session, CRG_RG, GROUP, confirm=lambda names: True)
    refused = next(f for f in info.value.errors if f.code == "CAPACITY_RESERVATION_BLOCK_ACTIVE")
    end = tomorrow() + timedelta(days=2)
    assert f"{end} 11:30 UTC" in refused.message and writes(reservable, since) == []
    advance_to(reservable, window_start() + timedelta(days=2))
    done = reservations.delete_reservations(session, CRG_RG, GROUP, confirm=lambda names: True)
    assert done["deleted"] == ["a100", GROUP]


def test_a_block_reservation_before_its_window_serves_no_cluster(reservable, session):
    reserve(session, count=2, reservation_type="Block")
    with pytest.raises(ValidationFailed) as info:
        create(session, in_group(reservable, nodes=2))
    assert "CAPACITY_RESERVATION_NOT_ACTIVE" in {f.code for f in info.value.errors}


def test_a_block_reservation_over_or_full_names_the_whole_reserve_of_another_block(reservable, session):
    """A Block's capacity and schedule cannot change (S-rest-crg): the remedy is a reserve of another Block in a new
    group, whole (no '...' or NEW to fill in), as long as the one held, in a capacity Azure offers a Block."""
    reserve(session, count=2, reservation_type="Block", days=3)
    new = f"{group_id(reservable).rsplit('/', 1)[0]}/{GROUP}-next"
    advance_to(reservable, window_start() + timedelta(hours=1))
    with pytest.raises(ValidationFailed) as info:
        create(session, in_group(reservable, nodes=3))
    full = next(f for f in info.value.errors if f.code == "CAPACITY_RESERVATION_FULL")
    assert (f"'provision reserve -g {CRG_RG} --group {GROUP}-next --type Block --size {A100} --count 4 -l {LOCATION} "
            f"--start +1 --days 3', then create with --capacity-reservation-group {new}") in full.remedy, full.remedy
    advance_to(reservable, window_start() + timedelta(days=3, hours=1))
    with pytest.raises(ValidationFailed) as info:
        create(session, in_group(reservable, nodes=2))
    over = next(f for f in info.value.errors if f.code == "CAPACITY_RESERVATION_NOT_ACTIVE")
    assert f"--count 2 -l {LOCATION} --start +1 --days 3'" in over.remedy and "..." not in over.remedy, over.remedy


def test_a_block_reservations_capacity_and_schedule_stay(reservable, session):
    reserve(session, count=2, reservation_type="Block")
    since = len(reservable.requests)
    with pytest.raises(ValidationFailed) as info:
        reserve(session, count=4, reservation_type="Block")
    assert "CAPACITY_RESERVATION_BLOCK_FIXED" in {f.code for f in info.value.errors} and writes(reservable, since) == []


def unreadable_schedule(azure, schedule: dict) -> None:
    """Azure lists the group's reservations with a scheduleProfile azgpu cannot read."""
    listed = requests.get(f"{ARM}{group_id(azure)}/capacityReservations", params={"api-version": "2026-04-01"},
                          timeout=5).json()
    for item in listed["value"]:
        item["properties"]["scheduleProfile"] = schedule
    azure.inject(method="GET", path=f"capacityReservationGroups/{GROUP}/capacityReservations$", status=200,
                 body=listed, times=None)


@pytest.mark.parametrize("schedule", [{"start": "garbage", "end": "2025-13-45"}, {}, {"start": "2026-01-01"}])
def test_a_block_reservation_with_an_unreadable_schedule_is_not_deleted(reservable, session, schedule):
    """A Block group holds Block reservations only (reservationType is fixed, REST spec), and one "cannot be deleted
    ... until the schedule end time": without a readable end, release refuses rather than sends the delete."""
    reserve(session, count=2, reservation_type="Block", days=2)
    advance_to(reservable, window_start() + timedelta(hours=1))
    unreadable_schedule(reservable, schedule)
    since = len(reservable.requests)
    with pytest.raises(ValidationFailed) as info:
        reservations.delete_reservations(session, CRG_RG, GROUP, confirm=lambda names: True)
    refused = next(f for f in info.value.errors if f.code == "CAPACITY_RESERVATION_BLOCK_ACTIVE")
    assert "no schedule end" in refused.message and "nothing was deleted" in refused.remedy
    assert writes(reservable, since) == []


def test_create_and_the_report_do_not_count_on_a_block_reservation_with_an_unreadable_schedule(reservable, session):
    from azgpu.deploy.capacity_report import capacity_for
    from azgpu.profiles import find_size

    reserve(session, count=2, reservation_type="Block", days=2)
    advance_to(reservable, window_start() + timedelta(hours=1))
    unreadable_schedule(reservable, {"start": str(tomorrow()), "end": "soon"})
    since = len(reservable.requests)
    with pytest.raises(ValidationFailed) as info:
        create(session, in_group(reservable, nodes=2))
    assert "CAPACITY_RESERVATION_SCHEDULE_UNREAD" in {f.code for f in info.value.errors}
    assert writes(reservable, since) == []
    got = capacity_for(session, vm=find_size(A100)[1], nodes=2, locations=[LOCATION], zones=[], spot=False,
                 group_id=group_id(reservable))
    line = next(r for r in got["checks"] if r["check"] == "reservation")
    assert got["verdict"] == "blocked" and "no readable schedule" in line["detail"], got["checks"]


def listed_with_next(azure, link: str) -> None:
    listed = requests.get(f"{ARM}{group_id(azure)}/capacityReservations", params={"api-version": "2026-04-01"},
                          timeout=5).json()
    azure.inject(method="GET", path=f"capacityReservationGroups/{GROUP}/capacityReservations$", status=200,
                 body={**listed, "nextLink": link}, times=1)


def test_a_next_page_elsewhere_than_arm_is_not_followed(reservable, session):
    """The page request carries the ARM token: a nextLink to another host is refused, not followed."""
    reserve(session)
    listed_with_next(reservable, "https://collector.example/steal-token")
    with pytest.raises(AzgpuError) as info:
        reservations.read_group(session, group_id(reservable))
    assert info.value.code == "ARM_ANSWER_INVALID" and info.value.exit_code == 1
    assert not [r for r in reservable.requests if "steal-token" in r.path]


def test_a_page_azure_does_not_answer_is_an_error_not_a_shorter_list(reservable, session):
    """A missing page would hide reservations from release and reserve (one per size per zone)."""
    reserve(session)
    listed_with_next(reservable, f"{ARM}{group_id(reservable)}/capacityReservations?api-version=2026-04-01&page=2")
    reservable.inject(method="GET", path=f"capacityReservationGroups/{GROUP}/capacityReservations$", status=403,
                      code="AuthorizationFailed")
    since = len(reservable.requests)
    with pytest.raises(AzgpuError) as info:
        reservations.delete_reservations(session, CRG_RG, GROUP, confirm=lambda names: True)
    assert info.value.exit_code == 1 and writes(reservable, since) == []


def test_reserve_into_a_group_of_a_type_azgpu_does_not_reserve(reservable, session):
    """compute 2026-04-01 knows more reservation types than Targeted and Block: the remedy names no --type that
    reserve would refuse."""
    reserve(session, count=2)
    answer = requests.get(f"{ARM}{group_id(reservable)}", params={"api-version": "2026-04-01",
                                                                  "$expand": "instanceView"}, timeout=5).json()
    answer["properties"]["reservationType"] = "Future"
    reservable.inject(method="GET", path=f"capacityReservationGroups/{GROUP}$", status=200, body=answer, times=None)
    refused = next(f for f in check(session, count=4).errors if f.code == "CAPACITY_RESERVATION_GROUP_TYPE")
    assert "--type" not in refused.remedy and "another --group" in refused.remedy


# -- the command line in simulation -----------------------------------------------------------------------

@pytest.fixture
def shape(run, state_file):
    def _shape(*args):
        rc, out, err = run("simulate", *args, "--simulate-state", state_file)
        assert rc == 0, err
    return _shape


@pytest.mark.parametrize("argv", [
    ("reserve", "-g", "", "--group", GROUP, "--count", "4", "--dry-run"),
    ("reserve", "-g", "rg/../x", "--group", GROUP, "--count", "4", "--dry-run"),
    ("reserve", "-g", CRG_RG, "--group", "a/b", "--count", "4", "--dry-run"),
    ("release", "-g", "", "--group", GROUP, "--yes"),
    ("release", "-g", CRG_RG, "--group", "../other", "--yes"),
    ("release", "-g", "x/providers/Microsoft.Compute/capacityReservationGroups/y", "--group", GROUP, "--yes"),
])
def test_reserve_and_release_check_their_names_before_any_request(reservable, cli, argv):
    """-g and --group go into request URLs ('/' would address another resource): refused first, with a code."""
    extra = ("-l", LOCATION, "--size", A100) if argv[0] == "reserve" else ()
    rc, out, err = cli(*argv, *extra)
    assert rc == 2 and "Traceback" not in err, err
    assert [line.split("]")[0] for line in err.splitlines() if line.startswith("ERROR: [")] in \
        (["ERROR: [INVALID_RESOURCE_GROUP"], ["ERROR: [INVALID_NAME"]), err
    assert reservable.requests == []


def test_cli_reserve_create_and_capacity_report(sim, shape, state_file):
    shape("sku", "capability", "-l", LOCATION, "--size", A100, "--name", "CapacityReservationSupported", "--value",
          "True")
    rc, out, err = sim("reserve", "-g", CRG_RG, "--group", GROUP, "-l", LOCATION, "--profile", "nd-a100-v4",
                       "--count", "3", "--dry-run")
    assert rc == 0 and json.loads(out)["dry_run"] and json.loads(out)["cost"]["status"] == "known"
    assert "TARGETED_RESERVATION_SERIES" in err
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
    assert rc == 2 and "CAPACITY_RESERVATION_INFINIBAND" in err
    rc, out, err = sim(*create_args(), "--capacity-reservation-group", gid, "--nodes", "4",
                       "--accept-reservation-infiniband-risk")
    assert rc == 2 and "CAPACITY_RESERVATION_FULL" in err and "CAPACITY_RESERVATION_PLACEMENT_GROUP" in err
    rc, out, err = sim(*create_args(), "--capacity-reservation-group", gid, "--accept-reservation-infiniband-risk")
    assert rc == 0, err
    rc, out, err = sim("release", "-g", CRG_RG, "--group", GROUP, "--yes")
    assert rc == 2 and "CAPACITY_RESERVATION_GROUP_IN_USE" in err
    assert sim("destroy", "-n", "c1", "-g", RG, "--yes")[0] == 0
    rc, out, err = sim("release", "-g", CRG_RG, "--group", GROUP, "--yes")
    assert rc == 0 and json.loads(out)["deleted"] == ["standard-nd96asr-v4", GROUP]


def test_cli_block_reservation_is_priced_for_its_window(sim, shape):
    shape("sku", "capability", "-l", LOCATION, "--size", A100, "--name", "CapacityReservationSupported", "--value",
          "True")
    shape("sku", "capability", "-l", LOCATION, "--size", A100, "--name", "SupportedCapacityReservationTypes",
          "--value", "Targeted,Block")
    rc, out, err = sim("reserve", "-g", CRG_RG, "--group", "b", "-l", LOCATION, "--size", A100, "--count", "4",
                       "--type", "Block", "--yes")
    assert rc == 2 and "BLOCK_SCHEDULE_REQUIRED" in err and "remedy:" in err
    rc, out, err = sim("reserve", "-g", CRG_RG, "--group", "b", "-l", LOCATION, "--size", A100, "--count", "3",
                       "--type", "Block", "--start", str(tomorrow()), "--weeks", "3", "--yes")
    assert rc == 2 and "INVALID_BLOCK_CAPACITY" in err and "--count 4" in err
    rc, out, err = sim("reserve", "-g", CRG_RG, "--group", "b", "-l", LOCATION, "--size", A100, "--count", "4",
                       "--type", "Block", "--start", str(tomorrow()), "--weeks", "3", "--dry-run")
    planned = json.loads(out)
    assert rc == 0, err
    window = planned["cost"]["window"]
    assert window["days"] == 21 and window["hours"] == 21 * 24
    assert window["total"] == pytest.approx(planned["cost"]["hourly"] * 21 * 24, abs=0.01)
    assert planned["schedule"] == {"start": str(tomorrow()), "end": str(tomorrow() + timedelta(weeks=3))}
    assert "whole window" in planned["billing"] and "until deleted" not in planned["billing"]


def test_cli_gb_block_reservation_says_how_many_racks(sim, shape):
    rc, out, err = sim("reserve", "-g", CRG_RG, "--group", "b", "-l", LOCATION, "--size", GB300, "--count", "16",
                       "--type", "Block", "--start", str(tomorrow()), "--days", "2", "--dry-run")
    assert rc == 2 and "BLOCK_CAPACITY_NO_RACK" in err and "--count 32" in err and out == ""


def test_capacity_report_lines_and_remedies(sim, shape):
    shape("quota", "set", "-l", LOCATION, "--name", A100_FAMILY, "--limit", "96")
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


def test_capacity_report_counts_reserved_vms_once(reservable, session):
    from azgpu.deploy.capacity_report import capacity_for
    from azgpu.profiles import find_size

    reservable.set_quota(LOCATION, A100_FAMILY, limit=4 * 96)
    reserve(session, count=4)
    got = capacity_for(session, vm=find_size(A100)[1], nodes=4, locations=[LOCATION], zones=[], spot=False,
                 group_id=group_id(reservable))
    assert got["verdict"] == "ok", got["checks"]


def test_cli_quota_request_and_create_request_quota_count_reserved_vms_once(sim, shape):
    shape("quota", "set", "-l", LOCATION, "--name", A100_FAMILY, "--limit", "384")
    shape("sku", "capability", "-l", LOCATION, "--size", A100, "--name", "CapacityReservationSupported", "--value",
          "True")
    rc, out, err = sim("reserve", "-g", CRG_RG, "--group", GROUP, "-l", LOCATION, "--size", A100, "--count", "4",
                       "--yes")
    assert rc == 0, err
    gid = json.loads(out)["group"]
    group = ["--capacity-reservation-group", gid, "--accept-reservation-infiniband-risk"]
    rc, out, err = sim("quota", "request", "--profile", "nd-a100-v4", "-n", "c1", "-g", RG, "-l", LOCATION,
                       "--nodes", "4", *group, "--yes")
    assert rc == 0 and json.loads(out)["shortfall"] == [] and "no quota increase needed" in err
    rc, out, err = sim(*create_args(nodes=4), *group, "--request-quota", "--yes", "-o", "none")
    assert rc == 0 and "filed quota request" not in err, err


def _pasted_reserve(remedy: str) -> dict:
    """The reserve command a remedy quotes, parsed as the CLI parses it, and checked as reserve checks it first."""
    import shlex

    import click

    from azgpu.cli import cli

    words = shlex.split(remedy.split("'provision ", 1)[1].split("'", 1)[0])
    ctx = cli.get_command(click.Context(cli), words[0]).make_context(words[0], words[1:])
    p = ctx.params
    bad = reserve_findings(reservation_type=p["reservation_type"], count=p["count"], name=p["name"], group=p["group"],
                           start=p["start"], days=p["days"], weeks=p["weeks"], size=p["size"], rack=None)
    bad += schedule_findings(p["reservation_type"], start=p["start"], days=p["days"], weeks=p["weeks"])[1]
    assert not [f for f in bad if f.is_error], bad
    return p


def test_another_block_is_named_in_a_group_that_does_not_exist_yet(reservable, session):
    """<group>-next already holding a Block of the size: reserve would refuse the pasted command
    (CAPACITY_RESERVATION_BLOCK_FIXED), so the remedy names a group that does not exist."""
    reserve(session, count=2, reservation_type="Block", days=3)
    reserve(session, count=4, reservation_type="Block", days=3, group=f"{GROUP}-next")
    advance_to(reservable, window_start() + timedelta(hours=1))
    with pytest.raises(ValidationFailed) as info:
        create(session, in_group(reservable, nodes=3))
    full = next(f for f in info.value.errors if f.code == "CAPACITY_RESERVATION_FULL")
    pasted = _pasted_reserve(full.remedy)
    assert pasted["group"] == f"{GROUP}-next2" and pasted["count"] == 4 and pasted["days"] == 3, full.remedy
    assert full.remedy.endswith(f"--capacity-reservation-group {group_id(reservable, f'{GROUP}-next2')}")


def test_another_block_for_more_than_64_nodes_says_a_block_holds_64(reservable, session):
    reserve(session, count=2, reservation_type="Block", days=3)
    advance_to(reservable, window_start() + timedelta(hours=1))
    with pytest.raises(ValidationFailed) as info:
        create(session, in_group(reservable, nodes=70))
    full = next(f for f in info.value.errors if f.code == "CAPACITY_RESERVATION_FULL")
    assert _pasted_reserve(full.remedy)["count"] == 64 and "at most 64" in full.remedy, full.remedy


def test_another_block_for_a_group_of_the_longest_name_is_named_within_the_limit(reservable, session):
    """A group's name may have 80 characters (capacity.NAME): '<group>-next' would have 85, which reserve refuses
    (INVALID_NAME); the remedy's group is cut to fit, and still does not exist."""
    longest = "g" * 80
    reserve(session, count=2, reservation_type="Block", days=3, group=longest)
    advance_to(reservable, window_start() + timedelta(hours=1))
    with pytest.raises(ValidationFailed) as info:
        create(session, request(capacity_reservation_group=group_id(reservable, longest),
                                accept_reservation_infiniband_risk=True, nodes=3))
    full = next(f for f in info.value.errors if f.code == "CAPACITY_RESERVATION_FULL")
    pasted = _pasted_reserve(full.remedy)  # checked as reserve checks it: no INVALID_NAME
    assert pasted["group"] == "g" * 75 + "-next" and len(pasted["group"]) == 80, full.remedy
