"""A node's health as azgpu reports it, and how it is read out of a Run Command result.

Status: `passed`; `failed` (a host fault: a finding with a Guest Health Reporting category, the only
status ever replaced or reported); `inconclusive` (the node answered, but with only faults of the check's
own run: AzNHC's set-up faults (NHCNA) or its watchdog, a tool the image lacks, a verdict that does not
validate, or a finding every node shares); `unreachable` (no verdict came back: timed out, another Run
Command in progress, the operation failed, no outbound path, VM not running). What a node prints is
evidence about its own health only: its verdict is validated against a schema (types, lengths, finite
numbers, printable text), and the names shown and reported (computer name, instance id, size) are
Azure's, never the node's. Every failure keeps what a later Guest Health Reporting step needs without a second run on
the node: the check, a stable finding kind, the message, expected and measured values, AzNHC's fault
code when it printed one, the Xid, and the GPUs concerned (PCI bus id, serial number); the node keeps
its physical host name (KVP pool 3), VM id and full resource id.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ..bounded import BoundedError, loads
from .impact import could_be_image, impact_category

# The types live in model.py (what the gate, impact.py and Guest Health Reporting share); named here too for
# the callers that read a verdict and its types together.
from .model import FAILED, INCONCLUSIVE, PASSED, UNREACHABLE, Failure, GpuRef, NodeResult
from .model import STATUSES as STATUSES
from .script import VERDICT_VERSION

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


# ------------------------------------------------------------------------------ Run Command output


MAX_STATUSES = 64  # Run Command answers one status (Linux) or two (the spec's StdOut/StdErr shape)
MAX_MESSAGE = 1 << 20  # a status message holds at most the 4 KB tails of both streams, and some words


def output_streams(result: Any) -> tuple[str, str]:
    """(stdout, stderr) of a Run Command result: the SDK model or its REST dict.

    Linux answers one status whose message is "Enable succeeded: \\n[stdout]\\n...\\n[stderr]\\n..."
    (run-command-extension-linux main/cmds.go, azure-cli#32286); the REST spec's example shows the
    Windows shape, one ComponentStatus/StdOut and one ComponentStatus/StdErr status (S-rc).
    Whatever else the answer holds (a value that is no list, statuses that are no objects, codes or
    messages that are no text) is no output: the node then has no verdict, never a traceback.
    """
    statuses = result.get("value") if isinstance(result, dict) else getattr(result, "value", None)
    if not isinstance(statuses, (list, tuple)):
        statuses = []
    out, err = [], []
    for status in list(statuses)[:MAX_STATUSES]:
        code = _field(status, "code")
        message = _field(status, "message")
        code = code if isinstance(code, str) else ""
        message = message[:MAX_MESSAGE] if isinstance(message, str) else ""
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
    if isinstance(obj, dict):
        return obj.get(name)
    if isinstance(obj, (str, bytes, int, float, list, tuple)) or obj is None:
        return None
    return getattr(obj, name, None)


_LINUX = re.compile(r"\[stdout\]\n(?P<out>.*?)\n\[stderr\]\n(?P<err>.*)\Z", re.S)


def _split_linux(message: str) -> tuple[str, str]:
    match = _LINUX.search(message)
    if match is None:
        return message, ""
    return match.group("out"), match.group("err")


class VerdictError(ValueError):
    """A verdict line that azgpu cannot read (another version, or broken)."""


MAX_VERDICT = 16384  # a Run Command tail holds 4,096 bytes; a captured output judged by hand may hold more
# node_check.sh writes {"failures": [{"gpus": [{...}]}]}: five levels of objects and lists. Anything deeper
# is not a verdict (a line nested 1,500 arrays deep once ended the gate in RecursionError).
VERDICT_DEPTH = 5


def find_verdict(stdout: str) -> dict[str, Any] | None:
    """The last line of stdout that is azgpu's verdict, or None when there is none.

    Run Command keeps only the last 4 KB, so only the end of stdout is trusted; a line cut at its
    start by that tail does not parse and does not count. A line that is too long, nested too deep or
    holds NaN or Infinity raises VerdictError (bounded.loads: never RecursionError).
    """
    if not isinstance(stdout, str):
        return None
    for line in reversed(stdout.splitlines()):
        line = line.strip()
        if not line.startswith('{"azgpu_health"'):
            continue
        try:
            data = loads(line, max_bytes=MAX_VERDICT, max_depth=VERDICT_DEPTH, what="the verdict line")
        except BoundedError as exc:
            if exc.reason == "syntax":
                continue
            raise VerdictError(str(exc)) from None
        if not isinstance(data, dict):
            continue
        if data.get("azgpu_health") != VERDICT_VERSION:
            raise VerdictError(f"verdict version {data.get('azgpu_health')!r}, this azgpu reads "
                               f"{VERDICT_VERSION}")
        return data
    return None


def _gpus(items: Any) -> tuple[GpuRef, ...]:
    return tuple(GpuRef(str(g.get("bus") or ""), str(g.get("serial") or "")) for g in items or []
                 if isinstance(g, dict))


def failure_of(raw: dict[str, Any]) -> Failure:
    check = str(raw.get("check") or "aznhc")
    kind = str(raw.get("kind") or "") or _aznhc_kind(check, raw)
    xid = raw.get("xid")

    def text(key: str) -> str | None:
        value = raw.get(key)
        return str(value) if value not in (None, "") and not isinstance(value, (dict, list)) else None

    return Failure(check=check, kind=kind, message=str(raw.get("message") or ""),
                   expected=text("expected"), measured=text("measured"), fault_code=text("fault_code"),
                   xid=int(xid) if isinstance(xid, int) and not isinstance(xid, bool) else None,
                   gpus=_gpus(raw.get("gpus") if isinstance(raw.get("gpus"), list) else None), port=text("port"))


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


# ------------------------------------------------------------------------------ the verdict's schema

_TEXT = re.compile(r"[\x20-\x7e]*")  # the node script writes printable ASCII only (js in node_check.sh)
_STR, _INT, _NUM, _BOOL = "str", "int", "num", "bool"
_FAILURE = {"check": (_STR, 64), "kind": (_STR, 32), "message": (_STR, 400), "expected": (_STR, 120),
            "measured": (_STR, 120), "fault_code": (_STR, 16), "xid": (_INT, None), "gpus": ("gpus", 16),
            "port": (_STR, 40)}
_GPU = {"bus": (_STR, 16), "serial": (_STR, 32)}
_HOST = {"computer": (_STR, 64), "physical_host": (_STR, 64), "vm_id": (_STR, 40), "vm_id_source": (_STR, 16),
         "vm_size": (_STR, 48)}
_FABRIC = {"clusterUuid": (_STR, 64), "cliqueId": (_INT, None), "state": (_STR, 32), "status": (_STR, 32),
           "complete": (_BOOL, None)}
_VERDICT = {"azgpu_health": (_INT, None), "mode": (_STR, 16), "checker": (_STR, 16), "aznhc": (_STR, 16),
            "host": ("host", None), "aznhc_error": (_STR, 200), "aznhc_log": (_STR, 160), "gpus_found": (_INT, None),
            "ib_found": (_INT, None), "gpus": ("gpus", 64), "fabric": ("fabric", None), "failures": ("failures", 250),
            "more": (_INT, None), "dropped": ("dropped", 32), "log": (_STR, 160), "seconds": (_INT, None),
            "ok": (_BOOL, None), "pubkey": (_STR, 200), "error": (_STR, 400), "exit": (_INT, None),
            "ranks": (_INT, None), "size_bytes": (_INT, None), "busbw_gbps": (_NUM, None), "wrong": (_INT, None)}


def _name(key: Any) -> str:
    return ascii(str(key)[:40])


def _check_value(where: str, value: Any, kind: str, limit: int | None) -> None:
    if value is None:
        return  # every field may be null: the script writes null for what it could not read
    if kind == _STR:
        if not isinstance(value, str):
            raise VerdictError(f"{where} is {type(value).__name__}, not a string")
        if len(value) > (limit or 0):
            raise VerdictError(f"{where} is {len(value)} characters long (at most {limit})")
        if not _TEXT.fullmatch(value):
            raise VerdictError(f"{where} holds control or non-ASCII characters")
    elif kind == _INT:
        if isinstance(value, bool) or not isinstance(value, int) or not -2**53 <= value <= 2**53:
            raise VerdictError(f"{where} is not an integer")
    elif kind == _NUM:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value or abs(value) > 1e15:
            raise VerdictError(f"{where} is not a finite number")
    elif kind == _BOOL:
        if not isinstance(value, bool):
            raise VerdictError(f"{where} is not true or false")
    elif kind in ("host", "fabric"):
        _check_object(where, value, _HOST if kind == "host" else _FABRIC)
    elif kind in ("gpus", "failures"):
        if not isinstance(value, list):
            raise VerdictError(f"{where} is {type(value).__name__}, not a list")
        if len(value) > (limit or 0):
            raise VerdictError(f"{where} has {len(value)} items (at most {limit})")
        for i, item in enumerate(value):
            _check_object(f"{where}[{i}]", item, _GPU if kind == "gpus" else _FAILURE)
    elif kind == "dropped":
        if not isinstance(value, dict) or len(value) > (limit or 0):
            raise VerdictError(f"{where} is not an object of at most {limit} counts")
        for k, n in value.items():
            _check_value(f"{where} key", k, _STR, 40)
            _check_value(f"{where}[{_name(k)}]", n, _INT, None)


def _check_object(where: str, value: Any, schema: dict[str, tuple[str, int | None]]) -> None:
    if not isinstance(value, dict):
        raise VerdictError(f"{where} is {type(value).__name__}, not an object")
    for key, item in value.items():
        if key not in schema:
            raise VerdictError(f"{where} holds an unknown key {_name(key)}")
        kind, limit = schema[key]
        _check_value(f"{where}.{key}", item, kind, limit)


def validate_verdict(data: dict[str, Any]) -> None:
    """Raise VerdictError for a verdict that is not what node_check.sh writes: unknown keys, wrong
    types, strings too long or with control characters, numbers that are not finite or out of range."""
    _check_object("the verdict", data, _VERDICT)
    if isinstance(data.get("more"), int) and not 0 <= data["more"] <= 100000:
        raise VerdictError("the verdict's 'more' is out of range")


# ------------------------------------------------------------------------------ a node's result


@dataclass(frozen=True)
class NodeRef:
    """What Azure says about the node: the only names azgpu shows, prompts with and reports."""

    scale_set: str
    instance_id: str
    resource_id: str
    computer_name: str
    vm_id: str | None
    size: str


# Azure's physical host names read like AMS081063509028 (Azure/az-hop#1796: three letters of the region,
# twelve digits); Learn documents no grammar for PhysicalHostName, so azgpu accepts a name of letters,
# digits and '-', '.', '_', 3 to 64 characters, and drops anything else rather than send it.
PHYSICAL_HOST = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{2,63}")


def physical_host_of(value: Any) -> str | None:
    return value if isinstance(value, str) and PHYSICAL_HOST.fullmatch(value) else None


def inconclusive(node: NodeRef, code: str, reason: str, **extra: Any) -> NodeResult:
    return NodeResult(node.scale_set, node.instance_id, node.resource_id, node.computer_name, INCONCLUSIVE,
                      reason_code=code, reason=reason, vm_id=node.vm_id, vm_size=node.size, **extra)


def unreachable(node: NodeRef, code: str, reason: str) -> NodeResult:
    return NodeResult(node.scale_set, node.instance_id, node.resource_id, node.computer_name, UNREACHABLE,
                      reason_code=code, reason=reason, vm_id=node.vm_id, vm_size=node.size)


def _tail(text: str, n: int = 200) -> str:
    text = " ".join("".join(c if c.isprintable() else " " for c in text).split())
    return text[-n:]


def result_of(node: NodeRef, stdout: str, stderr: str = "") -> NodeResult:
    """One node's result from what its check printed: the gate's reading of a Run Command result, and
    azgpu.health.judge's. Never raises for what the node printed."""
    try:
        verdict = find_verdict(stdout)
        if verdict is not None:
            validate_verdict(verdict)
    except VerdictError as exc:
        return inconclusive(node, "invalid_verdict", f"the node's verdict did not validate: {exc}")
    if verdict is None or verdict.get("error"):
        why = "the script reported an error" if verdict else "no verdict line"
        return unreachable(node, "no_verdict", f"Run Command came back without a verdict ({why}); stdout ends "
                                               f"'{_tail(stdout)}', stderr ends '{_tail(stderr)}'")
    return from_verdict(node, verdict)


def from_verdict(node: NodeRef, v: dict[str, Any]) -> NodeResult:
    """A validated verdict as a NodeResult: failed only for a host fault (a finding with a Guest Health
    Reporting category), inconclusive for findings about the check's own run."""
    failures = tuple(failure_of(f) for f in v.get("failures") or [])
    more = int(v.get("more") or 0)
    dropped = {str(k): int(n) for k, n in (v.get("dropped") or {}).items()}
    host = v.get("host") or {}
    fabric = v.get("fabric")
    if isinstance(fabric, dict):
        fabric = {"clusterUuid": fabric.get("clusterUuid") or None, "cliqueId": fabric.get("cliqueId"),
                  "state": fabric.get("state") or "", "status": fabric.get("status") or "",
                  "complete": bool(fabric.get("complete"))}
    common = dict(checker=v.get("checker"), failures=failures, more_failures=more,
                  physical_host=physical_host_of(host.get("physical_host")), vm_id=node.vm_id,
                  node_vm_id=host.get("vm_id") or None, node_vm_id_source=host.get("vm_id_source") or None,
                  vm_size=node.size, aznhc=v.get("aznhc"), aznhc_error=v.get("aznhc_error"),
                  gpus_found=v.get("gpus_found"), ib_ports_found=v.get("ib_found"), gpus=_gpus(v.get("gpus")),
                  log=v.get("log"), seconds=v.get("seconds"), fabric=fabric, dropped=dropped or None)
    host_fault = any(impact_category(f) for f in failures) or any(
        impact_category(Failure(check=k, kind=_dropped_kind(k), message="", fault_code=k if k.startswith("NHC")
                                else None)) for k in dropped)
    if more and not dropped:
        host_fault = True  # a verdict of an older script: the findings left out are not known to be harmless
    if host_fault:
        status, code, reason = FAILED, None, ""
    elif failures or more:
        status = INCONCLUSIVE
        code, reason = _why_inconclusive(failures)
    else:
        status, code, reason = PASSED, None, ""
    return NodeResult(node.scale_set, node.instance_id, node.resource_id, node.computer_name, status,
                      reason_code=code, reason=reason, **common)


def unconfirmed(node: NodeResult) -> bool:
    """A failed node whose every host fault the image could cause as well (health.impact.could_be_image):
    proven only once another host with the same image passes."""
    if node.status != FAILED:
        return False
    faults = [f for f in node.failures if impact_category(f)]
    dropped = [k for k in (node.dropped or {}) if impact_category(
        Failure(check=k, kind=_dropped_kind(k), message="", fault_code=k if k.startswith("NHC") else None))]
    return bool(faults) and not dropped and all(could_be_image(f) for f in faults)


def _dropped_kind(key: str) -> str:
    if key.startswith("NHC"):
        return "aznhc"
    return AZNHC_KINDS.get(key, key)


def _why_inconclusive(failures: tuple[Failure, ...]) -> tuple[str, str]:
    kinds = {f.kind for f in failures}
    first = failures[0].summary() if failures else ""
    if "aznhc_watchdog" in kinds:
        return "watchdog", (f"AzNHC's watchdog (-t, for the whole run) ended the run during "
                            f"{next(f.check for f in failures if f.kind == 'aznhc_watchdog')}: not a finding about "
                            "the host; run the check again with a longer --node-timeout")
    if "aznhc_timeout" in kinds:
        return "aznhc_timeout", "AzNHC did not finish in its time: not a finding about the host"
    if "check_not_run" in kinds:
        which = next(f for f in failures if f.kind == "check_not_run")
        return "not_run", (f"a check could not run ({which.summary()}): the node is inconclusive for it, not passed; "
                           "nothing else was found")
    if "tool_missing" in kinds:
        return "image", f"the image lacks a tool the check needs ({first}): an image fault, not the host's"
    return "setup", (f"only faults of the checks' own set-up (AzNHC's NHCNA: {first}), which say nothing about "
                     "the host")
