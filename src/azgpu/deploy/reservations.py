"""Capacity reservations against the live subscription (compute api 2026-04-01): the preflight of
create --capacity-reservation-group, and `provision reserve` / `provision release`.

Reads go to the REST API at azgpu's compute api-version (arm.send), not through the SDK's models: the
lowest azure-mgmt-compute azgpu allows (34) has no ScheduleProfile, so its models drop a Block
reservation's schedule (and a group's reservationType); the first release that has it (37) needs
azure-mgmt-core 1.6 and so azure-core 1.32, floors azgpu keeps lower (pyproject.toml). Writes send the
body as written (`_wire`) for the same reason.

The rules followed, with their sources: a group holds one reservation per VM size per zone (D-crg,
D-crg-create); a group's zones and type are fixed at its creation (S-rest-crg); a Block reservation has a
schedule, a capacity of 1..64 that cannot be updated, and cannot be deleted once allocated until its end
(S-rest-crg); a reservation needs quota like its VMs, and VMs deployed into it skip the quota check up to
the reserved quantity (D-crg). A reservation bills at the pay-as-you-go rate whether VMs use it or not
(D-crg), so `reserve` prices it and asks.
"""

from __future__ import annotations

import dataclasses
import io
import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from ..capacity import BLOCK_CAPACITIES, BLOCK_DAYS, BLOCK_WEEKS, MAX_NAME, RESERVATION_TYPES, Schedule, parse_group_id
from ..errors import AzureError, Finding, InputError, ValidationFailed
from ..naming import location_name
from ..ownership import MANAGED_BY, MANAGED_BY_TAG, is_azgpu
from ..resource_types import CAPACITY_RESERVATION_GROUP
from ..sources import cite
from .arm import BASE, SOURCE_SKUS, answer, norm_family, pages, send, to_azure_error

if TYPE_CHECKING:
    from .interface import Preflight

SOURCE = "Azure capacity reservation groups API (az capacity reservation group show --instance-view)"
MANAGED_TAGS = {MANAGED_BY_TAG: MANAGED_BY}
RESERVATIONS = "capacityReservations"
API = CAPACITY_RESERVATION_GROUP.api_version  # reservations are read and written at their group's


def utc_now() -> datetime:
    """The wall clock the schedules of Block reservations are read against (tests move it)."""
    return datetime.now(UTC)


def _wire(body: dict) -> dict[str, Any]:
    """A PUT body sent as written, at azgpu's compute api-version: an older client's model would drop
    what it does not know (reservationType, without which a Block group is a Targeted one, and scheduleProfile)."""
    return {"parameters": io.BytesIO(json.dumps(body).encode()), "content_type": "application/json",
            "api_version": CAPACITY_RESERVATION_GROUP.api_version}


def _time(text: Any) -> datetime | None:
    """An ISO time or date as Azure writes it ('2025-08-02T11:30:00Z', '2025-08-02'), in UTC; None if not one."""
    if not isinstance(text, str) or len(text) > 40:
        return None
    try:
        value = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def _zones(value: Any) -> list[str]:
    return sorted(str(z) for z in value) if isinstance(value, list) else []


@dataclass
class Held:
    """One reservation of a group, as Azure reports it."""

    name: str
    size: str
    zones: list[str]
    reserved: int
    used: int
    ours: bool = True  # tagged managed-by: azgpu
    state: str = ""  # provisioningState
    start: datetime | None = None  # a Block reservation's schedule, as Azure answers it
    end: datetime | None = None
    associated: int = 0  # VMs associated (allocated or deallocated)
    tags: dict[str, str] = field(default_factory=dict)
    in_block_group: bool = False  # a Block group holds Block reservations only (its type is fixed, S-rest-crg)

    @property
    def free(self) -> int:
        return max(0, self.reserved - self.used)

    @property
    def block(self) -> bool:
        return self.end is not None or self.in_block_group

    @property
    def schedule_unread(self) -> bool:
        """A Block reservation whose schedule end Azure did not give in a form azgpu reads: its window is unknown."""
        return self.block and self.end is None

    @property
    def failed(self) -> bool:
        """Its creation (or last change) failed: "Capacity reservation creation succeeds or fails in its entirety"
        (D-crg-create), so whatever its sku says, it holds no VMs until it is sent again."""
        return self.state.lower() == "failed"

    def in_zone(self, zone: str | None) -> bool:
        """Whether a scale set in `zone` (None: regional) uses this reservation: a zonal reservation
        "enforces VM/VMSS using this capacity reservation to be in same zone" (S-rest-crg)."""
        return self.zones == [zone] if zone else not self.zones

    def active(self, now: datetime) -> bool:
        """A Block reservation holds VMs between its start and end; a Targeted one always."""
        if not self.block:
            return True
        return self.end is not None and (self.start or now) <= now < self.end

    def locked(self, now: datetime) -> bool:
        """A Block reservation "cannot be deleted after it has been successfully allocated until the schedule
        end time" (S-rest-crg, 2025-04-01: "during their scheduled active period")."""
        return self.block and self.state.lower() == "succeeded" and (self.schedule_unread or self.active(now))

    def as_dict(self) -> dict[str, Any]:
        out = {"reservation": self.name, "size": self.size, "zones": self.zones, "reserved": self.reserved,
               "used": self.used, "free": self.free}
        if self.block:
            out["schedule"] = {"start": self.start.isoformat() if self.start else None,
                               "end": self.end.isoformat() if self.end else None}
        if not self.ours:
            out["created_by_azgpu"] = False
        return out


