"""One table from Azure's error codes to typed errors with remedies.

Codes come from the error body (`error.code`, or the inner error a wrapper such as DeploymentFailed
carries in `details`) and compare case-insensitively: Microsoft spells the same code
`OverconstrainedAllocationRequest` and `OverConstrainedAllocationRequest`. The message decides
nothing, with one deliberate exception kept in `_operation_not_allowed`: Compute answers
`OperationNotAllowed` for quota, for its own throttling, for an operation already running and for
size or disk limits, and the code alone cannot tell them apart.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from ..errors import AzureError


class CapacityError(AzureError):
    """Azure has no capacity for the request now: the only kind a fallback location or zone may retry."""


class QuotaError(AzureError):
    pass


class AuthError(AzureError):
    pass


class ConflictError(AzureError):
    pass


class OperationInProgressError(ConflictError):
    """Another operation is still running on the resource: follow it, do not race it."""


class PolicyError(AzureError):
    """An Azure Policy assignment denied the request; `policy_assignment` names it when Azure did."""

    policy_assignment: str = ""


class ThrottledError(AzureError):
    """Azure kept throttling past what azgpu may wait; `remaining` holds Azure's rate-limit headers."""

    remaining: dict[str, str] = {}
    retry_after: float | None = None


class ImageError(AzureError):
    pass


class MarketplaceError(AzureError):
    pass


class RequestError(AzureError):
    """Azure rejected the request itself: re-running it unchanged fails the same way."""


@dataclass(frozen=True)
class Mapping:
    kind: type[AzureError]
    code: str
    remedy: str


QUOTA_REMEDY = ("request a quota increase for the family in this region (portal: Usage + quotas), or use fewer "
                "--nodes")
IMAGE_REMEDY = ("the image does not exist in this location: pick one from 'provision images list' (or from 'az vm "
                "image list --all' with the location and the image's publisher, offer and SKU), then pass --image")
THROTTLED_REMEDY = ("wait a few minutes and re-run (it continues where it stopped); other clients of the subscription "
                    "share Azure's limits; allow longer waits with --throttle-budget SECONDS "
                    "(or AZGPU_THROTTLE_BUDGET)")
IN_PROGRESS_REMEDY = ("another operation is still running on the resource: wait for it ('provision wait') and re-run")

