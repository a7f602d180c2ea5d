"""Azure's error codes (from the wire, through the real SDK) become typed errors with stable codes
and remedies; on the command line: exit 1, one `ERROR: [CODE] ...` line and a remedy, no traceback.

Codes compare without case; OperationNotAllowed is quota only when Azure says quota; a 429 is
throttling; an unknown 4xx asks to fix the request. Real bodies from Microsoft Learn (kept under
tests/fixtures/azure/errors with their source) are replayed through the fake, the SDK and azgpu.
"""

from __future__ import annotations

import pytest
from deploy_support import VMSS, assert_cli_error, azure_fixture, calls, create_args, request

from azgpu.deploy import CreateOptions, create
from azgpu.deploy.azure_errors import (
    AuthError,
    CapacityError,
    ConflictError,
    ImageError,
    MarketplaceError,
    OperationInProgressError,
    PolicyError,
    QuotaError,
    RequestError,
    ThrottledError,
    classify,
)
from azgpu.errors import AzureError

VMSS_PUT = {"method": "PUT", "path": "virtualMachineScaleSets"}
QUOTA_MESSAGE = ("Operation could not be completed as it results in exceeding approved standardNDASv4_A100Family "
                 "Cores quota. Additional details - Deployment Model: Resource Manager, Location: eastus, Current "
                 "Limit: 100, Current Usage: 0, Additional Required: 192.")

