"""Throttling is waited out as Retry-After says; 5xx and dropped connections are retried with a
bound; a permanent failure ends in a clear error, never a hang. All sleeps are virtual."""

from __future__ import annotations

import time

import pytest
from deploy_support import VMSS, assert_cli_error, calls, create_args, request

from azgpu.deploy.create import create
from azgpu.deploy.session import RETRY
from azgpu.errors import AzureError

VMSS_PUT = {"method": "PUT", "path": "virtualMachineScaleSets"}


def vmss_put_statuses(azure) -> list:
    return [r.status for r in calls(azure, "PUT", path="virtualMachineScaleSets")]


def test_throttled_put_waits_retry_after_then_succeeds(azure, session):
    azure.inject(**VMSS_PUT, status=429, retry_after=7)
    create(session, request())
    assert 7 in azure.sleeps
    assert vmss_put_statuses(azure) == [429, 201]
    assert azure.resources(type=VMSS)[0]["properties"]["provisioningState"] == "Succeeded"


def test_throttled_preflight_read_is_waited_out(azure, session):
    azure.inject(method="GET", path="/usages", status=429, retry_after=11)
    create(session, request())
    assert 11 in azure.sleeps


@pytest.mark.parametrize("fault", [{"status": 500}, {"status": 503}, {"reset": True}], ids=["500", "503", "reset"])
def test_transient_failure_is_retried(azure, session, fault):
    injected = azure.inject(**VMSS_PUT, **fault, times=2)
    create(session, request())
    assert injected.fired == 2
    assert vmss_put_statuses(azure)[-1] == 201
    assert len(azure.resources(type=VMSS)) == 1


@pytest.mark.parametrize("fault, code, tries", [
    ({"status": 500}, "AZURE_ERROR", 1 + RETRY["retry_status"]),
    ({"status": 503}, "AZURE_ERROR", 1 + RETRY["retry_status"]),
    ({"reset": True}, "NETWORK_ERROR", 1 + RETRY["retry_connect"]),
], ids=["500", "503", "reset"])
def test_permanent_failure_ends_in_a_clear_error_after_bounded_retries(azure, session, fault, code, tries):
    injected = azure.inject(**VMSS_PUT, **fault, times=None)
    start = time.monotonic()
    with pytest.raises(AzureError) as info:
        create(session, request())
    assert time.monotonic() - start < 5
    assert info.value.code == code and info.value.remedy
    assert injected.fired == tries  # retried as configured, then gave up


def test_permanent_throttling_gives_up(azure, session):
    injected = azure.inject(**VMSS_PUT, status=429, retry_after=5, times=None)
    with pytest.raises(AzureError) as info:
        create(session, request())
    assert "TooManyRequests" in info.value.message
    assert injected.fired == 1 + RETRY["retry_status"]
    assert azure.sleeps.count(5) == RETRY["retry_status"]  # each try waited as told, virtually


def test_cli_permanent_server_error_exits_1_with_one_error_line(azure, cli):
    azure.inject(**VMSS_PUT, status=500, times=None)
    rc, out, err = cli(*create_args())
    assert_cli_error(rc, err, 1, "AZURE_ERROR", "continues where it stopped")
    assert "InternalServerError" in err
