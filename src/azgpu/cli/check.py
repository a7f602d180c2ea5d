"""`provision check`: the health gate on an existing cluster (AzNHC or the fallback on every node).

Importing this module is cheap: the Azure SDK is imported only inside the command.
"""

from __future__ import annotations

import functools
import sys
from typing import Any

import click

from ..health.limits import NODE_TIMEOUT, PARALLEL
from . import options
from .options import azure_options, cluster_args, common, emit, log


def health_options(fn):
    """--parallel, --node-timeout and --nccl, shared by `check` and `create --check`: the command gets
    them as one CheckOptions, `node_check`."""

    @functools.wraps(fn)
    def command(*args, parallel, node_timeout, nccl, **kwargs):
        from ..deploy.interface import CheckOptions

        return fn(*args, node_check=CheckOptions(parallel=parallel, node_timeout=node_timeout, nccl=nccl), **kwargs)

    wrapped = command
    for option in reversed([
        click.option("--parallel", type=int, default=PARALLEL, show_default=True,
                     help="Run Commands in flight at once (Compute allows 500 a minute per subscription)."),
        click.option("--node-timeout", type=float, default=NODE_TIMEOUT, show_default=True,
                     help="Seconds to wait for one node's verdict (60-5400; Run Command stops at 90 minutes)."),
        click.option("--nccl", is_flag=True,
                     help="Also run an NCCL all-reduce across each scale set's nodes and compare the bus bandwidth "
                          "with the size's expectation."),
    ]):
        wrapped = option(wrapped)
    return wrapped


# A table lists every node up to this many; above it, the nodes that did not pass in full and the rest
# counted (--all-nodes lists them all; -o json always has every node).
LISTED_NODES = 20
VERDICT = ("healthy", "nodes_checked", "passed", "failed", "inconclusive", "unreachable")


def _node_row(n: dict[str, Any]) -> dict[str, Any]:
    first = (n.get("failures") or [{}])[0] if n["status"] == "failed" else {}
    row = {"node": n["computer_name"], "scale_set": n["scale_set"], "instance": n["instance_id"],
           "status": n["status"], "checker": n.get("checker") or "", "check": first.get("check") or "",
           "expected": first.get("expected") or "", "measured": first.get("measured") or "",
           "code": first.get("fault_code") or "",
           "more": len(n.get("failures") or []) - 1 + (n.get("more_failures") or 0) if first else "",
           "physical_host": n.get("physical_host") or ""}
    if n["status"] in ("unreachable", "inconclusive"):
        row["reason"] = n.get("reason") or ""
    return row


def _node_rows(nodes: list[dict[str, Any]], all_nodes: bool) -> list[dict[str, Any]]:
    """Every node, or (past LISTED_NODES, unless all_nodes) those that did not pass and a count of the rest."""
    if all_nodes or len(nodes) <= LISTED_NODES:
        return [_node_row(n) for n in nodes]
    rows = [_node_row(n) for n in nodes if n["status"] != "passed"]
    passed = len(nodes) - len(rows)
    if passed:
        rows.append({"node": f"+{passed} more" if rows else f"{passed} nodes", "status": "passed"})
    return rows


def compact(report: dict[str, Any], all_nodes: bool = False) -> dict[str, Any]:
    """The table view: one row per node (a long list summarised), what failed and why, the NCCL rows, and
    the verdict and its counts last, where a terminal's last screen shows them."""
    out: dict[str, Any] = {k: report[k] for k in ("cluster", "resource_group") if k in report}
    if report.get("warnings"):
        out["warnings"] = report["warnings"]
    out["nodes"] = _node_rows(report["nodes"], all_nodes)
    if report.get("nccl"):
        # all_reduce_perf's bus bandwidth is in GB/s (bytes): the columns say so ('gbs' reads GB/s).
        out["nccl"] = [{"scale_set": r.get("scale_set"), "nodes": r.get("nodes"), "status": r.get("status"),
                        "measured_busbw_gbs": r.get("measured_busbw_gbps"),
                        "expected_busbw_gbs": r.get("expected_busbw_gbps"), "message": r.get("message")}
                       for r in report["nccl"]]
    if report.get("replaced"):
        out["replaced"] = [{k: r.get(k) for k in ("round", "computer_name", "physical_host", "summary")}
                           for r in report["replaced"]]
    verdict = {k: report[k] for k in VERDICT if k in report}
    if len(out["nodes"]) < len(report["nodes"]):
        listed = len(out["nodes"]) - 1
        verdict["listed"] = (f"{listed} of {len(report['nodes'])} nodes, those that did not pass "
                             "(--all-nodes: every one)")
    if report.get("stopped"):
        verdict["stopped"] = report["stopped"]
    out["verdict"] = verdict
    return out


