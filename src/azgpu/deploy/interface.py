"""The typed options and results of the deploy verbs (azgpu.deploy.create, ...), as SkyPilot's
sky/provision keeps its own (sky/provision/common.py): callers build options once, read results as
objects, and print `.as_dict()`. Every type that crosses a verb lives here (the preflight, each
resource's progress Event, the gate's HealthReport and GateResult, the rack gate's RackGateResult),
so the modules that compute them import this one and nothing imports them back. Nothing here talks
to Azure or imports the SDK."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import Finding, InputError, ValidationFailed
from ..health.limits import INSIGHT_TIMEOUT, MAX_INSIGHT_TIMEOUT, MAX_ROUNDS, NODE_TIMEOUT, PARALLEL, check_options
from ..health.model import FAILED, INCONCLUSIVE, PASSED, STATUSES, UNREACHABLE, NodeResult
from ..health.outcome import UnhealthyNodes, unhealthy_error
from ..images import PurchasePlan
from ..plain import plain

if TYPE_CHECKING:
    from ..plan import Plan
    from ..profiles import Profile


def _nothing(*args: Any) -> None:
    return None


class _SelfChecked:
    """Options that check themselves once: findings() at the verb's door (and the CLI, which shows them with the
    request's) runs the check the first time only; the options are frozen, so the answer cannot change."""

    @functools.cached_property
    def _checked(self) -> tuple[Finding, ...]:
        return tuple(self._check())

    def findings(self) -> list[Finding]:
        return list(self._checked)

    def with_hooks(self, **hooks: Callable[..., Any] | None) -> Any:
        """These options with other hooks (the CLI adds its prompts): what was checked stays checked."""
        new = dataclasses.replace(self, **hooks)  # type: ignore[type-var]
        if "_checked" in self.__dict__ and all(hook is None or callable(hook) for hook in hooks.values()):
            new.__dict__["_checked"] = self._checked
        return new

    def _check(self) -> list[Finding]:
        raise NotImplementedError


def _range_findings(**values: Any) -> list[Finding]:
    """health.limits.check_options's refusals, one finding per option out of range."""
    out = []
    for name, value in values.items():
        try:
            # None is "not given" on the command line, but no value for an option of a built options object.
            check_options(**{name: "None" if value is None else value})
        except InputError as exc:
            out.append(Finding(code=exc.code, message=exc.message, remedy=exc.remedy, field=name))
    return out


def refuse(findings: list[Finding]) -> None:
    """A verb's door: options with an error stop the verb before anything happens (one error as InputError, as
    the option checks always raised; several at once as ValidationFailed)."""
    errors = [f for f in findings if f.is_error]
    if len(errors) == 1:
        raise InputError(errors[0].message, code=errors[0].code, remedy=errors[0].remedy)
    if errors:
        raise ValidationFailed(errors)


@dataclass(frozen=True)
class CheckOptions(_SelfChecked):
    """How each node is checked, wherever the gate runs (`provision check` and `report`, create's gate,
    Slurm's resume): Run Commands in flight at once, the seconds one node's verdict may take, and
    whether an NCCL all-reduce runs across each scale set too."""

    parallel: int = PARALLEL
    node_timeout: float = NODE_TIMEOUT
    nccl: bool = False

    def _check(self) -> list[Finding]:
        """--parallel and --node-timeout out of range, as findings (the verb's door raises them, the CLI shows them)."""
        return _range_findings(parallel=self.parallel, node_timeout=self.node_timeout)


