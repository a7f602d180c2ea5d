"""Microsoft.Compute proximity placement groups: synchronous create, read, delete and list
(ProximityPlacementGroups_*, compute api 2026-04-01: 200/201 with the body, no operation to poll)."""

from __future__ import annotations

import copy

from ..errors import required_location
from . import COMPUTE, Response, page, route

# The REST api-version whose shapes these routes answer in (Compute).
API_VERSION = "2026-04-01"

PPG_TYPE = "Microsoft.Compute/proximityPlacementGroups"
PPG = COMPUTE + r"/proximityPlacementGroups/(?P<name>[^/]+)"


def _id(backend, rg: str, name: str) -> str:
    return f"{backend.rg_id(rg)}/providers/{PPG_TYPE}/{name}"


def _with_members(backend, ppg: dict) -> dict:
    """virtualMachineScaleSets is read-only and computed from the scale sets that reference the group."""
    out = copy.deepcopy(ppg)
    members = [{"id": v["id"]} for v in backend.store.of_type("Microsoft.Compute/virtualMachineScaleSets")
               if (((v.get("properties") or {}).get("proximityPlacementGroup") or {}).get("id") or "").lower()
               == ppg["id"].lower()]
    if members:
        out["properties"]["virtualMachineScaleSets"] = members
    return out


@route("PUT", PPG)
def put_ppg(backend, req, sub, rg, name):
    backend.require_rg(rg)
    body = req.body or {}
    required_location(body)
    resource_id = _id(backend, rg, name)
    existed = backend.find(resource_id) is not None
    resource = backend.new_resource(resource_id, body)
    resource["properties"].setdefault("proximityPlacementGroupType", "Standard")
    backend.put_child(resource)
    return Response(200 if existed else 201, _with_members(backend, resource))


@route("GET", PPG)
def get_ppg(backend, req, sub, rg, name):
    return Response(200, _with_members(backend, backend.require(_id(backend, rg, name))))


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
    return page([_with_members(backend, p) for p in backend.in_group(rg, PPG_TYPE)])
