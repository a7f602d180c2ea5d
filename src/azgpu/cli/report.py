"""`provision report`, `provision reports`, create's --report-to-azure, `provision simulate ghr`:
Guest Health Reporting (preview) of nodes that failed the health checks.

Importing this module is cheap: the Azure SDK is imported only inside the commands.
"""

from __future__ import annotations

import sys
from typing import Any

import click

from ..errors import AzgpuError, Finding, InputError
from ..health.limits import INSIGHT_TIMEOUT
from ..resource_types import IMPACT
from . import options
from .check import node_logger
from .options import azure_options, cluster_args, common, emit, log


def report_options(fn):
    """--report-to-azure, --insight-timeout and -y/--yes of `create`."""
    for option in reversed([
        click.option("--report-to-azure", is_flag=True,
                     help="With --replace-unhealthy: before deleting a "
                          "failing node, file a Guest Health Report (preview) with Azure for its host (see 'provision "
                          "report'). Asks first unless --yes."),
        click.option("--insight-timeout", type=float, default=INSIGHT_TIMEOUT, show_default=True,
                     help="Seconds to follow a report's insights before going on (0: read them once)."),
        click.option("-y", "--yes", is_flag=True, help="Answer yes to every prompt: delete the instances a scale-in "
                     "lists, and with --report-to-azure file the reports."),
    ]):
        fn = option(fn)
    return fn


def report_findings(*, report_to_azure: bool, replace_unhealthy: bool, yes: bool,
                    ) -> list[Finding]:
    """What makes create's reporting request unable to work, reported with the request's other
    findings before anything is created or written (--insight-timeout is ReportOptions' own check)."""
    if not report_to_azure:
        return []
    out = []
    if not replace_unhealthy:
        out.append(Finding(code="REPORT_NEEDS_REPLACE",
                           message="--report-to-azure reports the nodes --replace-unhealthy is about "
                           "to delete", remedy="add --replace-unhealthy, or report a cluster's failing nodes without "
                           "replacing them with 'provision report' (its -n and -g name the cluster)",
                           field="report_to_azure"))
    try:
        _need_confirmation(yes)
    except AzgpuError as exc:
        out.append(Finding(code=exc.code, message=exc.message, remedy=exc.remedy, field="report_to_azure"))
    return out


def _node_names(nodes) -> None:
    """--node values: a computer name, SCALESET/INSTANCE_ID, an instance id or a resource id, as printable text."""
    for node in nodes:
        if not node or len(node) > 400 or not node.isprintable() or node.strip() != node:
            raise InputError(f"--node {node!r} is not a node name or id", code="INVALID_NODE",
                             remedy="give the computer name or SCALESET/INSTANCE_ID ('provision status' lists them)")


def _need_confirmation(yes: bool) -> None:
    if not yes and not sys.stdin.isatty():
        raise InputError("a Guest Health Report can send a host to repair, and there is no terminal to ask",
                         code="CONFIRMATION_REQUIRED", remedy="add --yes to report without asking")


def ask_to_report(reports) -> bool:
    log(f"Guest Health Reporting (preview): {len(reports)} report(s) to Azure, which may take the hosts out "
        "of production for repair:")
    for r in reports:
        log(f"  {r.node.computer_name} on host {r.node.physical_host or '?'}: {r.category} "
            f"({'; '.join(f.summary() for f in r.failures)})")
    return options.confirm("File them?")


def _node_line(result) -> None:
    """report's progress without a terminal too (a CI log shows each node as its verdict arrives, as
    create shows each resource): one stderr line per node."""
    log(f"{result.computer_name} ({result.scale_set}/{result.instance_id}): {result.status}"
        + (f": {result.summary()}" if result.status != "passed" else ""))


