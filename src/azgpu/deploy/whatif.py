"""`create --what-if`: the plan compared with what exists, resource by resource and, for scale
sets, instance by instance; and the scale-in guard that keeps `create` from deleting GPU nodes
nobody agreed to lose.

The live side is what the deployer reads anyway (one listing of the group, a GET of each planned
resource that exists); on top, one instance listing per scale set that would lose instances, so
the report names each one. The same analysis drives `create`, so what the what-if shows is what
`create` does: the instances listed are the ones it deletes (by name, VirtualMachineScaleSets_
DeleteInstances, not left to the scale-in policy).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from ..changes import InstanceChange, ResourceChange, WhatIf
from ..errors import InputError
from ..ownership import is_ours
from ..request import Request
from ..resource_types import INSTANCES, managed, of
from .arm import list_group, to_azure_error
from .deployer import Deployer
from .live_plan import prepare

NAMES_IN_MESSAGE = 20


@dataclass
class Analysis:
    """What a deployment of the plan would do to the live cluster."""

    changes: list[ResourceChange]
    current: dict[str, Any]  # existing plan resources by key, as Deployer.existing read them
    removals: dict[str, list[str]] = field(default_factory=dict)  # scale set -> instance ids to delete
    doomed: list[str] = field(default_factory=list)  # this cluster's scale sets no longer in the plan
    nodes_before: int = 0  # instances the cluster's scale sets hold now (sku.capacity)

    @property
    def deleted(self) -> list[tuple[ResourceChange, InstanceChange]]:
        return [(c, i) for c in self.changes for i in c.deleted_instances]


def pick_instances(vms: list[Any], count: int) -> list[Any]:
    """The `count` instances a shrink deletes: failed or unfinished ones first (they run no job),
    then the highest instance ids, the ones the Default scale-in policy takes and Learn calls the
    newest ("Use scale-in policies with Azure Virtual Machine Scale Sets")."""
    def key(vm: Any) -> tuple[bool, int]:
        done = (getattr(vm, "provisioning_state", "") or "").lower() == "succeeded"
        number = int(vm.instance_id) if str(vm.instance_id).isdigit() else 0
        return done, -number

    return sorted(vms, key=key)[:max(0, count)]


def _when(value: Any) -> str:
    if isinstance(value, datetime):
        return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return str(value or "")


def _instance(vm: Any) -> InstanceChange:
    os_profile = getattr(vm, "os_profile", None)
    return InstanceChange("Delete", str(vm.instance_id), vm.name or "",
                          computer_name=(getattr(os_profile, "computer_name", "") or "") if os_profile else "",
                          provisioning_state=getattr(vm, "provisioning_state", "") or "",
                          created=_when(getattr(vm, "time_created", None)))


def _vms(session, resource_group: str, name: str) -> list[Any]:
    try:
        return INSTANCES.list(session, resource_group, name)
    except Exception as exc:
        raise to_azure_error(exc, f"instances of {name}") from None


def analyse(session, deployer: Deployer, listed: list[Any] | None, *, strict: bool = True) -> Analysis:
    """Compare the deployer's plan with the live resources of its cluster.

    strict: NAME_TAKEN and CHANGE_NOT_ALLOWED raise, as before any write; otherwise (what-if) they
    become '!' entries.
    """
    plan, rg = deployer.plan, deployer.resource_group
    current = deployer.existing(listed, strict=strict)
    out = Analysis([], current)
    for r in plan.resources:
        rid = deployer.resolver.resource_id(r.type, r.name)
        live = current.get(r.key)
        change = ResourceChange("Create", r.type, r.name, rid, r.api_version)
        planned = r.body["sku"]["capacity"] if r.kind.has_instances else None
        if live is not None:
            change.delta = deployer.delta(r, live)
            change.change = "Modify" if change.delta else "NoChange"
        if r.key in deployer.refused:
            change.change, change.reason = "Refused", deployer.refused[r.key].message
        if planned is not None:
            had = int(getattr(getattr(live, "sku", None), "capacity", 0) or 0) if live is not None else 0
            out.nodes_before += had
            change.capacity = (had, planned)
            if planned > had:
                change.instances = [InstanceChange("Create", count=planned - had)]
            elif planned < had and change.change != "Refused":
                chosen = pick_instances(_vms(session, rg, r.name), had - planned)
                change.instances = [_instance(vm) for vm in chosen]
                out.removals[r.name] = [i.instance_id for i in change.instances]
        out.changes.append(change)

    wanted = {(r.type.lower(), r.name.lower()) for r in plan.resources}
    for item in listed or []:
        kind = (item.type or "").lower()
        if (kind, (item.name or "").lower()) in wanted or not managed(item.type) \
                or not is_ours(item.tags, deployer.cluster):
            continue
        change = ResourceChange("Ignore", item.type, item.name, item.id or "",
                                reason="no longer in the plan; left as it is ('provision destroy' removes it)")
        if of(item.type).has_instances:
            had = int(getattr(getattr(item, "sku", None), "capacity", 0) or 0)
            out.nodes_before += had
            change.change, change.reason = "Delete", "a scale set of this cluster that the plan no longer has"
            change.capacity = (had, 0)
            change.instances = [_instance(vm) for vm in pick_instances(_vms(session, rg, item.name), had)]
            out.doomed.append(item.name)
        out.changes.append(change)
    return out


class ScaleInRefused(InputError):
    """create would delete instances and nobody allowed it (exit 2, nothing written)."""

    default_code = "SCALE_IN_REFUSED"


def refusal(analysis: Analysis, cluster: str, resource_group: str, *, declined: bool = False) -> ScaleInRefused:
    deleted = analysis.deleted
    names = [i.name for _, i in deleted]
    shown = ", ".join(names[:NAMES_IN_MESSAGE]) + (f" and {len(names) - NAMES_IN_MESSAGE} more"
                                                  if len(names) > NAMES_IN_MESSAGE else "")
    sets = "; ".join(f"{c.name}: {c.capacity[0]} -> {c.capacity[1]}" for c in analysis.changes
                     if c.deleted_instances and c.capacity)
    why = "was declined at the prompt" if declined else "needs --allow-scale-in (or a yes at a terminal, or --yes)"
    refused = ScaleInRefused(
        f"create would delete {len(names)} instance(s) of cluster '{cluster}' in '{resource_group}' ({sets}): "
        f"{shown}; this {why}" + ("" if declined else "; nothing was changed"),
        remedy="re-run with --allow-scale-in to delete exactly these, or keep the node count; "
               "'provision create --what-if' shows every change")
    refused.declined = declined  # the CLI exits 0 on a no at its prompt
    return refused


def report_of(analysis: Analysis, deployer: Deployer, *, cost: dict | None = None,
              preflight: dict | None = None) -> WhatIf:
    scope = f"/subscriptions/{deployer.session.subscription_id}/resourceGroups/{deployer.resource_group}"
    return WhatIf(deployer.cluster, deployer.resource_group, scope, analysis.changes, cost, preflight)


def cost_of(session, plan, analysis: Analysis, currency: str) -> dict:
    from ..pricing import plan_estimate

    return plan_estimate(plan, currency=currency, before_nodes=analysis.nodes_before,
                         simulated=bool(getattr(session, "simulated", False))).as_dict()


def what_if(session, request: Request, *, currency: str = "USD", prices: bool = True,
            arm: bool = True) -> WhatIf:
    """What `create` would do to the subscription, resource by resource and instance by instance,
    without writing anything; the preflight's findings and the cost come with it.

    A change Azure cannot make in place, or a resource of the same name azgpu did not create, is a
    '#' entry here (create stops on it); instances a shrink deletes are '-' lines, one per node.
    arm: ARM's own what-if of the same template comes with it (Deployments - What If); False
    (--no-arm-validate) leaves it out.
    """
    from ..pricing import check_currency
    from ..spec import validate

    currency = check_currency(currency)
    spec = validate(request, command="create")
    listed = list_group(session, request.resource_group)
    plan, pf = prepare(session, spec, listed, strict=False)
    deployer = Deployer(session, plan, request.resource_group)
    analysis = analyse(session, deployer, listed, strict=False)
    cost = cost_of(session, plan, analysis, currency) if prices else None
    report = report_of(analysis, deployer, cost=cost, preflight=pf.as_dict())
    if arm:
        from .arm_preflight import what_if as arm_what_if

        report.arm = arm_what_if(session, deployer, group_exists=listed is not None,
                                 location=plan.spec.request.location)
    else:
        report.arm_note = "skipped (--no-arm-validate)"
    return report