@dataclass
class Group:
    """A capacity reservation group and its reservations."""

    id: str
    name: str
    resource_group: str
    location: str
    zones: list[str]
    reservation_type: str  # Targeted (also when Azure leaves it out) or Block
    ours: bool
    associated: int  # VMs associated with the group
    reservations: list[Held]

    def of_size(self, size: str) -> list[Held]:
        return [h for h in self.reservations if h.size.lower() == size.lower()]

    def serving(self, size: str, zone: str | None) -> Held | None:
        """The reservation a scale set of this size in this zone uses: one per size per zone (D-crg)."""
        return next((h for h in self.of_size(size) if h.in_zone(zone)), None)


def _read(session, path: str, what: str, url: str | None = None, **query: str) -> dict[str, Any] | None:
    """A GET of the compute REST API at azgpu's api-version; None for 404. `url` (a nextLink) is followed only to
    Resource Manager (arm.send). An answer azgpu cannot read is ARM_ANSWER_INVALID, never an empty group: what
    a group holds decides what release deletes and whether reserve adds."""
    page = url is not None
    url = url or (f"{BASE}{path}?{urlencode({'api-version': API, **query})}" if query else None)
    response = send(session, "GET", path, API, url=url)
    if response.status_code == 404 and not page:
        return None
    if response.status_code != 200:  # a page missing would hide reservations: never a shorter list
        from azure.core.exceptions import HttpResponseError

        raise to_azure_error(HttpResponseError(response=response), what)
    return answer(response, what)


def _pages(session, path: str, what: str) -> list[dict[str, Any]]:
    return pages(session, path, API, what, missing_ok=True)


def _held(item: dict[str, Any], views: dict[str, tuple[Any, int]], block_group: bool = False) -> Held:
    props = item.get("properties") if isinstance(item.get("properties"), dict) else {}
    sku = item.get("sku") if isinstance(item.get("sku"), dict) else {}
    name = str(item.get("name") or "")
    current, allocated = views.get(name.lower(), (None, 0))
    reserved = current if isinstance(current, int) else sku.get("capacity")
    schedule = props.get("scheduleProfile") if isinstance(props.get("scheduleProfile"), dict) else {}
    start, end = _time(schedule.get("start")), _time(schedule.get("end"))
    # A bare date is the day, from 12:00 UTC to 11:30 UTC (BlockCapacityReservation_CreateOrUpdate.json, 2025-04-01,
    # answers start "2025-08-01" with "2025-08-01T12:00:00Z" and end "2025-08-02" with "2025-08-02T11:30:00Z").
    if start is not None and len(str(schedule.get("start"))) == 10:
        start = start.replace(hour=12)
    if end is not None and len(str(schedule.get("end"))) == 10:
        end = end.replace(hour=11, minute=30)
    tags = item.get("tags") if isinstance(item.get("tags"), dict) else {}
    associated = props.get("virtualMachinesAssociated")
    return Held(name, str(sku.get("name") or ""), _zones(item.get("zones")),
                reserved if isinstance(reserved, int) else 0, allocated, is_azgpu(tags),
                str(props.get("provisioningState") or ""), start, end,
                len(associated) if isinstance(associated, list) else allocated, dict(tags), block_group)


