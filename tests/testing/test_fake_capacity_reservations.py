"""The fake's capacity reservations refuse what Azure refuses, each rule from its source:

- Block reservations (REST spec, compute 2025-04-01 capacityReservation.json): scheduleProfile "is required and
  only supported when the capacity reservation group type is 'Block'"; "The SKU name and capacity cannot be
  updated for Block capacity reservations"; "Block capacity reservations cannot be deleted during their scheduled
  active period (between schedule start and end times)";
- Learn, capacity reservation overview: "A group can have only one reservation per VM size per zone"; "The fault
  domain count for a Virtual Machine Scale Set is limited to 3, enforced at deployment"; "the quota checks are
  omitted for VM deployment up to the reserved quantity"; Learn, fault domains: a regional Uniform scale set's
  default count is 5;
- Learn, "Associate a virtual machine scale set to Uniform Orchestration to a capacity reservation group": "the
  singlePlacementGroup property must be set to False".

Each test here fails when its rule is taken out of azgpu/testing/models/capacity_reservations.py (or quota.py).
"""

from __future__ import annotations

import io
import json
from datetime import UTC, date, datetime, time, timedelta

import pytest
from azure.core.exceptions import HttpResponseError
from fake_azure_support import LOCATION, ND_A100, RG, vmss_body

API = "2026-04-01"
A100_FAMILY = "standardNDASv4_A100Family"


@pytest.fixture(autouse=True)
def reservable(azure):
    azure.set_sku(LOCATION, ND_A100, CapacityReservationSupported="True",
                  SupportedCapacityReservationTypes="Targeted,Block")


def today(azure) -> date:
    return datetime.fromtimestamp(azure.now(), UTC).date()


def group_id(azure, group: str = "g") -> str:
    return f"/subscriptions/{azure.subscription_id}/resourceGroups/{RG}/providers/Microsoft.Compute/" \
           f"capacityReservationGroups/{group}"


def wire(body: dict) -> dict:
    """Sent as written: the lowest azure-mgmt-compute's models know no scheduleProfile or reservationType."""
    return {"parameters": io.BytesIO(json.dumps(body).encode()), "content_type": "application/json", "api_version": API}


def make_group(clients, group: str = "g", *, block: bool = False, zones=None):
    clients.resource.resource_groups.create_or_update(RG, {"location": LOCATION})
    body = {"location": LOCATION, "properties": {"reservationType": "Block" if block else "Targeted"}}
    if zones:
        body["zones"] = zones
    clients.compute.capacity_reservation_groups.create_or_update(RG, group, **wire(body))


def reserve(clients, name: str = "r", *, group: str = "g", capacity: int = 2, zone: str | None = None,
            schedule: dict | None = None, size: str = ND_A100):
    body = {"location": LOCATION, "sku": {"name": size, "capacity": capacity}}
    if zone:
        body["zones"] = [zone]
    if schedule:
        body["properties"] = {"scheduleProfile": schedule}
    return clients.compute.capacity_reservations.begin_create_or_update(RG, group, name, **wire(body)).result()


def schedule(azure, *, start_in: int = 1, days: int = 2) -> dict:
    start = today(azure) + timedelta(days=start_in)
    return {"start": str(start), "end": str(start + timedelta(days=days))}


def refused(call, status: int) -> HttpResponseError:
    with pytest.raises(HttpResponseError) as info:
        call()
    assert info.value.status_code == status, info.value
    return info.value


# -- Block reservations ---------------------------------------------------------------------------------

def test_a_block_reservation_needs_a_schedule(azure, clients):
    make_group(clients, block=True)
    err = refused(lambda: reserve(clients), 400)
    assert "scheduleProfile" in str(err)
    assert reserve(clients, schedule=schedule(azure)).name == "r"


def test_a_targeted_reservation_takes_no_schedule(azure, clients):
    make_group(clients)
    refused(lambda: reserve(clients, schedule=schedule(azure)), 400)


