"""Azure's error codes (from the wire, through the real SDK) become typed errors with stable codes
and remedies; on the command line: exit 1, one `ERROR: [CODE] ...` line and a remedy, no traceback."""

from __future__ import annotations

import pytest
from deploy_support import assert_cli_error, create_args, request

from azgpu.deploy.azure_errors import AuthError, CapacityError, ConflictError, QuotaError
from azgpu.deploy.create import create
from azgpu.errors import AzureError

VMSS_PUT = {"method": "PUT", "path": "virtualMachineScaleSets"}

# fault injected on the scale-set PUT -> (error class, code, Azure's code, words of the remedy)
CASES = {
    "AllocationFailed": ({"operation_error": "AllocationFailed"}, CapacityError, "CAPACITY_UNAVAILABLE",
                         "AllocationFailed", "--fallback-locations"),
    "ZonalAllocationFailed": ({"operation_error": "ZonalAllocationFailed"}, CapacityError, "ZONE_CAPACITY_UNAVAILABLE",
                              "ZonalAllocationFailed", "--zones 1 2 3"),
    "OverconstrainedAllocationRequest": ({"operation_error": "OverconstrainedAllocationRequest"}, CapacityError,
                                         "OVERCONSTRAINED", "OverconstrainedAllocationRequest", "relax the constraints"),
    "SkuNotAvailable": ({"operation_error": "SkuNotAvailable"}, CapacityError, "SKU_NOT_AVAILABLE", "SkuNotAvailable",
                        "az vm list-skus"),
    "QuotaExceeded": ({"operation_error": "QuotaExceeded"}, QuotaError, "QUOTA_EXCEEDED", "QuotaExceeded",
                      "quota increase"),
    "OperationNotAllowed": ({"operation_error": "OperationNotAllowed"}, QuotaError, "QUOTA_EXCEEDED",
                            "OperationNotAllowed", "quota increase"),
    "AuthorizationFailed 403": ({"status": 403}, AuthError, "NOT_AUTHORIZED", "AuthorizationFailed", "Contributor role"),
    "InvalidAuthenticationToken 401": ({"status": 401}, AuthError, "AUTHENTICATION_FAILED", "InvalidAuthenticationToken",
                                       "az login"),
    "ResourceGroupNotFound": ({"operation_error": "ResourceGroupNotFound"}, AzureError, "RESOURCE_GROUP_NOT_FOUND",
                              "ResourceGroupNotFound", "-g/--resource-group"),
    "409 conflict": ({"status": 409}, ConflictError, "CONFLICT", "Conflict", "re-run"),
    "InternalExecutionError": ({"operation_error": "InternalExecutionError"}, AzureError, "AZURE_INTERNAL_ERROR",
                               "InternalExecutionError", "continues where it stopped"),
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


def test_unmapped_azure_code_is_a_generic_azure_error_with_a_remedy(azure, session):
    azure.inject(**VMSS_PUT, operation_error="SomethingNew")
    with pytest.raises(AzureError) as info:
        create(session, request())
    assert (type(info.value), info.value.code, info.value.azure_code) == (AzureError, "AZURE_ERROR", "SomethingNew")
    assert info.value.remedy


def test_the_code_decides_not_the_message(azure, session):
    # A message that talks about quota does not make an allocation failure a quota error.
    azure.inject(**VMSS_PUT, operation_error="AllocationFailed", message="exceeding approved quota")
    with pytest.raises(CapacityError):
        create(session, request())


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
