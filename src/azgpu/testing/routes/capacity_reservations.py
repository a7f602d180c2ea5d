"""Microsoft.Compute capacity reservation groups (synchronous) and capacity reservations (long-running
PUT and DELETE), CapacityReservationGroups_* and CapacityReservations_* at compute api 2026-04-01."""

from __future__ import annotations

from ...capacity import BLOCK_CAPACITIES
from .. import capacity_reservations as crg
from ..errors import ArmError, required_location
from ..skus import capability, normalize_location
from ..store import stable_uuid
from . import COMPUTE, Response, page, route

GROUP = COMPUTE + r"/capacityReservationGroups/(?P<group>[^/]+)"
RESERVATION = GROUP + r"/capacityReservations/(?P<name>[^/]+)"


def _gid(backend, rg: str, group: str) -> str:
    return f"{backend.rg_id(rg)}/providers/{crg.GROUP_TYPE}/{group}"


def _expand(req) -> bool:
    return (req.query.get("$expand") or "").lower() == "instanceview"


@route("PUT", GROUP)
def put_group(backend, req, sub, rg, group):
    backend.require_rg(rg)
    body = req.body or {}
    required_location(body)
    resource_id = _gid(backend, rg, group)
    existed = backend.find(resource_id) is not None
    resource = backend.new_resource(resource_id, body)
    backend.put_child(resource)
    return Response(200 if existed else 201, crg.group_view(backend.store, resource, False))


@route("GET", GROUP)
def get_group(backend, req, sub, rg, group):
    return Response(200, crg.group_view(backend.store, backend.require(_gid(backend, rg, group)), _expand(req)))


@route("GET", COMPUTE + r"/capacityReservationGroups")
def list_groups(backend, req, sub, rg):
    backend.require_rg(rg)
    return page([crg.group_view(backend.store, g, False) for g in backend.in_group(rg, crg.GROUP_TYPE)])


@route("DELETE", GROUP)
def delete_group(backend, req, sub, rg, group):
    backend.require_rg(rg)
    resource_id = _gid(backend, rg, group)
    if backend.find(resource_id) is None:
        return Response(204)
    if crg.reservations(backend.store, resource_id) or crg.members(backend.store, resource_id):
        # Learn: a group is deleted only once its reservations are deleted and no VM is associated.
        raise ArmError(409, "OperationNotAllowed", f"Capacity reservation group '{group}' still holds capacity "
                       "reservations or associated virtual machines.")
    backend.remove(resource_id)
    return Response(200)


@route("PUT", RESERVATION)
def put_reservation(backend, req, sub, rg, group, name):
    group_id = _gid(backend, rg, group)
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
    for other in crg.reservations(backend.store, group_id):
        if other["name"].lower() != name.lower() and (other.get("sku") or {}).get("name", "").lower() == size.lower():
            raise ArmError(409, "OperationNotAllowed", f"Capacity reservation group '{group}' already holds a "
                           f"reservation for VM size '{size}'; a group holds one reservation per size.")
    resource_id = f"{group_id}/capacityReservations/{name}"
    existing = backend.find(resource_id)
    resource = backend.new_resource(resource_id, body)
    resource["properties"].setdefault("platformFaultDomainCount", 1)
    resource["properties"]["reservationId"] = stable_uuid("capacity-reservation", resource_id.lower())
    return backend.accepted_put(req, resource, existing is not None, location)


@route("GET", RESERVATION)
def get_reservation(backend, req, sub, rg, group, name):
    resource = backend.require(f"{_gid(backend, rg, group)}/capacityReservations/{name}")
    return Response(200, crg.reservation_view(backend.store, resource, _expand(req)))


@route("GET", GROUP + r"/capacityReservations")
def list_reservations(backend, req, sub, rg, group):
    group_id = _gid(backend, rg, group)
    backend.require(group_id)
    return page([crg.reservation_view(backend.store, r, False) for r in crg.reservations(backend.store, group_id)])


@route("DELETE", RESERVATION)
def delete_reservation(backend, req, sub, rg, group, name):
    resource_id = f"{_gid(backend, rg, group)}/capacityReservations/{name}"
    resource = backend.find(resource_id)
    if resource is None:
        return Response(204)
    return backend.accepted_delete(req, resource, resource.get("location", ""))
