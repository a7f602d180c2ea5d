"""Scale-set instances and their NICs, made when a scale set's create or update succeeds.

Names follow Azure's Uniform scale sets: instance ids "0", "1", ..., VM names `{vmss}_{id}`,
computer names `{prefix}` + the id in base 36 on six digits. Private IPs come from the subnet's
prefix in order, skipping the first four addresses and the last one, which Azure reserves.
A lower capacity removes instances in the order the scale set's scale-in policy documents.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from .. import hardware, node_fault_table
from ..errors import ArmError
from ..lro import iso
from ..store import NIC_TYPE, key, same_id, stable_uuid
from . import vertical_connect

if TYPE_CHECKING:
    from ..backend import Backend

VM_TYPE = "Microsoft.Compute/virtualMachineScaleSets/virtualMachines"
PIP_TYPE = "Microsoft.Network/publicIPAddresses"


def base36(number: int, width: int = 6) -> str:
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while number:
        number, rest = divmod(number, 36)
        out = digits[rest] + out
    return out.rjust(width, "0")


def vms(backend: Backend, vmss: dict) -> list[dict]:
    found = [r for r in backend.store.under(vmss["id"]) if r["type"] == VM_TYPE]
    return sorted(found, key=lambda vm: int(vm["instanceId"]))


def nics(backend: Backend, under_id: str) -> list[dict]:
    return [r for r in backend.store.under(under_id) if r["type"] == NIC_TYPE]


def nic_configs(vmss: dict) -> list[dict]:
    profile = vmss.get("properties", {}).get("virtualMachineProfile", {}) or {}
    return (profile.get("networkProfile") or {}).get("networkInterfaceConfigurations") or []


def ip_configs(nic_config: dict) -> list[dict]:
    return (nic_config.get("properties") or {}).get("ipConfigurations") or []


def subnet_ref(ip_config: dict) -> str | None:
    return ((ip_config.get("properties") or {}).get("subnet") or {}).get("id")


def _prefix(subnet: dict) -> str:
    props = subnet.get("properties", {})
    return props.get("addressPrefix") or (props.get("addressPrefixes") or [""])[0]


def _used(backend: Backend, subnet_id: str) -> set[str]:
    used = set()
    for nic in backend.store.nics_in(subnet_id):
        for ipc in nic["properties"]["ipConfigurations"]:
            if same_id(subnet_ref(ipc), subnet_id):
                used.add(ipc["properties"]["privateIPAddress"])
    return used


def _usable(subnet: dict):
    network = ipaddress.ip_network(_prefix(subnet), strict=False)
    first, last = int(network.network_address) + 4, int(network.broadcast_address) - 1
    return (str(ipaddress.ip_address(n)) for n in range(first, last + 1))


def free_addresses(backend: Backend, subnet_id: str) -> int:
    subnet = backend.find(subnet_id)
    network = ipaddress.ip_network(_prefix(subnet), strict=False)
    return max(0, network.num_addresses - 5) - len(_used(backend, subnet_id))


def check_room(backend: Backend, vmss: dict, previous: dict | None) -> None:
    """ARM refuses a scale set whose subnet cannot hold its NICs: 400 SubnetIsFull."""
    had = int((previous or {}).get("sku", {}).get("capacity", 0) or 0) if previous else 0
    extra = int(vmss["sku"].get("capacity", 0) or 0) - had
    for config in nic_configs(vmss):
        for ipc in ip_configs(config):
            subnet_id = subnet_ref(ipc)
            if subnet_id and extra > 0 and free_addresses(backend, subnet_id) < extra:
                subnet = backend.find(subnet_id)
                raise ArmError(400, "SubnetIsFull", f"Subnet {subnet['name']} with address prefix {_prefix(subnet)} "
                                                    f"does not have enough capacity for {extra} IP addresses.")


def _allocator(backend: Backend) -> Callable[[str], str]:
    """Hands out each subnet's free addresses in order. The used set is read once per subnet, not
    once per NIC: per NIC it made creating N instances take N^2 steps (1,000 nodes: seconds)."""
    pools: dict[str, Iterator[str]] = {}

    def next_ip(subnet_id: str) -> str:
        k = key(subnet_id)
        if k not in pools:
            used = _used(backend, subnet_id)
            pools[k] = (ip for ip in _usable(backend.find(subnet_id)) if ip not in used)
        return next(pools[k])

    return next_ip


def _public_ip(number: int) -> str:
    return f"20.{100 + (number >> 16) % 100}.{(number >> 8) % 256}.{number % 256}"


def _mac(number: int) -> str:
    return "00-0D-3A-" + "-".join(f"{(number >> s) % 256:02X}" for s in (16, 8, 0))


def _make_nic(backend: Backend, vmss: dict, vm_id: str, config: dict, next_ip: Callable[[str], str]) -> dict:
    nic_id = f"{vm_id}/networkInterfaces/{config['name']}"
    props = config.get("properties", {})
    ip_configurations = []
    for ipc in ip_configs(config):
        ipc_id = f"{nic_id}/ipConfigurations/{ipc['name']}"
        ipc_props = ipc.get("properties", {})
        out = {
            "privateIPAddress": next_ip(subnet_ref(ipc)),
            "privateIPAllocationMethod": "Dynamic",
            "privateIPAddressVersion": ipc_props.get("privateIPAddressVersion", "IPv4"),
            "subnet": {"id": subnet_ref(ipc)},
            "primary": ipc_props.get("primary", len(ip_configurations) == 0),
            "provisioningState": "Succeeded",
        }
        public = ipc_props.get("publicIPAddressConfiguration")
        if public:
            pip_id = f"{ipc_id}/publicIPAddresses/{public['name']}"
            pip = {
                "id": pip_id, "name": public["name"], "type": PIP_TYPE, "location": vmss["location"],
                "properties": {"ipAddress": _public_ip(backend.store.next_number()), "publicIPAddressVersion": "IPv4",
                               "publicIPAllocationMethod": "Static", "provisioningState": "Succeeded",
                               "ipConfiguration": {"id": ipc_id}},
            }
            if public.get("sku"):  # the SKU the scale set's publicIPAddressConfiguration asked for
                pip["sku"] = dict(public["sku"])
            backend.store.put(pip)
            out["publicIPAddress"] = {"id": pip_id}
        ip_configurations.append({"id": ipc_id, "name": ipc["name"], "properties": out})
    nic = {
        "id": nic_id, "name": config["name"], "type": NIC_TYPE, "location": vmss["location"],
        "properties": {
            "provisioningState": "Succeeded",
            "resourceGuid": stable_uuid(nic_id),
            "ipConfigurations": ip_configurations,
            "macAddress": _mac(backend.store.next_number()),
            "primary": props.get("primary", True),
            "enableAcceleratedNetworking": props.get("enableAcceleratedNetworking", False),
            "virtualMachine": {"id": vm_id},
        },
    }
    if props.get("networkSecurityGroup"):
        nic["properties"]["networkSecurityGroup"] = {"id": props["networkSecurityGroup"]["id"]}
    return backend.store.put(nic)


def _make_vm(backend: Backend, vmss: dict, instance: int, next_ip: Callable[[str], str]) -> None:
    vm_id = f"{vmss['id']}/virtualMachines/{instance}"
    profile = vmss["properties"].get("virtualMachineProfile", {}) or {}
    os_profile = profile.get("osProfile") or {}
    prefix = os_profile.get("computerNamePrefix", vmss["name"])
    made = [_make_nic(backend, vmss, vm_id, config, next_ip) for config in nic_configs(vmss)]
    vm = {
        "id": vm_id, "name": f"{vmss['name']}_{instance}", "type": VM_TYPE, "location": vmss["location"],
        "instanceId": str(instance),
        "sku": {"name": vmss["sku"]["name"], "tier": vmss["sku"].get("tier", "Standard")},
        "properties": {
            # Read-only, api-version 2021-11-01 and later; NewestVM/OldestVM scale-in go by it.
            "timeCreated": iso(backend.now()),
            "latestModelApplied": True,
            "vmId": stable_uuid(vm_id),
            "provisioningState": "Succeeded",
            "storageProfile": profile.get("storageProfile", {}),
            "osProfile": {"computerName": prefix + base36(instance),
                          **{k: v for k, v in os_profile.items() if k in ("adminUsername", "linuxConfiguration")}},
            "networkProfile": {"networkInterfaces": [
                {"id": nic["id"], "properties": {"primary": nic["properties"]["primary"]}} for nic in made]},
        },
    }
    block = (profile.get("interconnectBlockProfile") or {}).get("interconnectBlock")
    if block:  # Compute 2026-03-01+: each instance reports the interconnect block it was allocated from
        vm["properties"]["interconnectBlockProfile"] = {"interconnectBlock": dict(block)}
    if vmss.get("tags"):
        vm["tags"] = dict(vmss["tags"])
    if vmss.get("zones"):
        vm["zones"] = [vmss["zones"][instance % len(vmss["zones"])]]
    members = vms(backend, vmss)
    backend.store.put(vm)
    node = hardware.new_node(backend.store, vm, vmss)
    # Placed in its rack first: place() sets the rack's healthy NVLink fabric, which would wipe a queued
    # --fabric-incomplete applied before it (the fault then counted as taken and the node passing).
    vertical_connect.place(backend.store, vmss, members, node)
    node_fault_table.apply_pending(backend.store, node)


def fault_domain(vm: dict) -> int:
    return int(vm["instanceId"]) % 3


def _zone(vm: dict) -> str:
    return (vm.get("zones") or [""])[0]


def scale_in_order(vmss: dict, current: list[dict], count: int) -> list[dict]:
    """The `count` instances a lower capacity removes, in the order the scale set's policy takes them.

    Learn, "Use scale-in policies with Azure Virtual Machine Scale Sets": a zone-spanning set is first
    balanced across zones (the zone with the most VMs gives one up); then Default balances fault
    domains (best effort) and deletes the highest instance id, NewestVM the most recently created VM
    and OldestVM the oldest.
    """
    rules = ((vmss.get("properties") or {}).get("scaleInPolicy") or {}).get("rules") or ["Default"]
    rule = str(rules[0]).lower()
    left, out = list(current), []

    def most(items: list[dict], group) -> list[dict]:
        sizes: dict = {}
        for vm in items:
            sizes.setdefault(group(vm), []).append(vm)
        top = max(len(v) for v in sizes.values())
        return [vm for v in sizes.values() if len(v) == top for vm in v]

    for _ in range(min(count, len(left))):
        candidates = most(left, _zone) if len(vmss.get("zones") or []) > 1 else left
        if rule == "newestvm":
            vm = max(candidates, key=lambda v: (v["properties"].get("timeCreated", ""), int(v["instanceId"])))
        elif rule == "oldestvm":
            vm = min(candidates, key=lambda v: (v["properties"].get("timeCreated", ""), int(v["instanceId"])))
        else:
            vm = max(most(candidates, fault_domain), key=lambda v: int(v["instanceId"]))
        left.remove(vm)
        out.append(vm)
    return out


def delete_instances(backend: Backend, vmss: dict, instance_ids: list[str]) -> int:
    """Remove the named instances and lower sku.capacity by as many; returns how many went."""
    wanted = {str(i) for i in instance_ids}
    gone = [vm for vm in vms(backend, vmss) if vm["instanceId"] in wanted]
    for vm in gone:
        backend.remove(vm["id"])
    vmss["sku"]["capacity"] = max(0, int(vmss["sku"].get("capacity", 0) or 0) - len(gone))
    backend.dirty = True
    return len(gone)


def reconcile(backend: Backend, vmss: dict) -> None:
    """Make the instances match sku.capacity: scale in as the scale-in policy says, scale out after
    the highest id."""
    capacity = int(vmss.get("sku", {}).get("capacity", 0) or 0)
    current = vms(backend, vmss)
    for vm in scale_in_order(vmss, current, len(current) - capacity):
        backend.remove(vm["id"])
    next_id = int(current[-1]["instanceId"]) + 1 if current else 0
    current = vms(backend, vmss)
    # Azure never reuses the id of a deleted instance: scale-out continues after the highest ever.
    next_id = max(next_id, backend.store.instance_ids.get(key(vmss["id"]), 0))
    next_ip = _allocator(backend)
    for number in range(next_id, next_id + capacity - len(current)):
        _make_vm(backend, vmss, number, next_ip)
        backend.store.instance_ids[key(vmss["id"])] = number + 1
    backend.dirty = True


def instance_view(vm: dict) -> dict:
    return {
        "platformUpdateDomain": int(vm["instanceId"]) % 5,
        "platformFaultDomain": fault_domain(vm),
        "computerName": vm["properties"]["osProfile"]["computerName"],
        "statuses": [
            {"code": "ProvisioningState/succeeded", "level": "Info", "displayStatus": "Provisioning succeeded"},
            {"code": "PowerState/running", "level": "Info", "displayStatus": "VM running"},
        ],
    }
