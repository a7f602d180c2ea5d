"""Which nodes share a rack-scale NVLink domain (an NVL72 rack: 18 VMs of ND GB200/GB300 v6).

Slurm's topology/block wants one block per NVLink domain, and `create --spare-racks` deletes whole
racks: which VMs form one decides what is deleted. Microsoft Learn documents the rack (18 VMs per
NVL72 rack, D-gb300) but not how to tell which VMs share one (facts §3, §13). A rack's membership
comes from Azure where Azure reports it; what the nodes say is evidence only, since a node's answer
is the node's (two compromised nodes that swap their ClusterUUIDs must not make azgpu delete across
racks). In order:

1. Azure, per scale-set instance since Compute API 2026-03-01 (Azure/azure-rest-api-specs
   Compute/stable/2026-03-01), "reported": `instanceView.interconnectInstanceView.interconnectSubgroupId`,
   "the ID (GUID) of the Interconnect subgroup in which the Virtual Machine was placed". Subgroups belong to
   a Microsoft.Network/interconnectGroups resource whose subgroup scope is `VerticalConnect`, sized 18 for
   Standard_ND128isr_NDR_GB200_v6 (R-sdk-icg): the rack-scale NVLink domain. Where every node of a scale set
   has one, the subgroups are the racks, and the nodes' measurement is checked against them: a node whose
   NVLink domain is not the one most of its rack reports, or a domain claimed in two racks, is disputed
   (`disputes`; the health gate makes such a node inconclusive, and removes no rack while one is).
2. What the nodes measured, "measured", where Azure reports no subgroup: `nvidia-smi -q` reports, under
   "Fabric", each GPU's ClusterUUID and CliqueId, which NVIDIA's own topology tools group multi-node NVLink
   domains by (NVIDIA/topograph, pkg/providers/baremetal/mnnvl.go); nodes that share both share a rack.
   More nodes claiming one domain than a rack holds are disputed.
3. `interconnectBlockProfile.interconnectBlock.id`: the Microsoft.Compute/interconnectBlocks resource the
   VM was allocated from (capacity 18 in the spec's GB300 example,
   interconnectBlockExamples/InterconnectBlocks_Get_InstanceView.json), "reported".
4. None of these: an assumption, stated wherever it is used: consecutive instances (by instance id) of
   one scale set fill one rack, `rack_size` at a time ("assumed").
"""

from __future__ import annotations

from collections import Counter
from typing import Any

SUBGROUP = "azure-interconnect-subgroup"
BLOCK = "azure-interconnect-block"
ASSUMED = "assumed-consecutive-instances"
MEASURED = "nvlink-fabric"  # grouped by what each node's GPUs report (ClusterUUID, CliqueId)
# What a scheduler file says of a rack: measured on the nodes, reported by Azure, or assumed.
BASIS = {MEASURED: "measured", SUBGROUP: "reported", BLOCK: "reported", ASSUMED: "assumed"}


def _get(obj: Any, name: str) -> Any:
    return obj.get(name) if isinstance(obj, dict) else getattr(obj, name, None)


def fabric_of(node: Any) -> dict[str, Any] | None:
    """A node's NVLink fabric as the health gate reports it (NodeResult.fabric, or the "fabric" of its
    as_dict(): clusterUuid, cliqueId, state, status, complete), or None where the node has none."""
    fabric = _get(node, "fabric")
    if fabric is None:
        return None
    if not isinstance(fabric, dict):
        fabric = fabric.as_dict() if hasattr(fabric, "as_dict") else vars(fabric)
    return fabric


def fabric_complete(fabric: dict[str, Any] | None) -> bool:
    """nvidia-smi -q: a GPU has joined its NVLink domain when its Fabric State is Completed and its
    Status Success (NVIDIA Fabric Manager user guide; Azure/azhpc-images verify_nvlink_setup)."""
    if not fabric:
        return False
    if fabric.get("complete") is not None:
        return bool(fabric["complete"]) and bool(fabric.get("clusterUuid"))
    return (str(fabric.get("state", "")).lower() == "completed" and str(fabric.get("status", "")).lower() == "success"
            and bool(fabric.get("clusterUuid")))


