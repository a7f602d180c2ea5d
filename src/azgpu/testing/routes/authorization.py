"""Microsoft.Authorization: the caller's permissions (what azgpu reads before reporting to Azure).

GET {scope}/providers/Microsoft.Authorization/permissions at a subscription (Learn, "Use Resource
Manager authentication API to access subscriptions") or a resource group (Permissions -
ListForResourceGroup, authorization spec 2022-04-01): {"value": [{"actions", "notActions",
"dataActions", "notDataActions"}]}, and a resource (Permissions - ListForResource). The fake's caller
has the same permissions at every scope.
"""

from __future__ import annotations

from ..models import authorization
from . import RG, SUB, page, route

# The REST api-version whose shapes these routes answer in (the authorization spec).
API_VERSION = "2022-04-01"

PERMISSIONS = r"/providers/Microsoft\.Authorization/permissions"


@route("GET", SUB + PERMISSIONS)
def subscription_permissions(backend, req, sub):
    return page(authorization.permissions(backend.store))


@route("GET", RG + PERMISSIONS)
def group_permissions(backend, req, sub, rg):
    backend.require_rg(rg)
    return page(authorization.permissions(backend.store))


@route("GET", RG + r"/providers/(?P<namespace>[^/]+)/(?P<kind>[^/]+)/(?P<name>[^/]+)" + PERMISSIONS)
def resource_permissions(backend, req, sub, rg, namespace, kind, name):
    """Permissions - List For Resource (authorization spec 2022-04-01), for a top-level resource."""
    backend.require(f"{backend.rg_id(rg)}/providers/{namespace}/{kind}/{name}")
    return page(authorization.permissions(backend.store))
