"""status, outputs, wait and destroy: everything found again by azgpu's tags, nothing else touched."""

from __future__ import annotations

import functools
import re
import time
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import wait as wait_for
from dataclasses import dataclass, field
from typing import Any

from .. import resource_types
from ..bounded import BoundedError, obj, text
from ..errors import AzgpuError, AzureError, NotFoundError
from ..naming import Names
from ..output import listing
from ..ownership import cluster_of, created_by_azgpu, is_azgpu, is_ours, live_profile, profile_id_of
from ..plain import plain
from ..racks import group as group_racks
from ..resource_types import INSTANCES, is_type
from .arm import (
    TERMINAL,
    invalid_answer,
    is_not_found,
    list_group,
    pages,
    to_azure_error,
    until_settled,
)
from .azure_errors import IN_PROGRESS_REMEDY, OperationInProgressError
from .deployer import IN_PROGRESS_ATTEMPTS, INTERRUPT_GRACE
from .interface import LiveCluster
from .session import result_of


@dataclass
class Cluster:
    """The cluster's resources as the resource group listing shows them (type, name, tags, sku,
    provisioning state, times), and the group itself."""

    name: str
    resource_group: str
    resources: list[Any] = field(default_factory=list)
    group: Any = None

    def of(self, rt: resource_types.ResourceType) -> list[Any]:
        return sorted((r for r in self.resources if is_type(r.type, rt)), key=lambda r: r.name)

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


def live_cluster(session, name: str, resource_group: str) -> LiveCluster:
    """The cluster as the gate, `report` and Slurm take it, with one lookup (one listing of the group):
    its scale sets, the profile its tag names (None for one no longer known) and the nodes it holds.
    NotFoundError when there is no such cluster."""
    cluster = require(find_cluster(session, name, resource_group))
    sets = cluster.scale_sets
    try:
        profile = live_profile(sets[0])[0] if sets else None
    except AzgpuError:  # a size no profile knows any more
        profile = None
    nodes = sum(int(getattr(v.sku, "capacity", 0) or 0) for v in sets if getattr(v, "sku", None))
    return LiveCluster(name, resource_group, tuple(v.name for v in sets), profile, nodes)


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
        vms = INSTANCES.list(session, resource_group, vmss.name, instance_view=True)
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
        "profile": profile_id_of(cluster.scale_sets[0].tags) if cluster.scale_sets else None,
        "scale_sets": sets,
        "network": [{"type": r.type, "name": r.name, "provisioning_state": r.provisioning_state}
                    for r in cluster.resources if not resource_types.of(r.type).has_instances],
        "outbound": _outbound(session, resource_group, cluster),
    }


def _outbound(session, resource_group: str, cluster: Cluster) -> dict[str, Any] | None:
    """The cluster's NAT gateway and the address its traffic leaves from (what firewalls must allow)."""
    nats = cluster.of(resource_types.NAT_GATEWAY)
    if not nats:
        return None
    ips = []
    for ip in cluster.of(resource_types.PUBLIC_IP):
        try:
            address = resource_types.PUBLIC_IP.get(session, resource_group, ip.name).ip_address
        except Exception as exc:
            if not is_not_found(exc):  # deleted since the listing: nothing to show
                raise
            continue
        ips.append({"name": ip.name, "ip_address": address})
    return {"method": "nat-gateway", "nat_gateway": nats[0].name, "public_ips": ips}


def _instance_of(resource_id: str | None) -> str | None:
    """The instance id in an id below `.../virtualMachines/{instance}/...` (NICs, IP configurations)."""
    parts = (resource_id or "").split("/")
    lowered = [p.lower() for p in parts]
    if "virtualmachines" in lowered and lowered.index("virtualmachines") + 1 < len(parts):
        return parts[lowered.index("virtualmachines") + 1]
    return None


def public_ips(addresses: list[Any]) -> dict[str, str | None]:
    """Instance id -> public IP, from `PublicIPAddresses_ListVirtualMachineScaleSetPublicIPAddresses`
    items. Each names its IP configuration (`properties.ipConfiguration.id`, below the instance);
    `ipAddress` is absent while a Dynamic address is not allocated (VmssPublicIpGetForvmssNetwork.json,
    Azure/azure-rest-api-specs network 2018-10-01, the api-version the SDK pins for this call)."""
    found: dict[str, str | None] = {}
    for address in addresses:
        instance = _instance_of(getattr(getattr(address, "ip_configuration", None), "id", None))
        if instance is not None and not found.get(instance):
            found[instance] = address.ip_address
    return found