# fault injected on the scale-set PUT -> (error class, code, Azure's code as sent, words of the remedy)
CASES = {
    "AllocationFailed": ({"operation_error": "AllocationFailed"}, CapacityError, "CAPACITY_UNAVAILABLE",
                         "AllocationFailed", "--fallback-locations"),
    "ZonalAllocationFailed": ({"operation_error": "ZonalAllocationFailed"}, CapacityError, "ZONE_CAPACITY_UNAVAILABLE",
                              "ZonalAllocationFailed", "--zones 1 2 3"),
    "OverconstrainedAllocationRequest": ({"operation_error": "OverconstrainedAllocationRequest"}, CapacityError,
                                         "OVERCONSTRAINED", "OverconstrainedAllocationRequest",
                                         "relax the constraints"),
    # Microsoft also spells it with a capital C.
    "OverConstrainedAllocationRequest": ({"operation_error": "OverConstrainedAllocationRequest"}, CapacityError,
                                         "OVERCONSTRAINED", "OverConstrainedAllocationRequest",
                                         "relax the constraints"),
    "SkuNotAvailable": ({"status": 409, "code": "SkuNotAvailable"}, CapacityError, "SKU_NOT_AVAILABLE",
                        "SkuNotAvailable", "'provision capacity'"),
    "skunotavailable (any case)": ({"status": 409, "code": "skunotavailable"}, CapacityError, "SKU_NOT_AVAILABLE",
                                   "skunotavailable", "'provision capacity'"),
    "QuotaExceeded": ({"status": 409, "code": "QuotaExceeded"}, QuotaError, "QUOTA_EXCEEDED", "QuotaExceeded",
                      "quota increase"),
    "OperationNotAllowed saying quota": ({"status": 409, "code": "OperationNotAllowed", "message": QUOTA_MESSAGE},
                                         QuotaError, "QUOTA_EXCEEDED", "OperationNotAllowed", "quota increase"),
    "OperationNotAllowed otherwise": ({"status": 409, "code": "OperationNotAllowed",
                                       "message": "The specified data disk count 9 exceeds the maximum allowed data "
                                                  "disk count 8 for the VM size."},
                                      RequestError, "OPERATION_NOT_ALLOWED", "OperationNotAllowed",
                                      "change the request"),
    "AuthorizationFailed 403": ({"status": 403}, AuthError, "NOT_AUTHORIZED", "AuthorizationFailed",
                                "Contributor role"),
    "InvalidAuthenticationToken 401": ({"status": 401}, AuthError, "AUTHENTICATION_FAILED",
                                       "InvalidAuthenticationToken",
                                       "az login"),
    "ResourceGroupNotFound": ({"status": 404, "code": "ResourceGroupNotFound"}, AzureError, "RESOURCE_GROUP_NOT_FOUND",
                              "ResourceGroupNotFound", "-g/--resource-group"),
    "409 conflict": ({"status": 409}, ConflictError, "CONFLICT", "Conflict", "re-run"),
    "InternalExecutionError": ({"operation_error": "InternalExecutionError"}, AzureError, "AZURE_INTERNAL_ERROR",
                               "InternalExecutionError", "continues where it stopped"),
    "RequestDisallowedByPolicy": ({"status": 403, "code": "RequestDisallowedByPolicy"}, PolicyError,
                                  "DISALLOWED_BY_POLICY", "RequestDisallowedByPolicy", "az policy assignment list"),
    "VMMarketplaceInvalidInput": ({"status": 400, "code": "VMMarketplaceInvalidInput"}, MarketplaceError,
                                  "MARKETPLACE_PLAN_MISSING", "VMMarketplaceInvalidInput", "top-level plan block"),
    "MarketplacePurchaseEligibilityFailed": ({"status": 400, "code": "MarketplacePurchaseEligibilityFailed"},
                                             MarketplaceError, "MARKETPLACE_TERMS_NOT_ACCEPTED",
                                             "MarketplacePurchaseEligibilityFailed", "az vm image terms accept"),
    "ResourcePurchaseValidationFailed": ({"status": 400, "code": "ResourcePurchaseValidationFailed"}, MarketplaceError,
                                         "MARKETPLACE_PURCHASE_REFUSED", "ResourcePurchaseValidationFailed",
                                         "billing administrator"),
    "PlatformImageNotFound": ({"status": 404, "code": "PlatformImageNotFound"}, ImageError, "IMAGE_NOT_FOUND",
                              "PlatformImageNotFound", "provision images list"),
    "ImageNotFound": ({"status": 404, "code": "ImageNotFound"}, ImageError, "IMAGE_NOT_FOUND", "ImageNotFound",
                      "provision images list"),
    "ArtifactNotFound": ({"status": 404, "code": "ArtifactNotFound"}, ImageError, "IMAGE_VERSION_NOT_FOUND",
                         "ArtifactNotFound", "version 'latest'"),
    "ArtifactVersionNotFound": ({"status": 404, "code": "ArtifactVersionNotFound"}, ImageError,
                                "IMAGE_VERSION_NOT_FOUND", "ArtifactVersionNotFound", "version 'latest'"),
    "InvalidParameter": ({"status": 400, "code": "InvalidParameter"}, RequestError, "INVALID_PARAMETER",
                         "InvalidParameter", "fix the flag"),
    "BadRequest": ({"status": 400, "code": "BadRequest"}, RequestError, "BAD_REQUEST", "BadRequest",
                   "fix the request"),
    "SubnetIsFull": ({"status": 400, "code": "SubnetIsFull"}, RequestError, "SUBNET_FULL", "SubnetIsFull",
                     "--vnet-address-prefix"),
    "InvalidResourceReference": ({"status": 400, "code": "InvalidResourceReference"}, RequestError,
                                 "INVALID_REFERENCE", "InvalidResourceReference", "--subnet-id"),
    "PropertyChangeNotAllowed": ({"status": 409, "code": "PropertyChangeNotAllowed"}, ConflictError,
                                 "CHANGE_NOT_ALLOWED", "PropertyChangeNotAllowed", "destroy and re-create"),
}


@pytest.mark.parametrize("fault, kind, code, azure_code, remedy", CASES.values(), ids=CASES.keys())
def test_azure_error_becomes_a_typed_error_with_code_and_remedy(azure, session, fault, kind, code, azure_code, remedy):
    azure.inject(**VMSS_PUT, **fault)
    with pytest.raises(AzureError) as info:
        create(session, request())
    err = info.value
    assert type(err) is kind
    assert (err.code, err.azure_code, err.exit_code) == (code, azure_code, 1)
    assert remedy in err.remedy
    assert azure_code in err.message and "c1-vmss000" in err.message  # says what failed and Azure's code


@pytest.mark.parametrize("fault, kind, code, azure_code, remedy", CASES.values(), ids=CASES.keys())
def test_cli_prints_one_error_line_and_the_remedy_and_exits_1(azure, cli, fault, kind, code, azure_code, remedy):
    azure.inject(**VMSS_PUT, **fault)
    rc, out, err = cli(*create_args())
    assert_cli_error(rc, err, 1, code, remedy)
    assert out == ""


