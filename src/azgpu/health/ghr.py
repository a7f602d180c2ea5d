"""What azgpu tells Azure's Guest Health Reporting (GHR, preview) about a node that failed its checks.

Pure: which reports a node's result makes, their deterministic names and their REST bodies, and what
a list of insights says. azgpu.deploy.ghr files them and follows their insights.

One report per node and impact category: a node with a missing GPU and a down InfiniBand port files
two, a node with two ports down one. Nothing is filed for a node without a verdict (unreachable), for
failures of the check's own set-up (AzNHC's NHCNA), or for a node that gave neither its physical host
name nor a VM id, which Learn requires of every HPC report.

Sources (Microsoft Learn, MicrosoftDocs/azure-compute-docs articles/azure-impact-reporting/):
guest-health-impact-report.md @ 01f777cb (the PUT, its fields, the insights), guest-health-impact-
categories.md @ 883ff7bb (the categories), guest-health-overview.md @ 1d8378b2 (onboarding, role).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from ..resource_types import WORKLOAD_IMPACT
from .impact import LEARN_CATEGORIES, PREFIX, impact_category
from .results import FAILED, INCONCLUSIVE, PASSED, Failure, GpuRef, NodeResult

# api-versions. Learn's "Report node health" page says of the PUT: "Use `2023-02-01-preview`" (the
# version AzNHC's triggerGHR.sh sends too), and lists insights at 2025-01-01-preview; insights do not
# exist in the 2023-02-01-preview spec (they appear in 2023-12-01-preview). Learn's log-upload page
# sends the PUT at 2025-01-01-preview instead, and the REST spec defines workloadImpacts at every
# preview from 2022-11-01 to 2026-01-01: azgpu follows the reporting page, where GHR is specified.
API_VERSION = "2023-02-01-preview"  # workloadImpacts (PUT, GET, list) and impactCategories
INSIGHTS_API_VERSION = "2025-01-01-preview"  # workloadImpacts/{name}/insights
WRITE_ACTION = WORKLOAD_IMPACT.action("write")
READ_ACTION = WORKLOAD_IMPACT.action("read")
ROLE = "Azure Impact Reporter"  # Learn: guest-health-overview.md, "Access management and role assignment"

# The spec's name pattern (WorkloadImpact.name, every api-version): it must end in 3+ alphanumerics.
NAME_PATTERN = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9-:]*[a-zA-Z0-9]{3,120}$")
NAME_PREFIX = "azgpu-"
MAX_NAME = 120
MAX_DESCRIPTION = 1000

# Learn: "Resource.Hpc.Unhealthy.* fields specific to GPUs: Manufacturer, SerialNumber, ModelNumber,
# Location" (PCIe location); sent only for the categories that are about a GPU.
GPU_CATEGORIES = frozenset(PREFIX + c for c in (
    "HpcMissingGpu", "HpcGpuDcgmDiagFailure", "HpcRowRemapFailure", "HpcInforomCorruption",
    "XID95UncontainedECCError", "XID94ContainedECCError", "XID79FallenOffBus", "XID48DoubleBitECC",
    "UnhealthyGPUNvidiasmi", "NvLink", "HpcDcgmiThermalReport", "ECCPageRetirementTableFull", "DBEOverLimit",
    "GpuXIDError", "AmdGpuResetFailed", "EROTFailure", "GPUMemoryBWFailure"))
MANUFACTURERS = {"nvidia": "Nvidia", "amd": "AMD"}  # Learn's example spells it "Nvidia"


class CategoryNotAllowed(ValueError):
    """A category that is not on Learn's list: azgpu never sends one."""


@dataclass(frozen=True)
class ImpactReport:
    """One workload impact to file: a node, a category, the failures behind it, its name and body."""

    node: NodeResult
    category: str
    failures: tuple[Failure, ...]
    name: str
    body: dict[str, Any]

    def as_dict(self) -> dict[str, Any]:
        return {"impact": self.name, "category": self.category, "node": self.node.computer_name,
                "scale_set": self.node.scale_set, "instance_id": self.node.instance_id,
                "resource_id": self.node.resource_id, "physical_host": self.node.physical_host,
                "failures": [f.summary() for f in self.failures]}


def categories_of(node: NodeResult) -> dict[str, tuple[Failure, ...]]:
    """The node's failures grouped by the impact category they report, in the order found."""
    out: dict[str, list[Failure]] = {}
    for failure in node.failures:
        category = impact_category(failure)
        if category is not None:
            out.setdefault(category, []).append(failure)
    return {c: tuple(fs) for c, fs in out.items()}


def not_reportable(node: NodeResult) -> str | None:
    """Why the node files no report, or None when it files at least one."""
    if node.status == PASSED:
        return "the node passed"
    if node.status == INCONCLUSIVE:
        return f"inconclusive: {node.reason}"
    if node.status != FAILED:
        return "no verdict came back from the node, so nothing is known about its host"
    if not categories_of(node):
        return "only failures of the check's own set-up (AzNHC's NHCNA), which say nothing about the host"
    if not (node.physical_host or node.vm_id or node.node_vm_id):
        return "the node gave neither its PhysicalHostName nor a VM id, one of which every HPC report needs"
    return None


