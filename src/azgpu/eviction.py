"""What happens to a spot node Azure evicts: the scale sets' eviction policy, decided once before the
rules run (rules.spot_eviction reports it, plan.py writes it)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .request import Request

EVICTION_POLICIES = {"delete": "Delete", "deallocate": "Deallocate"}


def decide_eviction(request: Request) -> str | None:
    """None for regular capacity; for spot, --eviction-policy, else Delete.

    Delete, not Azure's default Deallocate: an evicted GPU node left deallocated keeps its disks billed
    and its cores counted, and Azure does not promise to start it again (D-vmss-spot). A policy that is
    neither is an error the rule reports; the plan is never built from it."""
    if not request.spot:
        return None
    given = request.eviction_policy
    return EVICTION_POLICIES.get(given.strip().lower(), "Delete") if given is not None else "Delete"
