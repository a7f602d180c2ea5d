"""Capacity reservations against the live subscription (compute api 2026-04-01): the preflight of
create --capacity-reservation-group, and `provision reserve` (a group and one reservation in it).

Reads use the group's instance view (reserved and used per reservation) and the size's Resource SKU
capabilities CapacityReservationSupported and SupportedCapacityReservationTypes. A reservation bills
at the pay-as-you-go rate whether VMs use it or not (Learn, D-crg), so `reserve` prices it and asks.
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..capacity import parse_group_id
from ..errors import AzureError, Finding, InputError
from ..naming import location_name
from ..resource_types import CAPACITY_RESERVATION_GROUP
from ..sources import cite
from .arm import SOURCE_SKUS, norm_family

if TYPE_CHECKING:
    from .preflight import Preflight

SOURCE = "Azure capacity reservation groups API (az capacity reservation group show --instance-view)"
MANAGED_TAGS = {"managed-by": "azgpu"}


def _wire(body: dict) -> dict[str, Any]:
    """A PUT body sent as written, at azgpu's compute api-version: an older client's model would drop
    what it does not know (reservationType, without which a Block group is a Targeted one)."""
    return {"parameters": io.BytesIO(json.dumps(body).encode()), "content_type": "application/json",
            "api_version": CAPACITY_RESERVATION_GROUP.api_version}


def _prop(obj: Any, name: str) -> Any:
    """A model's property under .properties (newer SDKs) or flattened onto it (older ones)."""
    props = getattr(obj, "properties", None)
    value = getattr(props, name, None) if props is not None else None
    return value if value is not None else getattr(obj, name, None)


@dataclass
class Held:
    """One reservation of a group, as its instance view reports it."""

    name: str
    size: str
    zones: list[str]
    reserved: int
    used: int

    @property
    def free(self) -> int:
        return max(0, self.reserved - self.used)

    def as_dict(self) -> dict[str, Any]:
        return {"reservation": self.name, "size": self.size, "zones": self.zones, "reserved": self.reserved,
                "used": self.used, "free": self.free}


def read_group(session, group_id: str) -> tuple[Any | None, list[Held]]:
    """The group (None when it does not exist) and its reservations with their use."""
    ref = parse_group_id(group_id)
    compute = session.compute_for(ref["sub"])
    try:
        group = compute.capacity_reservation_groups.get(ref["rg"], ref["name"], expand="instanceView")
    except Exception as exc:
        if getattr(exc, "status_code", None) == 404:
            return None, []
        raise
    view = _prop(group, "instance_view")
    used = {}
    for r in getattr(view, "capacity_reservations", None) or []:
        info = getattr(r, "utilization_info", None)
        used[(r.name or "").lower()] = (getattr(info, "current_capacity", None),
                                        len(getattr(info, "virtual_machines_allocated", None) or []))
    held = []
    for r in compute.capacity_reservations.list_by_capacity_reservation_group(ref["rg"], ref["name"]):
        current, in_use = used.get((r.name or "").lower(), (None, 0))
        reserved = current if current is not None else (r.sku.capacity or 0)
        held.append(Held(r.name, r.sku.name, sorted(r.zones or []), int(reserved), int(in_use)))
    return group, held


