"""Sandboxed nodes built from the real tool output in tests/fixtures/health (see its sources.toml).

Faulty variants are derived from real captures by the smallest edit that makes the fault: an 8-GPU
`nvidia-smi -q` is the real H100 section repeated with the bus ids of AzNHC's real 8-GPU sample and
serials counted up, and "7 of 8" drops the last section; a port Down or at a lower rate writes the
kernel's own sysfs formats (drivers/infiniband/core/sysfs.c); an Xid is a line in the NVIDIA
driver's format appended to the real kernel log.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from azgpu.health.results import find_verdict
from azgpu.health.script import script_lines
from azgpu.testing.node_sandbox import Sandbox

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "health"


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


def capture(name: str) -> tuple[str, int]:
    """A gpu-samples capture: (what the command printed, its exit code)."""
    lines = fixture(name).splitlines(keepends=True)
    assert lines[0].startswith("$ "), name
    code = int(re.fullmatch(r"\[exit (\d+)\]\s*", lines[-1]).group(1))
    return "".join(lines[1:-1]), code


def azure_gpu_buses() -> list[str]:
    """00000001:00:00.0 ... 00000008:00:00.0 from AzNHC's real 8-GPU sample."""
    return re.findall(r"^GPU ([0-9A-F]{8}:[0-9A-F]{2}:[0-9A-F]{2}\.[0-9A-F])$", fixture("aznhc-orig_nvsmi8_output.txt"),
                      re.M)


def sysfs_bus(bus: str) -> str:
    return bus.lower()[-12:]


def nvidia_q(present: int = 8, memory_mib: int | None = None) -> str:
    """nvidia-smi -q of an 8-GPU node with `present` GPUs listed (real H100 sections)."""
    body, _ = capture("h100-nvidia-smi-q.txt")
    head, sep, section = body.partition("GPU 00000000:00:06.0\n")
    assert sep
    head = re.sub(r"(Attached GPUs\s+: )1", lambda m: f"{m.group(1)}{present}", head)
    out = [head]
    for i, bus in enumerate(azure_gpu_buses()[:present]):
        text = (sep + section).replace("00000000:00:06.0", bus)
        text = text.replace("1753024030845", str(1753024030845 + i))
        if memory_mib is not None:
            text = text.replace("Total                                          : 81559 MiB",
                                f"Total                                          : {memory_mib} MiB")
        out.append(text)
    return "".join(out)


def xid_line(xid: int, pci: str = "0001:00:00", text: str = "GPU has fallen off the bus.") -> str:
    return f"[ 4242.123456] NVRM: Xid (PCI:{pci}): {xid}, pid=3141, name=python3, {text}\n"


class Node:
    """A sandboxed node; the defaults are a healthy 8 x H100 node with 8 NDR ports and no AzNHC."""

    def __init__(self, root: Path):
        self.box = Sandbox(root)
        self.box.tool("hostname", "nd-node-0\n")
        self.box.tool("curl", "", rc=7, cases=[("*compute/vmId*", "5f0a3c2e-1111-4c4c-9e9e-0123456789ab", 0),
                                                ("*compute/vmSize*", "Standard_ND96isr_H100_v5", 0)])
        self.box.kvp_pool(3, {"HostName": "AMS081063509028", "PhysicalHostName": "AMS081063509028",
                              "VirtualMachineName": "nd-vmss_0"})
        self.nvidia(nvidia_q(8))
        self.box.tool("dmesg", capture("h100-dmesg-xid.txt")[0])
        for bus in azure_gpu_buses():
            self.box.pci_device(sysfs_bus(bus), "0x10de", "0x030200")
        for i in range(8):
            self.box.ib_port(f"mlx5_ib{i}", rate="400 Gb/sec (4X NDR)")

    def nvidia(self, q: str, *, rc: int = 0, nvlink: str | None = None) -> None:
        nvlink = fixture("aznhc-good_nvlink_status.txt") if nvlink is None else nvlink
        self.box.tool("nvidia-smi", q, rc=rc, cases=[("nvlink -s", nvlink, 0), ("-q", q, rc)])

    def aznhc(self, log: str, *, rc: int = 0, stdout: str = "") -> None:
        """run-health-checks.sh that writes `log` to its -o file and prints stdout."""
        self.box.file("/tmp/aznhc-fixture.log", log)
        self.box.file("/tmp/aznhc-fixture.out", stdout)
        root = self.box.root
        self.box.script("run-health-checks.sh", f"""#!/bin/bash
OUT=./health.log
while [ $# -gt 0 ]; do [ "$1" = -o ] && OUT=$2; shift; done
cat {root}/tmp/aznhc-fixture.log >>"$OUT"
cat {root}/tmp/aznhc-fixture.out
exit {rc}
""", path="/opt/azurehpc/test/azurehpc-health-checks/run-health-checks.sh")

    def check(self, **settings) -> dict:
        base = {"AZGPU_EXPECT_GPUS": 8, "AZGPU_GPU_VENDOR": "nvidia", "AZGPU_GPU_MEMORY_MIB_MIN": 77824,
                "AZGPU_CHECK_NVLINK": 1, "AZGPU_EXPECT_IB_PORTS": 8, "AZGPU_EXPECT_IB_RATE": 400}
        return self.run("check", {**base, **settings})

    def run(self, mode: str, settings: dict) -> dict:
        ran = self.box.run(script_lines(mode, settings))
        assert ran.returncode == 0, ran.stderr
        verdict = find_verdict(ran.stdout)
        assert verdict is not None, (ran.stdout, ran.stderr)
        # The verdict is the last line and the only one: everything else went to the node's log.
        assert ran.stdout.strip().splitlines() == [json.dumps(verdict, separators=(",", ":"))] or \
            ran.stdout.strip().splitlines()[-1].startswith('{"azgpu_health"')
        return verdict


def kinds(verdict: dict) -> list[str]:
    return [f["kind"] or f["check"] for f in verdict["failures"]]