@dataclass(frozen=True)
class GateOptions(_SelfChecked):
    """The health gate after the scale sets succeed (`create --check`).

    replace_unhealthy and spare_racks imply check. replace_unhealthy: replace failing nodes for at
    most max_rounds rounds. spare_racks (vertical-connect sizes): deploy that many racks more, then
    keep the requested number of whole healthy racks and remove the others (azgpu.deploy.rack_gate).
    node: how each node is checked, as `provision check`.
    """

    check: bool = False
    replace_unhealthy: bool = False
    max_rounds: int = MAX_ROUNDS
    spare_racks: int = 0
    node: CheckOptions = CheckOptions()

    @property
    def enabled(self) -> bool:
        return self.check or self.replace_unhealthy or bool(self.spare_racks)

    def _check(self) -> list[Finding]:
        """The node check's findings and --max-rounds out of range; none for a gate that does not run."""
        if not self.enabled:
            return []
        return [*self.node.findings(), *_range_findings(max_rounds=self.max_rounds), *self._spare_findings()]

    def _spare_findings(self) -> list[Finding]:
        spare = self.spare_racks
        if isinstance(spare, int) and not isinstance(spare, bool) and spare >= 0:
            return []
        return [Finding(code="INVALID_SPARE_RACKS", message=f"--spare-racks must be 0 or more, not {spare!r}",
                        remedy="pass --spare-racks 1 for one rack more than --nodes asks", field="spare_racks")]


@dataclass(frozen=True)
class ReportOptions(_SelfChecked):
    """Guest Health Reporting of the nodes the gate is about to delete (`create --report-to-azure`).

    confirm(reports) -> bool is asked before anything is filed (None: file without asking).
    """

    report_to_azure: bool = False
    insight_timeout: float = INSIGHT_TIMEOUT
    confirm: Callable[[list], bool] | None = None

    def _check(self) -> list[Finding]:
        """--insight-timeout out of range (0 reads the insights once; at most an hour)."""
        value = self.insight_timeout
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        if number and 0 <= value <= MAX_INSIGHT_TIMEOUT:
            return []
        shown = f"{value:g}" if number else repr(value)  # options built in Python may hold anything
        return [Finding(code="INVALID_INSIGHT_TIMEOUT", message=f"--insight-timeout {shown} is out "
                        "of range", remedy=f"use 0 (read the insights once) to {MAX_INSIGHT_TIMEOUT:g} seconds "
                                           f"(default {INSIGHT_TIMEOUT:g})", field="insight_timeout")]


@dataclass(frozen=True)
class CertifyOptions(_SelfChecked):
    """`provision certify` (and `create --certify`): burn the cluster in, name the bad node, link or rack.

    level: quick | standard | extended (azgpu.certify.levels). replace: replace the nodes proven faulty
    (on NVL72 sizes, which Azure keeps in whole racks, each faulty node's whole rack) for at most max_rounds
    rounds, certifying each replacement. node: how each node is reached, as `provision check`. report:
    Guest Health Reporting of the faults before their nodes are deleted. seed: the order of the pairs
    (default: from the cluster's name, so a re-run tests the same pairs). Hooks: on_notice(message);
    before_delete(nodes) while the faulty VMs still exist.
    """

    level: str = "standard"
    replace: bool = False
    max_rounds: int = MAX_ROUNDS
    node: CheckOptions = CheckOptions()
    report: ReportOptions = field(default_factory=ReportOptions)
    seed: int | None = None
    on_notice: Callable[[str], None] = _nothing
    before_delete: Callable[[list[NodeResult]], None] | None = None

    def _check(self) -> list[Finding]:
        """The node check's options and --max-rounds out of range, and reporting's when it is asked for."""
        return [*_level_findings(self.level), *self.node.findings(), *_range_findings(max_rounds=self.max_rounds),
                *(self.report.findings() if self.report.report_to_azure else [])]


def _level_findings(name: Any) -> list[Finding]:
    from ..certify.levels import level

    try:
        level(name)
    except InputError as exc:
        return [Finding(code=exc.code, message=exc.message, remedy=exc.remedy, field="level")]
    return []


@dataclass
class CertifyResult:
    """What `certify` found: the certificate (a dict, the readiness record) and the reports it filed.
    `certified` is False when anything is faulty, unreachable or not the host's: the CLI exits 1."""

    cluster: str
    resource_group: str
    certificate: dict[str, Any]

    @property
    def certified(self) -> bool:
        return self.certificate["verdict"] != "not_certified"

    def as_dict(self) -> dict[str, Any]:
        return plain(self.certificate)


