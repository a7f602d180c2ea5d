"""Managed Run Commands kept on a scale-set instance (VirtualMachineScaleSetVMRunCommands_CreateOrUpdate,
_Get, _List, _Delete; REST spec Compute 2026-03-01, examples runCommandExamples/
VirtualMachineScaleSetVMRunCommand_*.json, copied in tests/fixtures/azure/compute).

A child resource of the instance with a location and tags (the _Get example) whose script the VM
agent runs. azgpu uses two: the binding (deploy/nodes.py: tags name the Slurm node a VM carries; an
asyncExecution script that does nothing) and the node bootstrap (slurm/bootstrap.py: a script with
the munge key as a protected parameter). PUT creates or replaces it (201 Creating, then Succeeded),
GET reads it (with $expand=instanceView its execution), LIST lists the instance's, DELETE removes it
(202 with a monitor; 204 when there is none), and it goes with its instance.

What the fake enforces, each from its source:
- the instance must exist: Compute answers 404 NotFound for an instance that is not one, as for
  every instance operation (scale_sets.vm);
- `location` is required (the spec's VirtualMachineRunCommand is a TrackedResource; ARM answers a body
  without one 400 LocationRequired);
- the source names exactly one of script, scriptUri and commandId (runCommand.json,
  VirtualMachineRunCommandScriptSource: "Use only one of script, scriptUri, commandId"); parameters
  are {name, value} (RunCommandInputParameter);
- protectedParameters and runAsPassword are never stored nor answered: the CreateOrUpdate example
  sends runAsPassword (and the managed identities of its blobs) and its 200/201 bodies leave them out,
  and RunCommandHandlerLinux takes protectedParameters from the extension's protected settings
  (internal/handlersettings/types.go), which Azure gives only to the VM. Everything else (the script,
  the parameters) Azure shows to any reader of the VM (the _Get example returns source.script);
- on Linux, named parameters, protected ones included, become environment variables of the script
  (RunCommandHandlerLinux internal/exec/exec.go, SetEnvironmentVariables; Learn run-command-managed:
  "Named Parameters and its values are set to environment config");
- the result is the instance view: executionState, exitCode, the last 4 KB of output and error
  (Learn: "Output and error fields in instanceView is limited to last 4KB"), start and end time. With
  treatFailureAsDeploymentFailure a non-zero exit fails the operation (spec); with asyncExecution
  "provisioning will complete as soon as the script starts and will not wait for script to complete"
  (spec), and the instance view shows the execution when it ends;
- deleting a Run Command whose script still runs ends the execution (Learn run-command-managed).

Who runs the script: the VM's operating system, which only a test that attached machines has
(testing/machines.py). Without one the fake keeps the resource and never pretends it ran: its instance
view says executionState Unknown with why, so a caller that needs the script's result sees that it
has none (azgpu's binding needs none). With machines, an inline script runs there; a scriptUri or
commandId raises NotImplementedInFake (the fake has no blobs or built-in commands to run).
"""

from __future__ import annotations

import copy
from concurrent.futures import ThreadPoolExecutor

from .. import machines
from ..errors import ArmError, NotImplementedInFake, child_not_found
from ..lro import iso
from ..messages import Response, page
from ..store import NIC_TYPE, parse_id
from . import scale_sets

TYPE = "Microsoft.Compute/virtualMachineScaleSets/virtualMachines/runCommands"
BODY_KEYS = ("location", "tags", "properties")
SECRETS = ("protectedParameters", "runAsPassword")  # kept by the VM only, never stored or answered
# What the example's answers leave out besides: the managed identities the VM uses for its blobs.
UNANSWERED = ("outputBlobManagedIdentity", "errorBlobManagedIdentity")
SOURCES = ("script", "scriptUri", "commandId")
TAIL = 4096
DEFAULT_TIMEOUT = 90 * 60  # Learn run-command-managed: "default timeout of 90 minutes"
NOT_RUN = ("no simulated VM operating system is attached (FakeAzure.attach_machines): the fake kept the Run "
           "Command and did not run its script")
_POOL = ThreadPoolExecutor(max_workers=16, thread_name_prefix="azgpu-machine")


def _vm(backend, rg: str, vmss: str, instance: str) -> dict:
    scale_set = backend.require(scale_sets.scale_set_id(backend, rg, vmss))
    return scale_sets.vm(backend, scale_set, instance, vmss)


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


