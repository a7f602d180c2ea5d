"""`provision slurm config`: the slurm.conf fragment, gres.conf, topology.conf and the three
power-saving programs for a cluster file's CLOUD nodes, in the syntax of the controller's Slurm.

Slurm's "Power Saving Guide" (power_save.shtml) and slurm.conf(5) define the CLOUD nodes and the three
programs. What differs between the versions azgpu writes for, each from Slurm's own source or docs
(SchedMD/slurm, the branch named):
- TreeWidth: CLOUD nodes need it "at least as large as the maximum node count" on 22.05 and 23.02
  (doc/html/elastic_computing.shtml of those branches); 23.11 dropped the advice (fanout works with
  cloud nodes) and changed the default to 16 (RELEASE_NOTES).
- CommunicationParameters=NoAddrCache: removed in 23.11, where slurmctld logs "The
  CommunicationParameters option "NoAddrCache" is defunct, please remove it" (src/common/read_config.c).
- SlurmctldParameters=cloud_reg_addrs: the default from 23.11, which logs the same error for it.
- PrivateData=cloud: "no longer needed" from 23.02, which shows cloud nodes by default (RELEASE_NOTES).
- Block topology (topology/block, GB200/GB300 racks): from 23.11 with BlockLevels; BlockSizes from 24.05
  (doc/man/man5/topology.conf.5 of slurm-23.11 and slurm-24.05). Slurm 25.11 drops powered-down nodes
  from their block and does not add them back; the workaround is Topology=default:<block> on the
  NodeName lines (aws/aws-parallelcluster-cookbook PR 3123, as SchedMD recommended; slurm.conf(5) of
  slurm-25.11, NodeName Topology=).
- Configless nodes get slurm.conf and what it Includes only when the Include has no path and the file
  lies beside slurm.conf (doc/html/configless_slurm.shtml): the fragment is included as "azgpu.conf".
Keys slurm.conf may already set (SlurmctldParameters, SwitchType, Prolog ...) are written as comments to
merge: a key given twice makes slurmctld log "specified more than once" (src/common/parse_config.c).
"""

from __future__ import annotations

import re
import shlex
import sys
from typing import Any

from ..errors import InputError
from ..hostlist import compress
from ..scheduler_files import MEMORY_HEADROOM
from .names import domains

# A resume creates VMs, installs nothing slow when the image is the HPC image, then runs the health
# check (minutes on 8-GPU sizes): half an hour covers a whole InfiniBand domain's creation.
RESUME_TIMEOUT = 1800
SUSPEND_TIME = 600  # idle seconds before a node's VM is deleted
# slurm.conf(5) SuspendTimeout: the time between a suspend request and the node being ready for a resume
# request; the node can take no job meanwhile. The suspend program returns only once Azure has deleted the
# VMs (a scale-set instance deletion: minutes), so this need not be Azure CycleCloud's 600 s (its
# slurm.conf.template), which keeps every suspended node unusable for ten minutes.
SUSPEND_TIMEOUT = 300
HEALTH_CHECK_INTERVAL = 300
HEALTH_CHECK_PATH = "/usr/local/sbin/azgpu-slurm-health-check"
PROGRAMS = ("resume", "suspend", "resume-fail")
DEFAULT_VERSION = "22.05"  # Debian 12's Slurm, the oldest azgpu is tested on
TREE_WIDTH_DEFAULT = 50  # slurm.conf(5) of slurm-22.05 and slurm-23.02, TreeWidth
TREE_WIDTH_MAX = 65533


# A version as 'slurmctld -V' prints it ('slurm 24.11.5', 'slurm-wlm 22.05.8', '25.11.0-0rc1') or as given: one
# line, since it is written into the fragment's comments.
_RELEASE = re.compile(r"(?:[A-Za-z][A-Za-z-]{0,30} )?(?P<release>\d{2}\.\d{2})(?:[.-][0-9A-Za-z.+~-]{0,40})?", re.ASCII)
# The releases whose slurm.conf(5) and topology.conf(5) this module was written from; another one's keys are unknown.
RELEASES = ("22.05", "23.02", "23.11", "24.05", "24.11", "25.05", "25.11")


def release(version: str) -> str:
    """A Slurm version's major release ('slurm-wlm 24.11.5' -> '24.11'); InputError when it names none, or one
    azgpu does not know the keys of."""
    found = _RELEASE.fullmatch(version or "")
    shown = "".join(c if c.isprintable() else "?" for c in str(version))[:80]
    if not found:
        raise InputError(f"'{shown}' is not a Slurm version", code="INVALID_SLURM_VERSION",
                         remedy="pass the controller's version as 'slurmctld -V' prints it, e.g. 24.11.5")
    if found["release"] not in RELEASES:
        raise InputError(f"Slurm {found['release']} is not a release azgpu knows the slurm.conf keys of "
                         f"({RELEASES[0]} to {RELEASES[-1]})", code="INVALID_SLURM_VERSION",
                         remedy="pass the nearest release azgpu knows, e.g. --slurm-version 25.11, and check "
                                "slurmctld's log for the fragment's keys")
    return found["release"]


