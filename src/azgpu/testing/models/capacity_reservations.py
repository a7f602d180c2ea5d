"""Capacity reservation groups and reservations (compute api 2026-04-01), as the REST examples show
them: a group's instance view lists each reservation's utilizationInfo (currentCapacity and the VMs
allocated in it), computed from the scale sets that name the group, as Azure does.

The rules enforced, each with its source beside it:
- a group holds one reservation per VM size per zone, and each reservation's zone is one of the group's
  (Learn, "Create a capacity reservation" and the overview; CapacityReservation.zones in the REST spec);
- a group's zones and reservationType are fixed at its creation (CapacityReservationGroup, REST spec);
- a Block reservation needs scheduleProfile in its documented window, cannot change its capacity or
  schedule, and cannot be deleted once allocated until its end (ScheduleProfile, CapacityReservations_Delete
  and CapacityReservationUpdate in the REST spec 2025-04-01);
- a reservation needs quota like its VMs, and the VMs deployed into it skip the quota check up to the
  reserved quantity (Learn, overview: "the quota checks are omitted for VM deployment up to the reserved
  quantity"): reserved_demand() is what the usages count (models/quota.py);
- a scale set in a group: singlePlacementGroup false (Learn, "Associate a virtual machine scale set ...
  Uniform"), at most 3 fault domains and no more than the reservation's platformFaultDomainCount (Learn,
  overview; CapacityReservationProperties.platformFaultDomainCount), and a reservation of its size in its
  zone (Learn, overview: "If the group doesn't have a reservation matching the size and location, Azure
  returns an error message").
VMs beyond a reservation's capacity still deploy (overallocation: no capacity guarantee for them) and are
listed as allocated too (Learn, "Overallocate capacity reservation": "The length of virtualMachinesAllocated
(2) is greater than capacity (1). This valid state is referred to as overallocated"). The codes Azure
gives these refusals are not documented: the fake answers with ARM's generic InvalidParameter /
OperationNotAllowed and says why in the message.
"""

from __future__ import annotations

import copy
from datetime import UTC, date, datetime, time, timedelta
from typing import TYPE_CHECKING

from ..errors import ArmError
from ..messages import Request, Response
from ..skus import capability, normalize_location
from ..store import Store, stable_uuid
from .instances import VM_TYPE

if TYPE_CHECKING:
    from ..backend import Backend

GROUP_TYPE = "Microsoft.Compute/capacityReservationGroups"
RESERVATION_TYPE = "Microsoft.Compute/capacityReservationGroups/capacityReservations"
VMSS_TYPE = "Microsoft.Compute/virtualMachineScaleSets"
# A Block reservation's capacity is one of these, and its size and capacity cannot be updated later
# (CapacityReservation's sku.capacity in compute api 2026-04-01; Learn, "Capacity reservation block").
BLOCK_CAPACITIES = (1, 2, 4, 8, 16, 32, 64)
# ScheduleProfile (REST spec 2025-04-01): start "today or within 56 days in the future. For same-day scheduling,
# requests must be submitted before 11:30 AM UTC"; end "a duration of either 1-14 whole days or 3-26 whole weeks".
START_WITHIN_DAYS, SAME_DAY_BEFORE, DAYS, WEEKS = 56, time(11, 30), (1, 14), (3, 26)
# BlockCapacityReservation_CreateOrUpdate.json (2025-04-01) answers a start date with 12:00 UTC on that day and
# an end date with 11:30 UTC on that day: the window the reservation holds its VMs in.
WINDOW_START, WINDOW_END = time(12, 0), time(11, 30)
# The fault domain count of a scale set in a reservation group "is limited to 3, enforced at deployment" (Learn,
# overview); a regional Uniform scale set that leaves it out gets 5, a zonal one 1 (Learn, "Choosing the right
# number of fault domains for Virtual Machine Scale Set").
MAX_FAULT_DOMAINS = 3
DEFAULT_FAULT_DOMAINS_REGIONAL, DEFAULT_FAULT_DOMAINS_ZONAL = 5, 1
# The reservation's own platformFaultDomainCount as the REST examples answer it (CapacityReservation_Get.json,
# BlockCapacityReservation_CreateOrUpdate.json).
RESERVATION_FAULT_DOMAINS = 3