@pytest.mark.parametrize("start_in, days, ok", [(0, 1, None), (56, 1, True), (57, 1, False), (-1, 1, False),
                                                (1, 14, True), (1, 15, False), (1, 21, True), (1, 182, True),
                                                (1, 189, False), (1, 0, False)])
def test_the_block_window(azure, clients, start_in, days, ok):
    make_group(clients, block=True)
    if ok is None:  # today: only before 11:30 UTC
        ok = datetime.fromtimestamp(azure.now(), UTC).time() < time(11, 30)
    call = lambda: reserve(clients, schedule=schedule(azure, start_in=start_in, days=days))  # noqa: E731
    if ok:
        call()
    else:
        refused(call, 400)


def test_a_block_reservations_capacity_cannot_change(azure, clients):
    make_group(clients, block=True)
    when = schedule(azure)
    reserve(clients, capacity=2, schedule=when)
    err = refused(lambda: reserve(clients, capacity=4, schedule=when), 409)
    assert "cannot be updated for Block" in str(err)
    reserve(clients, capacity=2, schedule=when)  # the same again: nothing changes


def test_an_allocated_block_reservation_is_not_deleted_before_its_end(azure, clients):
    make_group(clients, block=True)
    when = schedule(azure, days=2)
    reserve(clients, schedule=when)
    start = datetime.combine(date.fromisoformat(when["start"]), time(12, 0), UTC)
    azure.sleep(start.timestamp() - azure.now() + 3600)  # inside its window
    err = refused(lambda: clients.compute.capacity_reservations.begin_delete(RG, "g", "r").result(), 409)
    assert "until the schedule end time" in str(err)
    azure.sleep(2 * 86400)  # past its end (11:30 UTC on the end day)
    clients.compute.capacity_reservations.begin_delete(RG, "g", "r").result()
    assert azure.get(f"{group_id(azure)}/capacityReservations/r") is None


def test_a_block_reservation_before_its_window_can_be_deleted(azure, clients):
    make_group(clients, block=True)
    reserve(clients, schedule=schedule(azure, start_in=3))
    clients.compute.capacity_reservations.begin_delete(RG, "g", "r").result()


# -- groups and zones ------------------------------------------------------------------------------------

def test_one_reservation_per_size_per_zone(azure, clients):
    make_group(clients, zones=["1", "2", "3"])
    reserve(clients, "z1", zone="1")
    reserve(clients, "z2", zone="2")  # the same size in another zone: allowed
    err = refused(lambda: reserve(clients, "again", zone="1"), 409)
    assert "one reservation per size per zone" in str(err)


def test_one_reservation_per_size_in_a_regional_group(azure, clients):
    make_group(clients)
    reserve(clients, "first")
    refused(lambda: reserve(clients, "second"), 409)


def test_a_reservations_zone_is_one_of_its_groups(azure, clients):
    make_group(clients, zones=["1", "2"])
    refused(lambda: reserve(clients, zone="3"), 400)
    refused(lambda: reserve(clients), 400)  # a zonal group holds zonal reservations only
    make_group(clients, "regional")
    refused(lambda: reserve(clients, group="regional", zone="1"), 400)


def test_a_groups_zones_and_type_are_fixed_at_creation(azure, clients):
    make_group(clients, zones=["1"])
    refused(lambda: make_group(clients, zones=["1", "2"]), 400)
    refused(lambda: make_group(clients, zones=["1"], block=True), 400)


# -- scale sets in a group -----------------------------------------------------------------------------------

def in_group(azure, network, *, capacity: int = 2, zones=None, **props) -> dict:
    body = vmss_body(network["subnet"], capacity=capacity, zones=zones, single_placement_group=False)
    body["properties"]["virtualMachineProfile"]["capacityReservation"] = {
        "capacityReservationGroup": {"id": group_id(azure)}}
    body["properties"].update(props)
    return body


def put_vmss(clients, body, name: str = "vmss"):
    return clients.compute.virtual_machine_scale_sets.begin_create_or_update(RG, name, body).result()


