"""The faults of a simulated node, one row each: the keyword (`make_unhealthy(..., gpus=7)`), the option of
`provision simulate fault` (`--gpus 7`), its help, and its effect on the node state hardware.py made.

`provision simulate fault`'s options, `apply_fault`, `validate_fault` and docs/node-faults.md are all built
from NODE_FAULTS, so a new fault is one row here (and, when the node script must find it, what the tools
print in hardware.py or fabric.py). Nothing here imports the Azure SDK: the command line reads the table
to build its options.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from . import hardware

ROW_REMAP_FAULTS = ("pending", "failure")
RUN_COMMAND_FAULTS = ("timeout", "no_verdict")
KINDS = ("int", "float", "flag", "text", "choice")
MAX_XID = 999
MAX_COUNT = 2**32  # NVML's ECC counters are 64-bit; no real node shows anywhere near this


@dataclass(frozen=True)
class NodeFault:
    name: str  # the keyword of make_unhealthy / unhealthy_next, and the key in a queued fault
    option: str  # the option of `provision simulate fault`
    help: str
    effect: Callable[[dict, Any, dict], None]  # effect(node, value, the whole fault): changes the node state
    kind: str = "flag"  # int | float | flag | text | choice
    choices: tuple[str, ...] = ()
    metavar: str | None = None
    from_option: Callable[[Any], Any] | None = None  # the option's text as the keyword takes it
    # What the value alone must be, whatever node takes it: checked when the fault is named, so a fault queued
    # for the next instances (--next) is refused then, not when Azure creates them. What depends on the node
    # (its ports, its GPU count, GB sizes) the effect checks.
    check: Callable[[Any], None] | None = None

    def problems(self) -> list[str]:
        """What this row lacks: a fault without its help or effect cannot be offered or applied."""
        found = []
        if not re.fullmatch(r"[a-z][a-z0-9_]*", self.name or ""):
            found.append(f"name {self.name!r} is not a Python keyword")
        if not re.fullmatch(r"--[a-z][a-z0-9-]*", self.option or ""):
            found.append(f"{self.name}: option {self.option!r} is not a long option")
        if not (self.help or "").strip():
            found.append(f"{self.name}: no help")
        if not callable(self.effect):
            found.append(f"{self.name}: no effect")
        if self.kind not in KINDS:
            found.append(f"{self.name}: kind {self.kind!r} is not one of {KINDS}")
        if (self.kind == "choice") != bool(self.choices):
            found.append(f"{self.name}: choices go with kind 'choice' (and it needs them)")
        return found


# ------------------------------------------------------------------------------ effects


def _port(node: dict, which: str | int | None) -> dict:
    ports = node["ib"]
    if not ports:
        raise ValueError(f"{node['size']} has no InfiniBand port")
    if which is None:
        return ports[0]
    if isinstance(which, int) or str(which).isdigit():
        if not 0 <= int(which) < len(ports):
            raise ValueError(f"no InfiniBand port {which!r} (the node has ports 0 to {len(ports) - 1})")
        return ports[int(which)]
    for port in ports:  # the name whole: 'mlx5_ib0:x' is no port (PORT:VALUE forms split before this)
        if port["dev"] == str(which):
            return port
    raise ValueError(f"no InfiniBand port {which!r} (the node has {', '.join(p['dev'] for p in ports)})")


def _pair(text: str, what: str) -> tuple[str, str | None]:
    head, sep, tail = str(text).partition(":")
    if not head:
        raise ValueError(f"{what}={text!r}: give PORT[:VALUE]")
    return head, (tail if sep else None)


def _share(value, what: str) -> float:
    try:
        share = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{what}={value!r}: a share from 0 to 1") from None
    if not 0 <= share <= 1:
        raise ValueError(f"{what}={value!r}: a share from 0 to 1")
    return share


def _seconds(text: str | None, default: int, what: str, whole: Any) -> int:
    """SECONDS of PORT:SECONDS or GPU:SECONDS: left out, the default; anything but digits refused (a typo
    must not become the default silently)."""
    if text is None:
        return default
    if not (text.isascii() and text.isdigit()) or len(text) > 6:
        raise ValueError(f"{what}={whole!r}: SECONDS is a whole number of seconds")
    return int(text)


def _first_gpu(node: dict) -> dict:
    if not node["gpus"]:
        raise ValueError(f"{node['size']} has no GPU")
    return node["gpus"][0]


def _gb_only(node: dict) -> None:
    if not hardware.gb_family(node["size"]):
        raise ValueError(f"{node['size']} has no NVLink fabric across nodes (GB sizes only)")


def _gpus(node, gpus, _):
    if not 0 <= gpus <= len(node["gpus"]):
        raise ValueError(f"gpus={gpus}: the node has {len(node['gpus'])}")
    for i, gpu in enumerate(node["gpus"]):
        gpu["present"] = i < gpus
    node["faults"].append(f"{gpus} of {len(node['gpus'])} GPUs")


def _ib_down(node, ib_down, _):
    port = _port(node, None if ib_down is True else ib_down)
    port.update(state="DOWN", phys="Polling")
    node["faults"].append(f"{port['dev']} down")


def _ib_rate(node, ib_rate, fault):
    port = _port(node, fault.get("ib_port"))
    full = hardware.model(node["size"]).ib_rate
    # A port trained down shows a lower rate in ibstat; none shows 0, a negative rate or more than its full one.
    if int(ib_rate) > full:
        raise ValueError(f"ib_rate={ib_rate}: a rate from 1 to the port's full {full} Gb/s")
    port["rate"] = int(ib_rate)
    port["width"] = max(1, round(4 * ib_rate / full)) if full else 4
    node["faults"].append(f"{port['dev']} at {ib_rate} Gb/s")


def _ib_port(node, ib_port, _):
    _port(node, ib_port)  # names the port ib_rate changes: it must exist


def _xid(node, xid, _):
    node["xids"].append(int(xid))
    node["faults"].append(f"Xid {xid}")


def _nvidia_smi_hang(node, _value, _):
    node["nvidia_smi"] = "hang"
    node["faults"].append("nvidia-smi hangs")


def _nvlink_down(node, _value, _):
    node["nvlink"] = "down"
    node["faults"].append("NVLink down")


def _run_command(node, run_command, _):
    if run_command not in RUN_COMMAND_FAULTS:
        raise ValueError(f"run_command={run_command!r}: one of {RUN_COMMAND_FAULTS}")
    node["run_command"] = run_command
    node["faults"].append(f"Run Command {run_command}")


def _ecc(node, ecc, _):
    if ecc:
        _first_gpu(node)["ecc_sram"] = int(ecc)
        node["faults"].append(f"{ecc} uncorrectable SRAM ECC errors")


def _row_remap(node, row_remap, _):
    gpu = _first_gpu(node)
    if row_remap not in ROW_REMAP_FAULTS:
        raise ValueError(f"row_remap={row_remap!r}: one of {ROW_REMAP_FAULTS}")
    gpu["remap"] = row_remap
    node["faults"].append(f"row remap {row_remap}")


def _gpu_lost(node, _value, _):
    _first_gpu(node)["lost"] = True
    node["faults"].append("GPU lost")


def _no_devices(node, _value, _):
    node["nvidia_smi"] = "no_devices"
    node["faults"].append("driver lists no GPU")


def _driver_not_loaded(node, _value, _):
    if hardware.model(node["size"]).vendor != "nvidia":
        raise ValueError(f"{node['size']} has no NVIDIA driver")
    node["nvidia_smi"] = "driver_not_loaded"
    node["faults"].append("NVIDIA driver not loaded")


def _fabric_incomplete(node, _value, _):
    _gb_only(node)
    node["fabric"] = {**hardware.fabric_of(node), "state": "In Progress", "status": "N/A"}
    node["faults"].append("NVLink fabric not completed")


def _imex_missing(node, _value, _):
    _gb_only(node)
    node["imex"] = "missing"
    node["faults"].append("IMEX channel missing")


def _ib_degraded(node, ib_degraded, _):
    dev, share = _pair(ib_degraded, "ib_degraded")
    port = _port(node, dev)
    node.setdefault("ib_degraded", {})[port["dev"]] = _share(share if share is not None else 0.6, "ib_degraded")
    node["faults"].append(f"{port['dev']} carries {node['ib_degraded'][port['dev']]:.0%}")


def _ib_flapping(node, ib_flapping, _):
    dev, period = _pair(ib_flapping, "ib_flapping")
    port = _port(node, dev)
    seconds = _seconds(period, 30, "ib_flapping", ib_flapping)
    node.setdefault("ib_flapping", {})[port["dev"]] = seconds
    node["faults"].append(f"{port['dev']} flaps every {seconds} s")


def _gpu_throttle(node, gpu_throttle, _):
    gpu, after = _pair(gpu_throttle, "gpu_throttle")
    if int(gpu) >= len(node["gpus"]):
        raise ValueError(f"gpu_throttle={gpu_throttle!r}: GPU index 0 to {len(node['gpus']) - 1}")
    seconds = _seconds(after, 60, "gpu_throttle", gpu_throttle)
    node.setdefault("gpu_throttle", {})[gpu] = seconds
    node["faults"].append(f"GPU {gpu} throttles after {seconds} s under load")


def _transient(node, transient, _):
    node["transient"] = int(node.get("transient", 0)) + int(transient)
    node["faults"].append(f"{transient} transient slowdown(s)")


def _collective_share(node, collective_share, _):
    node["collective_share"] = _share(collective_share, "collective_share")
    node["faults"].append(f"collectives with it at {node['collective_share']:.0%}")


def _nvlink_degraded(node, nvlink_degraded, _):
    _gb_only(node)
    node["nvlink_degraded"] = _share(nvlink_degraded, "nvlink_degraded")
    node["faults"].append(f"NVLink at {node['nvlink_degraded']:.0%}")


# ------------------------------------------------------------------------------ the values alone


def _whole(name: str, low: int, high: int, what: str) -> Callable[[Any], None]:
    def check(value: Any) -> None:
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise ValueError(f"{name}={value!r}: {what}")
    return check


def _check_period(text: Any) -> None:
    _, period = _pair(text, "ib_flapping")
    if not 2 < _seconds(period, 30, "ib_flapping", text) <= 86400:
        raise ValueError(f"ib_flapping={text!r}: a period of 3 to 86400 seconds")


def _check_throttle(text: Any) -> None:
    gpu, after = _pair(text, "gpu_throttle")
    if not (gpu.isascii() and gpu.isdigit()) or len(gpu) > 4:
        raise ValueError(f"gpu_throttle={text!r}: GPU[:SECONDS], GPU an index from 0")
    if not 0 < _seconds(after, 60, "gpu_throttle", text) <= 86400:
        raise ValueError(f"gpu_throttle={text!r}: after 1 to 86400 seconds")


def _check_share_of(name: str) -> Callable[[Any], None]:
    def check(text: Any) -> None:
        _, share = _pair(text, name)
        if share is not None:
            _share(share, name)
    return check


# ------------------------------------------------------------------------------ the table

# In the order `provision simulate fault --help` lists them and a node takes them. The last six are what
# only certification finds (fabric.py says what each does under load).
NODE_FAULTS: tuple[NodeFault, ...] = (
    NodeFault("gpus", "--gpus", "GPUs the node still shows (e.g. 7 of 8).", _gpus, "int",
              check=_whole("gpus", 0, 1024, "how many GPUs the node still shows, 0 or more")),
    NodeFault("ib_down", "--ib-down", "InfiniBand device to take down (e.g. mlx5_ib3), or 'first'.", _ib_down,
              "text", from_option=lambda text: True if text == "first" else text),
    # A port trained down shows a lower rate in ibstat; none shows 0, a negative rate or more than its full one.
    NodeFault("ib_rate", "--ib-rate", "Rate in Gb/s for --ib-port (or the first port).", _ib_rate, "int",
              check=_whole("ib_rate", 1, 10**6, "a rate in Gb/s from 1 to the port's full rate")),
    NodeFault("ib_port", "--ib-port", "InfiniBand device for --ib-rate.", _ib_port, "text"),
    # NVIDIA's Xid catalog numbers its errors from 1 (the highest listed today is below 200).
    NodeFault("xid", "--xid", "An Xid in the kernel log (e.g. 79).", _xid, "int",
              check=_whole("xid", 1, MAX_XID, f"an Xid from 1 to {MAX_XID} (NVIDIA's Xid catalog)")),
    NodeFault("nvidia_smi_hang", "--nvidia-smi-hang", "nvidia-smi never answers.", _nvidia_smi_hang),
    NodeFault("nvlink_down", "--nvlink-down", "NVLink links inactive.", _nvlink_down),
    NodeFault("run_command", "--run-command", "Run Command never returns (timeout) or returns without a verdict.",
              _run_command, "choice", RUN_COMMAND_FAULTS),
    NodeFault("ecc", "--ecc", "Uncorrectable SRAM ECC errors on the first GPU.", _ecc, "int",
              check=_whole("ecc", 0, MAX_COUNT, f"a count from 0 to {MAX_COUNT}")),
    NodeFault("row_remap", "--row-remap", "A row remap pending or failed on the first GPU.", _row_remap, "choice",
              ROW_REMAP_FAULTS),
    NodeFault("gpu_lost", "--gpu-lost", "The driver calls the first GPU lost (no Xid line).", _gpu_lost),
    NodeFault("no_devices", "--no-devices", "nvidia-smi finds no GPU while the PCI bus still shows them.",
              _no_devices),
    NodeFault("driver_not_loaded", "--driver-not-loaded",
              "nvidia-smi answers that the NVIDIA driver is not loaded (exit 9).", _driver_not_loaded),
    NodeFault("fabric_incomplete", "--fabric-incomplete", "GB sizes: NVLink fabric state not Completed.",
              _fabric_incomplete),
    NodeFault("imex_missing", "--imex-missing", "GB sizes: no IMEX channel.", _imex_missing),
    NodeFault("ib_degraded", "--ib-degraded",
              "A port up at full rate that carries only SHARE of its bandwidth (default 0.6): what "
              "'provision certify' finds and the gate does not (e.g. mlx5_ib3:0.6).", _ib_degraded, "text",
              metavar="PORT[:SHARE]", check=_check_share_of("ib_degraded")),
    NodeFault("ib_flapping", "--ib-flapping",
              "A port whose link drops every SECONDS (default 30; its link_downed counter counts them).",
              _ib_flapping, "text", metavar="PORT[:SECONDS]", check=_check_period),
    NodeFault("gpu_throttle", "--gpu-throttle",
              "A GPU that throttles (HW Thermal Slowdown) after SECONDS under load (default 60).", _gpu_throttle,
              "text", metavar="GPU[:SECONDS]", check=_check_throttle),
    NodeFault("transient", "--transient", "Slow the node's next N fabric tests once each.", _transient, "int",
              check=_whole("transient", 1, 10**6, "how many of its next fabric tests are slowed, 1 or more")),
    NodeFault("collective_share", "--collective-share",
              "Every collective with the node runs at this share (its ports pass alone).", _collective_share,
              "float", check=lambda value: _share(value, "collective_share")),
    NodeFault("nvlink_degraded", "--nvlink-degraded", "GB sizes: the node's NVLink at this share.", _nvlink_degraded,
              "float", check=lambda value: _share(value, "nvlink_degraded")),
)
BY_NAME = {row.name: row for row in NODE_FAULTS}
FAULT_KEYS = tuple(BY_NAME)


def check_table(rows: tuple[NodeFault, ...] = NODE_FAULTS) -> None:
    """Refuse a table with a row that lacks its help or effect, or two rows of one name or option."""
    found = [p for row in rows for p in row.problems()]
    for what in ("name", "option"):
        seen = [getattr(row, what) for row in rows]
        found += [f"{what} {v!r} twice" for v in sorted({v for v in seen if seen.count(v) > 1})]
    if found:
        raise ValueError("node fault table: " + "; ".join(found))


check_table()


def is_set(value: Any) -> bool:
    """A fault named: any value but None (left out) or False (a flag not given). By identity: gpus=0 (every
    GPU gone) is a fault, though 0 == False."""
    return value is not None and value is not False


def validate_fault(fault: dict[str, Any]) -> dict[str, Any]:
    """The faults named (unknown names, none at all and a value that no node could take refused), without
    the ones left unset."""
    _check_values(fault)
    if not any(is_set(v) for v in fault.values()):
        raise ValueError("name at least one fault: " + ", ".join(FAULT_KEYS))
    return {k: v for k, v in fault.items() if is_set(v)}


def _check_values(fault: dict[str, Any]) -> None:
    unknown = set(fault) - set(FAULT_KEYS)
    if unknown:
        raise ValueError(f"unknown fault(s) {sorted(unknown)}: use {', '.join(FAULT_KEYS)}")
    for name, value in fault.items():
        row = BY_NAME[name]
        if row.choices and value not in (None, *row.choices):
            raise ValueError(f"{name} must be one of {row.choices}")
        if row.check is not None and is_set(value):
            row.check(value)


def apply_fault(node: dict, **fault: Any) -> None:
    """Break a node: each fault named (a keyword of NODE_FAULTS) takes effect, in the table's order."""
    _check_values(fault)
    for row in NODE_FAULTS:
        value = fault.get(row.name)
        if is_set(value):
            row.effect(node, value, fault)