# Keys are Azure's spelling; lookups ignore case (see `mapping_for`).
TABLE: dict[str, Mapping] = {
    "AllocationFailed": Mapping(CapacityError, "CAPACITY_UNAVAILABLE",
                                "Azure has no capacity for this size here now: "
                                "retry later, try --fallback-locations or --zones, or split the cluster (InfiniBand "
                                "needs one scale set per domain)"),
    "ZonalAllocationFailed": Mapping(CapacityError, "ZONE_CAPACITY_UNAVAILABLE",
                                     "no capacity in this zone: try another --zone, --zones 1 2 3, or no zone"),
    "OverconstrainedAllocationRequest": Mapping(CapacityError, "OVERCONSTRAINED",
                                                "relax the constraints (zone, accelerated "
                                                "networking, placement) or try --fallback-locations"),
    "OverconstrainedZonalAllocationRequest": Mapping(CapacityError, "OVERCONSTRAINED",
                                                     "drop --zone or try another zone"),
    "SkuNotAvailable": Mapping(CapacityError, "SKU_NOT_AVAILABLE",
                               "the size is not offered to this subscription here: 'provision capacity' with the same "
                               "--profile, --nodes and -l says where it is, try --fallback-locations, or ask support "
                               "for access"),
    "QuotaExceeded": Mapping(QuotaError, "QUOTA_EXCEEDED", QUOTA_REMEDY),
    # Only when its message or details speak of quota: see _operation_not_allowed.
    "OperationNotAllowed": Mapping(QuotaError, "QUOTA_EXCEEDED", QUOTA_REMEDY),
    "ResourceQuotaExceeded": Mapping(QuotaError, "QUOTA_EXCEEDED", "delete unused resources in the resource group or "
                                                                   "ask for a higher limit"),
    "AuthorizationFailed": Mapping(AuthError, "NOT_AUTHORIZED",
                                   "ask for the Contributor role on the resource group or subscription "
                                   "('az role assignment create')"),
    # The caller may write the resource but not use something it links to, e.g. assign a user-assigned
    # identity (Microsoft.ManagedIdentity/userAssignedIdentities/assign/action).
    "LinkedAuthorizationFailed": Mapping(AuthError, "NOT_AUTHORIZED_LINKED",
                                         "the caller lacks an action on a resource the request links to (the message "
                                         "names it): for a user-assigned identity, grant the 'Managed Identity "
                                         "Operator' role on the identity, or drop --identity"),
    "InvalidAuthenticationToken": Mapping(AuthError, "AUTHENTICATION_FAILED",
                                          "sign in again: 'az login' (or check AZURE_CLIENT_ID / AZURE_TENANT_ID / "
                                          "AZURE_CLIENT_SECRET)"),
    "ExpiredAuthenticationToken": Mapping(AuthError, "AUTHENTICATION_FAILED", "sign in again: 'az login'"),
    # Learn, "Resolve errors for request disallowed by policy": the error names the policy assignment
    # and definition; the fix is to comply with the policy, not a role.
    "RequestDisallowedByPolicy": Mapping(PolicyError, "DISALLOWED_BY_POLICY",
                                         "an Azure Policy assignment forbids this request: read its rule ('az policy "
                                         "assignment list' lists those that apply) and change the request to comply "
                                         "(location, size, tags, public IPs ...), or ask its owner for an exemption"),
    "ResourceGroupNotFound": Mapping(AzureError, "RESOURCE_GROUP_NOT_FOUND",
                                     "check -g/--resource-group and --subscription; 'provision create' creates it"),
    "PropertyChangeNotAllowed": Mapping(ConflictError, "CHANGE_NOT_ALLOWED",
                                        "Azure cannot change this on an existing scale set: destroy and re-create, or "
                                        "use another -n/--name"),
    "Conflict": Mapping(ConflictError, "CONFLICT", "another operation is running on the resource: wait and re-run"),
    "AnotherOperationInProgress": Mapping(OperationInProgressError, "OPERATION_IN_PROGRESS", IN_PROGRESS_REMEDY),
    # Learn, common deployment errors: "ResourceGroupBeingDeleted: Wait for deletion to complete."
    "ResourceGroupBeingDeleted": Mapping(OperationInProgressError, "RESOURCE_GROUP_BEING_DELETED",
                                         "the resource group is still being deleted: wait until it is gone "
                                         "('az group wait --deleted' with its -n shows when) and re-run, or use "
                                         "another -g/--resource-group"),
    "VMExtensionProvisioningError": Mapping(AzureError, "EXTENSION_FAILED",
                                            "a VM extension failed on the nodes: see its status in 'provision status', "
                                            "or use an Azure HPC image"),
    "InternalExecutionError": Mapping(AzureError, "AZURE_INTERNAL_ERROR",
                                      "Azure failed internally: re-run the command, it continues where it stopped"),
    # Marketplace images with a purchase plan (Marketplace Ordering).
    "VMMarketplaceInvalidInput": Mapping(MarketplaceError, "MARKETPLACE_PLAN_MISSING",
                                         "the image has a purchase plan the scale set must carry: 'provision create' "
                                         "adds it from the image ('az vm image show --query plan' with its --urn shows "
                                         "it); "
                                         "a hand-edited template needs the top-level plan block"),
    "MarketplacePurchaseEligibilityFailed": Mapping(MarketplaceError, "MARKETPLACE_TERMS_NOT_ACCEPTED",
                                                    "accept the image's Marketplace terms once for this subscription: "
                                                    "'az vm image terms accept' with its --urn (or add "
                                                    "--accept-terms), "
                                                    "or check that the subscription may buy from the Marketplace"),
    "ResourcePurchaseValidationFailed": Mapping(MarketplaceError, "MARKETPLACE_PURCHASE_REFUSED",
                                                "this subscription cannot buy the image's Marketplace offer (purchases "
                                                "disabled by the billing administrator, a private Marketplace, or the "
                                                "offer not sold in this region or billing account): ask the billing "
                                                "administrator, or use another image"),
    "PlatformImageNotFound": Mapping(ImageError, "IMAGE_NOT_FOUND", IMAGE_REMEDY),
    "ImageNotFound": Mapping(ImageError, "IMAGE_NOT_FOUND", IMAGE_REMEDY),
    "ArtifactNotFound": Mapping(ImageError, "IMAGE_VERSION_NOT_FOUND",
                                "the image or image version does not exist here: use version 'latest' or one "
                                "'az vm image list --all' shows in the location"),
    "ArtifactVersionNotFound": Mapping(ImageError, "IMAGE_VERSION_NOT_FOUND",
                                       "the image version does not exist here: use version 'latest' or one "
                                       "'az vm image list --all' shows in the location"),
    "InvalidParameter": Mapping(RequestError, "INVALID_PARAMETER",
                                "Azure rejected a value of the request (its message names the property): fix the flag "
                                "or cluster-file key that sets it and re-run"),
    "BadRequest": Mapping(RequestError, "BAD_REQUEST",
                          "Azure rejected the request (see its message): fix the request and re-run"),
    "SubnetIsFull": Mapping(RequestError, "SUBNET_FULL",
                            "the subnet has too few free addresses for the nodes: use fewer --nodes, a larger "
                            "--vnet-address-prefix, or another --subnet-id"),
    "InvalidResourceReference": Mapping(RequestError, "INVALID_REFERENCE",
                                        "a resource the request refers to does not exist or is in another region (the "
                                        "message names it): check --subnet-id and -l/--location"),
    "SubscriptionRequestsThrottled": Mapping(ThrottledError, "THROTTLED", THROTTLED_REMEDY),
    "TooManyRequests": Mapping(ThrottledError, "THROTTLED", THROTTLED_REMEDY),
}

