"""Microsoft.Resources: resource groups, and the generic resource listings (models/resources.py)."""

from __future__ import annotations

from ..models import resources
from ..models.resources import RG_TYPE
from . import RG, SUB, Response, page, route

# The REST api-version whose shapes these routes answer in (the resources spec).
API_VERSION = "2025-04-01"

@route("PUT", RG)
def put_group(backend, req, sub, rg):
    return resources.put_group(backend, req, rg)


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
    return page(resources.listed(backend, req, backend.top_level(rg)))


@route("GET", SUB + r"/resources")
def list_subscription_resources(backend, req, sub):
    return page(resources.listed(backend, req, backend.top_level()))
