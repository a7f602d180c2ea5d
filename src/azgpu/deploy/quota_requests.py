"""Quota increases through the Microsoft.Quota API (2025-09-01, Microsoft's azure-mgmt-quota client).

What to ask for comes from the preflight's own arithmetic (QuotaLine: usage + needed over the limit),
for the family, the regional total or the regional spot quota, in every candidate location. Nothing
is filed without the caller's confirmation, and nothing but the quota requests is written.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..errors import AzureError, InputError
from ..request import Request
from ..resource_types import COMPUTE_LOCATION
from ..sources import cite
from ..spec import validate
from .arm import list_group
from .live_plan import prepare

SOURCES = ("D-quota-api", "D-quota-per-vm")
# The states QuotaRequestStatus reports (QuotaRequestState in the REST specification): Accepted and
# InProgress are on the way, Succeeded and Failed are final, Invalid is a request Azure refused to read.
PENDING = ("Accepted", "InProgress")

REGIONAL, SPOT = "cores", "lowPriorityCores"
# A Failed request with this error code (getQuotaRequestStatusFailed.json) was not approved
# automatically: Learn's remedy is a support request for the same increase (D-quota-per-vm).
CONTACT_SUPPORT = "ContactSupport"
_REQUEST_ID = re.compile(r"/(?:quotaRequests|operationsStatus)/([^/?]+)", re.IGNORECASE)


def not_approved(state: str) -> bool:
    """A request that ended without raising the limit: Failed, Invalid, or a state QuotaRequestState does not
    list (Escalated is a group-quota state; a missing one says nothing), never taken for an approval."""
    return state not in PENDING and state != "Succeeded"


@dataclass
class Shortfall:
    location: str
    quota: str  # the usage's name, the Microsoft.Quota resource name: standardNDASv4_A100Family, cores ...
    label: str
    usage: int
    limit: int
    needed: int

    @property
    def new_limit(self) -> int:
        return self.usage + self.needed

    def as_dict(self) -> dict[str, Any]:
        # One name, the usage API's (quota): the label is the same name since the preflight names quotas so.
        return {"location": self.location, "quota": self.quota, "usage": self.usage,
                "limit": self.limit, "needed": self.needed, "new_limit": self.new_limit}


@dataclass
class Filed:
    location: str
    quota: str
    limit: int
    id: str
    state: str = "Accepted"
    message: str = ""
    error_code: str = ""
    history: list[str] = field(default_factory=list)

    @property
    def escalated(self) -> bool:
        return self.state == "Failed" and self.error_code == CONTACT_SUPPORT

    def as_dict(self) -> dict[str, Any]:
        out = {"id": self.id, "location": self.location, "quota": self.quota, "new_limit": self.limit,
               "state": self.state}
        if self.message:
            out["message"] = self.message
        if self.error_code:
            out["error_code"] = self.error_code
        return out


def scope(session, location: str) -> str:
    return f"subscriptions/{session.subscription_id}{COMPUTE_LOCATION.provider_path(location)}"


def shortfalls(session, request: Request, fallback_locations: list[str] = ()) -> list[Shortfall]:
    """What the preflight finds short, in the request's location and then each fallback location."""
    out: list[Shortfall] = []
    # The cluster's scale sets already hold part of the quota: a re-run asks only for what it adds.
    listed = list_group(session, request.resource_group) if request.resource_group else None
    for location in dict.fromkeys([request.location, *fallback_locations]):
        spec = validate(request.with_changes(location=location, zone=request.zone if location == request.location
                                             else None), command="quota")
        _plan, pf = prepare(session, spec, listed, strict=False)
        out += [Shortfall(location, q.key, q.name, q.usage, q.limit, q.needed) for q in pf.quota if not q.ok]
    return out


