"""Capacity reservations, offline: the rules Learn and the REST specification state, checked before
anything talks to Azure (no Azure SDK here).

Sources: D-crg (Learn: capacity reservation overview, create, and "Associate a Virtual Machine Scale
Set with uniform orchestration to a Capacity Reservation group"), the REST specification's
CapacityReservation examples (compute api 2026-04-01), and the Resource SKU capabilities
CapacityReservationSupported and SupportedCapacityReservationTypes.
"""

from __future__ import annotations

import re

from .errors import Finding
from .resource_types import CAPACITY_RESERVATION_GROUP
from .sources import cite

RESERVATION_TYPES = ("Targeted", "Block")
# A Block reservation's capacity is one of these, and its size and capacity cannot be updated later
# (facts sheet 14.3, S-sdk-crg).
BLOCK_CAPACITIES = (1, 2, 4, 8, 16, 32, 64)
GROUP_ID = re.compile(r"/subscriptions/(?P<sub>[0-9a-fA-F-]{36})/resourceGroups/(?P<rg>[-\w._()]+)"
                      + CAPACITY_RESERVATION_GROUP.path_pattern(r"(?P<name>[-\w._]+)"), re.IGNORECASE)
NAME = re.compile(r"[A-Za-z0-9][-\w.]{0,78}[\w]|[A-Za-z0-9]")


def parse_group_id(text: str) -> dict[str, str] | None:
    match = GROUP_ID.fullmatch((text or "").strip().rstrip("/"))
    return match.groupdict() if match else None


def group_option_findings(req, infiniband: bool) -> list[Finding]:
    """--capacity-reservation-group with the rest of the request."""
    text = getattr(req, "capacity_reservation_group", None)
    if not text:
        return []
    out: list[Finding] = []
    if parse_group_id(text) is None:
        out.append(Finding(code="INVALID_CAPACITY_RESERVATION_GROUP",
                           message=f"--capacity-reservation-group '{text}' is not a capacity reservation group resource ID",
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
    if infiniband:
        out.append(spg_conflict(req))
    return out


def spg_conflict(req) -> Finding:
    """Learn's reservation rule against the InfiniBand rule, said where the user sees it.

    Learn: a Uniform scale set must set singlePlacementGroup false to use a capacity reservation group;
    Learn's InfiniBand pages: InfiniBand works within a single placement group. azgpu follows the
    reservation rule (Azure refuses the association otherwise) and proves the fabric with the health gate.
    """
    return Finding(
        code="CAPACITY_RESERVATION_PLACEMENT_GROUP",
        message="with --capacity-reservation-group the scale sets set singlePlacementGroup=false, as Learn requires of a "
        "Uniform scale set in a capacity reservation group; Learn's InfiniBand guidance asks for a single placement "
        "group, so whether the nodes share one InfiniBand fabric is not guaranteed",
        remedy="run create with --check (the health gate's NCCL test proves the fabric), or drop --capacity-reservation-group "
        "to keep a single placement group",
        source=cite(("D-crg-vmss", "D-setupib", "D-orch")), severity="warning", field="capacity_reservation_group")


def reserve_findings(*, reservation_type: str, count: int | None, name: str | None, group: str | None) -> list[Finding]:
    """`provision reserve`'s own values: the type, a Block reservation's capacities, the names."""
    out: list[Finding] = []
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
    for flag, value in (("--group", group), ("--name", name)):
        if value is not None and not NAME.fullmatch(value):
            out.append(Finding(code="INVALID_NAME", message=f"{flag} {value!r} is not a valid reservation name",
                               remedy="use letters, digits, '-', '_' or '.', up to 80 characters", field=flag.strip("-"),
                               source=cite(("D-crg",))))
    return out
