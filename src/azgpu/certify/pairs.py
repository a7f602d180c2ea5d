"""Pairwise ib_write_bw on every InfiniBand port with GPUDirect: which port of which node is slow.

Rounds of disjoint pairs, every pair and every port at once: SuperBench's pair-wise pattern (the circle
method of a round-robin tournament, microsoft/superbenchmark gen_traffic_pattern_config.py, R-superbench)
over the nodes in a seeded order, as many rounds as the level asks (Imbue runs random pairs for several
rounds and counts a host's passes, T-imbue). A test that fails (below the size's ib_write_bw floor, or no
result) makes both its ends suspects on that port; one confirmation round pairs each suspect with a
*different* node whose ports all passed. A port is named when it failed with its first partner and again
with a known-good one: the partner was not the cause and the failure repeated, so it was no transient.
A node whose every port fails that way is named as a node, not as eight links.
"""

from __future__ import annotations

import random
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ..profiles import Figure
from . import perftest
from .bounded import OutputError, lines_of
from .findings import Fault, Findings, Measurement, Unattributed
from .runner import Job, Output

FLEET_DROP = 0.2  # with no documented floor, a test this far below the fleet's median fails


@dataclass
class PortTests:
    tests: dict[tuple[str, str], list[tuple[str, float | None, int]]] = field(default_factory=dict)  # (node, port)
    # (node, partner, port) -> why: an output that does not read is no evidence about either end
    unreadable: dict[tuple[str, str, str], str] = field(default_factory=dict)

    def add(self, node: str, port: str, partner: str, gbps: float | None, round_: int) -> None:
        self.tests.setdefault((node, port), []).append((partner, gbps, round_))