def version_key(version: str) -> tuple[int, int]:
    """'24.11.5' -> (24, 11)."""
    major, minor = release(version).split(".")
    return int(major), int(minor)


def program_name(cluster: str, command: str) -> str:
    return f"azgpu-{cluster}-{command}"


def program(command: str, *, cluster_file: str, state_dir: str, log_file: str, extra: list[str],
            env: dict[str, str] | None = None) -> str:
    """A program slurmctld runs: slurm.conf takes a path, not a command line, so the options live here.
    slurmctld gives it an environment of SLURM_CONF alone (and SLURM_RESUME_FILE on resume)."""
    argv = [sys.executable, "-m", "azgpu.cli", "slurm", command, "-f", cluster_file, "--state-dir", state_dir,
            "--log-file", log_file, *extra]
    exports = "".join(f"export {k}={shlex.quote(v)}\n" for k, v in (env or {}).items())
    # slurmctld discards what its programs print: the program writes its events, its final ERROR line and
    # any unforeseen failure (SLURM_PROGRAM_FAILED) to --log-file itself, opened without following a link
    # (power.EventLog). A shell redirection (2>>log) would follow one: a link planted where the log goes
    # would have SlurmUser append to whatever it names.
    return ("#!/bin/sh\n"
            f"# slurmctld runs this as SlurmUser with a hostlist argument (slurm.conf(5), {_key(command)}).\n"
            f"# Written by 'provision slurm config'; it calls 'provision slurm {command}'.\n"
            f"{exports}exec {' '.join(shlex.quote(a) for a in argv)} -- \"$@\"\n")


def _key(command: str) -> str:
    return {"resume": "ResumeProgram", "suspend": "SuspendProgram", "resume-fail": "ResumeFailProgram"}[command]


def _features(spec, scale_set: str) -> str:
    # Features let a job pick a size or a domain (sbatch --constraint); node names carry no meaning.
    return ",".join(["azgpu", spec.profile.id, spec.size.name.lower(), scale_set])


def blocks(spec) -> list[tuple[str, tuple[str, ...]]]:
    """One block per rack on vertical-connect sizes: (block name, the names of one of the domain's rack slots,
    names.Domain.slots), the slots resume binds whole to one measured rack (power._bring_up_racks)."""
    per = spec.profile.rack_size
    if not per:
        return []
    return [(f"{d.scale_set}-rack{number:03d}", names) for d in domains(spec)
            for number, names in enumerate(d.slots(per))]


def cpu_line(size) -> str:
    """CPUs as `slurmd -C` reports them on the size: boards, sockets, cores and threads where a source gives
    them (the profile's [sizes.health] cpu_topology, AzNHC's check_hw_cpuinfo), else only the count."""
    topology = size.health.get("cpu_topology") if size.health else None
    if not topology:
        return f"CPUs={size.vcpus}"
    sockets, cores, threads = topology
    return (f"CPUs={threads} Boards=1 SocketsPerBoard={sockets} CoresPerSocket={cores // sockets} "
            f"ThreadsPerCore={threads // cores}")


def slurmctld_parameters(version: str) -> str:
    """What SlurmctldParameters needs for azgpu's nodes on this version (merged into slurm.conf's own)."""
    return "enable_configless" + (",cloud_reg_addrs" if version_key(version) < (23, 11) else "")


def topology_plugin(spec, version: str) -> str:
    return "topology/block" if blocks(spec) and version_key(version) >= (23, 11) else "topology/tree"