def test_debug_shows_the_traceback(azure, cli):
    azure.inject(**VMSS_PUT, operation_error="AllocationFailed")
    with pytest.raises(CapacityError):
        cli(*create_args(), "--debug")


def test_unmapped_code_of_a_failed_operation_is_a_generic_azure_error_to_re_run(azure, session):
    azure.inject(**VMSS_PUT, operation_error="SomethingNew")
    with pytest.raises(AzureError) as info:
        create(session, request())
    assert (type(info.value), info.value.code, info.value.azure_code) == (AzureError, "AZURE_ERROR", "SomethingNew")
    assert "continues where it stopped" in info.value.remedy


def test_unmapped_4xx_says_fix_the_request_not_re_run(azure, session):
    azure.inject(**VMSS_PUT, status=400, code="SomethingNew")
    with pytest.raises(RequestError) as info:
        create(session, request())
    assert (info.value.code, info.value.azure_code) == ("AZURE_REQUEST_REJECTED", "SomethingNew")
    assert "fix the request" in info.value.remedy and "continues where it stopped" not in info.value.remedy


def test_a_429_is_throttling_never_a_quota_increase(azure, session):
    azure.inject(**VMSS_PUT, status=429, code="QuotaExceeded", retry_after=3600, times=None)
    with pytest.raises(ThrottledError) as info:
        create(session, request())
    assert info.value.code == "THROTTLED" and "quota increase" not in info.value.remedy


def test_the_code_decides_not_the_message(azure, session):
    # A message that talks about quota does not make an allocation failure a quota error.
    azure.inject(**VMSS_PUT, operation_error="AllocationFailed", message="exceeding approved quota")
    with pytest.raises(CapacityError):
        create(session, request())


def test_the_inner_error_of_a_deployment_failure_decides():
    body = {"code": "InvalidTemplateDeployment", "message": "The template deployment failed.",
            "details": [{"code": "SkuNotAvailable", "message": "not here"}]}
    from azgpu.deploy.azure_errors import effective

    assert classify(effective(body), 400).code == "SKU_NOT_AVAILABLE"


@pytest.mark.parametrize("message", [
    "Operation 'Update Virtual Machine Scale Set' is not allowed on Virtual Machine Scale Set 'c1-vmss000' since it "
    "is marked for deletion. For more information on your operations, please refer to https://aka.ms/activitylog.",
    "Operation 'Update Virtual Machine Scale Set' is not allowed on Virtual Machine Scale Set 'c1-vmss000' since "
    "another operation on it is in progress.",
], ids=["marked for deletion", "in progress"])
def test_operation_not_allowed_while_another_operation_runs_is_in_progress_not_quota(message):
    mapping = classify({"code": "OperationNotAllowed", "message": message}, 409)
    assert (mapping.kind, mapping.code) == (OperationInProgressError, "OPERATION_IN_PROGRESS")


def test_network_another_operation_in_progress_is_in_progress():
    mapping = classify({"code": "AnotherOperationInProgress", "message": "Another operation on this or dependent "
                                                                         "resource is in progress."}, 409)
    assert mapping.kind is OperationInProgressError


READS = {"resource SKUs": "/skus", "usages": "/usages", "image versions": "/versions",
         "resource group listing": "/resources$"}


@pytest.mark.parametrize("path", READS.values(), ids=READS.keys())
def test_failed_preflight_read_is_translated_too(azure, cli, path):
    azure.inject(method="GET", path=path, status=403, times=None)
    rc, out, err = cli(*create_args())
    assert_cli_error(rc, err, 1, "NOT_AUTHORIZED", "Contributor role")
    assert not [r for r in azure.requests if r.method in ("PUT", "DELETE")]


LIFECYCLE_READS = {"status": "virtualMachines$", "outputs": "networkInterfaces$", "wait": "virtualMachines$"}


@pytest.mark.parametrize("command, path", LIFECYCLE_READS.items(), ids=LIFECYCLE_READS.keys())
def test_failed_read_of_a_lifecycle_command_is_translated(azure, session, cli, command, path):
    create(session, request())
    azure.inject(method="GET", path=path, status=403, times=None)
    rc, out, err = cli(command, "-n", "c1", "-g", "rg1")
    assert_cli_error(rc, err, 1, "NOT_AUTHORIZED", "Contributor role")


