"""Microsoft.Compute scale-set VM actions: Run Command (testing/models/vm_actions.py), and deleting one VM."""

from __future__ import annotations

from ..models import scale_sets, vm_actions
from ..errors import ArmError
from . import VMSS, route

# The REST api-version whose shapes these routes answer in (Compute).
API_VERSION = "2026-04-01"


@route("POST", VMSS + r"/virtualMachines/(?P<instance>[^/]+)/runCommand")
def run_command(backend, req, sub, rg, vmss, instance):
    return vm_actions.run_command(backend, req, rg, vmss, instance)


@route("DELETE", VMSS + r"/virtualMachines/(?P<instance>[^/]+)")
def delete_instance(backend, req, sub, rg, vmss, instance):
    """VirtualMachineScaleSetVMs_Delete: the same operation as deleting that one instance."""
    scale_set = backend.require(scale_sets.scale_set_id(backend, rg, vmss))
    if backend.find(f"{scale_set['id']}/virtualMachines/{instance}") is None:
        raise ArmError(404, "NotFound", f"The entity was not found in this Azure location. Instance {instance} of {vmss}.")
    return scale_sets.begin_delete_instances(backend, req, scale_set, [instance])