def fragment(spec, *, program_dir: str, slurm_version: str = DEFAULT_VERSION, resume_timeout: int = RESUME_TIMEOUT,
             suspend_time: int = SUSPEND_TIME, suspend_timeout: int = SUSPEND_TIMEOUT, health_check: bool = False,
             health_check_interval: int = HEALTH_CHECK_INTERVAL, keep_racks: bool = False) -> str:
    """The fragment in the syntax of `slurm_version`. keep_racks (vertical-connect sizes): the rack partitions
    stay out of power saving (SuspendExcParts)."""
    cluster = spec.names.cluster
    size = spec.size
    v = version_key(slurm_version)
    gpus = max(1, int(size.gpus)) if size.gpus else 0
    memory = int((size.memory_gib or 0) * 1024 * MEMORY_HEADROOM)
    doms = domains(spec)
    racks = blocks(spec)
    block_of = {n: name for name, names in racks for n in names}
    infiniband = bool(size.infiniband)
    total = sum(len(d.names) for d in doms)
    lines = [
        f"# slurm.conf fragment for azgpu cluster {cluster}: up to {spec.nodes} x {size.name} "
        f"({spec.profile.id}) as Slurm CLOUD nodes in {len(doms)} "
        + ("InfiniBand domain(s)" if infiniband else "scale set(s)")
        + f", resource group {spec.request.resource_group}.",
        f"# Written for Slurm {slurm_version}: regenerate it for another version "
        "('provision slurm config --slurm-version').",
        "# Put it beside slurm.conf and include it without a path (\"Include azgpu.conf\"): configless nodes get an",
        "# Include only then (configless_slurm.shtml). slurm.conf also needs \"GresTypes=gpu\" and",
        f"# \"TopologyPlugin={topology_plugin(spec, slurm_version)}\" for the topology.conf written beside it.",
        "#",
        "# Merge into slurm.conf's own SlurmctldParameters (a second SlurmctldParameters line would replace it):",
        "# the nodes fetch their configuration from slurmctld (configless)"
        + (", and a registering CLOUD node's address is the one it registers from" if v < (23, 11) else "") + ".",
        f"#SlurmctldParameters={slurmctld_parameters(slurm_version)}",
        "#",
        "# Power saving (slurm.conf(5), Power Saving Guide): slurmctld runs ResumeProgram with the names of",
        "# the nodes a job needs; azgpu grows the scale set that holds them (preflight, capacity fallback,",
        "# health check), gives slurmctld each healthy node's address and starts slurmd there with its name.",
        "# After SuspendTime idle seconds SuspendProgram deletes exactly those nodes' VMs.",
        f"ResumeProgram={program_dir}/{program_name(cluster, 'resume')}",
        f"SuspendProgram={program_dir}/{program_name(cluster, 'suspend')}",
        f"ResumeFailProgram={program_dir}/{program_name(cluster, 'resume-fail')}",
        f"ResumeTimeout={resume_timeout}",
        f"SuspendTime={suspend_time}",
        "# The suspend program returns once Azure deleted the VMs: the node is ready for a resume soon after.",
        f"SuspendTimeout={suspend_timeout}",
    ]
    if v < (23, 11):
        lines += [
            "# A CLOUD node's address changes with every resume: do not cache it (slurm.conf(5), NoAddrCache;",
            "# removed in 23.11, where it is the default).",
            "CommunicationParameters=NoAddrCache",
            "# CLOUD nodes: slurmds do not know each other's addresses, so slurmctld sends to each directly",
            f"# (elastic_computing.shtml of {'.'.join(f'{n:02d}' for n in v)}: TreeWidth at least the node count; "
            "raise it to the cluster's",
            "# node count if slurm.conf has more nodes, and remove slurm.conf's own TreeWidth).",
            f"TreeWidth={min(TREE_WIDTH_MAX, max(total, TREE_WIDTH_DEFAULT))}",
        ]
    if v < (23, 2):
        lines += ["# sinfo and scontrol show powered-down CLOUD nodes too (slurm.conf(5), PrivateData=cloud).",
                  "PrivateData=cloud"]
    if health_check:
        lines += [
            "# azgpu's node check runs in the background on every node (the node bootstrap installs it); this",
            "# program reads its verdict, drains a node whose verdict is 'failed' with the finding as the Reason,",
            "# and returns at once (slurm.conf(5): killed after 60 s).",
            f"HealthCheckProgram={HEALTH_CHECK_PATH}",
            f"HealthCheckInterval={health_check_interval}",
            "HealthCheckNodeState=ANY",
        ]
    lines.append(f"# RealMemory: {int(MEMORY_HEADROOM * 100)} % of the documented {size.memory_gib} GiB "
                 "(the guest sees a little less).")
    if not (size.health and size.health.get("cpu_topology")):
        lines.append("# No source gives this size's sockets and cores: only the CPU count is written.")
    node = (f"State=CLOUD {cpu_line(size)} RealMemory={memory}" + (f" Gres=gpu:{gpus}" if gpus else ""))
    for d in doms:
        kind = "InfiniBand domain" if infiniband else "scale set"
        lines.append(f"# {kind} {d.scale_set}: up to {d.capacity} node(s)")
        if racks and v >= (25, 11):
            lines.append("# One NodeName line per rack: Topology=default:<block> keeps powered-down nodes in their")
            lines.append("# block on Slurm 25.11 (aws-parallelcluster-cookbook PR 3123).")
            for _rack, names in racks:
                if names[0] in d.names:
                    lines.append(f"NodeName={compress(names)} {node} Features={_features(spec, d.scale_set)} "
                                 f"Topology=default:{block_of[names[0]]}")
        else:
            lines.append(f"NodeName={d.hostlist} {node} Features={_features(spec, d.scale_set)}")
    if infiniband:
        lines.append("# One partition per InfiniBand domain: InfiniBand connects only the VMs of one scale set.")
        for d in doms:
            lines.append(f"PartitionName={d.scale_set} Nodes={d.hostlist}{' Default=YES' if d.index == 0 else ''} "
                         "MaxTime=INFINITE State=UP")
    else:
        every = compress(n for d in doms for n in d.names)
        lines.append(f"PartitionName={cluster} Nodes={every} Default=YES MaxTime=INFINITE State=UP")
    if keep_racks:
        if not racks:
            raise InputError(f"--keep-racks is for vertical-connect sizes (ND GB200/GB300 v6); {size.name} has no "
                             "racks", code="SLURM_NO_RACKS", remedy="leave --keep-racks out")
        # slurm.conf(5) SuspendExcParts, as Azure CycleCloud does for GB partitions: their racks stay up until
        # deleted by hand. The same key on every version azgpu writes for (22.05 to 25.11).
        lines += ["# --keep-racks: Slurm never suspends these partitions' nodes (SuspendExcParts), so their racks stay",
                  "# up and bill until 'provision destroy' or a suspend by hand.",
                  f"SuspendExcParts={','.join(d.scale_set for d in doms)}"]
    if racks:
        from ..imex import fragment_lines

        lines += fragment_lines()
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


