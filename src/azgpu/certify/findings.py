"""What a certification measured and found: measurements against figures, faults, and what is nobody's.

A Measurement is one value against the size's figure (profiles [sizes.certify], with its source): it
passes, is in the warning band (below warn: re-tested, named), fails (below the floor: a fault), or has
no documented figure (recorded, judged only against the fleet). A Fault is attributed hardware: a node,
one of its InfiniBand links (node and port) or a rack, with the health gate's finding kind (its Guest
Health Reporting category follows from it, health/impact.py) and the measurement as evidence. A finding
that could be the image's or the configuration's (a tool missing, DCGM's software errors, a result
every node shares) is never a Fault: it is Inconclusive or Common, never reported, never replaced.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ..health.impact import impact_category
from ..health.model import Failure, GpuRef
from ..profiles import Figure

PASS, WARN, FAIL, UNJUDGED, ERROR = "pass", "warn", "fail", "unjudged", "error"


def verdict(value: float | None, figure: Figure | None) -> str:
    if value is None:
        return ERROR
    if figure is None or (figure.floor is None and figure.warn is None):
        return UNJUDGED
    if figure.floor is not None and value < figure.floor:
        return FAIL
    if figure.warn is not None and value < figure.warn:
        return WARN
    return PASS


@dataclass(frozen=True)
class Measurement:
    subject: str  # a node, NODE:PORT, a rack, or the nodes of a collective ("4 nodes: a, b, ...")
    check: str  # loopback, ib_write_bw, nvbandwidth_d2d, all_reduce ...
    value: float | None
    unit: str
    figure: Figure | None = None
    detail: str = ""
    round: int | None = None

    @property
    def verdict(self) -> str:
        return verdict(self.value, self.figure)

    def as_dict(self) -> dict[str, Any]:
        f = self.figure
        out: dict[str, Any] = {"subject": self.subject, "check": self.check, "value": self.value, "unit": self.unit,
                               "verdict": self.verdict}
        if f is not None:
            out.update(expected=f.expected, warn=f.warn, floor=f.floor, source=list(f.source))
        if self.detail:
            out["detail"] = self.detail
        if self.round is not None:
            out["round"] = self.round
        return out


@dataclass(frozen=True)
class Fault:
    """Hardware proven faulty. kind: the gate's finding kind (ib_bandwidth, thermal_slowdown ...)."""

    scope: str  # node | link | rack
    node: str  # the node (for a rack: the node the report is filed on)
    kind: str
    check: str
    message: str
    expected: str | None = None
    measured: str | None = None
    port: str | None = None
    rack: str | None = None
    gpus: tuple[GpuRef, ...] = ()
    source: tuple[str, ...] = ()
    evidence: tuple[str, ...] = ()

    @property
    def failure(self) -> Failure:
        """As the health gate's Failure, which Guest Health Reporting files."""
        return Failure(check=self.check, kind=self.kind, message=self.message[:400], expected=self.expected,
                       measured=self.measured, gpus=self.gpus, port=self.port)

    @property
    def category(self) -> str | None:
        return impact_category(self.failure)

    @property
    def subject(self) -> str:
        if self.scope == "link":
            return f"{self.node}:{self.port}"
        if self.scope == "rack":
            return f"rack {self.rack}"
        return self.node

    def as_dict(self) -> dict[str, Any]:
        return {"scope": self.scope, "subject": self.subject, "node": self.node, "port": self.port, "rack": self.rack,
                "kind": self.kind, "category": self.category, "check": self.check, "message": self.message,
                "expected": self.expected, "measured": self.measured, "source": list(self.source),
                "gpus": [g.as_dict() for g in self.gpus], "evidence": list(self.evidence)}


@dataclass(frozen=True)
class Unattributed:
    """A finding that is not a host's: the image, the configuration, or every node at once."""

    check: str
    reason: str
    nodes: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {"check": self.check, "reason": self.reason, "nodes": list(self.nodes)}


@dataclass
class Findings:
    measurements: list[Measurement] = field(default_factory=list)
    faults: list[Fault] = field(default_factory=list)
    inconclusive: list[Unattributed] = field(default_factory=list)
    common: list[Unattributed] = field(default_factory=list)

    def faulty_nodes(self) -> set[str]:
        return {f.node for f in self.faults}

    def add(self, fault: Fault) -> None:
        if not any((f.subject, f.kind, f.node) == (fault.subject, fault.kind, fault.node) for f in self.faults):
            self.faults.append(fault)


def shared_by_all(faults: Iterable[Fault], nodes: Iterable[str], checks: Iterable[str]) -> list[Unattributed]:
    """Checks whose fault every node that ran them shows (two or more): the image, the driver or the
    configuration, not any one host. The faults of those checks are taken out by the caller."""
    ran = sorted(set(nodes))
    out = []
    if len(ran) < 2:
        return out
    faults = list(faults)
    for check in checks:
        hit = {f.node for f in faults if f.check == check}
        if hit and hit >= set(ran):
            out.append(Unattributed(check, f"every node that ran it ({len(ran)}) shows the same fault: the image, the "
                                           "driver or the configuration rather than a host; nothing is reported or "
                                           "replaced for it", tuple(ran)))
    return out
