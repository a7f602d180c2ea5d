"""Resume, suspend and resume-fail: what slurmctld's power-saving programs do to azgpu's scale sets.

Resume grows the scale set that holds the requested names with `create` itself (its preflight,
quota check and capacity fallback), checks only the new instances with the health gate's node
check, and gives slurmctld the address of each node that passed. A failing node is deleted (as
`create --replace-unhealthy` does: only replaceable failures) and another is grown for its name,
at most `max_rounds` times; names still without a healthy node end on the resume-fail path.
Suspend deletes exactly the instances that carry the named nodes, in scale sets tagged as this
cluster's, and nothing else. Everything runs under the cluster's lock, so concurrent calls
serialise and a second resume of the same names finds them done.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..deploy.interface import CheckOptions
from ..errors import AzgpuError, InputError, NotFoundError
from ..health.limits import MAX_ROUNDS
from ..hostlist import compress
from . import state
from .names import Domain, domains, expand, locate

REASON_LIMIT = 200  # characters of a failure kept in the node's Reason


class ResumeIncomplete(AzgpuError):
    """Some nodes did not come up (they are DOWN with the reason); exit 1, as a failed check does."""

    exit_code = 1
    default_code = "SLURM_RESUME_INCOMPLETE"


class EventLog:
    """One line per event, appended to the file slurm.conf(5) and the Power Saving Guide's example
    programs write to (a log beside slurmctld's), and echoed to stderr (slurmctld discards it)."""

    def __init__(self, path: str | None, echo: Callable[[str], None] | None = None):
        self.path = path
        self.echo = echo

    def __call__(self, command: str, hostlist: str, message: str) -> None:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        line = f"{stamp} azgpu-slurm[{os.getpid()}] {command} {hostlist}: {' '.join(message.split())}"
        if self.path:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o640)
            with os.fdopen(fd, "a") as fh:
                fh.write(line + "\n")
        if self.echo:
            self.echo(line)


class Slurmctld:
    """`scontrol update` (slurm.conf(5): a power-saving program reports through scontrol)."""

    def __init__(self, scontrol: str = "scontrol"):
        self.scontrol = scontrol
        self.calls: list[list[str]] = []

    def update(self, nodes: str, **fields: str) -> None:
        argv = [self.scontrol, "update", f"nodename={nodes}", *(f"{k}={v}" for k, v in fields.items())]
        self.calls.append(argv)
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise InputError(f"cannot run '{self.scontrol}': {exc}", code="SCONTROL_FAILED",
                             remedy="run the program where slurmctld runs, or pass --scontrol PATH") from None
        if done.returncode != 0:
            raise InputError(f"'{' '.join(argv[1:])}' failed: {(done.stderr or done.stdout).strip()[:300]}",
                             code="SCONTROL_FAILED", remedy="check that slurmctld runs and knows these nodes")


@dataclass
class Context:
    request: Any  # azgpu.request.Request of the cluster file
    spec: Any  # its validated Spec (the most nodes per scale set)
    open_session: Callable[[], Any]  # a context manager giving a Session
    state_dir: str
    slurm: Slurmctld
    log: EventLog
    zones: list[str] = field(default_factory=list)
    fallback_locations: list[str] = field(default_factory=list)
    max_rounds: int = MAX_ROUNDS
    node_check: CheckOptions = CheckOptions()
    join: Any = None  # azgpu.slurm.bootstrap.JoinSettings: start slurmd on each node that passed (None: leave it)

    @property
    def cluster(self) -> str:
        return self.spec.names.cluster

    @property
    def resource_group(self) -> str:
        return self.request.resource_group

    @property
    def domains(self) -> list[Domain]:
        return domains(self.spec)


# ------------------------------------------------------------------------------------ Azure reads


