"""Managed Run Commands on scale-set VMs (VirtualMachineScaleSetVMRunCommands_CreateOrUpdate, _Get,
_Delete): a child resource of the VM whose script the VM agent runs.

What the fake enforces, each from its source:
- The body is a located resource (TrackedResource: `location` required) whose source names exactly one
  of script, scriptUri and commandId (REST spec runCommand.json, VirtualMachineRunCommandScriptSource:
  "Use only one of script, scriptUri, commandId"); parameters are {name, value} (RunCommandInputParameter).
- protectedParameters and runAsPassword are never stored nor answered: the REST example
  VirtualMachineScaleSetVMRunCommand_CreateOrUpdate sends runAsPassword (and the managed identities of
  its blobs) and its 200/201 bodies leave them out, and RunCommandHandlerLinux takes protectedParameters
  from the extension's protected settings (internal/handlersettings/types.go), which Azure gives only to
  the VM. Everything else (the script
  itself, the parameters) Azure shows to any reader of the VM (the GET example returns source.script).
- On Linux, named parameters, protected ones included, become environment variables of the script
  (RunCommandHandlerLinux internal/exec/exec.go, SetEnvironmentVariables; Learn run-command-managed:
  "Named Parameters and its values are set to environment config").
- The result is the instance view ($expand=instanceView): executionState, exitCode, the last 4 KB of
  output and error (Learn: "Output and error fields in instanceView is limited to last 4KB"), start
  and end time. With treatFailureAsDeploymentFailure a non-zero exit fails the operation (spec).

The script runs in the VM's operating system, which only a test that attached machines has
(testing/machines.py); without them the fake raises NotImplementedInFake rather than invent an output.
"""

from __future__ import annotations

import copy
from concurrent.futures import ThreadPoolExecutor

from .. import machines
from ..errors import ArmError, NotImplementedInFake, child_not_found, required_location
from ..lro import iso
from ..messages import Request, Response
from ..store import parse_id
from .scale_sets import scale_set_id

TYPE = "Microsoft.Compute/virtualMachineScaleSets/virtualMachines/runCommands"
SECRETS = ("protectedParameters", "runAsPassword")  # kept by the VM only, never stored or answered
# What the example's answers leave out besides: the managed identities the VM uses for its blobs.
UNANSWERED = ("outputBlobManagedIdentity", "errorBlobManagedIdentity")
SOURCES = ("script", "scriptUri", "commandId")
TAIL = 4096
DEFAULT_TIMEOUT = 90 * 60  # Learn run-command-managed: "default timeout of 90 minutes"
NIC_TYPE = "Microsoft.Network/networkInterfaces"  # as scale-set NICs are stored (models/instances.py)
_POOL = ThreadPoolExecutor(max_workers=16, thread_name_prefix="azgpu-machine")


def _vm(backend, rg: str, vmss: str, instance: str) -> dict:
    scale_set = backend.require(scale_set_id(backend, rg, vmss))
    vm = backend.find(f"{scale_set['id']}/virtualMachines/{instance}")
    if vm is None:
        raise ArmError(404, "NotFound", f"The entity was not found in this Azure location. Instance {instance} of "
                                        f"{vmss}.")
    return vm


def _parameters(props: dict, field: str) -> list[dict]:
    value = props.get(field)
    if value is None:
        return []
    if not isinstance(value, list) or not all(
            isinstance(p, dict) and isinstance(p.get("name", ""), str) and isinstance(p.get("value"), str)
            for p in value):
        raise ArmError(400, "InvalidParameter", f"'{field}' must be a list of {{name, value}} strings.",
                       extra={"target": f"properties.{field}"})
    return value


