"""Ctrl-C during create leaves a state that a re-run continues, without a second PUT."""

from __future__ import annotations

import pytest

from azgpu.deploy import create, deployer
from azgpu.deploy.session import Session
from azgpu.request import build_request
from azgpu.testing import FakeAzure, FakeCredential

VMSS = "virtualMachineScaleSets"


def _request(ssh_key):
    return build_request(profile="nd-a100-v4", name="intr", resource_group="rg-intr", location="eastus", nodes=3,
                         ssh_key=ssh_key)


def _interrupt_after_accepted_put(patch):
    original = deployer.Deployer.begin_put

    def put_then_ctrl_c(self, r, **kw):
        if r.stage != "scale-set":
            return original(self, r, **kw)
        # Azure accepts the scale set, then the user presses Ctrl-C and the process (with its poller
        # thread) is gone: no poller keeps polling, as after a real exit.
        original(self, r, wait=False)
        raise KeyboardInterrupt

    patch.setattr(deployer.Deployer, "begin_put", put_then_ctrl_c)


def test_interrupt_propagates_as_keyboard_interrupt(azure, session, monkeypatch, ssh_key):
    _interrupt_after_accepted_put(monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        create(session, _request(ssh_key))


@pytest.fixture
def slow_azure():
    """Operations that need several polls, so the re-run finds the scale set still Creating."""
    with FakeAzure(lro_polls=4) as fake:
        yield fake


def test_rerun_after_interrupt_follows_the_accepted_operation(slow_azure, monkeypatch, ssh_key):
    azure = slow_azure
    session = Session(azure.subscription_id, FakeCredential(), polling_interval=0, sleep=azure.sleep)
    with monkeypatch.context() as m:
        _interrupt_after_accepted_put(m)
        with pytest.raises(KeyboardInterrupt):
            create(session, _request(ssh_key))
    [vmss] = azure.resources(type="Microsoft.Compute/virtualMachineScaleSets")
    assert vmss["properties"]["provisioningState"] == "Creating"
    assert session.cancelled.is_set()  # Ctrl-C ended every wait of that session

    # The re-run is a new process, with a session of its own.
    session = Session(azure.subscription_id, FakeCredential(), polling_interval=0, sleep=azure.sleep)
    result = create(session, _request(ssh_key)).as_dict()

    puts = [r for r in azure.requests if r.method == "PUT" and r.path.endswith(f"/{VMSS}/intr-vmss000")]
    assert len(puts) == 1, "the re-run must follow the accepted operation, not send a second PUT"
    assert {r["name"]: r["state"] for r in result["resources"]}["intr-vmss000"] == "succeeded"
    vmss = azure.resources(type="Microsoft.Compute/virtualMachineScaleSets")
    assert [v["properties"]["provisioningState"] for v in vmss] == ["Succeeded"]
