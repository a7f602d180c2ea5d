"""Guest Health Reporting (GHR, preview): tell Azure a node's host is broken before azgpu deletes it.

The health gate finds a node with a missing GPU, a port down or an Xid and replaces it; without a
word to Azure the replacement can land on the same host. GHR, part of Azure Impact Reporting, is
how Learn says to hand such a host back: a workload impact with an HPC category and the node's
PhysicalHostName, after which Azure may take the host out of production and reports its progress
as insights. `Reporter` does that for the gate's failing nodes while their VMs still exist (its
`before_delete` hook): the preflight (the Microsoft.Impact provider registered, the caller allowed
to write workload impacts), one impact per node and category under a deterministic name (GET
first, so a re-run the same day files nothing new), then the insights, followed for a bounded time.
If reporting cannot happen, it raises, and the gate deletes nothing.

SDK: azure-mgmt-impactreporting exists only as 1.0.0b1, whose default api-version (2024-05-01-preview)
is not one Learn names for GHR; the five calls here go through azure-core's ARM pipeline instead, with
the session's credential, retry policy (throttling budget) and transport, at the api-versions Learn
names (below). The provider's registration is read with azure-mgmt-resource's client.

The first half of this module is pure: which reports a node's result makes, their deterministic
names and REST bodies, and what a list of insights says (no Azure SDK at module level: the SDK loads
only inside the calls of the second half, the client, which files them and follows their insights).

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
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from ..bounded import retry_after_of
from ..errors import EXIT_INPUT, AzgpuError, Finding, InputError, ValidationFailed
from ..health.impact import LEARN_CATEGORIES, PREFIX, impact_category
from ..health.limits import INSIGHT_POLL, INSIGHT_TIMEOUT
from ..health.model import FAILED, INCONCLUSIVE, PASSED, Failure, GpuRef, NodeResult
from ..profiles import find_size
from ..resource_types import IMPACT, INSTANCES, PERMISSIONS, VMSS, WORKLOAD_IMPACT
from . import health_gate
from .arm import allowed, answer, invalid_answer, json_body, pages, send, to_azure_error
from .interface import NO_HOOKS, CheckOptions, GateHooks, LiveCluster, ReportOptions, ReportResult, refuse
from .lifecycle import live_cluster

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
MAX_SETTLE_WAIT = 60.0  # the longest Retry-After a report's creation is followed with (Learn shows none)

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
    if node.shared_host:
        return (f"{', '.join(node.shared_host)} name(s) the same physical host ({node.physical_host}): one of them is "
                "not telling the truth, so neither is reported")
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
        "startDateTime": start.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "impactCategory": category,
        "impactDescription": description(node, failures),
        "impactedResourceId": node.resource_id,
        "additionalProperties": extra,
    }}


def reports_for(node: NodeResult, *, now: datetime, gpu_vendor: str | None = None) -> list[ImpactReport]:
    """The reports a failed node files (none when not_reportable(node) says why)."""
    if not_reportable(node):
        return []
    day = now.astimezone(UTC).strftime("%Y%m%d")
    out = []
    for category, failures in categories_of(node).items():
        name = impact_name(node.resource_id, node.scale_set, node.instance_id, category, day)
        out.append(ImpactReport(node, category, failures, name,
                                impact_body(node, category, failures, start=now, gpu_vendor=gpu_vendor)))
    return out


# ------------------------------------------------------------------------------ insights


def _props(insight: Any) -> dict[str, Any]:
    props = insight.get("properties") if isinstance(insight, dict) else None
    return props if isinstance(props, dict) else {}


def _details(props: dict[str, Any]) -> dict[str, Any]:
    details = props.get("additionalDetails")
    return details if isinstance(details, dict) else {}


def _text(value: Any, limit: int = 200) -> str | None:
    """A string Azure sent, as long as it is one of at most `limit` characters (else None: not shown)."""
    return value if isinstance(value, str) and len(value) <= limit else None


MAX_INSIGHTS = 1000


def insight_state(insights: list[dict[str, Any]]) -> dict[str, Any]:
    """The latest insight of an impact (by eventTime) and whether the pipeline has ended.

    Learn: additionalDetails.statusCode says why the insight was made (AcknowledgedUnhealthy,
    NodeRemovedFromService, TooManyRequests ...); additionalDetails.terminalInsight true means "no
    further updates will follow". Only insights that are objects count, and a field of another type than
    Learn's is read as absent (a string for a string, true for terminal).
    """
    insights = [i for i in insights if isinstance(i, dict)][:MAX_INSIGHTS]
    if not insights:
        return {"status_code": None, "terminal": False, "status": None, "title": None, "event_time": None,
                "insights": 0}
    ordered = sorted(insights, key=lambda i: _when(_props(i).get("eventTime")))
    latest = _props(ordered[-1])
    details = _details(latest)
    terminal = any(_details(_props(i)).get("terminalInsight") is True for i in insights)
    content = latest.get("content") if isinstance(latest.get("content"), dict) else {}
    return {"status_code": _text(details.get("statusCode")), "terminal": terminal,
            "status": _text(latest.get("status")),
            "title": _text(content.get("title"), 400), "event_time": _text(latest.get("eventTime"), 64),
            "insights": len(insights)}


def insights_of(response, what: str) -> list[dict[str, Any]]:
    """The insights of an answer ({"value": [...]}); ARM_ANSWER_INVALID when it holds no list of them."""
    value = answer(response, what).get("value")
    if value is None:
        return []
    if not isinstance(value, list):
        raise invalid_answer(what, f"holds 'value' as {type(value).__name__}, not a list of insights")
    return value


def _when(text: Any) -> datetime:
    if not isinstance(text, str) or not text or len(text) > 64:
        return datetime.min.replace(tzinfo=UTC)
    value = text.strip().replace("Z", "+00:00")
    # Insights carry up to 7 fractional digits (Learn's example: 2025-07-15T17:50:16.7183274Z).
    value = re.sub(r"(\.\d{6})\d+", r"\1", value)
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return datetime.min.replace(tzinfo=UTC)
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


# ------------------------------------------------------------------------------ the client

NAMESPACE = IMPACT.namespace
PERMISSIONS_API_VERSION = PERMISSIONS.api_version  # the caller's permissions on a subscription (resource_types)
ONBOARDING_REMEDY = ("onboard the subscription as Learn's 'What is Guest Health Reporting (preview)?' says: register "
                     f"the {IMPACT.namespace} resource provider ('az provider register --namespace "
                     f"{IMPACT.namespace}'), send the subscription ID and tenant ID to the Azure team member helping "
                     "you onboard, and wait for their confirmation (until then, 'create --replace-unhealthy' without "
                     "--report-to-azure replaces nodes without reporting them)")
ROLE_REMEDY = (f"assign the \"{ROLE}\" role on the subscription to the identity azgpu runs as (portal: Subscriptions > "
               "Access control (IAM) > Add role assignment), as Learn's Guest Health Reporting overview says (until "
               "then, 'create --replace-unhealthy' without --report-to-azure replaces nodes without reporting them)")


class ReportingUnavailable(AzgpuError):
    """Reporting was asked for and cannot happen (not onboarded, not allowed, declined): exit 2."""

    exit_code = EXIT_INPUT
    default_code = "GHR_UNAVAILABLE"


def validate_options(*, insight_timeout: float = INSIGHT_TIMEOUT) -> None:
    """ReportOptions' own check, raised as reporting that cannot happen (exit 2)."""
    for finding in ReportOptions(insight_timeout=insight_timeout).findings():
        raise ReportingUnavailable(finding.message, code=finding.code, remedy=finding.remedy)


