"""The certification levels, what each stage costs in time, and what a level costs before it runs.

quick: the gate, `dcgmi diag -r 1`, nvbandwidth, the InfiniBand loopback, one round of pairs, one
all_reduce at 8 GiB. standard: `-r 2`, a 120 s thermal run (the length Microsoft's thermal test
samples, T-thermal), two rounds of pairs, all_reduce and all_to_all swept 8 to 16 GiB (Microsoft's
baselines assume 16 GiB, R-aia). extended: `-r 3` (about 15 minutes), a 900 s thermal run (R-aia's
thermal_test.md), four rounds of pairs. On NVL72 sizes every level adds each rack's multi-node NVLink
all_reduce.

Durations: DCGM's are NVIDIA's ("-r 1 ... seconds", "-r 2 ... approximately two minutes", "-r 3 ...
approximately 15 minutes", T-dcgm-diag); the gate's is AzNHC's "~5-8 minutes" (Azure/azurehpc-health-
checks distributed_nhc/README.md); a Run Command takes about 20 s at the least (Learn linux/run-command),
which every step and every page of output pays. The others are azgpu's estimates, marked so.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

RUN_COMMAND = 20.0  # seconds a Run Command takes at the least (Learn, linux/run-command)


@dataclass(frozen=True)
class Level:
    name: str
    dcgm: int
    thermal_seconds: int
    pair_rounds: int
    ops: tuple[str, ...]
    min_bytes: str
    max_bytes: str


LEVELS = {
    "quick": Level("quick", 1, 0, 1, ("all_reduce",), "8G", "8G"),
    "standard": Level("standard", 2, 120, 2, ("all_reduce", "alltoall"), "8G", "16G"),
    "extended": Level("extended", 3, 900, 4, ("all_reduce", "alltoall"), "1G", "16G"),
}

# (seconds, where the figure comes from)
DURATIONS = {
    "gate": (480.0, "AzNHC takes about 5-8 minutes (azurehpc-health-checks distributed_nhc/README.md)"),
    "dcgm-1": (60.0, "seconds (NVIDIA, dcgmi diag -r 1), with the tool's start"),
    "dcgm-2": (120.0, "about two minutes (NVIDIA, dcgmi diag -r 2)"),
    "dcgm-3": (900.0, "about 15 minutes (NVIDIA, dcgmi diag -r 3)"),
    "nvbandwidth": (60.0, "azgpu's estimate: three copy testcases"),
    "loopback": (90.0, "azgpu's estimate: mpirun start and 20 iterations of 8-16 GiB"),
    "pairs": (40.0, "azgpu's estimate: every port at once, -D 5 each, a server's start"),
    "collective": (90.0, "azgpu's estimate: mpirun start and 20 iterations at each size"),
}


def level(name: str) -> Level:
    from ..errors import InputError

    if not isinstance(name, str) or name not in LEVELS:
        raise InputError(f"--level {ascii(name)[:80]} is not a certification level", code="INVALID_CERTIFY_LEVEL",
                         remedy=f"use one of {', '.join(LEVELS)}")
    return LEVELS[name]


@dataclass(frozen=True)
class Estimate:
    level: str
    nodes: int
    gpus_per_node: int
    seconds: float
    stages: tuple[tuple[str, float, str], ...]
    localisation_seconds: float  # what a collective below its band adds, at most

    @property
    def gpu_hours(self) -> float:
        return self.nodes * self.gpus_per_node * self.seconds / 3600


def estimate(level_name: str, nodes: int, gpus_per_node: int, *, racks: int = 0, parallel: int = 100) -> Estimate:
    """The expected duration of a level on a cluster of this many nodes, stage by stage (nothing runs)."""
    lv = level(level_name)
    waves = max(1, math.ceil(nodes / max(1, parallel)))
    stages: list[tuple[str, float, str]] = []

    def add(name: str, key: str, runs: int = 1, extra: float = 0.0, every: bool = True) -> None:
        seconds, why = DURATIONS[key]
        stages.append((name, round(runs * ((seconds + extra) * (waves if every else 1) + RUN_COMMAND), 1), why))

    add("gate (AzNHC)", "gate")
    add(f"dcgmi diag -r {lv.dcgm}", f"dcgm-{lv.dcgm}")
    if lv.thermal_seconds:
        stages.append((f"thermal ({lv.thermal_seconds} s under load)",
                       round(waves * (lv.thermal_seconds + 30) + RUN_COMMAND, 1), "the load's length, and its start"))
    add("nvbandwidth", "nvbandwidth")
    add("InfiniBand loopback", "loopback")
    if nodes > 1:
        add(f"pairs x {lv.pair_rounds} + confirmation", "pairs", runs=lv.pair_rounds + 1, every=False)
        add(f"collectives ({', '.join(lv.ops)})", "collective", runs=len(lv.ops), every=False)
    if racks:
        add("rack NVLink all_reduce", "collective", every=False)
    rounds = math.ceil(math.log2(max(2, nodes))) + 2
    local = rounds * (DURATIONS["collective"][0] + RUN_COMMAND)
    return Estimate(lv.name, nodes, gpus_per_node, round(sum(s for _, s, _ in stages), 1), tuple(stages), local)