def _zones(resource: dict | None) -> list[str]:
    return sorted(str(z) for z in (resource or {}).get("zones") or [])


def _size(resource: dict | None) -> str:
    return str(((resource or {}).get("sku") or {}).get("name", "")).lower()


def _capacity(resource: dict | None) -> int:
    return int(((resource or {}).get("sku") or {}).get("capacity") or 0)


def _failed(resource: dict) -> bool:
    return (resource.get("properties") or {}).get("provisioningState") in ("Failed", "Deleting")


def group_of(vmss: dict) -> str:
    profile = (vmss.get("properties") or {}).get("virtualMachineProfile") or {}
    return (((profile.get("capacityReservation") or {}).get("capacityReservationGroup") or {}).get("id") or "")


def members(store: Store, group_id: str) -> list[dict]:
    return [v for v in store.of_type(VMSS_TYPE) if group_of(v).lower().lstrip("/") == group_id.lower().lstrip("/")]


def reservations(store: Store, group_id: str) -> list[dict]:
    return [r for r in store.under(group_id) if r.get("type", "").lower() == RESERVATION_TYPE.lower()]


def serving(store: Store, vmss: dict) -> dict | None:
    """The reservation a scale set's VMs go into: its group's reservation of its size in its zone (a zonal
    reservation "enforces VM/VMSS using this capacity reservation to be in same zone", REST spec)."""
    group_id = group_of(vmss)
    if not group_id:
        return None
    return next((r for r in reservations(store, "/" + group_id.lstrip("/"))
                 if _size(r) == _size(vmss) and _zones(r) == _zones(vmss) and not _failed(r)), None)


def allocation(store: Store, group_id: str) -> dict[str, list[str]]:
    """Reservation id (lower case) -> ids of the VMs allocated against it, beyond its capacity too: Learn,
    "Overallocate capacity reservation" ("Azure permits the association of extra virtual machines (VMs) above
    the number of capacity reservations"; virtualMachinesAllocated then is longer than the capacity)."""
    out: dict[str, list[str]] = {}
    for vmss in sorted(members(store, group_id), key=lambda v: v["id"].lower()):
        r = serving(store, vmss)
        if r is None:
            continue
        out.setdefault(r["id"].lower(), []).extend(
            sorted(v["id"] for v in store.under(vmss["id"]) if v.get("type") == VM_TYPE))
    return out


def reserved_demand(store: Store, location: str, candidate: dict | None = None, *,
                    reservation: dict | None = None) -> tuple[list[dict], dict[str, int]]:
    """What the reservations of a location hold against quota, and how many VMs of each scale set they hold.

    Learn (overview): "Because the reservation itself requires a quota, the quota checks are omitted for VM
    deployment up to the reserved quantity." So the usages count every reservation at its capacity, and a scale
    set only for its VMs beyond what its reservation holds (filled in scale-set order). `candidate` (a scale set)
    and `reservation`: about to be written, counted in place of their stored versions.
    """
    location = normalize_location(location)
    held = {r["id"].lower(): r for r in store.of_type(RESERVATION_TYPE)
            if normalize_location(r.get("location", "")) == location and not _failed(r)}
    if reservation is not None:
        held[reservation["id"].lower()] = reservation
    sets = {v["id"].lower(): v for v in store.of_type(VMSS_TYPE)}
    if candidate is not None:
        sets[candidate["id"].lower()] = candidate
    room = {rid: _capacity(r) for rid, r in held.items()}
    covered: dict[str, int] = {}
    for vmss_id in sorted(sets):
        vmss = sets[vmss_id]
        group_id = group_of(vmss).lower().lstrip("/")
        rid = next((i for i, r in held.items() if group_id and i.lstrip("/").startswith(group_id + "/")
                    and _size(r) == _size(vmss) and _zones(r) == _zones(vmss)), None)
        if rid is None:
            continue
        take = min(room[rid], _capacity(vmss))
        room[rid] -= take
        covered[vmss_id] = take
    return list(held.values()), covered