def put(backend, req: Request, rg: str, vmss: str, instance: str, name: str) -> Response:
    vm = _vm(backend, rg, vmss, instance)
    body = req.body if isinstance(req.body, dict) else {}
    required_location(body)
    props = body.get("properties") if isinstance(body.get("properties"), dict) else {}
    source = props.get("source") if isinstance(props.get("source"), dict) else {}
    given = [k for k in SOURCES if source.get(k)]
    if len(given) != 1:
        raise ArmError(400, "InvalidParameter", "Use only one of script, scriptUri, commandId in properties.source "
                                                f"(given: {', '.join(given) or 'none'}).",
                       extra={"target": "properties.source"})
    params = _parameters(props, "parameters") + _parameters(props, "protectedParameters")
    if given != ["script"]:
        raise NotImplementedInFake(req.method, req.path, "the fake runs inline scripts only")
    if any(not p.get("name") for p in params):
        raise NotImplementedInFake(req.method, req.path, "nameless parameters (script arguments)")
    if not backend.store.machines:
        raise NotImplementedInFake(req.method, req.path, "no simulated VM operating system is attached "
                                   "(FakeAzure.attach_machines): the fake cannot run a script inside a VM")
    resource_id = f"{vm['id']}/runCommands/{name}"
    existed = backend.find(resource_id) is not None
    stored = backend.new_resource(resource_id, body)
    for field in SECRETS + UNANSWERED:
        stored["properties"].pop(field, None)
    if isinstance(stored["properties"].get("source"), dict):
        stored["properties"]["source"].pop("scriptUriManagedIdentity", None)
    backend.refuse_while_running(req, stored)
    stored["properties"]["provisioningState"] = "Updating" if existed else "Creating"
    stored["properties"]["instanceView"] = {"executionState": "Pending"}
    backend.put_child(stored)
    op = backend.begin(req, "put", stored, vm["location"])
    op["on_finish"] = "managed_run_command"
    op["started_at"] = iso(backend.now())
    # The secrets live only in this call's closure, as they live only in the VM: never in the state.
    env = {p["name"]: p["value"] for p in params if p["value"] != ""}
    timeout = int(props.get("timeoutInSeconds") or DEFAULT_TIMEOUT)
    backend.run_command_futures[op["id"]] = _POOL.submit(
        machines.run, backend.store.machines, _describe(backend, vm), source["script"], env, timeout)
    return Response(200 if existed else 201, _answer(stored, expand=False), backend.ops.headers(op))


def _describe(backend, vm: dict) -> dict:
    """What the hypervisor knows of a VM: its id, computer name, primary private address and simulated
    hardware (testing/hardware.py: what the node check finds there)."""
    from .vm_actions import node_of

    ip = ""
    for nic in backend.store.under(vm["id"]):
        if nic.get("type", "").lower() != NIC_TYPE.lower():
            continue
        for ipc in (nic.get("properties") or {}).get("ipConfigurations", []):
            props = ipc.get("properties", {})
            if props.get("privateIPAddress") and (props.get("primary") or not ip):
                ip = props["privateIPAddress"]
    node = copy.deepcopy(node_of(backend, vm, backend.find(parse_id(vm["id"]).parent)))
    return {"id": vm["id"], "computer_name": vm["properties"]["osProfile"]["computerName"], "ip": ip, "node": node}


def _tail(text: str) -> str:
    data = text.encode()
    return data[-TAIL:].decode(errors="replace") if len(data) > TAIL else text


def finish(backend, op: dict) -> None:
    resource = backend.find(op["target"])
    future = backend.run_command_futures.pop(op["id"], None)
    if resource is None:  # deleted meanwhile: Learn, "If the script execution is still in progress, execution
        return            # will be terminated"
    if future is None:  # started by another --simulate process: its parameters died with it
        stdout, stderr, rc, message = "", "", -1, "the run command was started in another process of the fake"
    else:
        try:
            stdout, stderr, rc = future.result()
            message = ""
        except machines.MachineError as exc:
            stdout, stderr, rc, message = "", "", -1, str(exc)
    props = resource["properties"]
    props["instanceView"] = {
        "executionState": "Succeeded" if rc == 0 else "Failed", "executionMessage": message, "exitCode": rc,
        "output": _tail(stdout), "error": _tail(stderr), "startTime": op.get("started_at"),
        "endTime": iso(backend.now())}
    props["provisioningState"] = op["status"]
    if rc != 0 and props.get("treatFailureAsDeploymentFailure") and op["status"] == "Succeeded":
        # spec: "any failure in the script will fail the deployment and ProvisioningState will be marked as Failed"
        props["provisioningState"] = op["status"] = "Failed"
        op["error"] = {"code": "VMExtensionProvisioningError",
                       "message": f"Run command {resource['name']} exited with code {rc}."}


def _answer(resource: dict, *, expand: bool) -> dict:
    out = {**resource, "properties": dict(resource["properties"])}
    if not expand:
        out["properties"].pop("instanceView", None)
    return out


def get(backend, req: Request, rg: str, vmss: str, instance: str, name: str) -> Response:
    vm = _vm(backend, rg, vmss, instance)
    resource_id = f"{vm['id']}/runCommands/{name}"
    backend.ops.touch(resource_id)
    resource = backend.find(resource_id)
    if resource is None:
        raise child_not_found(resource_id)
    expand = "instanceview" in (req.query.get("$expand") or "").lower()
    return Response(200, _answer(resource, expand=expand))


def delete(backend, req: Request, rg: str, vmss: str, instance: str, name: str) -> Response:
    vm = _vm(backend, rg, vmss, instance)
    resource = backend.find(f"{vm['id']}/runCommands/{name}")
    if resource is None:
        return Response(204)
    running = backend.ops.running(resource["id"])
    if running is not None:  # Learn: deleting a run command terminates its execution
        backend.run_command_futures.pop(running["id"], None)
        running["status"] = "Canceled"
    backend.remove(resource["id"])
    return Response(200)
