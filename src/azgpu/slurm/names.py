"""Slurm node names of a cluster's CLOUD nodes and the scale set each belongs to.

A CLOUD node's name is fixed in slurm.conf long before a VM exists, and Azure names a scale set's
VMs itself (`<cluster>-000-00000a`), so the names are azgpu's own: `<cluster>-d<domain>-<nnnn>`,
numbered from 1 inside each InfiniBand domain (scale set). The name says which scale set grows on
resume; which VM carries it is recorded at resume time (azgpu.slurm.state).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from ..errors import InputError
from ..hostlist import compress

_RANGE = re.compile(r"^(?P<lo>\d+)(?:-(?P<hi>\d+))?$")


@dataclass(frozen=True)
class Domain:
    index: int
    scale_set: str  # the azgpu scale set that holds these names
    capacity: int  # Slurm names (the scale set's most nodes)
    names: tuple[str, ...]

    @property
    def hostlist(self) -> str:
        return compress(self.names)


def node_name(cluster: str, index: int, number: int) -> str:
    return f"{cluster}-d{index:03d}-{number:04d}"


def domains(spec) -> list[Domain]:
    """One Domain per scale set of the validated cluster (its most nodes: the cluster file's `nodes`)."""
    names = spec.names
    return [Domain(i, names.vmss(i), capacity, tuple(node_name(names.cluster, i, n) for n in range(1, capacity + 1)))
            for i, capacity in enumerate(spec.scale_sets)]


def expand(hostlist: str) -> list[str]:
    """Slurm's hostlist expression as names, in order (`a[1-3,7],b` -> a1 a2 a3 a7 b); the width of
    a range's first number is kept, as Slurm does (src/common/hostlist.c)."""
    out: list[str] = []
    for item in _split_top(hostlist.strip()):
        if not item:
            continue
        out += _expand_one(item, hostlist)
    return out


def _split_top(text: str) -> list[str]:
    parts, depth, current = [], 0, ""
    for ch in text:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        if ch in ", " and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += ch
    parts.append(current)
    return parts


def _expand_one(item: str, whole: str) -> list[str]:
    start = item.find("[")
    if start < 0:
        if "]" in item:
            raise _bad(whole)
        return [item]
    end = item.find("]", start)
    if end < 0:
        raise _bad(whole)
    prefix, body, rest = item[:start], item[start + 1:end], item[end + 1:]
    tails = _expand_one(rest, whole) if rest else [""]
    out = []
    for piece in body.split(","):
        m = _RANGE.match(piece.strip())
        if not m:
            raise _bad(whole)
        lo, hi = m["lo"], m["hi"] or m["lo"]
        if int(hi) < int(lo) or int(hi) - int(lo) > 100_000:
            raise _bad(whole)
        for value in range(int(lo), int(hi) + 1):
            out += [f"{prefix}{value:0{len(lo)}d}{tail}" for tail in tails]
    return out


def _bad(hostlist: str) -> InputError:
    return InputError(f"'{hostlist}' is not a Slurm hostlist expression", code="INVALID_HOSTLIST",
                      remedy="pass node names as slurmctld does, e.g. demo-d000-[0001-0004]")


def locate(all_domains: list[Domain], names: Iterable[str]) -> dict[int, list[str]]:
    """The requested names by domain index; a name this cluster does not define is an error."""
    where = {n: d.index for d in all_domains for n in d.names}
    out: dict[int, list[str]] = {}
    unknown = []
    for name in names:
        if name not in where:
            unknown.append(name)
        elif name not in out.setdefault(where[name], []):
            out[where[name]].append(name)
    if unknown:
        shown = ", ".join(unknown[:5]) + (", ..." if len(unknown) > 5 else "")
        raise InputError(f"{len(unknown)} node name(s) are not CLOUD nodes of this cluster: {shown}",
                         code="UNKNOWN_SLURM_NODE",
                         remedy="regenerate the slurm.conf fragment with 'provision slurm config' (its -f the same "
                                "cluster file the power-saving programs use)")
    return {k: out[k] for k in sorted(out) if out[k]}
