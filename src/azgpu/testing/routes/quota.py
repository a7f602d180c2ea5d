"""Microsoft.Quota at a compute location's scope (api 2025-09-01): Quota_Get, Quota_CreateOrUpdate,
Quota_Update, QuotaRequestStatus_Get and _List, in the shapes of the REST specification's examples."""

from __future__ import annotations

from ..errors import ArmError
from ..models import quota_requests
from ..skus import normalize_location
from . import SUB, Response, page, route

# The REST api-version whose shapes these routes answer in (Microsoft.Quota).
API_VERSION = "2025-09-01"

SCOPE = SUB + r"/providers/Microsoft\.Compute/locations/(?P<location>[^/]+)/providers/Microsoft\.Quota"
QUOTA = SCOPE + r"/quotas/(?P<name>[^/]+)"


def _not_found(what: str) -> ArmError:
    return ArmError(404, "ResourceNotFound", f"{what} was not found.")


def _entry(backend, location: str, name: str) -> dict:
    found = quota_requests.entry(backend.store, backend.skus, normalize_location(location), name)
    if found is None:
        raise _not_found(f"Quota resource '{name}' in {location}")
    return found


@route("GET", QUOTA)
def get_quota(backend, req, sub, location, name):
    return Response(200, quota_requests.limit_body(sub, normalize_location(location), _entry(backend, location, name)))


def _file(backend, req, sub, location, name):
    _entry(backend, location, name)
    body, request_id = quota_requests.file(backend.store, backend.skus, sub, location, name, req.body, backend.now())
    backend.dirty = True
    status_url = (f"https://management.azure.com/subscriptions/{sub}/providers/Microsoft.Compute/locations/"
                  f"{normalize_location(location)}/providers/Microsoft.Quota/quotaRequests/{request_id}"
                  f"?api-version={req.query.get('api-version', API_VERSION)}")
    return Response(200, body, {"Location": status_url})


route("PUT", QUOTA)(_file)
route("PATCH", QUOTA)(_file)


@route("GET", SCOPE + r"/quotaRequests/(?P<request_id>[^/]+)")
def get_request(backend, req, sub, location, request_id):
    r = quota_requests.advance(backend.store, backend.skus, request_id)
    if r is None or r["location"] != normalize_location(location):
        raise _not_found(f"Quota request '{request_id}'")
    backend.dirty = True
    return Response(200, quota_requests.status_body(request_id.upper(), r))


@route("GET", SCOPE + r"/quotaRequests")
def list_requests(backend, req, sub, location):
    loc = normalize_location(location)
    return page([quota_requests.status_body(i, r) for i, r in backend.store.quota_requests.items()
                 if r["location"] == loc])
