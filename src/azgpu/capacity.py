"""Capacity reservations, offline: the rules Learn and the REST specification state, checked before
anything talks to Azure (no Azure SDK here).

Sources: D-crg (Learn: capacity reservation overview, create, and "Associate a Virtual Machine Scale
Set with uniform orchestration to a Capacity Reservation group"), the REST specification's
CapacityReservation examples (compute api 2026-04-01), and the Resource SKU capabilities
CapacityReservationSupported and SupportedCapacityReservationTypes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta

from .errors import Finding
from .resource_types import CAPACITY_RESERVATION_GROUP
from .sources import cite

RESERVATION_TYPES = ("Targeted", "Block")
# A Block reservation's capacity is one of these, and its size and capacity cannot be updated later
# (facts sheet 14.3, S-sdk-crg; CapacityReservation.sku and CapacityReservationUpdate in S-rest-crg).
BLOCK_CAPACITIES = (1, 2, 4, 8, 16, 32, 64)
# ScheduleProfile (S-rest-crg, compute 2025-04-01; the same text in the SDK's ScheduleProfile): the start
# is "today or within 56 days in the future. For same-day scheduling, requests must be submitted before
# 11:30 AM UTC"; the end is "after the start date, with a duration of either 1-14 whole days or 3-26 whole
# weeks".
BLOCK_START_WITHIN_DAYS = 56
BLOCK_SAME_DAY_BEFORE = time(11, 30)
BLOCK_DAYS = (1, 14)
BLOCK_WEEKS = (3, 26)
# Learn's overview lists the series whose support for (Targeted) reservations "isn't currently available",
# ND-series among them (D-crg); the Resource SKU capability SupportedCapacityReservationTypes is the live word.
TARGETED_UNSUPPORTED = (("ND-series", re.compile(r"Standard_ND", re.IGNORECASE)),
                        ("NCads H100 v5-series", re.compile(r"Standard_NC\d+ads_H100_v5$", re.IGNORECASE)),
                        ("HB-series", re.compile(r"Standard_HB", re.IGNORECASE)),
                        ("HC-series", re.compile(r"Standard_HC", re.IGNORECASE)))
SCHEDULE_SOURCE = ("S-rest-crg",)
GROUP_ID = re.compile(r"/subscriptions/(?P<sub>[0-9a-fA-F-]{36})/resourceGroups/(?P<rg>[-\w._()]+)"
                      + CAPACITY_RESERVATION_GROUP.path_pattern(r"(?P<name>[-\w._]+)"), re.IGNORECASE)
MAX_NAME = 80
NAME = re.compile(rf"[A-Za-z0-9][-\w.]{{0,{MAX_NAME - 2}}}[\w]|[A-Za-z0-9]")


def parse_group_id(text: str) -> dict[str, str] | None:
    """The group's subscription, resource group and name, or None: the parts go into request paths, so a
    resource group Azure would refuse ('..', a trailing period) or a name of dots is not a group id."""
    from . import naming

    match = GROUP_ID.fullmatch((text or "").strip().rstrip("/"))
    if not match or naming.check("resource_group", match["rg"]) or not NAME.fullmatch(match["name"]):
        return None
    return match.groupdict()


def group_option_findings(req, infiniband: bool, vertical_connect: bool = False) -> list[Finding]:
    """--capacity-reservation-group with the rest of the request."""
    text = getattr(req, "capacity_reservation_group", None)
    if not text:
        return []
    out: list[Finding] = []
    if parse_group_id(text) is None:
        out.append(Finding(code="INVALID_CAPACITY_RESERVATION_GROUP",
                           message=f"--capacity-reservation-group '{text}' is "
                                   "not a capacity reservation group resource ID",
                           remedy=f"pass {CAPACITY_RESERVATION_GROUP.example_id('NAME')} "
                           "('az capacity reservation group list --query [].id')",
                           field="capacity_reservation_group", source=cite(("D-crg",))))
    if req.spot:
        out.append(Finding(code="CAPACITY_RESERVATION_SPOT", message="spot VMs cannot use a capacity reservation",
                           remedy="drop --spot, or drop --capacity-reservation-group",
                           field="capacity_reservation_group", source=cite(("D-crg",))))
    if req.ppg:
        out.append(Finding(code="CAPACITY_RESERVATION_PPG",
                           message="a scale set in a proximity placement group cannot use a capacity "
                           "reservation", remedy="drop --ppg, or drop --capacity-reservation-group",
                           field="capacity_reservation_group", source=cite(("D-crg",))))
    if infiniband and not vertical_connect:
        out.append(spg_conflict(req))
    return out


def spg_conflict(req) -> Finding:
    """Learn's reservation rule against its InfiniBand rule, said where the user sees it.

    Learn: "For virtual machine scale sets in Uniform Orchestration to be compatible with capacity reservation,
    the singlePlacementGroup property must be set to False" (D-crg-vmss); Learn's placement-groups page:
    "Large scale (SPG=false) does not support InfiniBand networking" (D-vmss-pg). Both cannot hold for an
    InfiniBand size, so azgpu refuses the combination unless the user takes the risk explicitly
    (--accept-reservation-infiniband-risk), and then proves the fabric with the health gate. Vertical-connect
    (NVL72) sizes deploy singlePlacementGroup=false anyway, as Microsoft does (R-agentbaker-gb300), and are
    not refused: docs/gb-racks.md records that conflict.
    """
    sources = cite(("D-crg-vmss", "D-vmss-pg", "D-setupib"))
    what = ("a Uniform scale set in a capacity reservation group must set singlePlacementGroup=false (Learn: "
            "\"the singlePlacementGroup property must be set to False\"), and Learn's placement-groups page says "
            "\"Large scale (SPG=false) does not support InfiniBand networking\"")
    if getattr(req, "accept_reservation_infiniband_risk", False):
        return Finding(code="CAPACITY_RESERVATION_PLACEMENT_GROUP",
                       message=f"{what}: deploying anyway (--accept-reservation-infiniband-risk); whether the nodes "
                       "share one InfiniBand fabric is not guaranteed",
                       remedy="run create with --check (the health gate's NCCL test proves the fabric)",
                       source=sources, severity="warning", field="capacity_reservation_group")
    return Finding(code="CAPACITY_RESERVATION_INFINIBAND",
                   message=f"{what}: an InfiniBand size in a capacity reservation group gets no documented InfiniBand "
                   "fabric", remedy="drop --capacity-reservation-group to keep a single placement group, or accept the "
                   "risk with --accept-reservation-infiniband-risk and prove the fabric with --check",
                   source=sources, field="capacity_reservation_group")


@dataclass(frozen=True)
class Schedule:
    """A Block reservation's window: scheduleProfile {start, end} as BlockCapacityReservation_CreateOrUpdate.json
    sends it (dates; Azure answers with times: 12:00 UTC on the start day, 11:30 UTC on the end day)."""

    start: date
    end: date

    @property
    def days(self) -> int:
        return (self.end - self.start).days

    def body(self) -> dict[str, str]:
        return {"start": self.start.isoformat(), "end": self.end.isoformat()}


def _utc_now(now: datetime | None) -> datetime:
    return (now or datetime.now(UTC)).astimezone(UTC)


def start_date(text: str, today: date) -> date | None:
    """--start as a date: YYYY-MM-DD as Azure takes it, or `today` / `+N` (N days after today, UTC) for scripts."""
    text = text.strip().lower()
    if text == "today":
        return today
    if re.fullmatch(r"\+\d{1,3}", text):
        return today + timedelta(days=int(text[1:]))
    if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", text):
        return None
    try:
        return date.fromisoformat(text)
    except ValueError:
        return None


def block_schedule(*, start: str | None, days: int | None, weeks: int | None,
                   now: datetime | None = None) -> tuple[Schedule | None, list[Finding]]:
    """--start DATE with --days N or --weeks N, checked against ScheduleProfile's documented windows (S-rest-crg)."""
    source = cite(SCHEDULE_SOURCE)
    out: list[Finding] = []
    if start is None or (days is None and weeks is None):
        missing = " and ".join(x for x, absent in (("--start DATE", start is None),
                                                   ("--days N or --weeks N", days is None and weeks is None)) if absent)
        out.append(Finding(code="BLOCK_SCHEDULE_REQUIRED",
                           message=f"a Block reservation needs a schedule (scheduleProfile): {missing} missing",
                           remedy="pass --start (a date today or within 56 days, or +days from today) and "
                           "--days 1..14 or --weeks 3..26, e.g. --start +1 --days 7; or --type Targeted",
                           field="start", source=source))
    if days is not None and weeks is not None:
        out.append(Finding(code="INVALID_BLOCK_WINDOW", message="--days and --weeks both given: a Block window is "
                           "either 1 to 14 whole days or 3 to 26 whole weeks", remedy="pass one of them",
                           field="days", source=source))
    elif days is not None and not BLOCK_DAYS[0] <= days <= BLOCK_DAYS[1]:
        out.append(Finding(code="INVALID_BLOCK_WINDOW", message=f"--days {days}: a Block window of days is 1 to 14 "
                           "whole days", remedy="pass --days 1..14, or --weeks 3..26 for a longer one",
                           field="days", source=source))
    elif weeks is not None and not BLOCK_WEEKS[0] <= weeks <= BLOCK_WEEKS[1]:
        out.append(Finding(code="INVALID_BLOCK_WINDOW", message=f"--weeks {weeks}: a Block window of weeks is 3 to 26 "
                           "whole weeks", remedy="pass --weeks 3..26, or --days 1..14 for a shorter one",
                           field="weeks", source=source))
    first = None
    if start is not None:
        clock = _utc_now(now)
        today = clock.date()
        first = start_date(start, today)
        last = today + timedelta(days=BLOCK_START_WITHIN_DAYS)
        if first is None:
            out.append(Finding(code="INVALID_BLOCK_START",
                               message=f"--start {start[:40]!r} is not a date (YYYY-MM-DD, today, or +N days)",
                               remedy=f"pass --start {today + timedelta(days=1)} (or +1)", field="start",
                               source=source))
        elif first < today or first > last:
            out.append(Finding(code="INVALID_BLOCK_START",
                               message=f"--start {first}: a Block reservation starts today ({today}, UTC) or within "
                               f"{BLOCK_START_WITHIN_DAYS} days (by {last})",
                               remedy=f"pass a --start from {today} to {last}", field="start", source=source))
        elif first == today and clock.time() >= BLOCK_SAME_DAY_BEFORE:
            out.append(Finding(code="INVALID_BLOCK_START",
                               message=f"--start {first} is today, and same-day Block reservations must be requested "
                               "before 11:30 UTC", remedy=f"pass --start {today + timedelta(days=1)}",
                               field="start", source=source))
    if out:
        return None, out
    length = timedelta(days=days) if days is not None else timedelta(weeks=weeks)
    return Schedule(first, first + length), []