@dataclass(frozen=True)
class CreateOptions:
    """Everything `create` does beyond the request, and the caller's hooks.

    dry_run: every check runs and the what-if (with its cost in `currency`) comes with the result;
    nothing is written. wait=False returns once Azure accepted the scale sets; timeout bounds the wait.
    zones, fallback_locations: tried in order on capacity errors (nothing else moves a run).
    accept_terms: accept the image plan's marketplace terms for the subscription when needed.
    allow_scale_in: delete the instances a smaller request drops; without it, confirm(what-if report)
    decides, or the run stops with SCALE_IN_REFUSED before any write. arm_validate: Azure validates
    the template once azgpu's own checks pass. scale_sets: each scale set's capacity instead of the
    split of the request's nodes (Slurm's resume grows one InfiniBand domain and keeps the others).
    Hooks: on_event(Event) for each resource's progress, on_notice(message) for what the run decides,
    before_delete(nodes) while failing nodes still exist (after Guest Health Reporting, if asked).
    """

    dry_run: bool = False
    wait: bool = True
    timeout: float | None = None
    zones: Sequence[str] = ()
    fallback_locations: Sequence[str] = ()
    accept_terms: bool = False
    allow_scale_in: bool = False
    currency: str = "USD"
    arm_validate: bool = True
    scale_sets: Sequence[int] | None = None
    gate: GateOptions = field(default_factory=GateOptions)
    report: ReportOptions = field(default_factory=ReportOptions)
    certify: CertifyOptions | None = None  # burn the cluster in once it is up (`create --certify`)
    on_event: Callable[[Event], None] = _nothing
    on_notice: Callable[[str], None] = _nothing
    confirm: Callable[[str], bool] | None = None
    before_delete: Callable[[list[NodeResult]], None] | None = None

    def findings(self) -> list[Finding]:
        """Every option of create out of range, at once: the gate's (when it runs), reporting's (when asked) and
        certify's (when asked: before the cluster is deployed, not after), each checked by its own options
        object, once; a finding two of them share (one CheckOptions) listed once."""
        found = [*self.gate.findings(), *(self.report.findings() if self.report.report_to_azure else []),
                 *(self.certify.findings() if self.certify is not None else [])]
        return list({(f.code, f.field, f.message): f for f in found}.values())


@dataclass(frozen=True)
class GateHooks:
    """What the gate tells its caller, and asks: on_node(NodeResult) as each node answers, on_start(count) as
    a check starts, on_round(round) after each round, on_notice(message) for what it decides, and
    before_delete(nodes) while the failing VMs still exist (if it raises, nothing is deleted)."""

    before_delete: Callable[[list[NodeResult]], None] | None = None
    on_node: Callable[[NodeResult], None] | None = None
    on_round: Callable[[dict[str, Any]], None] | None = None
    on_start: Callable[[int], None] | None = None
    on_notice: Callable[[str], None] | None = None


NO_HOOKS = GateHooks()


@dataclass(frozen=True)
class LiveCluster:
    """A cluster that exists, as the gate, `report` and Slurm's callers take it: its name, resource group,
    scale sets, the profile it was made with and the nodes asked for. `create` builds it from its own plan
    (no new listing); `check` and `report` with one lookup (lifecycle.live_cluster)."""

    name: str
    resource_group: str
    scale_sets: tuple[str, ...]
    profile: Profile | None = None  # None: a profile no longer known; each scale set's size says what to expect
    nodes: int = 0

    @classmethod
    def of_plan(cls, plan: Plan) -> LiveCluster:
        spec = plan.spec
        return cls(spec.names.cluster, spec.request.resource_group, tuple(r.name for r in plan.scale_sets),
                   spec.profile, spec.nodes)


# ------------------------------------------------------------------------------ results


@dataclass
class Event:
    """Progress of one resource, for the live display and for --no-wait summaries."""

    key: str
    name: str
    stage: str  # the resource type's progress label (its row's stage)
    state: str  # pending | exists | creating | succeeded | failed
    total: int = 0
    done: int = 0
    started: float = 0.0
    finished: float = 0.0
    error: str = ""
    has_instances: bool = False  # a scale set: done/total count its instances



