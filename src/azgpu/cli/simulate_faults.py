"""`provision simulate fault|fabric|rack`: break simulated nodes for the health gate (state file only).

`simulate fault` breaks simulated nodes (or the next ones to be created) so `provision check` and
`create --check` have something to find; `simulate fabric` slows a scale set's InfiniBand fabric for
the multi-node NCCL check. Nothing here talks to Azure.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import click

from ..errors import InputError
from ..ownership import cluster_of
from ..resource_types import VMSS
from .options import common, emit
from .simulate import group


def _fake(state: str | None, *, new: bool = False):
    """The simulated cloud of the state file; new: start one when there is none yet (faults queued
    for the instances a coming 'create --simulate' makes)."""
    from ..deploy.simulate import simulated_azure, state_file

    path = state_file(state)
    if not new and not path.exists():
        raise InputError(f"no simulated cloud at {path}", code="NO_SIMULATED_CLOUD",
                         remedy="create one first, e.g. 'provision create "
                                "--profile nd-a100-v4 -n demo -g demo-rg -l eastus --nodes 4 --generate-ssh-keys "
                                "--simulate' (or name it with --simulate-state)")
    return simulated_azure(state)


def _instance(fake, name: str | None, instance: str) -> str:
    """A computer name, SCALESET/ID, a resource id, or an instance id within cluster NAME."""
    if instance.isdigit():
        if not name:
            raise InputError(f"--instance {instance} is an instance id: name the cluster with -n/--name",
                             code="MISSING_ARGUMENT",
                             remedy="add -n with the cluster's name, or give SCALESET/ID or the computer name")
        sets = sorted({r["name"] for r in fake.resources(type=VMSS.type)
                       if cluster_of(r.get("tags")) == name})
        if len(sets) != 1:
            raise InputError(f"cluster '{name}' has {len(sets)} scale sets: which one holds instance {instance}?",
                             code="AMBIGUOUS_INSTANCE", remedy="give it as SCALESET/ID, e.g. " +
                                                              (f"{sets[0]}/{instance}" if sets else "c1-vmss000/0"))
        return f"{sets[0]}/{instance}"
    return instance


def _keep_state(ctx: click.Context, _param, value):
    """--simulate-state of `simulate fault`, kept with the command's settings (obj) rather than passed."""
    ctx.ensure_object(dict)["simulate_state"] = value
    return value


def _fault_option(row) -> Callable:
    """The click option of one row of the fake's node fault table."""
    if row.kind == "flag":
        return click.option(row.option, row.name, is_flag=True, default=None, help=row.help)
    kind = {"int": int, "float": float, "text": str}.get(row.kind) or click.Choice(list(row.choices))
    return click.option(row.option, row.name, type=kind, default=None, metavar=row.metavar, help=row.help)


def fault_options(fn: Callable) -> Callable:
    """An option per row of azgpu.testing.node_fault_table (in its order), collected into one mapping,
    `fault`, in the keywords make_unhealthy and unhealthy_next take."""
    from ..testing.node_fault_table import NODE_FAULTS

    @functools.wraps(fn)
    def collected(*args, **kwargs):
        fault = {}
        for row in NODE_FAULTS:
            value = kwargs.pop(row.name)
            fault[row.name] = row.from_option(value) if row.from_option and value is not None else value
        return fn(*args, fault=fault, **kwargs)

    for row in reversed(NODE_FAULTS):
        collected = _fault_option(row)(collected)
    return collected


