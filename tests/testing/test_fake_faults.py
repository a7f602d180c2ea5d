"""Injected faults under the SDK's real retry policy, and sleeps that never happen for real."""

from __future__ import annotations

import time

import pytest
from azure.core.exceptions import HttpResponseError
from fake_azure_support import RG, build_network, create_vmss, make_clients

from azgpu.testing import FakeAzure


def _statuses(azure, method="PUT") -> list:
    return [r.status for r in azure.requests if r.method == method]


def test_throttled_call_waits_retry_after_then_succeeds(azure, clients):
    azure.inject(method="PUT", path="resourcegroups", status=429, retry_after=7)
    clients.resource.resource_groups.create_or_update(RG, {"location": "eastus"})
    assert 7 in azure.sleeps
    assert _statuses(azure) == [429, 201]


def test_throttle_answer_has_arm_error_body_and_header(azure, clients):
    azure.inject(method="GET", status=429, retry_after=3, times=None)
    with pytest.raises(HttpResponseError) as err:
        clients.resource.resource_groups.get(RG)
    assert (err.value.status_code, err.value.error.code, err.value.response.headers["Retry-After"]) == (429, "TooManyRequests", "3")


def test_server_error_is_retried(azure, clients):
    azure.inject(method="PUT", status=500)
    clients.resource.resource_groups.create_or_update(RG, {"location": "eastus"})
    assert _statuses(azure) == [500, 201]


def test_service_unavailable_forever_exhausts_the_retries(azure, clients):
    fault = azure.inject(method="GET", status=503, times=None)
    with pytest.raises(HttpResponseError) as err:
        clients.resource.resource_groups.get(RG)
    assert (err.value.status_code, fault.fired) == (503, 4)  # the first try and azure-core's 3 status retries


def test_connection_reset_is_retried(azure, clients):
    azure.inject(method="PUT", reset=True)
    clients.resource.resource_groups.create_or_update(RG, {"location": "eastus"})
    assert _statuses(azure) == [None, 201]


def test_after_skips_the_first_matching_calls(azure, clients):
    fault = azure.inject(method="PUT", path="resourcegroups/b$", status=500, after=1)
    for _ in range(2):
        clients.resource.resource_groups.create_or_update("b", {"location": "eastus"})
    assert (fault.fired, _statuses(azure)) == (1, [201, 500, 200])


def test_share_fires_on_that_fraction_of_calls(azure, clients):
    fault = azure.inject(method="HEAD", status=500, share=0.25, times=None)
    for _ in range(8):
        clients.resource.resource_groups.check_existence(RG)
    # every 4th matching call fails (and its retry is the next matching call)
    assert fault.fired == len([s for s in _statuses(azure, "HEAD") if s == 500]) == 2


def test_path_is_a_case_insensitive_regex_search(azure, clients):
    fault = azure.inject(path=r"RESOURCEGROUPS/rg-", status=500)
    clients.resource.resource_groups.create_or_update(RG, {"location": "eastus"})
    assert fault.fired == 1


def test_inject_needs_exactly_one_kind_of_fault(azure):
    with pytest.raises(ValueError):
        azure.inject(status=500, reset=True)


def test_nothing_sleeps_for_real():
    start = time.monotonic()
    with FakeAzure(lro_polls=5) as azure:
        c = make_clients(azure)
        azure.inject(method="PUT", path="virtualMachineScaleSets", status=429, retry_after=30)
        create_vmss(c, build_network(c))
        assert 30 in azure.sleeps
    assert time.monotonic() - start < 5
