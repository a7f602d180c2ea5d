"""Microsoft.Resources providers: a resource provider's registration state (Providers - Get).

Only the providers whose registration the fake models answer (Microsoft.Impact, for Guest Health
Reporting's onboarding); any other namespace fails loudly rather than inventing a provider body.
"""

from __future__ import annotations

from ..errors import NotImplementedInFake
from ..models import impact_reporting as ir
from ..models import providers
from . import SUB, Response, route

# The REST api-version whose shapes these routes answer in (resources spec, Providers - Get).
API_VERSION = "2024-11-01"


@route("GET", SUB + r"/providers/(?P<namespace>[A-Za-z0-9.]+)")
def get_provider(backend, req, sub, namespace):
    if namespace.lower() != ir.NAMESPACE.lower():
        raise NotImplementedInFake(req.method, req.path, f"the registration of provider {namespace}")
    return Response(200, providers.provider_body(backend.store, sub, ir.NAMESPACE, ir.RESOURCE_TYPES, ir.API_VERSIONS))