def register(cli: click.Group) -> None:
    simulate_group = group(cli)

    @simulate_group.command("fault")
    @click.option("-n", "--name", default=None, help="Cluster name (to resolve a bare instance id).")
    @click.option("--instance", "instances", multiple=True,
                  help="Computer name, SCALESET/INSTANCE_ID, or an instance id with -n (repeatable).")
    @click.option("--next", "next_count", type=int, default=None,
                  help="Apply the fault to the next N instances created instead (e.g. before create --check); "
                       "an instance whose size cannot take it (a GB-only fault on H100s) leaves it queued.")
    @fault_options
    @click.option("--simulate-state", default=None, expose_value=False, callback=_keep_state,
                  help="File holding the simulated cloud (default: user state dir).")
    @common
    def fault_cmd(obj, name, instances, next_count, fault):
        """Make simulated nodes unhealthy (a GPU missing, an IB port down or slow, an Xid, a hang ...), or faulty in
        the ways only 'provision certify' finds (a degraded or flapping port, a GPU throttling under load ...)."""
        if bool(instances) == (next_count is not None):
            raise InputError("name the nodes with --instance, or the next ones to be created with --next N",
                             code="MISSING_ARGUMENT",
                             remedy="e.g. --next 2 --gpus 7, or --instance c1-000-000003 --xid 79")
        from ..testing.node_fault_table import validate_fault

        fake = _fake(obj.get("simulate_state"), new=next_count is not None)
        try:
            if next_count is not None:
                fake.unhealthy_next(next_count, **fault)
                result = {"next_instances": next_count, "fault": validate_fault(fault)}
            else:
                nodes = [fake.make_unhealthy(_instance(fake, name, i), **fault) for i in instances]
                result = {"nodes": [{"computer_name": n["computer"], "physical_host": n["physical_host"],
                                     "faults": n["faults"]} for n in nodes]}
        except (KeyError, ValueError) as exc:
            raise InputError(str(exc).strip("'\""), code="INVALID_FAULT",
                             remedy="see 'provision simulate fault --help'") from None
        emit(result, obj)

    @simulate_group.command("fabric")
    @click.option("--scale-set", required=True, help="Scale set name.")
    @click.option("--factor", type=float, required=True, help="Share (0-1) of the normal all-reduce bandwidth.")
    @click.option("--simulate-state", default=None, help="File holding the simulated cloud (default: user state dir).")
    @common
    def fabric_cmd(obj, scale_set, factor, simulate_state):
        """Slow down a simulated scale set's InfiniBand fabric (what only 'check --nccl' sees)."""
        fake = _fake(simulate_state)
        try:
            fake.degrade_fabric(scale_set, factor)
        except (KeyError, ValueError) as exc:
            raise InputError(str(exc).strip("'\""), code="INVALID_FAULT",
                             remedy="name a scale set of the simulated cloud and a factor from 0 to 1") from None
        emit({"scale_set": scale_set, "factor": factor}, obj)

    @simulate_group.command("rack")
    @click.option("-n", "--name", default=None, help="Cluster name (to resolve a bare instance id).")
    @click.option("--short-next", type=int, default=None,
                  help="The next N GB200/GB300 racks filled are one node short: one VM Azure reports in the rack "
                       "sits in an NVLink domain of its own (e.g. before create --check).")
    @click.option("--fabric-incomplete", "incomplete", multiple=True,
                  help="A node (computer name, SCALESET/ID, or an id with -n) whose NVLink fabric never completed.")
    @click.option("--simulate-state", default=None, help="File holding the simulated cloud (default: user state dir).")
    @common
    def rack_cmd(obj, name, short_next, incomplete, simulate_state):
        """Break the NVLink racks of simulated ND GB200/GB300 v6 clusters (docs/gb-racks.md)."""
        if not short_next and not incomplete:
            raise InputError("nothing to break", code="MISSING_ARGUMENT",
                             remedy="pass --short-next (e.g. --short-next 1) or --fabric-incomplete with a node's "
                                    "computer name")
        fake = _fake(simulate_state, new=bool(short_next) and not incomplete)
        result: dict = {}
        try:
            if short_next:
                fake.short_rack_next(short_next)
                result["short_next"] = short_next
            if incomplete:
                nodes = [fake.fabric_incomplete(_instance(fake, name, i)) for i in incomplete]
                result["nodes"] = [{"computer": n["computer"], "fabric": n["fabric"]} for n in nodes]
        except (KeyError, ValueError) as exc:
            raise InputError(str(exc).strip("'\""), code="INVALID_FAULT",
                             remedy="name an instance of the simulated cloud, and a count of 1 or more") from None
        emit(result, obj)
