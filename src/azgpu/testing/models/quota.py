"""Compute usages and quota (vCPU families, Total Regional vCPUs, lowPriorityCores).

A location's usage is what a test set with set_quota plus the vCPUs of the fake's own scale sets and
capacity reservations, so creating either raises it and deleting it lowers it without any bookkeeping.
A reservation holds quota for its whole capacity, and a scale set's VMs that its reservation holds are not
counted again (Learn, capacity reservation overview: "Because the reservation itself requires a quota, the
quota checks are omitted for VM deployment up to the reserved quantity"; models/capacity_reservations.py).
"""

from __future__ import annotations

import re

from ..errors import ArmError
from ..skus import SkuCatalog, capability, is_gpu, normalize_location
from ..store import Store
from . import capacity_reservations as crg

REGIONAL = "cores"
LOW_PRIORITY = "lowPriorityCores"
GPU_FAMILY_LIMIT = 1000  # a subscription that already got a GPU quota increase
GENERAL_FAMILY_LIMIT = 100
FIXED = {
    REGIONAL: ("Total Regional vCPUs", 5000),
    LOW_PRIORITY: ("Total Regional Low-priority vCPUs", 1000),
    "virtualMachines": ("Virtual Machines", 25000),
    "virtualMachineScaleSets": ("Virtual Machine Scale Sets", 2500),
    "availabilitySets": ("Availability Sets", 2500),
}
VMSS_TYPE = "Microsoft.Compute/virtualMachineScaleSets"
# Keys of FakeAzure(quota_limits=...): these two, or any usage name of FIXED ("cores", ...).
GPU_FAMILY = "gpuFamily"  # every vCPU family whose sizes have GPUs
GENERAL_FAMILY = "family"  # every other vCPU family


def norm(name: str) -> str:
    """Family strings come with irregular spaces and case (facts §4): compare them normalised."""
    return name.replace(" ", "").lower()


def family_label(family: str) -> str:
    middle = re.sub(r"(?i)\s*family$", "", re.sub(r"(?i)^standard\s*", "", family)).strip()
    return f"Standard {middle} Family vCPUs"


def is_spot(vmss: dict) -> bool:
    priority = vmss.get("properties", {}).get("virtualMachineProfile", {}).get("priority", "Regular")
    return str(priority).lower() in ("spot", "low")


def _demand(vmss: dict, skus: SkuCatalog, reserved: int = 0) -> dict[str, int]:
    """Quota names -> amount this scale set holds; `reserved` of its VMs are its reservation's (no vCPU quota)."""
    sku = skus.find(vmss["location"], vmss.get("sku", {}).get("name", "")) or {}
    count = int(vmss.get("sku", {}).get("capacity", 0) or 0)
    vcpus = (count - reserved) * int(capability(sku, "vCPUs", "0"))
    out = {"virtualMachines": count, "virtualMachineScaleSets": 1}
    if is_spot(vmss):
        out[norm(LOW_PRIORITY)] = vcpus
    else:
        out[norm(REGIONAL)] = vcpus
        if sku.get("family"):
            out[norm(sku["family"])] = vcpus
    return {norm(k): v for k, v in out.items()}


def _reservation_demand(reservation: dict, skus: SkuCatalog) -> dict[str, int]:
    """A capacity reservation holds the vCPU quota of its VMs, family and regional (Learn: "Creating capacity
    reservations requires a quota in the same manner as when you create VMs")."""
    sku = skus.find(reservation["location"], (reservation.get("sku") or {}).get("name", "")) or {}
    vcpus = int((reservation.get("sku") or {}).get("capacity") or 0) * int(capability(sku, "vCPUs", "0"))
    out = {norm(REGIONAL): vcpus}
    if sku.get("family"):
        out[norm(sku["family"])] = vcpus
    return out


