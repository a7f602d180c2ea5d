"""What a finished long-running operation does to its resource: it succeeds, fails or goes away; a
scale set's instances follow its capacity; actions (Run Command, deleting instances) apply their
results. The Backend calls this when an operation ends, so it needs no model of its own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import instance_run_commands, instances, vm_actions

if TYPE_CHECKING:
    from ..backend import Backend

VMSS_TYPE = "Microsoft.Compute/virtualMachineScaleSets"


def finish(backend: Backend, op: dict) -> None:
    if op.get("on_finish") == "managed_run_command":  # a managed Run Command's result
        instance_run_commands.finish(backend, op)
        return
    if op.get("on_finish"):  # actions: Run Command, instance deletion (vm_actions.py)
        vm_actions.finish(backend, op)
        return
    if op["kind"] == "whatIf":  # writes nothing: its result is already on the operation
        return
    target = backend.find(op["target"])
    if target is None:
        return
    if op["kind"] == "delete" and op["status"] == "Succeeded":
        backend.remove(op["target"])
        return
    if op["kind"] == "deleteInstances":
        if op["status"] == "Succeeded":
            instances.delete_instances(backend, target, op.get("instances", []))
        else:
            for vm in instances.vms(backend, target):
                if vm["instanceId"] in op.get("instances", []):
                    vm["properties"]["provisioningState"] = "Succeeded"
        return
    target.setdefault("properties", {})["provisioningState"] = op["status"]
    if op["status"] == "Succeeded" and target.get("type", "").lower() == VMSS_TYPE.lower():
        instances.reconcile(backend, target)