def read_group(session, group_id: str) -> Group | None:
    """The group with its reservations and their use (its instance view); None when it does not exist."""
    ref = parse_group_id(group_id)
    if ref is None:  # the commands check their names first; a caller that did not gets a coded refusal
        raise InputError(f"{group_id[:200]!r} is not a capacity reservation group resource ID",
                         code="INVALID_CAPACITY_RESERVATION_GROUP", remedy="check -g and the group's name")
    path = (f"/subscriptions/{ref['sub']}/resourceGroups/{ref['rg']}"
            f"{CAPACITY_RESERVATION_GROUP.provider_path(ref['name'])}")
    what = f"reading capacity reservation group {ref['name']}"
    found = _read(session, path, what, **{"$expand": "instanceView"})
    if found is None:
        return None
    props = found.get("properties") if isinstance(found.get("properties"), dict) else {}
    view = props.get("instanceView") if isinstance(props.get("instanceView"), dict) else {}
    views: dict[str, tuple[Any, int]] = {}
    for r in view.get("capacityReservations") or []:
        if not isinstance(r, dict):
            continue
        info = r.get("utilizationInfo") if isinstance(r.get("utilizationInfo"), dict) else {}
        allocated = info.get("virtualMachinesAllocated")
        views[str(r.get("name") or "").lower()] = (info.get("currentCapacity"),
                                                   len(allocated) if isinstance(allocated, list) else 0)
    kind = str(props.get("reservationType") or "Targeted")
    held = [_held(item, views, kind.lower() == "block") for item in _pages(session, f"{path}/{RESERVATIONS}", what)]
    tags = found.get("tags") if isinstance(found.get("tags"), dict) else {}
    associated = props.get("virtualMachinesAssociated")
    return Group(path, ref["name"], ref["rg"], location_name(str(found.get("location") or "")),
                 _zones(found.get("zones")), kind,
                 is_azgpu(tags), len(associated) if isinstance(associated, list) else 0, held)


def group_path(session, resource_group: str, group: str) -> str:
    return (f"/subscriptions/{session.subscription_id}/resourceGroups/{resource_group}"
            f"{CAPACITY_RESERVATION_GROUP.provider_path(group)}")


def _when(value: datetime | None) -> str:
    return value.strftime("%Y-%m-%d %H:%M UTC") if value else "?"


# -- create --capacity-reservation-group --------------------------------------------------------------

def _next_name(group: str, n: int) -> str:
    """<group>-next (n 1), -next2 ...: within the 80 characters a group's name may have (capacity.NAME), the
    group's own name cut where the suffix would not fit."""
    suffix = f"-next{n if n > 1 else ''}"
    return group[:MAX_NAME - len(suffix)] + suffix