def topology(spec, slurm_version: str = DEFAULT_VERSION) -> str:
    doms = domains(spec)
    racks = blocks(spec)
    v = version_key(slurm_version)
    plugin = topology_plugin(spec, slurm_version)
    lines = [f"# topology.conf for azgpu cluster {spec.names.cluster} (TopologyPlugin={plugin}), "
             f"Slurm {slurm_version}."]
    if racks and plugin == "topology/block":
        per = spec.profile.rack_size
        lines.append(f"# One block per NVLink rack ({per} VMs): a job of up to {per} nodes runs in one rack; a larger "
                     "one spans")
        lines.append("# whole racks of its partition (one partition per InfiniBand domain).")
        lines += [f"BlockName={name} Nodes={compress(names)}" for name, names in racks]
        if v >= (24, 5):
            lines.append("# topology.conf(5) of 24.05+: the base block size, then larger ones as powers of two of it.")
            lines.append(f"BlockSizes={per}")
        else:
            lines.append("# topology.conf(5) of 23.11: level 0 is one block, level 1 a pair of blocks ...")
            lines.append("BlockLevels=0-4")
        return "\n".join(lines) + "\n"
    if racks:  # GB racks before topology/block (22.05, 23.02): a switch per rack under a switch per domain
        lines.append("# One switch per NVLink rack under one per InfiniBand domain (topology/block needs Slurm 23.11).")
        for d in doms:
            mine = [(name, names) for name, names in racks if names[0] in d.names]
            lines += [f"SwitchName={name} Nodes={compress(names)}" for name, names in mine]
            lines.append(f"SwitchName={d.scale_set} Switches={compress(name for name, _ in mine)}")
        return "\n".join(lines) + "\n"
    if spec.size.infiniband:
        lines.append("# One switch per InfiniBand domain and none above them: a job never spans two domains.")
        lines += [f"SwitchName={d.scale_set} Nodes={d.hostlist}" for d in doms]
    else:
        lines += [f"SwitchName={d.scale_set} Nodes={d.hostlist}" for d in doms]
        if len(doms) > 1:
            lines.append(f"SwitchName={spec.names.cluster}-ethernet Switches={compress(d.scale_set for d in doms)}")
    return "\n".join(lines) + "\n"


def files(spec, *, program_dir: str, cluster_file: str, state_dir: str, log_file: str, extra: list[str],
          env: dict[str, str] | None = None, slurm_version: str = DEFAULT_VERSION, **settings: Any) -> dict[str, str]:
    """Every file by name: the fragment, gres.conf, topology.conf, the three programs (and on GB sizes the
    IMEX prolog and epilog)."""
    out = {"azgpu.conf": fragment(spec, program_dir=program_dir, slurm_version=slurm_version, **settings),
           "gres.conf": gres(spec), "topology.conf": topology(spec, slurm_version)}
    for command in PROGRAMS:
        out[program_name(spec.names.cluster, command)] = program(command, cluster_file=cluster_file,
                                                                 state_dir=state_dir, log_file=log_file, extra=extra,
                                                                 env=env)
    if blocks(spec):
        from ..imex import files as imex_files

        out.update(imex_files())
    return out
