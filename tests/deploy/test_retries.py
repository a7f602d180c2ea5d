"""Throttling is waited out as Retry-After says, within the session's throttling budget; 5xx and
dropped connections are retried with a bound; a permanent failure ends in a clear error, never a
hang. All sleeps are virtual."""

from __future__ import annotations

import time

import pytest
from deploy_support import VMSS, assert_cli_error, calls, create_args, request

from azgpu.deploy import CreateOptions, create
from azgpu.deploy.azure_errors import ThrottledError
from azgpu.deploy.session import DEFAULT_THROTTLE_BUDGET, RETRY, THROTTLE_BUDGET_ENV, Session
from azgpu.errors import AzureError, InputError
from azgpu.testing import FakeCredential

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


def test_permanent_throttling_gives_up_with_a_throttling_error(azure, session):
    injected = azure.inject(**VMSS_PUT, status=429, retry_after=5, times=None)
    with pytest.raises(ThrottledError) as info:
        create(session, request())
    err = info.value
    assert (err.code, err.azure_code) == ("THROTTLED", "OperationNotAllowed")  # Compute's throttling answer
    assert "c1-vmss000" in err.message and "PutVMScaleSet" in err.message  # names what was throttled
    assert err.remaining == {"x-ms-ratelimit-remaining-resource": "Microsoft.Compute/PutVMScaleSet;0"}
    assert "--throttle-budget" in err.remedy and "quota" not in err.remedy
    assert injected.fired == 1 + RETRY["retry_status"]
    assert azure.sleeps.count(5) == RETRY["retry_status"]  # each try waited as told, virtually


def test_a_retry_after_beyond_the_budget_is_not_waited(azure, session):
    # Compute may ask for Retry-After: 1200 (Learn, "Troubleshooting API throttling errors").
    injected = azure.inject(**VMSS_PUT, status=429, retry_after=1200, times=None)
    with pytest.raises(ThrottledError) as info:
        create(session, request())
    assert 1200 not in azure.sleeps and injected.fired == 1
    assert f"wait 1200 s more, beyond the throttling budget of {DEFAULT_THROTTLE_BUDGET:g} s" in info.value.message
    assert "PUT resourceGroups/rg1/providers/Microsoft.Compute/virtualMachineScaleSets/c1-vmss000" in info.value.message


def test_the_budget_counts_every_wait_of_the_session(azure):
    session = Session(azure.subscription_id, FakeCredential(), polling_interval=0, sleep=azure.sleep,
                      throttle_budget=10)
    azure.inject(method="GET", path="/usages", status=429, retry_after=7, times=1)
    azure.inject(**VMSS_PUT, status=429, retry_after=7, times=1)
    with pytest.raises(ThrottledError) as info:
        create(session, request())
    assert azure.sleeps.count(7) == 1  # the preflight's wait took 7 of the 10 s; the PUT's 7 more do not fit
    assert "(3 s left)" in info.value.message


def test_a_budget_that_fits_waits_every_retry_after(azure):
    session = Session(azure.subscription_id, FakeCredential(), polling_interval=0, sleep=azure.sleep,
                      throttle_budget=15)
    azure.inject(**VMSS_PUT, status=429, retry_after=7, times=2)
    create(session, request())
    assert azure.sleeps.count(7) == 2 and session.throttling.spent == 14


def test_the_budget_comes_from_the_environment(azure, monkeypatch):
    monkeypatch.setenv(THROTTLE_BUDGET_ENV, "3")
    session = Session(azure.subscription_id, FakeCredential(), polling_interval=0, sleep=azure.sleep)
    azure.inject(**VMSS_PUT, status=429, retry_after=7, times=1)
    with pytest.raises(ThrottledError):
        create(session, request())
    assert session.throttling.seconds == 3


def test_a_bad_budget_in_the_environment_is_bad_input(monkeypatch):
    monkeypatch.setenv(THROTTLE_BUDGET_ENV, "soon")
    with pytest.raises(InputError) as info:
        Session("sub", FakeCredential())
    assert info.value.code == "INVALID_THROTTLE_BUDGET" and THROTTLE_BUDGET_ENV in info.value.remedy


def test_a_throttling_wait_past_the_timeout_is_not_waited(azure, session):
    azure.inject(**VMSS_PUT, status=429, retry_after=120, times=None)
    with pytest.raises(ThrottledError) as info:
        create(session, request(), CreateOptions(timeout=60))
    assert 120 not in azure.sleeps
    assert "past --timeout" in info.value.message


def test_resource_manager_throttling_is_waited_out_too(azure, session):
    fault = azure.inject(method="GET", path="/resources$", status=429, retry_after=4, times=1)
    create(session, request())
    assert fault.fired == 1 and 4 in azure.sleeps


def test_cli_throttle_budget_flag_sets_the_sessions_budget(run, tmp_path, monkeypatch):
    from azgpu.deploy import lifecycle

    seen = []
    monkeypatch.setattr(lifecycle, "status", lambda session, name, rg: seen.append(session.throttling.seconds) or {})
    rc, out, err = run("status", "-n", "c1", "-g", "rg1", "--simulate", "--simulate-latency", "0",
                       "--simulate-state", tmp_path / "state.json", "--throttle-budget", "42")
    assert rc == 0, err
    assert seen == [42]


def test_cli_persistent_throttling_exits_1_with_the_throttling_error(azure, cli):
    azure.inject(**VMSS_PUT, status=429, retry_after=1200, times=None)
    rc, out, err = cli(*create_args())
    assert_cli_error(rc, err, 1, "THROTTLED", "--throttle-budget")


def test_cli_permanent_server_error_exits_1_with_one_error_line(azure, cli):
    azure.inject(**VMSS_PUT, status=500, times=None)
    rc, out, err = cli(*create_args())
    assert_cli_error(rc, err, 1, "AZURE_ERROR", "continues where it stopped")
    assert "InternalServerError" in err