def check_group(pf: Preflight, session, spec, nodes_needed: int) -> None:
    """create --capacity-reservation-group: the group holds room for the nodes this run adds, for this size,
    location and zone; otherwise they would deploy outside the reservation, without its guarantee."""
    group_id = spec.request.capacity_reservation_group
    ref = parse_group_id(group_id)
    size, loc, zone = spec.size.name, spec.request.location, spec.request.zone
    if (pf.capabilities.get("CapacityReservationSupported") or "").lower() == "false":
        pf.findings.append(Finding(code="CAPACITY_RESERVATION_UNSUPPORTED",
                                   message=f"{size} reports CapacityReservationSupported=False in {loc}: it cannot be reserved",
                                   remedy="drop --capacity-reservation-group, or choose a size or location that supports it "
                                   f"('az vm list-skus -l {loc} --size {size}' capabilities)", source=SOURCE_SKUS))
    group, held = read_group(session, group_id)
    if group is None:
        pf.findings.append(Finding(code="CAPACITY_RESERVATION_GROUP_NOT_FOUND",
                                   message=f"capacity reservation group '{ref['name']}' (resource group {ref['rg']}) does not exist",
                                   remedy="create it with 'provision reserve', or pass an existing group's ID",
                                   source=SOURCE))
        return
    where = location_name(group.location)
    if where != location_name(loc):
        pf.findings.append(Finding(code="CAPACITY_RESERVATION_WRONG_LOCATION",
                                   message=f"capacity reservation group '{ref['name']}' is in {where}, the cluster in {loc}",
                                   remedy=f"pass -l {where}, or a group in {loc}", source=SOURCE))
        return
    mine = next((h for h in held if h.size.lower() == size.lower()), None)
    info = {"group": group_id, "size": size, "nodes_needed": nodes_needed,
            "reservations": [h.as_dict() for h in held]}
    pf.reservation = info
    if mine is None:
        pf.findings.append(Finding(code="CAPACITY_RESERVATION_NO_SIZE",
                                   message=f"capacity reservation group '{ref['name']}' holds no reservation for {size} "
                                   f"(it holds: {', '.join(h.size for h in held) or 'none'}): the nodes would deploy "
                                   "outside any reservation",
                                   remedy=f"add one: 'provision reserve -g {ref['rg']} --group {ref['name']} --size {size} "
                                   f"--count {nodes_needed} -l {loc}'", source=SOURCE))
        return
    if mine.zones and zone not in mine.zones:
        pf.findings.append(Finding(code="CAPACITY_RESERVATION_ZONE",
                                   message=f"reservation '{mine.name}' holds {size} in zone {', '.join(mine.zones)}; the cluster "
                                   f"asks for {'zone ' + zone if zone else 'no zone'}",
                                   remedy=f"pass --zone {mine.zones[0]}", source=SOURCE))
    elif not mine.zones and zone:
        pf.findings.append(Finding(code="CAPACITY_RESERVATION_ZONE",
                                   message=f"reservation '{mine.name}' is regional; the cluster asks for zone {zone}",
                                   remedy="drop --zone", source=SOURCE))
    if nodes_needed > mine.free:
        pf.findings.append(Finding(
            code="CAPACITY_RESERVATION_FULL",
            message=f"reservation '{mine.name}' holds {mine.reserved} {size}, {mine.used} in use, {mine.free} free; this run "
            f"adds {nodes_needed} node(s): {nodes_needed - mine.free} would deploy outside the reservation, "
            "without its capacity guarantee",
            remedy=f"raise its capacity to {mine.used + nodes_needed} ('az capacity reservation update -g {ref['rg']} "
            f"-c {ref['name']} -n {mine.name} --capacity {mine.used + nodes_needed}'), or pass --nodes so that "
            f"at most {mine.free} are added", source=f"{SOURCE}; {cite(('D-crg',))}"))


# -- provision reserve -------------------------------------------------------------------------------

def reserve_preflight(session, *, location: str, size: str, count: int, zone: str | None,
                      reservation_type: str) -> list[Finding]:
    """What Azure would refuse: a size that cannot be reserved (or not as Block), a zone it lacks, and
    quota for the reserved VMs (Learn: a reservation needs quota like the VMs themselves)."""
    compute = session.compute
    skus = [s for s in compute.resource_skus.list(filter=f"location eq '{location}'")
            if (s.name or "").lower() == size.lower() and s.resource_type == "virtualMachines"]
    if not skus:
        return [Finding(code="SKU_NOT_OFFERED", message=f"{size} is not offered in {location}",
                        remedy="choose another -l/--location",
                        source=SOURCE_SKUS)]
    sku = skus[0]
    caps = {c.name: c.value for c in sku.capabilities or []}
    out: list[Finding] = []
    if (caps.get("CapacityReservationSupported") or "").lower() != "true":
        out.append(Finding(code="CAPACITY_RESERVATION_UNSUPPORTED",
                           message=f"{size} reports CapacityReservationSupported="
                           f"{caps.get('CapacityReservationSupported', 'absent')} in {location}: it cannot be reserved",
                           remedy="choose a size or location whose Resource SKU capabilities allow it",
                           source=SOURCE_SKUS))
    types = [t.strip() for t in (caps.get("SupportedCapacityReservationTypes") or "").split(",") if t.strip()]
    if reservation_type == "Block" and "block" not in {t.lower() for t in types}:
        out.append(Finding(code="CAPACITY_RESERVATION_TYPE_UNSUPPORTED",
                           message=f"{size} lists SupportedCapacityReservationTypes={','.join(types) or 'none'} in {location}: "
                           "no Block reservations", remedy="pass --type Targeted", source=SOURCE_SKUS))
    zones = sorted(z for info in sku.location_info or [] for z in (info.zones or []))
    if zone and zone not in zones:
        out.append(Finding(code="ZONE_NOT_OFFERED",
                           message=f"{size} has no zone {zone} in {location} (zones: {', '.join(zones) or 'none'})",
                           remedy="pass another --zone, or none", source=SOURCE_SKUS))
    vcpus = int(caps.get("vCPUs") or 0) * count
    usages = {norm_family(u.name.value): u for u in compute.usage.list(location)}
    for key in (sku.family or "", "cores"):
        u = usages.get(norm_family(key))
        if u is not None and u.current_value + vcpus > u.limit:
            out.append(Finding(code="QUOTA_INSUFFICIENT",
                               message=f"vCPU quota {u.name.value} in {location}: usage {u.current_value} + "
                               f"{vcpus} reserved exceeds the limit {u.limit}; a reservation needs quota like its VMs",
                               remedy=f"request {u.current_value + vcpus} with 'provision quota request', or reserve fewer",
                               source="Azure usage API (az vm list-usage)"))
    return out