CONFLICT_REMEDY = "the resource is in a state that conflicts with the request: re-run, or inspect it in the portal"
REJECTED_REMEDY = ("Azure rejected the request itself (see the message): fix the request; re-running it unchanged "
                   "fails the same way")
OPERATION_NOT_ALLOWED_REMEDY = ("Azure does not allow this operation for the resource's size, state or settings (the "
                                "message says why): change the request accordingly and re-run")
# Codes that only wrap the error that matters, which comes in `details`.
# PreflightValidationCheckFailed wraps the errors of a template validation (Deployments - Validate, 400).
WRAPPERS = {"", "deploymentfailed", "failed", "invalidtemplatedeployment", "resourcedeploymentfailure",
            "preflightvalidationcheckfailed"}
RATE_LIMIT_HEADER = "x-ms-ratelimit-remaining-"


def mapping_for(code: str) -> Mapping | None:
    """The row for an Azure error code, compared without case."""
    wanted = (code or "").lower()
    return next((m for k, m in TABLE.items() if k.lower() == wanted), None)


# ------------------------------------------------------------------------------------ the body


def error_body(exc: Exception) -> dict[str, Any]:
    """The error as Azure sent it: {"code", "message", "details", "additionalInfo", ...}.

    Read from the response itself, so it is the same under every SDK version. ARM wraps errors in
    {"error": {...}}; Compute's throttling answer comes unwrapped (Learn, "Troubleshooting API
    throttling errors"); a failed long-running operation puts it under "error" of the status body.
    """
    response = getattr(exc, "response", None)
    body: Any = None
    if response is not None:
        try:
            body = json.loads(response.text())
        except Exception:  # not JSON: fall back to what the SDK parsed
            body = None
    if isinstance(body, dict):
        inner = body.get("error") if isinstance(body.get("error"), dict) else body
        if inner.get("code") or inner.get("message"):
            return inner
    error = getattr(exc, "error", None)
    if error is not None:
        return _from_sdk(error)
    return {"message": getattr(exc, "message", None) or str(exc)}


