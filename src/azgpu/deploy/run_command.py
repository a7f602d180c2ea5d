"""The Run Command client of the health gate: one script on one scale-set instance, its verdict.

The scale-set VM Run Command (RunShellScript) runs one script per call on one instance: there is no
scale-set-wide Run Command, so the gate (azgpu.deploy.health_gate) calls it once per node, in
parallel (run_all). Its limits shape this module (Learn linux/run-command, D-rc-linux): one script at
a time per VM (409 Conflict otherwise: waited out a bounded number of times), no exit code and only
the last 4 KB of output (hence the one verdict line the script prints), about 20 s at least and 90
minutes at most, and results only over the node's outbound path to Azure. A node's own trouble
(not running, a timeout, a conflict, a failed call) is a NodeResult saying why, never an exception.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from ..health.impact import impact_category
from ..health.results import (
    NodeRef,
    NodeResult,
    VerdictError,
    find_verdict,
    output_streams,
    result_of,
    validate_verdict,
)
from ..health.results import unreachable as unreachable_result
from ..health.script import Expectations, aznhc_watchdog, run_command_body
from ..ownership import live_profile
from ..resource_types import INSTANCES
from .arm import pages, to_azure_error, wait_first_polling
from .session import completed

CONFLICT_RETRIES = 3  # another Run Command on the VM (409): wait and try again this many times
CONFLICT_WAIT = 30.0
# Learn (linux/run-command): a script takes about 20 s at the least, so the first look at its status
# waits that long whatever Retry-After says: at thousands of nodes every early look is a read for nothing.
LEAST_SECONDS = 20.0


@dataclass
class Instance:
    scale_set: str
    instance_id: str
    resource_id: str
    computer_name: str
    vm_id: str | None
    power_state: str
    size: str


class Deadline(Exception):
    """Raised in a Run Command's poller thread when azgpu stops waiting for it."""


class Unreachable(Exception):
    def __init__(self, code: str, reason: str):
        super().__init__(reason)
        self.code = code
        self.reason = reason


def _power_state(vm: dict) -> str:
    for status in ((vm.get("properties") or {}).get("instanceView") or {}).get("statuses") or []:
        code = status.get("code") if isinstance(status, dict) else None
        if isinstance(code, str) and code.startswith("PowerState/"):
            return code.split("/", 1)[1]
    return "unknown"


def list_instances(session, resource_group: str, vmss: Any) -> list[Instance]:
    """The scale set's instances with their power state (VirtualMachineScaleSetVMs_List, $expand=instanceView),
    read from the REST answer: only the fields a check needs."""
    path = (f"/subscriptions/{session.subscription_id}/resourceGroups/{resource_group}/providers/"
            f"{INSTANCES.type.rsplit('/', 1)[0]}/{vmss.name}/virtualMachines")
    out = []
    for vm in pages(session, path, INSTANCES.api_version, f"instances of {vmss.name}", query="$expand=instanceView"):
        props = vm.get("properties") or {}
        name = str(vm.get("name") or "")
        computer = (props.get("osProfile") or {}).get("computerName") or name
        out.append(Instance(vmss.name, str(vm.get("instanceId") or name.rsplit("_", 1)[-1]), str(vm.get("id") or ""),
                            str(computer), props.get("vmId"), _power_state(vm), vmss.sku.name))
    return sorted(out, key=lambda i: int(i.instance_id) if i.instance_id.isdigit() else 0)


def _polling(session, timeout: float, stop: threading.Event):
    """ARM's poller that gives up `timeout` seconds after Azure accepted the Run Command (which cannot
    be cancelled), not after azgpu wanted to send it: a POST that waited for its turn under the
    subscription's limits, or for a throttled retry, loses none of its node's time."""
    deadline: list[float] = []

    def accepted() -> None:
        deadline.append(session.clock() + timeout)

    def give_up() -> None:
        if stop.is_set() or (deadline and session.clock() >= deadline[0]):
            raise Deadline()

    return wait_first_polling(session.polling_interval, default=15, before_delay=give_up, accepted=accepted,
                              first_wait=LEAST_SECONDS)


def encoded(body: dict[str, Any]) -> bytes:
    """A Run Command body as the bytes the SDK would send for it; bytes it sends as they are, as application/json.
    azure-mgmt-compute 39 json.dumps a dict with default separators; 34 (the floor) serialises it through its
    RunCommandInput model, which drops None values and keys the model lacks: so a body here holds neither (ours
    are commandId and script, all strings). A check sends one body to every node of a scale set: encoded once
    here, not once per node by the SDK (about 0.5 ms of CPU for the check script's 48 KB)."""
    return json.dumps(body).encode()