# ------------------------------------------------------------------------------ the wire


def _error(response, what: str) -> AzgpuError:
    """An error answer as a typed error: onboarding and permission problems of reporting exit 2."""
    from azure.core.exceptions import HttpResponseError

    err = to_azure_error(HttpResponseError(response=response), what)
    azure_code = (getattr(err, "azure_code", "") or "").lower()
    if azure_code == "missingsubscriptionregistration":
        return ReportingUnavailable(f"{what}: the subscription is not registered for {NAMESPACE} ({err.message})",
                                    code="GHR_NOT_ONBOARDED", remedy=ONBOARDING_REMEDY)
    if response.status_code == 403 or azure_code == "authorizationfailed":
        return ReportingUnavailable(f"{what}: {err.message}", code="GHR_NOT_PERMITTED", remedy=ROLE_REMEDY)
    return err


def _pages(session, path: str, api_version: str, what: str) -> list[dict[str, Any]]:
    return pages(session, path, api_version, what, error=_error)


def _impact_path(session, name: str) -> str:
    return f"/subscriptions/{session.subscription_id}/providers/{NAMESPACE}/workloadImpacts/{name}"


# ------------------------------------------------------------------------------ preflight


def preflight(session) -> dict[str, Any]:
    """Before anything is deleted: may this subscription and caller report? Raises ValidationFailed
    (exit 2) with every problem found; returns what it read (and the HPC categories the subscription's
    category listing offers, when it lists any)."""
    findings: list[Finding] = []
    try:
        state = session.resources.providers.get(NAMESPACE).registration_state or "unknown"
    except Exception as exc:  # an unreadable provider is reported like an unregistered one
        err = to_azure_error(exc, f"reading the {NAMESPACE} resource provider")
        state = f"unknown ({err.code})"
    if state.lower() != "registered":
        findings.append(Finding(code="GHR_NOT_ONBOARDED",
                                message=f"subscription {session.subscription_id} is "
                                "not onboarded to Guest Health Reporting (preview): "
                                f"the {NAMESPACE} resource provider is {state}", remedy=ONBOARDING_REMEDY,
                                source="D-ghr-overview"))
    path = f"/subscriptions/{session.subscription_id}{PERMISSIONS.provider_path()}"
    try:
        permissions = _pages(session, path, PERMISSIONS_API_VERSION, "reading the caller's permissions")
    except AzgpuError as exc:  # cannot tell: the PUT itself will say, before anything is deleted
        permissions = None
        permission_note = f"could not read the caller's permissions ({exc.code}): the report itself will tell"
    else:
        permission_note = None
        missing = [a for a in (WRITE_ACTION, READ_ACTION) if not allowed(permissions, a)]
        if missing:
            findings.append(Finding(code="GHR_NOT_PERMITTED",
                                    message="the caller may not "
                                    f"{' or '.join(a.rsplit('/', 1)[-1] for a in missing)} workload impacts in "
                                    f"subscription {session.subscription_id} (no permission allows "
                                    f"{', '.join(missing)})", remedy=ROLE_REMEDY, source="D-ghr-overview"))
    offered = None
    if state.lower() == "registered":
        path = f"/subscriptions/{session.subscription_id}/providers/{NAMESPACE}/impactCategories"
        try:
            listed = {c.get("name") for c in _pages(session, path, API_VERSION, "listing impact categories")}
        except AzgpuError:
            listed = set()
        hpc = {c for c in listed if c and c.lower().startswith("resource.hpc.")}
        offered = hpc or None  # the spec's example lists no HPC category: only a listing with some says anything
    if findings:
        raise ValidationFailed(findings)
    return {"provider": state, "permissions_checked": permissions is not None, "note": permission_note,
            "offered_hpc_categories": sorted(offered) if offered else None}


