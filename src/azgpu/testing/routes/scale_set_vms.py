"""Microsoft.Compute scale-set VM actions: Run Command (testing/models/vm_actions.py), managed Run
Commands kept on an instance (testing/models/instance_run_commands.py), and deleting one VM."""

from __future__ import annotations

from ..errors import ArmError
from ..models import instance_run_commands, scale_sets, vm_actions
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
        raise ArmError(404, "NotFound",
                       f"The entity was not found in this Azure location. Instance {instance} of {vmss}.")
    return scale_sets.begin_delete_instances(backend, req, scale_set, [instance])


# Managed Run Commands: the spec's examples are Compute 2026-03-01 (tests/fixtures/azure/compute).
RUN_COMMANDS = VMSS + r"/virtualMachines/(?P<instance>[^/]+)/runCommands"
MANAGED_API = "2026-03-01"


@route("PUT", RUN_COMMANDS + r"/(?P<name>[^/]+)", api_version=MANAGED_API)
def put_run_command(backend, req, sub, rg, vmss, instance, name):
    """VirtualMachineScaleSetVMRunCommands_CreateOrUpdate."""
    return instance_run_commands.put(backend, req, rg, vmss, instance, name)


@route("GET", RUN_COMMANDS + r"/(?P<name>[^/]+)", api_version=MANAGED_API)
def get_run_command(backend, req, sub, rg, vmss, instance, name):
    """VirtualMachineScaleSetVMRunCommands_Get (with the execution on $expand=instanceView)."""
    return instance_run_commands.get(backend, req, rg, vmss, instance, name)


@route("GET", RUN_COMMANDS, api_version=MANAGED_API)
def list_run_commands(backend, req, sub, rg, vmss, instance):
    """VirtualMachineScaleSetVMRunCommands_List."""
    return instance_run_commands.list_(backend, req, rg, vmss, instance)


@route("DELETE", RUN_COMMANDS + r"/(?P<name>[^/]+)", api_version=MANAGED_API)
def delete_run_command(backend, req, sub, rg, vmss, instance, name):
    """VirtualMachineScaleSetVMRunCommands_Delete."""
    return instance_run_commands.delete(backend, req, rg, vmss, instance, name)