def _run(session, resource_group: str, node: Instance, body: dict | bytes, timeout: float,
         stop: threading.Event):
    from azure.core.exceptions import AzureError as SdkError
    from azure.core.exceptions import DeserializationError, HttpResponseError, ServiceRequestError, ServiceResponseError

    for attempt in range(CONFLICT_RETRIES + 1):
        try:
            poller = INSTANCES.begin_run_command(session, resource_group, node.scale_set, node.instance_id, body,
                                                 polling=_polling(session, timeout, stop))
            return poller.result()
        except Deadline:
            raise Unreachable("timeout", f"no result within {timeout:g} s; Run Command cannot be cancelled, so the "
                                          "check may still be running there (until it ends, a new check of this "
                                          "node gets 409 Conflict)") from None
        except HttpResponseError as exc:
            if exc.status_code == 409 and attempt < CONFLICT_RETRIES and not stop.is_set():
                session.pause(CONFLICT_WAIT)
                continue
            if exc.status_code == 409:
                raise Unreachable("conflict", "another Run Command is still running on this VM (409 Conflict); "
                                               "run 'provision check' again once it ends") from None
            err = to_azure_error(exc, "Run Command")
            raise Unreachable("run_command_failed", err.message) from None
        except (ServiceRequestError, ServiceResponseError) as exc:
            raise Unreachable("run_command_failed", f"Azure could not be reached: {exc}") from None
        except (DeserializationError, ValueError, LookupError):
            # Not AzureErrors: an answer the SDK cannot read (azure-mgmt-compute 34 raises DeserializationError for
            # a body of the wrong shape; 39 reads it with json.loads, so JSONDecodeError or UnicodeDecodeError; an
            # unknown charset= is a LookupError). No verdict, nothing known of the node.
            raise Unreachable("run_command_failed", "Azure's Run Command answer could not be read (not the JSON "
                                                     "its REST API defines): no verdict") from None
        except SdkError as exc:  # a dropped connection mid-poll, a body cut short: no verdict, nothing known
            raise Unreachable("run_command_failed", f"Run Command did not complete: {type(exc).__name__}: "
                                                     f"{str(exc)[:200]}") from None
    raise AssertionError("unreachable: the loop returns or raises")


def expectations(vmss: Any) -> Expectations:
    """What a node of this scale set is checked against: its size in the profile it was made with (tag
    ownership.PROFILE_TAG), else in any profile that knows the size (ownership.live_profile)."""
    return Expectations.of(live_profile(vmss)[1])


def check_body(vmss: Any, node_timeout: float) -> dict[str, Any]:
    """The Run Command body that checks a node of this scale set (its size's expectations, AzNHC's watchdog)."""
    return run_command_body("check", {**expectations(vmss).settings(),
                                      "AZGPU_AZNHC_TIMEOUT": aznhc_watchdog(node_timeout)})


def signature(node: NodeResult) -> frozenset:
    """What a node's host faults say, without the node's own ids (bus ids, ports and serials differ between
    hosts): the same signature on every node is not a property of any one host."""
    return frozenset((f.check, f.kind, f.fault_code, f.expected, f.measured) for f in node.failures
                     if impact_category(f))


def _ref(node: Instance) -> NodeRef:
    return NodeRef(node.scale_set, node.instance_id, node.resource_id, node.computer_name, node.vm_id, node.size)


def _unreachable(node: Instance, code: str, reason: str) -> NodeResult:
    return unreachable_result(_ref(node), code, reason)


def _tail(text: str, n: int = 200) -> str:
    text = " ".join("".join(c if c.isprintable() else " " for c in text).split())
    return text[-n:]


def check_node(session, resource_group: str, node: Instance, body: dict | bytes, timeout: float,
               stop: threading.Event) -> NodeResult:
    """One node: the Run Command, its verdict, a NodeResult (never raises for the node's own trouble)."""
    if node.power_state not in ("running", "unknown"):
        return _unreachable(node, "not_running", f"the VM is {node.power_state}, not running")
    try:
        result = _run(session, resource_group, node, body, timeout, stop)
    except Unreachable as exc:
        return _unreachable(node, exc.code, exc.reason)
    stdout, stderr = output_streams(result)
    return result_of(_ref(node), stdout, stderr)


def check_node_raw(session, resource_group: str, node: Instance, mode: str, settings: dict,
                   timeout: float) -> dict[str, Any]:
    """Run one NCCL step on a node; the verdict, or {"ok": False, "error": why}."""
    stop = threading.Event()
    try:
        result = _run(session, resource_group, node, run_command_body(mode, settings), timeout, stop)
    except Unreachable as exc:
        return {"ok": False, "error": f"{node.computer_name}: {exc.reason}"}
    stdout, stderr = output_streams(result)
    try:
        verdict = find_verdict(stdout)
        if verdict is not None:
            validate_verdict(verdict)
    except VerdictError as exc:
        return {"ok": False, "error": f"{node.computer_name}: {exc}"}
    if verdict is None:
        return {"ok": False, "error": f"{node.computer_name}: no verdict; stderr ends '{_tail(stderr)}'"}
    return verdict


def run_all(session, resource_group: str, jobs: list[tuple[Instance, dict]], timeout: float, parallel: int,
             on_node: Callable[[NodeResult], None] | None) -> list[NodeResult]:
    if not jobs:
        return []
    stop = threading.Event()
    pool = ThreadPoolExecutor(max_workers=min(parallel, len(jobs)))  # each worker only waits on Azure
    results = []
    try:
        wire: dict[int, bytes] = {}  # each distinct body encoded once (the jobs of a scale set share theirs)
        for _, body in jobs:
            if id(body) not in wire:
                wire[id(body)] = encoded(body)
        futures = [pool.submit(check_node, session, resource_group, node, wire[id(body)], timeout, stop)
                   for node, body in jobs]
        for future in completed(futures):
            result = future.result()
            results.append(result)
            if on_node:
                on_node(result)
    except BaseException:
        # Interrupted, or a failure no node result holds (the session's throttling budget spent, a bug):
        # the pollers stop at their next wait and Azure finishes what it runs. Waiting here for hundreds of
        # workers still queued under the pace would hold the error back for as long as they take.
        stop.set()
        raise
    finally:
        pool.shutdown(wait=not stop.is_set(), cancel_futures=True)
    return sorted(results, key=lambda r: (r.scale_set, int(r.instance_id) if r.instance_id.isdigit() else 0))