@dataclass
class QuotaLine:
    name: str
    usage: int
    limit: int
    needed: int
    key: str = ""  # the usage's name as Azure spells it (the Microsoft.Quota resource name)

    @property
    def ok(self) -> bool:
        return self.usage + self.needed <= self.limit

    def as_dict(self) -> dict[str, Any]:
        out = {"quota": self.name, "usage": self.usage, "limit": self.limit, "needed": self.needed}
        if not self.ok:
            out["request_limit"] = self.usage + self.needed
        return out


@dataclass
class Preflight:
    findings: list[Finding] = field(default_factory=list)
    quota: list[QuotaLine] = field(default_factory=list)
    capabilities: dict[str, str] = field(default_factory=dict)
    zones: list[str] = field(default_factory=list)
    subnet: dict[str, Any] = field(default_factory=dict)  # what --subnet-id's subnet offers, when given
    # Live values that override documented ones for what the request needs.
    overrides: dict[str, Any] = field(default_factory=dict)
    family: str | None = None  # the size's quota family as the Resource SKUs API spells it here
    plan: PurchasePlan | None = None  # the live image's purchase plan
    accept_terms: PurchasePlan | None = None  # a plan whose terms create accepts (--accept-terms)
    reservation: dict[str, Any] = field(default_factory=dict)  # --capacity-reservation-group's room, when given

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.is_error]

    def as_dict(self) -> dict[str, Any]:
        return {
            "findings": [f.as_dict() for f in self.findings],
            "quota": [q.as_dict() for q in self.quota],
            "zones": self.zones,
            **({"subnet": self.subnet} if self.subnet else {}),
            **({"capacity_reservation": self.reservation} if self.reservation else {}),
        }



@dataclass
class HealthReport:
    """Every node's result (iterate it as a list of NodeResult), the outbound path of each scale set's
    subnet, and the multi-node NCCL results when they ran."""

    cluster: str
    resource_group: str
    nodes: list[NodeResult]
    scale_sets: list[dict[str, Any]] = field(default_factory=list)
    outbound: list[dict[str, Any]] = field(default_factory=list)
    nccl: list[dict[str, Any]] = field(default_factory=list)

    def __iter__(self) -> Iterator[NodeResult]:
        return iter(self.nodes)

    def __len__(self) -> int:
        return len(self.nodes)

    def __getitem__(self, index: int) -> NodeResult:
        return self.nodes[index]

    @property
    def failed(self) -> list[NodeResult]:
        return [n for n in self.nodes if n.status == FAILED]

    @property
    def unreachable(self) -> list[NodeResult]:
        return [n for n in self.nodes if n.status == UNREACHABLE]

    @property
    def inconclusive(self) -> list[NodeResult]:
        return [n for n in self.nodes if n.status == INCONCLUSIVE]

    @property
    def healthy(self) -> bool:
        return all(n.passed for n in self.nodes) and all(r["status"] == PASSED for r in self.nccl)

    def as_dict(self) -> dict[str, Any]:
        counts = {s: sum(1 for n in self.nodes if n.status == s) for s in STATUSES}
        return {
            "cluster": self.cluster, "resource_group": self.resource_group, "healthy": self.healthy,
            "nodes_checked": len(self.nodes), **counts,
            "warnings": [o["warning"] for o in self.outbound if o.get("warning")],
            "nodes": [n.as_dict() for n in self.nodes],
            "nccl": self.nccl,
            "outbound": self.outbound,
            "scale_sets": self.scale_sets,
        }



@dataclass
class GateResult:
    report: HealthReport
    rounds: list[dict[str, Any]]
    replaced: list[dict[str, Any]]
    stopped: str | None = None

    @property
    def healthy(self) -> bool:
        return self.report.healthy

    def as_dict(self) -> dict[str, Any]:
        return {**self.report.as_dict(), "rounds": self.rounds, "replaced": self.replaced,
                "stopped": self.stopped}


