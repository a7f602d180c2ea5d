"""The health gate: AzNHC (or azgpu's fallback) on every node through Run Command, a result per
node, and replacing the nodes that fail.

A scale set that reports Succeeded can still hold a node with a GPU missing, an InfiniBand port down
or slow, or an Xid in its kernel log. `check` runs azgpu/health/node_check.sh on every instance
through the Run Command client (azgpu.deploy.run_command), reads the one verdict line the script
prints, and reports each node as passed, failed (a host fault: which check, expected and measured),
inconclusive (only faults of the check's own run, or a finding every node shares: an image or
configuration problem) or unreachable (why; the subnet's outbound path is checked first, since Run
Command returns results only over it). Only failed nodes are ever replaced or reported. `gate` adds
the replacement loop of `create --check --replace-unhealthy`: delete the failing instances, scale the
scale set back to its capacity (new instance ids, new hosts), check the new ones, for a bounded number
of rounds.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from .. import resource_types
from ..errors import AzgpuError
from ..health.limits import PARALLEL
from ..health.model import FAILED, INCONCLUSIVE, PASSED, UNREACHABLE, NodeResult
from ..health.results import unconfirmed
from ..health.trust import valid_nccl_pubkey
from ..ownership import live_profile
from ..resource_types import INSTANCES, NETWORK_API
from .arm import json_body, send, to_azure_error
from .interface import NO_HOOKS, CheckOptions, GateHooks, GateOptions, GateResult, HealthReport, LiveCluster, refuse
from .lifecycle import live_cluster
from .run_command import Instance, check_body, check_node_raw, expectations, list_instances, run_all, signature

NCCL_KEY_HOURS = 2  # how long a node accepts the launcher's key if the clean-up never reaches it


def _subnet_of(vmss: Any) -> tuple[str | None, bool]:
    """The subnet of the scale set's primary IP configuration, and whether instances get public IPs."""
    subnet, public = None, False
    profile = getattr(vmss, "virtual_machine_profile", None)
    network = getattr(profile, "network_profile", None)
    for config in getattr(network, "network_interface_configurations", None) or []:
        for ipc in getattr(config, "ip_configurations", None) or []:
            if getattr(ipc, "public_ip_address_configuration", None):
                public = True
            sub = getattr(ipc, "subnet", None)
            if subnet is None and sub is not None and sub.id:
                subnet = sub.id
    return subnet, public


def _outbound(session, vmss: Any, subnets: dict[str, dict | None]) -> dict[str, Any]:
    """How the scale set's nodes reach Azure's public addresses, which Run Command needs to return
    results (Learn linux/run-command): public IPs, a NAT gateway, or the subnet's default outbound
    access, which is off when defaultOutboundAccess is false (private subnets). `subnets` keeps the
    subnets already read by this check (by lower-cased id; None: could not be read): the scale sets of a
    cluster share one subnet, and its body lists every NIC on it, so reading it once per scale set cost
    time quadratic in the nodes (100 reads of 10,000 IP configurations at 10,000 nodes)."""
    subnet_id, public = _subnet_of(vmss)
    out: dict[str, Any] = {"scale_set": vmss.name, "subnet": subnet_id}
    if public:
        return {**out, "path": "public IPs", "ok": True}
    if subnet_id is None:
        return {**out, "path": "unknown", "ok": True}
    if subnet_id.lower() not in subnets:
        subnets[subnet_id.lower()] = _read_subnet(session, subnet_id)
    subnet = subnets[subnet_id.lower()]
    if subnet is None:  # another subscription, no read access, a moved network: say it was not checked
        return {**out, "path": "unknown (the subnet could not be read)", "ok": True}
    if subnet.get("natGateway"):
        return {**out, "path": "NAT gateway", "ok": True}
    if subnet.get("defaultOutboundAccess") is False:
        return {**out, "path": None, "ok": False,
                "warning": f"subnet {subnet_id} has no outbound path (no NAT gateway, no public IPs, default outbound "
                           "access off): Run Command may run the checks but cannot return their results"}
    return {**out, "path": "default outbound access", "ok": True}