def _inventory(session, ctx: Context) -> dict[str, dict[str, Any]]:
    """This cluster's scale sets (found by azgpu's tags): capacity and nodes by instance id."""
    from ..deploy.lifecycle import _nodes, find_cluster

    out = {}
    try:
        found = find_cluster(session, ctx.cluster, ctx.resource_group).scale_sets
    except NotFoundError:  # no resource group yet: the first resume creates it
        return out
    for vmss in found:
        nodes, _ = _nodes(session, ctx.resource_group, vmss)
        out[vmss.name] = {"capacity": (vmss.sku.capacity if vmss.sku else 0) or 0, "id": vmss.id,
                          "nodes": {n["instance_id"]: n for n in nodes}}
    return out


def _forget_gone(data: dict[str, Any], inventory: dict[str, dict[str, Any]]) -> list[str]:
    gone = [name for name, v in data["nodes"].items()
            if v["instance_id"] not in inventory.get(v["scale_set"], {}).get("nodes", {})]
    for name in gone:
        del data["nodes"][name]
    return gone


def _delete(session, ctx: Context, scale_set: str, ids: list[str], inventory) -> None:
    from .. import resource_types
    from ..deploy.arm import to_azure_error

    if scale_set not in inventory:  # not tagged as this cluster's: never touched
        raise InputError(f"scale set '{scale_set}' is not one of cluster '{ctx.cluster}'", code="NOT_OURS",
                         remedy="check the cluster file the power-saving programs use")
    try:
        resource_types.VMSS.begin_delete_instances(session, ctx.resource_group, scale_set, ids).result()
    except Exception as exc:
        raise to_azure_error(exc, f"deleting instances {', '.join(ids)} of {scale_set}") from None


# ------------------------------------------------------------------------------------ resume


