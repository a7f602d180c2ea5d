"""Microsoft.Compute scale-set VM actions: Run Command (testing/models/vm_actions.py), managed Run Commands
(testing/models/run_commands.py), and deleting one VM."""

from __future__ import annotations

from ..models import run_commands, scale_sets, vm_actions
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


RUN_COMMAND = VMSS + r"/virtualMachines/(?P<instance>[^/]+)/runCommands/(?P<name>[^/]+)"


@route("PUT", RUN_COMMAND)
def put_run_command(backend, req, sub, rg, vmss, instance, name):
    """VirtualMachineScaleSetVMRunCommands_CreateOrUpdate (REST spec example
    VirtualMachineScaleSetVMRunCommand_CreateOrUpdate)."""
    return run_commands.put(backend, req, rg, vmss, instance, name)


@route("GET", RUN_COMMAND)
def get_run_command(backend, req, sub, rg, vmss, instance, name):
    """VirtualMachineScaleSetVMRunCommands_Get, with the instance view on $expand=instanceView."""
    return run_commands.get(backend, req, rg, vmss, instance, name)


@route("DELETE", RUN_COMMAND)
def delete_run_command(backend, req, sub, rg, vmss, instance, name):
    """VirtualMachineScaleSetVMRunCommands_Delete."""
    return run_commands.delete(backend, req, rg, vmss, instance, name)
