"""A write Azure refuses (409) because another operation on the resource is still running: azgpu
follows that operation, as it does for a resource it finds Creating, and writes only what is
still needed afterwards. Azure's answers: Compute OperationNotAllowed, Network
AnotherOperationInProgress (the fake answers both as Azure does)."""

from __future__ import annotations

import pytest
from deploy_support import NAME, RG, VMSS, calls, request

import azgpu
from azgpu.deploy import CreateOptions, create
from azgpu.deploy.deployer import Deployer
from azgpu.deploy.lifecycle import destroy
from azgpu.deploy.session import Session
from azgpu.testing import FakeAzure, FakeCredential


@pytest.fixture
def slow():
    """Operations that need several polls, so a second writer meets the first one still running."""
    with FakeAzure(lro_polls=4) as fake:
        yield fake, Session(fake.subscription_id, FakeCredential(), polling_interval=0, sleep=fake.sleep)


def _vmss_puts(azure) -> list:
    return [r.status for r in calls(azure, "PUT", path=f"/virtualMachineScaleSets/{NAME}-vmss000")]


def _plan(req):
    return azgpu.build_plan(azgpu.validate(req, command="create"))


def test_a_put_refused_while_the_same_model_is_being_created_follows_it(slow):
    azure, session = slow
    create(session, request(), CreateOptions(wait=False))  # another run left the scale set Creating
    # A listing that has not caught up yet (or another client): the scale set looks absent.
    events = Deployer(session, _plan(request()), RG).deploy(listed=[])
    assert _vmss_puts(azure) == [201, 409]  # refused, followed, not PUT again: the model was the same
    assert {e.name: e.state for e in events.values()}[f"{NAME}-vmss000"] == "succeeded"
    [vmss] = azure.resources(type=VMSS)
    assert vmss["properties"]["provisioningState"] == "Succeeded"


def test_after_following_it_puts_what_is_still_different(slow):
    azure, session = slow
    create(session, request(nodes=2), CreateOptions(wait=False))
    Deployer(session, _plan(request(nodes=3)), RG).deploy(listed=[])
    assert _vmss_puts(azure) == [201, 409, 200]  # the running create ended, then the capacity change went in
    [vmss] = azure.resources(type=VMSS)
    assert (vmss["properties"]["provisioningState"], vmss["sku"]["capacity"]) == ("Succeeded", 3)


def test_network_refused_while_running_is_followed_too(slow):
    azure, session = slow
    create(session, request())
    vnet = session.network.virtual_networks.get(RG, f"{NAME}-vnet")
    session.network.virtual_networks.begin_create_or_update(RG, f"{NAME}-vnet", vnet,
                                                            polling=False)  # someone updates it
    Deployer(session, _plan(request()), RG).deploy(listed=[])
    statuses = [r.status for r in calls(azure, "PUT", path=f"/virtualNetworks/{NAME}-vnet")]
    assert statuses == [201, 200, 409]  # ours, theirs, ours refused and then followed instead of put again
    assert azure.get(vnet.id)["properties"]["provisioningState"] == "Succeeded"


def test_destroy_while_the_create_still_runs_waits_for_it_then_deletes(slow):
    azure, session = slow
    create(session, request(), CreateOptions(wait=False))
    result = destroy(session, NAME, RG)
    deletes = [r.status for r in calls(azure, "DELETE", path=f"/virtualMachineScaleSets/{NAME}-vmss000")]
    assert deletes == [409, 202]  # refused while Creating, deleted once it ended
    assert azure.resources(resource_group=RG) == [] and result["resource_group_deleted"] is True


def test_a_provisioning_state_that_never_ends_is_an_error_not_an_endless_wait(slow, monkeypatch):
    """destroy follows an operation Azure says is still running on a resource (409, then reads until a terminal
    provisioning state): one that never ends was followed for ever (destroy has no --timeout). Now at most
    MAX_SETTLE_READS reads, then OPERATION_IN_PROGRESS with the remedy."""
    import threading

    import requests

    from azgpu.deploy import arm
    from azgpu.errors import AzgpuError

    azure, session = slow
    monkeypatch.setattr(arm, "MAX_SETTLE_READS", 5, raising=False)
    create(session, request(), CreateOptions(wait=False))
    (vmss,) = azure.resources(type=VMSS)
    body = requests.get(f"{arm.BASE}{vmss['id']}", params={"api-version": "2026-03-01"}, timeout=5).json()
    body["properties"]["provisioningState"] = "Updating"
    azure.inject(method="GET", path=f"virtualMachineScaleSets/{NAME}-vmss000$", status=200, body=body, times=None)
    outcome: list = []

    def run() -> None:
        try:
            destroy(session, NAME, RG)
        except AzgpuError as exc:
            outcome.append(exc)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(60)
    assert not worker.is_alive(), "destroy still waiting"
    (error,) = outcome
    assert error.code == "OPERATION_IN_PROGRESS" and "Updating" in error.message and error.remedy
    assert len(calls(azure, "GET", path=f"virtualMachineScaleSets/{NAME}-vmss000")) <= 5 + 3