def schedule_findings(reservation_type: str, *, start: str | None, days: int | None, weeks: int | None,
                      now: datetime | None = None) -> tuple[Schedule | None, list[Finding]]:
    """The schedule a reservation of this type takes: required for Block, refused for Targeted (scheduleProfile
    "is required and only supported when the capacity reservation group type is 'Block'", S-rest-crg)."""
    if reservation_type == "Block":
        return block_schedule(start=start, days=days, weeks=weeks, now=now)
    given = [flag for flag, value in (("--start", start), ("--days", days), ("--weeks", weeks)) if value is not None]
    if given and reservation_type in RESERVATION_TYPES:
        return None, [Finding(code="SCHEDULE_NOT_BLOCK",
                              message=f"{', '.join(given)}: only a Block reservation has a schedule; a Targeted one "
                              "holds its VMs from its creation until it is deleted",
                              remedy=f"pass --type Block, or drop {' and '.join(given)}", field="start",
                              source=cite(SCHEDULE_SOURCE))]
    return None, []


def rack_findings(count: int, rack: int, size: str) -> list[Finding]:
    """How many whole NVL72 racks a Block reservation of `count` VMs holds: a vertical-connect scale set's capacity
    is a multiple of the rack (R-agentbaker-gb300, T-gb300-vmss), and a Block capacity is a power of two."""
    racks, left = divmod(count, rack)
    source = cite(("R-agentbaker-gb300", "T-gb300-vmss", "S-rest-crg"))
    fits = [c for c in BLOCK_CAPACITIES if c >= rack]
    if racks == 0:
        return [Finding(code="BLOCK_CAPACITY_NO_RACK",
                        message=f"a Block reservation of {count} {size} holds no whole NVL72 rack of {rack}: a "
                        f"{size} scale set is deployed in whole racks only, so none of it could be used",
                        remedy=f"pass --count {fits[0]} (1 rack, {fits[0] - rack} VMs left over) or --count {fits[-1]} "
                        f"({fits[-1] // rack} racks, {fits[-1] % rack} left over)",
                        field="count", source=source)]
    if left:
        return [Finding(code="BLOCK_CAPACITY_RACKS",
                        message=f"a Block reservation of {count} {size} holds {racks} whole NVL72 rack(s) of {rack} "
                        f"({racks * rack} VMs); the other {left} reserved VMs cannot join a rack and bill unused",
                        remedy=f"create the cluster with --nodes {racks * rack}", field="count", source=source,
                        severity="warning")]
    return []