_SUBGROUP_ID = re.compile(r"[0-9A-Za-z][0-9A-Za-z-]{0,63}")  # a GUID (Compute 2026-03-01: "the ID (GUID)")
_BLOCK_ID = re.compile(r"/[!-~]{1,511}")


def interconnect(vm: dict[str, Any], what: str = "the scale set's instances") -> dict[str, str | None]:
    """What Azure says about a scale-set VM's rack (azgpu.racks), from the REST body of the instance (Compute API
    2026-03-01+: properties.instanceView.interconnectInstanceView.interconnectSubgroupId and
    properties.interconnectBlockProfile.interconnectBlock.id); absent on clusters placed without interconnect
    groups or blocks. Read from the REST answer, not an SDK model: whether a rack is deleted rests on it, and it
    must not depend on which azure-mgmt-compute is installed. ARM_ANSWER_INVALID for ids of another shape."""
    try:
        props = obj(vm.get("properties"), "an instance's properties") if isinstance(vm, dict) else None
        if props is None:
            raise BoundedError("an instance is not an object")
        view = obj(obj(props.get("instanceView"), "its instanceView").get("interconnectInstanceView"),
                   "its interconnectInstanceView")
        block = obj(obj(props.get("interconnectBlockProfile"), "its interconnectBlockProfile").get("interconnectBlock"),
                    "its interconnectBlock")
        subgroup = text(view.get("interconnectSubgroupId"), "its interconnectSubgroupId", 64)
        block_id = text(block.get("id"), "its interconnectBlock id", 512)
    except BoundedError as exc:
        raise invalid_answer(what, str(exc)) from None
    if subgroup is not None and not _SUBGROUP_ID.fullmatch(subgroup):
        raise invalid_answer(what, f"names an interconnect subgroup {ascii(subgroup)}, which is not an id")
    if block_id is not None and not _BLOCK_ID.fullmatch(block_id):
        raise invalid_answer(what, f"names an interconnect block {ascii(block_id[:80])}, which is not a resource id")
    return {"subgroup": subgroup or None, "block": block_id or None}


def rack_instances(session, resource_group: str, scale_set: str) -> list[dict[str, Any]]:
    """Every instance of the scale set as Azure's REST answer gives it at azgpu's Compute api-version
    (VirtualMachineScaleSetVMs_List with $expand=instanceView, every page read or none: arm.pages): instance_id,
    vm_id, hostname (the computer name), provisioning_state and interconnect(vm) (subgroup, block)."""
    path = (f"/subscriptions/{session.subscription_id}/resourceGroups/{resource_group}"
            f"{INSTANCES.provider_path(scale_set)}")
    what = f"the instances of {scale_set}"
    found: list[dict[str, Any]] = []
    for vm in pages(session, path, INSTANCES.api_version, what, query="$expand=instanceView"):
        signal = interconnect(vm, what)
        try:
            props = vm["properties"]
            name = text(obj(props.get("osProfile"), "its osProfile").get("computerName"), "its computer name", 80)
            instance = text(vm.get("instanceId"), "its instanceId", 20) or ""
            found.append({"instance_id": instance, "vm_id": text(props.get("vmId"), "its vmId", 64),
                          "hostname": name or text(vm.get("name"), "its name", 80) or instance,
                          "provisioning_state": text(props.get("provisioningState"), "its provisioningState", 40),
                          **signal})
        except BoundedError as exc:
            raise invalid_answer(what, str(exc)) from None
    return found


def rack_signals(session, resource_group: str, scale_set: str) -> dict[str, dict[str, str | None]]:
    """computer name -> interconnect(vm) for every instance of the scale set (rack_instances)."""
    return {vm["hostname"]: {"subgroup": vm["subgroup"], "block": vm["block"]}
            for vm in rack_instances(session, resource_group, scale_set)}


