"""The health gate for vertical-connect racks (ND GB200/GB300 v6), and pruning spare racks.

Azure creates these scale sets only in whole racks ("Capacity must be a multiple of 18 for SKUs that
support vertical connect", T-gb300-vmss; Microsoft's GB300 test deploys capacity 18, R-agentbaker-gb300).
Nothing Microsoft publishes says that one VM of a rack can be deleted, reimaged onto other hardware
or redeployed (the size page lists "Service Healing: Not Supported"), so azgpu never deletes single
instances of a rack: an unhealthy node is reported (Guest Health Reporting, with --report-to-azure),
left out of the hostfiles and scheduler files, and its rack is named as short. What azgpu does
delete is whole racks, and only with `create --spare-racks N`: it asked for N racks more than
wanted, checks every node, then removes the racks that are partial, unhealthy or beyond the count,
at most N racks' worth of instances, after reporting their bad hosts (docs/gb-racks.md).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ..health.model import INCONCLUSIVE
from ..profiles import find_size
from ..rack_record import save
from ..racks import SUBGROUP, disputes, fabric_of, group
from ..resource_types import VMSS
from . import health_gate
from .arm import to_azure_error
from .interface import NO_HOOKS, GateHooks, GateOptions, LiveCluster, RackGateResult
from .lifecycle import rack_signals

NOT_DELETED = "failed the health check; not deleted: Azure creates vertical-connect scale sets only in whole racks"
RACK_IDENTITY = "rack_identity"


def _signals(session, resource_group: str, scale_sets: list[str]) -> dict[str, dict[str, str | None]]:
    found: dict[str, dict[str, str | None]] = {}
    try:
        for name in scale_sets:
            found.update(rack_signals(session, resource_group, name))
    except Exception as exc:  # to_azure_error re-raises anything not from Azure
        raise to_azure_error(exc, "reading the racks Azure reports") from None
    return found


def identity(report, signals: dict[str, dict[str, str | None]], per_rack: int) -> dict[str, str]:
    """Mark the nodes whose NVLink domain disagrees with Azure's rack (or with the other nodes) inconclusive in
    the report: what a node says about its rack is evidence, not an instruction. hostname -> why."""
    fabrics = {n.computer_name: fabric_of(n) for n in report.nodes}
    disputed = disputes(_domains(report.nodes), signals, fabrics, per_rack)
    if disputed:
        report.nodes = [dataclasses.replace(n, status=INCONCLUSIVE, reason_code=RACK_IDENTITY, reason=(
            f"{disputed[n.computer_name]}: its rack is in doubt, so it is neither deleted nor reported"))
            if n.computer_name in disputed else n for n in report.nodes]
    return disputed


def _domains(nodes: list[Any]) -> list[dict[str, Any]]:
    by_set: dict[str, list[Any]] = {}
    for n in nodes:
        by_set.setdefault(n.scale_set, []).append(n)
    return [{"scale_set": name, "nodes": [{"hostname": n.computer_name, "instance_id": n.instance_id}
                                          for n in sorted(members, key=lambda n: int(n.instance_id)
                                                          if n.instance_id.isdigit() else 0)]}
            for name, members in sorted(by_set.items())]


def measure(signals: dict[str, dict[str, str | None]], cluster: str, nodes: list[Any], per_rack: int,
            excluded: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """The racks of the checked nodes: Azure's where it reports them, the nodes' fabric as evidence."""
    fabrics = {n.computer_name: fabric_of(n) for n in nodes}
    return group(cluster, _domains(nodes), signals, per_rack, fabrics=fabrics, excluded=excluded)


def for_check(session, cluster: str, resource_group: str, report) -> list[dict[str, Any]] | None:
    """`provision check` on a vertical-connect cluster: its racks as the nodes measured them, nodes that
    did not pass left out (and the measurement recorded for `outputs`); None on other sizes."""
    sizes = {s.get("size") for s in report.scale_sets if s.get("size")}
    try:
        per_rack = next((find_size(size)[0].rack_size for size in sizes), None)
    except Exception:  # a size no profile knows has no racks azgpu could name
        return None
    if not per_rack:
        return None
    signals = _signals(session, resource_group, sorted({n.scale_set for n in report.nodes}))
    identity(report, signals, per_rack)
    excluded = {n.computer_name: n.summary() for n in report.nodes if not n.passed}
    racks = measure(signals, cluster, report.nodes, per_rack, excluded=excluded)
    save(getattr(session, "subscription_id", "") or "", resource_group, cluster, report.nodes, excluded)
    return racks


def choose(racks: list[dict[str, Any]], bad: set[str], per_rack: int, wanted: int,
           spare: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]], str | None]:
    """(racks to keep, racks to remove, why nothing is removed). Whole healthy racks first, in order;
    at most `spare` racks' worth of instances go, and a scale set only ever loses whole racks' worth."""
    def whole_and_healthy(rack: dict[str, Any]) -> bool:
        return (len(rack["nodes"]) == per_rack and not bad & set(rack["nodes"])
                and rack.get("agrees_with_azure", True) and not rack.get("fabric_not_complete")
                and not rack.get("disputed"))

    good = [r for r in racks if whole_and_healthy(r)]
    keep = good[:wanted]
    if len(keep) < wanted:
        keep += [r for r in racks if r not in keep][:wanted - len(keep)]
    remove = [r for r in racks if r not in keep]
    count = sum(len(r["nodes"]) for r in remove)
    if count > spare * per_rack:
        return racks, [], (f"removing the {len(remove)} rack(s) that are not whole and healthy would take {count} "
                           f"instances, more than the {spare} spare rack(s) of {per_rack}")
    by_set: dict[str, int] = {}
    for r in remove:
        by_set[r["scale_set"]] = by_set.get(r["scale_set"], 0) + len(r["nodes"])
    odd = [name for name, n in by_set.items() if n % per_rack]
    if odd:
        return racks, [], (f"scale set(s) {', '.join(odd)} would lose a number of instances that is not a whole "
                           f"number of racks of {per_rack}, which Azure refuses")
    return keep, remove, None


def gate(session, live: LiveCluster, options: GateOptions, hooks: GateHooks = NO_HOOKS) -> RackGateResult:
    """Check every node, measure the racks, prune spare racks, leave out what cannot be replaced.

    hooks.before_delete(nodes) reports proven-faulty nodes (Guest Health Reporting) before their racks are
    removed, and, with options.replace_unhealthy, the ones left in place; if it raises, nothing is removed.
    The result's health.stopped says why the gate stopped short, as RackGateResult.stopped does.
    """
    cluster, resource_group = live.name, live.resource_group
    replace, spare_racks, before_delete = options.replace_unhealthy, options.spare_racks, hooks.before_delete
    on_notice = hooks.on_notice or (lambda message: None)
    per_rack = live.profile.rack_size
    outcome = health_gate.gate(session, live, dataclasses.replace(options, replace_unhealthy=False, spare_racks=0),
                               GateHooks(on_round=hooks.on_round))
    report = outcome.report
    reported: set[str] = set()

    def report_to_azure(nodes: list[Any]) -> None:
        proven = [n for n in nodes if health_gate.replaceable(n) and n.computer_name not in reported]
        if proven and before_delete:
            before_delete(proven)
            reported.update(n.computer_name for n in proven)

    signals = _signals(session, resource_group, sorted({n.scale_set for n in report.nodes}))
    disputed = identity(report, signals, per_rack)
    bad = {n.computer_name for n in report.nodes if not n.passed}
    racks = measure(signals, cluster, report.nodes, per_rack)
    pruned: list[dict[str, Any]] = []
    stopped = None
    if spare_racks and disputed:
        # What decides a rack's deletion must come from Azure and agree with every node: while a node disputes
        # its rack, nothing is removed (two nodes swapping ClusterUUIDs must not make azgpu delete across racks).
        stopped = (f"{len(disputed)} node(s) disagree with Azure or each other about their rack "
                   f"({'; '.join(f'{h}: {why}' for h, why in sorted(disputed.items())[:2])}): no rack was removed")
    elif spare_racks:
        wanted = max(0, live.nodes // per_rack - spare_racks)
        keep, remove, stopped = choose(racks, bad, per_rack, wanted, spare_racks)
        if remove:
            _one_rack_each(remove, signals)
            doomed = [n for n in report.nodes if any(n.computer_name in r["nodes"] for r in remove)]
            report_to_azure(doomed)  # while the VMs still exist, as the single-node gate does
            on_notice(f"removing {len(remove)} rack(s), {len(doomed)} instance(s): "
                      + "; ".join(f"{r['name']} ({_why(r, bad, per_rack)})" for r in remove))
            _delete(session, resource_group, doomed)
            pruned = [{**r, "reason": _why(r, bad, per_rack)} for r in remove]
            gone = {n.computer_name for n in doomed}
            report.nodes = [n for n in report.nodes if n.computer_name not in gone]
    left = [n for n in report.nodes if not n.passed]
    excluded: dict[str, str] = {}
    if left:
        if replace:
            report_to_azure(left)
        excluded = {n.computer_name: f"{n.summary()}; {NOT_DELETED}" for n in left}
    racks = measure(signals, cluster, report.nodes, per_rack, excluded=excluded)
    if left:
        short = [r["name"] for r in racks if r["short"]]
        stopped = stopped or (f"{len(left)} node(s) left out of the hostfiles and scheduler files, rack(s) "
                              f"{', '.join(short) or 'none'} short: Azure does not let one VM of a rack be deleted"
                              + ("" if replace else "; --replace-unhealthy --report-to-azure reports them to Azure"))
    save(getattr(session, "subscription_id", "") or "", resource_group, cluster, report.nodes, excluded)
    outcome.stopped = stopped
    return RackGateResult(outcome, racks, pruned, stopped)


def _one_rack_each(remove: list[dict[str, Any]], signals: dict[str, dict[str, str | None]]) -> None:
    """The last check before a delete: each rack to remove is one of Azure's racks (or, where Azure reports none,
    one the nodes agree on), never a mix. Raises rather than delete across racks."""
    from ..errors import AzureError

    for rack in remove:
        subgroups = {(signals.get(h) or {}).get("subgroup") for h in rack["nodes"]}
        if rack.get("disputed") or (rack["source"] == SUBGROUP and len(subgroups) != 1):
            raise AzureError(f"rack {rack['name']} is not one of Azure's racks ({len(subgroups)} interconnect "
                             "subgroups)",
                             code="RACK_IDENTITY_UNCERTAIN", remedy="nothing was removed; run 'provision check' to see "
                             "which nodes disagree with Azure about their rack")


def _why(rack: dict[str, Any], bad: set[str], per_rack: int) -> str:
    sick = sorted(bad & set(rack["nodes"]))
    if sick:
        return f"unhealthy: {', '.join(sick)}"
    if len(rack["nodes"]) != per_rack:
        return f"partial: {len(rack['nodes'])} of {per_rack} VMs"
    if rack.get("agrees_with_azure") is False:
        return "the nodes' NVLink domain disagrees with Azure's interconnect subgroup"
    return "beyond the requested racks"


def _delete(session, resource_group: str, nodes: list[Any]) -> None:
    by_set: dict[str, list[str]] = {}
    for n in nodes:
        by_set.setdefault(n.scale_set, []).append(n.instance_id)
    try:
        pollers = [VMSS.begin_delete_instances(session, resource_group, name, ids) for name, ids in by_set.items()]
        for poller in pollers:
            poller.result()
    except Exception as exc:
        raise to_azure_error(exc, "removing spare racks") from None
