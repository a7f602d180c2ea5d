"""Capacity reservation groups and reservations (compute api 2026-04-01), as the REST examples show
them: a group's instance view lists each reservation's utilizationInfo (currentCapacity and the VMs
allocated in it), computed from the scale sets that name the group, as Azure does.

One reservation per size per group (Learn, D-crg); a scale set's VMs beyond a reservation's capacity
still deploy, outside it (overallocation: no capacity guarantee), and are not listed as allocated.
"""

from __future__ import annotations

import copy
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


def check_group_deletable(store: Store, group_id: str, group: str) -> None:
    if reservations(store, group_id) or members(store, group_id):
        # Learn: a group is deleted only once its reservations are deleted and no VM is associated.
        raise ArmError(409, "OperationNotAllowed", f"Capacity reservation group '{group}' still holds capacity "
                       "reservations or associated virtual machines.")


def put_reservation(backend: Backend, req: Request, group_id: str, name: str) -> Response:
    """CapacityReservations_CreateOrUpdate: checked against its group and the SKU, then long-running."""
    parent = backend.require(group_id)
    body = req.body or {}
    location = normalize_location(body.get("location") or "")
    if location != normalize_location(parent.get("location", "")):
        raise ArmError(400, "InvalidParameter", f"The location '{location}' of the capacity reservation does not "
                       f"match the location '{parent.get('location')}' of its capacity reservation group.")
    size = (body.get("sku") or {}).get("name", "")
    sku = backend.skus.find(location, size)
    # The codes Azure gives these refusals are not documented: the fake answers with ARM's generic
    # InvalidParameter / OperationNotAllowed and says why in the message.
    if sku is None or (capability(sku, "CapacityReservationSupported") or "").lower() != "true":
        raise ArmError(400, "InvalidParameter",
                       f"The VM size '{size}' is not supported for capacity reservation in location '{location}'.")
    capacity = (body.get("sku") or {}).get("capacity")
    if (parent.get("properties") or {}).get("reservationType") == "Block" and capacity not in BLOCK_CAPACITIES:
        raise ArmError(400, "InvalidParameter", f"A Block capacity reservation holds "
                       f"{', '.join(map(str, BLOCK_CAPACITIES))} VMs, not {capacity}.")
    for other in reservations(backend.store, group_id):
        if other["name"].lower() != name.lower() and (other.get("sku") or {}).get("name", "").lower() == size.lower():
            group = group_id.rsplit("/", 1)[-1]
            raise ArmError(409, "OperationNotAllowed", f"Capacity reservation group '{group}' already holds a "
                           f"reservation for VM size '{size}'; a group holds one reservation per size.")
    resource_id = f"{group_id}/capacityReservations/{name}"
    existing = backend.find(resource_id)
    resource = backend.new_resource(resource_id, body)
    resource["properties"].setdefault("platformFaultDomainCount", 1)
    resource["properties"]["reservationId"] = stable_uuid("capacity-reservation", resource_id.lower())
    return backend.accepted_put(req, resource, existing is not None, location)
