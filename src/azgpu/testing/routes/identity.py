"""Microsoft.ManagedIdentity user-assigned identities: the GET a preflight reads (UserAssignedIdentities_Get)."""

from __future__ import annotations

from ..models import identity
from . import RG, Response, route

# The REST api-version whose shapes these routes answer in (Microsoft.ManagedIdentity).
API_VERSION = "2024-11-30"

IDENTITY = RG + r"/providers/Microsoft\.ManagedIdentity/userAssignedIdentities/(?P<name>[^/]+)"


@route("GET", IDENTITY)
def get_identity(backend, req, sub, rg, name):
    return Response(200, identity.get(backend, rg, name))
