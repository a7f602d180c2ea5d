"""`provision capacity`: before anything is created, one table of what stands between a request and
its nodes, per location and zone: the size's SKU restrictions, quota headroom (family, regional total,
spot) and, with a capacity reservation group, the reservation's room. Reads only; each line says what
to do about it.

Azure's spot placement score (Microsoft.Compute/locations/placementScores, the Compute Recommender API)
has only a beta Python client from Microsoft (azure-mgmt-computerecommender 1.0.0b3), which azgpu does not
depend on: a spot request gets a line saying the score was not read, never a made-up one.
"""

from __future__ import annotations

from typing import Any

from ..capacity import parse_group_id
from .arm import norm_family
from .reservations import read_group, utc_now

OK, SHORT, BLOCKED, INFO = "ok", "short", "blocked", "info"


def _row(location, zone, check, status, detail, remedy="") -> dict[str, Any]:
    return {"location": location, "zone": zone or "", "check": check, "status": status, "detail": detail,
            "remedy": remedy}


def _sku_rows(compute, size: str, location: str, zones: list[str]) -> tuple[list[dict], dict | None]:
    skus = [s for s in compute.resource_skus.list(filter=f"location eq '{location}'")
            if (s.name or "").lower() == size.lower() and s.resource_type == "virtualMachines"]
    if not skus:
        from .preflight import offered_remedy

        return [_row(location, "", "sku", BLOCKED, f"{size} is not offered in {location}",
                     offered_remedy(compute, size))], None
    sku = skus[0]
    offered = sorted(z for info in sku.location_info or [] for z in (info.zones or []))
    rows = []
    regional = None
    blocked_zones: set[str] = set()
    for r in sku.restrictions or []:
        reason = getattr(getattr(r, "reason_code", None), "value", getattr(r, "reason_code", "")) or ""
        kind = getattr(getattr(r, "type", None), "value", getattr(r, "type", "")) or ""
        if kind == "Zone":
            blocked_zones |= set(getattr(getattr(r, "restriction_info", None), "zones", None) or [])
        else:
            regional = reason
    if regional is not None:
        rows.append(_row(location, "", "sku", BLOCKED, f"{size} is restricted in {location} for this subscription "
                         f"({regional})", "ask Azure support for access to the size, or choose another location"))
    else:
        rows.append(_row(location, "", "sku", OK, f"{size} is offered in {location}" +
                         (f" (zones {', '.join(offered)})" if offered else " (no availability zones)")))
    for zone in zones:
        if zone not in offered:
            rows.append(_row(location, zone, "sku", BLOCKED, f"{size} has no zone {zone} in {location}",
                             f"use zone {offered[0]}" if offered else "drop the zone: the size is regional here"))
        elif zone in blocked_zones:
            rows.append(_row(location, zone, "sku", BLOCKED, f"{size} is restricted in zone {zone}",
                             "choose another zone"))
        else:
            rows.append(_row(location, zone, "sku", OK, f"{size} is offered in zone {zone}"))
    caps = {c.name: c.value for c in sku.capabilities or []}
    return rows, {"family": sku.family, "caps": caps}


def _quota_rows(compute, location: str, family: str, vcpus: int, spot: bool, size: str = "",
                nodes: int = 0) -> list[dict]:
    usages = {norm_family(u.name.value): u for u in compute.usage.list(location)}
    rows = []
    for key, what, applies in ((family, "family", not spot), ("cores", "regional", not spot),
                               ("lowPriorityCores", "spot", spot)):
        u = usages.get(norm_family(key or ""))
        if u is None:
            rows.append(_row(location, "", f"quota ({what})", INFO, f"no usage entry '{key}'",
                             f"check 'az vm list-usage -l {location}'"))
            continue
        free = int(u.limit) - int(u.current_value)
        label = u.name.value or key  # the usage API's name, as everywhere azgpu names a quota
        if not applies:
            rows.append(_row(location, "", f"quota ({what})", INFO, f"{label}: {free} of {u.limit} free "
                             f"({'spot VMs do not use it' if spot else 'used by spot VMs only'})"))
        elif vcpus <= free:
            rows.append(_row(location, "", f"quota ({what})", OK, f"{label}: {free} of {u.limit} free, {vcpus} needed"))
        else:
            rows.append(_row(location, "", f"quota ({what})", SHORT,
                             f"{label}: {free} of {u.limit} free, {vcpus} needed",
                             f"request {int(u.current_value) + vcpus}: 'provision quota request --size {size} "
                             f"--nodes {nodes} -l {location}{' --spot' if spot else ''}'"))
    return rows