def fabric_domain(fabric: dict[str, Any] | None) -> str | None:
    """The NVLink domain a node measured: "ClusterUUID/CliqueId" (NVIDIA/topograph groups multi-node
    NVLink domains by both), None unless the fabric is complete."""
    if not fabric_complete(fabric):
        return None
    return f"{fabric['clusterUuid']}/{fabric.get('cliqueId')}"


def _reported(nodes: list[dict], signals: dict) -> bool:
    """Azure reported an interconnect subgroup for every one of these nodes."""
    return bool(nodes) and all(signals.get(n["hostname"], {}).get("subgroup") for n in nodes)


def _keys(nodes: list[dict], signals: dict, fabrics: dict, rack_size: int) -> list[tuple[str, str, str | None]]:
    """(source, group key, rack id) per node: Azure's subgroup where it reports one for every node; else the
    node's own measurement, else Azure's block, else its place in instance order."""
    if _reported(nodes, signals):
        ids = [signals[n["hostname"]]["subgroup"] for n in nodes]
        return [(SUBGROUP, f"s:{subgroup}", subgroup) for subgroup in ids]
    keys = []
    complete_block = all(signals.get(n["hostname"], {}).get("block") for n in nodes)
    for index, n in enumerate(nodes):
        signal = signals.get(n["hostname"], {})
        domain = fabric_domain(fabrics.get(n["hostname"]))
        if domain:
            keys.append((MEASURED, f"m:{domain}", domain))
        elif complete_block:
            keys.append((BLOCK, f"b:{signal['block']}", signal["block"]))
        else:
            keys.append((ASSUMED, f"a:{index // rack_size}", None))
    return keys


def disputes(domains: list[dict[str, Any]], signals: dict[str, dict[str, str | None]],
             fabrics: dict[str, dict | None], rack_size: int) -> dict[str, str]:
    """hostname -> why the rack a node's GPUs report cannot be taken as its rack.

    Where Azure reports every node's subgroup, the NVLink domain most of a subgroup's nodes report is that
    rack's: a node reporting another, a domain reported as the majority in two racks, or a rack whose nodes
    share none, is disputed. Where Azure reports none, nodes are checked against each other only: more
    of them claiming one domain than a rack holds are disputed. A node without a complete fabric is not
    judged here (its fabric check fails it already)."""
    out: dict[str, str] = {}
    for domain in domains:
        nodes = [n["hostname"] for n in domain["nodes"]]
        measured = {h: fabric_domain(fabrics.get(h)) for h in nodes}
        if not _reported(domain["nodes"], signals):
            counts = Counter(d for d in measured.values() if d)
            for h, d in measured.items():
                if d and counts[d] > rack_size:
                    out[h] = (f"{counts[d]} nodes report NVLink domain {d}, more than the {rack_size} of one rack; "
                              "Azure reports no rack to tell which belong to it")
            continue
        members: dict[str, list[str]] = {}
        for h in nodes:
            members.setdefault(signals[h]["subgroup"], []).append(h)
        majority: dict[str, str] = {}
        for subgroup, hosts in members.items():
            counts = Counter(measured[h] for h in hosts if measured[h])
            if counts:
                top, n = counts.most_common(1)[0]
                if 2 * n > sum(counts.values()):
                    majority[subgroup] = top
        claimed = Counter(majority.values())
        for subgroup, hosts in members.items():
            for h in hosts:
                d = measured[h]
                if not d:
                    continue
                if subgroup not in majority:
                    out[h] = (f"the nodes Azure places in rack {subgroup} (interconnect subgroup) report no common "
                              f"NVLink domain (this one: {d})")
                elif d != majority[subgroup]:
                    out[h] = (f"its GPUs report NVLink domain {d}, while Azure places it in rack {subgroup}, whose "
                              f"other nodes report {majority[subgroup]}")
                elif claimed[d] > 1:
                    out[h] = f"NVLink domain {d} is reported by most nodes of {claimed[d]} of Azure's racks"
    return out


