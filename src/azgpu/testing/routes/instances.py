"""Microsoft.Compute scale-set instances: list, get, instance view and deleting one (models/instances.py,
with the scale set's checks in models/scale_sets.py)."""

from __future__ import annotations

from ..errors import ArmError
from ..models import instances, scale_sets, vertical_connect
from . import VMSS, Response, page, route

# The REST api-version whose shapes these routes answer in (Compute).
API_VERSION = "2026-04-01"


def _vmss_id(backend, rg: str, name: str) -> str:
    return scale_sets.scale_set_id(backend, rg, name)


def _vm(backend, rg: str, vmss: str, instance: str) -> dict:
    return scale_sets.vm(backend, backend.require(_vmss_id(backend, rg, vmss)), instance, vmss)


def _expand(req) -> bool:
    return "instanceview" in (req.query.get("$expand") or "").lower()


@route("GET", VMSS + r"/virtualMachines")
def list_vms(backend, req, sub, rg, vmss):
    vms = instances.vms(backend, backend.require(_vmss_id(backend, rg, vmss)))
    return page([scale_sets.with_view(vm, backend) for vm in vms] if _expand(req) else vms)


@route("GET", VMSS + r"/virtualMachines/(?P<instance>[^/]+)")
def get_vm(backend, req, sub, rg, vmss, instance):
    vm = _vm(backend, rg, vmss, instance)
    return Response(200, scale_sets.with_view(vm, backend) if _expand(req) else vm)


@route("GET", VMSS + r"/virtualMachines/(?P<instance>[^/]+)/instanceView")
def vm_instance_view(backend, req, sub, rg, vmss, instance):
    vm = _vm(backend, rg, vmss, instance)
    return Response(200, {**instances.instance_view(vm), **vertical_connect.instance_view(backend.store, vm)})


@route("DELETE", VMSS + r"/virtualMachines/(?P<instance>[^/]+)")
def delete_instance(backend, req, sub, rg, vmss, instance):
    """VirtualMachineScaleSetVMs_Delete: the same operation as deleting that one instance."""
    scale_set = backend.require(scale_sets.scale_set_id(backend, rg, vmss))
    if backend.find(f"{scale_set['id']}/virtualMachines/{instance}") is None:
        raise ArmError(404, "NotFound",
                       f"The entity was not found in this Azure location. Instance {instance} of {vmss}.")
    return scale_sets.begin_delete_instances(backend, req, scale_set, [instance])