def _whole_racks(ctx: Context, capacity: int, most: int) -> int:
    """On rack-scale NVLink sizes (GB200/GB300: 18 VMs a rack) a scale set grows by whole racks, as
    create sizes them; the extra nodes wait, unnamed, for the next resume."""
    from ..deploy.lifecycle import rack_size

    per_rack = rack_size(ctx.spec.profile)
    if not per_rack:
        return capacity
    rounded = -(-capacity // per_rack) * per_rack
    return rounded if rounded <= most else capacity


def resume(ctx: Context, hostlist: str) -> dict[str, Any]:
    """Bring up the named nodes; returns {"resumed": [...], "failed": [...]}."""
    wanted = locate(ctx.domains, expand(hostlist))
    ctx.log("resume", hostlist, f"requested {sum(map(len, wanted.values()))} node(s) in "
            + ", ".join(ctx.domains[i].scale_set for i in wanted))
    resumed: list[str] = []
    failed: dict[str, str] = {}
    with state.locked(ctx.state_dir, ctx.cluster), ctx.open_session() as session:
        for index, names in wanted.items():
            try:
                done, left = _resume_domain(session, ctx, index, names, hostlist)
            except Exception as exc:  # any failure ends on the resume-fail path, with its code and remedy
                if not isinstance(exc, AzgpuError):
                    from ..deploy.arm import to_azure_error

                    exc = to_azure_error(exc, f"resuming {compress(names)}")
                ctx.log("resume", hostlist, f"ERROR [{exc.code}] {exc.message}"
                        + (f"; remedy: {exc.remedy}" if exc.remedy else ""))
                up = state.load(ctx.state_dir, ctx.cluster)["nodes"]  # those given an address before it failed
                done = [n for n in names if n in up]
                left = {n: f"{exc.code}: {exc.message}" for n in names if n not in up}
            resumed += done
            failed.update(left)
    if failed:
        by_reason: dict[str, list[str]] = {}
        for name, reason in failed.items():
            by_reason.setdefault(reason, []).append(name)
        for reason, names in by_reason.items():
            resume_fail(ctx, compress(names), reason=reason, command="resume")
    return {"resumed": resumed, "failed": sorted(failed)}


def _resume_domain(session, ctx: Context, index: int, names: list[str], hostlist: str) -> tuple[list[str], dict]:
    from ..deploy import CreateOptions, check, create
    from ..deploy.health_gate import replaceable
    from ..health.results import PASSED

    domain = ctx.domains[index]
    vmss = domain.scale_set
    data = state.load(ctx.state_dir, ctx.cluster)
    inventory = _inventory(session, ctx)
    for name in _forget_gone(data, inventory):
        ctx.log("resume", hostlist, f"{name}: its VM is gone; a new one is found for it")
    ready = [n for n in names if n in data["nodes"]]
    todo = [n for n in names if n not in data["nodes"]]
    for name in ready:  # another call (or an earlier run of this one) already brought it up
        node = data["nodes"][name]
        ctx.slurm.update(name, nodeaddr=node["ip"], nodehostname=node["hostname"])
        ctx.log("resume", hostlist, f"{name}: already up on {node['hostname']} ({node['ip']}), address given again")
    done = list(ready)
    kept: set[str] = set()  # instances that did not pass and are not deleted: left for inspection
    rounds = grown = 0
    reason = "AZGPU_RESUME_INCOMPLETE: no healthy node for it"
    while todo:
        held = {v["instance_id"] for v in data["nodes"].values() if v["scale_set"] == vmss}
        current = inventory.get(vmss, {"capacity": 0, "nodes": {}})
        free = [i for i in sorted(current["nodes"], key=lambda x: int(x) if x.isdigit() else 0)
                if i not in held and i not in kept]
        if len(free) < len(todo):
            if grown > ctx.max_rounds:  # each create should have added them; do not loop on Azure
                break
            capacities = [inventory.get(d.scale_set, {}).get("capacity", 0) for d in ctx.domains]
            most = domain.capacity + len(kept)
            capacities[index] = _whole_racks(ctx, current["capacity"] + len(todo) - len(free), most)
            if capacities[index] > most:
                reason = f"AZGPU_DOMAIN_FULL: {vmss} holds at most {domain.capacity} node(s)"
                break
            ctx.log("resume", hostlist, f"growing {vmss} from {current['capacity']} to {capacities[index]} instance(s)")
            create(session, ctx.request, CreateOptions(
                scale_sets=tuple(capacities), zones=tuple(ctx.zones), fallback_locations=tuple(ctx.fallback_locations),
                on_notice=lambda m: ctx.log("resume", hostlist, m)))
            grown += 1
            inventory = _inventory(session, ctx)
            continue
        candidates = free[:len(todo)]
        ids = {f"{inventory[vmss]['id']}/virtualMachines/{i}".lower(): i for i in candidates}
        ctx.log("resume", hostlist, f"health check of {len(candidates)} node(s) of {vmss}")
        report = check(session, ctx.cluster, ctx.resource_group, ctx.node_check, instances=set(ids))
        by_instance = {n.instance_id: n for n in report.nodes if n.scale_set == vmss}
        bad, stuck = [], []
        for instance in candidates:
            result = by_instance.get(instance)
            node = inventory[vmss]["nodes"][instance]
            if result is not None and result.status == PASSED:
                name = todo.pop(0)
                ctx.slurm.update(name, nodeaddr=node["ip"], nodehostname=node["hostname"])
                data["nodes"][name] = {"scale_set": vmss, "instance_id": instance, "hostname": node["hostname"],
                                       "ip": node["ip"]}
                state.save(ctx.state_dir, ctx.cluster, data)
                done.append(name)
                ctx.log("resume", hostlist, f"{name}: {node['hostname']} ({node['ip']}) passed the health check; "
                        "address given to slurmctld")
                continue
            summary = result.summary() if result is not None else "not checked"
            ctx.log("resume", hostlist, f"{node['hostname']} (instance {instance}) did not pass: {summary}")
            (bad if result is not None and replaceable(result) else stuck).append(instance)
        joining = [n for n in done if n not in ready and n in data["nodes"] and data["nodes"][n]["scale_set"] == vmss
                   and not data["nodes"][n].get("joined")]
        if ctx.join is not None and joining:  # the node bootstrap: slurmd with its Slurm name (azgpu.slurm.bootstrap)
            from .bootstrap import Target, join_all

            targets = [Target(n, vmss, data["nodes"][n]["instance_id"]) for n in joining]
            problems = join_all(session, ctx.resource_group, ctx.spec, targets, ctx.join,
                                lambda m: ctx.log("resume", hostlist, m))
            for name in joining:
                if name in problems:  # its VM is kept for inspection; the name waits for a later resume
                    kept.add(data["nodes"].pop(name)["instance_id"])
                    done.remove(name)
                    todo.append(name)
                    reason = f"SLURM_JOIN_FAILED: {problems[name]}"
                else:
                    data["nodes"][name]["joined"] = True
            state.save(ctx.state_dir, ctx.cluster, data)
            if problems:  # a bootstrap that fails fails alike on every new VM: replace nothing
                break
        if stuck:
            # Unreachable for a reason a new VM does not fix (no outbound path, VM agent busy ...): as the
            # health gate, replace nothing and report them.
            kept.update(stuck + bad)
            reason = f"NODES_UNREACHABLE: {len(stuck)} new node(s) of {vmss} could not be checked (see the log)"
            break
        if bad:
            rounds += 1
            if rounds > ctx.max_rounds:
                kept.update(bad)
                reason = f"UNHEALTHY_NODES: new nodes of {vmss} still failing after {ctx.max_rounds} replacement round(s)"
                break
            ctx.log("resume", hostlist, f"deleting {len(bad)} failing instance(s) of {vmss}: {', '.join(bad)}")
            _delete(session, ctx, vmss, bad, inventory)
            inventory = _inventory(session, ctx)
    if kept:
        ctx.log("resume", hostlist, f"left for inspection in {vmss}: instance(s) {', '.join(sorted(kept))}")
    left = {n: reason for n in todo}
    return done, left


# ------------------------------------------------------------------------------------ suspend, resume-fail


def suspend(ctx: Context, hostlist: str, *, command: str = "suspend") -> dict[str, Any]:
    """Delete exactly the instances that carry these names; names without one are already down."""
    wanted = locate(ctx.domains, expand(hostlist))
    removed, absent = [], []
    with state.locked(ctx.state_dir, ctx.cluster), ctx.open_session() as session:
        data = state.load(ctx.state_dir, ctx.cluster)
        inventory = _inventory(session, ctx)
        _forget_gone(data, inventory)
        for index, names in wanted.items():
            vmss = ctx.domains[index].scale_set
            mine = [n for n in names if n in data["nodes"] and data["nodes"][n]["scale_set"] == vmss]
            absent += [n for n in names if n not in mine]
            if not mine:
                continue
            ids = [data["nodes"][n]["instance_id"] for n in mine]
            ctx.log(command, hostlist, f"deleting {len(ids)} instance(s) of {vmss}: "
                    + ", ".join(f"{n}={data['nodes'][n]['hostname']}" for n in mine))
            _delete(session, ctx, vmss, ids, inventory)
            for name in mine:
                del data["nodes"][name]
            state.save(ctx.state_dir, ctx.cluster, data)
            removed += mine
    if absent:
        ctx.log(command, hostlist, f"{len(absent)} node(s) had no VM: nothing to delete for them")
    return {"removed": removed, "without_vm": absent}


def resume_fail(ctx: Context, hostlist: str, *, reason: str | None = None, command: str = "resume-fail",
                keep: bool = False) -> dict[str, Any]:
    """Slurm's path for nodes that did not come up: each is set DOWN with the reason (slurm.conf(5),
    ResumeProgram: "it should set the node state to DOWN"), and the VMs that carry them are deleted
    (unless keep) so a later job resumes them afresh."""
    reason = reason or "did not register with slurmctld within ResumeTimeout"
    ctx.log(command, hostlist, f"setting DOWN: {reason}")
    ctx.slurm.update(hostlist, state="DOWN", reason=f"azgpu {reason}"[:REASON_LIMIT])
    removed = {"removed": [], "without_vm": []}
    if not keep:
        removed = suspend(ctx, hostlist, command=command)
    return {"down": expand(hostlist), **removed}
