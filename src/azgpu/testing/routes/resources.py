"""Microsoft.Resources: resource groups, and the generic resource listings."""

from __future__ import annotations

import re

from ..errors import ArmError, NotImplementedInFake, required_location
from ..lro import iso
from ..skus import normalize_location
from . import RG, SUB, Response, page, route

# The REST api-version whose shapes these routes answer in (resources spec: resource groups and resource listings).
API_VERSION = "2025-04-01"

RG_TYPE = "Microsoft.Resources/resourceGroups"


@route("PUT", RG)
def put_group(backend, req, sub, rg):
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


@route("GET", RG)
def get_group(backend, req, sub, rg):
    return Response(200, backend.require_rg(rg))


@route("HEAD", RG)
def group_exists(backend, req, sub, rg):
    return Response(204 if backend.store.get(backend.rg_id(rg)) else 404)


@route("DELETE", RG)
def delete_group(backend, req, sub, rg):
    group = backend.require_rg(rg)
    return backend.accepted_delete(req, group, group["location"])


@route("GET", SUB + r"/resourceGroups")
def list_groups(backend, req, sub):
    return page([r for r in backend.store.resources.values() if r["type"] == RG_TYPE])


@route("GET", RG + r"/resources")
def list_group_resources(backend, req, sub, rg):
    backend.require_rg(rg)
    return page(_filtered(backend, req, backend.top_level(rg)))


@route("GET", SUB + r"/resources")
def list_subscription_resources(backend, req, sub):
    return page(_filtered(backend, req, backend.top_level()))


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


def _filtered(backend, req, resources: list[dict]) -> list[dict]:
    """The $filter forms azgpu uses; any other filter fails loudly rather than being ignored."""
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
                         if any(k.lower() == name and (value is None or v == value) for k, v in (r.get("tags") or {}).items())]
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

