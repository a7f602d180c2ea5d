"""Capacity reservation groups and reservations (compute api 2026-04-01), as the REST examples show
them: a group's instance view lists each reservation's utilizationInfo (currentCapacity and the VMs
allocated in it), computed from the scale sets that name the group, as Azure does.

One reservation per size per group (Learn, D-crg); a scale set's VMs beyond a reservation's capacity
still deploy, outside it (overallocation: no capacity guarantee), and are not listed as allocated.
"""

from __future__ import annotations

import copy

from .instances import VM_TYPE
from .store import Store

GROUP_TYPE = "Microsoft.Compute/capacityReservationGroups"
RESERVATION_TYPE = "Microsoft.Compute/capacityReservationGroups/capacityReservations"
VMSS_TYPE = "Microsoft.Compute/virtualMachineScaleSets"


def group_of(vmss: dict) -> str:
    profile = (vmss.get("properties") or {}).get("virtualMachineProfile") or {}
    return (((profile.get("capacityReservation") or {}).get("capacityReservationGroup") or {}).get("id") or "")


def members(store: Store, group_id: str) -> list[dict]:
    return [v for v in store.of_type(VMSS_TYPE) if group_of(v).lower() == group_id.lower()]


def reservations(store: Store, group_id: str) -> list[dict]:
    return [r for r in store.under(group_id) if r.get("type", "").lower() == RESERVATION_TYPE.lower()]


def allocation(store: Store, group_id: str) -> dict[str, list[str]]:
    """Reservation id (lower case) -> ids of the VMs it holds, filled in scale-set order up to its capacity."""
    out: dict[str, list[str]] = {}
    by_size = {(r.get("sku") or {}).get("name", "").lower(): r for r in reservations(store, group_id)}
    for vmss in members(store, group_id):
        r = by_size.get((vmss.get("sku") or {}).get("name", "").lower())
        if r is None:
            continue
        held = out.setdefault(r["id"].lower(), [])
        room = int((r.get("sku") or {}).get("capacity") or 0) - len(held)
        vms = sorted(v["id"] for v in store.under(vmss["id"]) if v.get("type") == VM_TYPE)
        held += vms[:max(0, room)]
    return out


def utilization(store: Store, reservation: dict) -> dict:
    group_id = reservation["id"].rsplit("/capacityReservations/", 1)[0]
    held = allocation(store, group_id).get(reservation["id"].lower(), [])
    return {"currentCapacity": int((reservation.get("sku") or {}).get("capacity") or 0),
            "virtualMachinesAllocated": [{"id": i} for i in held]}


def reservation_view(store: Store, reservation: dict, expand: bool) -> dict:
    out = copy.deepcopy(reservation)
    held = utilization(store, reservation)
    out["properties"]["virtualMachinesAssociated"] = held["virtualMachinesAllocated"]
    if expand:
        out["properties"]["instanceView"] = {
            "utilizationInfo": held,
            "statuses": [{"code": "ProvisioningState/succeeded", "level": "Info", "displayStatus": "Provisioning succeeded"}]}
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
