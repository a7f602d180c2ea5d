"""A node's health as azgpu reports it: the types the parser (results.py), the gate, Guest Health Reporting and
certification share. Only data and how it prints; reading a node's verdict is results.py's, and a failure's
impact category is impact.py's (which reads these types and nothing else of azgpu's)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from .impact import impact_category

PASSED, FAILED, INCONCLUSIVE, UNREACHABLE = "passed", "failed", "inconclusive", "unreachable"
STATUSES = (PASSED, FAILED, INCONCLUSIVE, UNREACHABLE)

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
        out = {"check": self.check, "kind": self.kind, "message": self.message, "expected": self.expected,
               "measured": self.measured, "fault_code": self.fault_code, "xid": self.xid,
               "gpus": [g.as_dict() for g in self.gpus], "port": self.port,
               "impact_category": impact_category(self)}
        return out

    def summary(self) -> str:
        values = ", ".join(p for p in (f"expected {self.expected}" if self.expected else "",
                                       f"measured {self.measured}" if self.measured else "") if p)
        if not values:
            # AzNHC's message starts with the check and ends with its fault code: each said once.
            values = re.sub(rf"^{re.escape(self.check)}:\s*", "", self.message.strip())
            values = re.sub(r"\.?\s*[Ff]aul[te][Cc]ode:\s*\S+\s*$", "", values)
        code = f" ({self.fault_code})" if self.fault_code else ""
        return f"{self.check}: {values}{code}"


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
    # unreachable: timeout | conflict | no_verdict | run_command_failed | not_running | no_outbound;
    # inconclusive: setup | watchdog | aznhc_timeout | image | invalid_verdict | common | not_run (a check
    # could not run) | unconfirmed (a finding the image could cause, not yet seen to pass on a second host) |
    # rack_identity (its NVLink domain disagrees with Azure's rack or with the other nodes)
    reason_code: str | None = None
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
    # GB racks: {"clusterUuid", "cliqueId", "state", "status", "complete"} (None on sizes without a fabric)
    fabric: dict[str, Any] | None = None
    dropped: dict[str, int] | None = None  # per fault code (or check) counts of findings left out
    # Other nodes of the check that name the same physical host: one of them at least is not telling the
    # truth, so neither is reported to Guest Health Reporting.
    shared_host: tuple[str, ...] = ()

    @property
    def passed(self) -> bool:
        return self.status == PASSED

    def summary(self) -> str:
        if self.status == UNREACHABLE:
            return self.reason
        if self.status == PASSED:
            return f"passed ({self.checker})"
        if self.status == INCONCLUSIVE:
            return self.reason
        more = f"; {self.more_failures} more" if self.more_failures else ""
        if self.more_failures and self.dropped:
            more += " (" + ", ".join(f"{k}: {n}" for k, n in self.dropped.items()) + ")"
        # One line per distinct finding: the same fault on every GPU of a node is said once, with its count.
        counts: dict[str, int] = {}
        for f in self.failures:
            counts[f.summary()] = counts.get(f.summary(), 0) + 1
        return "; ".join(text if n == 1 else f"{text}, {n} times" for text, n in counts.items()) + more

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
            "fabric": self.fabric, "dropped": self.dropped or {}, "shared_host": list(self.shared_host),
        }