def targeted_series_finding(size: str) -> Finding | None:
    """Learn lists these series among those Targeted (on-demand) reservations do not support yet (D-crg)."""
    series = next((name for name, pattern in TARGETED_UNSUPPORTED if pattern.match(size)), None)
    if series is None:
        return None
    return Finding(code="TARGETED_RESERVATION_SERIES",
                   message=f"Learn lists {series} among the series on-demand (Targeted) capacity reservations do not "
                   f"support; {size}'s Resource SKU capabilities are checked next and decide",
                   remedy="reserve a Block instead (where the size lists Block): --type Block with its window, "
                   "e.g. --start +1 --days 7",
                   field="type", source=cite(("D-crg",)), severity="warning")


def reserve_findings(*, reservation_type: str, count: int | None, name: str | None, group: str | None,
                     start: str | None = None, days: int | None = None, weeks: int | None = None,
                     size: str | None = None, rack: int | None = None, now: datetime | None = None) -> list[Finding]:
    """`provision reserve`'s own values, all at once: the type, a Block reservation's schedule and capacities (and
    the whole racks a vertical-connect size fits in it), the names, and Learn's word on the series."""
    out: list[Finding] = list(schedule_findings(reservation_type, start=start, days=days, weeks=weeks, now=now)[1])
    if reservation_type not in RESERVATION_TYPES:
        out.append(Finding(code="INVALID_RESERVATION_TYPE",
                           message=f"reservation type {reservation_type!r} is not one of "
                           f"{', '.join(RESERVATION_TYPES)}", remedy="pass --type Targeted or --type Block",
                           field="type", source=cite(("D-crg",))))
    if count is None or count < 1:
        out.append(Finding(code="INVALID_RESERVATION_COUNT", message=f"--count must be 1 or more, not {count}",
                           remedy="pass --count with the VMs to reserve, e.g. --count 4", field="count",
                           source=cite(("D-crg",))))
    elif reservation_type == "Block" and count not in BLOCK_CAPACITIES:
        near = min(BLOCK_CAPACITIES, key=lambda c: (c < count, abs(c - count)))
        out.append(Finding(code="INVALID_BLOCK_CAPACITY",
                           message=f"a Block reservation holds {', '.join(map(str, BLOCK_CAPACITIES))} "
                           f"VMs, not {count}; its size and capacity cannot be changed later",
                           remedy=f"pass --count {near}, or --type Targeted", field="count", source=cite(("D-crg",))))
    elif reservation_type == "Block" and rack:
        out += rack_findings(count, rack, size or "this size")
    if reservation_type == "Targeted" and size and (seen := targeted_series_finding(size)) is not None:
        out.append(seen)
    for flag, value in (("--group", group), ("--name", name)):
        if value is not None and not NAME.fullmatch(value):
            out.append(Finding(code="INVALID_NAME", message=f"{flag} {value!r} is not a valid reservation name",
                               remedy="use letters, digits, '-', '_' or '.', up to 80 characters",
                               field=flag.strip("-"),
                               source=cite(("D-crg",))))
    return out
