"""Why a GPU's clocks are held down: `nvidia-smi -q -d PERFORMANCE` (or the same block of `nvidia-smi -q`), read.

Per GPU (`GPU 00000000:00:06.0`) the driver lists its "Clocks Event Reasons" (older drivers: "Clocks
Throttle Reasons") as `HW Slowdown : Not Active`, `HW Thermal Slowdown : Active` ..., and, in newer
drivers, "Clocks Event Reasons Counters" in microseconds since boot (`HW Thermal Slowdown : 0 us`),
as a real H100 prints them (tests/fixtures/health/h100-nvidia-smi-q.txt). The thermal run samples this
while every GPU is under load: a GPU with HW Slowdown or HW Thermal Slowdown active, or whose thermal
counters grew during the run, throttled (the check Microsoft's thermal test describes, T-thermal; AzNHC's
check_gpu_clock_throttling reads the same reasons).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .bounded import OutputError, integer, lines_of, printable

MAX_GPUS = 1024
THROTTLING = ("HW Slowdown", "HW Thermal Slowdown", "SW Thermal Slowdown", "HW Power Brake Slowdown")
THERMAL = ("HW Thermal Slowdown", "SW Thermal Slowdown")
_GPU = re.compile(r"^GPU ([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])\s*$")
_FIELD = re.compile(r"^\s+([A-Za-z][A-Za-z ]{1,60}?)\s*:\s*(.*)$")


@dataclass
class GpuClocks:
    bus: str
    reasons: dict[str, bool] = field(default_factory=dict)  # reason -> active
    counters_us: dict[str, int] = field(default_factory=dict)

    @property
    def slowdown(self) -> list[str]:
        return [r for r in THROTTLING if self.reasons.get(r)]


def parse(text: object, what: str = "nvidia-smi -q -d PERFORMANCE") -> dict[str, GpuClocks]:
    """Each GPU's clocks event reasons by PCI bus id (as nvidia-smi writes it, 00000000:00:06.0)."""
    gpus: dict[str, GpuClocks] = {}
    current: GpuClocks | None = None
    block = None
    for n, line in enumerate(lines_of(text, what), 1):
        if m := _GPU.match(line):
            if len(gpus) >= MAX_GPUS:
                raise OutputError(f"{what}: more than {MAX_GPUS} GPUs")
            current = gpus.setdefault(m.group(1).upper(), GpuClocks(m.group(1).upper()))
            block = None
            continue
        if current is None:
            continue
        stripped = line.strip()
        if stripped in ("Clocks Event Reasons", "Clocks Throttle Reasons"):
            block = "reasons"
            continue
        if stripped in ("Clocks Event Reasons Counters", "Clocks Throttle Reasons Counters"):
            block = "counters"
            continue
        m = _FIELD.match(line)
        if not m or not line.startswith("        "):
            if line.startswith("    ") and not line.startswith("        "):
                block = None  # another section of the GPU
            continue
        name, value = m.group(1).strip(), m.group(2).strip()
        if block == "reasons" and value in ("Active", "Not Active"):
            current.reasons[printable(name, 60)] = value == "Active"
        elif block == "counters" and (c := re.fullmatch(r"(\d{1,18}) us", value)):
            current.counters_us[printable(name, 60)] = integer(c.group(1), f"{what}, line {n}")
    if not gpus:
        raise OutputError(f"{what}: no GPU section")
    return gpus
