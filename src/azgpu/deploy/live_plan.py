"""The plan to deploy: the preflight against the live subscription, and the plan again where the
values Azure reports (accelerated networking, the image's purchase plan, the ephemeral disk's
placement) override the documented ones. create, what-if and the quota requests share it."""

from __future__ import annotations

import dataclasses
from typing import Any

from ..errors import ValidationFailed
from ..plan import Plan, build_plan
from ..spec import Spec
from .arm import is_ours, to_azure_error
from .preflight import Preflight, run_preflight
from ..resource_types import VMSS


def _vcpus_needed(plan: Plan, listed: list[Any] | None) -> int:
    """vCPUs this run adds: planned capacity minus what this cluster's scale sets already hold."""
    existing = {item.name: (item.sku.capacity if item.sku else 0) or 0 for item in listed or []
                if (item.type or "").lower() == VMSS.type.lower() and is_ours(item.tags, plan.spec.names.cluster)}
    per_node = plan.spec.size.vcpus
    return sum(max(0, r.body["sku"]["capacity"] - existing.get(r.name, 0)) * per_node for r in plan.scale_sets)


def _nodes_needed(plan: Plan, listed: list[Any] | None) -> int:
    """Nodes this run adds (the addresses it takes in a --subnet-id): planned minus what this cluster holds."""
    existing = {item.name: (item.sku.capacity if item.sku else 0) or 0 for item in listed or []
                if (item.type or "").lower() == VMSS.type.lower() and is_ours(item.tags, plan.spec.names.cluster)}
    return sum(max(0, r.body["sku"]["capacity"] - existing.get(r.name, 0)) for r in plan.scale_sets)


def prepare(session, spec: Spec, listed: list[Any] | None, fallback_zones: list[str] = (), *, strict: bool = True,
            accept_terms: bool = False) -> tuple[Plan, Preflight]:
    """Preflight and the plan to deploy; the live values Azure reports override documented ones.

    listed: the resource group's resources (list_group), None when the group does not exist;
    fallback_zones: the --zones still to try here, checked now rather than at their PUT;
    strict=False (what-if): the preflight's errors are returned with it instead of raised.
    accept_terms: unaccepted marketplace terms of the image's plan are left for create to accept
    instead of stopping the preflight.
    """
    plan = build_plan(spec)
    try:
        pf = run_preflight(session, spec, vcpus_needed=_vcpus_needed(plan, listed),
                           nodes_needed=_nodes_needed(plan, listed), accept_terms=accept_terms,
                           fallback_zones=list(fallback_zones))
    except Exception as exc:  # an SDK error of a preflight read becomes a typed error with a remedy
        raise to_azure_error(exc, "preflight") from None
    if pf.errors and strict:
        raise ValidationFailed(pf.findings)  # the offline findings were reported by validate()
    live = spec
    if "accelerated_networking" in pf.overrides:
        live = dataclasses.replace(live, accelerated_networking=pf.overrides["accelerated_networking"])
    if "plan" in pf.overrides:  # the purchase plan the image API reports is the one Azure checks
        live = dataclasses.replace(live, image=dataclasses.replace(live.image, plan=pf.overrides["plan"]))
    if "ephemeral_placement" in pf.overrides:
        live = dataclasses.replace(live, ephemeral_placement=pf.overrides["ephemeral_placement"])
    if live is not spec:
        plan = build_plan(live)
    return plan, pf