def test_a_scale_set_in_a_group_has_at_most_three_fault_domains(azure, clients, network):
    make_group(clients)
    reserve(clients, capacity=4)
    err = refused(lambda: put_vmss(clients, in_group(azure, network, platformFaultDomainCount=5)), 400)
    assert "fault domain count 5" in str(err)
    # Left out, a regional Uniform scale set gets 5 fault domains.
    refused(lambda: put_vmss(clients, in_group(azure, network)), 400)
    put_vmss(clients, in_group(azure, network, platformFaultDomainCount=1))


def test_a_zonal_scale_set_in_a_group_defaults_to_max_spreading(azure, clients, network):
    make_group(clients, zones=["2"])
    reserve(clients, capacity=4, zone="2")
    put_vmss(clients, in_group(azure, network, zones=["2"]))


def test_a_scale_set_in_a_group_sets_single_placement_group_false(azure, clients, network):
    make_group(clients)
    reserve(clients, capacity=4)
    body = in_group(azure, network, platformFaultDomainCount=1)
    body["properties"]["singlePlacementGroup"] = True
    err = refused(lambda: put_vmss(clients, body), 400)
    assert "singlePlacementGroup" in str(err)


def test_a_scale_set_needs_a_reservation_of_its_size_in_its_zone(azure, clients, network):
    make_group(clients, zones=["1", "2"])
    reserve(clients, capacity=4, zone="1")
    refused(lambda: put_vmss(clients, in_group(azure, network, zones=["2"])), 400)
    put_vmss(clients, in_group(azure, network, zones=["1"]))


# -- quota ---------------------------------------------------------------------------------------------------

def test_a_reservation_holds_its_vms_quota_and_its_vms_skip_the_check(azure, clients, network):
    azure.set_quota(LOCATION, A100_FAMILY, limit=4 * 96)
    make_group(clients)
    reserve(clients, capacity=4)
    assert azure.usage(LOCATION, A100_FAMILY) == 4 * 96, "the reservation needs quota like its VMs"
    put_vmss(clients, in_group(azure, network, capacity=4, platformFaultDomainCount=1))
    assert azure.usage(LOCATION, A100_FAMILY) == 4 * 96, "VMs up to the reserved quantity count once"
    # Beyond the reserved quantity the VMs are subject to quota checks again (overallocation).
    err = refused(lambda: put_vmss(clients, in_group(azure, network, capacity=5, platformFaultDomainCount=1)), 409)
    assert "Additional Required: 96" in str(err)


def test_a_reservation_needs_quota_for_its_vms(azure, clients):
    azure.set_quota(LOCATION, A100_FAMILY, limit=96)
    make_group(clients)
    refused(lambda: reserve(clients, capacity=2), 409)
    reserve(clients, capacity=1)


def test_vms_beyond_the_capacity_are_listed_as_allocated(azure, clients, network):
    """Learn, "Overallocate capacity reservation": "Azure permits the association of extra virtual machines (VMs)
    above the number of capacity reservations"; "The length of virtualMachinesAllocated (2) is greater than
    capacity (1). This valid state is referred to as overallocated." They are associated too, so the reservation
    cannot be deleted while they run (CapacityReservations_Delete)."""
    azure.set_quota(LOCATION, A100_FAMILY, limit=10 * 96)
    make_group(clients)
    reserve(clients, capacity=2)
    put_vmss(clients, in_group(azure, network, capacity=3, platformFaultDomainCount=1))
    group = clients.compute.capacity_reservation_groups.get(RG, "g", expand="instanceView")
    view = group.instance_view.capacity_reservations[0]
    assert view.utilization_info.current_capacity == 2 and len(view.utilization_info.virtual_machines_allocated) == 3
    got = clients.compute.capacity_reservations.get(RG, "g", "r")
    assert len(got.virtual_machines_associated) == 3
    refused(lambda: clients.compute.capacity_reservations.begin_delete(RG, "g", "r").result(), 409)
