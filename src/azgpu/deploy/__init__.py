"""Deploy a Plan through the Azure SDK: the verbs, as SkyPilot's sky/provision exports its own.

    from azgpu.deploy import CreateOptions, GateOptions, create
    result = create(session, request, CreateOptions(gate=GateOptions(replace_unhealthy=True)))
    result.healthy, result.health, result.as_dict()

create(session, request, CreateOptions) -> CreateResult; what_if(session, request) -> changes.WhatIf;
status / wait / destroy / outputs(session, name, resource_group); check(session, name, resource_group,
CheckOptions) -> HealthReport; report(session, name, resource_group, ReportOptions,
check=CheckOptions, hooks=GateHooks) -> ReportResult; live_cluster(session, name, resource_group) ->
LiveCluster (what the gates take: health_gate.gate and rack_gate.gate(session, LiveCluster, GateOptions,
GateHooks));
list(session, resource_group=None) -> one row per cluster; certify(session, name, resource_group,
CertifyOptions) -> CertifyResult (the certificate). For a scheduler's power programs (azgpu.slurm):
cluster_nodes, delete_instances, set_capacity, node_bindings, bind_node, unbind_node, run_on_node
(deploy.nodes), and
the health gate's own judgements replaceable, common_failures, replacement_stop and signature, and
to_azure_error (an SDK exception in azgpu's terms). The options and results (azgpu.deploy.
interface) load with this package; each verb's module, and with it the Azure SDK (imported only
inside the calls that talk to Azure), loads on the verb's first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from .interface import (
    CertifyOptions,
    CertifyResult,
    CheckOptions,
    CreateOptions,
    CreateResult,
    GateHooks,
    GateOptions,
    GateResult,
    HealthReport,
    LiveCluster,
    ReportOptions,
    ReportResult,
)

if TYPE_CHECKING:
    from .arm import to_azure_error
    from .certification import certify
    from .cluster_create import create
    from .cluster_list import list_clusters as list  # the verb's name, as `provision list`
    from .ghr import report
    from .health_gate import check, common_failures, replaceable, replacement_stop, signature
    from .lifecycle import destroy, live_cluster, outputs, status, wait
    from .nodes import bind_node, cluster_nodes, delete_instances, node_bindings, run_on_node, set_capacity, unbind_node
    from .whatif import what_if

# verb -> (module, function)
VERBS = {
    "create": ("cluster_create", "create"), "what_if": ("whatif", "what_if"), "status": ("lifecycle", "status"),
    "wait": ("lifecycle", "wait"), "destroy": ("lifecycle", "destroy"), "outputs": ("lifecycle", "outputs"),
    "live_cluster": ("lifecycle", "live_cluster"),
    "check": ("health_gate", "check"), "report": ("ghr", "report"), "list": ("cluster_list", "list_clusters"),
    "certify": ("certification", "certify"),
    **{verb: ("nodes", verb) for verb in ("cluster_nodes", "delete_instances", "set_capacity", "node_bindings",
                                           "bind_node", "unbind_node", "run_on_node")},
    **{verb: ("health_gate", verb) for verb in ("replaceable", "common_failures", "replacement_stop", "signature")},
    "to_azure_error": ("arm", "to_azure_error"),
}

__all__ = ["CertifyOptions", "CertifyResult", "CheckOptions", "CreateOptions", "CreateResult", "GateHooks",
           "GateOptions", "GateResult", "HealthReport", "LiveCluster", "ReportOptions", "ReportResult", "live_cluster",
           "create", "what_if", "status", "wait", "destroy", "outputs", "check",
           "report", "list", "certify", "cluster_nodes", "delete_instances", "set_capacity", "node_bindings",
           "bind_node", "unbind_node", "run_on_node", "replaceable", "common_failures", "replacement_stop", "signature",
           "to_azure_error"]


def __getattr__(name: str):
    if name in VERBS:
        module, function = VERBS[name]
        return getattr(importlib.import_module(f"{__name__}.{module}"), function)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
