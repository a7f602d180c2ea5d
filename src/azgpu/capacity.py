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


def _err(code: str, message: str, remedy: str, fld: str, severity: str = "error") -> Finding:
    return Finding(code, message, remedy, cite(("D-crg",)), severity, fld)


def group_option_findings(req, infiniband: bool) -> list[Finding]:
    """--capacity-reservation-group with the rest of the request."""
    text = getattr(req, "capacity_reservation_group", None)
    if not text:
        return []
    out: list[Finding] = []
    if parse_group_id(text) is None:
        out.append(_err("INVALID_CAPACITY_RESERVATION_GROUP",
                        f"--capacity-reservation-group '{text}' is not a capacity reservation group resource ID",
                        f"pass {CAPACITY_RESERVATION_GROUP.example_id('NAME')} "
                        "('az capacity reservation group list --query [].id')",
                        "capacity_reservation_group"))
    if req.spot:
        out.append(_err("CAPACITY_RESERVATION_SPOT", "spot VMs cannot use a capacity reservation",
                        "drop --spot, or drop --capacity-reservation-group", "capacity_reservation_group"))
    if req.ppg:
        out.append(_err("CAPACITY_RESERVATION_PPG", "a scale set in a proximity placement group cannot use a capacity "
                        "reservation", "drop --ppg, or drop --capacity-reservation-group", "capacity_reservation_group"))
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
        "CAPACITY_RESERVATION_PLACEMENT_GROUP",
        "with --capacity-reservation-group the scale sets set singlePlacementGroup=false, as Learn requires of a "
        "Uniform scale set in a capacity reservation group; Learn's InfiniBand guidance asks for a single placement "
        "group, so whether the nodes share one InfiniBand fabric is not guaranteed",
        "run create with --check (the health gate's NCCL test proves the fabric), or drop --capacity-reservation-group "
        "to keep a single placement group",
        cite(("D-crg-vmss", "D-setupib", "D-orch")), "warning", "capacity_reservation_group")


def reserve_findings(*, reservation_type: str, count: int | None, name: str | None, group: str | None) -> list[Finding]:
    """`provision reserve`'s own values: the type, a Block reservation's capacities, the names."""
    out: list[Finding] = []
    if reservation_type not in RESERVATION_TYPES:
        out.append(_err("INVALID_RESERVATION_TYPE", f"reservation type {reservation_type!r} is not one of "
                        f"{', '.join(RESERVATION_TYPES)}", "pass --type Targeted or --type Block", "type"))
    if count is None or count < 1:
        out.append(_err("INVALID_RESERVATION_COUNT", f"--count must be 1 or more, not {count}",
                        "pass --count N, the VMs to reserve", "count"))
    elif reservation_type == "Block" and count not in BLOCK_CAPACITIES:
        near = min(BLOCK_CAPACITIES, key=lambda c: (c < count, abs(c - count)))
        out.append(_err("INVALID_BLOCK_CAPACITY", f"a Block reservation holds {', '.join(map(str, BLOCK_CAPACITIES))} "
                        f"VMs, not {count}; its size and capacity cannot be changed later",
                        f"pass --count {near}, or --type Targeted", "count"))
    for flag, value in (("--group", group), ("--name", name)):
        if value is not None and not NAME.fullmatch(value):
            out.append(_err("INVALID_NAME", f"{flag} {value!r} is not a valid reservation name",
                            "use letters, digits, '-', '_' or '.', up to 80 characters", flag.strip("-")))
    return out
