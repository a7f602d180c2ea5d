"""The error a health check that did not pass ends with: which nodes, why, and what to do. Apart from
the gate (azgpu.deploy.health_gate) so that judging a captured output needs nothing of Azure."""

from __future__ import annotations

from typing import Any

from ..errors import AzureError
from .model import FAILED, INCONCLUSIVE, PASSED, UNREACHABLE


class UnhealthyNodes(AzureError):
    """The health gate did not pass. `report` is the report as a dict; `result` is what `create`
    had done (with the report under "health") when the gate ran inside create."""

    def __init__(self, message: str, *, code: str, remedy: str, report: dict, result: dict | None = None):
        super().__init__(message, code=code, remedy=remedy)
        self.report = report
        self.result = result


# Where the command that made the cluster is not at hand (check, report): its options cannot be guessed, so the
# remedy says what to add rather than quote a create with its options left out ('provision create ...').
REPLACE_IN_WORDS = "re-run the create that made the cluster with --check --replace-unhealthy added"


def unhealthy_error(report: dict[str, Any], *, cluster: str, resource_group: str, replacing: bool,
                    stopped: str | None = None, result: dict | None = None,
                    rerun: str | None = None) -> UnhealthyNodes:
    """The error a gate that did not pass ends with: which nodes, why, what to do. `rerun`: the create command
    that replaces the failing nodes, whole as the user pastes it (create's own invocation), else said in words."""
    nodes = report["nodes"]
    failed = [n for n in nodes if n["status"] == FAILED]
    inconclusive = [n for n in nodes if n["status"] == INCONCLUSIVE]
    unreachable = [n for n in nodes if n["status"] == UNREACHABLE]
    nccl = [r for r in report.get("nccl", []) if r["status"] != PASSED and r["status"] != "skipped"]
    parts = [f"{len(failed)} of {len(nodes)} node(s) failed"] if failed else []
    if inconclusive:
        parts.append(f"{len(inconclusive)} inconclusive")
    if unreachable:
        parts.append(f"{len(unreachable)} unreachable")
    if nccl:
        parts.append(f"the multi-node NCCL check did not pass in {len(nccl)} scale set(s)")
    listed = failed + inconclusive + unreachable
    shown = "; ".join(f"{n['computer_name']}: {n['summary']}" for n in listed[:4])
    more = f"; and {len(listed) - 4} more" if len(listed) > 4 else ""
    message = ", ".join(parts) + (f" ({shown}{more})" if shown else f": {nccl[0]['message']}" if nccl else "")
    where = f"-n {cluster} -g {resource_group}"
    if failed:
        code = "UNHEALTHY_NODES"
        if replacing:
            remedy = (f"{stopped or 'the replacement rounds ended'}; the nodes are left for inspection: see the report "
                      f"('provision check {where} -o table') and each node's log under /var/log/azgpu/")
        else:
            remedy = (f"inspect them ('provision check {where} -o table', logs under /var/log/azgpu/ on the node), or "
                      "replace them: " + (f"'{rerun}'" if rerun else REPLACE_IN_WORDS))
    elif inconclusive:
        code = "HEALTH_INCONCLUSIVE"
        codes = {n.get("reason_code") for n in inconclusive}
        remedy = ("no host fault was found, so nothing was replaced or reported: "
                  + ("a finding every node shares points at the image, the driver or the configuration; "
                     if "common" in codes else "")
                  + ("the same finding on a second host points at the image, its driver or the configuration; "
                     if "image" in codes else "")
                  + ("a finding the image could cause is reported only once a second host passes ('provision "
                     f"report {where}' checks one first); " if "unconfirmed" in codes else "")
                  + ("nodes disagree with Azure (or each other) about their rack: nothing was deleted; "
                     if "rack_identity" in codes else "")
                  + f"see each node's reason ('provision check {where} -o table') and its log under /var/log/azgpu/, "
                    "fix the set-up and run the check again")
    elif nccl and not unreachable:
        code = "UNHEALTHY_NODES"
        # Every node passed on its own: replacing nodes is not what fixes a fabric (create refuses it too).
        remedy = ("every node passed its own checks while the all-reduce across them is slow: the InfiniBand fabric "
                  "or its configuration (NCCL environment, topology), not a host azgpu can replace; see 'nccl' in "
                  f"'provision check {where} --nccl -o json'")
    elif all(n.get("reason_code") == "no_outbound" for n in unreachable):
        code = "NO_OUTBOUND_PATH"
        subnet = next((o["subnet"] for o in report.get("outbound", []) if not o.get("ok")), "the cluster's subnet")
        remedy = (f"attach a NAT gateway (or another explicit outbound path) to {subnet}: Run Command returns results "
                  f"only over outbound 443 to Azure, then run 'provision check {where}' again")
    else:
        code = "NODES_UNREACHABLE"
        remedy = (f"run 'provision check {where}' again once the VMs run and their VM agent is ready; an unreachable "
                  "node is never replaced or reported (no verdict says its host is at fault): if one stays silent, "
                  "look at it in the portal (boot diagnostics) or delete it yourself")
    return UnhealthyNodes(message, code=code, remedy=remedy, report=report, result=result)