def utilization(store: Store, reservation: dict) -> dict:
    group_id = reservation["id"].rsplit("/capacityReservations/", 1)[0]
    held = allocation(store, group_id).get(reservation["id"].lower(), [])
    return {"currentCapacity": _capacity(reservation), "virtualMachinesAllocated": [{"id": i} for i in held]}


def reservation_view(store: Store, reservation: dict, expand: bool) -> dict:
    out = copy.deepcopy(reservation)
    held = utilization(store, reservation)
    out["properties"]["virtualMachinesAssociated"] = held["virtualMachinesAllocated"]
    if expand:
        out["properties"]["instanceView"] = {
            "utilizationInfo": held,
            "statuses": [{"code": "ProvisioningState/succeeded", "level": "Info",
                          "displayStatus": "Provisioning succeeded"}]}
    return out


def group_view(store: Store, group: dict, expand: bool) -> dict:
    out = copy.deepcopy(group)
    found = reservations(store, group["id"])
    out["properties"]["capacityReservations"] = [{"id": r["id"]} for r in found]
    out["properties"]["virtualMachinesAssociated"] = [{"id": v["id"]} for v in members(store, group["id"])]
    if expand:
        out["properties"]["instanceView"] = {"capacityReservations": [
            {"name": r["name"], **reservation_view(store, r, True)["properties"]["instanceView"]} for r in found]}
    return out


def check_group_put(existing: dict | None, body: dict) -> None:
    """CapacityReservationGroup: zones "can be assigned only during creation"; reservationType "is immutable and
    cannot be changed after it is assigned" (REST spec)."""
    if existing is None:
        return
    if _zones(body) != _zones(existing):
        raise ArmError(400, "InvalidParameter", "The zones of a capacity reservation group can be assigned only "
                       "during its creation.", extra={"target": "zones"})
    was = (existing.get("properties") or {}).get("reservationType") or "Targeted"
    now = ((body.get("properties") or {}).get("reservationType")) or "Targeted"
    if was.lower() != now.lower():
        raise ArmError(400, "InvalidParameter", f"The reservation type of a capacity reservation group is immutable "
                       f"(it is {was}).", extra={"target": "reservationType"})


def check_group_deletable(store: Store, group_id: str, group: str) -> None:
    if reservations(store, group_id) or members(store, group_id):
        # Learn: a group is deleted only once its reservations are deleted and no VM is associated.
        raise ArmError(409, "OperationNotAllowed", f"Capacity reservation group '{group}' still holds capacity "
                       "reservations or associated virtual machines.")


def _day(text) -> date | None:
    if not isinstance(text, str):
        return None
    try:
        return date.fromisoformat(text[:10])
    except ValueError:
        return None


def window(reservation: dict) -> tuple[datetime, datetime] | None:
    """A Block reservation's active window (12:00 UTC on its start day to 11:30 UTC on its end day), or None."""
    schedule = (reservation.get("properties") or {}).get("scheduleProfile") or {}
    start, end = _day(schedule.get("start")), _day(schedule.get("end"))
    if start is None or end is None:
        return None
    return (datetime.combine(start, WINDOW_START, UTC), datetime.combine(end, WINDOW_END, UTC))