# ------------------------------------------------------------------------------ reporting


class Reporter:
    """Files Guest Health Reports for failing nodes and follows their insights.

    Use it as the health gate's `before_delete` hook (`create(..., before_delete=reporter)`), or call
    `report(nodes)`. confirm(reports) -> bool is asked before anything is filed (None: do not ask);
    on_event(message) hears of each step. `entries` collects every node's outcome across calls.
    """

    def __init__(self, session, *, insight_timeout: float = INSIGHT_TIMEOUT, poll_interval: float | None = None,
                 confirm: Callable[[list[ImpactReport]], bool] | None = None,
                 on_event: Callable[[str], None] | None = None, now: Callable[[], datetime] | None = None):
        self.session = session
        self.insight_timeout = insight_timeout
        # Simulation in real time polls each second; tests and real Azure every INSIGHT_POLL seconds
        # (in tests of the fake's virtual clock, so nobody waits).
        self.poll_interval = poll_interval or session.polling_interval or INSIGHT_POLL
        self.confirm = confirm
        self.on_event = on_event or (lambda message: None)
        self.now = now or (lambda: datetime.now(UTC))
        self.checked: dict[str, Any] | None = None
        self.entries: list[dict[str, Any]] = []
        self.requests = 0

    def preflight(self) -> dict[str, Any]:
        self.checked = preflight(self.session)
        return self.checked

    def __call__(self, nodes: list[NodeResult]) -> None:
        self.report(nodes)

    # -- one round ---------------------------------------------------------------------------
    def report(self, nodes: list[NodeResult]) -> list[dict[str, Any]]:
        """File the reports of these nodes (while their VMs exist), follow the insights; the outcomes."""
        if self.checked is None:
            self.preflight()
        now = self.now()
        planned: list[ImpactReport] = []
        entries: list[dict[str, Any]] = []
        for node in nodes:
            why = not_reportable(node)
            if why:
                entries.append({**_node(node), "category": None, "impact": None, "state": "not_reported",
                                "reason": why, "insight": None})
                continue
            planned += reports_for(node, now=now, gpu_vendor=_gpu_vendor(node))
        offered = (self.checked or {}).get("offered_hpc_categories")
        if offered:
            refused = sorted({r.category for r in planned} - set(offered))
            if refused:
                raise ReportingUnavailable(
                    f"the subscription's impact categories do not offer {', '.join(refused)}",
                    code="GHR_CATEGORY_NOT_OFFERED",
                    remedy="ask the Azure team that onboarded the subscription to enable the category, or run without "
                           "--report-to-azure; nothing was reported or deleted")
        if planned and self.confirm is not None and not self.confirm(planned):
            raise ReportingUnavailable(f"filing {len(planned)} Guest Health Report(s) was declined",
                                       code="GHR_DECLINED",
                                       remedy="nothing was reported or deleted; re-run "
                                              "with --yes to report, or without --report-to-azure to replace the nodes "
                                              "without reporting them")
        filed = [self._file(r) for r in planned]
        self._follow([e for e in filed if e["state"] in ("filed", "already_filed")])
        entries = filed + entries
        self.entries += entries
        return entries

    def _file(self, report: ImpactReport) -> dict[str, Any]:
        entry = {**_node(report.node), "category": report.category, "impact": report.name,
                 "impact_id": _impact_path(self.session, report.name), "state": None, "insight": None,
                 "failures": [f.summary() for f in report.failures]}
        path = entry["impact_id"]
        what = f"Guest Health Report {report.name}"
        response = self._send("GET", path, API_VERSION)
        if response.status_code == 200:
            entry["state"] = "already_filed"
            self.on_event(f"{report.node.computer_name}: {report.category} was reported today already ({report.name})")
            return entry
        if response.status_code != 404:
            raise _error(response, what)
        response = self._send("PUT", path, API_VERSION, report.body)
        if response.status_code in (200, 201):
            entry["state"] = "filed"
            self._settle(response, path, what)
            self.on_event(f"{report.node.computer_name}: reported {report.category} on host "
                          f"{report.node.physical_host or '?'} ({report.name})")
        elif response.status_code == 404:
            # Learn/facts 12.3: 404 means the impacted resource is not found: the VM is gone already.
            entry["state"] = "vm_gone"
            error = json_body(response).get("error")
            entry["reason"] = (_text(error.get("message"), 400) if isinstance(error, dict) else None) or \
                "the impacted VM no longer exists"
            self.on_event(f"{report.node.computer_name}: not reported, the VM no longer exists")
        elif response.status_code == 409 and self._send("GET", path, API_VERSION).status_code == 200:
            entry["state"] = "already_filed"  # the name was taken meanwhile: by our own earlier report
        else:
            raise _error(response, what)
        return entry

    def _settle(self, response, path: str, what: str) -> None:
        """A create that is still running (201 with Azure-AsyncOperation, api-versions after 2023-02-01):
        follow its status a bounded number of times."""
        state = _text(_props(json_body(response)).get("provisioningState"), 64)
        status_url = response.headers.get("Azure-AsyncOperation")
        for _ in range(20):
            if not status_url or (state or "Succeeded").lower() in ("succeeded", "failed", "canceled"):
                break
            self.session.pause(retry_after_of(response.headers, default=self.poll_interval, maximum=MAX_SETTLE_WAIT))
            response = self._send("GET", path, API_VERSION, url=status_url)
            if response.status_code != 200:
                raise _error(response, what)
            state = _text(json_body(response).get("status"), 64)
        if (state or "").lower() in ("failed", "canceled"):
            raise ReportingUnavailable(f"{what}: Azure ended the report as {state}", code="GHR_REPORT_FAILED",
                                       remedy="nothing was deleted; see the impact in the portal (Impact Reporting) "
                                              "and re-run")

    def _follow(self, entries: list[dict[str, Any]]) -> None:
        """Read each impact's insights until a terminal one or the insight timeout; never longer."""
        if not entries:
            return
        start = self.session.clock()
        pending = list(entries)
        while True:
            for entry in pending:
                response = self._send("GET", entry["impact_id"] + "/insights", INSIGHTS_API_VERSION)
                if response.status_code == 200:
                    try:
                        entry["insight"] = insight_state(insights_of(response, "reading insights"))
                    except AzgpuError as exc:  # the report stands; what Azure said of it could not be read
                        entry["insight_error"] = exc.message
                else:
                    entry["insight_error"] = _error(response, "reading insights").message
            for entry in pending:
                if entry.get("insight") and entry["insight"]["terminal"]:
                    self.on_event(f"{entry['node']}: {entry['insight']['status_code']} (terminal)")
            pending = [e for e in pending if not (e.get("insight") or {}).get("terminal")]
            waited = self.session.clock() - start
            if not pending or waited + self.poll_interval > self.insight_timeout:
                break
            self.session.pause(self.poll_interval)
        waited = round(self.session.clock() - start, 3)
        for entry in entries:
            entry["insight_followed_seconds"] = waited
        for entry in pending:
            code = (entry.get("insight") or {}).get("status_code") or "no insight yet"
            self.on_event(f"{entry['node']}: {code} after {waited:g} s; going on (--insight-timeout)")

    def _send(self, method: str, path: str, api_version: str, body: Any = None, url: str | None = None):
        self.requests += 1
        return send(self.session, method, path, api_version, body, url)


