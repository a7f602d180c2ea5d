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

# ASCII digits only: Python's \d also takes other scripts' digits ('１２' is full-width), which Slurm's
# hostlist.c (isdigit in the C locale) does not.
_RANGE = re.compile(r"^(?P<lo>[0-9]+)(?:-(?P<hi>[0-9]+))?$", re.ASCII)
# Bounds of one expression, checked before a single name is made: its text, and the names it stands for
# (the product of every bracket's count, summed over its comma-separated items). slurmctld hands a
# program at most the nodes of slurm.conf; azgpu's clusters hold at most a few thousand names.
MAX_TEXT = 65536
MAX_NAMES = 100_000


@dataclass(frozen=True)
class Domain:
    index: int
    scale_set: str  # the azgpu scale set that holds these names
    capacity: int  # Slurm names (the scale set's most nodes)
    names: tuple[str, ...]

    @property
    def hostlist(self) -> str:
        return compress(self.names)

    def slots(self, per_rack: int) -> list[tuple[str, ...]]:
        """The names of each rack-scale NVLink domain (a block of topology/block): the first `per_rack`
        names, the next `per_rack`, ... Whichever measured rack carries one name of a slot carries
        all of its names, so a job of a block's size lands in one rack."""
        return [self.names[i:i + per_rack] for i in range(0, len(self.names), per_rack)]


def node_name(cluster: str, index: int, number: int) -> str:
    return f"{cluster}-d{index:03d}-{number:04d}"


def domains(spec) -> list[Domain]:
    """One Domain per scale set of the validated cluster (its most nodes: the cluster file's `nodes`)."""
    names = spec.names
    return [Domain(i, names.vmss(i), capacity, tuple(node_name(names.cluster, i, n) for n in range(1, capacity + 1)))
            for i, capacity in enumerate(spec.scale_sets)]


def expand(hostlist: str) -> list[str]:
    """Slurm's hostlist expression as names, in order (`a[1-3,7],b` -> a1 a2 a3 a7 b); the width of
    a range's first number is kept, as Slurm does (src/common/hostlist.c). An expression of more
    than MAX_NAMES names is refused before any is made (`x[0-99999][0-99999]` is 10^10)."""
    if len(hostlist) > MAX_TEXT:
        raise _bad(hostlist[:80] + "...", f"longer than {MAX_TEXT} characters")
    items = [_parse(item, hostlist) for item in _split_top(hostlist.strip()) if item]
    total = 0
    for segments in items:
        count = 1
        for part in segments:
            count *= len(part) if isinstance(part, _Bracket) else 1
        total += count
        if total > MAX_NAMES:
            raise _bad(hostlist, f"it stands for more than {MAX_NAMES} names")
    out: list[str] = []
    for segments in items:
        out += _names(segments)
    return out


def _split_top(text: str) -> list[str]:
    parts, depth, current = [], 0, []
    for ch in text:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        if ch in ", " and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    parts.append("".join(current))
    return parts


def _parse(item: str, whole: str) -> list:
    """An item as its literal texts and its brackets, in order."""
    segments: list = []
    rest = item
    while rest:
        start = rest.find("[")
        if start < 0:
            if "]" in rest:
                raise _bad(whole)
            segments.append(rest)
            break
        end = rest.find("]", start)
        if end < 0 or "[" in rest[start + 1:end] or "]" in rest[:start]:
            raise _bad(whole)
        segments.append(rest[:start])
        numbers: list[tuple[int, int]] = []
        count = 0
        for piece in rest[start + 1:end].split(","):
            m = _RANGE.match(piece.strip())
            if not m:
                raise _bad(whole)
            lo, hi = int(m["lo"]), int(m["hi"] or m["lo"])
            if hi < lo:
                raise _bad(whole)
            count += hi - lo + 1
            if count > MAX_NAMES:
                raise _bad(whole, f"it stands for more than {MAX_NAMES} names")
            numbers.append((lo, hi, len(m["lo"])))
        segments.append(_Bracket(numbers))
        rest = rest[end + 1:]
    return segments


class _Bracket:
    """One bracket's numbers: (first, last, width of the first as written) per comma part."""

    def __init__(self, parts: list[tuple[int, int, int]]):
        self.parts = parts

    def __len__(self) -> int:
        return sum(hi - lo + 1 for lo, hi, _ in self.parts)

    def texts(self) -> list[str]:
        return [f"{value:0{width}d}" for lo, hi, width in self.parts for value in range(lo, hi + 1)]


def _names(segments: list) -> list[str]:
    out = [""]
    for part in segments:
        texts = part.texts() if isinstance(part, _Bracket) else [part]
        out = [head + text for head in out for text in texts]
    return out


def _bad(hostlist: str, why: str = "") -> InputError:
    shown = hostlist if len(hostlist) <= 200 else hostlist[:200] + "..."
    return InputError(f"'{shown}' is not a Slurm hostlist expression" + (f": {why}" if why else ""),
                      code="INVALID_HOSTLIST",
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
                         remedy="regenerate the slurm.conf fragment with 'provision slurm config -f CLUSTER_FILE' "
                                "from the same cluster file the power-saving programs use")
    return {k: out[k] for k in sorted(out) if out[k]}
