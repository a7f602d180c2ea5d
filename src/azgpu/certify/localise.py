"""Fault localisation: from a collective below its band to the node that causes it, in few rounds.

Microsoft's method (Azure/ai-infrastructure-on-azure, skills/ai-infra/references/nccl_diagnosis.md, R-aia):
split the failing group in halves and test both at once; a passing half is known good, a failing one is
split again; both failing means a culprit in each, and both recurse in parallel. A group small enough
(here: 4 nodes or fewer) is not split further: each of its nodes is paired with a *different* known-good
node, every pair at once, so no good node is a shared bottleneck. What is named must fail twice: a node
whose pair fails is paired again with another good node (a transient passes the second time, a fault
does not), and a group that failed while both its halves passed is tested again whole (passing: a
transient; failing again: a fault of the fabric between them, not of a node). When no node can be
cleared at all (every group fails down to the smallest), the fault is everybody's: the fabric or the
configuration, and nothing is named.

Every test of a round runs at the same time (`measure` gets the round's groups together), so a 64-node
domain takes log2(64/4) = 4 rounds of halving, one of pairing and one of confirming: 6 rounds, within
ceil(log2 N) + 2 = 8, where testing every node against a reference one by one takes N - 1 = 63.
Several domains (the racks of an NVL72 cluster) are localised side by side, each with its own good nodes.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

PAIR_AT = 4  # a failing group this small is resolved by pairing its nodes with known-good ones

Group = tuple[str, ...]
Measure = Callable[[list[Group]], list[float | None]]


@dataclass(frozen=True)
class Test:
    round: int
    group: Group
    value: float | None
    passed: bool
    purpose: str  # half | pair | confirm | retest
    domain: str = ""

    def as_dict(self) -> dict:
        return {"round": self.round, "nodes": list(self.group), "value": self.value, "passed": self.passed,
                "purpose": self.purpose, "domain": self.domain}


@dataclass
class Localisation:
    rounds: int = 0
    culprits: list[str] = field(default_factory=list)
    evidence: dict[str, list[Test]] = field(default_factory=dict)
    transients: list[Group] = field(default_factory=list)
    unresolved: list[Group] = field(default_factory=list)  # fails whole, not in parts: the fabric between
    common: list[str] = field(default_factory=list)  # domains where no node could be cleared
    tests: list[Test] = field(default_factory=list)
    nodes: int = 0

    @property
    def bound(self) -> int:
        """ceil(log2 N) + 2: the rounds the localisation may take."""
        return math.ceil(math.log2(max(2, self.nodes))) + 2

    @property
    def exhaustive(self) -> int:
        """N - 1: the rounds of testing each node with a reference node, one pair at a time."""
        return max(0, self.nodes - 1)

    def as_dict(self) -> dict:
        return {"rounds": self.rounds, "bound": self.bound, "exhaustive_rounds": self.exhaustive,
                "culprits": list(self.culprits), "transients": [list(g) for g in self.transients],
                "unresolved": [list(g) for g in self.unresolved], "common": list(self.common),
                "tests": [t.as_dict() for t in self.tests]}


@dataclass
class _Domain:
    name: str
    good: list[str]
    pending: list[Group] = field(default_factory=list)
    suspects: list[str] = field(default_factory=list)
    confirm: list[tuple[str, str]] = field(default_factory=list)  # (suspect, first partner)
    retest: list[Group] = field(default_factory=list)

    def busy(self) -> bool:
        return bool(self.pending or self.suspects or self.confirm or self.retest)


def localise(groups: Sequence[tuple[str, Sequence[str]]], measure: Measure, passes: Callable[[float | None], bool], *,
             known_good: dict[str, Sequence[str]] | None = None, pair_at: int = PAIR_AT,
             max_rounds: int | None = None) -> Localisation:
    """Find the nodes behind failing groups. groups: (domain, nodes) that each failed a collective;
    known_good: per domain, nodes already proven good (partners for the pairing)."""
    out = Localisation(nodes=sum(len(g) for _, g in groups))
    limit = max_rounds if max_rounds is not None else out.bound + 2
    domains = [_Domain(name, list(dict.fromkeys((known_good or {}).get(name, ()))), [tuple(nodes)])
               for name, nodes in groups if nodes]
    while any(d.busy() for d in domains) and out.rounds < limit:
        jobs: list[tuple[_Domain, str, Group, object]] = []
        for d in domains:
            for g in d.pending:
                if len(g) <= pair_at:
                    d.suspects += [n for n in g if n not in d.suspects]
                else:
                    half = len(g) // 2
                    jobs.append((d, "half", g[:half], g))
                    jobs.append((d, "half", g[half:], g))
            d.pending = []
            used: set[str] = set()
            for suspect, first in d.confirm:
                partner = next((n for n in d.good if n not in used and n != first and n != suspect), None)
                partner = partner or next((n for n in d.good if n not in used and n != suspect), None)
                if partner is not None:
                    used.add(partner)
                    jobs.append((d, "confirm", (suspect, partner), suspect))
            d.confirm = [c for c in d.confirm if not any(j[3] == c[0] and j[1] == "confirm" for j in jobs)]
            waiting = []
            for suspect in d.suspects:
                partner = next((n for n in d.good if n not in used and n != suspect), None)
                if partner is None:
                    waiting.append(suspect)
                    continue
                used.add(partner)
                jobs.append((d, "pair", (suspect, partner), suspect))
            d.suspects = waiting
            jobs += [(d, "retest", g, g) for g in d.retest]
            d.retest = []
            if d.suspects and not d.good and not any(j[0] is d for j in jobs):
                out.common.append(d.name)  # nothing in this domain passes: nobody's node in particular
                d.suspects, d.confirm = [], []
        if not jobs:
            break
        values = measure([j[2] for j in jobs])
        out.rounds += 1
        halves: dict[tuple[int, Group], list[bool]] = {}
        for (d, purpose, group, key), value in zip(jobs, values, strict=True):
            ok = passes(value)
            test = Test(out.rounds, group, value, ok, purpose, d.name)
            out.tests.append(test)
            if purpose == "half":
                halves.setdefault((id(d), key), []).append(ok)
                if ok:
                    d.good += [n for n in group if n not in d.good]
                else:
                    d.pending.append(group)
            elif purpose == "pair":
                out.evidence.setdefault(key, []).append(test)
                if ok:
                    d.good.append(key)
                else:
                    d.confirm.append((key, group[1]))
            elif purpose == "confirm":
                out.evidence.setdefault(key, []).append(test)
                if ok:
                    out.transients.append(group)
                    d.good.append(key)
                elif key not in out.culprits:
                    out.culprits.append(key)
            else:  # retest of a group whose halves both passed
                (out.transients if ok else out.unresolved).append(group)
        for d in domains:
            for (owner, parent), results in halves.items():
                if owner == id(d) and len(results) == 2 and all(results):
                    d.retest.append(parent)
    for d in domains:  # what the round limit left open
        out.unresolved += [tuple(d.suspects)] if d.suspects else []
        out.unresolved += d.pending + d.retest + [(s,) for s, _ in d.confirm]
    return out
