"""`provision create`: preflight every check before any write, then deploy; capacity fallback on
request; then the health gate, Guest Health Reporting and the result (azgpu.deploy.create)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from msgspec import structs

from ..changes import format_what_if
from ..errors import InputError, ValidationFailed
from ..plan import Plan
from ..profiles import load_profile
from ..request import Request
from ..resource_types import VMSS
from ..spec import Spec, check_fallbacks, validate
from . import health_gate, rack_gate
from .arm import list_group, to_azure_error
from .arm_preflight import validate as arm_check
from .azure_errors import CapacityError
from .deployer import Deployer
from .ghr import Reporter
from .interface import CreateOptions, CreateResult, GateHooks, GateOptions, LiveCluster, refuse
from .lifecycle import destroy, find_cluster
from .live_plan import prepare
from .marketplace import accept_terms as accept_marketplace_terms
from .whatif import analyse, cost_of, refusal, report_of


def candidates(request: Request, zones: list[str], locations: list[str]) -> list[tuple[str | None, str | None]]:
    out = [(request.location, request.zone)]
    out += [(request.location, z) for z in zones if z != request.zone]
    out += [(loc, None) for loc in locations if loc != request.location]
    return out


def create(session, request: Request | Spec, options: CreateOptions = CreateOptions()) -> CreateResult:
    """Validate, preflight, deploy. Capacity errors move to the next zone or location; nothing else does.

    request: a Request, or the Spec azgpu.validate made of it (the CLI's, whose findings it has shown):
    that Spec serves the request's own location and zone as it is; a fallback is validated for its own.
    A run that would delete instances (fewer nodes, a scale set no longer planned) stops with
    SCALE_IN_REFUSED before any write unless options.allow_scale_in, or options.confirm(what-if report)
    says yes; then exactly the instances the report names are deleted. With options.gate enabled,
    the health gate runs once the scale sets succeed (azgpu.deploy.health_gate, or rack_gate for
    vertical-connect sizes); a cluster that does not pass is a result with healthy False (the
    caller decides what to do: result.unhealthy_error() is what `provision create` exits with).
    With options.report.report_to_azure the gate's failing nodes are reported to Guest Health
    Reporting before they are deleted, and that reporting is checked before anything is created.
    """
    refuse(options.findings())  # the verb's door: every option out of range, once, before anything happens
    gate = options.gate
    reporter = _reporter(session, options)
    validated = request if isinstance(request, Spec) else None
    if validated is not None:
        request = validated.request
    if gate.spare_racks:
        request, validated = with_spare_racks(request, gate.spare_racks), None
    if gate.enabled and (options.dry_run or not options.wait):
        raise InputError("--check needs the deployment to finish", code="CHECK_NEEDS_WAIT",
                         remedy="drop --dry-run/--no-wait, or run 'provision check' after 'provision wait'")
    resource_group = request.resource_group
    zones, locations = list(options.zones), list(options.fallback_locations)
    bad = [f for f in check_fallbacks(zones, locations) if f.is_error]
    if bad:
        raise ValidationFailed(bad)
    tried = candidates(request, zones, locations)
    held = 0  # instances this cluster held before this run: a fallback must not delete them
    for attempt, (location, zone) in enumerate(tried):
        spec = validated if attempt == 0 and validated is not None else validate(
            request.with_changes(location=location, zone=zone), command="create")
        if options.scale_sets is not None:
            spec = structs.replace(spec, scale_sets=tuple(options.scale_sets))
        # One listing serves the quota arithmetic, the group check and finding what exists.
        listed = list_group(session, resource_group)
        plan, pf = prepare(session, spec, listed, fallback_zones=zones if attempt == 0 else [],
                           accept_terms=options.accept_terms)
        result = CreateResult(plan, pf, options.dry_run, replacing=gate.replace_unhealthy and gate.enabled)
        deployer = Deployer(session, plan, resource_group, on_event=options.on_event, timeout=options.timeout)
        analysis = analyse(session, deployer, listed, strict=True)
        for line in deployer.kept_notices:  # what the user added to azgpu's resources stays
            options.on_notice(line)
        result.kept = list(deployer.kept_notices)
        if options.arm_validate:  # Azure's own preflight of exactly these bodies, after azgpu's checks passed
            result.azure_validation = arm_check(session, deployer, group_exists=listed is not None,
                                                location=plan.spec.request.location)
        if attempt == 0:
            held = analysis.nodes_before
        if options.dry_run:
            cost = cost_of(session, plan, analysis, options.currency)
            result.what_if = report_of(analysis, deployer, cost=cost)
            return result
        if analysis.deleted and not options.allow_scale_in:
            confirm = options.confirm
            if confirm is None or not confirm(format_what_if(report_of(analysis, deployer))):
                raise refusal(analysis, plan.spec.names.cluster, resource_group, declined=confirm is not None)
        if pf.accept_terms is not None:  # the first write, after every check passed
            _accept_terms(session, pf.accept_terms)
            result.terms_accepted = pf.accept_terms.arm()
        deployer.removals = analysis.removals
        created_group = deployer.ensure_resource_group(location, exists=listed is not None)
        try:
            events = deployer.deploy(wait=options.wait, listed=listed, fresh_group=created_group,
                                     current=analysis.current, doomed=analysis.doomed)
        except CapacityError as exc:
            if attempt == len(tried) - 1:
                raise
            if held and not options.allow_scale_in:
                # Moving to another zone or location re-creates the scale sets: the nodes the cluster
                # already had would go with them.
                options.on_notice(f"not trying another zone or location: that deletes the {held} node(s) cluster "
                                  f"'{plan.spec.names.cluster}' already has; --allow-scale-in permits it")
                raise
            nxt = tried[attempt + 1]
            options.on_notice(f"{exc.message}; trying {nxt[0]}" + (f" zone {nxt[1]}" if nxt[1] else ""))
            _clean_for_retry(session, plan, resource_group, moving=nxt[0] != location)
            continue
        result.resource_group_created = created_group
        result.resources = list(events.values())
        if gate.enabled:
            _health_gate(session, plan, result, gate, _before_delete(reporter, options), options.on_notice)
        if options.certify is not None and options.wait and (result.health is None or result.health.healthy):
            from .certification import certify  # the suite loads only when asked for

            done = certify(session, plan.spec.names.cluster, resource_group, dataclasses.replace(
                options.certify, before_delete=options.before_delete))
            result.certificate = done.as_dict()
        if reporter is not None:
            result.reports = reporter.entries + (result.certificate or {}).get("reports", [])
        return result
    raise AssertionError("unreachable: the loop returns or raises")  # candidates() always holds one


def _reporter(session, options: CreateOptions) -> Reporter | None:
    """Guest Health Reporting, checked before anything is created: a subscription that cannot report
    stops the run here rather than after the cluster exists."""
    report = options.report
    if not report.report_to_azure or options.dry_run:
        return None
    reporter = Reporter(session, insight_timeout=report.insight_timeout, confirm=report.confirm,
                        on_event=options.on_notice)
    reporter.preflight()
    return reporter


def _before_delete(reporter: Reporter | None, options: CreateOptions) -> Callable[[list], None] | None:
    hooks = [h for h in (reporter, options.before_delete) if h is not None]
    if len(hooks) < 2:
        return hooks[0] if hooks else None

    def both(nodes: list) -> None:
        for hook in hooks:
            hook(nodes)

    return both


def _accept_terms(session, plan) -> None:
    try:
        accept_marketplace_terms(session, plan)
    except Exception as exc:
        raise to_azure_error(exc, f"accepting the marketplace terms of plan {plan.name}") from None


def with_spare_racks(request: Request, spare_racks: int) -> Request:
    """The request with `spare_racks` whole racks more; a profile without racks exits 2 before anything is
    created (a negative count or one of another type: GateOptions' own findings, at create's door)."""
    per_rack = load_profile(request.profile).rack_size if request.profile else None
    if not per_rack:
        raise InputError(f"--spare-racks needs a profile with rack-scale NVLink (nd-gb200-v6, nd-gb300-v6), "
                         f"not '{request.profile}'", code="SPARE_RACKS_WITHOUT_RACKS",
                         remedy="drop --spare-racks, or use --profile nd-gb300-v6")
    return request.with_changes(nodes=(request.nodes or 0) + spare_racks * per_rack)


def _health_gate(session, plan: Plan, result: CreateResult, gate: GateOptions, before_delete,
                 on_notice: Callable[[str], None]) -> None:
    """The gate over the cluster create just deployed, as its own plan describes it: nothing is listed or
    loaded again to find it (LiveCluster.of_plan)."""
    cluster = LiveCluster.of_plan(plan)
    vertical = plan.spec.profile.vertical_connect
    replace = gate.replace_unhealthy
    on_notice(f"health check of {plan.spec.nodes} node(s)" + (", replacing the unhealthy ones" if replace and not
                                                               vertical else ""))
    hooks = GateHooks(before_delete=before_delete, on_round=health_gate.round_notices(on_notice), on_notice=on_notice)
    if vertical:  # whole racks only: azgpu.deploy.rack_gate
        racked = rack_gate.gate(session, cluster, gate, hooks)
        outcome = racked.health
        result.racks = racked.racks
        if gate.spare_racks:
            result.spare_racks = {"requested": gate.spare_racks, "removed": racked.pruned}
    else:
        outcome = health_gate.gate(session, cluster, gate, hooks)
    result.health = outcome


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
        raise to_azure_error(exc,
                             f"removing the scale sets of {plan.spec.names.cluster} before the next zone") from None
