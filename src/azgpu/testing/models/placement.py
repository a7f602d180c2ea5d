"""Proximity placement groups as ARM keeps them: created synchronously (Standard unless the body says
otherwise), and answered with the scale sets that reference them (read-only virtualMachineScaleSets).
"""

from __future__ import annotations

import copy

from ..errors import required_location
from ..messages import Request, Response

PPG_TYPE = "Microsoft.Compute/proximityPlacementGroups"
VMSS_TYPE = "Microsoft.Compute/virtualMachineScaleSets"


def with_members(backend, ppg: dict) -> dict:
    """virtualMachineScaleSets is read-only and computed from the scale sets that reference the group."""
    out = copy.deepcopy(ppg)
    members = [{"id": v["id"]} for v in backend.store.of_type(VMSS_TYPE)
               if (((v.get("properties") or {}).get("proximityPlacementGroup") or {}).get("id") or "").lower()
               == ppg["id"].lower()]
    if members:
        out["properties"]["virtualMachineScaleSets"] = members
    return out


def put(backend, req: Request, resource_id: str) -> Response:
    body = req.body or {}
    required_location(body)
    existed = backend.find(resource_id) is not None
    resource = backend.new_resource(resource_id, body)
    resource["properties"].setdefault("proximityPlacementGroupType", "Standard")
    backend.put_child(resource)
    return Response(200 if existed else 201, with_members(backend, resource))
