"""The certification suite over any runner: per-node stages, the fabric, localisation, the verdict.

Per node (every node at once): DCGM's diagnostics, a thermal run under load, nvbandwidth, the InfiniBand
loopback. Then the fabric of each InfiniBand domain: rounds of pairs testing every port with GPUDirect,
and the domain-wide collectives (all_reduce, all_to_all) at large sizes over the nodes that passed; on
NVL72 sizes each rack's multi-node NVLink all_reduce. A collective below its band is localised
(localise.py) and each culprit's ports are tested against known-good partners, which tells a bad link
from a bad node; a rack where no node clears is a bad rack. A fault every node shows is nobody's.

The runner (runner.py) runs the steps: Run Command on Azure, the fake's hardware model in tests and in
the benchmark; the suite is the same code for both.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ..profiles import Figure
from . import pairs as pairwise
from .bounded import OutputError
from .findings import FAIL, WARN, Fault, Findings, Measurement, Unattributed, shared_by_all
from .levels import RUN_COMMAND, Level
from .localise import Localisation, localise
from .nccl_tests import parse as parse_nccl
from .node_checks import NodeFacts, judge_dcgm, judge_loopback, judge_nvbandwidth, judge_thermal
from .outliers import outliers
from .runner import Job, NodeInfo, Output, RoundFailed, Runner
from .timeline import Timeline

OUTLIER_METRICS = ("nvbandwidth_h2d", "nvbandwidth_d2h", "nvbandwidth_d2d", "loopback_busbw")
FIGURE_OF = {"all_reduce": "allreduce_busbw", "alltoall": "alltoall_busbw"}


@dataclass(frozen=True)
class SuitePlan:
    size: str
    level: Level
    figures: dict[str, Figure]
    gpus: int
    ports: tuple[str, ...]  # mlx5_ib0 ... the InfiniBand ports each node has
    racks: bool = False  # NVL72: each rack's multi-node NVLink all_reduce
    seed: int = 0
    parallel: int = 100
    nccl_env: str = ""
    step_timeout: int = 3600


@dataclass(frozen=True)
class Named:
    """Named but not reported: a warning band or a fleet outlier (re-tested, for people to look at)."""

    subject: str
    check: str
    value: float | None
    reason: str

    def as_dict(self) -> dict:
        return {"subject": self.subject, "check": self.check, "value": self.value, "reason": self.reason}


@dataclass
class SuiteResult:
    findings: Findings
    facts: dict[str, NodeFacts]
    timeline: Timeline
    named: list[Named] = field(default_factory=list)
    localisation: list[Localisation] = field(default_factory=list)
    unreachable: dict[str, str] = field(default_factory=dict)
    collectives: list[Measurement] = field(default_factory=list)
    pair_rounds: int = 0

    @property
    def faults(self) -> list[Fault]:
        return self.findings.faults

    def named_subjects(self) -> set[str]:
        """Every node and link the certification names: its faults, warnings and outliers."""
        return {f.subject for f in self.findings.faults} | {n.subject for n in self.named}


def _settings(plan: SuitePlan, **extra) -> dict[str, object]:
    return {"AZGPU_EXPECT_GPUS": plan.gpus, "AZGPU_STEP_TIMEOUT": plan.step_timeout, **extra}


def run(runner: Runner, nodes: Sequence[NodeInfo], plan: SuitePlan, *, reference: Sequence[NodeInfo] = (),
        on_notice: Callable[[str], None] = lambda message: None) -> SuiteResult:
    """Certify `nodes`; `reference` are nodes certified before (partners and peers of replacements)."""
    lv = plan.level
    findings = Findings()
    facts = {n.name: NodeFacts() for n in nodes}
    timeline = Timeline(parallel=plan.parallel)
    result = SuiteResult(findings, facts, timeline)
    names = [n.name for n in nodes]

    def stage(mode: str, label: str, settings: dict) -> dict[str, str]:
        outputs = runner.per_node(mode, nodes, settings)
        timeline.add(label, outputs)
        texts = {}
        for name in names:
            out = outputs.get(name) or Output(None, error="no answer")
            if out.versions:
                facts[name].versions.update(out.versions)
            if out.text is not None and not out.image:
                texts[name] = out.text
            elif out.image:
                findings.inconclusive.append(Unattributed(label, f"{name}: {out.error or 'a tool is missing'} (the "
                                                                 "image's fault, not the host's)", (name,)))
            else:
                result.unreachable.setdefault(name, f"{label}: {out.error or 'no answer'}")
        on_notice(f"certify: {label}: {len(texts)} of {len(names)} node(s) answered")
        return texts

    dcgm_out = stage("dcgm", f"dcgmi diag -r {lv.dcgm}", _settings(plan, AZGPU_DCGM_LEVEL=lv.dcgm))
    if lv.thermal_seconds:
        for name, text in stage("thermal", f"thermal {lv.thermal_seconds} s",
                                _settings(plan, AZGPU_THERMAL_SECONDS=lv.thermal_seconds,
                                          AZGPU_THERMAL_SAMPLE=15)).items():
            judge_thermal(findings, name, text, lv.thermal_seconds, facts[name])
    for name, text in dcgm_out.items():
        judge_dcgm(findings, name, text, lv.dcgm, facts[name])
    for name, text in stage("nvbandwidth", "nvbandwidth", _settings(plan)).items():
        judge_nvbandwidth(findings, name, text, plan.figures, facts[name])
    loop_settings = _settings(plan, AZGPU_NCCL_ENV=plan.nccl_env, AZGPU_NCCL_MIN=lv.min_bytes,
                              AZGPU_NCCL_MAX=lv.max_bytes)
    for name, text in stage("loopback", "InfiniBand loopback", loop_settings).items():
        judge_loopback(findings, name, text, plan.figures.get("loopback_busbw"), facts[name])
    _shared(findings, names, result.unreachable)

    members = [n for n in [*reference, *nodes] if n.name not in result.unreachable]
    if len(members) >= 2 and plan.ports:
        flapped = {n: set(f.flapped) for n, f in facts.items() if f.flapped}
        done = pairwise.certify_ports(runner.fabric, [n.name for n in nodes if n.name not in result.unreachable],
                                      plan.ports, lv.pair_rounds if not reference else 0, plan.seed,
                                      plan.figures.get("ib_write_bw_gdr"), findings, flapped,
                                      partners=[n.name for n in reference])
        result.pair_rounds = done.rounds
        if done.seconds:
            timeline.add_seconds(f"pairs ({done.rounds} round(s))", sum(s + RUN_COMMAND for s in done.seconds),
                                 "every port of every pair at once", done.rounds)
    _outliers(result, names)
    healthy = [n for n in members if n.name not in findings.faulty_nodes()]
    if len(healthy) >= 2:
        _collectives(runner, healthy, plan, result, [n.name for n in reference], on_notice)
    return result


def _shared(findings: Findings, names: list[str], unreachable: dict[str, str]) -> None:
    ran = [n for n in names if n not in unreachable]
    checks = sorted({f.check for f in findings.faults})
    common = shared_by_all(findings.faults, ran, checks)
    if common:
        gone = {c.check for c in common}
        findings.faults = [f for f in findings.faults if f.check not in gone]
        findings.common += common


def _outliers(result: SuiteResult, names: list[str]) -> None:
    faulty = result.findings.faulty_nodes()
    for metric in OUTLIER_METRICS:
        values = {n: result.facts[n].values[metric] for n in names if metric in result.facts[n].values}
        for o in outliers(values):
            if o.key in faulty:
                continue
            z = f"robust z {o.z:.1f}" if o.z is not None else "every other node the same"
            result.named.append(Named(o.key, metric, round(o.value, 3), f"{o.drop:.0%} below the cluster's median "
                                      f"{o.median:g} ({z}; Microsoft's outlier rule: below -2)"))


def _busbw(output: Output) -> float | None:
    if output.text is None:
        return None
    try:
        return parse_nccl(output.text).busbw
    except OutputError:
        return None


def _collectives(runner: Runner, members: list[NodeInfo], plan: SuitePlan, result: SuiteResult,
                 reference: list[str], on_notice) -> None:
    lv = plan.level
    names = [n.name for n in members]
    timeline = result.timeline
    if plan.racks:
        _racks(runner, members, plan, result, on_notice)
    for op in lv.ops:
        figure = plan.figures.get(FIGURE_OF[op])
        job = Job("collective", tuple(names), op, "ib", lv.min_bytes, lv.max_bytes)
        (output,) = runner.fabric([job])
        timeline.add(f"{op} over {len(names)} node(s)", [("domain", output)])
        m = Measurement(f"{len(names)} nodes", op, _busbw(output), "GB/s", figure, detail=job.describe())
        result.collectives.append(m)
        result.findings.measurements.append(m)
        on_notice(f"certify: {op} across {len(names)} node(s): {m.value} GB/s ({m.verdict})")
        if output.text is None:  # a collective that did not run certifies nothing (and blames nobody)
            result.findings.inconclusive.append(_not_run(op, output, tuple(names)))
        if m.verdict in (FAIL, WARN) or (m.value is None and output.text is not None):
            _localise(runner, [("domain", names)], plan, result, op, figure, {"domain": reference})


def _not_run(check: str, output: Output, nodes: tuple[str, ...]) -> Unattributed:
    return Unattributed(check, f"did not run ({output.error or 'no output'}): nothing was measured, so nothing is "
                               "certified, reported or replaced for it", nodes)


def _passes(figure: Figure | None) -> Callable[[float | None], bool]:
    bar = figure.warn if figure is not None and figure.warn is not None else (figure.floor if figure else None)
    return lambda v: v is not None and (bar is None or v >= bar)


def _localise(runner: Runner, groups: list[tuple[str, list[str]]], plan: SuitePlan, result: SuiteResult, op: str,
              figure: Figure | None, known_good: dict[str, list[str]], fabric: str = "ib") -> Localisation:
    lv = plan.level
    seconds: list[float] = []

    def measure(gs: list[tuple[str, ...]]) -> list[float | None]:
        outputs = runner.fabric([Job("collective", g, op, fabric, lv.max_bytes, lv.max_bytes) for g in gs])
        seconds.append(max((o.seconds for o in outputs), default=0.0))
        missing = next((o for o in outputs if o.text is None), None)
        if missing is not None:  # a test that did not run is no evidence about anybody
            raise RoundFailed(f"a localisation round did not run: {missing.error}")
        return [_busbw(o) for o in outputs]

    try:
        found = localise(groups, measure, _passes(figure), known_good=known_good)
    except RoundFailed as exc:
        result.findings.inconclusive.append(Unattributed(op, f"{exc.message}; nothing was localised",
                                                         tuple(n for _, g in groups for n in g)))
        return Localisation()
    result.localisation.append(found)
    timeline = result.timeline
    timeline.add_seconds(f"localisation ({found.rounds} collective round(s))", sum(s + RUN_COMMAND for s in seconds),
                         ", ".join(found.culprits) or "no culprit", found.rounds)
    floor = figure.floor if figure is not None else None
    culprit_faults = []
    for node in found.culprits:
        tests = found.evidence.get(node, [])
        low = min((t.value for t in tests if t.value is not None), default=None)
        evidence = tuple(f"{' + '.join(t.group)}: {t.value} GB/s ({t.purpose}, round {t.round})" for t in tests)
        if floor is not None and (low is None or low < floor):
            kind = "nvlink_bandwidth" if fabric == "mnnvl" else "ib_bandwidth"
            fault = Fault("node", node, kind, op, f"{op} with a known-good node at {low} GB/s, twice with different "
                          f"partners, below the {floor:g} GB/s floor", expected=f">= {floor:g} GB/s",
                          measured=f"{low} GB/s", source=figure.source, evidence=evidence)
            culprit_faults.append(fault)
        else:
            result.named.append(Named(node, op, low, "below the warning band with two known-good partners: re-test "
                                                     "it; not reported (above the floor)"))
    for fault in culprit_faults:
        result.findings.add(fault)
    if culprit_faults and fabric == "ib" and plan.ports:
        _which_ports(runner, [f.node for f in culprit_faults], plan, result)
    for domain in found.common:
        result.findings.common.append(Unattributed(op, f"{domain}: every group failed down to the smallest, so no node "
                                                   "could be told from the others: the fabric or the configuration; "
                                                   "nothing is reported or replaced", tuple(n for d, g in groups
                                                                                            if d == domain for n in g)))
    for group in found.unresolved:
        result.findings.inconclusive.append(Unattributed(op, "slow only as a whole, not in parts (the fabric between "
                                                             "them, or too few rounds)", tuple(group)))
    return found


def _which_ports(runner: Runner, culprits: list[str], plan: SuitePlan, result: SuiteResult) -> None:
    """A culprit's ports against a known-good partner each: one port below = its link, all = the node."""
    good = [n for n in result.facts if n not in result.findings.faulty_nodes()]
    good += [n for loc in result.localisation for t in loc.tests if t.passed for n in t.group if n not in good]
    pairs = [(c, g) for c, g in zip(culprits, [g for g in dict.fromkeys(good) if g not in culprits], strict=False)]
    if not pairs:
        return
    tests = pairwise.PortTests()
    seconds = pairwise.run_round(runner.fabric, pairs, plan.ports, tests, 0)
    pairwise.unreadable(tests, result.findings)
    result.timeline.add_seconds("ports of the culprits", seconds + RUN_COMMAND, ", ".join(culprits))
    figure = plan.figures.get("ib_write_bw_gdr")
    floor = pairwise._floor(tests, figure)
    for node, _ in pairs:
        bad = [p for p in plan.ports if pairwise._fails(min((g or 0.0 for _, g, _ in tests.tests.get((node, p), [])),
                                                            default=None), floor)]
        if bad and len(bad) < len(plan.ports):
            result.findings.faults = [f for f in result.findings.faults if not (f.node == node and f.scope == "node"
                                                                                and f.kind == "ib_bandwidth")]
            for port in bad:
                values = [g for _, g, _ in tests.tests[(node, port)]]
                result.findings.add(Fault("link", node, "ib_bandwidth", "ib_write_bw", f"{port} below {floor:g} Gb/s "
                                          "with a known-good partner, after its collectives were slow",
                                          expected=f">= {floor:g} Gb/s", measured=f"{values[0]} Gb/s", port=port,
                                          source=figure.source if figure else ()))


