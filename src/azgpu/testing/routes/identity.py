"""Microsoft.ManagedIdentity user-assigned identities: the GET a preflight reads (UserAssignedIdentities_Get)."""

from __future__ import annotations

from .. import galleries
from . import RG, Response, route

IDENTITY = RG + r"/providers/Microsoft\.ManagedIdentity/userAssignedIdentities/(?P<name>[^/]+)"


@route("GET", IDENTITY)
def get_identity(backend, req, sub, rg, name):
    backend.require_rg(rg)
    resource_id = f"{backend.rg_id(rg)}/providers/{galleries.IDENTITY_TYPE}/{name}"
    found = backend.find(resource_id)
    if found is None:
        raise galleries.not_found(resource_id)
    return Response(200, found)
