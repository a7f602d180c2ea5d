"""status, outputs, wait and destroy: everything found again by azgpu's tags, nothing else touched."""

from __future__ import annotations

import functools
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from ..errors import AzgpuError, AzureError, NotFoundError
from ..output import listing
from ..plain import plain
from ..profiles import find_size, load_profile
from . import resource_types
from .deployer import CREATED_TAG, TERMINAL, is_not_found, is_ours, list_group, to_azure_error



@dataclass
class Cluster:
    """The cluster's resources as the resource group listing shows them (type, name, tags, sku,
    provisioning state, times), and the group itself."""

    name: str
    resource_group: str
    resources: list[Any] = field(default_factory=list)
    group: Any = None

    def of(self, rt: resource_types.ResourceType) -> list[Any]:
        return sorted((r for r in self.resources if (r.type or "").lower() == rt.type.lower()), key=lambda r: r.name)

    @property
    def scale_sets(self) -> list[Any]:
        return self.of(resource_types.VMSS)

    @property
    def empty(self) -> bool:
        return not self.resources


def find_cluster(session, name: str, resource_group: str) -> Cluster:
    """The cluster's tagged resources, found with one listing of the group; NotFoundError (exit 3)
    when the group is missing. Resources of types azgpu does not manage are never included."""
    cluster = Cluster(name, resource_group)
    try:
        cluster.group = session.resources.resource_groups.get(resource_group)
    except Exception as exc:
        if is_not_found(exc):
            raise NotFoundError(f"resource group '{resource_group}' does not exist", code="CLUSTER_NOT_FOUND",
                                remedy="check -g/--resource-group and --subscription") from None
        raise to_azure_error(exc, f"resource group {resource_group}") from None
    listed = list_group(session, resource_group) or []
    cluster.resources = [r for r in listed if is_ours(r.tags, name) and resource_types.managed(r.type)]
    return cluster


def require(cluster: Cluster) -> Cluster:
    if cluster.empty:
        raise NotFoundError(f"no cluster '{cluster.name}' in resource group '{cluster.resource_group}'",
                            code="CLUSTER_NOT_FOUND", remedy="check -n/--name and -g/--resource-group "
                                                             "('provision create' makes it)")
    return cluster


def _translated(fn):
    """SDK errors of any call inside a lifecycle command become typed errors with remedies; results
    are plain data."""
    @functools.wraps(fn)
    def wrapper(session, name, resource_group, *args, **kwargs):
        try:
            return plain(fn(session, name, resource_group, *args, **kwargs))  # SDK enums become their values
        except AzgpuError:
            raise
        except Exception as exc:
            raise to_azure_error(exc, f"cluster {name} in {resource_group}") from None
    return wrapper


def _power_state(vm: Any) -> str:
    statuses = getattr(getattr(vm, "instance_view", None), "statuses", None) or []
    for s in statuses:
        if (s.code or "").startswith("PowerState/"):
            return s.code.split("/", 1)[1]
    return "unknown"


@_translated
def status(session, name: str, resource_group: str) -> dict[str, Any]:
    cluster = require(find_cluster(session, name, resource_group))
    sets = []
    for vmss in cluster.scale_sets:
        vms = list(session.compute.virtual_machine_scale_set_vms.list(resource_group, vmss.name, expand="instanceView"))
        instances = [{"instance_id": vm.instance_id, "name": vm.name, "provisioning_state": vm.provisioning_state,
                      "power_state": _power_state(vm)} for vm in vms]
        sets.append({
            "name": vmss.name,
            "size": vmss.sku.name,
            "capacity": vmss.sku.capacity,
            "provisioning_state": vmss.provisioning_state,
            "succeeded": sum(1 for i in instances if (i["provisioning_state"] or "").lower() == "succeeded"),
            "running": sum(1 for i in instances if i["power_state"] == "running"),
            "instances": instances,
        })
    return {
        "cluster": name,
        "resource_group": resource_group,
        "profile": (cluster.scale_sets[0].tags or {}).get("azgpu-profile") if cluster.scale_sets else None,
        "scale_sets": sets,
        "network": [{"type": r.type, "name": r.name, "provisioning_state": r.provisioning_state}
                    for r in cluster.resources if r.type.lower() != resource_types.VMSS.type.lower()],
    }


def _nodes(session, resource_group: str, vmss: Any) -> list[dict[str, str]]:
    names = {vm.instance_id: (vm.os_profile.computer_name if vm.os_profile else vm.name)
             for vm in session.compute.virtual_machine_scale_set_vms.list(resource_group, vmss.name)}
    nodes = []
    for nic in session.network.network_interfaces.list_virtual_machine_scale_set_network_interfaces(resource_group, vmss.name):
        instance = (nic.virtual_machine.id.rsplit("/", 1)[-1]) if nic.virtual_machine else ""
        ip = next((c.private_ip_address for c in nic.ip_configurations or [] if c.private_ip_address), None)
        if ip:
            nodes.append({"hostname": names.get(instance, instance), "ip": ip, "instance_id": instance})
    return sorted(nodes, key=lambda n: int(n["instance_id"]) if n["instance_id"].isdigit() else 0)