def scale_set_nodes(session, resource_group: str, scale_set: str, *, racks: bool = False) -> list[dict[str, Any]]:
    """Every instance of the scale set in instance order: instance_id, vm_id, hostname, ip (None until its
    NIC is listed), public_ip, provisioning_state and, with racks, what Azure reports about its rack
    (subgroup, block), read from the REST answer (rack_instances: whether a rack is deleted rests on it).
    The instance view (the rack's subgroup) is asked for only where there are racks."""
    nodes: dict[str, dict[str, Any]] = {}
    if racks:
        for vm in rack_instances(session, resource_group, scale_set):
            nodes[vm["instance_id"]] = {**vm, "ip": None, "public_ip": None}
    else:
        for vm in INSTANCES.list(session, resource_group, scale_set):
            nodes[vm.instance_id] = {
                "instance_id": vm.instance_id, "vm_id": vm.vm_id,
                "hostname": vm.os_profile.computer_name if vm.os_profile else vm.name, "ip": None, "public_ip": None,
                "provisioning_state": vm.provisioning_state}
    has_public = False
    nics = session.network.network_interfaces.list_virtual_machine_scale_set_network_interfaces
    for nic in nics(resource_group, scale_set):
        instance = (nic.virtual_machine.id.rsplit("/", 1)[-1]) if nic.virtual_machine else ""
        configs = nic.ip_configurations or []
        ip = next((c.private_ip_address for c in configs if c.private_ip_address), None)
        has_public = has_public or any(c.public_ip_address for c in configs)
        if ip and instance in nodes and not nodes[instance]["ip"]:
            nodes[instance]["ip"] = ip
    if has_public:  # one listing per scale set, and none for the (default) private clusters
        listed = session.network.public_ip_addresses.list_virtual_machine_scale_set_public_ip_addresses
        addresses = public_ips(list(listed(resource_group, scale_set)))
        for node in nodes.values():
            node["public_ip"] = addresses.get(node["instance_id"])
    return sorted(nodes.values(), key=lambda n: int(n["instance_id"]) if n["instance_id"].isdigit() else 0)


def _nodes(session, resource_group: str, vmss: Any, *, racks: bool = False) -> tuple[list[dict], dict]:
    """The scale set's nodes that have an address, in instance order, and what Azure reports about their racks."""
    listed = scale_set_nodes(session, resource_group, vmss.name, racks=racks)
    signals = {n["hostname"]: {"subgroup": n["subgroup"], "block": n["block"]} for n in listed} if racks else {}
    nodes = [{"hostname": n["hostname"], "ip": n["ip"], "public_ip": n["public_ip"], "instance_id": n["instance_id"]}
             for n in listed if n["ip"]]
    return nodes, signals


@_translated
def outputs(session, name: str, resource_group: str) -> dict[str, Any]:
    cluster = require(find_cluster(session, name, resource_group))
    first = cluster.scale_sets[0] if cluster.scale_sets else None
    profile, size = live_profile(first) if first else (None, None)
    per_rack = profile.rack_size if profile else None
    domains, signals = [], {}
    for v in cluster.scale_sets:
        nodes, found = _nodes(session, resource_group, v, racks=bool(per_rack))
        domains.append({"scale_set": v.name, "nodes": nodes})
        signals.update(found)
    racks, domains, extra = _racks(session, name, resource_group, domains, signals, per_rack)
    return {
        "cluster": name,
        "resource_group": resource_group,
        "profile": profile.id if profile else None,
        "size": size.name if size else None,
        "gpus_per_node": size.gpus if size else None,
        # Every profile's gpu_model starts with its maker (profiles/*.toml): it picks the device files.
        "gpu_vendor": ("amd" if size.gpu_model.upper().startswith("AMD") else "nvidia") if size else None,
        "vcpus_per_node": size.vcpus if size else None,
        "memory_gib_per_node": size.memory_gib if size else None,
        "infiniband": size.infiniband if size else None,
        "nccl_env": dict(profile.nccl.get("env", {})) if profile else {},
        "ib_domains": domains,
        "nodes_per_rack": per_rack,
        "racks": racks,
        **extra,
    }


def _racks(session, name: str, resource_group: str, domains: list[dict], signals: dict,
           per_rack: int | None) -> tuple[list[dict], list[dict], dict[str, Any]]:
    """Racks from what the last health gate measured on the nodes (azgpu.rack_record) and what Azure
    reports; the domains without the nodes that gate left out of the scheduler files."""
    if not per_rack:
        return [], domains, {}
    from ..rack_record import load

    record = load(getattr(session, "subscription_id", "") or "", resource_group, name) or {}
    present = {n["hostname"] for d in domains for n in d["nodes"]}
    fabrics = {h: v.get("fabric") for h, v in (record.get("nodes") or {}).items() if h in present}
    excluded = {h: why for h, why in (record.get("excluded") or {}).items() if h in present}
    racks = group_racks(name, domains, signals, per_rack, fabrics=fabrics, excluded=excluded)
    extra: dict[str, Any] = {}
    if record:
        extra["racks_measured_at"] = record.get("measured_at")
    if excluded:
        extra["excluded_nodes"] = [{"hostname": h, "reason": why} for h, why in sorted(excluded.items())]
        domains = [{**d, "nodes": [n for n in d["nodes"] if n["hostname"] not in excluded]} for d in domains]
    return racks, domains, extra


