"""Which nodes share a rack-scale NVLink domain (an NVL72 rack: 18 VMs of ND GB200/GB300 v6).

Slurm's topology/block wants one block per NVLink domain. Microsoft Learn documents the rack
(18 VMs per NVL72 rack, D-gb300) but not how to tell which VMs share one (facts §3, §13). What
Azure exposes per scale-set instance since Compute API 2026-03-01 (the installed azure-mgmt-compute
models, Azure/azure-rest-api-specs Compute/stable/2026-03-01), best first:

1. `instanceView.interconnectInstanceView.interconnectSubgroupId`: "the ID (GUID) of the
   Interconnect subgroup in which the Virtual Machine was placed". Subgroups belong to a
   Microsoft.Network/interconnectGroups resource whose subgroup scope is `VerticalConnect`, sized
   18 for Standard_ND128isr_NDR_GB200_v6 (R-sdk-icg): the rack-scale NVLink domain.
2. `interconnectBlockProfile.interconnectBlock.id`: the Microsoft.Compute/interconnectBlocks
   resource the VM was allocated from (capacity 18 in the spec's GB300 example,
   interconnectBlockExamples/InterconnectBlocks_Get_InstanceView.json).
3. Neither: an assumption, stated wherever it is used: consecutive instances (by instance id) of
   one scale set fill one rack, `rack_size` at a time.

A node can tell for itself: `nvidia-smi -q` reports, under "Fabric", the ClusterUUID and CliqueId
that NVIDIA's own topology tools group multi-node NVLink domains by (NVIDIA/topograph,
pkg/providers/baremetal/mnnvl.go). Once Azure documents one of the signals, only `group` changes.
"""

from __future__ import annotations

from typing import Any

SUBGROUP = "azure-interconnect-subgroup"
BLOCK = "azure-interconnect-block"
ASSUMED = "assumed-consecutive-instances"


def _by(nodes: list[dict], ids: list[str]) -> list[tuple[str, list[dict]]]:
    groups: dict[str, list[dict]] = {}
    for node, key in zip(nodes, ids):
        groups.setdefault(key, []).append(node)
    return list(groups.items())  # in the order of each group's first instance


def group(cluster: str, domains: list[dict[str, Any]], signals: dict[str, dict[str, str | None]],
          rack_size: int) -> list[dict[str, Any]]:
    """The racks of a cluster: one entry per NVLink domain, in instance order.

    `domains` are the outputs' InfiniBand domains (nodes in instance order); `signals` maps a
    hostname to the ids Azure reported for it ({"subgroup": ..., "block": ...}, None when absent).
    Racks never cross scale sets: splitting a rack in two blocks costs locality, joining two racks
    into one block would promise NVLink where there is none.
    """
    racks: list[dict[str, Any]] = []
    for domain in domains:
        nodes = domain["nodes"]
        if not nodes:
            continue
        found = None
        for source, key in ((SUBGROUP, "subgroup"), (BLOCK, "block")):
            ids = [signals.get(n["hostname"], {}).get(key) for n in nodes]
            if all(ids):
                found = [(source, rack_id, members) for rack_id, members in _by(nodes, ids)]
                break
        if found is None:
            found = [(ASSUMED, None, nodes[i:i + rack_size]) for i in range(0, len(nodes), rack_size)]
        for source, rack_id, members in found:
            racks.append({
                "name": f"{cluster}-rack{len(racks):03d}",
                "scale_set": domain["scale_set"],
                "source": source,
                "id": rack_id,
                "nodes": [n["hostname"] for n in members],
            })
    return racks
