"""Managed Run Commands kept on a scale-set instance (VirtualMachineScaleSetVMRunCommands; REST spec
Compute 2026-03-01, examples runCommandExamples/VirtualMachineScaleSetVMRunCommand_*.json, copied in
tests/fixtures/azure/compute).

A child resource of the instance with a location and tags (the _Get example): PUT creates or
replaces it (201 Creating, then Succeeded), GET reads it, DELETE removes it (202 with a monitor; 204
when there is none), and it goes with its instance. The fake keeps the resource and does not run
its script: the node sandbox runs azgpu's node check only (vm_actions.py).

Rules, each with its source:
- the instance must exist: Compute answers 404 NotFound for an instance that is not one, as for
  every instance operation (scale_sets.vm);
- `location` is required (the spec's VirtualMachineRunCommand marks it required; ARM answers a body
  without one 400 LocationRequired).
"""

from __future__ import annotations

import copy

from ..errors import ArmError, child_not_found
from ..messages import Response, page
from . import scale_sets

TYPE = "Microsoft.Compute/virtualMachineScaleSets/virtualMachines/runCommands"
BODY_KEYS = ("location", "tags", "properties")


def _vm(backend, rg: str, vmss: str, instance: str) -> dict:
    scale_set = backend.require(scale_sets.scale_set_id(backend, rg, vmss))
    return scale_sets.vm(backend, scale_set, instance, vmss)


def put(backend, req, rg: str, vmss: str, instance: str, name: str) -> Response:
    vm = _vm(backend, rg, vmss, instance)
    body = req.body or {}
    if not body.get("location"):
        raise ArmError(400, "LocationRequired", "The location property is required for this definition.")
    resource_id = f"{vm['id']}/runCommands/{name}"
    existed = backend.find(resource_id) is not None
    resource = {"id": resource_id, "name": name, "type": TYPE,
                **{k: copy.deepcopy(body[k]) for k in BODY_KEYS if k in body}}
    resource["location"] = str(resource["location"]).replace(" ", "").lower()
    resource.setdefault("properties", {})
    return backend.accepted_put(req, resource, existed, vm["location"])


def get(backend, req, rg: str, vmss: str, instance: str, name: str) -> Response:
    vm = _vm(backend, rg, vmss, instance)
    resource_id = f"{vm['id']}/runCommands/{name}"
    if backend.find(resource_id) is None:
        raise child_not_found(resource_id)
    return Response(200, backend.get_for_read(resource_id))


def list_(backend, req, rg: str, vmss: str, instance: str) -> Response:
    vm = _vm(backend, rg, vmss, instance)
    return page([r for r in backend.store.under(vm["id"]) if r.get("type", "").lower() == TYPE.lower()])


def delete(backend, req, rg: str, vmss: str, instance: str, name: str) -> Response:
    vm = _vm(backend, rg, vmss, instance)
    resource = backend.find(f"{vm['id']}/runCommands/{name}")
    if resource is None:
        return Response(204)
    return backend.accepted_delete(req, resource, vm["location"])