def file(session, short: Shortfall) -> Filed:
    """One increase request (Quota_Update, as patchComputeQuotaRequest.json sends it); its id and state."""
    seen: dict[str, str] = {}

    def hook(response) -> None:  # the request's id comes in the Location header of the first answer
        seen["location"] = response.http_response.headers.get("Location") or ""

    body = {"properties": {"name": {"value": short.quota},
                           "limit": {"limitObjectType": "LimitValue", "value": short.new_limit}}}
    try:
        # polling=False: the request is followed by id (QuotaRequestStatus), not by holding this call open.
        session.quota.quota.begin_update(resource_name=short.quota, scope=scope(session, short.location),
                                         create_quota_request=body, polling=False, raw_response_hook=hook)
    except Exception as exc:
        from .arm import to_azure_error

        raise to_azure_error(exc, f"requesting {short.quota} = {short.new_limit} in {short.location}") from None
    match = _REQUEST_ID.search(seen.get("location", ""))
    if not match:
        raise AzureError(f"Azure accepted the increase of {short.quota} in {short.location} but named no request id",
                         code="QUOTA_REQUEST_UNTRACKED",
                         remedy="see its state with 'az quota request status list --scope "
                                f"{scope(session, short.location)}'")
    return Filed(short.location, short.quota, short.new_limit, match.group(1))


def _state(value: Any) -> str:
    return str(getattr(value, "value", value) or "")


def _error_code(error: Any) -> str:
    if error is None:
        return ""
    return str(error.get("code", "") if hasattr(error, "get") else getattr(error, "code", "") or "")


def read(session, location: str, request_id: str) -> Filed:
    """QuotaRequestStatus_Get: the request's state now."""
    try:
        details = session.quota.quota_request_status.get(id=request_id, scope=scope(session, location))
    except Exception as exc:
        if getattr(exc, "status_code", None) == 404:
            raise InputError(f"no quota request {request_id} in {location}", code="QUOTA_REQUEST_NOT_FOUND",
                             remedy=f"check the id and -l/--location: 'provision quota status -l {location}' lists "
                                    "the location's requests") from None
        from .arm import to_azure_error

        raise to_azure_error(exc, f"reading quota request {request_id}") from None
    return _filed(location, details)


def _filed(location: str, details: Any) -> Filed:
    # Under .properties (azure-mgmt-quota 3), or flattened onto the model (2.x, the lowest allowed).
    props = getattr(details, "properties", None) or details
    sub = (props.value or [None])[0]
    name = getattr(getattr(sub, "name", None), "value", "") or ""
    limit = getattr(getattr(sub, "limit", None), "value", 0) or 0
    return Filed(location, name, int(limit), details.name or "", _state(props.provisioning_state),
                 props.message or "", _error_code(props.error))


def listed(session, location: str) -> list[Filed]:
    """QuotaRequestStatus_List: the requests of a location, newest last as Azure lists them."""
    try:
        return [_filed(location, d) for d in session.quota.quota_request_status.list(scope=scope(session, location))]
    except Exception as exc:
        from .arm import to_azure_error

        raise to_azure_error(exc, f"listing the quota requests of {location}") from None


