"""Microsoft.Compute managed Run Commands kept on a scale-set instance (models/instance_run_commands.py)."""

from __future__ import annotations

from ..models import instance_run_commands
from . import VMSS, route

# The REST api-version whose shapes these routes answer in: the spec's examples of managed Run Commands are
# Compute 2026-03-01 (tests/fixtures/azure/compute).
API_VERSION = "2026-03-01"
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
