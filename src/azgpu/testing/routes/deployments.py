"""Microsoft.Resources/deployments: Validate (200 or 400, synchronous) and What If (202 + Location).

REST specification, resources deployments 2025-04-01: Deployments_Validate / Deployments_WhatIf at
resource-group scope and their AtSubscriptionScope forms. Both write nothing. The caller needs
Microsoft.Resources/deployments/* (Learn, "ARM template deployment what-if operation": what-if has
the permission requirements of a deployment); without the action, ARM answers 403 AuthorizationFailed.
"""

from __future__ import annotations

from ..models import authorization, deployments
from . import RG, SUB, Response, route

# The REST api-version whose shapes these routes answer in (resources deployments spec).
API_VERSION = "2025-04-01"

DEPLOYMENT = r"/providers/Microsoft\.Resources/deployments/(?P<name>[^/]+)"


def _allowed(backend, action: str, scope: str) -> None:
    if not authorization.allowed(backend.store, action):
        raise authorization.authorization_failed(action, scope)


def _validate(backend, req, sub, rg, name):
    scope = backend.rg_id(rg) if rg else f"/subscriptions/{sub}"
    _allowed(backend, deployments.VALIDATE_ACTION, f"{scope}/providers/Microsoft.Resources/deployments/{name}")
    return Response(200, deployments.validate(backend, sub, rg, name, req.body))


def _what_if(backend, req, sub, rg, name):
    scope = backend.rg_id(rg) if rg else f"/subscriptions/{sub}"
    _allowed(backend, deployments.WHATIF_ACTION, f"{scope}/providers/Microsoft.Resources/deployments/{name}")
    result = deployments.what_if(backend, sub, rg, name, req.body)
    # Long-running as ARM runs it: 202 with a Location that answers 202 until done, then the result.
    op = backend.ops.start("whatIf", f"/subscriptions/{sub}", location="global", api_version=req.api_version)
    op["result"] = result
    backend.dirty = True
    return Response(202, None, backend.ops.headers(op))


@route("POST", RG + DEPLOYMENT + r"/validate")
def validate_in_group(backend, req, sub, rg, name):
    backend.require_rg(rg)
    return _validate(backend, req, sub, rg, name)


@route("POST", SUB + DEPLOYMENT + r"/validate")
def validate_in_subscription(backend, req, sub, name):
    return _validate(backend, req, sub, None, name)


@route("POST", RG + DEPLOYMENT + r"/whatIf")
def what_if_in_group(backend, req, sub, rg, name):
    backend.require_rg(rg)
    return _what_if(backend, req, sub, rg, name)


@route("POST", SUB + DEPLOYMENT + r"/whatIf")
def what_if_in_subscription(backend, req, sub, name):
    return _what_if(backend, req, sub, None, name)
