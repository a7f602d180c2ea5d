"""`provision slurm config`: the slurm.conf fragment, gres.conf, topology.conf and the three
power-saving programs for a cluster file's CLOUD nodes.

Sources: Slurm's "Power Saving Guide" (slurm.schedmd.com/power_save.html: CLOUD nodes and the
three programs) and slurm.conf(5) as Debian 12's Slurm 22.05 ships it (State=CLOUD, ResumeProgram,
SuspendProgram, ResumeFailProgram, ResumeTimeout, SuspendTime, SuspendTimeout, HealthCheckProgram,
HealthCheckInterval, HealthCheckNodeState, CommunicationParameters=NoAddrCache, PrivateData=cloud,
SlurmctldParameters=cloud_reg_addrs), gres.conf(5) and topology.conf(5). Every setting written here
exists in 22.05.
"""

from __future__ import annotations

import shlex
import sys
from typing import Any

from ..hostlist import compress
from ..scheduler_files import MEMORY_HEADROOM
from .names import domains

# A resume creates VMs, installs nothing slow when the image is the HPC image, then runs the health
# check (minutes on 8-GPU sizes): half an hour covers a whole InfiniBand domain's creation.
RESUME_TIMEOUT = 1800
SUSPEND_TIME = 600  # idle seconds before a node's VM is deleted
SUSPEND_TIMEOUT = 600  # seconds a deletion may take before slurmctld considers the node powered down
HEALTH_CHECK_INTERVAL = 300
HEALTH_CHECK_PATH = "/usr/local/sbin/azgpu-slurm-health-check"
PROGRAMS = ("resume", "suspend", "resume-fail")


def program_name(cluster: str, command: str) -> str:
    return f"azgpu-{cluster}-{command}"


def program(command: str, *, cluster_file: str, state_dir: str, log_file: str, extra: list[str],
            env: dict[str, str] | None = None) -> str:
    """A program slurmctld runs: slurm.conf takes a path, not a command line, so the options live here.
    slurmctld gives it an environment of SLURM_CONF alone (and SLURM_RESUME_FILE on resume)."""
    argv = [sys.executable, "-m", "azgpu.cli", "slurm", command, "-f", cluster_file, "--state-dir", state_dir, *extra]
    exports = "".join(f"export {k}={shlex.quote(v)}\n" for k, v in (env or {}).items())
    # slurmctld discards what its programs print: the events (azgpu echoes each to stderr), the final
    # ERROR line and anything unforeseen all go to the log file.
    return ("#!/bin/sh\n"
            f"# slurmctld runs this as SlurmUser with a hostlist argument (slurm.conf(5), {_key(command)}).\n"
            f"# Written by 'provision slurm config'; it calls 'provision slurm {command}'.\n"
            f"{exports}exec {' '.join(shlex.quote(a) for a in argv)} -- \"$@\" 2>>{shlex.quote(log_file)}\n")


def _key(command: str) -> str:
    return {"resume": "ResumeProgram", "suspend": "SuspendProgram", "resume-fail": "ResumeFailProgram"}[command]


def _features(spec, scale_set: str) -> str:
    # Features let a job pick a size or a domain (sbatch --constraint); node names carry no meaning.
    return ",".join(["azgpu", spec.profile.id, spec.size.name.lower(), scale_set])