def put(backend, req, rg: str, vmss: str, instance: str, name: str) -> Response:
    vm = _vm(backend, rg, vmss, instance)
    body = req.body if isinstance(req.body, dict) else {}
    if not body.get("location"):
        raise ArmError(400, "LocationRequired", "The location property is required for this definition.")
    props = body.get("properties") if isinstance(body.get("properties"), dict) else {}
    source = props.get("source") if isinstance(props.get("source"), dict) else {}
    given = [k for k in SOURCES if source.get(k)]
    if len(given) != 1:
        raise ArmError(400, "InvalidParameter", "Use only one of script, scriptUri, commandId in properties.source "
                                                f"(given: {', '.join(given) or 'none'}).",
                       extra={"target": "properties.source"})
    params = _parameters(props, "parameters") + _parameters(props, "protectedParameters")
    attached = backend.store.machines
    if attached and given != ["script"]:
        raise NotImplementedInFake(req.method, req.path, "the fake runs inline scripts only")
    if attached and any(not p.get("name") for p in params):
        raise NotImplementedInFake(req.method, req.path, "nameless parameters (script arguments)")
    resource_id = f"{vm['id']}/runCommands/{name}"
    existed = backend.find(resource_id) is not None
    stored = {"id": resource_id, "name": name, "type": TYPE,
              **{k: copy.deepcopy(body[k]) for k in BODY_KEYS if k in body}}
    stored["location"] = str(stored["location"]).replace(" ", "").lower()
    stored["properties"] = copy.deepcopy(props)
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
    if attached:
        # The secrets live only in this call's closure, as they live only in the VM: never in the state.
        env = {p["name"]: p["value"] for p in params if p["value"] != ""}
        timeout = int(props.get("timeoutInSeconds") or DEFAULT_TIMEOUT)
        future = _POOL.submit(machines.run, attached, _describe(backend, vm), source["script"], env, timeout)
        # asyncExecution: the operation does not wait for the script; the instance view shows it when it ends.
        backend.run_command_futures[resource_id if props.get("asyncExecution") else op["id"]] = future
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


def _view(future, started: str | None, now: str) -> dict:
    """The instance view of an execution that ended (future: the machine's answer)."""
    if future is None:  # started by another --simulate process: its parameters died with it
        stdout, stderr, rc, message = "", "", -1, "the run command was started in another process of the fake"
    else:
        try:
            stdout, stderr, rc = future.result()
            message = ""
        except machines.MachineError as exc:
            stdout, stderr, rc, message = "", "", -1, str(exc)
    return {"executionState": "Succeeded" if rc == 0 else "Failed", "executionMessage": message, "exitCode": rc,
            "output": _tail(stdout), "error": _tail(stderr), "startTime": started, "endTime": now}


def finish(backend, op: dict) -> None:
    resource = backend.find(op["target"])
    future = backend.run_command_futures.pop(op["id"], None)
    if resource is None:  # deleted meanwhile: Learn, "If the script execution is still in progress, execution
        return            # will be terminated"
    props = resource["properties"]
    props["provisioningState"] = op["status"]
    if op["status"] != "Succeeded":
        return
    if not backend.store.machines:
        props["instanceView"] = {"executionState": "Unknown", "executionMessage": NOT_RUN}
        return
    if props.get("asyncExecution"):
        props["instanceView"] = {"executionState": "Running", "startTime": op.get("started_at")}
        return
    props["instanceView"] = view = _view(future, op.get("started_at"), iso(backend.now()))
    if view["exitCode"] != 0 and props.get("treatFailureAsDeploymentFailure"):
        # spec: "any failure in the script will fail the deployment and ProvisioningState will be marked as Failed"
        props["provisioningState"] = op["status"] = "Failed"
        op["error"] = {"code": "VMExtensionProvisioningError",
                       "message": f"Run command {resource['name']} exited with code {view['exitCode']}."}


def _answer(resource: dict, *, expand: bool) -> dict:
    out = {**resource, "properties": dict(resource["properties"])}
    if not expand:
        out["properties"].pop("instanceView", None)
    return out


def get(backend, req, rg: str, vmss: str, instance: str, name: str) -> Response:
    vm = _vm(backend, rg, vmss, instance)
    resource_id = f"{vm['id']}/runCommands/{name}"
    backend.ops.touch(resource_id)
    resource = backend.find(resource_id)
    if resource is None:
        raise child_not_found(resource_id)
    running = backend.run_command_futures.get(resource_id)
    if running is not None and running.done():  # an asyncExecution script that ended
        backend.run_command_futures.pop(resource_id)
        view = resource["properties"].get("instanceView") or {}
        resource["properties"]["instanceView"] = _view(running, view.get("startTime"), iso(backend.now()))
        backend.dirty = True
    expand = "instanceview" in (req.query.get("$expand") or "").lower()
    return Response(200, _answer(resource, expand=expand))


def list_(backend, req, rg: str, vmss: str, instance: str) -> Response:
    vm = _vm(backend, rg, vmss, instance)
    return page([_answer(r, expand=False) for r in backend.store.under(vm["id"])
                 if r.get("type", "").lower() == TYPE.lower()])


def delete(backend, req, rg: str, vmss: str, instance: str, name: str) -> Response:
    vm = _vm(backend, rg, vmss, instance)
    resource = backend.find(f"{vm['id']}/runCommands/{name}")
    if resource is None:
        return Response(204)
    # Learn run-command-managed: deleting a Run Command ends its execution. The fake forgets it (the machine's
    # script is left to end on its own: its answer goes nowhere).
    backend.run_command_futures.pop(resource["id"], None)
    running = backend.ops.running(resource["id"])
    if running is not None and running["kind"] == "put":
        backend.run_command_futures.pop(running["id"], None)
        running["status"] = "Canceled"
    return backend.accepted_delete(req, resource, vm["location"])
