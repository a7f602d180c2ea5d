"""Microsoft.Compute scale-set VM actions: Run Command, and deleting instances (testing/vm_actions.py)."""

from __future__ import annotations

from .. import vm_actions
from . import VMSS, route


@route("POST", VMSS + r"/virtualMachines/(?P<instance>[^/]+)/runCommand")
def run_command(backend, req, sub, rg, vmss, instance):
    return vm_actions.run_command(backend, req, rg, vmss, instance)


@route("POST", VMSS + r"/delete")
def delete_instances(backend, req, sub, rg, vmss):
    backend.require_rg(rg)
    return vm_actions.delete_instances(backend, req, rg, vmss, list((req.body or {}).get("instanceIds") or []))


@route("DELETE", VMSS + r"/virtualMachines/(?P<instance>[^/]+)")
def delete_instance(backend, req, sub, rg, vmss, instance):
    backend.require_rg(rg)
    return vm_actions.delete_instances(backend, req, rg, vmss, [instance])