def test_failed_delete_during_destroy_is_translated(azure, session, cli):
    create(session, request())
    azure.inject(method="DELETE", path="virtualMachineScaleSets", status=409)
    rc, out, err = cli("destroy", "-n", "c1", "-g", "rg1", "--yes")
    assert_cli_error(rc, err, 1, "CONFLICT", "re-run")


# -- real bodies, replayed ---------------------------------------------------------------------------

POLICY_ASSIGNMENT = ("/subscriptions/aaaa0a0a-bb1b-cc2c-dd3d-eeeeee4e4e4e/resourceGroups/MAIC-RG/providers/"
                     "Microsoft.Authorization/policyAssignments/fd5e2cb3842d4eefbc857917")


def test_policy_denial_names_the_policy_assignment(azure, session):
    azure.inject(**VMSS_PUT, **azure_fixture("errors/request_disallowed_by_policy"))
    with pytest.raises(PolicyError) as info:
        create(session, request())
    err = info.value
    assert err.code == "DISALLOWED_BY_POLICY" and err.policy_assignment == POLICY_ASSIGNMENT
    assert "policy assignment 'Enforce Jobs on Automation Hybrid Runbook Workers'" in err.message
    assert "az policy assignment show" in err.remedy and "Contributor" not in err.remedy


def test_cli_policy_denial_is_one_error_line_naming_the_assignment(azure, cli):
    azure.inject(**VMSS_PUT, **azure_fixture("errors/request_disallowed_by_policy"))
    rc, out, err = cli(*create_args())
    assert_cli_error(rc, err, 1, "DISALLOWED_BY_POLICY", "az policy assignment show")
    assert POLICY_ASSIGNMENT in err


def test_computes_throttling_answer_is_a_throttling_error_with_the_remaining_calls(azure, session):
    # Learn's example asks for Retry-After: 1200, beyond the default budget: no 20-minute wait.
    azure.inject(method="GET", path="/skus", times=None, **azure_fixture("errors/compute_throttled"))
    with pytest.raises(ThrottledError) as info:
        create(session, request())
    err = info.value
    assert (err.code, err.azure_code) == ("THROTTLED", "OperationNotAllowed")
    assert "HighCostGet" in err.message and "wait 1200 s more" in err.message
    assert err.remaining == {"x-ms-ratelimit-remaining-resource": "Microsoft.Compute/HighCostGet;0"}
    assert 1200 not in azure.sleeps


def test_documented_quota_answer_is_a_quota_error(azure, session):
    azure.inject(**VMSS_PUT, **azure_fixture("errors/quota_operation_not_allowed"))
    with pytest.raises(QuotaError) as info:
        create(session, request())
    assert info.value.code == "QUOTA_EXCEEDED" and "exceeding quota limits of Core" in info.value.message


def test_documented_subnet_is_full_answer_is_a_request_error(azure, session):
    azure.inject(**VMSS_PUT, **azure_fixture("errors/subnet_is_full"))
    with pytest.raises(RequestError) as info:
        create(session, request())
    assert info.value.code == "SUBNET_FULL"


def test_documented_sku_not_available_answer_moves_to_the_fallback_location(azure, session):
    fault = azure.inject(**VMSS_PUT, **azure_fixture("errors/sku_not_available"))
    result = create(session, request(), CreateOptions(fallback_locations=["westus2"])).as_dict()
    assert fault.fired == 1 and result["location"] == "westus2"
    assert [v["location"] for v in azure.resources(type=VMSS)] == ["westus2"]
    assert len(calls(azure, "PUT", path="virtualMachineScaleSets")) == 2


def test_create_into_a_group_still_being_deleted_says_wait_for_it(azure, session):
    create(session, request())
    azure.inject(method="PUT", path="resourcegroups/rg2$", status=409, code="ResourceGroupBeingDeleted")
    with pytest.raises(OperationInProgressError) as info:
        create(session, request(resource_group="rg2"))
    assert info.value.code == "RESOURCE_GROUP_BEING_DELETED" and "az group wait --deleted" in info.value.remedy
