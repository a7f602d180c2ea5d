"""Slurm hostlist expressions (`c1-000-[000000-000009]`) built from lists of host names.

Slurm reads a name as a prefix and its trailing decimal digits, and a bracketed range keeps the
width of its first number: `n[08-10]` is n08 n09 n10, `n[9-10]` is n9 n10 (slurm.conf(5),
"NodeName"; src/common/hostlist.c). Azure names scale-set instances with the computer-name prefix
and six base-36 digits (`c1-000-000009`, then `c1-000-00000a`), so a name ending in a letter has no
number for Slurm and stands alone, and `c1-000-000010` (instance 36) is number 10, not the
successor of `c1-000-000009` in instance order.

`compress` keeps the order it is given (NodeName and NodeAddr are paired by position, so the two
lists must expand in the same order) and only joins neighbours, as Slurm's own
`scontrol show hostlist` does; `compress(..., sort=True)` sorts first, for lists whose order does
not matter (partitions, switches, blocks). Libraries such as python-hostlist or ClusterShell sort
and deduplicate, which would break the NodeName/NodeAddr pairing, hence this small module.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

_NUMBERED = re.compile(r"^(?P<prefix>.*?)(?P<digits>\d+)$")


@dataclass(frozen=True)
class _Name:
    prefix: str
    digits: str  # "" for a name without trailing digits

    @property
    def text(self) -> str:
        return self.prefix + self.digits


def _split(name: str) -> _Name:
    if any(c in name for c in "[],"):
        raise ValueError(f"host name {name!r} contains a character of hostlist syntax")
    match = _NUMBERED.match(name)
    return _Name(match["prefix"], match["digits"]) if match else _Name(name, "")


def _continues(lo: str, previous: str, digits: str) -> bool:
    """Whether `digits` extends the range starting at `lo` that ends at `previous`: the next number,
    written at the range's width as Slurm writes it (`%0*lu` with the width of the first number)."""
    value = int(previous) + 1
    return int(digits) == value and f"{value:0{len(lo)}d}" == digits


def _sort_key(name: _Name) -> tuple:
    return (name.prefix, name.digits == "", int(name.digits) if name.digits else 0, len(name.digits))


def compress(names: Iterable[str], *, sort: bool = False) -> str:
    """One hostlist expression that Slurm expands to exactly `names`, in that order."""
    parsed = [_split(n) for n in names]
    if sort:
        parsed.sort(key=_sort_key)
    groups: list[tuple[str, list[list[str]]]] = []  # (prefix, ranges as [lo, ..., hi] digit strings)
    plain: list[str | None] = []  # a name without digits, or None where groups holds the entry
    for name in parsed:
        if not name.digits:
            plain.append(name.text)
            continue
        if plain and plain[-1] is None and groups[-1][0] == name.prefix:
            ranges = groups[-1][1]
            last = ranges[-1]
            if _continues(last[0], last[-1], name.digits):
                last.append(name.digits)
            else:
                ranges.append([name.digits])
            continue
        groups.append((name.prefix, [[name.digits]]))
        plain.append(None)
    out, group = [], iter(groups)
    for entry in plain:
        if entry is not None:
            out.append(entry)
            continue
        prefix, ranges = next(group)
        if len(ranges) == 1 and len(ranges[0]) == 1:
            out.append(prefix + ranges[0][0])
        else:
            out.append(prefix + "[" + ",".join(r[0] if len(r) == 1 else f"{r[0]}-{r[-1]}" for r in ranges) + "]")
    return ",".join(out)
