"""A node's health as azgpu reports it, and how it is read out of a Run Command result.

Status: `passed`, `failed` (the node answered and a check failed), or `unreachable` (no verdict came
back: timed out, another Run Command in progress, the operation failed, no outbound path, VM not
running). Every failure keeps what a later Guest Health Reporting step needs without a second run on
the node: the check, a stable finding kind, the message, expected and measured values, AzNHC's fault
code when it printed one, the Xid, and the GPUs concerned (PCI bus id, serial number); the node keeps
its physical host name (KVP pool 3), VM id and full resource id.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from .script import VERDICT_VERSION

PASSED, FAILED, UNREACHABLE = "passed", "failed", "unreachable"

# Stable finding kinds of AzNHC checks (customTests/*.nhc and LBNL NHC's check_hw_*, R-nhc-tests,
# R-lbnl-nhc); the fallback writes its kind itself. Anything else is kind "aznhc".
AZNHC_KINDS = {
    "check_gpu_count": "missing_gpu",
    "check_gpu_xid": "xid",
    "check_nvsmi_healthmon": "nvidia_smi",
    "check_gpu_persistence": "nvidia_smi",
    "check_nvlink_status": "nvlink",
    "check_gpu_ecc": "gpu_ecc",
    "check_gpu_bw": "gpu_bandwidth",
    "check_gpu_clock_throttling": "gpu_clocks",
    "check_app_gpu_clocks": "gpu_clocks",
    "check_gpu_vbios": "gpu_vbios",
    "check_gpu_xgmi": "gpu_interconnect",
    "check_hw_ib": "ib_port_down",
    "check_ib_link_flapping": "ib_port_flapping",
    "check_ib_bw_gdr": "ib_bandwidth",
    "check_ib_bw_non_gdr": "ib_bandwidth",
    "check_nccl_allreduce_ib_loopback": "ib_bandwidth",
    "check_nccl_allreduce": "nccl_bandwidth",
    "check_rccl_allreduce": "nccl_bandwidth",
    "check_nvme_count": "nvme",
    "check_hw_topology": "topology",
    "check_cpu_stream": "cpu_performance",
    "check_all_reduce_dependencies": "aznhc_setup",
}


@dataclass(frozen=True)
class GpuRef:
    bus: str  # PCI bus id as sysfs writes it, e.g. 0001:00:00.0
    serial: str = ""

    def as_dict(self) -> dict[str, str]:
        return {"bus": self.bus, "serial": self.serial}


@dataclass(frozen=True)
class Failure:
    check: str  # AzNHC's check (check_gpu_count ...) or the fallback's (gpu_count, ib_port, xid ...)
    kind: str  # stable: missing_gpu, ib_port_down, ib_port_rate, ib_missing, xid, nvidia_smi_hang, nvlink ...
    message: str
    expected: str | None = None
    measured: str | None = None
    fault_code: str | None = None  # AzNHC's FaultCode: NHC2001 ... NHC2023, or NHCNA (the check's own set-up)
    xid: int | None = None
    gpus: tuple[GpuRef, ...] = ()
    port: str | None = None  # InfiniBand device:port, e.g. mlx5_ib3:1

    def as_dict(self) -> dict[str, Any]:
        from .impact import impact_category

        out = {"check": self.check, "kind": self.kind, "message": self.message, "expected": self.expected,
               "measured": self.measured, "fault_code": self.fault_code, "xid": self.xid,
               "gpus": [g.as_dict() for g in self.gpus], "port": self.port,
               "impact_category": impact_category(self)}
        return out

    def summary(self) -> str:
        values = ", ".join(p for p in (f"expected {self.expected}" if self.expected else "",
                                       f"measured {self.measured}" if self.measured else "") if p)
        code = f" {self.fault_code}" if self.fault_code else ""
        return f"{self.check}: {values or self.message}{code}"


@dataclass(frozen=True)
class NodeResult:
    scale_set: str
    instance_id: str
    resource_id: str
    computer_name: str
    status: str  # passed | failed | unreachable
    checker: str | None = None  # aznhc | fallback (None when unreachable)
    failures: tuple[Failure, ...] = ()
    more_failures: int = 0  # failures the node found but left out to fit Run Command's 4 KB
    reason_code: str | None = None  # unreachable: timeout | conflict | no_verdict | run_command_failed | not_running
    reason: str = ""
    physical_host: str | None = None
    vm_id: str | None = None  # ARM's vmId of the instance
    node_vm_id: str | None = None  # what the node read (IMDS compute.vmId, or SMBIOS when IMDS failed)
    node_vm_id_source: str | None = None
    vm_size: str | None = None
    aznhc: str | None = None  # ran | unsupported | missing | failed | timeout
    aznhc_error: str | None = None
    gpus_found: int | None = None
    ib_ports_found: int | None = None
    gpus: tuple[GpuRef, ...] = ()  # the GPUs the node lists, when a GPU check failed
    log: str | None = None  # the full log on the node
    seconds: int | None = None

    @property
    def passed(self) -> bool:
        return self.status == PASSED

    def summary(self) -> str:
        if self.status == UNREACHABLE:
            return self.reason
        if self.status == PASSED:
            return f"passed ({self.checker})"
        more = f"; {self.more_failures} more" if self.more_failures else ""
        return "; ".join(f.summary() for f in self.failures) + more

    def as_dict(self) -> dict[str, Any]:
        return {
            "scale_set": self.scale_set, "instance_id": self.instance_id, "computer_name": self.computer_name,
            "status": self.status, "checker": self.checker, "summary": self.summary(),
            "resource_id": self.resource_id, "physical_host": self.physical_host, "vm_id": self.vm_id,
            "node_vm_id": self.node_vm_id, "node_vm_id_source": self.node_vm_id_source, "vm_size": self.vm_size,
            "aznhc": self.aznhc, "aznhc_error": self.aznhc_error, "gpus_found": self.gpus_found,
            "ib_ports_found": self.ib_ports_found, "failures": [f.as_dict() for f in self.failures],
            "more_failures": self.more_failures, "gpus": [g.as_dict() for g in self.gpus],
            "reason_code": self.reason_code, "reason": self.reason, "log": self.log, "seconds": self.seconds,
        }


# ------------------------------------------------------------------------------ Run Command output


def output_streams(result: Any) -> tuple[str, str]:
    """(stdout, stderr) of a Run Command result: the SDK model or its REST dict.

    Linux answers one status whose message is "Enable succeeded: \\n[stdout]\\n...\\n[stderr]\\n..."
    (run-command-extension-linux main/cmds.go, azure-cli#32286); the REST spec's example shows the
    Windows shape, one ComponentStatus/StdOut and one ComponentStatus/StdErr status (S-rc).
    """
    statuses = result.get("value") if isinstance(result, dict) else getattr(result, "value", None)
    out, err = [], []
    for status in statuses or []:
        code = _field(status, "code") or ""
        message = _field(status, "message") or ""
        if "/StdOut/" in code:
            out.append(message)
        elif "/StdErr/" in code:
            err.append(message)
        else:
            stdout, stderr = _split_linux(message)
            out.append(stdout)
            err.append(stderr)
    return "\n".join(out), "\n".join(err)


def _field(obj: Any, name: str) -> Any:
    return obj.get(name) if isinstance(obj, dict) else getattr(obj, name, None)


_LINUX = re.compile(r"\[stdout\]\n(?P<out>.*?)\n\[stderr\]\n(?P<err>.*)\Z", re.S)


def _split_linux(message: str) -> tuple[str, str]:
    match = _LINUX.search(message)
    if match is None:
        return message, ""
    return match.group("out"), match.group("err")


class VerdictError(ValueError):
    """A verdict line that azgpu cannot read (another version, or broken)."""


def find_verdict(stdout: str) -> dict[str, Any] | None:
    """The last line of stdout that is azgpu's verdict, or None when there is none.

    Run Command keeps only the last 4 KB, so only the end of stdout is trusted; a line cut at its
    start by that tail does not parse and does not count.
    """
    for line in reversed(stdout.splitlines()):
        line = line.strip()
        if not line.startswith('{"azgpu_health"'):
            continue
        try:
            data = json.loads(line)
        except ValueError:
            continue
        if not isinstance(data, dict):
            continue
        if data.get("azgpu_health") != VERDICT_VERSION:
            raise VerdictError(f"verdict version {data.get('azgpu_health')!r}, this azgpu reads "
                               f"{VERDICT_VERSION}")
        return data
    return None


def _gpus(items: Any) -> tuple[GpuRef, ...]:
    return tuple(GpuRef(str(g.get("bus") or ""), str(g.get("serial") or "")) for g in items or [] if isinstance(g, dict))


def failure_of(raw: dict[str, Any]) -> Failure:
    check = str(raw.get("check") or "aznhc")
    kind = str(raw.get("kind") or "") or _aznhc_kind(check, raw)
    xid = raw.get("xid")
    return Failure(check=check, kind=kind, message=str(raw.get("message") or ""),
                   expected=raw.get("expected") or None, measured=raw.get("measured") or None,
                   fault_code=raw.get("fault_code") or None, xid=int(xid) if isinstance(xid, (int, float)) else None,
                   gpus=_gpus(raw.get("gpus")), port=raw.get("port") or None)


def _aznhc_kind(check: str, raw: dict[str, Any]) -> str:
    kind = AZNHC_KINDS.get(check, "aznhc")
    if check == "check_hw_ib":
        measured = str(raw.get("measured") or "")
        if measured == "absent":
            return "ib_missing"
        if measured.startswith("ACTIVE LinkUp"):  # up, but not at the rate check_hw_ib wanted
            return "ib_port_rate"
    if raw.get("xid") is not None:
        return "xid"
    return kind