def group(cluster: str, domains: list[dict[str, Any]], signals: dict[str, dict[str, str | None]],
          rack_size: int, fabrics: dict[str, dict | None] | None = None,
          excluded: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """The racks of a cluster: one entry per NVLink domain, in instance order.

    `domains` are the outputs' InfiniBand domains (nodes in instance order); `signals` maps a
    hostname to the ids Azure reported for it ({"subgroup": ..., "block": ...}, None when absent);
    `fabrics` maps a hostname to the NVLink fabric its health check read (racks.fabric_of);
    `excluded` maps hostnames left out of the scheduler files to why. Racks never cross scale sets:
    splitting a rack in two blocks costs locality, joining two racks into one block would promise
    NVLink where there is none. Each rack says what its grouping rests on (`basis`), whether Azure's
    subgroups agree with what the nodes measured, and how many of its planned VMs it is short.
    """
    fabrics, excluded = fabrics or {}, excluded or {}
    racks: list[dict[str, Any]] = []
    for domain in domains:
        nodes = domain["nodes"]
        if not nodes:
            continue
        keys = _keys(nodes, signals, fabrics, rack_size)
        found: dict[str, dict[str, Any]] = {}
        for node, (source, key, rack_id) in zip(nodes, keys, strict=True):
            entry = found.setdefault(key, {"source": source, "id": rack_id, "members": []})
            entry["members"].append(node)
        disputed = disputes([domain], signals, fabrics, rack_size) if fabrics else {}
        for entry in found.values():
            members = [n["hostname"] for n in entry["members"]]
            unmeasured = [h for h in members if entry["source"] in (MEASURED, SUBGROUP) and fabrics
                          and not fabric_domain(fabrics.get(h))]
            subgroups = sorted({s for s in (signals.get(h, {}).get("subgroup") for h in members) if s})
            kept = [h for h in members if h not in excluded]
            rack = {
                "name": f"{cluster}-rack{len(racks):03d}",
                "scale_set": domain["scale_set"],
                "source": entry["source"],
                "basis": BASIS[entry["source"]],
                "id": entry["id"],
                "nodes": kept,
                "planned": rack_size,
                "short": max(0, rack_size - len(kept)),
            }
            if excluded.keys() & set(members):
                rack["excluded"] = [{"hostname": h, "reason": excluded[h]} for h in members if h in excluded]
            if unmeasured:
                rack["fabric_not_complete"] = unmeasured
            if entry["source"] == MEASURED and subgroups:
                rack["azure_subgroups"] = subgroups
            if entry["source"] == SUBGROUP and fabrics:
                domains_seen = sorted({d for d in (fabric_domain(fabrics.get(h)) for h in members) if d})
                rack["nvlink_domains"] = domains_seen
                rack["agrees_with_azure"] = not (disputed.keys() & set(members))
            if disputed.keys() & set(members):
                rack["disputed"] = [{"hostname": h, "reason": disputed[h]} for h in members if h in disputed]
            racks.append(rack)
        if fabrics:
            _cross_check(racks, signals)
    return racks


def _cross_check(racks: list[dict[str, Any]], signals: dict) -> None:
    """Where Azure reports subgroups: a measured rack should lie in one subgroup and a subgroup in one
    measured rack. Disagreement is shown on the racks, never resolved silently: the nodes' own
    measurement decides the scheduler's blocks."""
    owners: dict[str, list[str]] = {}
    for rack in racks:
        for subgroup in rack.get("azure_subgroups", ()):
            owners.setdefault(subgroup, []).append(rack["name"])
    for rack in racks:
        if rack["source"] != MEASURED or "azure_subgroups" not in rack:
            continue
        split = [s for s in rack["azure_subgroups"] if len(owners[s]) > 1]
        rack["agrees_with_azure"] = len(rack["azure_subgroups"]) == 1 and not split
