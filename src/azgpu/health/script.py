"""What a node of a size is expected to show, and the Run Command body that checks it.

The script is azgpu/health/node_check.sh with its settings (AZGPU_*) written above it, sent as the
`script` lines of a RunShellScript action Run Command: no parameters, whose passing differs between
Run Command versions, and no file download, which would need the node's outbound path twice.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

MARKER = "# azgpu node health check, verdict version 1"
VERDICT_VERSION = 1
# The Xids AzNHC's check_gpu_xid fails a node on (customTests/azure_gpu_xid.nhc, R-nhc-tests), plus the
# ECC Xids 94 and 95 that Guest Health Reporting has categories for (D-ghr-cat).
FAULT_XIDS = (48, 56, 57, 58, 62, 63, 64, 65, 68, 69, 73, 74, 79, 80, 81, 92, 94, 95, 119, 120)
# A GPU shows a little less memory than documented (a real H100 80GB HBM3: 81559 MiB, 99.6 % of
# 80 GiB, gpu-samples/h100-80gb-hbm3): the fallback accepts down to this share of the documented size.
GPU_MEMORY_SHARE = 0.95
# AzNHC's -t is LBNL NHC's watchdog for the whole run, not a per-check limit (facts 14.2): it gets what is
# left of the node's time after the rest of the script (identity, the verdict, timeout(1)'s minute of
# grace behind it, and a margin for Run Command's own start), so its verdict still comes back in time.
AZNHC_RESERVE = 180
AZNHC_MIN = 60
_NAME = re.compile(r"AZGPU_[A-Z0-9_]+")


@cache
def node_script_text() -> str:
    return resources.files("azgpu.health").joinpath("node_check.sh").read_text(encoding="utf-8")


@dataclass(frozen=True)
class Expectations:
    """[sizes.health] of one size, as the node script takes it."""

    size: str
    gpus: int
    gpu_vendor: str
    gpu_memory_gib: float
    nvlink: bool
    ib_ports: int
    ib_rate_gbps: int
    aznhc_conf: str
    nccl_busbw_gbps: float
    fabric: bool = False  # GB racks: NVLink fabric state and IMEX on every node

    @classmethod
    def of(cls, size) -> Expectations:
        """From a profiles.Size; a size without GPUs expects none and checks no InfiniBand either."""
        h = size.health
        get = (lambda k, d=None: h.get(k, d)) if h is not None else (lambda k, d=None: d)
        return cls(size=size.name, gpus=int(get("gpus", 0)), gpu_vendor=get("gpu_vendor", "nvidia"),
                   gpu_memory_gib=float(get("gpu_memory_gib", 0) or 0), nvlink=bool(get("nvlink", False)),
                   ib_ports=int(get("ib_ports", 0)), ib_rate_gbps=int(get("ib_rate_gbps", 0)),
                   aznhc_conf=get("aznhc_conf", ""), nccl_busbw_gbps=float(get("nccl_busbw_gbps", 0) or 0),
                   fabric=bool(get("nvlink_fabric", _gb_family(size.name))))

    @property
    def gpu_memory_mib_min(self) -> int:
        return int(self.gpu_memory_gib * 1024 * GPU_MEMORY_SHARE)

    def settings(self) -> dict[str, Any]:
        return {
            "AZGPU_EXPECT_GPUS": self.gpus,
            "AZGPU_GPU_VENDOR": self.gpu_vendor,
            "AZGPU_GPU_MEMORY_MIB_MIN": self.gpu_memory_mib_min,
            "AZGPU_CHECK_NVLINK": int(self.nvlink),
            "AZGPU_EXPECT_IB_PORTS": self.ib_ports,
            "AZGPU_EXPECT_IB_RATE": self.ib_rate_gbps,
            "AZGPU_XIDS": " ".join(map(str, FAULT_XIDS)),
            "AZGPU_CHECK_FABRIC": int(self.fabric),
        }


def _gb_family(name: str) -> bool:
    """ND GB200 v6 and ND GB300 v6: GPUs joined across the rack by the NVLink fabric, which Microsoft's own
    image tests check on them (Azure/azhpc-images: verify_nvlink_setup, verify_nvidia_imex_service)."""
    return bool(re.search(r"_gb[23]00", name.lower()))


def aznhc_watchdog(node_timeout: float) -> int:
    """AzNHC's -t (the whole run's watchdog) for a node timeout."""
    return int(max(AZNHC_MIN, node_timeout - AZNHC_RESERVE))


def script_lines(mode: str, settings: dict[str, Any]) -> list[str]:
    """The `script` lines: a shebang (Run Command's extension runs script.sh as a file), the settings,
    then node_check.sh. Values are quoted for the shell; names must be AZGPU_*."""
    head = ["#!/bin/bash", MARKER, f"AZGPU_MODE={shlex.quote(mode)}"]
    for name, value in settings.items():
        if not _NAME.fullmatch(name):
            raise ValueError(f"not an AZGPU_* setting name: {name!r}")
        if value is None:
            continue
        head.append(f"{name}={shlex.quote(str(value))}")
    return head + node_script_text().splitlines()


def run_command_body(mode: str, settings: dict[str, Any]) -> dict[str, Any]:
    """The RunCommandInput body in REST shape (what the SDK sends as is)."""
    return {"commandId": "RunShellScript", "script": script_lines(mode, settings)}


def settings_of(script: list[str]) -> dict[str, str]:
    """The AZGPU_* settings written above node_check.sh in script lines (what the fake reads back)."""
    out: dict[str, str] = {}
    for line in script:
        if line.startswith("# azgpu's on-node health check"):
            break
        name, eq, value = line.partition("=")
        if eq and _NAME.fullmatch(name):
            parts = shlex.split(value) if value else [""]
            out[name] = parts[0] if parts else ""
    return out


def node_script(size_name: str, mode: str = "check", node_timeout: float | None = None,
                extra: dict[str, Any] | None = None) -> str:
    """The on-node check as one script, with the expectations of a size that a profile knows baked in,
    to run by hand (ssh, as root) or as a scheduler's health check; it prints the verdict line last.
    extra: more AZGPU_* settings (a Slurm node's AZGPU_IMEX_SERVICE). Raises azgpu.errors.InputError
    (UNKNOWN_SIZE) for a size no profile knows."""
    from ..profiles import find_size
    from .limits import NODE_TIMEOUT, check_options

    if node_timeout is not None:
        check_options(node_timeout=node_timeout)  # inf, nan, 0, -1: refused, never turned into 60
    size = find_size(size_name)[1]
    settings = {**Expectations.of(size).settings(),
                "AZGPU_AZNHC_TIMEOUT": aznhc_watchdog(NODE_TIMEOUT if node_timeout is None else node_timeout),
                **(extra or {})}
    return "\n".join(script_lines(mode, settings)) + "\n"