def _from_sdk(error: Any) -> dict[str, Any]:
    return {
        "code": getattr(error, "code", None) or "",
        "message": getattr(error, "message", None) or "",
        "details": [_from_sdk(d) for d in getattr(error, "details", None) or []],
        "additionalInfo": [{"type": getattr(i, "type", ""), "info": getattr(i, "info", {})}
                           for i in getattr(error, "additional_info", None) or []],
    }


def _details(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [d for d in body.get("details") or [] if isinstance(d, dict)]


def effective(body: dict[str, Any]) -> dict[str, Any]:
    """The error that matters: a wrapper's first inner error with a code, else the error itself."""
    if (body.get("code") or "").lower() in WRAPPERS:
        for detail in _details(body):
            if detail.get("code"):
                return effective(detail)
    return body


# ------------------------------------------------------------------------------------ classifying


def _text(body: dict[str, Any]) -> str:
    parts = [body.get("message") or ""]
    for d in _details(body):
        parts += [d.get("code") or "", d.get("message") or "", d.get("target") or ""]
    return " ".join(parts)


_QUOTA = re.compile(r"quota", re.IGNORECASE)
_IN_PROGRESS = re.compile(r"in progress|in the middle of|another operation|marked for deletion|is being deleted",
                          re.IGNORECASE)


def is_throttling(body: dict[str, Any], status: int | None) -> bool:
    """HTTP 429, or Compute's throttling answer: OperationNotAllowed with TooManyRequests in the details
    (Learn, "Troubleshooting API throttling errors")."""
    return status == 429 or any((d.get("code") or "").lower() == "toomanyrequests" for d in _details(body))


def _operation_not_allowed(body: dict[str, Any], status: int | None) -> Mapping:
    """Compute's OperationNotAllowed covers several causes; its message and details are the only signal."""
    text = _text(body)
    if is_throttling(body, status):
        return TABLE["TooManyRequests"]
    if _QUOTA.search(text):
        return TABLE["OperationNotAllowed"]
    if _IN_PROGRESS.search(text):
        return Mapping(OperationInProgressError, "OPERATION_IN_PROGRESS", IN_PROGRESS_REMEDY)
    return Mapping(RequestError, "OPERATION_NOT_ALLOWED", OPERATION_NOT_ALLOWED_REMEDY)


def classify(body: dict[str, Any], status: int | None) -> Mapping:
    code = (body.get("code") or "").lower()
    if code == "operationnotallowed":
        return _operation_not_allowed(body, status)
    if status == 429 or is_throttling(body, status):
        return TABLE["TooManyRequests"]  # throttling, whatever the code: never "request a quota increase"
    mapping = mapping_for(code)
    if mapping is not None:
        return mapping
    if status == 409:
        return Mapping(ConflictError, "CONFLICT", CONFLICT_REMEDY)
    if status == 401:
        return TABLE["InvalidAuthenticationToken"]
    if status == 403:
        return TABLE["AuthorizationFailed"]
    if status is not None and 400 <= status < 500:
        return Mapping(RequestError, "AZURE_REQUEST_REJECTED", REJECTED_REMEDY)
    return Mapping(AzureError, "AZURE_ERROR", "re-run the command; it continues where it stopped")


# ------------------------------------------------------------------------------------ policy


def policy_assignment(body: dict[str, Any]) -> tuple[str, str]:
    """(display name, id) of the policy assignment that denied the request, as Azure reported it.

    Azure puts it in additionalInfo[type=PolicyViolation].info (policyAssignmentDisplayName /
    policyAssignmentName / policyAssignmentId) and in the message's "Policy identifiers: '[...]'".
    """
    for node in [body, *_details(body)]:
        for item in node.get("additionalInfo") or []:
            if (item.get("type") or "").lower() == "policyviolation":
                info = item.get("info") or {}
                name = info.get("policyAssignmentDisplayName") or info.get("policyAssignmentName") or ""
                rid = info.get("policyAssignmentId") or ""
                if name or rid:
                    return name, rid
    match = re.search(r"Policy identifiers: '(\[.*\])'", body.get("message") or "", re.DOTALL)
    if match:
        try:
            for entry in json.loads(match.group(1)):
                assignment = entry.get("policyAssignment") or {}
                if assignment.get("name") or assignment.get("id"):
                    return assignment.get("name", ""), assignment.get("id", "")
        except (ValueError, AttributeError):
            pass
    return "", ""


# ------------------------------------------------------------------------------------ throttling


def rate_limit_headers(response: Any) -> dict[str, str]:
    """Azure's remaining-calls headers (x-ms-ratelimit-remaining-*), as sent."""
    headers = getattr(response, "headers", None) or {}
    return {k.lower(): v for k, v in headers.items() if k.lower().startswith(RATE_LIMIT_HEADER)}


def throttled_policies(body: dict[str, Any]) -> list[str]:
    """Compute's throttling policies (operation groups) named in the details' target, e.g. HighCostGet."""
    return [d["target"] for d in _details(body) if (d.get("code") or "").lower() == "toomanyrequests"
            and d.get("target")]


def throttled(response: Any, *, operation: str, waited: float, reason: str) -> ThrottledError:
    """The error for throttling that outlasts what azgpu may wait, built from Azure's answer."""
    try:
        body = json.loads(response.text()) if response is not None else {}
    except Exception:
        body = {}
    body = body.get("error", body) if isinstance(body, dict) else {}
    policies = throttled_policies(body)
    remaining = rate_limit_headers(response)
    code = body.get("code") or "TooManyRequests"
    parts = [f"{operation}: Azure kept throttling ({code}{' ' + ', '.join(policies) if policies else ''}); "
             f"waited {waited:g} s in all, {reason}"]
    if remaining:
        parts.append("; remaining calls: " + ", ".join(f"{k}={v}" for k, v in sorted(remaining.items())))
    err = ThrottledError("".join(parts), code="THROTTLED", remedy=THROTTLED_REMEDY, azure_code=code)
    err.remaining = remaining
    return err


# ------------------------------------------------------------------------------------ translate


def translate(exc: Exception, *, what: str = "") -> AzureError:
    """An SDK HttpResponseError as an AzureError subclass with a remedy."""
    status = getattr(exc, "status_code", None)
    whole = error_body(exc)
    body = effective(whole)
    code = body.get("code") or ""
    message = body.get("message") or getattr(exc, "message", None) or str(exc)
    prefix = f"{what}: " if what else ""
    mapping = classify(body, status)
    if mapping.kind is PolicyError:
        name, rid = policy_assignment(body)
        named = f" (policy assignment '{name}'" + (f", {rid}" if rid else "") + ")" if name or rid else ""
        remedy = mapping.remedy
        marker = "/providers/microsoft.authorization/policyassignments/"
        if marker in rid.lower():  # the exact command to read the assignment's rule
            at = rid.lower().index(marker)
            scope, assignment = rid[:at] or "/", rid[at + len(marker):]
            remedy = remedy.replace("('az policy assignment list' lists those that apply)",
                                    f"with 'az policy assignment show --name {assignment} --scope {scope}'")
        err = PolicyError(f"{prefix}{code}{named}: {message}", code=mapping.code, remedy=remedy, azure_code=code)
        err.policy_assignment = rid or name
        return err
    label = code or str(status or "error")
    target = body.get("target") or ""
    if target and target not in message:  # what Azure refused, when its message does not say
        message = f"{message} (target: {target})"
    err = mapping.kind(f"{prefix}{label}: {message}", code=mapping.code, remedy=mapping.remedy, azure_code=code)
    if isinstance(err, ThrottledError):
        err.remaining = rate_limit_headers(getattr(exc, "response", None))
        policies = throttled_policies(body)
        if policies or err.remaining:
            extra = ", ".join([*policies, *(f"{k}={v}" for k, v in sorted(err.remaining.items()))])
            err.message = f"{err.message} ({extra})"
            err.args = (err.message,)
    return err
