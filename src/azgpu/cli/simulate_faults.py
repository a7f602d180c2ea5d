"""`provision simulate fault|fabric|rack`: break simulated nodes for the health gate (state file only).

`simulate fault` breaks simulated nodes (or the next ones to be created) so `provision check` and
`create --check` have something to find; `simulate fabric` slows a scale set's InfiniBand fabric for
the multi-node NCCL check. Nothing here talks to Azure.
"""

from __future__ import annotations

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


def register(cli: click.Group) -> None:
    simulate_group = group(cli)

    @simulate_group.command("fault")
    @click.option("-n", "--name", default=None, help="Cluster name (to resolve a bare instance id).")
    @click.option("--instance", "instances", multiple=True,
                  help="Computer name, SCALESET/INSTANCE_ID, or an instance id with -n (repeatable).")
    @click.option("--next", "next_count", type=int, default=None,
                  help="Apply the fault to the next N instances created instead (e.g. before create --check).")
    @click.option("--gpus", type=int, default=None, help="GPUs the node still shows (e.g. 7 of 8).")
    @click.option("--ib-down", "ib_down", default=None,
                  help="InfiniBand device to take down (e.g. mlx5_ib3), or 'first'.")
    @click.option("--ib-rate", type=int, default=None, help="Rate in Gb/s for --ib-port (or the first port).")
    @click.option("--ib-port", default=None, help="InfiniBand device for --ib-rate.")
    @click.option("--xid", type=int, default=None, help="An Xid in the kernel log (e.g. 79).")
    @click.option("--nvidia-smi-hang", is_flag=True, default=None, help="nvidia-smi never answers.")
    @click.option("--nvlink-down", is_flag=True, default=None, help="NVLink links inactive.")
    @click.option("--run-command", type=click.Choice(["timeout", "no_verdict"]), default=None,
                  help="Run Command never returns (timeout) or returns without a verdict.")
    @click.option("--ecc", type=int, default=None, help="Uncorrectable SRAM ECC errors on the first GPU.")
    @click.option("--row-remap", type=click.Choice(["pending", "failure"]), default=None,
                  help="A row remap pending or failed on the first GPU.")
    @click.option("--gpu-lost", is_flag=True, default=None, help="The driver calls the first GPU lost (no Xid line).")
    @click.option("--no-devices", is_flag=True, default=None,
                  help="nvidia-smi finds no GPU while the PCI bus still shows them.")
    @click.option("--driver-not-loaded", is_flag=True, default=None,
                  help="nvidia-smi answers that the NVIDIA driver is not loaded (exit 9).")
    @click.option("--fabric-incomplete", is_flag=True, default=None,
                  help="GB sizes: NVLink fabric state not Completed.")
    @click.option("--imex-missing", is_flag=True, default=None, help="GB sizes: no IMEX channel.")
    @click.option("--ib-degraded", default=None, metavar="PORT[:SHARE]",
                  help="A port up at full rate that carries only SHARE of its bandwidth (default 0.6): what "
                       "'provision certify' finds and the gate does not (e.g. mlx5_ib3:0.6).")
    @click.option("--ib-flapping", default=None, metavar="PORT[:SECONDS]",
                  help="A port whose link drops every SECONDS (default 30; its link_downed counter counts them).")
    @click.option("--gpu-throttle", default=None, metavar="GPU[:SECONDS]",
                  help="A GPU that throttles (HW Thermal Slowdown) after SECONDS under load (default 60).")
    @click.option("--transient", type=int, default=None, help="Slow the node's next N fabric tests once each.")
    @click.option("--collective-share", type=float, default=None,
                  help="Every collective with the node runs at this share (its ports pass alone).")
    @click.option("--nvlink-degraded", type=float, default=None, help="GB sizes: the node's NVLink at this share.")
    @click.option("--simulate-state", default=None, help="File holding the simulated cloud (default: user state dir).")
    @common
    def fault_cmd(obj, name, instances, next_count, gpus, ib_down, ib_rate, ib_port, xid, nvidia_smi_hang,
                  nvlink_down, run_command, ecc, row_remap, gpu_lost, no_devices, driver_not_loaded, fabric_incomplete,
                  imex_missing, ib_degraded, ib_flapping, gpu_throttle, transient, collective_share, nvlink_degraded,
                  simulate_state):
        """Make simulated nodes unhealthy (a GPU missing, an IB port down or slow, an Xid, a hang ...), or faulty in
        the ways only 'provision certify' finds (a degraded or flapping port, a GPU throttling under load ...)."""
        if bool(instances) == (next_count is not None):
            raise InputError("name the nodes with --instance, or the next ones to be created with --next N",
                             code="MISSING_ARGUMENT",
                             remedy="e.g. --next 2 --gpus 7, or --instance c1-000-000003 --xid 79")
        fault = {"gpus": gpus, "ib_down": True if ib_down == "first" else ib_down, "ib_rate": ib_rate,
                 "ib_port": ib_port, "xid": xid, "nvidia_smi_hang": nvidia_smi_hang, "nvlink_down": nvlink_down,
                 "run_command": run_command, "ecc": ecc, "row_remap": row_remap, "gpu_lost": gpu_lost,
                 "no_devices": no_devices, "fabric_incomplete": fabric_incomplete, "imex_missing": imex_missing,
                 "driver_not_loaded": driver_not_loaded,
                 "ib_degraded": ib_degraded, "ib_flapping": ib_flapping, "gpu_throttle": gpu_throttle,
                 "transient": transient, "collective_share": collective_share, "nvlink_degraded": nvlink_degraded}
        fake = _fake(simulate_state, new=next_count is not None)
        try:
            if next_count is not None:
                fake.unhealthy_next(next_count, **fault)
                result = {"next_instances": next_count, "fault": {k: v for k, v in fault.items() if v}}
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