def _node(node: NodeResult) -> dict[str, Any]:
    return {"node": node.computer_name, "scale_set": node.scale_set, "instance_id": node.instance_id,
            "resource_id": node.resource_id, "physical_host": node.physical_host}


def _gpu_vendor(node: NodeResult) -> str | None:
    """nvidia or amd, from the size's profile ([sizes.health] gpu_vendor), for Manufacturer."""
    if not node.vm_size:
        return None
    try:
        size = find_size(node.vm_size)[1]
    except AzgpuError:
        return None
    return size.health.get("gpu_vendor", "nvidia") if size.health is not None else None


# ------------------------------------------------------------------------------ what was filed


_VMSS_VM = re.compile(r"^/subscriptions/[^/]+/resourceGroups/(?P<rg>[^/]+)" + VMSS.path_pattern(r"(?P<vmss>[^/]+)")
                      + r"(?:/virtualMachines)?/(?P<instance>[^/]+)$", re.IGNORECASE)


def list_reports(session, resource_group: str, name: str | None = None) -> list[dict[str, Any]]:
    """The workload impacts filed for the scale-set instances of a resource group (of cluster `name`
    when given), read from Azure with their latest insight: one listing, one insight read per impact."""
    path = f"/subscriptions/{session.subscription_id}/providers/{NAMESPACE}/workloadImpacts"
    impacts = _pages(session, path, API_VERSION, "listing workload impacts")
    cluster_set = re.compile(rf"^{re.escape(name)}-vmss\d+$", re.IGNORECASE) if name else None
    out = []
    for impact in impacts:
        props = _props(impact)
        match = _VMSS_VM.match(_text(props.get("impactedResourceId"), 1000) or "")
        if not match or match.group("rg").lower() != resource_group.lower():
            continue
        if cluster_set and not cluster_set.match(match.group("vmss")):
            continue
        extra = props.get("additionalProperties") if isinstance(props.get("additionalProperties"), dict) else {}
        name = _text(impact.get("name"))
        if not name or not NAME_PATTERN.fullmatch(name):  # it goes into the next request's path
            continue
        response = send(session, "GET", f"{path}/{name}/insights", INSIGHTS_API_VERSION)
        try:
            state = (insight_state(insights_of(response, "reading insights")) if response.status_code == 200
                     else {"status_code": f"unreadable ({response.status_code})", "terminal": False})
        except AzgpuError:
            state = {"status_code": "unreadable (not a list of insights)", "terminal": False}
        out.append({"impact": name, "category": _text(props.get("impactCategory")),
                    "scale_set": match.group("vmss"), "instance_id": match.group("instance"),
                    "physical_host": _text(extra.get("PhysicalHostName"), 64),
                    "reported": _text(props.get("reportedTimeUtc"), 64),
                    "start": _text(props.get("startDateTime"), 64), "status_code": state.get("status_code"),
                    "terminal": state.get("terminal"), "insights": state.get("insights", 0),
                    "by_azgpu": name.startswith("azgpu-"),
                    "resource_id": props.get("impactedResourceId"), "id": _text(impact.get("id"), 1000),
                    "description": _text(props.get("impactDescription"), 4000)})
    return sorted(out, key=lambda r: (r["reported"] or "", r["impact"] or ""))