def _read_subnet(session, subnet_id: str) -> dict | None:
    """The subnet's properties, or None where it cannot be read."""
    try:
        # At azgpu's api-version: an older one leaves out defaultOutboundAccess. Read as REST: the SDK's
        # model of a subnet carries every NIC's IP configuration on it (seconds of CPU at 10,000 nodes).
        response = send(session, "GET", subnet_id, NETWORK_API)
        if response.status_code != 200:
            raise ValueError(response.status_code)
        return json_body(response).get("properties") or {}
    except Exception:
        return None


def common_failures(results: list[NodeResult]) -> list[NodeResult]:
    """A host fault that every node which answered shares is an image, driver or configuration problem
    whatever the node count: those nodes are inconclusive, and nothing is replaced or reported for it.
    (One node shares everything with itself: there the gate stops when a replacement shows the same.)"""
    answered = [r for r in results if r.status in (PASSED, FAILED, INCONCLUSIVE)]
    failed = [r for r in answered if r.status == FAILED]
    if len(answered) < 2 or len(failed) != len(answered):
        return results
    common = frozenset.intersection(*(signature(r) for r in failed))
    if not common:
        return results
    shown = "; ".join(sorted(f"{c[0]}: expected {c[3]}, measured {c[4]}" if c[3] or c[4] else f"{c[0]} ({c[1]})"
                             for c in common)[:2])
    out = []
    for r in results:
        if r.status == FAILED and signature(r) <= common:
            r = NodeResult(**{**r.__dict__, "status": INCONCLUSIVE, "reason_code": "common",
                              "reason": f"every node that answered ({len(answered)}) shows the same finding ({shown}): "
                                        "the image, the driver or the configuration rather than this host"})
        out.append(r)
    return out


def judged(results: list[NodeResult]) -> list[NodeResult]:
    """What no node can say about itself: a finding the image could cause is proven only by another host of
    its scale set that passed (else the node is inconclusive, `unconfirmed`, until second_host.confirm has
    checked one), and two nodes naming one physical host are both marked (neither is reported)."""
    passed_sets = {r.scale_set for r in results if r.status == PASSED}
    out = []
    for r in results:
        if unconfirmed(r) and r.scale_set not in passed_sets:
            r = dataclasses.replace(r, status=INCONCLUSIVE, reason_code="unconfirmed", reason=(
                f"{r.summary()}: a finding the image (its driver or tools) could cause as well, and no other host of "
                f"{r.scale_set} passed to show it is this host's; nothing is replaced or reported until a second host "
                "passes ('provision report' and 'create --replace-unhealthy' check one first)"))
        out.append(r)
    return shared_hosts(out)


def shared_hosts(results: list[NodeResult]) -> list[NodeResult]:
    """Nodes that name the same physical host (PhysicalHostName, KVP pool 3), each with the others' names."""
    by_host: dict[str, list[str]] = {}
    for r in results:
        if r.physical_host:
            by_host.setdefault(r.physical_host.lower(), []).append(r.computer_name)
    out = []
    for r in results:
        names = by_host.get((r.physical_host or "").lower(), [])
        others = tuple(n for n in names if n != r.computer_name) if len(names) > 1 else ()
        out.append(dataclasses.replace(r, shared_host=others) if others != r.shared_host else r)
    return out


def _note_outbound(results: list[NodeResult], outbound: dict[str, dict]) -> list[NodeResult]:
    """A node that did not answer on a subnet without outbound: that is the likely reason, say so."""
    out = []
    for r in results:
        path = outbound.get(r.scale_set)
        if r.status == UNREACHABLE and r.reason_code in ("timeout", "no_verdict") and path and not path["ok"]:
            r = NodeResult(**{**r.__dict__, "reason_code": "no_outbound",
                              "reason": f"{r.reason}; the subnet has no outbound path, which Run Command needs to "
                                        "return results"})
        out.append(r)
    return out