@_translated
def wait(session, name: str, resource_group: str, *, timeout: float | None = None, interval: float = 5.0,
         on_update=None) -> dict[str, Any]:
    """Follow the cluster's scale sets until each is Succeeded (or one Failed)."""
    deadline = time.monotonic() + timeout if timeout else None
    while True:
        cluster = require(find_cluster(session, name, resource_group))
        states = {}
        for v in cluster.scale_sets:
            state = (v.provisioning_state or "").lower()
            if state not in TERMINAL:
                # A GET per unfinished scale set, as a poller would do: lists may lag behind.
                state = (resource_types.VMSS.get(session, resource_group, v.name).provisioning_state or "").lower()
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
        session.pause(interval)


@_translated
def destroy(session, name: str, resource_group: str, *, on_update=None) -> dict[str, Any]:
    """Delete the cluster's tagged resources (scale sets first), then its group if azgpu made it and it is empty.

    A virtual network that holds subnets, NICs or peerings azgpu did not create stays (with what it still
    uses): `kept` says what and why. The group goes when the last azgpu cluster in it does and nothing
    else is left, whichever cluster created it; `resource_group_kept` says why it stays otherwise.
    """
    cluster = require(find_cluster(session, name, resource_group))
    deleted: list[dict[str, str]] = []

    def delete(resource: Any) -> None:
        if on_update:
            on_update(resource.type, resource.name, "deleting")
        _delete(session, resource_group, resource)
        deleted.append({"type": resource.type, "name": resource.name})
        if on_update:
            on_update(resource.type, resource.name, "deleted")

    kept: list[dict[str, str]] = []
    held: set[str] = set()  # lower-cased names of resources a kept VNet still uses
    for wave in resource_types.teardown_waves(cluster.resources):
        if any(is_type(r.type, resource_types.VNET) for r in wave):
            # The scale sets are gone: what a VNet still holds now is what someone else put there.
            for vnet in [r for r in wave if is_type(r.type, resource_types.VNET)]:
                reason, uses = _foreign_in_vnet(session, resource_group, name, vnet.name, on_update)
                if reason:
                    kept.append({"type": vnet.type, "name": vnet.name, "reason": reason})
                    held |= uses
                    if on_update:
                        on_update(vnet.type, vnet.name, f"kept: {reason}")
            wave = [r for r in wave if r.name not in {k["name"] for k in kept}]
        for r in [r for r in wave if (r.name or "").lower() in held]:
            kept.append({"type": r.type, "name": r.name, "reason": "a virtual network azgpu keeps still uses it"})
            if on_update:
                on_update(r.type, r.name, "kept: a virtual network azgpu keeps still uses it")
            # What a kept resource uses in turn (a NAT gateway's public IP) stays with it.
            held |= _uses(session, resource_group, r)
        wave = [r for r in wave if (r.name or "").lower() not in held]
        if not wave:
            continue
        pool = ThreadPoolExecutor(max_workers=len(wave))  # each worker only waits on Azure
        jobs = [pool.submit(delete, r) for r in wave]
        try:
            for job in jobs:
                result_of(job)
        except KeyboardInterrupt:
            session.cancel()  # every wait of the workers ends now; a re-run deletes what is left
            raise
        finally:
            interrupted = session.cancelled.is_set()
            pool.shutdown(wait=not interrupted, cancel_futures=interrupted)
            if interrupted:
                wait_for([j for j in jobs if not j.cancelled()], timeout=INTERRUPT_GRACE)  # as Deployer.deploy

    from ..rack_record import forget

    forget(getattr(session, "subscription_id", "") or "", resource_group, name)
    group_deleted, group_kept = False, ""
    tags = (cluster.group.tags or {}) if cluster.group is not None else {}
    # Any azgpu cluster's destroy may remove a group azgpu created, once the last thing in it is gone:
    # the group is tagged with the cluster that created it, which need not be the last one left.
    if not created_by_azgpu(tags):
        group_kept = "azgpu did not create it"
    else:
        left = list(session.resources.resources.list_by_resource_group(resource_group))
        if not left:
            try:
                session.resources.resource_groups.begin_delete(resource_group).result()
            except Exception as exc:
                raise to_azure_error(exc, f"resource group {resource_group}") from None
            group_deleted = True
        else:
            others = sorted({cluster_of(r.tags) for r in left if is_azgpu(r.tags)} - {None, name})
            ours = [r.name for r in left if is_ours(r.tags, name)]
            foreign = [r.name for r in left if not is_azgpu(r.tags)]
            parts = [f"azgpu cluster(s) {', '.join(others)}"] if others else []
            parts += [f"{listing(ours)}, which this destroy leaves (see kept)"] if ours else []
            parts += [f"{len(foreign)} resource(s) azgpu did not create: {listing(foreign)}"] if foreign else []
            rest = [r.name for r in left if r.name not in set(ours) | set(foreign)
                    and cluster_of(r.tags) not in others]
            if rest:
                parts.append(f"{len(rest)} resource(s) tagged by azgpu for no cluster it knows: {listing(rest)}")
            group_kept = "it still holds " + ("; ".join(parts) or f"{len(left)} resource(s)")
    out = {"cluster": name, "resource_group": resource_group, "deleted": deleted,
           "resource_group_deleted": group_deleted}
    if kept:
        out["kept"] = kept
    if group_kept:
        out["resource_group_kept"] = group_kept
    return out


