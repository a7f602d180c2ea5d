"""Microsoft.Compute capacity reservation groups (synchronous) and capacity reservations (long-running
PUT and DELETE), CapacityReservationGroups_* and CapacityReservations_* at compute api 2026-04-01."""

from __future__ import annotations

from ..errors import required_location
from ..models import capacity_reservations as crg
from ..models import quota
from . import COMPUTE, Response, page, route

# The REST api-version whose shapes these routes answer in (Compute).
API_VERSION = "2026-04-01"

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
    existing = backend.find(resource_id)
    existed = existing is not None
    crg.check_group_put(existing, body)
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
    crg.check_group_deletable(backend.store, resource_id, group)
    backend.remove(resource_id)
    return Response(200)


@route("PUT", RESERVATION)
def put_reservation(backend, req, sub, rg, group, name):
    def quota_check(resource, previous):
        quota.check(backend.store, backend.skus, resource, previous)

    return crg.put_reservation(backend, req, _gid(backend, rg, group), name, quota_check)


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
    crg.check_deletable(backend, resource)
    return backend.accepted_delete(req, resource, resource.get("location", ""))
