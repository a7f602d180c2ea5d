"""The plan to deploy: the preflight against the live subscription, then the plan, built once from
the Spec with the values Azure reports (accelerated networking, the image's purchase plan, the
ephemeral disk's placement) in place of the documented ones. create, what-if and the quota requests
share it."""

from __future__ import annotations

from typing import Any

from msgspec import structs

from ..errors import ValidationFailed
from ..ownership import is_ours
from ..plan import Plan, build_plan
from ..resource_types import VMSS
from ..spec import Spec
from .arm import to_azure_error
from .interface import Preflight
from .preflight import run_preflight


def _nodes_needed(spec: Spec, listed: list[Any] | None) -> int:
    """Nodes this run adds: each planned scale set's capacity minus what this cluster's scale set of
    that name already holds (the quota it needs, and the addresses it takes in a --subnet-id)."""
    held = {item.name: (item.sku.capacity if item.sku else 0) or 0 for item in listed or []
            if (item.type or "").lower() == VMSS.type.lower() and is_ours(item.tags, spec.names.cluster)}
    return sum(max(0, capacity - held.get(VMSS.name_in(spec.names, i), 0))
               for i, capacity in enumerate(spec.scale_sets))


def prepare(session, spec: Spec, listed: list[Any] | None, fallback_zones: list[str] = (), *, strict: bool = True,
            accept_terms: bool = False) -> tuple[Plan, Preflight]:
    """Preflight and the plan to deploy; the live values Azure reports override documented ones.

    listed: the resource group's resources (list_group), None when the group does not exist;
    fallback_zones: the --zones still to try here, checked now rather than at their PUT;
    strict=False (what-if): the preflight's errors are returned with it instead of raised.
    accept_terms: unaccepted marketplace terms of the image's plan are left for create to accept
    instead of stopping the preflight.
    """
    nodes = _nodes_needed(spec, listed)
    try:
        pf = run_preflight(session, spec, vcpus_needed=nodes * spec.size.vcpus, nodes_needed=nodes,
                           accept_terms=accept_terms, fallback_zones=list(fallback_zones))
    except Exception as exc:  # an SDK error of a preflight read becomes a typed error with a remedy
        raise to_azure_error(exc, "preflight") from None
    if pf.errors and strict:
        raise ValidationFailed(pf.findings)  # the offline findings were reported by validate()
    live = spec
    if "accelerated_networking" in pf.overrides:
        live = structs.replace(live, accelerated_networking=pf.overrides["accelerated_networking"])
    if "plan" in pf.overrides:  # the purchase plan the image API reports is the one Azure checks
        live = structs.replace(live, image=structs.replace(live.image, plan=pf.overrides["plan"]))
    if "ephemeral_placement" in pf.overrides:
        live = structs.replace(live, ephemeral_placement=pf.overrides["ephemeral_placement"])
    return build_plan(live), pf  # built once, from what Azure reports
