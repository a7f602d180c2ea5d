"""--no-wait returns once Azure accepted the scale sets; `provision wait` (or a re-run) follows them;
--timeout ends in TIMEOUT (exit 1). Operations here take several polls of virtual time."""

from __future__ import annotations

import json

import pytest
from deploy_support import VMSS, assert_cli_error, calls, cluster_args, create_args, request

from azgpu.deploy import CreateOptions, create
from azgpu.deploy.lifecycle import wait
from azgpu.errors import AzureError
from azgpu.testing import FakeAzure

POLLS = 3


@pytest.fixture
def azure():
    """Each operation finishes only after POLLS polls (or GETs of its resource)."""
    with FakeAzure(lro_polls=POLLS) as fake:
        yield fake


def states(azure) -> set[str]:
    return {v["properties"]["provisioningState"] for v in azure.resources(type=VMSS)}


def test_no_wait_returns_with_scale_sets_accepted(azure, cli):
    rc, out, err = cli(*create_args(nodes=4), "--max-ib-domain", 2, "--no-wait")
    assert rc == 0, err
    result = json.loads(out)
    assert {r["name"]: r["state"] for r in result["resources"]} == {
        "c1-nsg": "succeeded", "c1-natgw-ip": "succeeded", "c1-natgw": "succeeded", "c1-vnet": "succeeded",
        "c1-vmss000": "accepted", "c1-vmss001": "accepted"}
    assert states(azure) == {"Creating"}


def test_wait_after_no_wait_converges(azure, cli):
    cli(*create_args(nodes=4), "--max-ib-domain", 2, "--no-wait")
    rc, out, err = cli("wait", *cluster_args())
    assert rc == 0, err
    assert states(azure) == {"Succeeded"}
    status = json.loads(out)
    assert [(s["name"], s["succeeded"]) for s in status["scale_sets"]] == [("c1-vmss000", 2), ("c1-vmss001", 2)]


def test_wait_sleeps_virtually_between_checks(azure, session):
    create(session, request(), CreateOptions(wait=False))
    before = len(azure.sleeps)
    wait(session, "c1", "rg1", interval=5)
    assert azure.sleeps[before:] and set(azure.sleeps[before:]) == {5}


def test_rerun_after_no_wait_follows_instead_of_putting_again(azure, session):
    create(session, request(), CreateOptions(wait=False))
    before = len(azure.requests)
    result = create(session, request()).as_dict()
    assert calls(azure, "PUT", since=before) == []
    assert states(azure) == {"Succeeded"}
    assert {r["state"] for r in result["resources"] if r["stage"] == "scale-set"} == {"succeeded"}


def test_wait_reports_a_failed_scale_set(azure, cli):
    azure.inject(method="PUT", path="virtualMachineScaleSets", operation_error="AllocationFailed")
    assert cli(*create_args(), "--no-wait")[0] == 0
    rc, out, err = cli("wait", *cluster_args())
    assert_cli_error(rc, err, 1, "PROVISIONING_FAILED", "provision create")


class TestTimeout:
    @pytest.fixture
    def azure(self):
        # Far more polls than a tiny timeout allows; few enough that the abandoned poller threads
        # finish (virtually) before the fake stops.
        with FakeAzure(lro_polls=40) as fake:
            yield fake

    def test_create_timeout_exits_1_with_timeout(self, azure, cli):
        rc, out, err = cli(*create_args(), "--timeout", "0.000001")
        assert_cli_error(rc, err, 1, "TIMEOUT", "provision wait")

    def test_wait_timeout_exits_1_with_timeout(self, azure, cli):
        assert cli(*create_args(), "--no-wait")[0] == 0
        rc, out, err = cli("wait", *cluster_args(), "--timeout", "0.000001")
        assert_cli_error(rc, err, 1, "TIMEOUT", "provision wait")
        assert states(azure) == {"Creating"}

    def test_timeout_error_is_an_azure_error(self, azure, session):
        with pytest.raises(AzureError) as info:
            create(session, request(), CreateOptions(timeout=1e-6))
        assert info.value.code == "TIMEOUT" and info.value.exit_code == 1
