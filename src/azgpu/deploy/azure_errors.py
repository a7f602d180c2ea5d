"""One table from Azure's error codes (exc.error.code, never message text) to typed errors with remedies."""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import AzureError


class CapacityError(AzureError):
    """Azure has no capacity for the request now: the only kind a fallback location or zone may retry."""


class QuotaError(AzureError):
    pass


class AuthError(AzureError):
    pass


class ConflictError(AzureError):
    pass


@dataclass(frozen=True)
class Mapping:
    kind: type[AzureError]
    code: str
    remedy: str


TABLE: dict[str, Mapping] = {
    "AllocationFailed": Mapping(CapacityError, "CAPACITY_UNAVAILABLE",
                                "Azure has no capacity for this size here now: retry later, try --fallback-locations or "
                                "--zones, or split the cluster (InfiniBand needs one scale set per domain)"),
    "ZonalAllocationFailed": Mapping(CapacityError, "ZONE_CAPACITY_UNAVAILABLE",
                                     "no capacity in this zone: try another --zone, --zones 1 2 3, or no zone"),
    "OverconstrainedAllocationRequest": Mapping(CapacityError, "OVERCONSTRAINED",
                                                "relax the constraints (zone, accelerated networking, placement) or try "
                                                "--fallback-locations"),
    "OverconstrainedZonalAllocationRequest": Mapping(CapacityError, "OVERCONSTRAINED",
                                                     "drop --zone or try another zone"),
    "SkuNotAvailable": Mapping(CapacityError, "SKU_NOT_AVAILABLE",
                               "the size is not offered to this subscription here: check 'az vm list-skus -l LOCATION "
                               "--size SIZE --all', try --fallback-locations, or ask support for access"),
    "QuotaExceeded": Mapping(QuotaError, "QUOTA_EXCEEDED",
                             "request a quota increase for the family in this region (portal: Usage + quotas), "
                             "or use fewer --nodes"),
    "OperationNotAllowed": Mapping(QuotaError, "QUOTA_EXCEEDED",
                                   "request a quota increase for the family in this region (portal: Usage + quotas), "
                                   "or use fewer --nodes"),
    "ResourceQuotaExceeded": Mapping(QuotaError, "QUOTA_EXCEEDED", "delete unused resources in the resource group or "
                                                                   "ask for a higher limit"),
    "AuthorizationFailed": Mapping(AuthError, "NOT_AUTHORIZED",
                                   "ask for the Contributor role on the resource group or subscription "
                                   "(az role assignment create)"),
    "InvalidAuthenticationToken": Mapping(AuthError, "AUTHENTICATION_FAILED",
                                          "sign in again: az login (or check AZURE_CLIENT_ID / AZURE_TENANT_ID / "
                                          "AZURE_CLIENT_SECRET)"),
    "ExpiredAuthenticationToken": Mapping(AuthError, "AUTHENTICATION_FAILED", "sign in again: az login"),
    "ResourceGroupNotFound": Mapping(AzureError, "RESOURCE_GROUP_NOT_FOUND",
                                     "check -g/--resource-group and --subscription; 'provision create' creates it"),
    "PropertyChangeNotAllowed": Mapping(ConflictError, "CHANGE_NOT_ALLOWED",
                                        "Azure cannot change this on an existing scale set: destroy and re-create, or "
                                        "use another -n/--name"),
    "Conflict": Mapping(ConflictError, "CONFLICT", "another operation is running on the resource: wait and re-run"),
    "AnotherOperationInProgress": Mapping(ConflictError, "CONFLICT", "another operation is running: wait and re-run"),
    "VMExtensionProvisioningError": Mapping(AzureError, "EXTENSION_FAILED",
                                            "a VM extension failed on the nodes: see its status in 'provision status', "
                                            "or use an Azure HPC image"),
    "InternalExecutionError": Mapping(AzureError, "AZURE_INTERNAL_ERROR",
                                      "Azure failed internally: re-run the command, it continues where it stopped"),
    # A marketplace image with a purchase plan: the scale set lacks the plan, or its terms are not accepted.
    "VMMarketplaceInvalidInput": Mapping(AzureError, "MARKETPLACE_PLAN_MISSING",
                                         "the image has a purchase plan the scale set must carry: 'provision create' "
                                         "adds it from the image; a hand-edited template needs the top-level plan block"),
    "MarketplacePurchaseEligibilityFailed": Mapping(AzureError, "MARKETPLACE_TERMS_NOT_ACCEPTED",
                                                    "accept the image's terms once per subscription: az vm image terms "
                                                    "accept --urn PUBLISHER:OFFER:SKU:VERSION, or add --accept-terms"),
}

CONFLICT_REMEDY = "the resource is in a state that conflicts with the request: re-run, or inspect it in the portal"


def code_of(exc: Exception) -> str:
    error = getattr(exc, "error", None)
    code = getattr(error, "code", None) or ""
    # Long-running operations report the inner error of a failed deployment in `details`.
    details = getattr(error, "details", None) or []
    if code in ("", "DeploymentFailed", "Failed") and details:
        code = getattr(details[0], "code", "") or code
    return code


def translate(exc: Exception, *, what: str = "") -> AzureError:
    """An SDK HttpResponseError as an AzureError subclass with a remedy."""
    code = code_of(exc)
    error = getattr(exc, "error", None)
    message = getattr(error, "message", None) or getattr(exc, "message", None) or str(exc)
    status = getattr(exc, "status_code", None)
    prefix = f"{what}: " if what else ""
    mapping = TABLE.get(code)
    if mapping is None and status == 409:
        mapping = Mapping(ConflictError, "CONFLICT", CONFLICT_REMEDY)
    if mapping is None and status in (401,):
        mapping = TABLE["InvalidAuthenticationToken"]
    if mapping is None and status in (403,):
        mapping = TABLE["AuthorizationFailed"]
    if mapping is None:
        return AzureError(f"{prefix}{code or status or 'error'}: {message}", code="AZURE_ERROR",
                          remedy="re-run the command; it continues where it stopped", azure_code=code)
    return mapping.kind(f"{prefix}{code}: {message}", code=mapping.code, remedy=mapping.remedy, azure_code=code)