def check_some_size(fault: dict[str, Any]) -> None:
    """A fault queued for the next instances (--next), whose size is not known yet: refused now when no simulated
    size could take it (a port or GPU index none has), where it used to crash the fake inside a later create."""
    errors = []
    for size, m in hardware.MODELS.items():
        node = {"size": size, "vm_name": "next_0", **hardware.healthy_parts(m, 0)}
        try:
            apply_fault(node, **fault)
            return
        except (KeyError, ValueError) as exc:
            errors.append(str(exc).strip("'\""))
    raise ValueError(f"{errors[0]}; no simulated GPU size could take it")


def apply_pending(store, node: dict) -> None:
    """A new instance takes the first fault queued for the next ones created (unhealthy_next) that its size can
    take. One it cannot (a port, GPU index or rate its size has not; a fabric fault on a size without NVLink
    fabric) stays queued for an instance that can, where it used to fail the create that made this one."""
    for index, queued in enumerate(store.pending_faults):
        trial = copy.deepcopy(node)  # a fault takes effect whole or not at all
        try:
            apply_fault(trial, **queued["fault"])
        except (KeyError, ValueError):
            continue
        node.clear()
        node.update(trial)
        queued["count"] -= 1
        if queued["count"] <= 0:
            store.pending_faults.pop(index)
        return
