"""Microsoft.Impact: workload impacts (Guest Health Reporting), their insights, impact categories.

Subscription-level resources (no resource group): PUT/GET/list of
/subscriptions/{sub}/providers/Microsoft.Impact/workloadImpacts[/{name}], GET of .../{name}/insights,
GET of .../impactCategories. The behaviour is in azgpu/testing/models/impact_reporting.py.
"""

from __future__ import annotations

from ..errors import ArmError
from ..models import impact_reporting as ir
from . import SUB, Response, page, route

# The REST api-versions whose shapes these routes answer in: every version of Microsoft.Impact's spec
# (the PUT's status differs by version).
API_VERSION = tuple(ir.API_VERSIONS)

PROVIDER = SUB + r"/providers/Microsoft\.Impact"
IMPACT = PROVIDER + r"/workloadImpacts/(?P<name>[^/]+)"


@route("PUT", IMPACT)
def put_impact(backend, req, sub, name):
    record = ir.create(backend, sub, name, req.body, backend.now())
    backend.dirty = True
    # 2023-02-01-preview answers 200 only; later versions create with 201 (+ Azure-AsyncOperation), and
    # the resource comes back with provisioningState Succeeded as in their example, so nothing is polled.
    status = 200 if req.api_version <= "2023-02-01-preview" else 201
    return Response(status, record["resource"])


@route("GET", IMPACT)
def get_impact(backend, req, sub, name):
    return Response(200, ir.require(backend.store, sub, name)["resource"])


@route("GET", PROVIDER + r"/workloadImpacts")
def list_impacts(backend, req, sub):
    return page(ir.listed(backend.store))


@route("GET", IMPACT + r"/insights")
def list_insights(backend, req, sub, name):
    record = ir.require(backend.store, sub, name)
    found = ir.insights(record, backend.now(), backend.ops.seconds)
    backend.dirty = True  # what was revealed stays revealed
    return page(found)


@route("GET", IMPACT + r"/insights/(?P<insight>[^/]+)")
def get_insight(backend, req, sub, name, insight):
    record = ir.require(backend.store, sub, name)
    for item in ir.insights(record, backend.now(), backend.ops.seconds):
        if item["name"].lower() == insight.lower():
            return Response(200, item)
    raise ArmError(404, "ResourceNotFound", f"The insight '{insight}' of workload impact '{name}' was not found.")


@route("GET", PROVIDER + r"/impactCategories")
def list_categories(backend, req, sub):
    if ir.registration_state(backend.store).lower() != "registered":
        raise ir.not_registered()
    return page(ir.categories(backend.store))