@dataclass
class RackGateResult:
    """What the gate of whole racks (rack_gate.gate) found: the nodes' gate result, the racks as measured after
    any pruning, the spare racks it removed (each with why), and why it stopped short, or None."""

    health: GateResult
    racks: list[dict[str, Any]]
    pruned: list[dict[str, Any]]
    stopped: str | None = None


@dataclass
class CreateResult:
    """What `create` did. `healthy` is False when the gate ran and did not pass: the cluster is left
    as it is and `unhealthy_error()` says which nodes and what to do (the CLI exits with it)."""

    plan: Plan
    preflight: Preflight
    dry_run: bool
    kept: list[str] = field(default_factory=list)
    azure_validation: dict[str, Any] | None = None
    what_if: Any = None  # changes.WhatIf, with dry_run
    terms_accepted: dict[str, Any] | None = None
    resource_group_created: bool | None = None
    resources: list[Event] = field(default_factory=list)
    health: GateResult | None = None
    racks: list[dict[str, Any]] | None = None
    spare_racks: dict[str, Any] | None = None
    reports: list[dict[str, Any]] | None = None  # Guest Health Reporting's entries, when it was asked for
    replacing: bool = False
    certificate: dict[str, Any] | None = None  # `create --certify`: the readiness record

    @property
    def cluster(self) -> str:
        return self.plan.spec.names.cluster

    @property
    def resource_group(self) -> str:
        return self.plan.spec.request.resource_group

    @property
    def healthy(self) -> bool:
        return (self.health is None or self.health.healthy) and (
            self.certificate is None or self.certificate["verdict"] != "not_certified")

    def unhealthy_error(self) -> UnhealthyNodes:
        """The error a gate that did not pass ends with (its .result: this result as a dict)."""
        result = self.as_dict()
        if self.health is None or self.health.healthy:  # the gate passed; the certification did not
            faults = (self.certificate or {}).get("faults", [])
            return UnhealthyNodes(f"the cluster was not certified: {len(faults)} fault(s)", code="NOT_CERTIFIED",
                                  remedy=f"see 'certificate' ('provision certify -n {self.cluster} -g "
                                         f"{self.resource_group} -o table' certifies it again)",
                                  report={"nodes": []}, result=result)
        return unhealthy_error(result["health"], cluster=self.cluster, resource_group=self.resource_group,
                               replacing=self.replacing, stopped=self.health.stopped, result=result)

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {**self.plan.summary(), "preflight": self.preflight.as_dict(), "dry_run": self.dry_run}
        if self.kept:
            out["kept"] = self.kept
        if self.azure_validation is not None:
            out["azure_validation"] = self.azure_validation
        if self.dry_run:
            out["what_if"] = self.what_if.as_dict()
            return plain(out)
        if self.terms_accepted is not None:
            out["terms_accepted"] = self.terms_accepted
        out["resource_group_created"] = self.resource_group_created
        out["resources"] = [{"name": e.name, "stage": e.stage, "state": e.state} for e in self.resources]
        if self.racks is not None:
            out["racks"] = self.racks
        if self.spare_racks is not None:
            out["spare_racks"] = self.spare_racks
        if self.health is not None:
            out["health"] = self.health.as_dict()
        if self.reports is not None:
            out["guest_health_reports"] = self.reports
        if self.certificate is not None:
            out["certificate"] = self.certificate
        return plain(out)


@dataclass
class ReportResult:
    """What `report` did: the nodes' check (a health_gate.HealthReport) and one entry per node and
    impact category filed, found already filed, or not reported (with why)."""

    cluster: str
    resource_group: str
    health: Any
    entries: list[dict[str, Any]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"cluster": self.cluster, "resource_group": self.resource_group, "nodes_checked": len(self.health),
                "failed": len(self.health.failed), "inconclusive": len(self.health.inconclusive),
                "unreachable": len(self.health.unreachable),
                "reports_filed": sum(1 for e in self.entries if e["state"] == "filed"),
                "reports_existing": sum(1 for e in self.entries if e["state"] == "already_filed")}