def _check_schedule(schedule: dict | None, block: bool, now: float) -> None:
    """ScheduleProfile: "required and only supported when the capacity reservation group type is 'Block'"."""
    if not block:
        if schedule:
            raise ArmError(400, "InvalidParameter", "scheduleProfile is only supported when the capacity reservation "
                           "group type is 'Block'.", extra={"target": "scheduleProfile"})
        return
    if not isinstance(schedule, dict) or not schedule.get("start") or not schedule.get("end"):
        raise ArmError(400, "InvalidParameter", "scheduleProfile with start and end is required for a Block capacity "
                       "reservation.", extra={"target": "scheduleProfile"})
    start, end = _day(schedule["start"]), _day(schedule["end"])
    clock = datetime.fromtimestamp(now, UTC)
    today = clock.date()
    if start is None or end is None:
        raise ArmError(400, "InvalidParameter", "scheduleProfile start and end must be dates.",
                       extra={"target": "scheduleProfile"})
    if not today <= start <= today + timedelta(days=START_WITHIN_DAYS):
        raise ArmError(400, "InvalidParameter", "The start date of a Block capacity reservation must be today or "
                       f"within {START_WITHIN_DAYS} days in the future.", extra={"target": "scheduleProfile.start"})
    if start == today and clock.time() >= SAME_DAY_BEFORE:
        raise ArmError(400, "InvalidParameter", "For same-day scheduling, requests must be submitted before 11:30 AM "
                       "UTC.", extra={"target": "scheduleProfile.start"})
    days = (end - start).days
    if not (DAYS[0] <= days <= DAYS[1] or (days % 7 == 0 and WEEKS[0] <= days // 7 <= WEEKS[1])):
        raise ArmError(400, "InvalidParameter", "The end date must be after the start date, with a duration of either "
                       "1-14 whole days or 3-26 whole weeks.", extra={"target": "scheduleProfile.end"})


def _check_zone(parent: dict, body: dict, group: str) -> None:
    """CapacityReservation.zones: "has to be single value and also should be part for the list of zones specified
    during the capacity reservation group creation"; CapacityReservationGroup.zones: "If not provided, the group
    supports only regional resources" (REST spec)."""
    zones, allowed = _zones(body), _zones(parent)
    if len(zones) > 1 or (zones and zones[0] not in allowed) or (allowed and not zones):
        raise ArmError(400, "InvalidParameter", f"The zone {zones or 'none'} of the capacity reservation is not one of "
                       f"the zones {allowed or 'none (regional)'} of capacity reservation group '{group}'.",
                       extra={"target": "zones"})


def put_reservation(backend: Backend, req: Request, group_id: str, name: str, quota_check) -> Response:
    """CapacityReservations_CreateOrUpdate: checked against its group, the SKU and quota, then long-running.

    quota_check(resource, previous): the quota models' check of what the reservation adds (passed in, so this
    module and quota.py do not import each other)."""
    parent = backend.require(group_id)
    group = group_id.rsplit("/", 1)[-1]
    body = req.body or {}
    location = normalize_location(body.get("location") or "")
    if location != normalize_location(parent.get("location", "")):
        raise ArmError(400, "InvalidParameter", f"The location '{location}' of the capacity reservation does not "
                       f"match the location '{parent.get('location')}' of its capacity reservation group.")
    size = (body.get("sku") or {}).get("name", "")
    sku = backend.skus.find(location, size)
    if sku is None or (capability(sku, "CapacityReservationSupported") or "").lower() != "true":
        raise ArmError(400, "InvalidParameter",
                       f"The VM size '{size}' is not supported for capacity reservation in location '{location}'.")
    block = ((parent.get("properties") or {}).get("reservationType") or "").lower() == "block"
    capacity = (body.get("sku") or {}).get("capacity")
    if block and capacity not in BLOCK_CAPACITIES:
        raise ArmError(400, "InvalidParameter", f"A Block capacity reservation holds "
                       f"{', '.join(map(str, BLOCK_CAPACITIES))} VMs, not {capacity}.")
    _check_zone(parent, body, group)
    resource_id = f"{group_id}/capacityReservations/{name}"
    existing = backend.find(resource_id)
    schedule = (body.get("properties") or {}).get("scheduleProfile")
    if existing is None:
        _check_schedule(schedule, block, backend.now())
    else:
        # Learn (overview): only the capacity may change; "Other changes to capacity reservation, such as VM size or
        # location, aren't permitted". CapacityReservationUpdate: "Only tags can be updated for Block Capacity
        # Reservation"; ScheduleProfile: "The scheduleProfile, start, and end fields are immutable after creation".
        if _size(existing) != size.lower() or _zones(existing) != _zones(body):
            raise ArmError(409, "OperationNotAllowed", f"The VM size and zone of capacity reservation '{name}' cannot "
                           "be changed.")
        if block and capacity != _capacity(existing):
            raise ArmError(409, "OperationNotAllowed", "The SKU name and capacity cannot be updated for Block capacity "
                           "reservations.")
        if block and schedule and schedule != (existing.get("properties") or {}).get("scheduleProfile"):
            raise ArmError(409, "OperationNotAllowed", "The scheduleProfile, start, and end fields are immutable after "
                           "creation.")
    for other in reservations(backend.store, group_id):
        # Learn: "A group can have only one reservation per VM size per zone, or just one reservation per VM size if
        # no zones are selected" (overview); "Attempting to create a second reservation for Standard_D2s_v3 in the
        # same capacity reservation group results in an error" (Create a capacity reservation).
        if other["name"].lower() != name.lower() and _size(other) == size.lower() and _zones(other) == _zones(body):
            raise ArmError(409, "OperationNotAllowed", f"Capacity reservation group '{group}' already holds a "
                           f"reservation for VM size '{size}' in zone {_zones(body) or 'none'}; a group holds one "
                           "reservation per size per zone.")
    resource = backend.new_resource(resource_id, body)
    if existing is not None and block:
        resource["properties"]["scheduleProfile"] = copy.deepcopy(existing["properties"].get("scheduleProfile"))
    quota_check(resource, existing)
    resource["properties"]["platformFaultDomainCount"] = RESERVATION_FAULT_DOMAINS
    resource["properties"]["reservationId"] = stable_uuid("capacity-reservation", resource_id.lower())
    return backend.accepted_put(req, resource, existing is not None, location)


def check_deletable(backend: Backend, reservation: dict) -> None:
    """CapacityReservations_Delete: "allowed only when all the associated resources are disassociated", and
    "Block capacity reservations cannot be deleted after it has been successfully allocated until the schedule
    end time" (REST spec; 2025-04-01: "during their scheduled active period (between schedule start and end
    times)")."""
    if utilization(backend.store, reservation)["virtualMachinesAllocated"]:
        raise ArmError(409, "OperationNotAllowed", f"Capacity reservation '{reservation['name']}' still has associated "
                       "virtual machines.")
    span = window(reservation)
    allocated = (reservation.get("properties") or {}).get("provisioningState") == "Succeeded"
    if span and allocated and span[0] <= datetime.fromtimestamp(backend.now(), UTC) < span[1]:
        raise ArmError(409, "OperationNotAllowed", "Block capacity reservations cannot be deleted after it has been "
                       f"successfully allocated until the schedule end time ({span[1].isoformat()}).")


def check_scale_set(backend: Backend, vmss: dict) -> None:
    """A scale set that names a capacity reservation group, checked as Azure does at its PUT."""
    group_id = group_of(vmss)
    if not group_id:
        return
    from ..errors import invalid_reference

    if backend.find("/" + group_id.lstrip("/")) is None:
        raise invalid_reference(group_id, vmss["id"])
    props = vmss.get("properties") or {}
    # Learn ("Associate a virtual machine scale set to Uniform Orchestration to a capacity reservation group"): "the
    # singlePlacementGroup property must be set to False"; its default is true.
    if (props.get("orchestrationMode") or "Uniform").lower() == "uniform" and props.get("singlePlacementGroup", True):
        raise ArmError(400, "InvalidParameter", "A Uniform virtual machine scale set must set singlePlacementGroup to "
                       "false to use a capacity reservation group.", extra={"target": "singlePlacementGroup"})
    reservation = serving(backend.store, vmss)
    if reservation is None:
        # Learn (overview): "If the group doesn't have a reservation matching the size and location, Azure returns an
        # error message."
        raise ArmError(400, "InvalidParameter", f"Capacity reservation group '{group_id.rsplit('/', 1)[-1]}' has no "
                       f"capacity reservation for VM size '{vmss['sku']['name']}' in zone {_zones(vmss) or 'none'}.")
    default = DEFAULT_FAULT_DOMAINS_ZONAL if _zones(vmss) else DEFAULT_FAULT_DOMAINS_REGIONAL
    count = props.get("platformFaultDomainCount", default)
    allowed = min(MAX_FAULT_DOMAINS, int((reservation.get("properties") or {}).get("platformFaultDomainCount")
                                         or MAX_FAULT_DOMAINS))
    if not isinstance(count, int) or count > allowed:
        raise ArmError(400, "InvalidParameter", f"The fault domain count {count} of the virtual machine scale set is "
                       f"more than the {allowed} its capacity reservation supports.",
                       extra={"target": "platformFaultDomainCount"})
