"""Microsoft.Quota quota requests (api 2025-09-01) over the fake's compute usages.

A request is filed by PUT or PATCH on .../providers/Microsoft.Quota/quotas/{family} and answered
as the REST examples show (patchComputeQuotaRequest.json: 200 with the limit asked for, the request's
id in the Location header). It is Accepted then, and completes at its first status read
(QuotaRequestStatus_Get): Succeeded raises the usage's limit (a family's also raises Total Regional
vCPUs by as much, as Learn says Azure does); an escalated one ends Failed with the error code the
examples show (getQuotaRequestStatusFailed.json: ContactSupport), which is how Azure says a GPU family
needs a support request (Learn, "Increase VM-family vCPU quotas"); an invalid one ends Invalid.
"""

from __future__ import annotations

from ..errors import ArmError
from ..lro import iso
from ..skus import SkuCatalog, normalize_location
from ..store import Store, stable_uuid
from . import quota

APPROVE, ESCALATE, INVALID = "approve", "escalate", "invalid"
OUTCOMES = (APPROVE, ESCALATE, INVALID)
ESCALATED_MESSAGE = "Request failed, please contact support."
# No REST example shows an Invalid request: the fake's message is its own, and it carries no error code.
INVALID_MESSAGE = "The request is invalid."


def _scope(sub: str, location: str) -> str:
    return f"/subscriptions/{sub}/providers/Microsoft.Compute/locations/{location}"


def set_outcome(store: Store, location: str, name: str, outcome: str) -> None:
    """What the fake does with the next requests for `name` in `location` (approve by default)."""
    if outcome not in OUTCOMES:
        raise ValueError(f"outcome must be one of {OUTCOMES}")
    store.quota_outcomes.setdefault(normalize_location(location), {})[quota.norm(name)] = outcome


def entry(store: Store, skus: SkuCatalog, location: str, name: str) -> dict | None:
    wanted = quota.norm(name)
    return next((e for e in quota.usages(store, skus, location) if quota.norm(e["name"]["value"]) == wanted), None)


def limit_body(sub: str, location: str, entry: dict) -> dict:
    """Quota_Get's body (getComputeOneSkuQuotaLimit.json)."""
    value = entry["name"]["value"]
    return {"id": f"{_scope(sub, location)}/providers/Microsoft.Quota/quotas/{value}", "name": value,
            "type": "Microsoft.Quota/quotas",
            "properties": {"name": dict(entry["name"]), "isQuotaApplicable": True,
                           "limit": {"limitObjectType": "LimitValue", "limitType": "Independent",
                                     "value": entry["limit"]},
                           "unit": "Count"}}


def file(store: Store, skus: SkuCatalog, sub: str, location: str, name: str, body: dict | None,
         now: float) -> tuple[dict, str]:
    """Quota_CreateOrUpdate / Quota_Update: the body's new limit, checked, then submitted."""
    props = (body or {}).get("properties") or {}
    limit = (props.get("limit") or {}).get("value")
    if not isinstance(limit, int) or isinstance(limit, bool) or limit < 0:
        raise ArmError(400, "InvalidQuotaRequest", "properties.limit.value must be a non-negative integer.")
    return submit(store, skus, sub, location, name, limit, now)


def submit(store: Store, skus: SkuCatalog, sub: str, location: str, name: str, limit: int, now: float) -> tuple[dict,
                                                                                                                str]:
    """File a request; the body Quota_Update answers with and the request's id."""
    location = normalize_location(location)
    found = entry(store, skus, location, name)
    if found is None:
        return {}, ""
    store.counter += 1
    value = found["name"]["value"]
    request_id = stable_uuid("quota-request", sub, location, value, limit, store.counter).upper()
    store.quota_requests[request_id] = {
        "location": location, "sub": sub, "name": dict(found["name"]), "limit": int(limit),
        "submitted": iso(now), "state": "Accepted",
        "outcome": store.quota_outcomes.get(location, {}).get(quota.norm(value), APPROVE)}
    body = {"id": f"{_scope(sub, location)}/providers/Microsoft.Quota/quotas/{value}", "name": value,
            "type": "Microsoft.Quota/quotas",
            "properties": {"name": dict(found["name"]),
                           "limit": {"limitObjectType": "LimitValue", "value": int(limit)}}}
    return body, request_id


def advance(store: Store, skus: SkuCatalog, request_id: str) -> dict | None:
    """The request after a status read: an Accepted one completes now."""
    r = store.quota_requests.get(request_id.upper())
    if r is None:
        return None
    if r["state"] == "Accepted":
        if r["outcome"] == APPROVE:
            current = entry(store, skus, r["location"], r["name"]["value"])
            if current is not None and current["limit"] < r["limit"]:
                quota.set_quota(store, skus, r["location"], r["name"]["value"], r["limit"], None)
                if quota.norm(r["name"]["value"]) not in {quota.norm(n) for n in quota.FIXED}:
                    # Learn, "Increase VM-family vCPU quotas": "If your request to increase your VM-family quota is
                    # approved, Azure will automatically increase the regional vCPU quota for the region" (the
                    # page's summary: "by the same amount").
                    regional = entry(store, skus, r["location"], quota.REGIONAL)
                    raised = regional["limit"] + r["limit"] - current["limit"]
                    quota.set_quota(store, skus, r["location"], quota.REGIONAL, raised, None)
            r["state"] = "Succeeded"
        else:
            r["state"] = "Invalid" if r["outcome"] == INVALID else "Failed"
    return r


def status_body(request_id: str, r: dict) -> dict:
    """QuotaRequestStatus_Get's body (getQuotaRequestStatusById.json, getQuotaRequestStatusFailed.json)."""
    state = r["state"]
    message = {"Succeeded": "Request completed", "Failed": ESCALATED_MESSAGE, "Invalid": INVALID_MESSAGE}.get(
        state, "Request accepted")
    sub_request = {"name": dict(r["name"]), "limit": {"limitObjectType": "LimitValue", "value": r["limit"]},
                   "message": message, "provisioningState": state}
    if state != "Failed":  # as the examples: the failed one names no unit
        sub_request["unit"] = "Count"
    props: dict = {"message": message, "provisioningState": state, "requestSubmitTime": r["submitted"],
                   "value": [sub_request]}
    if state == "Failed":
        props["error"] = {"code": "ContactSupport", "message": ESCALATED_MESSAGE}
        sub_request["subRequestId"] = stable_uuid("sub-request", request_id).upper()
    return {"id": f"{_scope(r['sub'], r['location'])}/providers/Microsoft.Quota/quotaRequests/{request_id}",
            "name": request_id, "type": "Microsoft.Quota/quotaRequests", "properties": props}