def impact_name(resource_id: str, scale_set: str, instance_id: str, category: str, day: str) -> str:
    """azgpu-SCALESET-INSTANCE-CATEGORY-YYYYMMDD-HASH: the same node, fault and day give the same name,
    so a re-run finds the impact it filed instead of filing another. The hash (of the full resource id)
    keeps two resource groups' scale sets of the same name apart."""
    digest = hashlib.sha256(f"{resource_id.lower()}|{category}|{day}".encode()).hexdigest()[:8]
    short = category.rsplit(".", 1)[-1]
    tail = f"-{instance_id}-{short}-{day}-{digest}"
    head = re.sub(r"[^A-Za-z0-9-]", "-", scale_set).strip("-") or "vmss"
    head = head[:MAX_NAME - len(NAME_PREFIX) - len(tail)]
    name = re.sub(r"[^A-Za-z0-9-:]", "-", f"{NAME_PREFIX}{head}{tail}")
    if not NAME_PATTERN.fullmatch(name):  # cannot happen with the parts above; never send a bad name
        raise ValueError(f"impact name {name!r} does not match {NAME_PATTERN.pattern}")
    return name


def _gpus(failures: tuple[Failure, ...]) -> list[GpuRef]:
    seen: dict[str, GpuRef] = {}
    for failure in failures:
        for gpu in failure.gpus:
            if gpu.bus and gpu.bus not in seen:
                seen[gpu.bus] = gpu
    return list(seen.values())


def description(node: NodeResult, failures: tuple[Failure, ...]) -> str:
    parts = [f.summary() + (f" ({f.port})" if f.port and f.port not in f.summary() else "") for f in failures]
    gpus = _gpus(failures)
    if len(gpus) > 1:
        parts.append("GPUs " + ", ".join(f"{g.bus}" + (f" (SN {g.serial})" if g.serial else "") for g in gpus))
    more = f"; {node.more_failures} more finding(s) on the node" if node.more_failures else ""
    text = (f"azgpu health check ({node.checker or 'unknown checker'}) on {node.computer_name}: "
            + "; ".join(parts) + more)
    return text if len(text) <= MAX_DESCRIPTION else text[:MAX_DESCRIPTION - 3] + "..."


def vm_unique_id(node: NodeResult) -> str | None:
    """ARM's vmId, else what the node read from IMDS (the SMBIOS UUID may be byte-swapped: not sent)."""
    if node.vm_id:
        return node.vm_id
    return node.node_vm_id if node.node_vm_id_source == "imds" else None


def impact_body(node: NodeResult, category: str, failures: tuple[Failure, ...], *, start: datetime,
                gpu_vendor: str | None = None) -> dict[str, Any]:
    """The PUT body in REST shape (camelCase in properties, PascalCase in additionalProperties, as
    Learn's examples spell them: the fields are case-sensitive)."""
    if category not in LEARN_CATEGORIES:
        raise CategoryNotAllowed(f"{category} is not on Learn's list of Guest Health Reporting categories")
    extra: dict[str, str] = {}
    if node.physical_host:
        extra["PhysicalHostName"] = node.physical_host
    vm_id = vm_unique_id(node)
    if vm_id:
        extra["VmUniqueId"] = vm_id
    if category in GPU_CATEGORIES:
        if gpu_vendor in MANUFACTURERS:
            extra["Manufacturer"] = MANUFACTURERS[gpu_vendor]
        gpus = _gpus(failures)
        if len(gpus) == 1:  # one GPU concerned: name it; several are listed in the description
            if gpus[0].serial:
                extra["SerialNumber"] = gpus[0].serial
            extra["Location"] = gpus[0].bus
    return {"properties": {
        "startDateTime": start.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "impactCategory": category,
        "impactDescription": description(node, failures),
        "impactedResourceId": node.resource_id,
        "additionalProperties": extra,
    }}


def plan(node: NodeResult, *, now: datetime, gpu_vendor: str | None = None) -> list[ImpactReport]:
    """The reports a failed node files (none when not_reportable(node) says why)."""
    if not_reportable(node):
        return []
    day = now.astimezone(timezone.utc).strftime("%Y%m%d")
    out = []
    for category, failures in categories_of(node).items():
        name = impact_name(node.resource_id, node.scale_set, node.instance_id, category, day)
        out.append(ImpactReport(node, category, failures, name,
                                impact_body(node, category, failures, start=now, gpu_vendor=gpu_vendor)))
    return out


# ------------------------------------------------------------------------------ insights


def _props(insight: dict[str, Any]) -> dict[str, Any]:
    return insight.get("properties") or {}


def insight_state(insights: list[dict[str, Any]]) -> dict[str, Any]:
    """The latest insight of an impact (by eventTime) and whether the pipeline has ended.

    Learn: additionalDetails.statusCode says why the insight was made (AcknowledgedUnhealthy,
    NodeRemovedFromService, TooManyRequests ...); additionalDetails.terminalInsight true means "no
    further updates will follow".
    """
    if not insights:
        return {"status_code": None, "terminal": False, "status": None, "title": None, "event_time": None,
                "insights": 0}
    ordered = sorted(insights, key=lambda i: _when(_props(i).get("eventTime")))
    latest = _props(ordered[-1])
    details = latest.get("additionalDetails") or {}
    terminal = any((_props(i).get("additionalDetails") or {}).get("terminalInsight") is True for i in insights)
    return {"status_code": details.get("statusCode"), "terminal": terminal, "status": latest.get("status"),
            "title": (latest.get("content") or {}).get("title"), "event_time": latest.get("eventTime"),
            "insights": len(insights)}


def _when(text: Any) -> datetime:
    if not isinstance(text, str) or not text:
        return datetime.min.replace(tzinfo=timezone.utc)
    value = text.strip().replace("Z", "+00:00")
    # Insights carry up to 7 fractional digits (Learn's example: 2025-07-15T17:50:16.7183274Z).
    value = re.sub(r"(\.\d{6})\d+", r"\1", value)
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return datetime.min.replace(tzinfo=timezone.utc)
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)