def _reservation_rows(session, group_id: str, size: str, location: str, zones: list[str], nodes: int,
                      caps: dict) -> tuple[list[dict], int]:
    """The reservation's room for the nodes, and how many it holds (those skip the quota check: D-crg)."""
    rows = []
    if (caps.get("CapacityReservationSupported") or "").lower() != "true":
        rows.append(_row(location, "", "reservation", BLOCKED, f"{size} reports CapacityReservationSupported="
                         f"{caps.get('CapacityReservationSupported', 'absent')}", "choose a size that can be reserved"))
    group = read_group(session, group_id)
    ref = parse_group_id(group_id) or {}
    name = ref.get("name", group_id)
    # The reserve command that would make the room, with every value known here (a remedy has no blanks).
    reserve = (f"'provision reserve -g {ref.get('rg')} --group {name} --size {size} --count {nodes} -l {location}"
               f"{' --zone ' + zones[0] if len(zones) == 1 else ''}'")
    if group is None:
        return rows + [_row(location, "", "reservation", BLOCKED, f"group '{name}' does not exist",
                            f"create it with {reserve}")], 0
    held = group.of_size(size)
    if not held:
        return rows + [_row(location, "", "reservation", BLOCKED, f"group '{name}' holds no reservation for {size}",
                            f"add one with {reserve}")], 0
    now = utc_now()
    covered, before = 0, len(rows)
    for mine in held:  # one per size per zone (D-crg): a line for each, the zones asked for first
        zone = ",".join(mine.zones)
        if zones and mine.zones and not set(mine.zones) & set(zones):
            continue
        kind = "Block " if mine.block else ""
        if mine.failed:
            rows.append(_row(location, zone, "reservation", BLOCKED, f"{kind}{mine.name}: provisioning state "
                             f"{mine.state}, it holds no VMs",
                             f"send it again with 'provision reserve -g {ref.get('rg')} --group {name} --name "
                             f"{mine.name} --size {size} --count {mine.reserved} -l {location}"
                             f"{' --zone ' + mine.zones[0] if mine.zones else ''}'"))
            continue
        if mine.block and not mine.active(now):
            rows.append(_row(location, zone, "reservation", BLOCKED, f"{kind}{mine.name}: holds VMs from "
                             f"{mine.start:%Y-%m-%d %H:%M} to {mine.end:%Y-%m-%d %H:%M} UTC, not now"
                             if mine.start and mine.end else f"{kind}{mine.name}: not active now (no readable schedule)"
                             if mine.end is None else f"{kind}{mine.name}: not active now",
                             "create the cluster while it is active"))
            continue
        covered = max(covered, min(nodes, mine.free))
        if nodes <= mine.free:
            rows.append(_row(location, zone, "reservation", OK, f"{kind}{mine.name}: {mine.free} of {mine.reserved} "
                             f"free, {nodes} needed"))
        else:
            rows.append(_row(location, zone, "reservation", SHORT, f"{kind}{mine.name}: {mine.free} of {mine.reserved} "
                             f"free, {nodes} needed",
                             "use fewer nodes (a Block reservation's capacity cannot be updated)" if mine.block else
                             f"raise its capacity to {mine.used + nodes}, or use fewer nodes"))
    if len(rows) == before:
        where = ", ".join(z for h in held for z in h.zones)
        rows.append(_row(location, ",".join(zones), "reservation", BLOCKED, f"group '{name}' holds {size} only in "
                         f"zone(s) {where}", "check those zones, or reserve in these"))
    return rows, covered


def capacity_for(session, *, vm: Any, nodes: int, locations: list[str], zones: list[str], spot: bool,
                 group_id: str | None = None) -> dict[str, Any]:
    """`provision capacity`: vm is the size asked for (a profiles.Size: its name and vCPUs)."""
    size, vcpus = vm.name, vm.vcpus
    rows: list[dict] = []
    for location in locations:
        sku_rows, sku = _sku_rows(session.compute, size, location, zones if location == locations[0] else [])
        rows += sku_rows
        if sku is None:
            continue
        live_vcpus = int(sku["caps"].get("vCPUs") or vcpus)
        covered, reserved_rows = 0, []
        if group_id and location == locations[0]:
            reserved_rows, covered = _reservation_rows(session, group_id, size, location, zones, nodes, sku["caps"])
        # Reserved VMs skip the quota check up to the reserved quantity (D-crg): only the rest needs quota.
        rows += _quota_rows(session.compute, location, sku["family"], live_vcpus * (nodes - covered), spot,
                            size=size, nodes=nodes - covered)
        if spot and (sku["caps"].get("LowPriorityCapable") or "").lower() == "false":
            rows.append(_row(location, "", "spot", BLOCKED, f"{size} is not spot-capable here", "drop --spot"))
        elif spot:
            rows.append(_row(location, "", "spot placement score", INFO,
                             "not read: Microsoft's only Python client for it is a beta "
                             "(azure-mgmt-computerecommender)",
                             "see the score in the portal (Spot placement score) before relying on spot capacity"))
        rows += reserved_rows
    # The verdict is the location asked for: a fallback candidate that is blocked does not stop a cluster
    # the primary location can hold (create tries fallbacks only on capacity errors); each has its own.
    verdicts = {location: _worst([r for r in rows if r["location"] == location]) for location in locations}
    return {"size": size, "nodes": nodes, "spot": spot, "location": locations[0], "verdict": verdicts[locations[0]],
            "fallbacks": [{"location": loc, "verdict": v} for loc, v in list(verdicts.items())[1:]], "checks": rows}


def _worst(rows: list[dict]) -> str:
    statuses = {r["status"] for r in rows}
    return BLOCKED if BLOCKED in statuses else SHORT if SHORT in statuses else OK
