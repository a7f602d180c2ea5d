"""A cluster's nodes as a scheduler's power programs see them, and the few changes they make: public
verbs of azgpu.deploy for azgpu.slurm (which imports nothing else from this package's modules).

- cluster_nodes: each scale set with its instances (ids, hostnames, addresses, rack signals).
- delete_instances / set_capacity: shrink a scale set. On vertical-connect sizes (ND GB200/GB300
  v6) a request that leaves the capacity off a whole number of racks is refused here, before it is
  sent: Azure refuses it ("Capacity must be a multiple of 18 for SKUs that support vertical
  connect", facts §14.1), and a refused delete would leave racks billing.
- node_bindings / bind_node / unbind_node: which scheduler node name a VM carries, kept by Azure
  on the instance itself, so that it survives the controller (its state directory, its host).
- run_on_node: run a script in one VM as a managed Run Command and read how it ended (the Slurm node
  bootstrap, azgpu.slurm.bootstrap: its protected parameters reach only the VM).

Where Azure keeps the binding: Uniform scale-set instances keep no tags of their own (a tag sent in
VirtualMachineScaleSetVMs_Update is dropped: Azure/azure-sdk-for-go#18278,
Azure/azure-libraries-for-net#1299), so the binding is a managed Run Command named BINDING on the
instance (VirtualMachineScaleSetVMRunCommands; REST spec Compute 2026-03-01,
VirtualMachineScaleSetVMRunCommand_Get.json shows its location and tags). It is a child resource of
the instance: Azure deletes it with the VM, so a binding never outlives its VM or moves to a new
VM that reuses the instance id. Its script does nothing (it runs asynchronously, once); the tags
say the cluster and the node name. Reading it is one GET per instance, which callers do only for
instances they do not know yet.
"""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ..errors import InputError, NotFoundError
from ..ownership import NODE_TAG, binding_tags, cluster_of, node_of
from ..profiles import find_size
from ..resource_types import INSTANCE_RUN_COMMAND, VMSS
from .arm import is_not_found, to_azure_error
from .lifecycle import find_cluster, scale_set_nodes

BINDING = NODE_TAG  # the Run Command's name on every instance that carries a node name (its tag's name)
_NAME = re.compile(r"[a-z0-9][a-z0-9-]{0,79}")
SCRIPT = ("#!/bin/sh\n# azgpu: this VM carries the Slurm node named in this Run Command's tags "
          f"('{NODE_TAG}'). Nothing to run.\nexit 0\n")
PARALLEL = 8  # GETs of bindings at a time


def _size_rack(size: str | None) -> int | None:
    """VMs per vertical-connect rack of this size (18 on GB200/GB300), None elsewhere."""
    try:
        return find_size(size)[0].rack_size if size else None
    except Exception:  # noqa: BLE001 - a size no profile knows has no racks azgpu could name
        return None


def cluster_nodes(session, name: str, resource_group: str, *, racks: bool = False,
                  only: list[str] | None = None) -> list[dict[str, Any]]:
    """Each scale set of the cluster (found by azgpu's tags): name, id, location, size, capacity (Azure's
    sku.capacity, which a failed grow leaves above the instances there are), provisioning_state,
    per_rack (VMs per vertical-connect rack, or None) and nodes (its instances, as
    lifecycle.scale_set_nodes lists them). `only`: these scale sets' (the others are not read). [] when the
    resource group does not exist yet."""
    try:
        listed = find_cluster(session, name, resource_group).scale_sets
    except NotFoundError:
        return []
    out = []
    try:
        for item in listed:
            if only is not None and item.name not in only:
                continue
            vmss = VMSS.get(session, resource_group, item.name)
            size = vmss.sku.name if vmss.sku else None
            out.append({"name": vmss.name, "id": vmss.id, "location": vmss.location, "size": size,
                        "capacity": int((vmss.sku.capacity if vmss.sku else 0) or 0),
                        "provisioning_state": vmss.provisioning_state, "per_rack": _size_rack(size),
                        "nodes": scale_set_nodes(session, resource_group, vmss.name, racks=racks)})
    except Exception as exc:
        raise to_azure_error(exc, f"listing the nodes of cluster {name}") from None
    return out


def _whole_racks(session, resource_group: str, scale_set: str, removed: int, action: str) -> Any:
    """The scale set; InputError when `removed` instances would leave a vertical-connect scale set off a
    whole number of racks (nothing is sent)."""
    vmss = VMSS.get(session, resource_group, scale_set)
    per_rack = _size_rack(vmss.sku.name if vmss.sku else None)
    capacity = int((vmss.sku.capacity if vmss.sku else 0) or 0)
    if per_rack and (removed % per_rack or (capacity - removed) % per_rack):
        raise InputError(f"{action} would leave {scale_set} at {capacity - removed} instance(s), not a whole number of "
                         f"racks of {per_rack}: Azure refuses that for vertical-connect sizes", code="NOT_WHOLE_RACKS",
                         remedy="free whole racks only (every instance of a rack, in one request)")
    return vmss