def _foreign_in_vnet(session, resource_group: str, cluster: str, vnet: str, on_update) -> tuple[str, set[str]]:
    """Why the cluster's VNet must stay (subnets, attached NICs or peerings azgpu did not create), and the
    names of azgpu's resources it still uses then; ('', set()) when it can go. azgpu's own subnet is
    deleted when nothing foreign is in it, so its NAT gateway can go too."""
    try:
        live = resource_types.VNET.get(session, resource_group, vnet)
    except Exception as exc:
        if is_not_found(exc):
            return "", set()
        raise
    ours = Names(cluster).subnet.lower()
    subnets = list(live.subnets or [])
    foreign = [s.name for s in subnets if (s.name or "").lower() != ours]
    attached = [s.name for s in subnets if s.ip_configurations]
    peerings = [p.name for p in (getattr(live, "virtual_network_peerings", None) or [])]
    reasons = []
    if foreign:
        reasons.append(f"subnet(s) {listing(foreign)} that azgpu did not create")
    if attached:
        reasons.append(f"network interfaces azgpu did not create in subnet(s) {listing(attached)}")
    if peerings:
        reasons.append(f"peering(s) {listing(peerings)}")
    if not reasons:
        return "", set()
    uses: set[str] = set()
    for subnet in subnets:
        if (subnet.name or "").lower() != ours:
            continue
        if subnet.ip_configurations:  # someone's NICs: azgpu's subnet stays, with what it uses
            uses |= {_leaf(getattr(subnet.nat_gateway, "id", None)),
                     _leaf(getattr(subnet.network_security_group, "id", None))}
            continue
        if on_update:
            on_update(resource_types.SUBNET.type, subnet.name, "deleting")
        session.network.subnets.begin_delete(resource_group, vnet, subnet.name).result()
        if on_update:
            on_update(resource_types.SUBNET.type, subnet.name, "deleted")
    return "it holds " + "; ".join(reasons) + ": azgpu leaves it", {u for u in uses if u}


def _leaf(resource_id: str | None) -> str:
    return (resource_id or "").rstrip("/").rsplit("/", 1)[-1].lower() if resource_id else ""


def _uses(session, resource_group: str, resource: Any) -> set[str]:
    """Names of what a kept NAT gateway uses (its public IPs), which must stay with it."""
    if not is_type(resource.type, resource_types.NAT_GATEWAY):
        return set()
    nat = resource_types.NAT_GATEWAY.get(session, resource_group, resource.name)
    return {_leaf(ip.id) for ip in (nat.public_ip_addresses or [])}


def _delete(session, resource_group: str, resource: Any) -> None:
    """Delete one resource; one that is gone already counts as deleted. When Azure refuses because
    another operation is still running on it (a create a Ctrl-C left behind), wait for that one first."""
    rt = resource_types.of(resource.type)
    for _ in range(IN_PROGRESS_ATTEMPTS):
        try:
            rt.begin_delete(session, resource_group, resource.name).result()
            return
        except Exception as exc:  # to_azure_error re-raises anything not from Azure
            if is_not_found(exc):
                return
            err = to_azure_error(exc, resource.name)
            if not isinstance(err, OperationInProgressError):
                raise err from None
        until_settled(session, rt, resource_group, resource.name)
    raise AzureError(f"{resource.name}: Azure kept refusing the delete while other operations were running on it",
                     code="OPERATION_IN_PROGRESS", remedy=IN_PROGRESS_REMEDY)