def compact(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The table view of report outcomes: one row per node and category."""
    rows = []
    for e in entries:
        insight = e.get("insight") or {}
        rows.append({"node": e["node"], "physical_host": e.get("physical_host") or "",
                     "category": (e.get("category") or "").rsplit(".", 1)[-1], "state": e["state"],
                     "insight": insight.get("status_code") or e.get("reason") or "",
                     "terminal": insight.get("terminal", ""), "impact": e.get("impact") or ""})
    return rows


def with_reports(result: dict[str, Any], entries: list[dict[str, Any]], obj: dict) -> dict[str, Any]:
    table = obj["output"] == "table" and not obj["query"]
    return {**result, "guest_health_reports": compact(entries) if table else entries}


def with_compact_reports(result: dict[str, Any], obj: dict) -> dict[str, Any]:
    """create's result for output: its Guest Health Reports, when it filed any, as the table view."""
    if "guest_health_reports" not in result:
        return result
    return with_reports(result, result["guest_health_reports"], obj)


def register(cli: click.Group) -> None:
    from .simulate import group

    @cli.command("report")
    @click.option("-n", "--name", default=None, help="Cluster name.")
    @click.option("-g", "--resource-group", default=None, help="Resource group.")
    @click.option("--node", "nodes", multiple=True, metavar="ID",
                  help="Only this node: computer name, SCALESET/INSTANCE_ID, instance id or resource id (repeatable).")
    @click.option("--insight-timeout", type=float, default=INSIGHT_TIMEOUT, show_default=True,
                  help="Seconds to follow the reports' insights (0: read them once).")
    @click.option("-y", "--yes", is_flag=True, help="Do not ask before filing the reports.")
    @click.option("--parallel", type=int, default=None, help="Run Commands in flight at once (as 'provision check').")
    @click.option("--node-timeout", type=float, default=None, help="Seconds to wait for one node's verdict.")
    @azure_options
    @common
    def report_cmd(obj, name, resource_group, nodes, insight_timeout, yes, parallel, node_timeout, subscription,
                   simulate, simulate_latency, simulate_state):
        """Check the nodes and file a Guest Health Report (preview) with Azure for each failing one's host.

        The checks run as in 'provision check' (one Run Command per node, which also reads the physical
        host name); each failing node gets one workload impact per impact category, named by node, fault
        and day, so a re-run the same day files nothing new. Nothing is deleted: to replace the nodes, re-run the
        create that made the cluster with --check --replace-unhealthy added.
        """
        from ..deploy import CheckOptions, ReportOptions, ghr, report
        from ..deploy.interface import GateHooks
        from ..health.limits import check_options
        from ..health.outcome import REPLACE_IN_WORDS

        # Every option of its own before Azure is asked anything (the reporting preflight comes first there).
        cluster_args(name, resource_group, latency=simulate_latency)
        check_options(parallel=parallel, node_timeout=node_timeout)
        ghr.validate_options(insight_timeout=insight_timeout)
        _node_names(nodes)
        _need_confirmation(yes)
        check = CheckOptions(**{k: v for k, v in (("parallel", parallel), ("node_timeout", node_timeout))
                                if v is not None})
        with options.session_for(subscription, simulate, simulate_latency, simulate_state) as session:
            done = report(session, name, resource_group,
                          ReportOptions(report_to_azure=True, insight_timeout=insight_timeout,
                                        confirm=None if yes else ask_to_report),
                          nodes=nodes, check=check, hooks=GateHooks(on_node=node_logger(obj) or _node_line,
                                                                    on_notice=log))
        health, entries = done.health, done.entries
        bad = health.failed
        filed = [e for e in entries if e["state"] in ("filed", "already_filed")]
        emit(with_reports(done.as_dict(), entries, obj), obj)
        for e in entries:
            if e["state"] in ("not_reported", "vm_gone"):
                log(f"{e['node']}: not reported: {e.get('reason')}")
        for n in health.inconclusive + health.unreachable:
            log(f"{n.computer_name}: {n.status}, not reported: {n.reason}")
        if not bad:
            log("every node passed: nothing to report" if all(n.passed for n in health.nodes) else
                "no node shows a host fault: nothing to report")
        elif filed:
            log(f"reported; to replace the node(s), {REPLACE_IN_WORDS} (with --report-to-azure too, it files "
                "nothing new the same day)")

    @cli.command("reports")
    @click.option("-n", "--name", default=None, help="Cluster name (default: every scale set of the group).")
    @click.option("-g", "--resource-group", default=None, help="Resource group.")
    @azure_options
    @common
    def reports_cmd(obj, name, resource_group, subscription, simulate, simulate_latency, simulate_state):
        """The Guest Health Reports filed for a cluster's nodes, read from Azure, with their latest insight."""
        from ..deploy.ghr import list_reports

        if not resource_group:
            raise InputError("-g/--resource-group required", code="MISSING_ARGUMENT",
                             remedy="name the resource group, e.g. -g ml-rg (and -n train01 for one cluster)")
        with options.session_for(subscription, simulate, simulate_latency, simulate_state) as session:
            found = list_reports(session, resource_group, name)
        if obj["output"] == "table" and not obj["query"]:
            # Within 120 columns: the category and the time are in azgpu's impact names, and in -o json.
            found = [{"impact": r["impact"], "node": f"{r['scale_set']}/{r['instance_id']}",
                      "physical_host": r["physical_host"] or "", "insight": r["status_code"] or "no insight yet",
                      "terminal": r["terminal"]} for r in found]
        emit(found, obj)

    simulate_group = group(cli)

    @simulate_group.command("ghr")
    @click.option("--provider-state", type=click.Choice(["Registered", "NotRegistered", "Registering", "Unregistered"]),
                  default=None, help=f"The {IMPACT.namespace} resource provider's registration state.")
    @click.option("--reporter/--no-reporter", "reporter", default=None,
                  help="Whether the caller holds the Azure Impact Reporter role (--no-reporter: read-only).")
    @click.option("--simulate-state", default=None, help="File holding the simulated cloud (default: user state dir).")
    @common
    def ghr_cmd(obj, provider_state, reporter, simulate_state):
        """Onboard (or not) the simulated subscription to Guest Health Reporting."""
        from ..deploy.simulate import simulated_azure

        if provider_state is None and reporter is None:
            raise InputError("nothing to set", code="MISSING_ARGUMENT",
                             remedy="pass --provider-state (e.g. --provider-state Registered) and/or "
                                    "--reporter/--no-reporter")
        azure = simulated_azure(simulate_state)
        if provider_state is not None:
            azure.set_provider(IMPACT.namespace, provider_state)
        if reporter is not None:
            azure.set_permissions(None if reporter else ["*/read"])
        emit({"provider_state": provider_state, "reporter": reporter}, obj)
