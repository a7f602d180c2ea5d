"""Capacity fallback: --zones and --fallback-locations are tried in order on capacity errors only."""

from __future__ import annotations

import json

import pytest
from deploy_support import NAME, VMSS, assert_cli_error, calls, create_args, ours, request

from azgpu.deploy import CreateOptions, create
from azgpu.deploy.azure_errors import AuthError, CapacityError, PolicyError, QuotaError, RequestError, ThrottledError

VMSS_PUT = {"method": "PUT", "path": "virtualMachineScaleSets"}


def scale_sets(azure) -> list[tuple[str, str, list]]:
    return [(v["name"], v["location"], v.get("zones", [])) for v in azure.resources(type=VMSS)]


def test_zonal_allocation_failure_moves_to_the_next_zone(azure, session):
    azure.inject(**VMSS_PUT, operation_error="ZonalAllocationFailed")
    notices = []
    create(session, request(zone="1"), CreateOptions(zones=["1", "2", "3"], on_notice=notices.append))
    assert scale_sets(azure) == [("c1-vmss000", "eastus", ["2"])]
    assert azure.resources(type=VMSS)[0]["properties"]["provisioningState"] == "Succeeded"
    assert len(notices) == 1 and "zone 2" in notices[0]


def test_zones_are_tried_in_order(azure, session):
    azure.inject(**VMSS_PUT, operation_error="ZonalAllocationFailed", times=2)
    create(session, request(zone="1"), CreateOptions(zones=["1", "2", "3"]))
    zones = [r.body.get("zones") for r in calls(azure, "PUT", path="virtualMachineScaleSets")]
    assert zones == [["1"], ["2"], ["3"]]
    assert scale_sets(azure) == [("c1-vmss000", "eastus", ["3"])]


def test_cli_zones_list_moves_on(azure, cli):
    azure.inject(**VMSS_PUT, operation_error="ZonalAllocationFailed")
    rc, out, err = cli(*create_args(), "--zone", "1", "--zones", "1", "2", "3")
    assert rc == 0, err
    assert scale_sets(azure) == [("c1-vmss000", "eastus", ["2"])]


def test_allocation_failure_moves_to_the_fallback_location(azure, session):
    azure.inject(**VMSS_PUT, operation_error="AllocationFailed")
    result = create(session, request(), CreateOptions(fallback_locations=["westus2"])).as_dict()
    assert result["location"] == "westus2"
    assert scale_sets(azure) == [("c1-vmss000", "westus2", [])]


def test_moving_location_leaves_nothing_behind_in_the_first(azure, session):
    azure.inject(**VMSS_PUT, operation_error="AllocationFailed")
    create(session, request(), CreateOptions(fallback_locations=["westus2"]))
    left = [r["id"] for r in azure.resources() if ours(r, NAME) and r["location"] != "westus2"]
    assert left == []


def test_cli_fallback_locations_move_on(azure, cli):
    azure.inject(**VMSS_PUT, operation_error="AllocationFailed", times=2)
    rc, out, err = cli(*create_args(), "--fallback-locations", "westus2", "westus3")
    assert rc == 0, err
    assert json.loads(out)["location"] == "westus3"
    assert scale_sets(azure) == [("c1-vmss000", "westus3", [])]


def test_last_candidate_failing_raises_the_capacity_error(azure, session):
    azure.inject(**VMSS_PUT, operation_error="AllocationFailed", times=None)
    with pytest.raises(CapacityError):
        create(session, request(), CreateOptions(fallback_locations=["westus2"]))
    assert len(calls(azure, "PUT", path="virtualMachineScaleSets")) == 2


STOPPERS = {
    "quota": ({"status": 409, "code": "QuotaExceeded"}, QuotaError, "QUOTA_EXCEEDED"),  # refused on the PUT itself
    "authorization": ({"status": 403}, AuthError, "NOT_AUTHORIZED"),
    "policy": ({"status": 403, "code": "RequestDisallowedByPolicy"}, PolicyError, "DISALLOWED_BY_POLICY"),
    "throttling": ({"status": 429, "retry_after": 3600}, ThrottledError, "THROTTLED"),
    "bad request": ({"status": 400, "code": "InvalidParameter"}, RequestError, "INVALID_PARAMETER"),
}


@pytest.mark.parametrize("fault, kind, code", STOPPERS.values(), ids=STOPPERS.keys())
def test_non_capacity_errors_do_not_move_on(azure, session, fault, kind, code):
    azure.inject(**VMSS_PUT, **fault)
    with pytest.raises(kind) as info:
        create(session, request(zone="1"), CreateOptions(zones=["1", "2"], fallback_locations=["westus2"]))
    assert info.value.code == code
    assert len(calls(azure, "PUT", path="virtualMachineScaleSets")) == 1
    assert not [r for r in azure.resources() if r.get("location") == "westus2"]


@pytest.mark.parametrize("fault, kind, code", STOPPERS.values(), ids=STOPPERS.keys())
def test_cli_non_capacity_errors_do_not_move_on(azure, cli, fault, kind, code):
    azure.inject(**VMSS_PUT, **fault)
    rc, out, err = cli(*create_args(), "--fallback-locations", "westus2")
    assert_cli_error(rc, err, 1, code)
    assert len(calls(azure, "PUT", path="virtualMachineScaleSets")) == 1
    assert [r.path for r in calls(azure, "PUT") if "westus2" in json.dumps(r.body or {})] == []