def delete_instances(session, resource_group: str, scale_set: str, instance_ids: list[str]) -> None:
    """Delete these instances of the scale set in one request (VirtualMachineScaleSets_DeleteInstances)."""
    if not instance_ids:
        return
    try:
        _whole_racks(session, resource_group, scale_set, len(instance_ids), f"deleting {len(instance_ids)} instance(s)")
        VMSS.begin_delete_instances(session, resource_group, scale_set, list(instance_ids)).result()
    except InputError:
        raise
    except Exception as exc:
        raise to_azure_error(exc, f"deleting instances {', '.join(instance_ids)} of {scale_set}") from None


def set_capacity(session, resource_group: str, scale_set: str, capacity: int) -> None:
    """Set the scale set's capacity (a PATCH of its sku), e.g. back to the instances it holds after a grow
    Azure could not finish (AllocationFailed leaves sku.capacity at what it failed to reach, and the
    instances would otherwise come later, carrying no node name)."""
    try:
        vmss = VMSS.get(session, resource_group, scale_set)
        current = int((vmss.sku.capacity if vmss.sku else 0) or 0)
        if current == capacity:
            return
        _whole_racks(session, resource_group, scale_set, current - capacity, f"setting the capacity to {capacity}")
        VMSS.begin_set_capacity(session, resource_group, scale_set, vmss.sku.name, capacity).result()
    except InputError:
        raise
    except Exception as exc:
        raise to_azure_error(exc, f"setting the capacity of {scale_set} to {capacity}") from None


def _binding(command: Any, cluster: str) -> str | None:
    """The node name a binding Run Command names for this cluster; None for anything else."""
    tags = getattr(command, "tags", None) or {}
    name, owner = node_of(tags), cluster_of(tags)
    if owner != cluster or not isinstance(name, str) or not _NAME.fullmatch(name):
        return None
    return name


def node_bindings(session, resource_group: str, scale_set: str, instance_ids: list[str],
                  cluster: str) -> dict[str, str | None]:
    """instance id -> the node name Azure keeps on it for this cluster (None: it carries none)."""

    def read(instance: str) -> tuple[str, str | None]:
        try:
            return instance, _binding(INSTANCE_RUN_COMMAND.get(session, resource_group, scale_set, instance, BINDING),
                                      cluster)
        except Exception as exc:
            if is_not_found(exc):  # no binding, or the instance went meanwhile: it carries no name
                return instance, None
            raise to_azure_error(exc, f"reading the node name of instance {instance} of {scale_set}") from None

    if not instance_ids:
        return {}
    with ThreadPoolExecutor(max_workers=min(PARALLEL, len(instance_ids))) as pool:
        return dict(pool.map(read, instance_ids))


def bind_node(session, resource_group: str, scale_set: str, instance_id: str, *, location: str, cluster: str,
              name: str) -> None:
    """Record on the instance that it carries node `name` of `cluster` (replacing what it carried)."""
    if not _NAME.fullmatch(name):
        raise InputError(f"'{name}' is not a node name azgpu gives", code="INVALID_NODE_NAME",
                         remedy="use the names 'provision slurm config' writes")
    body = {"location": location, "tags": binding_tags(cluster, name),
            "properties": {"source": {"script": SCRIPT}, "asyncExecution": True, "timeoutInSeconds": 60,
                           "treatFailureAsDeploymentFailure": False}}
    try:
        INSTANCE_RUN_COMMAND.begin_put(session, resource_group, scale_set, instance_id, BINDING, body).result()
    except Exception as exc:
        raise to_azure_error(exc, f"recording node {name} on instance {instance_id} of {scale_set}") from None


def unbind_node(session, resource_group: str, scale_set: str, instance_id: str) -> None:
    """Forget the node name the instance carries (it stays, carrying none); nothing to do when it has none."""
    try:
        INSTANCE_RUN_COMMAND.begin_delete(session, resource_group, scale_set, instance_id, BINDING).result()
    except Exception as exc:
        if is_not_found(exc):
            return
        raise to_azure_error(exc, f"forgetting the node name of instance {instance_id} of {scale_set}") from None


def run_on_node(session, resource_group: str, scale_set: str, instance_id: str, name: str, body: dict) -> Any:
    """Run a managed Run Command (REST body: location, properties.source.script, parameters,
    protectedParameters ...) on the instance and wait for it; the Run Command as read afterwards with its
    instance view (execution state, exit code, the tails of output and error). The Run Command is then
    deleted: its script and public parameters need not stay on the VM's model. AzureError when Azure could
    not run it."""
    args = (session, resource_group, scale_set, instance_id, name)
    try:
        INSTANCE_RUN_COMMAND.begin_put(*args, body).result()
        result = INSTANCE_RUN_COMMAND.get(*args, expand="instanceView")
    except Exception as exc:
        raise to_azure_error(exc, f"running {name} on instance {instance_id} of {scale_set}") from None
    try:
        INSTANCE_RUN_COMMAND.begin_delete(*args).result()
    except Exception:  # the result is read; a Run Command left behind goes with its VM
        pass
    return result