def _another_block(session, group_id: str, size: str, nodes: int, loc: str, zone: str | None, held: Held) -> str:
    """A Block's capacity and schedule are fixed (S-rest-crg): the reserve command, whole, of another Block in a new
    group for `nodes`, as long as the one held (else 7 days) from tomorrow, and the group create is then given.
    The new group is one that does not exist yet (<group>-next, else -next2 ...): pasted into a group that holds a
    Block of the size already, reserve would refuse (CAPACITY_RESERVATION_BLOCK_FIXED)."""
    ref = parse_group_id(group_id) or {"rg": "", "name": ""}
    parent = group_id.rsplit("/", 1)[0]
    new = next((name for name in (_next_name(ref["name"], n) for n in range(1, 10))
                if read_group(session, f"{parent}/{name}") is None), _next_name(ref["name"], 10))
    days = (held.end.date() - held.start.date()).days if held.start and held.end else 7
    weeks = min(max(-(-days // 7), BLOCK_WEEKS[0]), BLOCK_WEEKS[1])
    window = f"--days {max(days, BLOCK_DAYS[0])}" if days <= BLOCK_DAYS[1] else f"--weeks {weeks}"
    count = next((n for n in BLOCK_CAPACITIES if n >= nodes), BLOCK_CAPACITIES[-1])
    # A group holds one reservation per size per zone (D-crg), and a Block at most 64 VMs: more is another create.
    most = "" if nodes <= count else f" (a Block holds at most {count} VMs: add at most {count} nodes in it)"
    return (f"'provision reserve -g {ref['rg']} --group {new} --type Block --size {size} --count {count} -l {loc}"
            f"{f' --zone {zone}' if zone else ''} --start +1 {window}', then create with --capacity-reservation-group "
            f"{parent}/{new}{most}")


def check_group(pf: Preflight, session, spec, nodes_needed: int, now: datetime | None = None) -> int:
    """create --capacity-reservation-group: the group holds room for the nodes this run adds, for this size,
    location and zone; otherwise they would deploy outside the reservation, without its guarantee.

    Returns how many of the nodes the reservation holds: those skip the quota check ("the quota checks are
    omitted for VM deployment up to the reserved quantity", D-crg), and the preflight counts only the rest.
    """
    group_id = spec.request.capacity_reservation_group
    ref = parse_group_id(group_id)
    size, loc, zone = spec.size.name, spec.request.location, spec.request.zone
    now = now or utc_now()

    add = pf.findings.append
    if (pf.capabilities.get("CapacityReservationSupported") or "").lower() == "false":
        add(Finding(code="CAPACITY_RESERVATION_UNSUPPORTED",
                    message=f"{size} reports CapacityReservationSupported=False in {loc}: it cannot be reserved",
                    remedy="drop --capacity-reservation-group, or choose a size or location that supports it "
                    f"('az vm list-skus -l {loc} --size {size}' capabilities)", source=SOURCE_SKUS))
    group = read_group(session, group_id)
    if group is None:
        add(Finding(code="CAPACITY_RESERVATION_GROUP_NOT_FOUND",
                    message=f"capacity reservation group '{ref['name']}' (resource group {ref['rg']}) does not exist",
                    remedy="create it with 'provision reserve', or pass an existing group's ID", source=SOURCE))
        return 0
    if group.location != location_name(loc):
        add(Finding(code="CAPACITY_RESERVATION_WRONG_LOCATION",
                    message=f"capacity reservation group '{ref['name']}' is in {group.location}, the cluster in {loc}",
                    remedy=f"pass -l {group.location}, or a group in {loc}", source=SOURCE))
        return 0
    same_size = group.of_size(size)
    mine = group.serving(size, zone)
    pf.reservation = {"group": group_id, "size": size, "nodes_needed": nodes_needed,
                      "reservations": [h.as_dict() for h in group.reservations]}
    if not same_size:
        held = ", ".join(h.size for h in group.reservations) or "none"
        add(Finding(code="CAPACITY_RESERVATION_NO_SIZE",
                    message=f"capacity reservation group '{ref['name']}' holds no reservation for {size} (it holds: "
                    f"{held}): the nodes would deploy outside any reservation",
                    remedy=f"add one: 'provision reserve -g {ref['rg']} --group {ref['name']} --size {size} --count "
                    f"{nodes_needed} -l {loc}{f' --zone {zone}' if zone else ''}'",
                    source=f"{SOURCE}; {cite(('D-crg',))}"))
        return 0
    if mine is None:
        best = max(same_size, key=lambda h: h.free)
        said = ", ".join(f"zone {','.join(h.zones)} ({h.free} free)" if h.zones else f"no zone ({h.free} free)"
                         for h in same_size)
        add(Finding(code="CAPACITY_RESERVATION_ZONE",
                    message=f"group '{ref['name']}' holds {size} in {said}; the cluster asks for "
                    f"{'zone ' + zone if zone else 'no zone'}, and a scale set uses the reservation of its own zone "
                    "only",
                    remedy=f"pass --zone {best.zones[0]}" if best.zones else "drop --zone",
                    source=f"{SOURCE}; {cite(('S-rest-crg', 'D-crg'))}"))
        return 0
    pf.reservation["reservation"] = mine.name
    if mine.failed:
        add(Finding(code="CAPACITY_RESERVATION_FAILED",
                    message=f"reservation '{mine.name}' is in provisioning state {mine.state}: its creation failed and "
                    "it holds no VMs, so the nodes would deploy outside it",
                    remedy=f"send it again ('provision reserve -g {ref['rg']} --group {ref['name']} --name {mine.name} "
                    f"--size {size} --count {mine.reserved} -l {loc}{f' --zone {zone}' if zone else ''}'), or drop "
                    "--capacity-reservation-group", source=f"{SOURCE}; {cite(('D-crg-create',))}"))
        return 0
    if mine.schedule_unread:
        add(Finding(code="CAPACITY_RESERVATION_SCHEDULE_UNREAD",
                    message=f"Block reservation '{mine.name}' has no schedule end azgpu can read: whether it holds VMs "
                    "now is unknown, and the nodes may deploy outside it",
                    remedy=f"check its schedule ('az capacity reservation show -g {ref['rg']} -c {ref['name']} -n "
                    f"{mine.name}'), or drop --capacity-reservation-group", source=cite(("S-rest-crg",))))
        return 0
    if mine.block and not mine.active(now):
        started = mine.start is None or mine.start <= now
        add(Finding(code="CAPACITY_RESERVATION_NOT_ACTIVE",
                    message=f"Block reservation '{mine.name}' holds VMs from {_when(mine.start)} to "
                    f"{_when(mine.end)}; it is {'over' if started else 'not yet active'} now ({_when(now)}): the nodes "
                    "would deploy outside it",
                    remedy=f"run create after {_when(mine.start)}" if not started else
                    "reserve another Block: " + _another_block(session, group_id, size, nodes_needed, loc, zone, mine)
                    + "; or drop "
                    "--capacity-reservation-group",
                    source=cite(("S-rest-crg",))))
        return 0
    covered = min(nodes_needed, mine.free)
    pf.reservation["covered_nodes"] = covered
    if nodes_needed > mine.free:
        if mine.block:
            remedy = (f"a Block reservation's capacity cannot be updated: pass --nodes so that at most {mine.free} are "
                      f"added, or reserve another Block of {size} in a new group: "
                      + _another_block(session, group_id, size, nodes_needed, loc, zone, mine))
        else:
            remedy = (f"raise its capacity to {mine.used + nodes_needed} ('provision reserve -g {ref['rg']} --group "
                      f"{ref['name']} --name {mine.name} --size {size} --count {mine.used + nodes_needed} -l {loc}"
                      + (f" --zone {zone}" if zone else "") + "'), or pass --nodes so that at most "
                      f"{mine.free} are added")
        add(Finding(code="CAPACITY_RESERVATION_FULL",
                    message=f"reservation '{mine.name}' holds {mine.reserved} {size}, {mine.used} in use, {mine.free} "
                    f"free; this run adds {nodes_needed} node(s): {nodes_needed - mine.free} would deploy outside the "
                    "reservation, without its capacity guarantee", remedy=remedy,
                    source=f"{SOURCE}; {cite(('D-crg', 'S-rest-crg'))}"))
    return covered


# -- provision reserve -------------------------------------------------------------------------------

@dataclass
class ReservePlan:
    """What `reserve` would send, after every check (findings: all at once, nothing sent on an error)."""

    resource_group: str
    group: str
    name: str
    location: str
    size: str
    count: int
    zone: str | None
    reservation_type: str
    schedule: Schedule | None = None
    findings: list[Finding] = field(default_factory=list)
    existing_group: Group | None = None
    existing: Held | None = None  # the reservation this one changes
    group_zones: list[str] = field(default_factory=list)  # of a group to create
    vcpus: int = 0

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.is_error]

    @property
    def unchanged(self) -> bool:
        """The reservation already holds what is asked (a failed one holds nothing: it is sent again)."""
        return self.existing is not None and not self.existing.failed and self.existing.reserved == self.count

    @property
    def added(self) -> int:
        """The VMs this reserves beyond what the reservation already holds (what needs quota)."""
        held = self.existing.reserved if self.existing is not None and not self.existing.failed else 0
        return max(0, self.count - held)

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"resource_group": self.resource_group, "group": self.group, "reservation": self.name,
                               "size": self.size, "count": self.count, "zones": [self.zone] if self.zone else [],
                               "type": self.reservation_type}
        if self.schedule:
            out["schedule"] = self.schedule.body()
        if self.existing is not None:
            out["changes"] = {"reservation": self.existing.name, "from": self.existing.reserved, "to": self.count,
                              "in_use": self.existing.used}
        return out


def _sku_findings(plan: ReservePlan, sku, caps: dict[str, str]) -> None:
    size, location = plan.size, plan.location
    out = plan.findings
    if (caps.get("CapacityReservationSupported") or "").lower() != "true":
        out.append(Finding(code="CAPACITY_RESERVATION_UNSUPPORTED",
                           message=f"{size} reports CapacityReservationSupported="
                           f"{caps.get('CapacityReservationSupported', 'absent')} in {location}: it cannot be reserved",
                           remedy="choose a size or location whose Resource SKU capabilities allow it",
                           source=SOURCE_SKUS))
    listed = caps.get("SupportedCapacityReservationTypes")
    # Before Block reservations existed the capability was absent and every reservation was Targeted.
    types = [t.strip() for t in (listed if listed is not None else "Targeted").split(",") if t.strip()]
    if plan.reservation_type.lower() not in {t.lower() for t in types}:
        other = next((t for t in types if t.lower() != plan.reservation_type.lower()), None)
        out.append(Finding(code="CAPACITY_RESERVATION_TYPE_UNSUPPORTED",
                           message=f"{size} lists SupportedCapacityReservationTypes={','.join(types) or 'none'} in "
                           f"{location}: no {plan.reservation_type} reservations",
                           remedy=(f"pass --type {other}"
                                   + (" with its window, e.g. --start +1 --days 7" if other == "Block" else "")
                                   if other else "choose another size or location"), source=SOURCE_SKUS))
    zones = sorted(z for info in sku.location_info or [] for z in (info.zones or []))
    if plan.zone and plan.zone not in zones:
        out.append(Finding(code="ZONE_NOT_OFFERED",
                           message=f"{size} has no zone {plan.zone} in {location} "
                           f"(zones: {', '.join(zones) or 'none'})",
                           remedy="pass another --zone, or none", source=SOURCE_SKUS))
    # A zonal group is created with every zone the size has here, so that the same group can later hold the
    # size in another zone too: a group's zones "can be assigned only during creation" (S-rest-crg).
    plan.group_zones = zones if plan.zone else []


def _group_findings(plan: ReservePlan, group: Group, allow_unowned: bool) -> None:
    """The existing group against what reserve would add to it or change in it."""
    out, size, zone = plan.findings, plan.size, plan.zone
    name = plan.group
    if not group.ours and not allow_unowned:
        out.append(Finding(code="CAPACITY_RESERVATION_GROUP_NOT_OURS",
                           message=f"capacity reservation group '{name}' exists and azgpu did not create it",
                           remedy="pass another --group, or --allow-unowned to add to it (its own reservations stay "
                           "as they are unless named with --name)", source=SOURCE))
    if group.location != location_name(plan.location):
        out.append(Finding(code="CAPACITY_RESERVATION_WRONG_LOCATION",
                           message=f"capacity reservation group '{name}' is in {group.location}, not {plan.location}",
                           remedy=f"pass -l {group.location}, or another --group", source=SOURCE))
    if group.reservation_type.lower() != plan.reservation_type.lower():
        known = next((t for t in RESERVATION_TYPES if t.lower() == group.reservation_type.lower()), None)
        out.append(Finding(code="CAPACITY_RESERVATION_GROUP_TYPE",
                           message=f"capacity reservation group '{name}' is a {group.reservation_type} group; its type "
                           "cannot change", remedy=f"pass --type {known}, or another --group" if known else
                           "pass another --group (azgpu reserves Targeted or Block only)",
                           source=cite(("S-rest-crg",))))
    if zone and zone not in group.zones or (not zone and group.zones):
        out.append(Finding(code="CAPACITY_RESERVATION_GROUP_ZONES",
                           message=f"capacity reservation group '{name}' was created for "
                           f"{'zones ' + ', '.join(group.zones) if group.zones else 'regional reservations (no zones)'}"
                           f"; a reservation {'in zone ' + zone if zone else 'without a zone'} cannot join it, and a "
                           "group's zones are fixed at its creation",
                           remedy=(f"pass --zone {group.zones[0]}" if group.zones else "drop --zone") +
                           ", or another --group", source=cite(("S-rest-crg", "D-crg"))))
    named = next((h for h in group.reservations if h.name.lower() == plan.name.lower()), None)
    serving = group.serving(size, zone)
    if named is not None and (named.size.lower() != size.lower() or not named.in_zone(zone)):
        out.append(Finding(code="CAPACITY_RESERVATION_IMMUTABLE",
                           message=f"reservation '{named.name}' holds {named.size}"
                           f"{' in zone ' + ','.join(named.zones) if named.zones else ''}; a reservation's size and "
                           "zone cannot change", remedy="pass another --name", source=cite(("D-crg", "S-rest-crg"))))
        return
    if serving is not None and named is not serving:
        out.append(Finding(code="CAPACITY_RESERVATION_EXISTS",
                           message=f"group '{name}' already holds reservation '{serving.name}' for {size}"
                           f"{' in zone ' + zone if zone else ''}: a group holds one reservation per size per zone",
                           remedy=f"pass --name {serving.name} to change it, or another --group",
                           source=cite(("D-crg", "D-crg-create"))))
        return
    existing = named or serving
    if existing is None:
        return
    plan.name, plan.existing = existing.name, existing
    # What it holds: the VMs allocated against it (beyond its capacity too: Learn, "Overallocate capacity
    # reservation"), or, where the instance view does not say, the VMs associated with it (which include them).
    in_use = max(existing.used, existing.associated)
    what = f"reservation '{existing.name}' ({existing.reserved} {size}, {in_use} in use)"
    if not existing.ours and not allow_unowned:
        out.append(Finding(code="CAPACITY_RESERVATION_NOT_OURS",
                           message=f"{what} was not created by azgpu: azgpu changes it only when asked",
                           remedy="pass --allow-unowned to change it, or another --group", source=SOURCE))
    floor = min(in_use, existing.reserved)  # raising it, or lowering it to the VMs it holds, takes nothing away
    if plan.count < floor:
        out.append(Finding(code="CAPACITY_RESERVATION_IN_USE",
                           message=f"{what}: --count {plan.count} would leave {floor - plan.count} more running "
                           "VM(s) outside it, without its capacity guarantee",
                           remedy=f"pass --count {floor} or more, or destroy the clusters that use it first",
                           source=cite(("D-crg",))))
    if existing.block and plan.count != existing.reserved:
        out.append(Finding(code="CAPACITY_RESERVATION_BLOCK_FIXED",
                           message=f"{what} is a Block reservation: its capacity cannot be updated",
                           remedy=f"pass --count {existing.reserved}, or reserve another Block in a new --group",
                           source=cite(("S-rest-crg",))))
    if existing.block and plan.schedule is not None and existing.start and existing.end and \
            (existing.start.date(), existing.end.date()) != (plan.schedule.start, plan.schedule.end):
        out.append(Finding(code="CAPACITY_RESERVATION_BLOCK_FIXED",
                           message=f"{what} runs from {_when(existing.start)} to {_when(existing.end)}; a Block "
                           "reservation's schedule cannot change",
                           remedy=f"pass --start {existing.start.date()} --days "
                           f"{(existing.end.date() - existing.start.date()).days}, or reserve another Block in a new "
                           "--group", source=cite(("S-rest-crg",))))


def _quota_findings(plan: ReservePlan, usages: list[Any], family: str, vcpus: int) -> None:
    """A reservation needs quota like its VMs (D-crg): the VMs it adds, for the family and the regional total."""
    needed = vcpus * plan.added
    by_name = {norm_family(u.name.value): u for u in usages}
    for key in (family or "", "cores"):
        u = by_name.get(norm_family(key))
        if u is not None and needed and u.current_value + needed > u.limit:
            plan.findings.append(Finding(
                code="QUOTA_INSUFFICIENT",
                message=f"vCPU quota {u.name.value} in {plan.location}: usage {u.current_value} + {needed} reserved "
                f"exceeds the limit {u.limit}; a reservation needs quota like its VMs",
                remedy=f"request {u.current_value + needed} with 'provision quota request', or reserve fewer",
                source=f"Azure usage API (az vm list-usage); {cite(('D-crg', 'D-crg-create'))}"))


def reserve_check(session, asked: ReservePlan, *, allow_unowned: bool = False) -> ReservePlan:
    """What Azure would refuse, read before anything is written: the size's Resource SKU capabilities (reservable,
    the type, the zone), the group as it is (its owner, location, type and zones, the reservation of this size and
    zone, what it holds and runs), and quota for the VMs the reservation adds. asked: the reservation as asked
    for (ReservePlan's first fields; no name: one made of the size and zone); returns it with what was found."""
    size, zone, location, group = asked.size, asked.zone, asked.location, asked.group
    default = size.lower().replace("_", "-") + (f"-z{zone}" if zone else "")
    plan = dataclasses.replace(asked, name=asked.name or default)
    compute = session.compute
    try:
        skus = [s for s in compute.resource_skus.list(filter=f"location eq '{location}'")
                if (s.name or "").lower() == size.lower() and s.resource_type == "virtualMachines"]
        if not skus:
            plan.findings.append(Finding(code="SKU_NOT_OFFERED", message=f"{size} is not offered in {location}",
                                         remedy="choose another -l/--location", source=SOURCE_SKUS))
            return plan
        sku = skus[0]
        caps = {c.name: c.value for c in sku.capabilities or []}
        _sku_findings(plan, sku, caps)
        plan.existing_group = read_group(session, group_path(session, asked.resource_group, group))
        if plan.existing_group is not None:
            if not asked.name:  # the reservation of this size and zone, whatever its name
                serving = plan.existing_group.serving(size, zone)
                plan.name = serving.name if serving is not None else plan.name
            _group_findings(plan, plan.existing_group, allow_unowned)
        plan.vcpus = int(caps.get("vCPUs") or 0)
        _quota_findings(plan, list(compute.usage.list(location)), sku.family or "", plan.vcpus)
    except (InputError, AzureError):
        raise
    except Exception as exc:
        raise to_azure_error(exc, f"checking a reservation of {asked.count} {size} in {location}") from None
    return plan


def create_reservation(session, plan: ReservePlan) -> dict[str, Any]:
    """The group (created, or kept as it is) and the reservation in it: created tagged as azgpu's, or changed
    keeping its own tags. A reservation that already holds what is asked is left as it is (a re-run converges)."""
    if plan.errors:
        raise InputError(plan.errors[0].message, code=plan.errors[0].code, remedy=plan.errors[0].remedy)
    zones = [plan.zone] if plan.zone else None
    rg, group = plan.resource_group, plan.group
    try:
        groups = session.resources.resource_groups
        if not groups.check_existence(rg):
            groups.create_or_update(rg, {"location": plan.location, "tags": MANAGED_TAGS})
        if plan.existing_group is None:
            body: dict[str, Any] = {"location": plan.location, "tags": MANAGED_TAGS,
                                    "properties": {"reservationType": plan.reservation_type}}
            if plan.group_zones:
                body["zones"] = plan.group_zones
            session.compute.capacity_reservation_groups.create_or_update(rg, group, **_wire(body))
        state = plan.existing.state if plan.existing else ""
        if not plan.unchanged:
            tags = plan.existing.tags if plan.existing is not None else MANAGED_TAGS
            body = {"location": plan.location, "tags": tags, "sku": {"name": plan.size, "capacity": plan.count}}
            if zones:
                body["zones"] = zones
            if plan.schedule is not None and plan.existing is None:  # immutable after creation
                body["properties"] = {"scheduleProfile": plan.schedule.body()}
            poller = session.compute.capacity_reservations.begin_create_or_update(rg, group, plan.name, **_wire(body))
            reservation = poller.result()
            props = getattr(reservation, "properties", None)
            state = str(getattr(props, "provisioning_state", None) or getattr(reservation, "provisioning_state", None)
                        or "")
    except (InputError, AzureError):
        raise
    except Exception as exc:
        raise to_azure_error(exc, f"reserving {plan.count} {plan.size} in {plan.location}") from None
    return {**plan.as_dict(), "group": group_path(session, rg, group), "provisioning_state": state,
            **({"unchanged": True} if plan.unchanged else {})}


# -- provision release ---------------------------------------------------------------------------------

def delete_reservations(session, resource_group: str, group: str, *, confirm, now: datetime | None = None
                        ) -> dict[str, Any]:
    """Delete the reservations azgpu created in the group (tagged managed-by: azgpu), and the group when azgpu
    created it and nothing else is left in it, after confirm(names) says yes. What it leaves is named."""
    now = now or utc_now()
    found = read_group(session, group_path(session, resource_group, group))
    if found is None:
        raise InputError(f"no capacity reservation group '{group}' in {resource_group}",
                         code="CAPACITY_RESERVATION_GROUP_NOT_FOUND", remedy="check -g and --group")
    mine = [h for h in found.reservations if h.ours]
    theirs = [h for h in found.reservations if not h.ours]
    if not found.ours and not mine:
        raise InputError(f"capacity reservation group '{group}' was not created by azgpu and holds no reservation "
                         "azgpu created: azgpu deletes none of it", code="CAPACITY_RESERVATION_GROUP_NOT_OURS",
                         remedy=f"delete it yourself if you mean to: 'az capacity reservation group delete -g "
                                f"{resource_group} -n {group}'")
    problems = []
    used = [h for h in mine if h.associated]
    if used or (found.ours and not theirs and found.associated):
        # Azure deletes a reservation only once no VM is associated with it (CapacityReservations_Delete);
        # deleting it first would drop the guarantee of VMs that still run.
        count = sum(h.associated for h in used) or found.associated
        problems.append(Finding(code="CAPACITY_RESERVATION_GROUP_IN_USE",
                                message=f"capacity reservation group '{group}' is still used by {count} VM(s)"
                                + (f" (reservations {', '.join(h.name for h in used)})" if used else ""),
                                remedy="destroy the clusters that use it first ('provision destroy'), then release it",
                                source=cite(("D-crg",))))
    for h in mine:
        if h.locked(now) and h.schedule_unread:
            problems.append(Finding(code="CAPACITY_RESERVATION_BLOCK_ACTIVE",
                                    message=f"Block reservation '{h.name}' has no schedule end azgpu can read: it may "
                                    "be inside its window, where Azure refuses to delete it",
                                    remedy=f"check its schedule ('az capacity reservation show -g {resource_group} -c "
                                    f"{group} -n {h.name}') and run release after its end; nothing was deleted",
                                    source=cite(("S-rest-crg",))))
        elif h.locked(now):
            problems.append(Finding(code="CAPACITY_RESERVATION_BLOCK_ACTIVE",
                                    message=f"Block reservation '{h.name}' cannot be deleted before its end, "
                                    f"{_when(h.end)}: once allocated it holds (and bills) its VMs until then",
                                    remedy=f"run release again after {_when(h.end)}; nothing was deleted",
                                    source=cite(("S-rest-crg",))))
    if problems:
        raise ValidationFailed(problems)
    drop_group = found.ours and not theirs
    names = [h.name for h in mine]
    left = [{"reservation": h.name, "size": h.size, "why": "not created by azgpu"} for h in theirs]
    if not found.ours:
        left.append({"group": group, "why": "not created by azgpu"})
    elif theirs:
        left.append({"group": group, "why": "it still holds reservations azgpu did not create"})
    result: dict[str, Any] = {"group": group, "deleted": [], **({"left": left} if left else {})}
    if not confirm(names + ([group] if drop_group else [])):
        return result
    try:
        for n in names:
            session.compute.capacity_reservations.begin_delete(resource_group, group, n).result()
        if drop_group:
            groups = session.compute.capacity_reservation_groups
            # A long-running delete in newer clients (begin_delete), a plain one in older ones.
            if hasattr(groups, "begin_delete"):
                groups.begin_delete(resource_group, group).result()
            else:
                groups.delete(resource_group, group)
    except Exception as exc:
        raise to_azure_error(exc, f"deleting capacity reservation group {group}") from None
    result["deleted"] = [*names, *([group] if drop_group else [])]
    return result


def block_price_hours(schedule: Schedule) -> int:
    """The hours a Block reservation is priced for: its whole window, whole days of 24 hours."""
    return schedule.days * 24