def check(session, name: str, resource_group: str, options: CheckOptions = CheckOptions(), *,
          instances: set[str] | None = None, on_node: Callable[[NodeResult], None] | None = None,
          on_start: Callable[[int], None] | None = None) -> HealthReport:
    """Check every node of the cluster (or only `instances`, VM resource ids), in parallel, as `options` say.

    Returns the HealthReport (a list of NodeResult plus the outbound path and NCCL results); raises
    only for the cluster as a whole (not found, no permission).
    """
    refuse(options.findings())  # the verb's door: out-of-range options stop it before anything is read
    return inspect(session, live_cluster(session, name, resource_group), options, instances=instances,
                   on_node=on_node, on_start=on_start)


def inspect(session, cluster: LiveCluster, options: CheckOptions, *, instances: set[str] | None = None,
            on_node: Callable[[NodeResult], None] | None = None,
            on_start: Callable[[int], None] | None = None) -> HealthReport:
    """`check` of a cluster already found, with options already checked (the gate's rounds, `report`)."""
    name, resource_group = cluster.name, cluster.resource_group
    node_timeout, parallel = options.node_timeout, options.parallel
    try:
        scale_sets = [resource_types.VMSS.get(session, resource_group, v) for v in cluster.scale_sets]
        subnets: dict[str, dict | None] = {}
        outbound = [_outbound(session, v, subnets) for v in scale_sets]
        jobs: list[tuple[Instance, dict]] = []
        sets = []
        for vmss in scale_sets:
            exp = expectations(vmss)
            body = check_body(vmss, node_timeout)
            listed = list_instances(session, resource_group, vmss)
            sets.append({"name": vmss.name, "size": vmss.sku.name, "capacity": vmss.sku.capacity,
                         "instances": [i.instance_id for i in listed], "expected": exp.__dict__})
            wanted = [i for i in listed if instances is None or i.resource_id.lower() in instances]
            jobs += [(i, body) for i in wanted]
    except AzgpuError:
        raise
    except Exception as exc:
        raise to_azure_error(exc, f"cluster {name} in {resource_group}") from None
    if on_start:
        on_start(len(jobs))
    results = run_all(session, resource_group, jobs, node_timeout, parallel, on_node)
    results = _note_outbound(results, {o["scale_set"]: o for o in outbound})
    if instances is None:  # a partial check (the replacements of a round) is judged by the gate
        results = judged(common_failures(results))
    report = HealthReport(name, resource_group, results, sets, outbound)
    if options.nccl:
        report.nccl = nccl_check(session, cluster, scale_sets, report, node_timeout)
    return report


def _ips(session, resource_group: str, vmss_name: str) -> dict[str, str]:
    out = {}
    for nic in session.network.network_interfaces.list_virtual_machine_scale_set_network_interfaces(
            resource_group, vmss_name):
        instance = nic.virtual_machine.id.rsplit("/", 1)[-1] if nic.virtual_machine else ""
        ip = next((c.private_ip_address for c in nic.ip_configurations or [] if c.private_ip_address), None)
        if ip and nic.primary is not False:
            out.setdefault(instance, ip)
    return out