def create_reservation(session, *, resource_group: str, group: str, name: str, location: str, size: str,
                       count: int, zone: str | None, reservation_type: str) -> dict[str, Any]:
    """The group (created or kept) and the reservation in it, tagged as azgpu's."""
    from .arm import to_azure_error

    zones = [zone] if zone else None
    try:
        rg = session.resources.resource_groups
        if not rg.check_existence(resource_group):
            rg.create_or_update(resource_group, {"location": location, "tags": MANAGED_TAGS})
        existing = None
        try:
            existing = session.compute.capacity_reservation_groups.get(resource_group, group)
        except Exception as exc:
            if getattr(exc, "status_code", None) != 404:
                raise
        if existing is not None and (existing.tags or {}).get("managed-by") != "azgpu":
            raise InputError(f"capacity reservation group '{group}' exists and azgpu did not create it",
                             code="CAPACITY_RESERVATION_GROUP_NOT_OURS",
                             remedy="pass another --group, or add the reservation with 'az capacity reservation create'")
        if existing is None:
            body = {"location": location, "tags": MANAGED_TAGS, "properties": {"reservationType": reservation_type}}
            if zones:
                body["zones"] = zones
            session.compute.capacity_reservation_groups.create_or_update(resource_group, group, **_wire(body))
        body = {"location": location, "tags": MANAGED_TAGS, "sku": {"name": size, "capacity": count}}
        if zones:
            body["zones"] = zones
        reservation = session.compute.capacity_reservations.begin_create_or_update(
            resource_group, group, name, **_wire(body)).result()
    except (InputError, AzureError):
        raise
    except Exception as exc:
        raise to_azure_error(exc, f"reserving {count} {size} in {location}") from None
    return {"group": f"/subscriptions/{session.subscription_id}/resourceGroups/{resource_group}"
                     f"{CAPACITY_RESERVATION_GROUP.provider_path(group)}",
            "reservation": reservation.name, "size": size, "count": count, "zones": zones or [],
            "type": reservation_type, "provisioning_state": str(_prop(reservation, "provisioning_state") or "")}


def delete_reservations(session, resource_group: str, group: str, *, confirm) -> dict[str, Any]:
    """Delete a group azgpu created and its reservations, after confirm(names) says yes; never one it did not."""
    from .arm import to_azure_error

    try:
        found = session.compute.capacity_reservation_groups.get(resource_group, group)
    except Exception as exc:
        if getattr(exc, "status_code", None) == 404:
            raise InputError(f"no capacity reservation group '{group}' in {resource_group}",
                             code="CAPACITY_RESERVATION_GROUP_NOT_FOUND", remedy="check -g and --group") from None
        raise to_azure_error(exc, f"reading capacity reservation group {group}") from None
    if (found.tags or {}).get("managed-by") != "azgpu":
        raise InputError(f"capacity reservation group '{group}' was not created by azgpu: azgpu does not delete it",
                         code="CAPACITY_RESERVATION_GROUP_NOT_OURS",
                         remedy=f"delete it yourself if you mean to: 'az capacity reservation group delete -g "
                                f"{resource_group} -n {group}'")
    used = _prop(found, "virtual_machines_associated") or []
    if used:
        # Azure deletes a group only once no VM uses it; deleting its reservations first would drop the
        # guarantee of VMs that still run.
        raise InputError(f"capacity reservation group '{group}' is still used by {len(used)} VM(s)",
                         code="CAPACITY_RESERVATION_GROUP_IN_USE",
                         remedy="destroy the clusters that use it first ('provision destroy'), then release it")
    names = [r.name for r in session.compute.capacity_reservations.list_by_capacity_reservation_group(resource_group, group)]
    if not confirm(names):
        return {"group": group, "deleted": []}
    try:
        for n in names:
            session.compute.capacity_reservations.begin_delete(resource_group, group, n).result()
        groups = session.compute.capacity_reservation_groups
        # A long-running delete in newer clients (begin_delete), a plain one in older ones.
        if hasattr(groups, "begin_delete"):
            groups.begin_delete(resource_group, group).result()
        else:
            groups.delete(resource_group, group)
    except Exception as exc:
        raise to_azure_error(exc, f"deleting capacity reservation group {group}") from None
    return {"group": group, "deleted": [*names, group]}