@_translated
def outputs(session, name: str, resource_group: str) -> dict[str, Any]:
    cluster = require(find_cluster(session, name, resource_group))
    first = cluster.scale_sets[0] if cluster.scale_sets else None
    profile = load_profile((first.tags or {}).get("azgpu-profile", "")) if first else None
    size = profile.size(first.sku.name) if profile else (find_size(first.sku.name)[1] if first else None)
    domains = [{"scale_set": v.name, "nodes": _nodes(session, resource_group, v)} for v in cluster.scale_sets]
    return {
        "cluster": name,
        "resource_group": resource_group,
        "profile": profile.id if profile else None,
        "size": size.name if size else None,
        "gpus_per_node": size.gpus if size else None,
        "vcpus_per_node": size.vcpus if size else None,
        "memory_gib_per_node": size.memory_gib if size else None,
        "nccl_env": dict(profile.nccl.get("env", {})) if profile else {},
        "ib_domains": domains,
    }


def hostfile(out: dict[str, Any]) -> str:
    return "".join(f"{n['ip']}\n" for d in out["ib_domains"] for n in d["nodes"])


def slurm(out: dict[str, Any]) -> str:
    # Guest-visible memory is a little below the documented figure (facts sheet, section 1), and
    # Slurm drains a node whose RealMemory is above what it finds: leave 5 % headroom.
    real_memory = int((out["memory_gib_per_node"] or 0) * 1024 * 0.95)
    lines = [f"# azgpu cluster {out['cluster']}: {out['size']}, one partition per InfiniBand domain (scale set)"]
    for d in out["ib_domains"]:
        lines.append(f"# InfiniBand domain {d['scale_set']}")
        for n in d["nodes"]:
            lines.append(f"NodeName={n['hostname']} NodeAddr={n['ip']} CPUs={out['vcpus_per_node']} "
                         f"RealMemory={real_memory} Gres=gpu:{out['gpus_per_node']} State=UNKNOWN")
        hosts = ",".join(n["hostname"] for n in d["nodes"])
        if hosts:
            lines.append(f"PartitionName={d['scale_set']} Nodes={hosts} State=UP")
    return "\n".join(lines) + "\n"


def nccl_env(out: dict[str, Any]) -> str:
    return "".join(f"export {k}={v}\n" for k, v in out["nccl_env"].items())


@_translated
def wait(session, name: str, resource_group: str, *, timeout: float | None = None, interval: float = 5.0,
         on_update=None) -> dict[str, Any]:
    """Follow the cluster's scale sets until each is Succeeded (or one Failed)."""
    sleep = session.sleep
    deadline = time.monotonic() + timeout if timeout else None
    while True:
        cluster = require(find_cluster(session, name, resource_group))
        states = {}
        for v in cluster.scale_sets:
            state = (v.provisioning_state or "").lower()
            if state not in TERMINAL:
                # A GET per unfinished scale set, as a poller would do: lists may lag behind.
                state = (session.compute.virtual_machine_scale_sets.get(resource_group, v.name).provisioning_state or "").lower()
            states[v.name] = state
        if on_update:
            on_update(cluster)
        failed = [n for n, s in states.items() if s in ("failed", "canceled")]
        if failed:
            raise AzureError(f"scale set(s) {listing(failed)} failed", code="PROVISIONING_FAILED",
                             remedy="run 'provision create' again to retry them")
        if all(s == "succeeded" for s in states.values()):
            return status(session, name, resource_group)
        if deadline and time.monotonic() > deadline:
            raise AzureError(f"timed out after {timeout:g} s", code="TIMEOUT", remedy="run 'provision wait' again")
        sleep(interval)


@_translated
def destroy(session, name: str, resource_group: str, *, on_update=None) -> dict[str, Any]:
    """Delete the cluster's tagged resources (scale sets first), then its group if azgpu made it and it is empty."""
    cluster = require(find_cluster(session, name, resource_group))
    deleted: list[dict[str, str]] = []

    def delete(resource: Any) -> None:
        if on_update:
            on_update(resource.type, resource.name, "deleting")
        try:
            resource_types.of(resource.type).begin_delete(session, resource_group, resource.name).result()
        except Exception as exc:
            if not is_not_found(exc):
                raise to_azure_error(exc, resource.name) from None
        deleted.append({"type": resource.type, "name": resource.name})
        if on_update:
            on_update(resource.type, resource.name, "deleted")

    for wave in resource_types.teardown_waves(cluster.resources):
        with ThreadPoolExecutor(max_workers=len(wave)) as pool:  # each worker only waits on Azure
            for job in [pool.submit(delete, r) for r in wave]:
                job.result()

    group_deleted = False
    tags = (cluster.group.tags or {}) if cluster.group is not None else {}
    if tags.get(CREATED_TAG) == "true" and is_ours(tags, name):
        left = list(session.resources.resources.list_by_resource_group(resource_group))
        if not left:
            try:
                session.resources.resource_groups.begin_delete(resource_group).result()
            except Exception as exc:
                raise to_azure_error(exc, f"resource group {resource_group}") from None
            group_deleted = True
    return {"cluster": name, "resource_group": resource_group, "deleted": deleted,
            "resource_group_deleted": group_deleted}