def nccl_check(session, cluster: LiveCluster, scale_sets: list[Any], report: HealthReport,
               timeout: float) -> list[dict[str, Any]]:
    """all_reduce_perf across the nodes of each InfiniBand domain (scale set) that passed, against the
    size's expected bus bandwidth: what a bad fabric shows and single-node checks miss.

    mpirun reaches the other nodes over ssh as the admin user with a key made on the launcher for this
    check: the private key never leaves it, the others accept it only from the launcher's address and
    only for NCCL_KEY_HOURS (authorized_keys from= and expiry-time=), and it is removed afterwards.
    """
    resource_group = cluster.resource_group
    out = []
    for vmss in scale_sets:
        exp = expectations(vmss)
        passed = [n for n in report.nodes if n.scale_set == vmss.name and n.passed]
        entry: dict[str, Any] = {"scale_set": vmss.name, "nodes": len(passed), "expected_busbw_gbps":
                                 exp.nccl_busbw_gbps or None, "measured_busbw_gbps": None}
        if exp.ib_ports == 0:
            out.append({**entry, "status": "skipped", "message": f"{vmss.sku.name} has no InfiniBand"})
            continue
        if len(passed) < 2:
            out.append({**entry, "status": "skipped", "message": "fewer than 2 healthy nodes in the scale set"})
            continue
        ips = _ips(session, resource_group, vmss.name)
        nodes = [Instance(n.scale_set, n.instance_id, n.resource_id, n.computer_name, n.vm_id, "running",
                          vmss.sku.name) for n in passed if n.instance_id in ips]
        if len(nodes) < 2:
            out.append({**entry, "status": "skipped", "message": "fewer than 2 healthy nodes with a private IP"})
            continue
        launcher, others = nodes[0], nodes[1:]
        profile = cluster.profile or live_profile(vmss)[0]  # the profile create holds, or the cluster's tag's
        admin = getattr(getattr(getattr(vmss, "virtual_machine_profile", None), "os_profile", None),
                        "admin_username", None) or "azureuser"
        base = {**exp.settings(), "AZGPU_ADMIN_USER": admin}
        entry.update(launcher=launcher.computer_name)
        key = check_node_raw(session, resource_group, launcher, "nccl-keygen", base, timeout)
        ran = _nccl_steps(session, resource_group, launcher, others, key, _NcclRun(base, ips, profile, timeout, admin))
        if "error" in ran and "ok" not in ran:
            out.append({**entry, "status": "error", "message": ran["error"]})
            continue
        if not ran.get("ok"):
            out.append({**entry, "status": "error", "message": f"all_reduce_perf did not run: {ran.get('error')}"})
            continue
        busbw = ran.get("busbw_gbps")
        entry.update(measured_busbw_gbps=busbw, ranks=ran.get("ranks"), size_bytes=ran.get("size_bytes"))
        if ran.get("wrong"):
            out.append({**entry, "status": FAILED, "message": f"{ran['wrong']} wrong values in the reduction"})
        elif exp.nccl_busbw_gbps and (busbw or 0) < exp.nccl_busbw_gbps:
            out.append({**entry, "status": FAILED, "message": f"bus bandwidth {busbw} GB/s is below the "
                                                              f"{exp.nccl_busbw_gbps:g} GB/s expected of "
                                                              f"{vmss.sku.name}"})
        else:
            note = "" if exp.nccl_busbw_gbps else f" (no documented figure for {vmss.sku.name}: not judged)"
            out.append({**entry, "status": PASSED, "message": f"bus bandwidth {busbw} GB/s{note}"})
    return out


@dataclass(frozen=True)
class _NcclRun:
    """What every step of one scale set's NCCL run shares: the node check's settings, the private IPs by
    instance id, the profile (its NCCL environment), the seconds a step may take, and the admin user."""

    base: dict[str, Any]
    ips: dict[str, str]
    profile: Any
    timeout: float
    admin: str


def _nccl_steps(session, resource_group: str, launcher: Instance, others: list[Instance], key: dict,
                run: _NcclRun) -> dict[str, Any]:
    """Trust the launcher's key on the others, run all_reduce_perf, and always clean up after: the others
    forget the key, and the launcher drops its key pair (it made the private key; nothing else needs it).
    all_reduce_perf's verdict, or {"error": why} when it never ran."""
    base, ips, profile, timeout, admin = run.base, run.ips, run.profile, run.timeout, run.admin
    pubkey = key.get("pubkey") if key.get("ok") and valid_nccl_pubkey(key.get("pubkey")) else ""
    trusted_any = False
    try:
        if not key.get("ok") or not key.get("pubkey"):
            return {"error": f"no key on the launcher: {key.get('error')}"}
        if not pubkey:
            # Written into every other node's authorized_keys: only one exact key line, never what else it says.
            return {"error": "the launcher answered with something other than one ed25519 public key line: refused, "
                             "nothing was trusted"}
        expiry = (datetime.datetime.now(datetime.UTC) + datetime.timedelta(hours=NCCL_KEY_HOURS))
        trust = {**base, "AZGPU_NCCL_PUBKEY": pubkey, "AZGPU_NCCL_FROM": ips[launcher.instance_id],
                 "AZGPU_NCCL_EXPIRY": expiry.strftime("%Y%m%d%H%M")}
        trusted_any = True
        with ThreadPoolExecutor(max_workers=min(PARALLEL, len(others))) as pool:
            trusted = list(pool.map(lambda n: check_node_raw(session, resource_group, n, "nccl-trust", trust,
                                                             timeout), others))
        refused = [t.get("error") for t in trusted if not t.get("ok")]
        if refused:
            return {"error": f"could not set up ssh: {refused[0]}"}
        hosts = " ".join(ips[n.instance_id] for n in [launcher, *others])
        env = " ".join(f"{k}={v}" for k, v in (profile.nccl.get("env") or {}).items())
        return check_node_raw(session, resource_group, launcher, "nccl-run",
                              {**base, "AZGPU_NCCL_HOSTS": hosts, "AZGPU_NCCL_ENV": env,
                               "AZGPU_NCCL_TIMEOUT": int(max(60, timeout - 60))}, timeout)
    finally:
        cleanup = {"AZGPU_ADMIN_USER": admin, "AZGPU_NCCL_PUBKEY": pubkey}
        targets = [launcher, *(others if trusted_any else [])]
        with ThreadPoolExecutor(max_workers=min(PARALLEL, len(targets))) as pool:
            list(pool.map(lambda n: check_node_raw(session, resource_group, n, "nccl-untrust", cleanup, timeout),
                          targets))


