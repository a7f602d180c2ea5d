"""`provision create`: preflight every check before any write, then deploy; capacity fallback on request."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from ..changes import report as what_if_text
from ..errors import InputError, ValidationFailed
from ..plain import plain
from ..plan import Plan, build_plan
from ..request import Request
from ..spec import Spec, check_fallbacks, validate
from .azure_errors import CapacityError
from .arm import is_ours, list_group, to_azure_error
from .deployer import Deployer, Event
from .lifecycle import destroy, find_cluster
from ..resource_types import VMSS
from .preflight import Preflight, run_preflight
from .whatif import analyse, cost_of, refusal, report_of


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


def candidates(request: Request, zones: list[str], locations: list[str]) -> list[tuple[str | None, str | None]]:
    out = [(request.location, request.zone)]
    out += [(request.location, z) for z in zones if z != request.zone]
    out += [(loc, None) for loc in locations if loc != request.location]
    return out


def create(session, request: Request, *, dry_run: bool = False, wait: bool = True, timeout: float | None = None,
           zones: list[str] = (), fallback_locations: list[str] = (), on_event: Callable[[Event], None] = lambda e: None,
           on_notice: Callable[[str], None] = lambda m: None, accept_terms: bool = False,
           allow_scale_in: bool = False, confirm: Callable[[str], bool] | None = None,
           currency: str = "USD", check: bool = False, replace_unhealthy: bool = False,
           max_rounds: int = 3, before_delete: Callable[[list], None] | None = None,
           check_options: dict[str, Any] | None = None, spare_racks: int = 0,
           arm_validate: bool = True, scale_sets: list[int] | None = None) -> dict[str, Any]:
    """Validate, preflight, deploy. Capacity errors move to the next zone or location; nothing else does.

    accept_terms: accept the marketplace terms of the image's purchase plan for the subscription
    (as `az vm image terms accept`) when they are not yet accepted; without it they stop the preflight.
    A run that would delete instances (fewer nodes, a scale set no longer planned) stops with
    SCALE_IN_REFUSED before any write unless allow_scale_in, or confirm(what-if report) says yes;
    then exactly the instances the report names are deleted. dry_run: the what-if comes with the
    result (and its cost, in `currency`), nothing is written.
    check: after the scale sets succeed, run the health gate (azgpu.deploy.health.gate) and raise
    health.UnhealthyNodes (with this result under .result) unless every node passes; replace_unhealthy
    (implies check): replace failing nodes for at most max_rounds rounds, calling before_delete(nodes)
    while their VMs still exist. check_options: parallel, node_timeout, nccl.
    spare_racks (vertical-connect sizes, implies check): deploy that many racks more, then keep the
    requested number of whole healthy racks and remove the others (azgpu.deploy.rack_gate).
    arm_validate: once azgpu's own checks pass, Azure validates the same template (Deployments -
    Validate, nothing written) and its errors stop the run; False (--no-arm-validate) skips it.
    scale_sets: each scale set's capacity instead of the split of the request's nodes (one per
    scale set of that split; Slurm's resume grows one InfiniBand domain and keeps the others).
    """
    check = check or replace_unhealthy or bool(spare_racks)
    if spare_racks:
        request = with_spare_racks(request, spare_racks)
    if check and (dry_run or not wait):
        raise InputError("--check needs the deployment to finish", code="CHECK_NEEDS_WAIT",
                         remedy="drop --dry-run/--no-wait, or run 'provision check' after 'provision wait'")
    if check:  # bad gate options fail before anything is created
        from .health import validate_options

        validate_options(max_rounds=max_rounds, **{k: v for k, v in (check_options or {}).items() if k != "nccl"})
    resource_group = request.resource_group
    bad = [f for f in check_fallbacks(zones, fallback_locations) if f.is_error]
    if bad:
        raise ValidationFailed(bad)
    tried = candidates(request, list(zones), list(fallback_locations))
    held = 0  # instances this cluster held before this run: a fallback must not delete them
    for attempt, (location, zone) in enumerate(tried):
        spec = validate(request.with_changes(location=location, zone=zone), command="create")
        if scale_sets is not None:
            spec = dataclasses.replace(spec, scale_sets=tuple(scale_sets))
        # One listing serves the quota arithmetic, the group check and finding what exists.
        listed = list_group(session, resource_group)
        plan, pf = prepare(session, spec, listed, fallback_zones=list(zones) if attempt == 0 else [],
                           accept_terms=accept_terms)
        result: dict[str, Any] = {**plan.summary(), "preflight": pf.as_dict(), "dry_run": dry_run}
        deployer = Deployer(session, plan, resource_group, on_event=on_event, timeout=timeout)
        analysis = analyse(session, deployer, listed, strict=True)
        for line in deployer.kept_notices:  # what the user added to azgpu's resources stays
            on_notice(line)
        if deployer.kept_notices:
            result["kept"] = deployer.kept_notices
        if arm_validate:  # Azure's own preflight of exactly these bodies, after azgpu's checks passed
            from .arm_preflight import validate as arm_check

            result["azure_validation"] = arm_check(session, deployer, group_exists=listed is not None,
                                                   location=plan.spec.request.location)
        if attempt == 0:
            held = analysis.nodes_before
        if dry_run:
            cost = cost_of(session, plan, analysis, currency)
            result["what_if"] = report_of(analysis, deployer, cost=cost).as_dict()
            return plain(result)
        if analysis.deleted and not allow_scale_in:
            if confirm is None or not confirm(what_if_text(report_of(analysis, deployer))):
                raise refusal(analysis, plan.spec.names.cluster, resource_group, declined=confirm is not None)
        if pf.accept_terms is not None:  # the first write, after every check passed
            _accept_terms(session, pf.accept_terms)
            result["terms_accepted"] = pf.accept_terms.arm()
        deployer.removals = analysis.removals
        created_group = deployer.ensure_resource_group(location, exists=listed is not None)
        try:
            events = deployer.deploy(wait=wait, listed=listed, fresh_group=created_group, current=analysis.current,
                                     doomed=analysis.doomed)
        except CapacityError as exc:
            if attempt == len(tried) - 1:
                raise
            if held and not allow_scale_in:
                # Moving to another zone or location re-creates the scale sets: the nodes the cluster
                # already had would go with them.
                on_notice(f"not trying another zone or location: that deletes the {held} node(s) cluster "
                          f"'{plan.spec.names.cluster}' already has; --allow-scale-in permits it")
                raise
            nxt = tried[attempt + 1]
            on_notice(f"{exc.message}; trying {nxt[0]}" + (f" zone {nxt[1]}" if nxt[1] else ""))
            _clean_for_retry(session, plan, resource_group, moving=nxt[0] != location)
            continue
        result["resource_group_created"] = created_group
        result["resources"] = [{"name": e.name, "stage": e.stage, "state": e.state} for e in events.values()]
        if check:
            _health_gate(session, plan, resource_group, result, replace_unhealthy, max_rounds, before_delete,
                         check_options or {}, on_notice, spare_racks)
        return plain(result)
    raise AssertionError("unreachable: the loop returns or raises")  # candidates() always holds one


def _accept_terms(session, plan) -> None:
    from .marketplace import accept_terms

    try:
        accept_terms(session, plan)
    except Exception as exc:
        raise to_azure_error(exc, f"accepting the marketplace terms of plan {plan.name}") from None


def with_spare_racks(request: Request, spare_racks: int) -> Request:
    """The request with `spare_racks` whole racks more; bad input (not a rack size, a negative count)
    exits 2 before anything is created."""
    from ..profiles import load_profile

    vertical = load_profile(request.profile).vertical_connect if request.profile else None
    if spare_racks < 0:
        raise InputError(f"--spare-racks must be 0 or more, not {spare_racks}", code="INVALID_SPARE_RACKS",
                         remedy="pass --spare-racks 1 for one rack more than --nodes asks")
    if not vertical:
        raise InputError(f"--spare-racks needs a profile with rack-scale NVLink (nd-gb200-v6, nd-gb300-v6), "
                         f"not '{request.profile}'", code="SPARE_RACKS_WITHOUT_RACKS",
                         remedy="drop --spare-racks, or use --profile nd-gb300-v6")
    return request.with_changes(nodes=(request.nodes or 0) + spare_racks * vertical["rack"])


def _health_gate(session, plan: Plan, resource_group: str, result: dict[str, Any], replace: bool, max_rounds: int,
                 before_delete, options: dict[str, Any], on_notice: Callable[[str], None], spare_racks: int = 0) -> None:
    from . import health

    cluster = plan.spec.names.cluster
    vertical = plan.spec.profile.vertical_connect
    on_notice(f"health check of {plan.spec.nodes} node(s)" + (", replacing the unhealthy ones" if replace and not
                                                               vertical else ""))

    def on_round(r: dict[str, Any]) -> None:
        bad = len(r["failed"]) + len(r.get("inconclusive", [])) + len(r["unreachable"])
        on_notice(f"health round {r['round']}: {r['passed']} of {r['checked']} passed" + (f", {bad} not" if bad else ""))

    if vertical:  # whole racks only: azgpu.deploy.rack_gate
        from . import rack_gate

        outcome, racks, pruned, stopped = rack_gate.gate(
            session, plan, resource_group, replace=replace, spare_racks=spare_racks, max_rounds=max_rounds,
            before_delete=before_delete, options=options, on_notice=on_notice, on_round=on_round)
        outcome.stopped = stopped
        result["racks"] = racks
        if spare_racks:
            result["spare_racks"] = {"requested": spare_racks, "removed": pruned}
    else:
        outcome = health.gate(session, cluster, resource_group, replace=replace, max_rounds=max_rounds,
                              before_delete=before_delete, on_round=on_round, **options)
    result["health"] = outcome.as_dict()
    if not outcome.healthy:
        raise health.unhealthy_error(result["health"], cluster=cluster, resource_group=resource_group,
                                     replacing=replace, stopped=outcome.stopped, result=result)


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