def follow(session, filed: Filed, *, timeout: float = 0.0, interval: float = 10.0) -> Filed:
    """Read the request until it is final or `timeout` seconds passed (at least one read): measured on the
    session's clock (virtual in --simulate at latency 0) and bounded in reads, so nothing busy-polls."""
    timeout = timeout if isinstance(timeout, (int, float)) and 0 <= timeout < float("inf") else 0.0  # nan too
    deadline = session.clock() + timeout
    for _ in range(int(timeout // max(interval, 1.0)) + 2):
        now = read(session, filed.location, filed.id)
        if now.state not in PENDING or session.clock() >= deadline:
            return now
        session.pause(interval)
    return now


def _parts(requests: list[Filed]) -> str:
    return "; ".join(f"request {r.id} ({r.quota} = {r.limit} in {r.location}): {r.state or 'no state'}"
                     + (f", {r.error_code}" if r.error_code else "") + (f" ({r.message})" if r.message else "")
                     for r in requests)


def escalation_error(requests: list[Filed]) -> AzureError:
    """Requests Azure did not approve: escalated (Failed with ContactSupport, getQuotaRequestStatusFailed.json)
    take Learn's way on, a support request (D-quota-per-vm); any other end (Invalid: a request Azure could not
    read; Failed for another reason) is refused, not escalated, and says what to look at. Exit 1 either way."""
    escalated = [r for r in requests if r.escalated]
    refused = [r for r in requests if not r.escalated]
    if refused:
        return AzureError(f"the quota increase was refused: {_parts(refused)}", code="QUOTA_REQUEST_REFUSED",
                          remedy=f"read Azure's message ('provision quota status -l {refused[0].location} --id "
                                 f"{refused[0].id}'): an Invalid request is one Azure could not accept as asked (the "
                                 "quota's name, the limit), so file it again corrected; a support request is the way "
                                 "only for one Azure escalated"
                                 + (f" ({', '.join(r.id for r in escalated)})" if escalated else "")
                                 + f" ({cite(SOURCES)})", azure_code=refused[0].error_code)
    return AzureError(f"the quota increase was not approved automatically: {_parts(escalated)}",
                      code="QUOTA_REQUEST_ESCALATED",
                      remedy="open a support request for the same increase (portal: Quotas > Compute > the family > "
                             "'Create a support request', quoting the request id), or choose another family or "
                             f"location ({cite(SOURCES)})", azure_code=escalated[0].error_code)


def limit_now(session, location: str, quota: str) -> int | None:
    """A usage's limit as the compute usage API reports it now."""
    from .arm import norm_family

    for u in session.compute.usage.list(location):
        if norm_family(u.name.value or "") == norm_family(quota):
            return int(u.limit)
    return None


def request_increases(session, request: Request, *, fallback_locations: list[str] = (),
                      confirm: Callable[[list[Shortfall]], bool], timeout: float = 0.0,
                      on_notice: Callable[[str], None] = lambda m: None) -> dict[str, Any]:
    """File every shortfall (after confirm says yes) and follow each request once (or up to timeout).

    Raises QUOTA_REQUEST_ESCALATED (exit 1) when any request ends Failed; returns the requests filed.
    """
    short = shortfalls(session, request, list(fallback_locations))
    result: dict[str, Any] = {"shortfall": [s.as_dict() for s in short], "requests": []}
    if not short:
        return result
    if not confirm(short):
        result["declined"] = True
        return result
    filed: list[Filed] = []
    raised = []
    # Every request is computed above, before any is filed. The family's go first: Learn, "If your request to
    # increase your VM-family quota is approved, Azure will automatically increase the regional vCPU quota for
    # the region" (D-quota-per-vm), so the regional one is filed only if that still leaves it short (filing it
    # anyway could ask for less than the raised limit).
    for s in sorted(short, key=lambda s: s.quota.lower() in (REGIONAL.lower(), SPOT.lower())):
        families = [f for f in filed if f.location == s.location and f.state == "Succeeded"
                    and f.quota.lower() not in (REGIONAL.lower(), SPOT.lower())]
        if s.quota.lower() == REGIONAL.lower() and families:
            limit = limit_now(session, s.location, s.quota)
            if limit is not None and limit >= s.new_limit:
                on_notice(f"not filed: Azure raised {s.label} in {s.location} to {limit} with the family increase "
                          f"(>= {s.new_limit} needed)")
                raised.append({"location": s.location, "quota": s.quota, "limit": limit, "needed": s.new_limit})
                continue
        f = file(session, s)
        on_notice(f"filed quota request {f.id}: {s.quota} = {s.new_limit} in {s.location}")
        filed.append(follow(session, f, timeout=timeout))
    result["requests"] = [f.as_dict() for f in filed]
    if raised:
        result["raised_by_azure"] = raised
    failed = [f for f in filed if not_approved(f.state)]
    if failed:
        err = escalation_error(failed)
        err.result = result
        raise err
    return result
