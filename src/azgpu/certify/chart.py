"""A per-node bandwidth chart of a certificate: bars in the terminal, or an SVG file.

One bar per node for one measurement (the InfiniBand loopback's bus bandwidth by default, where the
cluster's own nodes are the only yardstick), the size's floor drawn where it has one, and the nodes the
certificate names marked, so the slow one stands out of a 64-node row without reading numbers.
"""

from __future__ import annotations

from html import escape
from typing import Any

METRICS = ("loopback_busbw", "nvbandwidth_d2d", "nvbandwidth_h2d", "nvbandwidth_d2h")


def values(record: dict[str, Any], metric: str) -> list[tuple[str, float, str, float | None]]:
    """(node, value, status, floor) of each node that measured `metric`."""
    out = []
    for node in record.get("nodes", []):
        for m in node["measurements"]:
            if m["check"] == metric and isinstance(m.get("value"), (int, float)):
                out.append((node["node"], float(m["value"]), node["status"], m.get("floor")))
    return out


def terminal(record: dict[str, Any], metric: str = "loopback_busbw", width: int = 40) -> str:
    rows = values(record, metric)
    if not rows:
        return f"(no node measured {metric})\n"
    top = max(v for _, v, _, _ in rows) or 1.0
    floor = next((f for _, _, _, f in rows if f), None)
    name_w = max(len(n) for n, _, _, _ in rows)
    lines = [f"{metric} per node (GB/s)" + (f", floor {floor:g}" if floor else "")]
    for name, value, status, _ in rows:
        n = int(round(width * value / top))
        mark = "" if status == "certified" else f"  <- {status}"
        lines.append(f"{name:<{name_w}} {'#' * n}{'.' * (width - n)} {value:g}{mark}")
    return "\n".join(lines) + "\n"


def svg(record: dict[str, Any], metric: str = "loopback_busbw") -> str:
    rows = values(record, metric)
    bar, gap, left, height = 14, 4, 160, 300
    width = left + max(1, len(rows)) * (bar + gap) + 20
    top = max((v for _, v, _, _ in rows), default=1.0) or 1.0
    floor = next((f for _, _, _, f in rows if f), None)
    title = f"{escape(record.get('cluster', ''))}: {escape(metric)} per node ({escape(record.get('verdict', ''))})"
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height + 110}" '
             f'font-family="sans-serif" font-size="11">', f'<text x="10" y="20" font-size="14">{title}</text>']
    for i, (name, value, status, _) in enumerate(rows):
        h = height * value / top
        x = left + i * (bar + gap)
        colour = "#4a7" if status == "certified" else "#d33"
        parts.append(f'<rect x="{x}" y="{40 + height - h:.1f}" width="{bar}" height="{h:.1f}" fill="{colour}">'
                     f'<title>{escape(name)}: {value:g} ({escape(status)})</title></rect>')
        parts.append(f'<text transform="translate({x + bar - 3},{height + 46}) rotate(90)">{escape(name)}</text>')
    if floor:
        y = 40 + height - height * floor / top
        parts.append(f'<line x1="{left - 10}" y1="{y:.1f}" x2="{width - 10}" y2="{y:.1f}" stroke="#000" '
                     f'stroke-dasharray="4 3"/><text x="10" y="{y + 4:.1f}">floor {floor:g}</text>')
    parts.append(f'<text x="10" y="{40 + height:.1f}">0</text><text x="10" y="48">{top:g}</text></svg>')
    return "\n".join(parts) + "\n"