def circle_rounds(nodes: Sequence[str], rounds: int, seed: int) -> list[list[tuple[str, str]]]:
    """`rounds` rounds of disjoint pairs, no pair twice (the circle method over a seeded order)."""
    order = list(nodes)
    random.Random(seed).shuffle(order)
    if len(order) % 2:
        order.append("")
    n = len(order)
    out = []
    for _ in range(min(rounds, max(0, n - 1))):
        out.append([(order[i], order[n - 1 - i]) for i in range(n // 2) if order[i] and order[n - 1 - i]])
        order = [order[0]] + order[2:] + order[1:2]
    return out


def split_rails(text: str) -> dict[str, str]:
    """The per-port reports of one ibpair job ('---- rail mlx5_ibN' before each)."""
    out: dict[str, list[str]] = {}
    current = None
    for line in lines_of(text, "ib_write_bw"):
        if line.startswith("---- rail "):
            current = line[len("---- rail "):].strip()[:16]
            out.setdefault(current, [])
        elif current is not None:
            out[current].append(line)
    return {k: "\n".join(v) for k, v in out.items()}


def _gbps(text: str) -> float | None:
    """The port's bandwidth; None when perftest gave no result row (it could not connect: a result, no
    bandwidth). OutputError when the report does not read (NaN, huge, cut): no evidence at all."""
    return perftest.parse(text).gbps


@dataclass
class PairResult:
    tests: PortTests
    rounds: int = 0
    seconds: list[float] = field(default_factory=list)


def run_round(fabric: Callable[[Sequence[Job]], list[Output]], pairs: list[tuple[str, str]], ports: Sequence[str],
              tests: PortTests, round_: int) -> float:
    outputs = fabric([Job("ibpair", pair) for pair in pairs])
    for (a, b), output in zip(pairs, outputs, strict=True):
        if output.text is None:  # the pair did not run (no key, no address): no evidence either way
            continue
        try:
            rails = split_rails(output.text) if output.text else {}
        except OutputError as exc:
            for port in ports:
                tests.unreadable[(a, b, port)] = str(exc)[:160]
            continue
        for port in ports:
            try:
                gbps = _gbps(rails[port]) if port in rails else None
            except OutputError as exc:
                tests.unreadable[(a, b, port)] = str(exc)[:160]
                continue
            tests.add(a, port, b, gbps, round_)
            tests.add(b, port, a, gbps, round_)
    return max((o.seconds for o in outputs), default=0.0)


def certify_ports(fabric, nodes: Sequence[str], ports: Sequence[str], rounds: int, seed: int, figure: Figure | None,
                  findings: Findings, flapped: dict[str, set[str]], *, partners: Sequence[str] = (),
                  round_offset: int = 0) -> PairResult:
    """The pairwise stage: rounds, judgement, one confirmation round, faults per port or node. With
    partners (nodes certified before), each node is paired with a different one of them instead."""
    result = PairResult(PortTests())
    plan = circle_rounds(nodes, rounds, seed)
    if partners:
        plan = [list(zip(nodes, partners, strict=False))] if len(partners) >= len(nodes) else plan + [
            [(n, partners[i % len(partners)]) for i, n in enumerate(nodes)]]
    for pairs in plan:
        result.rounds += 1
        result.seconds.append(run_round(fabric, pairs, ports, result.tests, round_offset + result.rounds))
    floor = _floor(result.tests, figure)
    # A port whose every test failed is a suspect; one that also passed with another partner is not (its
    # failure was its partner's): Imbue's pass ratio per host and port, T-imbue.
    failing = {key for key, tests in result.tests.tests.items() if tests and all(_fails(g, floor) for _, g, _ in tests)}
    suspects = sorted({node for node, _ in failing} - set(partners))
    good = [n for n in [*partners, *nodes] if n not in suspects and n not in flapped]
    if failing and not good:
        findings.common.append(Unattributed("ib_write_bw", "every node had a port below the figure: the fabric, the "
                                            "image (GPUDirect, peer memory) or the configuration rather than a host; "
                                            "nothing is reported or replaced for it", tuple(nodes)))
        return result
    confirm = []
    used: set[str] = set()
    for node in suspects:
        tested = {p for (n, _), runs in result.tests.tests.items() if n == node for p, _, _ in runs}
        partner = next((g for g in good if g not in used and g not in tested and g != node), None)
        if partner is not None:
            used.add(partner)
            confirm.append((node, partner))
        else:
            findings.inconclusive.append(Unattributed("ib_write_bw", f"{node}: no known-good node was left to confirm "
                                                      "its failing port with", (node,)))
    if confirm:
        result.rounds += 1
        result.seconds.append(run_round(fabric, confirm, ports, result.tests, round_offset + result.rounds))
    _judge(result.tests, floor, figure, confirm, findings, flapped)
    unreadable(result.tests, findings)
    return result


def unreadable(tests: PortTests, findings: Findings) -> None:
    """Ports whose report did not read: not certified, never anybody's fault."""
    for (a, b, port), why in sorted(tests.unreadable.items()):
        findings.inconclusive.append(Unattributed("ib_write_bw", f"{port} between {a} and {b}: the report does not "
                                                  f"read ({why}); no evidence about either end", (a, b)))


def _floor(tests: PortTests, figure: Figure | None) -> float | None:
    if figure is not None and figure.floor is not None:
        return figure.floor
    values = [g for ts in tests.tests.values() for _, g, _ in ts if g is not None]
    return statistics.median(values) * (1 - FLEET_DROP) if values else None


def _fails(gbps: float | None, floor: float | None) -> bool:
    return gbps is None or (floor is not None and gbps < floor)


def _judge(tests: PortTests, floor, figure, confirm, findings: Findings, flapped: dict[str, set[str]]) -> None:
    confirmed = dict(confirm)
    culprits: dict[str, list[str]] = {}
    for (node, port), runs in sorted(tests.tests.items()):
        partner = confirmed.get(node)
        if partner is None:
            continue
        first = [p for p, g, _ in runs if p != partner and _fails(g, floor)]
        again = [g for p, g, _ in runs if p == partner and _fails(g, floor)]
        if first and again:
            culprits.setdefault(node, []).append(port)
    bad = {(n, p) for n, ports in culprits.items() for p in ports} | {(n, p) for n, ps in flapped.items() for p in ps}
    shown = None
    if figure is not None:
        shown = Figure("ib_write_bw_gdr", "Gb/s", figure.source, figure.expected, figure.warn, floor)
    elif floor:
        shown = Figure("ib_write_bw_gdr", "Gb/s", ("fleet",), None, None, floor, "20 % below the cluster's median")
    for (node, port), runs in sorted(tests.tests.items()):
        # A port's value leaves out its tests with a port named bad: the partner's fault is not its own.
        own = [(p, g, r) for p, g, r in runs if (node, port) in bad or (p, port) not in bad]
        values = [g for _, g, _ in own if g is not None]
        findings.measurements.append(Measurement(
            f"{node}:{port}", "ib_write_bw", min(values) if values else None, "Gb/s", shown,
            detail="; ".join(f"{g if g is not None else 'no result'} with {p} (round {r})" for p, g, r in runs)[:400]))
    ports_of = {port for _, port in tests.tests}
    for node, ports in culprits.items():
        ports = [p for p in ports if p not in flapped.get(node, set())]  # already named as flapping
        if not ports:
            continue
        evidence = tuple(f"{port}: " + ", ".join(f"{g if g is not None else 'no result'} Gb/s with {p}"
                                                 for p, g, _ in tests.tests[(node, port)]) for port in ports)
        expected = f">= {floor:g} Gb/s" if floor else None
        source = figure.source if figure else ()
        if set(ports) >= ports_of and len(ports_of) > 1:
            findings.add(Fault("node", node, "ib_bandwidth", "ib_write_bw", f"every InfiniBand port below {floor:g} "
                               "Gb/s with GPUDirect, with two partners each", expected=expected,
                               measured=evidence[0][:120], source=source, evidence=evidence))
            continue
        for port, text in zip(ports, evidence, strict=True):
            low = min((g for _, g, _ in tests.tests[(node, port)] if g is not None), default=None)
            findings.add(Fault("link", node, "ib_bandwidth", "ib_write_bw", f"{port} below {floor:g} Gb/s with "
                               "GPUDirect, with its first partner and with a known-good one", expected=expected,
                               measured=f"{low:g} Gb/s" if low is not None else "no result", port=port,
                               source=source, evidence=(text,)))
