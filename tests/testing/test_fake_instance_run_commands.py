"""Managed Run Commands kept on a scale-set instance, as the fake answers them under the real SDK: the
REST spec's own example bodies (tests/fixtures/azure/compute/VirtualMachineScaleSetVMRunCommand_*.json)
go in and come back, the resource goes with its instance, and the rules the model names hold."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from azure.core.exceptions import HttpResponseError, ResourceNotFoundError
from fake_azure_support import RG, create_vmss

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "azure" / "compute"


def _example(name: str) -> dict:
    return json.loads((FIXTURES / f"VirtualMachineScaleSetVMRunCommand_{name}.json").read_text())


def _ops(clients):
    return clients.compute.virtual_machine_scale_set_vm_run_commands


def test_the_spec_examples_round_trip(clients, network):
    create_vmss(clients, network, capacity=2)
    body = _example("CreateOrUpdate")["parameters"]["runCommand"]
    body = {**body, "tags": _example("Get")["responses"]["200"]["body"]["tags"]}
    made = _ops(clients).begin_create_or_update(RG, "vmss", "0", "myRunCommand", body).result()
    assert made.provisioning_state == "Succeeded" and made.location == "westus"
    got = _ops(clients).get(RG, "vmss", "0", "myRunCommand")
    expected = _example("Get")["responses"]["200"]["body"]
    assert got.tags == expected["tags"] and got.type == expected["type"]
    assert got.id.endswith("/virtualMachineScaleSets/vmss/virtualMachines/0/runCommands/myRunCommand")
    assert [c.name for c in _ops(clients).list(RG, "vmss", "0")] == ["myRunCommand"]
    assert list(_ops(clients).list(RG, "vmss", "1")) == []
    _ops(clients).begin_delete(RG, "vmss", "0", "myRunCommand").result()
    with pytest.raises(ResourceNotFoundError):
        _ops(clients).get(RG, "vmss", "0", "myRunCommand")
    _ops(clients).begin_delete(RG, "vmss", "0", "myRunCommand").result()  # 204 when there is none


def test_a_run_command_goes_with_its_instance(clients, network, azure):
    create_vmss(clients, network, capacity=2)
    body = {"location": "eastus", "tags": {"k": "v"}, "properties": {"source": {"script": "exit 0"}}}
    _ops(clients).begin_create_or_update(RG, "vmss", "1", "keep", body).result()
    clients.compute.virtual_machine_scale_sets.begin_delete_instances(RG, "vmss", {"instanceIds": ["1"]}).result()
    assert not [r for r in azure.resources() if "/runcommands/" in r["id"].lower()]
    with pytest.raises(ResourceNotFoundError):
        _ops(clients).get(RG, "vmss", "1", "keep")


def test_a_run_command_needs_an_instance_and_a_location(clients, network):
    create_vmss(clients, network, capacity=1)
    with pytest.raises(ResourceNotFoundError):  # Compute's 404 for an id that is not an instance
        _ops(clients).begin_create_or_update(RG, "vmss", "7", "x", {"location": "eastus"}).result()
    with pytest.raises(HttpResponseError) as err:
        _ops(clients).begin_create_or_update(RG, "vmss", "0", "x", {"properties": {}}).result()
    assert err.value.status_code == 400 and err.value.error.code == "LocationRequired"
