"""How long a certification took, stage by stage, and the critical path through it.

The stages run one after another; inside a stage every node (or every job of a round) runs at once,
in waves when there are more nodes than Run Commands in flight. A stage lasts as long as its slowest
step, as each node measured it on its own clock (the `seconds` of its verdict), plus the Run Commands
that carried it there and back (about 20 s each at the least: one per step and one per page of output).
The critical path names the slowest step of each stage. This is a small clock of its own, kept apart
from the fake's so that it can join the fake's virtual time later.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from .levels import RUN_COMMAND
from .runner import Output


@dataclass(frozen=True)
class Stage:
    name: str
    seconds: float
    slowest: str
    steps: int

    def as_dict(self) -> dict:
        return {"stage": self.name, "seconds": round(self.seconds, 1), "slowest": self.slowest, "steps": self.steps}


@dataclass
class Timeline:
    parallel: int = 100
    stages: list[Stage] = field(default_factory=list)

    def add(self, name: str, outputs: Mapping[str, Output] | Sequence[tuple[str, Output]]) -> Stage:
        items = list(outputs.items()) if isinstance(outputs, Mapping) else list(outputs)
        if not items:
            stage = Stage(name, 0.0, "", 0)
        else:
            waves = max(1, math.ceil(len(items) / max(1, self.parallel)))
            cost = {key: o.seconds + max(1, o.pages) * RUN_COMMAND for key, o in items}
            slowest = max(cost, key=cost.get)
            stage = Stage(name, waves * cost[slowest], slowest, len(items))
        self.stages.append(stage)
        return stage

    def add_seconds(self, name: str, seconds: float, slowest: str = "", steps: int = 1) -> Stage:
        stage = Stage(name, seconds, slowest, steps)
        self.stages.append(stage)
        return stage

    @property
    def total(self) -> float:
        return sum(s.seconds for s in self.stages)

    def as_dict(self) -> dict:
        return {"seconds": round(self.total, 1), "minutes": round(self.total / 60, 1),
                "critical_path": [s.as_dict() for s in self.stages if s.steps]}
