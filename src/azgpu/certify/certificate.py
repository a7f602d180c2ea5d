"""The certificate: a machine-readable readiness record of a cluster, and its table for people.

Per node, link and rack: what was measured, against which expected figure and its source; the image,
driver, DCGM, OFED and HCA firmware versions each node reported; the faults, what was reported to
Azure (Guest Health Reporting) and what was replaced by what; findings that are nobody's (common) or
not the host's (inconclusive); the localisation's rounds; the time it took and its critical path.
Verdict: certified (nothing found), certified_with_warnings (named, nothing faulty: a warning band, a
fleet outlier), not_certified (a fault, or a node that could not be certified).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .findings import FAIL
from .suite import SuiteResult

SCHEMA = 1
CERTIFIED, WARNINGS, NOT_CERTIFIED = "certified", "certified_with_warnings", "not_certified"


def _versions(results: Sequence[SuiteResult]) -> dict[str, Any]:
    """Each version and the nodes that reported it: one value for a uniform cluster, several where not."""
    out: dict[str, dict[str, list[str]]] = {}
    for result in results:
        for node, facts in result.facts.items():
            for key, value in facts.versions.items():
                if value:
                    out.setdefault(key, {}).setdefault(value, []).append(node)
    return {key: [{"value": v, "nodes": len(ns), "example": sorted(ns)[0]} for v, ns in sorted(values.items())]
            for key, values in sorted(out.items())}


def verdict(results: Sequence[SuiteResult], extra_faults: int = 0, not_certified: int = 0,
            gone: frozenset[str] = frozenset()) -> str:
    """Faults of nodes since replaced (gone) no longer count: their replacements were certified after them."""
    if extra_faults or not_certified or any(
            [f for f in r.faults if f.node not in gone] or set(r.unreachable) - gone or
            [c for c in r.findings.inconclusive if not set(c.nodes) <= gone] or r.findings.common for r in results):
        return NOT_CERTIFIED
    if any(n for r in results for n in r.named if n.subject.split(":")[0] not in gone):
        return WARNINGS
    return CERTIFIED


def build(*, cluster: str, resource_group: str, level: str, domains: Sequence[tuple[str, str, SuiteResult]],
          gate: list[dict[str, Any]], reports: list[dict[str, Any]], replaced: list[dict[str, Any]],
          figures: dict[str, dict[str, Any]], gate_seconds: float = 0.0, started: str = "",
          stopped: str | None = None) -> dict[str, Any]:
    """domains: (scale set, size, the suite's result); gate: the gate's failed, inconclusive and unreachable
    nodes (as dicts); figures: the expected figures per size."""
    results = [r for _, _, r in domains]
    gone = frozenset(r["node"] for r in replaced)
    faults = [{"scale_set": s, **f.as_dict(), "replaced": f.node in gone} for s, _, r in domains for f in r.faults]
    gate_faults = [g for g in gate if g["status"] == "failed"]
    not_certified = [g for g in gate if g["status"] != "failed"]
    nodes: dict[str, dict[str, Any]] = {}
    for scale_set, size, result in domains:
        faulty = {f.node for f in result.faults}
        named = {n.subject.split(":")[0] for n in result.named}
        for name in result.facts:
            status = ("replaced" if name in gone else "faulty" if name in faulty else
                      "unreachable" if name in result.unreachable else "warning" if name in named else "certified")
            nodes[name] = {"node": name, "scale_set": scale_set, "size": size, "status": status, "measurements": []}
        for m in result.findings.measurements:
            node = m.subject.split(":")[0].split(" ")[0]
            if node in nodes and ":" not in m.subject:
                nodes[node]["measurements"].append(m.as_dict())
    links = [m.as_dict() for _, _, r in domains for m in r.findings.measurements if ":" in m.subject]
    collectives = [{"scale_set": s, **m.as_dict()} for s, _, r in domains for m in r.collectives]
    record = {
        "certificate": SCHEMA,
        "cluster": cluster,
        "resource_group": resource_group,
        "level": level,
        "started": started,
        "verdict": verdict(results, len(gate_faults), len(not_certified), gone),
        "summary": {
            "nodes": len(nodes) + len(gate),
            "certified": sum(1 for n in nodes.values() if n["status"] == "certified"),
            "warnings": sum(1 for n in nodes.values() if n["status"] == "warning"),
            "faulty": len({f["node"] for f in faults if not f["replaced"]} | {g["computer_name"] for g in gate_faults}),
            "not_certified": len(not_certified) + sum(1 for n in nodes.values() if n["status"] == "unreachable"),
            "links_measured": len(links),
            "reported": sum(1 for r in reports if r.get("state") in ("filed", "already_filed")),
            "replaced": len(replaced),
        },
        "versions": _versions(results),
        "expected": figures,
        "faults": faults + [{"scope": "node", "subject": g["computer_name"], "node": g["computer_name"],
                             "scale_set": g["scale_set"], "kind": "gate", "check": "health gate",
                             "message": g["summary"], "category": next((f["impact_category"] for f in g["failures"]
                                                                        if f.get("impact_category")), None)}
                            for g in gate_faults],
        "named": [{"scale_set": s, **n.as_dict()} for s, _, r in domains for n in r.named],
        "common": [c.as_dict() for r in results for c in r.findings.common],
        "inconclusive": [c.as_dict() for r in results for c in r.findings.inconclusive] + [
            {"check": "health gate", "reason": f"{g['computer_name']}: {g['summary']}", "nodes": [g["computer_name"]]}
            for g in not_certified] + [
            {"check": "reachability", "reason": f"{n}: {why}", "nodes": [n]} for r in results
            for n, why in r.unreachable.items()],
        "collectives": collectives,
        "localisation": [loc.as_dict() for r in results for loc in r.localisation],
        "nodes": sorted(nodes.values(), key=lambda n: n["node"]),
        "links": links,
        "reports": reports,
        "replaced": replaced,
        "timeline": _timeline(results, gate_seconds),
    }
    if stopped:
        record["stopped"] = stopped
    return record


def _timeline(results: Sequence[SuiteResult], gate_seconds: float) -> dict[str, Any]:
    stages = [{"stage": "health gate", "seconds": round(gate_seconds, 1), "slowest": "", "steps": 0}] if gate_seconds \
        else []
    for r in results:
        stages += r.timeline.as_dict()["critical_path"]
    total = sum(s["seconds"] for s in stages)
    return {"seconds": round(total, 1), "minutes": round(total / 60, 1), "critical_path": stages}


def table(record: dict[str, Any]) -> dict[str, Any]:
    """The view `-o table` prints: the verdict, the faults, the collectives, the slowest stages, and one
    row per node with its lowest measurements."""
    def node_row(n: dict) -> dict:
        row = {"node": n["node"], "status": n["status"]}
        for m in n["measurements"]:
            if m["check"] in ("loopback_busbw", "nvbandwidth_d2d", "nvbandwidth_h2d") and m["value"] is not None:
                row[m["check"]] = f"{m['value']:g}" + ("!" if m["verdict"] == FAIL else "")
        return row

    out: dict[str, Any] = {"cluster": record["cluster"], "level": record["level"], "verdict": record["verdict"],
                           **record["summary"], "minutes": record["timeline"]["minutes"]}
    if record.get("stopped"):
        out["stopped"] = record["stopped"]
    if record["faults"]:
        out["faults"] = [{"subject": f["subject"], "category": (f.get("category") or "").rsplit(".", 1)[-1],
                          "check": f["check"], "measured": f.get("measured") or "", "expected": f.get("expected") or ""}
                         for f in record["faults"]]
    if record["named"]:
        out["named"] = [{"subject": n["subject"], "check": n["check"], "value": n["value"], "why": n["reason"]}
                        for n in record["named"]]
    if record["common"]:
        out["common"] = [{"check": c["check"], "nodes": len(c["nodes"]), "why": c["reason"]} for c in record["common"]]
    if record["collectives"]:
        out["collectives"] = [{"where": c["subject"], "test": c["check"], "busbw_gbs": c["value"],
                               "expected": c.get("expected"), "floor": c.get("floor"), "verdict": c["verdict"]}
                              for c in record["collectives"]]
    if record["localisation"]:
        out["localisation"] = [{"rounds": loc["rounds"], "bound": loc["bound"], "exhaustive": loc["exhaustive_rounds"],
                                "culprits": ", ".join(loc["culprits"]) or "-"} for loc in record["localisation"]]
    if record["replaced"]:
        out["replaced"] = [{k: r.get(k) for k in ("node", "by", "round")} for r in record["replaced"]]
    out["stages"] = [{"stage": s["stage"], "minutes": round(s["seconds"] / 60, 1), "slowest": s["slowest"]}
                     for s in record["timeline"]["critical_path"]]
    out["nodes"] = [node_row(n) for n in record["nodes"]]
    return out

