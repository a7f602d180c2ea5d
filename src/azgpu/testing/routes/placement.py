"""Microsoft.Compute proximity placement groups: synchronous create, read, delete and list
(ProximityPlacementGroups_*, compute api 2026-04-01: 200/201 with the body, no operation to poll)."""

from __future__ import annotations

from ..models import placement
from ..models.placement import PPG_TYPE
from . import COMPUTE, Response, page, route

# The REST api-version whose shapes these routes answer in (Compute).
API_VERSION = "2026-04-01"

PPG = COMPUTE + r"/proximityPlacementGroups/(?P<name>[^/]+)"


def _id(backend, rg: str, name: str) -> str:
    return f"{backend.rg_id(rg)}/providers/{PPG_TYPE}/{name}"


@route("PUT", PPG)
def put_ppg(backend, req, sub, rg, name):
    backend.require_rg(rg)
    return placement.put(backend, req, _id(backend, rg, name))


@route("GET", PPG)
def get_ppg(backend, req, sub, rg, name):
    return Response(200, placement.with_members(backend, backend.require(_id(backend, rg, name))))


@route("DELETE", PPG)
def delete_ppg(backend, req, sub, rg, name):
    backend.require_rg(rg)
    resource_id = _id(backend, rg, name)
    if backend.find(resource_id) is None:
        return Response(204)
    backend.remove(resource_id)
    return Response(200)


@route("GET", COMPUTE + r"/proximityPlacementGroups")
def list_ppgs(backend, req, sub, rg):
    backend.require_rg(rg)
    return page([placement.with_members(backend, p) for p in backend.in_group(rg, PPG_TYPE)])
