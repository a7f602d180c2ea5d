"""`provision check`: the health gate on an existing cluster (AzNHC or the fallback on every node).

Importing this module is cheap: the Azure SDK is imported only inside the command.
"""

from __future__ import annotations

import sys
from typing import Any

import click

from . import options
from ..health.limits import NODE_TIMEOUT, PARALLEL
from .options import azure_options, cluster_args, common, emit, log


def health_options(fn):
    """--parallel, --node-timeout and --nccl, shared by `check` and `create --check`."""
    for option in reversed([
        click.option("--parallel", type=int, default=PARALLEL, show_default=True,
                     help="Run Commands in flight at once (Compute allows 500 a minute per subscription)."),
        click.option("--node-timeout", type=float, default=NODE_TIMEOUT, show_default=True,
                     help="Seconds to wait for one node's verdict (60-5400; Run Command stops at 90 minutes)."),
        click.option("--nccl", is_flag=True,
                     help="Also run an NCCL all-reduce across each scale set's nodes and compare the bus bandwidth "
                          "with the size's expectation."),
    ]):
        fn = option(fn)
    return fn


def compact(report: dict[str, Any]) -> dict[str, Any]:
    """The table view: one row per node, what failed and why, the NCCL rows."""
    nodes = []
    for n in report["nodes"]:
        first = (n.get("failures") or [{}])[0]
        row = {"node": n["computer_name"], "scale_set": n["scale_set"], "instance": n["instance_id"],
               "status": n["status"], "checker": n.get("checker") or "", "check": first.get("check") or "",
               "expected": first.get("expected") or "", "measured": first.get("measured") or "",
               "code": first.get("fault_code") or "",
               "more": len(n.get("failures") or []) - 1 + (n.get("more_failures") or 0) if first else "",
               "physical_host": n.get("physical_host") or ""}
        if n["status"] == "unreachable":
            row["reason"] = n.get("reason") or ""
        nodes.append(row)
    out: dict[str, Any] = {k: report[k] for k in ("cluster", "resource_group", "healthy", "nodes_checked", "passed",
                                                  "failed", "unreachable") if k in report}
    if report.get("warnings"):
        out["warnings"] = report["warnings"]
    if report.get("stopped"):
        out["stopped"] = report["stopped"]
    out["nodes"] = nodes
    if report.get("nccl"):
        out["nccl"] = [{k: r.get(k) for k in ("scale_set", "nodes", "status", "measured_busbw_gbps",
                                              "expected_busbw_gbps", "message")} for r in report["nccl"]]
    if report.get("replaced"):
        out["replaced"] = [{k: r.get(k) for k in ("round", "computer_name", "physical_host", "summary")}
                           for r in report["replaced"]]
    return out


def emit_report(report: dict[str, Any], obj: dict) -> None:
    emit(compact(report) if obj["output"] == "table" and not obj["query"] else report, obj)


def with_compact_health(result: dict[str, Any], obj: dict) -> dict[str, Any]:
    """create's result for output: its health report as the table view when printing a table."""
    if obj["output"] == "table" and not obj["query"] and result.get("health"):
        return {**result, "health": compact(result["health"])}
    return result


def node_logger(obj: dict):
    """One stderr line per node as its verdict arrives: on a terminal, or with --verbose."""
    if not (obj["verbose"] or sys.stderr.isatty()):
        return None

    def on_node(result) -> None:
        log(f"{result.computer_name} ({result.scale_set}/{result.instance_id}): {result.status}"
            + (f": {result.summary()}" if result.status != "passed" else ""))

    return on_node


def register(cli: click.Group) -> None:
    @cli.command("check")
    @click.option("-n", "--name", default=None, help="Cluster name.")
    @click.option("-g", "--resource-group", default=None, help="Resource group.")
    @health_options
    @azure_options
    @common
    def check_cmd(obj, name, resource_group, parallel, node_timeout, nccl, subscription, simulate, simulate_latency,
                  simulate_state):
        """Run the node health checks on every node (AzNHC where the image has it, else azgpu's fallback) through
        Run Command; exit 0 only when every node passed."""
        from ..deploy import health

        cluster_args(name, resource_group, latency=simulate_latency)
        with options.session_for(subscription, simulate, simulate_latency, simulate_state) as session:
            report = health.check(session, name, resource_group, parallel=parallel, node_timeout=node_timeout,
                                  nccl=nccl, on_node=node_logger(obj))
            racks = _racks(session, name, resource_group, report)
        data = report.as_dict()
        if racks is not None:
            data["racks"] = racks
        emit_report(data, obj)
        if not report.healthy:
            raise health.unhealthy_error(data, cluster=name, resource_group=resource_group, replacing=False)


def _racks(session, name: str, resource_group: str, report) -> list | None:
    """GB200/GB300: the racks the nodes measured (azgpu.deploy.rack_gate), else None."""
    from ..deploy.rack_gate import for_check

    return for_check(session, name, resource_group, report)
