"""A finding the image could cause, confirmed on a second host before anything is reported or replaced.

A driver that does not load (nvidia-smi exit 9), a GPU tool that fails, a driver that lists no GPU:
the host may be broken, or the image may be (AzNHC itself calls nvidia-smi's exit 9 "NVIDIA driver
not loaded", NHCNA: not the host's). One node cannot tell which; another host with the same image
can. The health gate marks such a node `unconfirmed` (inconclusive) whenever no other node of its
scale set passed (health_gate.judged). Before anything is reported or replaced, `confirm` checks a
second host of the scale set: an existing instance that was not checked, else one VM grown for the
purpose and removed again afterwards (the scale set ends at the capacity it had, whatever happens).
The second host passes: the finding is the first host's, and it is failed again (reportable). It
fails alike: the image, not the host; nothing is reported, and the user is told. Anything else: still
unconfirmed, nothing is reported.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable
from typing import Any

from ..health.model import FAILED, INCONCLUSIVE, PASSED, NodeResult
from ..resource_types import INSTANCES, VMSS
from .arm import to_azure_error
from .interface import CheckOptions
from .run_command import Instance, check_body, check_node, list_instances, signature

UNCONFIRMED = "unconfirmed"


def suspects(nodes: list[NodeResult]) -> list[NodeResult]:
    return [n for n in nodes if n.status == INCONCLUSIVE and n.reason_code == UNCONFIRMED]


def confirm(session, resource_group: str, nodes: list[NodeResult], options: CheckOptions, *, grow: bool = True,
            only: set[str] | None = None, on_notice: Callable[[str], None] | None = None) -> list[NodeResult]:
    """The nodes, with each unconfirmed one failed (a second host of its scale set passed), inconclusive
    for the image (the second host failed alike) or left unconfirmed (no second host answered clearly).
    grow: a VM may be added to a scale set with no other instance to compare with (and is removed again).
    only: the resource ids (lower case) to confirm (a round's new nodes); None: every unconfirmed one."""
    waiting = [n for n in suspects(nodes) if only is None or n.resource_id.lower() in only]
    if not waiting:
        return nodes
    notice = on_notice or (lambda message: None)
    checked = {n.resource_id.lower() for n in nodes}
    decided: dict[str, NodeResult] = {}
    for scale_set in sorted({n.scale_set for n in waiting}):
        mine = [n for n in waiting if n.scale_set == scale_set]
        second = _second_host(session, resource_group, scale_set, checked, options,
                              _Asking(grow, notice, ", ".join(n.computer_name for n in mine)))
        for node in mine:
            decided[node.resource_id.lower()] = _decide(node, second)
    return [decided.get(n.resource_id.lower(), n) for n in nodes]


def _decide(node: NodeResult, second: NodeResult | str) -> NodeResult:
    first = node.summary()
    if isinstance(second, str):
        return dataclasses.replace(node, reason=f"{first}; {second}: nothing is replaced or reported")
    if second.status == PASSED:
        return dataclasses.replace(node, status=FAILED, reason_code=None,
                                   reason=f"confirmed: {second.computer_name}, a second host of {node.scale_set} with "
                                          "the same image, passed")
    if second.status == FAILED or (second.status == INCONCLUSIVE and second.reason_code == UNCONFIRMED):
        shared = signature(node) & signature(second)
        if shared:
            return dataclasses.replace(node, reason_code="image", reason=(
                f"{first}: the same finding on a second host ({second.computer_name}, same image): the image, its "
                "driver or the configuration rather than this host; nothing is replaced or reported"))
    return dataclasses.replace(node, reason=(
        f"{first}; a second host ({second.computer_name}) did not pass either ({second.status}: {second.summary()}), "
        "so nothing shows this host at fault: nothing is replaced or reported"))


@dataclasses.dataclass(frozen=True)
class _Asking:
    """How a second host is found for the nodes `names`: grow (a VM may be added) and whom to tell."""

    grow: bool
    notice: Callable[[str], None]
    names: str


def _second_host(session, resource_group: str, scale_set: str, checked: set[str], options: CheckOptions,
                 asking: _Asking) -> NodeResult | str:
    """The result of a second host of the scale set, or why there is none."""
    grow, notice, names = asking.grow, asking.notice, asking.names
    try:
        vmss = VMSS.get(session, resource_group, scale_set)
        listed = list_instances(session, resource_group, vmss)
    except Exception as exc:  # to_azure_error re-raises anything not from Azure
        raise to_azure_error(exc, f"scale set {scale_set}") from None
    body = check_body(vmss, options.node_timeout)
    others = [i for i in listed if i.resource_id.lower() not in checked and i.power_state in ("running", "unknown")]
    if others:
        notice(f"{names}: a finding the image could cause; checking {others[0].computer_name}, another host of "
               f"{scale_set}, to tell")
        return check_node(session, resource_group, others[0], body, options.node_timeout, threading.Event())
    if not grow:
        return "no other host of its scale set to compare with"
    from ..profiles import find_size

    try:
        vertical = find_size(vmss.sku.name)[0].vertical_connect
    except Exception:  # a size no profile knows: not a rack size
        vertical = None
    if vertical:
        return "a rack's scale set cannot grow by one VM to compare with"
    capacity = int(vmss.sku.capacity or 0)
    before = {i.instance_id for i in listed}
    notice(f"{names}: a finding the image could cause; adding one VM to {scale_set} to check a second host "
           "(it is removed again)")
    added: list[Instance] = []
    try:
        try:
            VMSS.begin_set_capacity(session, resource_group, scale_set, vmss.sku.name, capacity + 1).result()
            added = [i for i in list_instances(session, resource_group, vmss) if i.instance_id not in before]
        except Exception as exc:
            raise to_azure_error(exc, f"adding a VM to {scale_set} to compare with") from None
        if not added:
            return "the VM added to compare with did not appear"
        return check_node(session, resource_group, added[0], body, options.node_timeout, threading.Event())
    finally:
        _remove(session, resource_group, scale_set, vmss, before, capacity, notice)


def _remove(session, resource_group: str, scale_set: str, vmss: Any, before: set[str], capacity: int,
            notice: Callable[[str], None]) -> None:
    """Delete every instance the comparison added, so the scale set ends as it was (a re-run converges)."""
    try:
        extra = [vm.instance_id for vm in INSTANCES.list(session, resource_group, scale_set)
                 if vm.instance_id not in before]
        if extra:
            VMSS.begin_delete_instances(session, resource_group, scale_set, extra).result()
        current = VMSS.get(session, resource_group, scale_set)
        if int(current.sku.capacity or 0) != capacity:
            VMSS.begin_set_capacity(session, resource_group, scale_set, vmss.sku.name, capacity).result()
    except Exception as exc:
        raise to_azure_error(exc, f"removing the VM added to {scale_set} to compare with") from None
    notice(f"{scale_set}: the VM added to compare with is removed again")