def _racks(runner: Runner, members: list[NodeInfo], plan: SuitePlan, result: SuiteResult, on_notice) -> None:
    """NVL72: each rack's all_reduce over multi-node NVLink, all racks at once."""
    lv = plan.level
    racks: dict[str, list[str]] = {}
    for n in members:
        if n.rack:
            racks.setdefault(n.rack, []).append(n.name)
    racks = {r: ns for r, ns in racks.items() if len(ns) >= 2}
    if not racks:
        return
    figure = plan.figures.get("mnnvl_allreduce_busbw")
    order = sorted(racks)
    outputs = runner.fabric([Job("collective", tuple(racks[r]), "all_reduce", "mnnvl", lv.max_bytes, lv.max_bytes)
                             for r in order])
    result.timeline.add(f"rack NVLink all_reduce ({len(order)} rack(s))", list(zip(order, outputs, strict=True)))
    failing = []
    measured: dict[str, Measurement] = {}
    for rack, output in zip(order, outputs, strict=True):
        m = Measurement(f"rack {rack}", "mnnvl_all_reduce", _busbw(output), "GB/s", figure,
                        detail=f"{len(racks[rack])} nodes over multi-node NVLink")
        result.collectives.append(m)
        result.findings.measurements.append(m)
        measured[rack] = m
        if output.text is None:
            result.findings.inconclusive.append(_not_run("mnnvl_all_reduce", output, tuple(racks[rack])))
        if m.verdict in (FAIL, WARN):
            failing.append(rack)
    if not failing:
        return
    if len(failing) == len(order) and len(order) > 1:
        result.findings.common.append(Unattributed("mnnvl_all_reduce", "every rack's NVLink all_reduce is below the "
                                                   "band: the configuration (IMEX, NCCL's MNNVL settings) or the image "
                                                   "rather than a rack; nothing is reported or replaced",
                                                   tuple(n for r in order for n in racks[r])))
        return
    found = _localise(runner, [(r, racks[r]) for r in failing], plan, result, "all_reduce", figure, {}, fabric="mnnvl")
    for rack in found.common:  # no node of the rack clears while other racks pass: the rack
        if measured[rack].verdict != FAIL:  # in the warning band only: named for a re-test, never reported
            result.named.append(Named(f"rack {rack}", "mnnvl_all_reduce", measured[rack].value,
                                      "below the warning band in every part of the rack, above the floor: re-test "
                                      "it; not reported or replaced"))
            continue
        for node in racks[rack]:
            result.findings.add(Fault("rack", node, "nvlink_bandwidth", "mnnvl_all_reduce",
                                      f"rack {rack}: the NVLink all_reduce fails in every part of the rack while other "
                                      "racks pass: the rack's NVLink (NVSwitch trays, cabling), not one node",
                                      expected=f">= {figure.floor:g} GB/s" if figure and figure.floor else None,
                                      measured=f"{measured[rack].value} GB/s", rack=rack,
                                      source=figure.source if figure else ()))
    result.findings.common = [c for c in result.findings.common if not (c.check == "all_reduce" and
                                                                        c.reason.split(":")[0] in found.common)]