def report(session, name: str, resource_group: str, options: ReportOptions = ReportOptions(), *,
           nodes: Sequence[str] = (), check: CheckOptions = CheckOptions(),
           hooks: GateHooks = NO_HOOKS) -> ReportResult:
    """Check the cluster's nodes (or only `nodes`: computer names, SCALESET/ID, instance ids or resource
    ids) as `provision check` does and
    file a report for each one proven faulty; nothing is deleted. Reporting is checked before a node is.
    hooks.on_node(NodeResult) as each node answers, hooks.on_notice(message) for each step."""
    on_node, on_event = hooks.on_node, hooks.on_notice
    from . import second_host

    validate_options(insight_timeout=options.insight_timeout)  # the verb's door: its options, once
    refuse(check.findings())
    reporter = Reporter(session, insight_timeout=options.insight_timeout, confirm=options.confirm, on_event=on_event)
    reporter.preflight()  # before a node is checked: a subscription that cannot report stops here
    cluster = live_cluster(session, name, resource_group)  # one lookup serves the nodes named and the check
    instances = _node_ids(session, cluster, tuple(nodes)) if nodes else None
    health = health_gate.inspect(session, cluster, check, instances=instances, on_node=on_node)
    if instances is not None:  # the nodes named only: what no node can say about itself is judged here
        health.nodes = health_gate.judged(health.nodes)
    # A finding the image could cause is reported only once a second host with the same image passed.
    health.nodes = second_host.confirm(session, resource_group, health.nodes, check, on_notice=on_event)
    # Only a node proven faulty is reported: not one that did not answer or answered inconclusively.
    entries = reporter.report(health.failed) if health.failed else []
    return ReportResult(name, resource_group, health, entries)


def _node_ids(session, cluster: LiveCluster, wanted: tuple[str, ...]) -> set[str]:
    """Resource ids (lower case) of the nodes named by computer name, SCALESET/ID, instance id or id."""
    name, resource_group = cluster.name, cluster.resource_group
    known: list[tuple[str, str, str, str]] = []
    try:
        for vmss in cluster.scale_sets:
            for vm in INSTANCES.list(session, resource_group, vmss):
                computer = vm.os_profile.computer_name if vm.os_profile else vm.name
                known.append((vm.id.lower(), vmss.lower(), str(vm.instance_id), (computer or "").lower()))
    except Exception as exc:
        raise to_azure_error(exc, f"listing the nodes of {name}") from None
    out = set()
    for item in wanted:
        key = item.lower()
        matches = [k[0] for k in known if key in (k[0], k[3], f"{k[1]}/{k[2]}") or key == k[2]]
        if len(matches) != 1:
            raise InputError(f"--node {item} matches {len(matches)} node(s) of cluster '{name}'",
                             code="UNKNOWN_NODE" if not matches else "AMBIGUOUS_NODE",
                             remedy="give the computer name or SCALESET/INSTANCE_ID ('provision status' lists them)")
        out.add(matches[0])
    return out
