"""Which nodes share a rack-scale NVLink domain (an NVL72 rack: 18 VMs of ND GB200/GB300 v6).

Slurm's topology/block wants one block per NVLink domain. Microsoft Learn documents the rack
(18 VMs per NVL72 rack, D-gb300) but not how to tell which VMs share one (facts §3, §13). Best
first:

0. What the nodes measured: `nvidia-smi -q` reports, under "Fabric", each GPU's ClusterUUID and
   CliqueId, which NVIDIA's own topology tools group multi-node NVLink domains by (NVIDIA/topograph,
   pkg/providers/baremetal/mnnvl.go); the health gate reads them (NodeResult.fabric), and nodes that
   share both share a rack ("measured"). Azure's subgroups below cross-check it.

What Azure exposes per scale-set instance since Compute API 2026-03-01 (the installed
azure-mgmt-compute models, Azure/azure-rest-api-specs Compute/stable/2026-03-01), "reported":

1. `instanceView.interconnectInstanceView.interconnectSubgroupId`: "the ID (GUID) of the
   Interconnect subgroup in which the Virtual Machine was placed". Subgroups belong to a
   Microsoft.Network/interconnectGroups resource whose subgroup scope is `VerticalConnect`, sized
   18 for Standard_ND128isr_NDR_GB200_v6 (R-sdk-icg): the rack-scale NVLink domain.
2. `interconnectBlockProfile.interconnectBlock.id`: the Microsoft.Compute/interconnectBlocks
   resource the VM was allocated from (capacity 18 in the spec's GB300 example,
   interconnectBlockExamples/InterconnectBlocks_Get_InstanceView.json).
3. Neither: an assumption, stated wherever it is used: consecutive instances (by instance id) of
   one scale set fill one rack, `rack_size` at a time ("assumed").
"""

from __future__ import annotations

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


def _keys(nodes: list[dict], signals: dict, fabrics: dict, rack_size: int) -> list[tuple[str, str, str | None]]:
    """(source, group key, rack id) per node. A node's own measurement first; a node without one
    (fabric not complete) joins the measured rack of the nodes Azure reports in its subgroup, else
    Azure's subgroup or block, else its place in instance order."""
    by_subgroup: dict[str, set[str]] = {}
    for n in nodes:
        domain = fabric_domain(fabrics.get(n["hostname"]))
        subgroup = signals.get(n["hostname"], {}).get("subgroup")
        if domain and subgroup:
            by_subgroup.setdefault(subgroup, set()).add(domain)
    keys = []
    complete = {key: all(signals.get(n["hostname"], {}).get(key) for n in nodes) for key in ("subgroup", "block")}
    for index, n in enumerate(nodes):
        signal = signals.get(n["hostname"], {})
        domain = fabric_domain(fabrics.get(n["hostname"]))
        if domain:
            keys.append((MEASURED, f"m:{domain}", domain))
        elif signal.get("subgroup") and len(by_subgroup.get(signal["subgroup"], ())) == 1:
            (domain,) = by_subgroup[signal["subgroup"]]
            keys.append((MEASURED, f"m:{domain}", domain))
        elif complete["subgroup"]:
            keys.append((SUBGROUP, f"s:{signal['subgroup']}", signal["subgroup"]))
        elif complete["block"]:
            keys.append((BLOCK, f"b:{signal['block']}", signal["block"]))
        else:
            keys.append((ASSUMED, f"a:{index // rack_size}", None))
    return keys


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
        for node, (source, key, rack_id) in zip(nodes, keys):
            entry = found.setdefault(key, {"source": source, "id": rack_id, "members": []})
            entry["members"].append(node)
        for entry in found.values():
            members = [n["hostname"] for n in entry["members"]]
            unmeasured = [h for h in members if entry["source"] == MEASURED and not fabric_domain(fabrics.get(h))]
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
