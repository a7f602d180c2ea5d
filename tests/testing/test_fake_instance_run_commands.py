"""Managed Run Commands kept on a scale-set instance, as the fake answers them under the real SDK: the
REST spec's own example bodies (tests/fixtures/azure/compute/VirtualMachineScaleSetVMRunCommand_*.json)
go in and come back, the resource goes with its instance, the rules the model names hold, protected
parameters reach the script only, and the script runs in the VM's attached machine (when a test has one)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest
from azure.core.exceptions import HttpResponseError, ResourceNotFoundError
from fake_azure_support import RG, create_vmss, vmss_body

from azgpu.testing import NotImplementedInFake

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "azure" / "compute"
EXAMPLE = json.loads((FIXTURES / "VirtualMachineScaleSetVMRunCommand_CreateOrUpdate.json").read_text())
SECRET = "c2VjcmV0LW11bmdlLWtleS1ieXRlcw=="


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


class Machines:
    """Stands in for the VMs' operating systems: each script runs in a shell of its own, in a
    directory per VM, with the environment the fake hands over (what RunCommandHandlerLinux does)."""

    def __init__(self, root: Path):
        self.root = root
        self.path = str(root / "machines.sock")
        self.requests: list[dict] = []
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(self.path)
        self.server.listen(8)
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            with conn:
                data = b""
                while chunk := conn.recv(65536):
                    data += chunk
                request = json.loads(data)
                self.requests.append(request)
                reply: dict = {}
                if request["op"] == "run":
                    home = self.root / request["vm"]["computer_name"]
                    home.mkdir(exist_ok=True)
                    done = subprocess.run(["bash", "-c", request["script"]], cwd=home, capture_output=True, text=True,
                                          env={"PATH": os.environ["PATH"], **request["env"]}, timeout=30)
                    reply = {"stdout": done.stdout, "stderr": done.stderr, "rc": done.returncode}
                conn.sendall(json.dumps(reply).encode())

    def close(self) -> None:
        # shutdown wakes the thread blocked in accept(); a bare close would leave it accepting on whatever socket
        # reuses the descriptor number next.
        try:
            self.server.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.server.close()
        self.thread.join(timeout=10)


@pytest.fixture
def machines(tmp_path):
    found = Machines(tmp_path)
    yield found
    found.close()


@pytest.fixture
def vm(azure, clients, network):
    clients.compute.virtual_machine_scale_sets.begin_create_or_update(
        RG, "vmss", vmss_body(network["subnet"], capacity=2)).result()
    return "vmss", "0"


def body(script: str, **extra) -> dict:
    return {"location": "eastus", "properties": {
        "source": {"script": script},
        "parameters": [{"name": "AZGPU_NAME", "value": "demo-d000-0001"}],
        "protectedParameters": [{"name": "AZGPU_SECRET", "value": SECRET}], **extra}}


def ops(clients):
    return clients.compute.virtual_machine_scale_set_vm_run_commands


def test_protected_parameters_reach_the_script_and_nothing_else(azure, clients, vm, machines, tmp_path):
    azure.attach_machines(machines.path)
    script = 'printf "%s\\n" "$AZGPU_NAME"; printf "%s" "$AZGPU_SECRET" | base64 -d > key; echo done >&2; exit 3'
    created = ops(clients).begin_create_or_update(RG, *vm, "join", body(script)).result()
    shown = ops(clients).get(RG, *vm, "join", expand="instanceView")
    view = shown.instance_view
    assert (view.execution_state, view.exit_code, view.output, view.error) == (
        "Failed", 3, "demo-d000-0001\n", "done\n")
    assert (tmp_path / azure.node("vmss/0")["computer"] / "key").read_bytes() == b"secret-munge-key-bytes"
    assert machines.requests[0]["env"] == {"AZGPU_NAME": "demo-d000-0001", "AZGPU_SECRET": SECRET}
    assert machines.requests[0]["vm"]["ip"].startswith("10.0.0.")
    # Azure's view of the VM shows the script and the public parameters, never the protected ones.
    assert created.protected_parameters is None and shown.protected_parameters is None
    assert [p.name for p in shown.parameters] == ["AZGPU_NAME"] and shown.source.script == script
    assert SECRET not in json.dumps([azure.resources(), azure._store.to_json()])
    answers = [json.dumps(r.body) for r in azure.requests if r.method == "GET" or r.status is None]
    assert not any(SECRET in a for a in answers)


def test_the_answer_has_the_rest_examples_shape_without_the_password(azure, clients, vm, machines):
    azure.attach_machines(machines.path)
    request = json.loads(json.dumps(EXAMPLE["parameters"]["runCommand"]))
    request["properties"]["source"] = {"script": "true"}  # the fake runs inline scripts, not a scriptUri
    poller = ops(clients).begin_create_or_update(RG, *vm, "myRunCommand", request)
    first = poller.polling_method()._initial_response.http_response.json()
    example = EXAMPLE["responses"]["201"]["body"]
    assert set(first) == set(example)
    assert set(first["properties"]) == set(example["properties"])  # no runAsPassword, no managed identities
    assert first["properties"]["provisioningState"] == example["properties"]["provisioningState"] == "Creating"
    poller.result()


def test_one_source_only_and_a_location(azure, clients, vm, machines):
    azure.attach_machines(machines.path)
    two = body("true")
    two["properties"]["source"]["commandId"] = "RunShellScript"
    with pytest.raises(HttpResponseError) as err:
        ops(clients).begin_create_or_update(RG, *vm, "join", two)
    assert err.value.error.code == "InvalidParameter"
    nowhere = body("true")
    del nowhere["location"]
    with pytest.raises(HttpResponseError) as err:
        ops(clients).begin_create_or_update(RG, *vm, "join", nowhere)
    assert err.value.error.code == "LocationRequired"


def test_without_machines_the_fake_keeps_the_run_command_and_does_not_invent_a_result(azure, clients, vm):
    # azgpu's binding (deploy/nodes.py): an asyncExecution script with tags, which needs no result.
    binding = {"location": "eastus", "tags": {"azgpu-slurm-node": "demo-d000-0001"},
               "properties": {"source": {"script": "exit 0"}, "asyncExecution": True}}
    made = ops(clients).begin_create_or_update(RG, *vm, "azgpu-slurm-node", binding).result()
    assert made.provisioning_state == "Succeeded" and made.tags == {"azgpu-slurm-node": "demo-d000-0001"}
    # A script whose result a caller reads: no OS ran it, and the instance view says so (no exit code, no output).
    ops(clients).begin_create_or_update(RG, *vm, "join", body("echo joined")).result()
    view = ops(clients).get(RG, *vm, "join", expand="instanceView").instance_view
    assert (view.execution_state, view.exit_code, view.output) == ("Unknown", None, None)
    assert "no simulated VM operating system is attached" in view.execution_message
    assert [c.name for c in ops(clients).list(RG, *vm)] == ["azgpu-slurm-node", "join"]


def test_with_machines_only_inline_scripts_run(azure, clients, vm, machines):
    azure.attach_machines(machines.path)
    with pytest.raises(NotImplementedInFake):
        ops(clients).begin_create_or_update(RG, *vm, "x", _example("CreateOrUpdate")["parameters"]["runCommand"])


def test_an_async_execution_ends_before_its_script_and_shows_it_when_it_has_run(azure, clients, vm, machines,
                                                                                tmp_path):
    # spec, asyncExecution: "provisioning will complete as soon as the script starts and will not wait for
    # script to complete"
    azure.attach_machines(machines.path)
    gate = tmp_path / "gate"
    script = f"while [ ! -e {gate} ]; do sleep 0.05; done; echo ran"
    made = ops(clients).begin_create_or_update(RG, *vm, "bg", body(script, asyncExecution=True)).result()
    assert made.provisioning_state == "Succeeded"
    assert ops(clients).get(RG, *vm, "bg", expand="instanceView").instance_view.execution_state == "Running"
    gate.touch()
    for _ in range(200):
        view = ops(clients).get(RG, *vm, "bg", expand="instanceView").instance_view
        if view.execution_state != "Running":
            break
        time.sleep(0.05)
    assert (view.execution_state, view.exit_code, view.output) == ("Succeeded", 0, "ran\n")


def test_a_failing_script_fails_the_operation_when_asked(azure, clients, vm, machines):
    azure.attach_machines(machines.path)
    with pytest.raises(HttpResponseError) as err:
        failing = body("exit 1", treatFailureAsDeploymentFailure=True)
        ops(clients).begin_create_or_update(RG, *vm, "join", failing).result()
    assert err.value.error.code == "VMExtensionProvisioningError"


def test_deleting_a_vm_stops_its_machine(azure, clients, vm, machines):
    azure.attach_machines(machines.path)
    vm_id = azure.get(f"/subscriptions/{azure.subscription_id}/resourceGroups/{RG}/providers/Microsoft.Compute/"
                      "virtualMachineScaleSets/vmss/virtualMachines/1")["id"]
    clients.compute.virtual_machine_scale_sets.begin_delete_instances(RG, "vmss", {"instanceIds": ["1"]}).result()
    assert machines.requests == [{"op": "gone", "vms": [vm_id]}]


def test_a_deleted_run_command_is_gone(azure, clients, vm, machines):
    azure.attach_machines(machines.path)
    ops(clients).begin_create_or_update(RG, *vm, "join", body("true")).result()
    ops(clients).begin_delete(RG, *vm, "join").result()
    with pytest.raises(HttpResponseError) as err:
        ops(clients).get(RG, *vm, "join")
    assert err.value.status_code == 404
