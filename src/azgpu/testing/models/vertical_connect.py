"""Vertical-connect (rack-scale NVLink) sizes in the fake: ND GB200 v6 and ND GB300 v6.

What Azure answers, as Microsoft's own end-to-end test that provisions a real 18-VM GB300 rack records
it (Azure/AgentBaker e2e/scenario_gb300_managed_driver_test.go @ 338bcb23, Test_Ubuntu2404Arm64_GB300_ManagedDriver):

- singlePlacementGroup left at its default true, or highSpeedInterconnectPlacement set: HTTP 400
  "Vertical Connect Feature is not available for this Virtual Machine Scale Set";
- an ephemeral OS disk on ResourceDisk: InvalidParameter; on NvmeDisk: NotSupported; CacheDisk works.

A third-party GB300 script quotes "Capacity must be a multiple of 18 for SKUs that support vertical
connect" (profiles/sources.toml T-gb300-vmss). Neither source records the error *code* of the two 400s
nor the text of the disk errors: the codes here are our choice (BadRequest), the disk messages ours.
Whether Azure also refuses a delete of single instances that leaves the capacity off a multiple of 18
is not documented; the fake assumes the capacity rule holds for every change of capacity, deletes
included, which is what azgpu must survive either way (docs/gb-racks.md).

Placement: instances fill racks of 18 in the order they are created. Each rack has an interconnect
subgroup id (instanceView.interconnectInstanceView.interconnectSubgroupId, Compute 2026-03-01+) and an
NVLink fabric (ClusterUUID, CliqueId) that the node's `nvidia-smi -q` reports (node["fabric"], the
interface the node script reads). Faults: a node whose fabric state is not complete
(Fake.fabric_incomplete), and a rack short of one node (Fake.short_rack_next: one VM of the next rack
Azure reports in the rack's subgroup sits in an NVLink domain of its own).
"""

from __future__ import annotations

from ..errors import ArmError
from ..store import key, stable_uuid

RACK = 18
SIZES = frozenset({"standard_nd128isr_gb300_v6", "standard_nd128isrg5_gb300_v6", "standard_nd128isr_ndr_gb200_v6"})
NOT_AVAILABLE = "Vertical Connect Feature is not available for this Virtual Machine Scale Set"
CAPACITY = f"Capacity must be a multiple of {RACK} for SKUs that support vertical connect"
# nvidia-smi's default CliqueId on an NVL72 domain nobody partitioned (NVIDIA IMEX guide: one clique per domain).
DEFAULT_CLIQUE = 32766


def applies(vmss: dict) -> bool:
    return str((vmss.get("sku") or {}).get("name", "")).lower() in SIZES


def check(vmss: dict) -> None:
    """Refuse a scale-set body the way Azure refuses it for a vertical-connect size."""
    if not applies(vmss):
        return
    props = vmss.get("properties") or {}
    if props.get("singlePlacementGroup", True) is not False or props.get("highSpeedInterconnectPlacement") not in (None,
                                                                                                                   "None"):
        raise ArmError(400, "BadRequest", NOT_AVAILABLE)
    check_capacity(int((vmss.get("sku") or {}).get("capacity", 0) or 0))
    disk = (((props.get("virtualMachineProfile") or {}).get("storageProfile") or {}).get("osDisk") or {})
    placement = str((disk.get("diffDiskSettings") or {}).get("placement", "")).lower()
    if placement == "resourcedisk":
        raise ArmError(400, "InvalidParameter", "Ephemeral OS disk placement 'ResourceDisk' is not valid for "
                                                f"VM size '{vmss['sku']['name']}'.")
    if placement == "nvmedisk":
        raise ArmError(400, "NotSupported", "Ephemeral OS disk placement 'NvmeDisk' is not supported for "
                                            f"VM size '{vmss['sku']['name']}'.")


def check_capacity(capacity: int) -> None:
    if capacity % RACK:
        raise ArmError(400, "BadRequest", CAPACITY)


def _rack_ids(vmss_id: str, number: int) -> tuple[str, str]:
    """The rack's interconnect subgroup id and its NVLink fabric's ClusterUUID."""
    return stable_uuid(f"{vmss_id}/interconnect-subgroup/{number}"), stable_uuid(f"{vmss_id}/nvl72-fabric/{number}")


def place(store, vmss: dict, members: list[dict], node: dict) -> None:
    """Put a new instance's node in the first rack of the scale set that has room (`members`: the
    scale set's other instances)."""
    profile = (vmss.get("properties") or {}).get("virtualMachineProfile") or {}
    if not applies(vmss) or (profile.get("interconnectBlockProfile") or {}).get("interconnectBlock"):
        # Allocated from an interconnect block, an instance reports the block (instances.py); whether
        # Azure also reports a subgroup then is not documented, so the fake reports none.
        return
    used: dict[int, int] = {}
    for vm in members:
        other = store.nodes.get(key(vm["id"])) or {}
        if "rack" in other:
            used[other["rack"]["number"]] = used.get(other["rack"]["number"], 0) + 1
    number = next(n for n in range(len(used) + 1) if used.get(n, 0) < RACK)
    subgroup, cluster_uuid = _rack_ids(vmss["id"], number)
    node["rack"] = {"number": number, "subgroup": subgroup}
    node["fabric"] = {"clusterUuid": cluster_uuid, "cliqueId": DEFAULT_CLIQUE, "state": "Completed",
                      "status": "Success"}
    pending = store.racks.get("short_next", 0)
    if pending and used.get(number, 0) == 0:
        # The rack's first VM: Azure reports it in the rack, its GPUs see an NVLink domain of their own.
        node["fabric"]["clusterUuid"] = stable_uuid(f"{vmss['id']}/stray-fabric/{node['vm_id']}")
        store.racks["short_next"] = pending - 1


def instance_view(store, vm: dict) -> dict:
    """interconnectInstanceView for a vertical-connect instance (empty elsewhere)."""
    node = store.nodes.get(key(vm["id"])) or {}
    if "rack" not in node:
        return {}
    return {"interconnectInstanceView": {"interconnectSubgroupId": node["rack"]["subgroup"]}}


def break_fabric(node: dict, state: str = "In Progress", status: str = "N/A") -> None:
    """A node whose NVLink fabric never completed registration (nvidia-smi -q: Fabric State/Status)."""
    fabric = node.setdefault("fabric", {"clusterUuid": None, "cliqueId": None})
    fabric.update(state=state, status=status)
    node.setdefault("faults", []).append(f"fabric {state}/{status}")
