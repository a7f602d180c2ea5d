"""The per-node stages judged: DCGM's diagnostics, the thermal run, nvbandwidth, the InfiniBand loopback.

Each takes what one node printed (already put together from its pages) and adds to the Findings:
measurements against the size's figures, faults of the node's hardware (with the GPU concerned,
by PCI bus id and serial number where known, as Guest Health Reporting wants them), and findings
that are not the host's (a tool the image lacks, DCGM's software and configuration errors, an output
that does not read): those are Unattributed, never reported, never replaced.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..health.model import GpuRef
from ..profiles import Figure
from . import clocks, dcgm, nccl_tests, nvbandwidth
from .bounded import OutputError, lines_of, printable
from .findings import FAIL, Fault, Findings, Measurement, Unattributed

# AzNHC warns within 5 % above its floor (customTests/azure_gpu_bandwidth.nhc: WARN_BW = EXP_BW * 1.05).
NVBANDWIDTH_TESTS = {"nvbandwidth_h2d": "host_to_device_memcpy_ce", "nvbandwidth_d2h": "device_to_host_memcpy_ce",
                     "nvbandwidth_d2d": "device_to_device_memcpy_read_ce"}
_SECTION = re.compile(r"^== (gpus|load gpu (\d{1,4}) exit (\d{1,3})|sample at (\d{1,6}) s"
                      r"|final sample at (\d{1,6}) s)$")
_COUNTER = re.compile(r"^(before|after) (mlx5_ib\d{1,2}) link_downed (\d{1,12}|unknown)$")


@dataclass
class NodeFacts:
    """What the per-node stages learnt about a node beyond the verdicts: its GPUs, its versions, values
    to compare with the fleet, and its ports that flapped."""

    gpus: dict[int, GpuRef] = field(default_factory=dict)
    versions: dict[str, str] = field(default_factory=dict)
    values: dict[str, float] = field(default_factory=dict)  # metric -> the node's lowest value
    flapped: dict[str, tuple[int, int]] = field(default_factory=dict)  # port -> (link_downed before, after)


def bus_of(nvidia_smi_bus: str) -> str:
    """00000001:00:00.0 (nvidia-smi) as sysfs writes it, 0001:00:00.0 (what the gate reports)."""
    domain, _, rest = nvidia_smi_bus.partition(":")
    try:
        return f"{int(domain, 16):04x}:{rest.lower()}"
    except ValueError:
        return printable(nvidia_smi_bus, 16)


def _gpu(facts: NodeFacts, index: int) -> tuple[GpuRef, ...]:
    return (facts.gpus[index],) if index in facts.gpus else ()


def unreadable(findings: Findings, node: str, check: str, why: str) -> None:
    findings.inconclusive.append(Unattributed(check, f"{node}: {why}", (node,)))


def judge_dcgm(findings: Findings, node: str, text: str, level: int, facts: NodeFacts) -> None:
    check = f"dcgmi diag -r {level}"
    try:
        run = dcgm.parse(text)
    except OutputError as exc:
        unreadable(findings, node, check, f"DCGM's output does not read: {exc}")
        return
    if run.driver:
        facts.versions.setdefault("driver", run.driver)
    if run.version:
        facts.versions["dcgm"] = run.version
    if run.runtime_error:
        unreadable(findings, node, check, f"DCGM did not run its tests: {run.runtime_error}")
    for result in run.failures:
        words = "; ".join(w.text for w in result.warnings)[:300] or f"{result.test} failed"
        if not result.host_fault():
            unreadable(findings, node, check, f"{result.test}: {words} (DCGM files this under software or "
                                              "configuration: the image or the set-up, not the host)")
            continue
        impact = result.impact()
        kind = {"GPUMemoryBWFailure": "gpu_memory_bandwidth", "HpcDcgmiThermalReport": "dcgm_thermal",
                "NvLink": "dcgm_nvlink"}.get(impact, "dcgm_diag")
        gpus = tuple(g for i in result.gpus for g in _gpu(facts, i))
        findings.add(Fault("node", node, kind, f"{check}: {result.test}",
                           f"DCGM {result.category} test '{result.test}' failed on GPU "
                           f"{','.join(map(str, result.gpus)) or '?'}: {words}", expected="Pass", measured="Fail",
                           gpus=gpus, source=("T-dcgm-diag", "T-dcgm-errors"), evidence=(words,)))


def _thermal_sections(text: str) -> dict[str, list[str]]:
    sections: dict[str, list[str]] = {}
    current = None
    for line in lines_of(text, "thermal"):
        m = _SECTION.match(line)
        if m:
            current = line[3:]
            sections.setdefault(current, [])
        elif current is not None and len(sections[current]) < 4096:
            sections[current].append(line)
    return sections


def judge_thermal(findings: Findings, node: str, text: str, seconds: int, facts: NodeFacts) -> None:
    check = "thermal"
    try:
        sections = _thermal_sections(text)
    except OutputError as exc:
        unreadable(findings, node, check, f"the thermal run's output does not read: {exc}")
        return
    for line in sections.get("gpus", []):
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 3 and parts[0].isdigit() and re.fullmatch(r"[0-9A-Fa-f]{4,8}:[0-9A-Fa-f:.]{4,12}", parts[1]):
            serial = parts[2] if re.fullmatch(r"[A-Za-z0-9-]{1,32}", parts[2]) else ""
            facts.gpus[int(parts[0])] = GpuRef(bus_of(parts[1]), serial)
    exits = {int(m.group(2)): int(m.group(3)) for key in sections if (m := _SECTION.match("== " + key)) and m.group(2)}
    active_key = next((k for k in sections if k.startswith("sample at")), None)
    sample_text = "\n".join(sections.get(active_key, [])) if active_key else ""
    at = int(active_key.split()[2]) if active_key else None
    throttled: dict[str, list[str]] = {}
    if sample_text:
        try:
            for bus, gpu in clocks.parse(sample_text).items():
                if gpu.slowdown:
                    throttled[bus_of(bus)] = gpu.slowdown
        except OutputError as exc:
            unreadable(findings, node, check, f"the clock reasons do not read: {exc}")
    if exits and all(rc != 0 for rc in exits.values()):
        unreadable(findings, node, check, f"the load did not run on any GPU (exit {sorted(set(exits.values()))}): the "
                                          "tool or its set-up, not a GPU")
        return
    by_bus = {g.bus: i for i, g in facts.gpus.items()}
    for index, rc in sorted(exits.items()):
        bus = facts.gpus[index].bus if index in facts.gpus else None
        reasons = throttled.pop(bus, None) if bus else None
        if rc == 0 and not reasons:
            findings.measurements.append(Measurement(f"{node} GPU {index}", check, 0.0, "s of slowdown",
                                                     detail=f"{seconds} s at full load, no slowdown"))
            continue
        _thermal_fault(findings, node, index, rc, reasons, at, seconds, facts)
    for bus, reasons in throttled.items():  # a GPU that throttled without a load line of its own
        _thermal_fault(findings, node, by_bus.get(bus, -1), 0, reasons, at, seconds, facts)


def _thermal_fault(findings, node, index, rc, reasons, at, seconds, facts) -> None:
    what = ", ".join(reasons or []) or f"the load exited {rc}"
    when = f" {at} s into a {seconds} s load" if reasons and at is not None else ""
    thermal = not reasons or any(r in clocks.THERMAL or r == "HW Slowdown" for r in reasons)
    findings.measurements.append(Measurement(f"{node} GPU {index}", "thermal", None, "", detail=f"{what}{when}"))
    findings.add(Fault("node", node, "thermal_slowdown" if thermal else "power_brake", "thermal",
                       f"GPU {index} under dcgmproftester -t 1004: {what}{when}", expected="no slowdown, exit 0",
                       measured=what[:120], gpus=_gpu(facts, index), source=("T-thermal", "R-aia"),
                       evidence=(f"{what}{when}",)))


def judge_nvbandwidth(findings: Findings, node: str, text: str, figures: dict[str, Figure], facts: NodeFacts) -> None:
    try:
        run = nvbandwidth.parse(text)
    except OutputError as exc:
        unreadable(findings, node, "nvbandwidth", f"nvbandwidth's output does not read: {exc}")
        return
    if run.driver:
        facts.versions.setdefault("driver", run.driver)
    for metric, testcase in NVBANDWIDTH_TESTS.items():
        matrix = run.matrices.get(testcase)
        if matrix is None:
            continue
        per_gpu = matrix.per_gpu()
        if not per_gpu:
            continue
        figure = figures.get(metric)
        low_gpu, low = min(per_gpu.items(), key=lambda kv: kv[1])
        facts.values[metric] = low
        m = Measurement(node, metric, low, "GB/s", figure, detail=f"lowest GPU {low_gpu} ({testcase})")
        findings.measurements.append(m)
        if m.verdict == FAIL:
            bad = sorted(g for g, v in per_gpu.items() if v < figure.floor)
            gpus = tuple(r for g in bad for r in _gpu(facts, g))
            findings.add(Fault("node", node, "gpu_copy_bandwidth", metric,
                               f"nvbandwidth {testcase}: GPU {', '.join(map(str, bad))} at {low:g} GB/s, below the "
                               f"{figure.floor:g} GB/s floor", expected=f">= {figure.floor:g} GB/s",
                               measured=f"{low:g} GB/s",
                               gpus=gpus, source=figure.source, evidence=(matrix.description,)))


def judge_loopback(findings: Findings, node: str, text: str, figure: Figure | None, facts: NodeFacts) -> None:
    counters: dict[str, dict[str, int]] = {"before": {}, "after": {}}
    try:
        lines = lines_of(text, "loopback")[:512]
    except OutputError as exc:
        unreadable(findings, node, "loopback", f"the loopback's output does not read: {exc}")
        return
    for line in lines:
        m = _COUNTER.match(line.strip())
        if m and m.group(3) != "unknown":
            counters[m.group(1)][m.group(2)] = int(m.group(3))
    for port, before in counters["before"].items():
        after = counters["after"].get(port, before)
        if after > before:
            facts.flapped[port] = (before, after)
    try:
        run = nccl_tests.parse(text, "loopback all_reduce_perf")
    except OutputError as exc:
        unreadable(findings, node, "loopback", f"the loopback all_reduce's output does not read: {exc}")
        return
    facts.values["loopback_busbw"] = run.busbw
    if run.nccl_version:  # the NCCL the image's nccl-tests ran with (its "NCCL version" line), for the certificate
        facts.versions["nccl"] = run.nccl_version
    m = Measurement(node, "loopback_busbw", run.busbw, "GB/s", figure,
                    detail=f"all_reduce_perf on {run.ranks or '?'} GPUs over InfiniBand only (NCCL_P2P_DISABLE=1), "
                           f"{run.largest.size} bytes" + (f", {run.wrong} wrong values" if run.wrong else ""))
    findings.measurements.append(m)
    for port, (before, after) in sorted(facts.flapped.items()):
        findings.add(Fault("link", node, "ib_port_flapping", "loopback", f"{port}: its link went down {after - before} "
                           f"time(s) during a {run.largest.size} byte all_reduce (link_downed {before} -> {after})",
                           expected="link_downed unchanged", measured=f"+{after - before}", port=port,
                           source=("R-aia", "R-nhc-ghr"), evidence=(f"link_downed {before} -> {after}",)))
    if m.verdict == FAIL:
        findings.add(Fault("node", node, "ib_bandwidth", "loopback",
                           f"all_reduce over this node's own InfiniBand ports at {run.busbw:g} GB/s, below the "
                           f"{figure.floor:g} GB/s floor",
                           expected=f">= {figure.floor:g} GB/s", measured=f"{run.busbw:g} GB/s", source=figure.source))
