"""Fleet-relative outliers: a node within the floor but far below its peers is named.

Microsoft's ai-infrastructure-on-azure (skills/ai-infra/references/outlier_detection.md, R-aia) gives
the robust variant of the z-score for small fleets or fleets with known bad nodes:
modified_z = 0.6745 * (x - median) / MAD, MAD = median(|x - median|), flagged below -2.0. Measurements
of healthy hardware scatter by well under a percent, so a MAD of almost nothing would flag a node
0.5 % below the median: a node is named only when it is also at least MIN_DROP below the median
(the same document's deviation-from-expected method warns at 3.5 %; azgpu asks for 5 %).
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from dataclasses import dataclass

Z = 0.6745
THRESHOLD = -2.0
MIN_DROP = 0.05
MIN_FLEET = 4  # fewer values say nothing about a fleet


@dataclass(frozen=True)
class Outlier:
    key: str
    value: float
    median: float
    z: float | None  # None where MAD is 0 (every other value the same)
    drop: float  # share below the median

    def as_dict(self) -> dict:
        return {"key": self.key, "value": round(self.value, 3), "median": round(self.median, 3),
                "robust_z": None if self.z is None else round(self.z, 2), "below_median": round(self.drop, 4)}


def robust_z(values: Mapping[str, float]) -> dict[str, float | None]:
    """Each value's modified z-score (None for all when MAD is 0)."""
    xs = list(values.values())
    median = statistics.median(xs)
    mad = statistics.median(abs(x - median) for x in xs)
    return {k: (Z * (x - median) / mad if mad > 0 else None) for k, x in values.items()}


def outliers(values: Mapping[str, float], *, threshold: float = THRESHOLD, min_drop: float = MIN_DROP) -> list[Outlier]:
    """The values far below their peers, lowest first."""
    if len(values) < MIN_FLEET:
        return []
    median = statistics.median(values.values())
    if median <= 0:
        return []
    zs = robust_z(values)
    out = []
    for key, value in values.items():
        drop = (median - value) / median
        z = zs[key]
        if drop >= min_drop and (z is None or z < threshold):
            out.append(Outlier(key, value, median, z, drop))
    return sorted(out, key=lambda o: o.value)