def replaceable(node: NodeResult) -> bool:
    """Only a node proven faulty: one whose verdict names a host fault. A node that did not answer (a 500
    or a dropped connection from Run Command, a timeout) or answered inconclusively may sit on a healthy
    host: it is shown with its reason, never deleted or reported."""
    return node.status == FAILED


def _round(number: int, report_nodes: list[NodeResult], action: str) -> dict[str, Any]:
    return {"round": number, "action": action, "checked": len(report_nodes),
            "passed": sum(1 for n in report_nodes if n.status == PASSED),
            "failed": [n.computer_name for n in report_nodes if n.status == FAILED],
            "inconclusive": [n.computer_name for n in report_nodes if n.status == INCONCLUSIVE],
            "unreachable": [n.computer_name for n in report_nodes if n.status == UNREACHABLE]}


def round_notices(on_notice: Callable[[str], None]) -> Callable[[dict[str, Any]], None]:
    """gate's on_round hook that tells each round as one line: 'health round 1: 15 of 16 passed, 1 not'."""

    def on_round(r: dict[str, Any]) -> None:
        bad = len(r["failed"]) + len(r.get("inconclusive", [])) + len(r["unreachable"])
        on_notice(f"health round {r['round']}: {r['passed']} of {r['checked']} passed"
                  + (f", {bad} not" if bad else ""))

    return on_round


def _replace(session, resource_group: str, bad: list[NodeResult], report: HealthReport) -> set[str]:
    """Delete the bad instances, scale each scale set back to its capacity; the new instances' ids."""
    by_set: dict[str, list[str]] = {}
    for node in bad:
        by_set.setdefault(node.scale_set, []).append(node.instance_id)
    sets = {s["name"]: s for s in report.scale_sets}
    try:
        pollers = [resource_types.VMSS.begin_delete_instances(session, resource_group, name, ids)
                   for name, ids in by_set.items()]
        for poller in pollers:
            poller.result()
        pollers = [resource_types.VMSS.begin_set_capacity(session, resource_group, name, sets[name]["size"],
                                                          sets[name]["capacity"])
                   for name in by_set]
        for poller in pollers:
            poller.result()
        new: set[str] = set()
        for name in by_set:
            before = set(sets[name]["instances"])
            for vm in INSTANCES.list(session, resource_group, name):
                if vm.instance_id not in before:
                    new.add(vm.id.lower())
    except Exception as exc:
        raise to_azure_error(exc, "replacing unhealthy instances") from None
    return new