def emit_report(report: dict[str, Any], obj: dict) -> None:
    table = obj["output"] == "table" and not obj["query"]
    emit(compact(report, obj.get("all_nodes", False)) if table else report, obj)


def with_compact_health(result: dict[str, Any], obj: dict) -> dict[str, Any]:
    """create's result for output: its health report as the table view when printing a table, last (the
    verdict ends the table)."""
    if obj["output"] == "table" and not obj["query"] and result.get("health"):
        rest = {k: v for k, v in result.items() if k != "health"}
        return {**rest, "health": compact(result["health"], obj.get("all_nodes", False))}
    return result


ALL_NODES = click.option("--all-nodes", is_flag=True,
                         help=f"-o table: list every node (past {LISTED_NODES} nodes the table lists those that did "
                              "not pass and counts the rest; -o json always has every node).")


def node_logger(obj: dict):
    """One stderr line per node as its verdict arrives: on a terminal, or with --verbose."""
    if not (obj["verbose"] or sys.stderr.isatty()):
        return None

    def on_node(result) -> None:
        log(f"{result.computer_name} ({result.scale_set}/{result.instance_id}): {result.status}"
            + (f": {result.summary()}" if result.status != "passed" else ""))

    return on_node


class Progress:
    """Where the check stands, on stderr: one line per node on a terminal or with --verbose, otherwise (a
    pipe, a CI log) a line of counts when a tenth of the nodes more has answered, and at the end."""

    def __init__(self, obj: dict, clock=None):
        import time

        self.each = node_logger(obj)
        self.clock = clock or time.monotonic
        self.total = 0
        self.counts: dict[str, int] = {}
        self.next_at = 0
        self.last = 0.0
        self.shown = -1

    def start(self, total: int) -> None:
        self.total += total
        self.next_at = max(1, self.total // 10)
        self.last = self.clock()
        log(f"checking {total} node(s)")  # before the first answer, on a terminal as in a pipe

    def __call__(self, result) -> None:
        self.counts[result.status] = self.counts.get(result.status, 0) + 1
        if self.each is not None:
            self.each(result)
            return
        answered = sum(self.counts.values())
        if answered >= self.next_at or answered == self.total or self.clock() - self.last >= 30:
            self.next_at = answered + max(1, self.total // 10)
            self.last = self.clock()
            self.shown = answered
            log(self.line())

    def line(self) -> str:
        answered = sum(self.counts.values())
        parts = ", ".join(f"{self.counts[s]} {s}" for s in ("passed", "failed", "inconclusive", "unreachable")
                          if self.counts.get(s))
        return f"{answered} of {self.total} node(s) answered ({parts or 'none yet'}), {self.total - answered} pending"


def _judge_output(obj: dict, path: str, size: str) -> None:
    """check --from-output FILE --size SIZE: one captured output judged as the gate judges it."""
    from pathlib import Path

    from ..bounded_read import read_bounded
    from ..errors import InputError
    from ..health.judging import judge
    from ..health.outcome import REPLACE_IN_WORDS, UnhealthyNodes, unhealthy_error

    limit = 4 * 1024 * 1024
    try:
        if path == "-":
            text = sys.stdin.read(limit)
        else:  # a FIFO would wait for a writer, /dev/zero never end: only a regular file's first 4 MB are read
            text = read_bounded(Path(path), limit=limit)[:limit].decode("utf-8", errors="replace")
    except (OSError, ValueError) as exc:
        raise InputError(f"cannot read {path}: {getattr(exc, 'strerror', None) or exc}", code="UNREADABLE_FILE",
                         remedy="give the file that holds the node script's output (or - for stdin)") from None
    result = judge(text, size, name=path)
    data = {"nodes_checked": 1, "healthy": result.passed, result.status: 1, "nodes": [result.as_dict()]}
    emit_report(data, obj)
    if not result.passed:
        # One output, no cluster: the gate's remedy would name a cluster and group this node has none of.
        error = unhealthy_error(data, cluster="", resource_group="", replacing=False)
        replace = f"; to replace a failing node of a cluster azgpu made, {REPLACE_IN_WORDS}"
        raise UnhealthyNodes(error.message, code=error.code, report=data, remedy=(
            "the node's findings are above (-o json shows every check and its log lines)"
            + (replace if error.code == "UNHEALTHY_NODES" else "")))


def register(cli: click.Group) -> None:
    @cli.command("check")
    @click.option("-n", "--name", default=None, help="Cluster name.")
    @click.option("-g", "--resource-group", default=None, help="Resource group.")
    @click.option("--from-output", "from_output", default=None, metavar="FILE",
                  help="Judge one node's captured output (what the node script printed, or a Run Command result) as "
                       "the gate does, without Azure; needs --size.")
    @click.option("--print-script", is_flag=True,
                  help="Print the on-node check with --size's expectations, to run by hand as root (ssh) or as a "
                       "scheduler's health check; it prints one verdict line.")
    @click.option("--size", default=None, help="The VM size for --from-output and --print-script.")
    @ALL_NODES
    @health_options
    @azure_options
    @common
    def check_cmd(obj, name, resource_group, from_output, print_script, size, all_nodes, node_check, subscription,
                  simulate, simulate_latency, simulate_state):
        """Run the node health checks on every node (AzNHC where the image has it, else azgpu's fallback) through
        Run Command; exit 0 only when every node passed. Only a failed node (a host fault) is ever replaced or
        reported; inconclusive and unreachable nodes are shown with their reason."""
        from ..errors import InputError
        from ..health.limits import check_options

        # Every option first: before a lock is taken, a request is sent or a script is printed.
        check_options(parallel=node_check.parallel, node_timeout=node_check.node_timeout)
        obj["all_nodes"] = all_nodes
        if from_output or print_script:
            if not size:
                raise InputError("--size is required with --from-output and --print-script", code="MISSING_ARGUMENT",
                                 remedy="name the VM size, e.g. --size Standard_ND96isr_H100_v5")
            if from_output and print_script:
                raise InputError("--from-output and --print-script do different things", code="CONFLICTING_OPTIONS",
                                 remedy="use one of them")
            if print_script:
                from ..health.script import node_script

                click.echo(node_script(size, node_timeout=node_check.node_timeout), nl=False)
                return
            _judge_output(obj, from_output, size)
            return
        from ..deploy import check
        from ..health.outcome import unhealthy_error

        cluster_args(name, resource_group, latency=simulate_latency)
        progress = Progress(obj)
        with options.session_for(subscription, simulate, simulate_latency, simulate_state) as session:
            report = check(session, name, resource_group, node_check, on_node=progress, on_start=progress.start)
            racks = _racks(session, name, resource_group, report)
        data = report.as_dict()
        if racks is not None:
            data["racks"] = racks
        if progress.each is None and progress.total and progress.shown != sum(progress.counts.values()):
            log(progress.line())
        emit_report(data, obj)
        if not report.healthy:
            raise unhealthy_error(data, cluster=name, resource_group=resource_group, replacing=False)


def _racks(session, name: str, resource_group: str, report) -> list | None:
    """GB200/GB300: the racks the nodes measured (azgpu.deploy.rack_gate), else None."""
    from ..deploy.rack_gate import for_check

    return for_check(session, name, resource_group, report)