def fragment(spec, *, program_dir: str, resume_timeout: int = RESUME_TIMEOUT, suspend_time: int = SUSPEND_TIME,
             suspend_timeout: int = SUSPEND_TIMEOUT, health_check: bool = False) -> str:
    cluster = spec.names.cluster
    size = spec.size
    gpus = max(1, int(size.gpus)) if size.gpus else 0
    memory = int((size.memory_gib or 0) * 1024 * MEMORY_HEADROOM)
    doms = domains(spec)
    infiniband = bool(size.infiniband)
    lines = [
        f"# slurm.conf fragment for azgpu cluster {cluster}: up to {spec.nodes} x {size.name} "
        f"({spec.profile.id}) as Slurm CLOUD nodes in {len(doms)} "
        + ("InfiniBand domain(s)" if infiniband else "scale set(s)") + f", resource group {spec.request.resource_group}.",
        "# Include it from slurm.conf (\"Include /etc/slurm/azgpu.conf\"); slurm.conf also needs \"GresTypes=gpu\"",
        "# and \"TopologyPlugin=topology/tree\" for the topology.conf written beside it.",
        "#",
        "# Power saving (slurm.conf(5), Power Saving Guide): slurmctld runs ResumeProgram with the names of",
        "# the nodes a job needs; azgpu grows the scale set that holds them (preflight, capacity fallback,",
        "# health check) and gives slurmctld each healthy node's address. After SuspendTime idle seconds",
        "# SuspendProgram deletes exactly those nodes' VMs.",
        f"ResumeProgram={program_dir}/{program_name(cluster, 'resume')}",
        f"SuspendProgram={program_dir}/{program_name(cluster, 'suspend')}",
        f"ResumeFailProgram={program_dir}/{program_name(cluster, 'resume-fail')}",
        f"ResumeTimeout={resume_timeout}",
        f"SuspendTime={suspend_time}",
        f"SuspendTimeout={suspend_timeout}",
        "# A CLOUD node's address changes with every resume: do not cache it (slurm.conf(5), NoAddrCache).",
        "CommunicationParameters=NoAddrCache",
        "# sinfo and scontrol show powered-down CLOUD nodes too (slurm.conf(5), PrivateData=cloud).",
        "PrivateData=cloud",
        "# Where slurm.conf has no SlurmctldParameters yet: a registering CLOUD node's address is the one it",
        "# registers from, and is reset to its name once powered down (slurm.conf(5)).",
        "#SlurmctldParameters=cloud_reg_addrs",
    ]
    if health_check:
        lines += [
            "# azgpu's node health check, installed on every node by cloud-init: it drains a node that fails",
            "# with the failing check as the Reason. IDLE only, so it never runs under a job.",
            f"HealthCheckProgram={HEALTH_CHECK_PATH}",
            f"HealthCheckInterval={HEALTH_CHECK_INTERVAL}",
            "HealthCheckNodeState=IDLE",
        ]
    lines.append(f"# RealMemory: {int(MEMORY_HEADROOM * 100)} % of the documented {size.memory_gib} GiB (the guest sees "
                 "a little less).")
    for d in doms:
        lines.append(f"# {'InfiniBand domain' if infiniband else 'scale set'} {d.scale_set}: up to {d.capacity} node(s)")
        lines.append(f"NodeName={d.hostlist} State=CLOUD CPUs={size.vcpus} RealMemory={memory}"
                     + (f" Gres=gpu:{gpus}" if gpus else "") + f" Features={_features(spec, d.scale_set)}")
    if infiniband:
        lines.append("# One partition per InfiniBand domain: InfiniBand connects only the VMs of one scale set.")
        for d in doms:
            lines.append(f"PartitionName={d.scale_set} Nodes={d.hostlist}{' Default=YES' if d.index == 0 else ''} "
                         "MaxTime=INFINITE State=UP")
    else:
        every = compress(n for d in doms for n in d.names)
        lines.append(f"PartitionName={cluster} Nodes={every} Default=YES MaxTime=INFINITE State=UP")
    return "\n".join(lines) + "\n"


def gres(spec) -> str:
    size = spec.size
    gpus = max(1, int(size.gpus)) if size.gpus else 0
    lines = [f"# gres.conf for azgpu cluster {spec.names.cluster} (CLOUD nodes)."]
    if not gpus:
        return "\n".join(lines + ["# No GPUs to describe."]) + "\n"
    every = compress(n for d in domains(spec) for n in d.names)
    if size.gpu_model.upper().startswith("AMD"):
        lines.append(f"NodeName={every} Name=gpu File={compress(f'/dev/dri/renderD{128 + i}' for i in range(gpus))} "
                     "Flags=amd_gpu_env")
    else:
        lines.append(f"NodeName={every} Name=gpu File={compress(f'/dev/nvidia{i}' for i in range(gpus))}")
    return "\n".join(lines) + "\n"


def topology(spec) -> str:
    doms = domains(spec)
    lines = [f"# topology.conf for azgpu cluster {spec.names.cluster} (TopologyPlugin=topology/tree)."]
    if spec.size.infiniband:
        lines.append("# One switch per InfiniBand domain and none above them: a job never spans two domains.")
        lines += [f"SwitchName={d.scale_set} Nodes={d.hostlist}" for d in doms]
    else:
        lines += [f"SwitchName={d.scale_set} Nodes={d.hostlist}" for d in doms]
        if len(doms) > 1:
            lines.append(f"SwitchName={spec.names.cluster}-ethernet Switches={compress(d.scale_set for d in doms)}")
    return "\n".join(lines) + "\n"


def files(spec, *, program_dir: str, cluster_file: str, state_dir: str, log_file: str, extra: list[str],
          env: dict[str, str] | None = None, **settings: Any) -> dict[str, str]:
    """Every file by name: the fragment, gres.conf, topology.conf and the three programs."""
    out = {"azgpu.conf": fragment(spec, program_dir=program_dir, **settings), "gres.conf": gres(spec),
           "topology.conf": topology(spec)}
    for command in PROGRAMS:
        out[program_name(spec.names.cluster, command)] = program(command, cluster_file=cluster_file,
                                                                 state_dir=state_dir, log_file=log_file, extra=extra,
                                                                 env=env)
    return out