def replacement_stop(checked: list[NodeResult], bad: list[NodeResult], previous: set, rounds: int,
                     max_rounds: int) -> str | None:
    """Why no more nodes are replaced, or None: the last round's replacements show the finding of the nodes
    they replaced (`previous`: those nodes' signatures), the rounds are used up, or every node the last
    round checked failed (a fault of the image, driver or network rather than of each host). `checked`:
    the nodes the last round checked; `bad`: the replaceable nodes now."""
    followed = [n for n in bad if n in checked and signature(n) and signature(n) in previous]
    if followed and len(followed) == len([n for n in bad if n in checked]):
        return ("the replacement(s) show the same finding as the node(s) they replaced "
                f"({followed[0].summary()}): it followed them to new hosts, so it points at the image, the "
                "driver or the configuration; nothing more was replaced")
    if rounds > max_rounds:
        return f"still unhealthy after {max_rounds} replacement round(s)"
    fresh = [n for n in checked if n in bad]
    if len(checked) > 1 and len(fresh) == len(checked):
        return (f"every node checked in the last round ({len(checked)}) failed: that points at the image, the "
                "driver or the network rather than the hosts, so none was replaced")
    return None


def gate(session, cluster: LiveCluster, options: GateOptions, hooks: GateHooks = NO_HOOKS) -> GateResult:
    """Check the cluster; with options.replace_unhealthy, delete the nodes that fail, scale back out and check
    the new ones, at most options.max_rounds times. The options were checked at the verb's door (create).
    hooks.before_delete(nodes) runs while the failing VMs still exist (a report to Azure's Guest Health
    Reporting belongs there); if it raises, nothing is deleted. With replace, a finding the image could
    cause is first confirmed on a second host (second_host)."""
    from . import second_host

    name, resource_group = cluster.name, cluster.resource_group
    replace, max_rounds, node = options.replace_unhealthy, options.max_rounds, options.node
    before_delete, on_node, on_round, on_start, on_notice = (hooks.before_delete, hooks.on_node, hooks.on_round,
                                                             hooks.on_start, hooks.on_notice)
    report = inspect(session, cluster, node, on_node=on_node, on_start=on_start)
    if replace:
        report.nodes = second_host.confirm(session, resource_group, report.nodes, node, on_notice=on_notice)
    rounds = [_round(0, report.nodes, "check")]
    previous: set = set()
    if on_round:
        on_round(rounds[-1])
    replaced: list[dict[str, Any]] = []
    stopped = None
    checked = report.nodes
    while replace and not report.healthy:
        bad = [n for n in report.nodes if replaceable(n)]
        if not bad:
            stopped = ("no node can be replaced: " + ("the multi-node bandwidth is low while every node passed on its "
                                                      "own (see nccl)" if report.nccl and not report.inconclusive
                                                      and not report.unreachable else
                                                      "no node shows a host fault (the others are inconclusive or "
                                                      "unreachable, which a new instance does not fix)"))
            break
        stopped = replacement_stop(checked, bad, previous, len(rounds), max_rounds)
        if stopped:
            break
        if before_delete:
            before_delete(list(bad))
        previous = {signature(n) for n in bad}
        new = _replace(session, resource_group, bad, report)
        replaced += [{"round": len(rounds), "scale_set": n.scale_set, "instance_id": n.instance_id,
                      "computer_name": n.computer_name, "physical_host": n.physical_host, "resource_id": n.resource_id,
                      "summary": n.summary()} for n in bad]
        again = inspect(session, cluster, dataclasses.replace(node, nccl=False), instances=new, on_node=on_node,
                        on_start=on_start)
        gone = {n.resource_id.lower() for n in bad}
        fresh_ids = {n.resource_id.lower() for n in again.nodes}
        nodes = judged([n for n in report.nodes if n.resource_id.lower() not in gone] + again.nodes)
        nodes = second_host.confirm(session, resource_group, nodes, node, only=fresh_ids, on_notice=on_notice)
        report = HealthReport(name, resource_group,
                              sorted(nodes, key=lambda r: (r.scale_set, int(r.instance_id) if r.instance_id.isdigit()
                                                           else 0)), again.scale_sets, again.outbound)
        if node.nccl:
            vmss = [resource_types.VMSS.get(session, resource_group, s["name"]) for s in report.scale_sets]
            report.nccl = nccl_check(session, cluster, vmss, report, node.node_timeout)
        checked = [n for n in report.nodes if n.resource_id.lower() in fresh_ids]
        rounds.append(_round(len(rounds), checked, f"replaced {len(bad)}"))
        if on_round:
            on_round(rounds[-1])
    return GateResult(report, rounds, replaced, stopped)
