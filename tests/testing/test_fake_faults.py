"""Injected faults under the SDK's real retry policy, and sleeps that never happen for real."""

from __future__ import annotations

import json
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


def test_resource_manager_throttling_answers_as_arm_does(azure, clients):
    azure.inject(method="GET", status=429, retry_after=3, times=None)
    with pytest.raises(HttpResponseError) as err:
        clients.resource.resource_groups.get(RG)
    headers = err.value.response.headers
    assert (err.value.status_code, err.value.error.code, headers["Retry-After"]) == (429,
                                                                                     "SubscriptionRequestsThrottled",
                                                                                     "3")
    assert headers["x-ms-ratelimit-remaining-subscription-reads"] == "0"
    assert "operation 'GET/SUBSCRIPTIONS/RESOURCEGROUPS' exceeded" in err.value.error.message


def test_a_write_throttled_by_resource_manager_counts_against_writes(azure, clients):
    azure.inject(method="PUT", status=429, retry_after=3600, times=None)
    with pytest.raises(HttpResponseError) as err:
        clients.resource.resource_groups.create_or_update(RG, {"location": "eastus"})
    assert err.value.response.headers["x-ms-ratelimit-remaining-subscription-writes"] == "0"


def test_compute_throttling_answers_as_compute_does(azure, clients):
    # Learn, "Troubleshooting API throttling errors": OperationNotAllowed, unwrapped, TooManyRequests in details.
    azure.inject(method="GET", path="/skus", status=429, retry_after=3600, times=None)
    with pytest.raises(HttpResponseError) as err:
        list(clients.compute.resource_skus.list())
    body = err.value.response.json()
    assert "error" not in body and body["code"] == "OperationNotAllowed"
    [detail] = body["details"]
    assert (detail["code"], detail["target"]) == ("TooManyRequests", "HighCostGet")
    assert json.loads(detail["message"])["operationGroup"] == "HighCostGet"
    assert err.value.response.headers["x-ms-ratelimit-remaining-resource"] == "Microsoft.Compute/HighCostGet;0"
    assert err.value.response.headers["Retry-After"] == "3600"


def test_throttle_picks_the_shape_whatever_the_path(azure, clients):
    azure.inject(method="GET", status=429, throttle="compute", retry_after=3600, times=None)
    with pytest.raises(HttpResponseError) as err:
        clients.resource.resource_groups.get(RG)
    assert err.value.response.json()["details"][0]["code"] == "TooManyRequests"


def test_code_sets_the_error_code_of_an_answer(azure, clients):
    azure.inject(method="PUT", status=409, code="SkuNotAvailable")
    with pytest.raises(HttpResponseError) as err:
        clients.resource.resource_groups.create_or_update(RG, {"location": "eastus"})
    assert (err.value.status_code, err.value.error.code) == (409, "SkuNotAvailable")


def test_body_replays_an_answer_exactly(azure, clients):
    body = {"error": {"code": "RequestDisallowedByPolicy", "message": "denied", "target": "x"}}
    azure.inject(method="PUT", status=403, body=body, headers={"x-ms-failure-cause": "gateway"})
    with pytest.raises(HttpResponseError) as err:
        clients.resource.resource_groups.create_or_update(RG, {"location": "eastus"})
    assert err.value.response.json() == body and err.value.response.headers["x-ms-failure-cause"] == "gateway"


@pytest.mark.parametrize("code", ["SkuNotAvailable", "QuotaExceeded", "OperationNotAllowed", "ResourceGroupNotFound",
                                  "RequestDisallowedByPolicy"])
def test_errors_azure_answers_on_the_request_cannot_fail_an_operation(azure, code):
    with pytest.raises(ValueError, match=f"inject\\(status=\\d+, code='{code}'\\)"):
        azure.inject(method="PUT", operation_error=code)


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
