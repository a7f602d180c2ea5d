"""Microsoft.Resources as ARM checks and answers it: resource groups (a group keeps its location, a
group being deleted takes no writes) and the generic resource listings with the $filter and $expand
forms azgpu uses (Resources - List).
"""

from __future__ import annotations

import re

from ..errors import ArmError, NotImplementedInFake, required_location
from ..lro import iso
from ..messages import Request, Response
from ..skus import normalize_location

RG_TYPE = "Microsoft.Resources/resourceGroups"


def put_group(backend, req: Request, rg: str) -> Response:
    body = req.body or {}
    existing = backend.store.get(backend.rg_id(rg))
    location = normalize_location(required_location(body))
    if existing is not None:
        backend.refuse_while_running(req, existing)  # a group being deleted takes no writes
    if existing and existing["location"] != location:
        raise ArmError(400, "InvalidResourceGroupLocation",
                       f"Invalid resource group location '{location}'. The Resource group already exists in "
                       f"location '{existing['location']}'.")
    group = {"id": backend.rg_id(existing["name"] if existing else rg), "name": existing["name"] if existing else rg,
             "type": RG_TYPE, "location": location, "tags": body.get("tags", {}),
             "properties": {"provisioningState": "Succeeded"}}
    if body.get("managedBy"):
        group["managedBy"] = body["managedBy"]
    backend.store.put(group)
    backend.store.touch(group["id"], iso(backend.now()))
    backend.dirty = True
    return Response(200 if existing else 201, group)


EXPANDABLE = {"createdtime": "createdTime", "changedtime": "changedTime", "provisioningstate": "provisioningState"}


def _generic(backend, resource: dict, expand: list[str]) -> dict:
    """GenericResourceExpanded: identity, placement and tags, never properties; with $expand the
    times and the provisioning state (Resources - List, api 2024-11-01)."""
    keys = ("id", "name", "type", "location", "tags", "sku", "kind", "zones", "managedBy", "plan", "identity")
    out = {k: resource[k] for k in keys if k in resource}
    times = backend.store.times.get(resource["id"].lower(), {})
    for name in expand:
        if name == "provisioningState":
            out[name] = (resource.get("properties") or {}).get("provisioningState", "Succeeded")
        elif name == "createdTime" and "created" in times:
            out[name] = times["created"]
        elif name == "changedTime" and "changed" in times:
            out[name] = times["changed"]
    return out


_TAG = re.compile(r"tagName eq '([^']*)'(?: and tagValue eq '([^']*)')?", re.IGNORECASE)
_TYPE = re.compile(r"resourceType eq '([^']*)'", re.IGNORECASE)


def listed(backend, req: Request, resources: list[dict]) -> list[dict]:
    """Resources as Resources - List answers them, in the $filter forms azgpu uses; any other filter fails
    loudly rather than being ignored."""
    expand = []
    for name in filter(None, (p.strip() for p in (req.query.get("$expand") or "").split(","))):
        if name.lower() not in EXPANDABLE:
            raise NotImplementedInFake(req.method, req.path, f"$expand {name!r}")
        expand.append(EXPANDABLE[name.lower()])
    text = (req.query.get("$filter") or "").strip()
    strip_tags = False
    if text:
        tag, kind = _TAG.fullmatch(text), _TYPE.fullmatch(text)
        if tag:
            name, value = tag.group(1).lower(), tag.group(2)
            resources = [r for r in resources
                         if any(k.lower() == name and (value is None or v == value)
                                for k, v in (r.get("tags") or {}).items())]
            # "when resources are filtered by tag name and value, the original tags for each resource
            # will not be returned in the results" (Resources - List, api 2024-11-01)
            strip_tags = True
        elif kind:
            resources = [r for r in resources if r["type"].lower() == kind.group(1).lower()]
        else:
            raise NotImplementedInFake(req.method, req.path, f"$filter {text!r}")
    out = [_generic(backend, r, expand) for r in resources]
    if strip_tags:
        for item in out:
            item.pop("tags", None)
    return out
