"""Faults of the simulated node hardware that the health gate must find: broken GPUs and InfiniBand
ports on an existing instance or the next ones created, racks whose NVLink fabric is incomplete,
and a scale set whose fabric is slow. node_fault_table.py says what each fault does to the node;
this module finds the node a test names and records the fault in the store.
"""

from __future__ import annotations

from typing import Any

from . import node_fault_table
from .backend import Backend
from .models import vertical_connect
from .models.vm_actions import node_of
from .store import parse_id

VMSS_TYPE = "Microsoft.Compute/virtualMachineScaleSets"
VM_TYPE = "Microsoft.Compute/virtualMachineScaleSets/virtualMachines"


def vm_id(backend: Backend, instance: str) -> str:
    """The id of the one scale-set instance named by its resource id, 'SCALESET/INSTANCE_ID', or its
    computer name; KeyError otherwise."""
    vms = backend.store.of_type(VM_TYPE)
    if instance.startswith("/subscriptions/"):
        found = [vm for vm in vms if vm["id"].lower() == instance.lower()]
    elif "/" in instance:
        vmss, _, number = instance.partition("/")
        found = [vm for vm in vms if parse_id(vm["id"]).names[0].lower() == vmss.lower()
                 and vm["instanceId"] == number]
    else:
        found = [vm for vm in vms if vm["properties"]["osProfile"]["computerName"].lower() == instance.lower()
                 or vm["name"].lower() == instance.lower()]
    if len(found) != 1:
        raise KeyError(f"no single scale-set instance {instance!r} ({len(found)} match)")
    return found[0]["id"]


def node(backend: Backend, instance: str) -> dict:
    found = backend.store.nodes.get(vm_id(backend, instance).lower())
    if found is None:
        raise KeyError(f"no simulated node for {instance!r}")
    return found


def make_unhealthy(backend: Backend, instance: str, fault: dict[str, Any]) -> dict:
    fault = node_fault_table.validate_fault(fault)
    vm = vm_id(backend, instance)
    state = backend.store.nodes.get(vm.lower())
    if state is None:
        state = node_of(backend, backend.find(vm), backend.find(parse_id(vm).parent))
    node_fault_table.apply_fault(state, **fault)
    return state


def unhealthy_next(backend: Backend, count: int, fault: dict[str, Any]) -> None:
    if count < 1:
        raise ValueError("count must be at least 1")
    fault = node_fault_table.validate_fault(fault)
    node_fault_table.check_some_size(fault)
    backend.store.pending_faults.append({"count": int(count), "fault": fault})


def fabric_incomplete(backend: Backend, instance: str, state: str, status: str) -> dict:
    found = backend.store.nodes[vm_id(backend, instance).lower()]
    vertical_connect.break_fabric(found, state, status)
    return found


def swap_fabric(backend: Backend, first: str, second: str) -> tuple[dict, dict]:
    """Two compromised nodes that report each other's NVLink fabric (ClusterUUID, CliqueId): what their
    nvidia-smi -q prints is theirs to forge; Azure's interconnect subgroups stay where Azure placed them."""
    a = backend.store.nodes[vm_id(backend, first).lower()]
    b = backend.store.nodes[vm_id(backend, second).lower()]
    if "fabric" not in a or "fabric" not in b:
        raise ValueError("both nodes must be of a rack size (GB200/GB300)")
    fa, fb = dict(a["fabric"]), dict(b["fabric"])
    a["fabric"].update(clusterUuid=fb["clusterUuid"], cliqueId=fb["cliqueId"])
    b["fabric"].update(clusterUuid=fa["clusterUuid"], cliqueId=fa["cliqueId"])
    for n in (a, b):
        n.setdefault("faults", []).append("reports another rack's NVLink fabric")
    return a, b


def forge_output(backend: Backend, instance: str, stdout: str | None) -> dict:
    found = backend.store.nodes[vm_id(backend, instance).lower()]
    if stdout is None:
        found.pop("forged", None)
    else:
        found["forged"] = str(stdout)
        found.setdefault("faults", []).append("prints a forged verdict")
    return found


def short_rack_next(backend: Backend, count: int) -> None:
    if count < 1:
        raise ValueError("count must be at least 1")
    backend.store.racks["short_next"] = backend.store.racks.get("short_next", 0) + int(count)


def degrade_fabric(backend: Backend, scale_set: str, factor: float) -> None:
    if not 0 <= factor <= 1:
        raise ValueError("factor must be between 0 and 1")
    matches = [r for r in backend.store.of_type(VMSS_TYPE) if scale_set.lower() in (r["name"].lower(), r["id"].lower())]
    if not matches:
        raise KeyError(f"no scale set {scale_set!r}")
    for vmss in matches:
        backend.store.fabric[vmss["id"].lower()] = factor