def usages(store: Store, skus: SkuCatalog, location: str, candidate: dict | None = None) -> list[dict]:
    """The location's usages; `candidate`: a scale set or reservation about to be written, counted in place of its
    stored version (what the usage would be once it is)."""
    location = normalize_location(location)
    entries: dict[str, dict] = {}

    def entry(value: str, label: str, limit: int) -> None:
        entries.setdefault(norm(value), {"unit": "Count", "currentValue": 0, "limit": limit,
                                         "name": {"value": value, "localizedValue": label}})

    defaults = store.limits
    for value, (label, limit) in FIXED.items():
        entry(value, label, defaults.get(value, limit))
    gpu_limit = defaults.get(GPU_FAMILY, GPU_FAMILY_LIMIT)
    general_limit = defaults.get(GENERAL_FAMILY, GENERAL_FAMILY_LIMIT)
    for sku in skus.read_only(location):
        entry(sku["family"], family_label(sku["family"]), gpu_limit if is_gpu(sku) else general_limit)
    for name, values in store.quota.get(location, {}).items():
        entry(values.get("value", name), values.get("label", family_label(name)), 0)
        e = entries[norm(name)]
        if values.get("limit") is not None:
            e["limit"] = values["limit"]
        e["currentValue"] = values.get("usage") or 0
    sets = {v["id"].lower(): v for v in store.of_type(VMSS_TYPE)}
    held_candidate = None
    if candidate is not None:
        candidate = {**candidate, "properties": {k: v for k, v in (candidate.get("properties") or {}).items()
                                                 if k != "provisioningState"}}
        if candidate.get("type", "").lower() == VMSS_TYPE.lower():
            sets[candidate["id"].lower()] = candidate
        else:
            held_candidate = candidate
    held, covered = crg.reserved_demand(store, location, candidate if held_candidate is None else None,
                                        reservation=held_candidate)
    demands = [_demand(v, skus, covered.get(i, 0)) for i, v in sets.items()
               if normalize_location(v.get("location", "")) == location
               and v.get("properties", {}).get("provisioningState") != "Failed"]
    demands += [_reservation_demand(r, skus) for r in held]
    for demand in demands:
        for name, amount in demand.items():
            if name in entries:
                entries[name]["currentValue"] += amount
    return list(entries.values())


def set_quota(store: Store, skus: SkuCatalog, location: str, name: str, limit: int | None, usage: int | None) -> None:
    location = normalize_location(location)
    wanted = norm(name)
    known = {norm(e["name"]["value"]): e for e in usages(store, skus, location)}
    by_label = {norm(e["name"]["localizedValue"]): e for e in known.values()}
    match = known.get(wanted) or by_label.get(wanted)
    value = match["name"]["value"] if match else name
    slot = store.quota.setdefault(location, {}).setdefault(norm(value), {"value": value})
    if match:
        slot["label"] = match["name"]["localizedValue"]
    if limit is not None:
        slot["limit"] = limit
    if usage is not None:
        slot["usage"] = usage


def check(store: Store, skus: SkuCatalog, resource: dict, previous: dict | None = None) -> None:
    """Raise ARM's synchronous 409 when a scale set (or a capacity reservation) would exceed a vCPU quota: the
    usage once it is written against the usage now (a scale set's VMs its reservation holds add nothing)."""
    del previous  # the stored version is what `usages` counts now; the candidate replaces it
    location = normalize_location(resource["location"])
    current = {norm(e["name"]["value"]): e for e in usages(store, skus, location)}
    after = {norm(e["name"]["value"]): e for e in usages(store, skus, location, candidate=resource)}
    sku = skus.find(location, resource["sku"]["name"]) or {}
    names = [norm(LOW_PRIORITY)] if is_spot(resource) else [norm(sku.get("family", "")), norm(REGIONAL)]
    for name in names:
        e, then = current.get(name), after.get(name)
        if e is None or then is None:
            continue
        extra = then["currentValue"] - e["currentValue"]
        if extra <= 0 or then["currentValue"] <= e["limit"]:
            continue
        raise ArmError(409, "OperationNotAllowed", quota_message(e, location, extra))


def quota_message(e: dict, location: str, extra: int) -> str:
    value = e["name"]["value"]
    label = {norm(REGIONAL): "Total Regional Cores", norm(LOW_PRIORITY): "LowPriorityCores"}.get(norm(value),
                                                                                                 f"{value} Cores")
    return (
        f"Operation could not be completed as it results in exceeding approved {label} quota. "
        f"Additional details - Deployment Model: Resource Manager, Location: {location}, "
        f"Current Limit: {e['limit']}, Current Usage: {e['currentValue']}, Additional Required: {extra}, "
        f"(Minimum) New Limit Required: {e['currentValue'] + extra}. Submit a request for Quota increase at "
        "https://aka.ms/ProdportalCRP/#blade/Microsoft_Azure_Capacity/UsageAndQuota.ReactView by specifying "
        "parameters listed in the 'Details' section for deployment to succeed. Please read more about quota "
        "limits at https://docs.microsoft.com/en-us/azure/azure-supportability/per-vm-quota-requests"
    )
