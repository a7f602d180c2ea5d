"""`provision create`: preflight every check before any write, then deploy; capacity fallback on request."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from ..errors import ValidationFailed
from ..plain import plain
from ..plan import Plan, build_plan
from ..request import Request
from ..validate import Spec, check_fallbacks, validate
from .azure_errors import CapacityError
from .deployer import Deployer, Event, is_ours, list_group, to_azure_error
from .lifecycle import destroy, find_cluster
from .resource_types import VMSS
from .preflight import Preflight, run_preflight


def _vcpus_needed(plan: Plan, listed: list[Any] | None) -> int:
    """vCPUs this run adds: planned capacity minus what this cluster's scale sets already hold."""
    existing = {item.name: (item.sku.capacity if item.sku else 0) or 0 for item in listed or []
                if (item.type or "").lower() == VMSS.type.lower() and is_ours(item.tags, plan.spec.names.cluster)}
    per_node = plan.spec.size.vcpus
    return sum(max(0, r.body["sku"]["capacity"] - existing.get(r.name, 0)) * per_node for r in plan.scale_sets)


def prepare(session, spec: Spec, listed: list[Any] | None) -> tuple[Plan, Preflight]:
    """Preflight and the plan to deploy; the live values Azure reports override documented ones.

    listed: the resource group's resources (list_group), None when the group does not exist.
    """
    plan = build_plan(spec)
    try:
        pf = run_preflight(session, spec, vcpus_needed=_vcpus_needed(plan, listed))
    except Exception as exc:  # an SDK error of a preflight read becomes a typed error with a remedy
        raise to_azure_error(exc, "preflight") from None
    if pf.errors:
        raise ValidationFailed(pf.findings)  # the offline findings were reported by validate()
    if "accelerated_networking" in pf.overrides:
        spec = dataclasses.replace(spec, accelerated_networking=pf.overrides["accelerated_networking"])
        plan = build_plan(spec)
    return plan, pf


def candidates(request: Request, zones: list[str], locations: list[str]) -> list[tuple[str | None, str | None]]:
    out = [(request.location, request.zone)]
    out += [(request.location, z) for z in zones if z != request.zone]
    out += [(loc, None) for loc in locations if loc != request.location]
    return out


def create(session, request: Request, *, dry_run: bool = False, wait: bool = True, timeout: float | None = None,
           zones: list[str] = (), fallback_locations: list[str] = (), on_event: Callable[[Event], None] = lambda e: None,
           on_notice: Callable[[str], None] = lambda m: None) -> dict[str, Any]:
    """Validate, preflight, deploy. Capacity errors move to the next zone or location; nothing else does."""
    resource_group = request.resource_group
    bad = [f for f in check_fallbacks(zones, fallback_locations) if f.is_error]
    if bad:
        raise ValidationFailed(bad)
    tried = candidates(request, list(zones), list(fallback_locations))
    for attempt, (location, zone) in enumerate(tried):
        spec = validate(request.with_changes(location=location, zone=zone), command="create")
        # One listing serves the quota arithmetic, the group check and finding what exists.
        listed = list_group(session, resource_group)
        plan, pf = prepare(session, spec, listed)
        result: dict[str, Any] = {**plan.summary(), "preflight": pf.as_dict(), "dry_run": dry_run}
        if dry_run:
            return plain(result)
        deployer = Deployer(session, plan, resource_group, on_event=on_event, timeout=timeout)
        created_group = deployer.ensure_resource_group(location, exists=listed is not None)
        try:
            events = deployer.deploy(wait=wait, listed=listed, fresh_group=created_group)
        except CapacityError as exc:
            if attempt == len(tried) - 1:
                raise
            nxt = tried[attempt + 1]
            on_notice(f"{exc.message}; trying {nxt[0]}" + (f" zone {nxt[1]}" if nxt[1] else ""))
            _clean_for_retry(session, plan, resource_group, moving=nxt[0] != location)
            continue
        result["resource_group_created"] = created_group
        result["resources"] = [{"name": e.name, "stage": e.stage, "state": e.state} for e in events.values()]
        return plain(result)
    raise AssertionError("unreachable: the loop returns or raises")  # candidates() always holds one


def _clean_for_retry(session, plan: Plan, resource_group: str, *, moving: bool) -> None:
    """Before another zone or location: a scale set's zones and location are fixed at creation, so this
    cluster's scale sets go (and, when moving to another location, its regional network too)."""
    if moving:
        destroy(session, plan.spec.names.cluster, resource_group)
        return
    cluster = find_cluster(session, plan.spec.names.cluster, resource_group)
    try:
        pollers = [VMSS.begin_delete(session, resource_group, v.name) for v in cluster.scale_sets]
        for poller in pollers:
            poller.result()
    except Exception as exc:
        raise to_azure_error(exc, f"removing the scale sets of {plan.spec.names.cluster} before the next zone") from None
