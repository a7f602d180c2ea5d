"""The files schedulers and MPI launchers read, made from `provision outputs`' JSON.

Pure functions of the outputs dict (azgpu.deploy.lifecycle.outputs): no Azure SDK, no I/O. Each
format follows its tool's documentation, cited where it is used:

- Open MPI hostfile, `host slots=N` (open-mpi/ompi docs/launching-apps/scheduling.rst,
  "Scheduling with the --hostfile option"); comments start with `#`.
- MPICH / Intel MPI Hydra machinefile, `host:N` (wiki.mpich.org "Using the Hydra Process Manager";
  pmodels/mpich src/pm/hydra/lib/utils/args.c skips `#` lines).
- Slurm: slurm.conf node and partition lines (slurm.conf(5)), gres.conf (gres.conf(5)),
  topology.conf (topology.conf(5)) and topology.yaml (topology.yaml(5)), all in SchedMD/slurm
  doc/man/man5; the Slurm versions each needs come from SchedMD/slurm's CHANGELOG/slurm-*.md.
"""

from __future__ import annotations

from typing import Any

from .errors import InputError
from .hostlist import compress

ADDRESSES = ("private", "public", "hostname")
# Guest-visible memory is a little below the documented figure (facts sheet, section 1), and
# Slurm drains a node whose RealMemory is above what it finds: leave 5 % headroom.
MEMORY_HEADROOM = 0.95


# ------------------------------------------------------------------------------------ helpers


def _domains(out: dict[str, Any]) -> list[dict[str, Any]]:
    return [d for d in out["ib_domains"] if d["nodes"]]


def _label(out: dict[str, Any], scale_set: str) -> str:
    return f"InfiniBand domain {scale_set}" if out.get("infiniband") else f"scale set {scale_set}"


def _summary(out: dict[str, Any]) -> str:
    count = sum(len(d["nodes"]) for d in out["ib_domains"])
    gpus = out.get("gpus_per_node")
    vendor = {"nvidia": "NVIDIA", "amd": "AMD"}.get(out.get("gpu_vendor") or "", "")
    return (f"azgpu cluster {out['cluster']}: {count} x {out.get('size')}"
            + (f", {gpus} {vendor} GPU(s) each" if gpus else ""))


def _address(node: dict[str, Any], address: str) -> str | None:
    return {"private": node["ip"], "public": node.get("public_ip"), "hostname": node["hostname"]}[address]


def _check_public(out: dict[str, Any]) -> None:
    nodes = [n for d in out["ib_domains"] for n in d["nodes"]]
    missing = [n["hostname"] for n in nodes if not n.get("public_ip")]
    if not missing:
        return
    if len(missing) == len(nodes):
        message = f"cluster '{out['cluster']}' has no public IP addresses"
    else:
        message = (f"{len(missing)} of {len(nodes)} node(s) have no public IP address yet ({', '.join(missing[:5])}"
                   f"{', ...' if len(missing) > 5 else ''}): a Dynamic address is assigned while the VM runs")
    raise InputError(message, code="NO_PUBLIC_IP",
                     remedy="use --address private or --address hostname from inside the virtual network, "
                            "or create the cluster with --public-ip")


def _slots(out: dict[str, Any], slots: int | None) -> int:
    # One rank per GPU; a fractional GPU (NGads V620 partitions) still holds one rank.
    return slots if slots is not None else max(1, int(out.get("gpus_per_node") or 1))


def _hosts_file(out: dict[str, Any], tool: str, line, *, address: str, slots: int | None) -> str:
    if address not in ADDRESSES:
        raise InputError(f"--address '{address}' is not one of {', '.join(ADDRESSES)}", code="INVALID_ADDRESS",
                         remedy="use --address private, public or hostname")
    if address == "public":
        _check_public(out)
    count = _slots(out, slots)
    lines = [f"# {tool} for {_summary(out)}; {count} slot(s) per host"
             + (" (one rank per GPU)." if slots is None else ".")]
    domains = _domains(out)
    if out.get("infiniband") and len(domains) > 1:
        lines.append("# InfiniBand connects only the VMs of one scale set: a job using it keeps to one domain below.")
    racks = {h: r for r in out.get("racks") or () for h in r["nodes"]}
    for domain in domains:
        lines.append(f"# {_label(out, domain['scale_set'])}")
        if not racks:
            lines += [line(_address(n, address), count) for n in domain["nodes"]]
            continue
        # Grouped by NVLink rack, so a job that wants one rack takes consecutive lines.
        size = out["nodes_per_rack"]
        for rack in [r for r in out["racks"] if r["scale_set"] == domain["scale_set"] and r["nodes"]]:
            lines.append(f"# {rack['name']}: {_rack_note(rack, size)}")
            members = set(rack["nodes"])
            lines += [line(_address(n, address), count) for n in domain["nodes"] if n["hostname"] in members]
        lines += [line(_address(n, address), count) for n in domain["nodes"] if n["hostname"] not in racks]
    for item in out.get("excluded_nodes", ()):
        lines.append(f"# Left out: {item['hostname']} ({item['reason']}).")
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------------ MPI


def openmpi_hostfile(out: dict[str, Any], *, address: str = "private", slots: int | None = None) -> str:
    """Open MPI: one `host slots=N` line per node (mpirun --hostfile FILE)."""
    return _hosts_file(out, "Open MPI hostfile (mpirun --hostfile)", lambda host, n: f"{host} slots={n}",
                       address=address, slots=slots)


def mpich_machinefile(out: dict[str, Any], *, address: str = "private", slots: int | None = None) -> str:
    """MPICH and Intel MPI (Hydra): one `host:N` line per node (mpiexec -f FILE)."""
    return _hosts_file(out, "MPICH/Hydra machinefile (mpiexec -f)", lambda host, n: f"{host}:{n}",
                       address=address, slots=slots)


def nccl_env(out: dict[str, Any]) -> str:
    return "".join(f"export {k}={v}\n" for k, v in out["nccl_env"].items())


# ------------------------------------------------------------------------------------ Slurm


def _node_lines(out: dict[str, Any]) -> str:
    domains = _domains(out)
    real_memory = int((out.get("memory_gib_per_node") or 0) * 1024 * MEMORY_HEADROOM)
    gres = f" Gres=gpu:{max(1, int(out['gpus_per_node']))}" if out.get("gpus_per_node") else ""
    lines = [
        f"# slurm.conf nodes and partitions for {_summary(out)}.",
        "# Include it from slurm.conf (\"Include slurm.conf.nodes\"), which also needs \"GresTypes=gpu\".",
        "# NodeName: the VMs' computer names (their hostnames); NodeAddr: their private IPs, in the same order.",
        f"# RealMemory: {int(MEMORY_HEADROOM * 100)} % of the "
        f"documented {out.get('memory_gib_per_node')} GiB: the guest sees a little less, and Slurm drains a node that "
        "reports less than RealMemory.",
    ]
    for domain in domains:
        nodes = domain["nodes"]
        lines.append(f"# {_label(out, domain['scale_set'])}")
        lines.append(f"NodeName={compress(n['hostname'] for n in nodes)} NodeAddr={compress(n['ip'] for n in nodes)} "
                     f"CPUs={out.get('vcpus_per_node')} RealMemory={real_memory}{gres} State=UNKNOWN")
    if out.get("infiniband"):
        lines.append("# One partition per InfiniBand domain: InfiniBand connects only the VMs of one scale set, so "
                     "a job stays in one.")
        for i, domain in enumerate(domains):
            members = compress((n["hostname"] for n in domain["nodes"]), sort=True)
            lines.append(f"PartitionName={domain['scale_set']} "
                         f"Nodes={members}{' Default=YES' if i == 0 else ''} MaxTime=INFINITE State=UP")
    elif domains:
        lines.append("# No InfiniBand: the nodes share the virtual network's Ethernet, so one partition holds "
                     "them all.")
        every = (n["hostname"] for d in domains for n in d["nodes"])
        lines.append(f"PartitionName={out['cluster']} Nodes={compress(every, sort=True)} "
                     "Default=YES MaxTime=INFINITE State=UP")
    if out.get("racks"):
        lines += _imex_lines()
    return "\n".join(lines) + "\n"


def _imex_lines() -> list[str]:
    """NVIDIA IMEX for the NVLink racks, as azgpu's power-saving nodes have it (azgpu.imex: the job's nodes are its
    IMEX domain, started by a prolog; never the switch plugin, which removes the image's channels)."""
    from .imex import EPILOG_PATH, PROLOG_PATH, fragment_lines

    return fragment_lines() + [
        "# The prolog and epilog are beside this file (prolog.d-azgpu-imex and",
        f"# epilog.d-azgpu-imex): install them on every node as {PROLOG_PATH} and {EPILOG_PATH}."]


def _gres(out: dict[str, Any]) -> str:
    gpus = max(1, int(out.get("gpus_per_node") or 0)) if out.get("gpus_per_node") else 0
    nodes = compress((n["hostname"] for d in _domains(out) for n in d["nodes"]), sort=True)
    lines = [f"# gres.conf for {_summary(out)}."]
    if not gpus or not nodes:
        return "\n".join(lines + ["# No GPUs to describe."]) + "\n"
    lines.append("# File= names each GPU's device file, so that "
                 "task/cgroup can confine a job to its GPUs (gres.conf(5)).")
    if out.get("gpu_vendor") == "amd":
        files = compress(f"/dev/dri/renderD{128 + i}" for i in range(gpus))
        lines += [
            "# AMD GPUs are DRM render nodes (/dev/dri/renderD<minor>, as Slurm's gpu/rsmi plugin names them); the",
            "# minors 128 and up assume the GPUs are the VM's only render devices. AutoDetect=rsmi (Slurm built with",
            "# ROCm SMI) reads the real ones, fills in Cores and Links and drains a node whose GPUs differ from this",
            "# line: prefer it where slurmd has ROCm SMI. Flags=amd_gpu_env (Slurm 21.08+) sets only",
            "# ROCR_VISIBLE_DEVICES, as gres.conf(5) advises for AMD GPUs.",
            "#AutoDetect=rsmi",
            f"NodeName={nodes} Name=gpu File={files} Flags=amd_gpu_env",
        ]
    else:
        files = compress(f"/dev/nvidia{i}" for i in range(gpus))
        lines += [
            "# AutoDetect=nvml (Slurm built with NVML) fills in Cores and Links (NVLink) and drains a node whose GPUs",
            "# differ from this line, which catches a VM that lost a GPU: prefer it where slurmd has NVML.",
            "# AutoDetect=nvidia (Slurm 24.11+) needs no library but sees no NVLinks.",
            "#AutoDetect=nvml",
            f"NodeName={nodes} Name=gpu File={files}",
        ]
    return "\n".join(lines) + "\n"


def _switches(out: dict[str, Any]) -> tuple[list[dict[str, str]], str | None]:
    """Leaf switches (one per scale set) and, where jobs may span them, the top switch's name."""
    domains = _domains(out)
    leaves = [{"switch": d["scale_set"], "nodes": compress((n["hostname"] for n in d["nodes"]), sort=True)}
              for d in domains]
    top = f"{out['cluster']}-ethernet" if not out.get("infiniband") and len(leaves) > 1 else None
    return leaves, top


def _tree_conf(out: dict[str, Any]) -> list[str]:
    leaves, top = _switches(out)
    lines = ["# For Slurm's topology/tree plugin: TopologyPlugin=topology/tree in slurm.conf (any current Slurm)."]
    if out.get("infiniband"):
        lines += ["# One switch per InfiniBand domain (an Azure scale set). InfiniBand connects only the VMs of one",
                  "# scale set (Microsoft Learn, \"Set up InfiniBand\"), so no switch joins the domains: topology/tree",
                  "# never lets a job span leaf switches without a common parent (Slurm topology guide), which keeps",
                  "# every job inside one domain."]
    else:
        lines.append("# No InfiniBand: the nodes share the virtual network's Ethernet, so jobs may span scale sets.")
    lines += [f"SwitchName={s['switch']} Nodes={s['nodes']}" for s in leaves]
    names = compress((s["switch"] for s in leaves), sort=True)
    if top:
        lines.append(f"SwitchName={top} Switches={names}")
    elif len(leaves) > 1:
        lines += ["# To let jobs span domains over Ethernet only (NCCL then uses sockets, not InfiniBand), join them:",
                  f"#SwitchName={out['cluster']}-ethernet Switches={names}"]
    return lines


def _basis(rack: dict[str, Any]) -> str:
    return rack.get("basis") or ("assumed" if rack["source"] == "assumed-consecutive-instances" else "reported")


def _assumed_note(out: dict[str, Any]) -> list[str]:
    bases = {_basis(r) for r in out["racks"]}
    lines = []
    if "measured" in bases:
        lines += ["# Blocks marked 'measured': grouped by the NVLink "
                  "domain each node's GPUs reported to azgpu's health check",
                  "# (nvidia-smi -q, Fabric ClusterUUID and "
                  f"CliqueId){' at ' + out['racks_measured_at'] if out.get('racks_measured_at') else ''}."]
    if "assumed" in bases:
        lines += ["# Blocks marked 'assumed': neither the nodes nor Azure said which VMs share a rack, so they",
                  "# ASSUME that consecutive instances of a scale set fill "
                  f"one rack, {out['nodes_per_rack']} at a time. Check on",
                  "# the nodes: `nvidia-smi -q | grep -E 'ClusterUUID|CliqueId'` must print one ClusterUUID per block,",
                  "# or run 'provision check' to measure them."]
    if "reported" in bases:
        lines.append("# Blocks marked 'reported' follow the interconnect subgroup or block Azure reported for "
                     "each VM (Compute API 2026-03-01+); where the health check ran, each node's NVLink domain was "
                     "checked against them, and a node that disagrees is left out.")
    for item in out.get("excluded_nodes", ()):
        lines.append(f"# Left out: {item['hostname']} ({item['reason']}).")
    return lines


def _rack_note(rack: dict[str, Any], size: int) -> str:
    where = {"azure-interconnect-subgroup": f"subgroup {rack['id']}", "azure-interconnect-block": f"block {rack['id']}",
             "nvlink-fabric": f"NVLink domain {rack['id']}"}
    note = f"{_basis(rack)}" + (f", {where[rack['source']]}" if rack["source"] in where else "")
    if rack.get("agrees_with_azure") is False:
        note += f"; Azure's subgroups disagree ({', '.join(rack.get('azure_subgroups', []))})"
    if rack.get("fabric_not_complete"):
        note += f"; fabric not complete on {', '.join(rack['fabric_not_complete'])}"
    if len(rack["nodes"]) < size:
        note += f"; SHORT: {len(rack['nodes'])} of {size} VMs: blocks smaller than BlockSizes need Slurm 25.05+"
    return note


def _block_conf(out: dict[str, Any]) -> list[str]:
    size = out["nodes_per_rack"]
    lines = [
        "# For Slurm's topology/block plugin: TopologyPlugin=topology/block in slurm.conf (Slurm 24.05+; 23.11",
        "# introduced the plugin with BlockLevels where 24.05 has BlockSizes).",
        f"# One block per rack-scale NVLink domain (NVL72 rack: {size} VMs); BlockSizes={size} makes the rack the base",
        "# block. Jobs larger than a rack may span blocks of different InfiniBand domains: the per-domain partitions",
        "# of slurm.conf.nodes keep them apart. Azure's base-36 computer names do not sort by rack: with Slurm 25.11+",
        "# add TopologyParam=BlockAsNodeRank to slurm.conf so that Slurm orders nodes by block.",
        *_assumed_note(out),
    ]
    for rack in out["racks"]:
        if not rack["nodes"]:
            lines.append(f"# {rack['name']}: {rack['scale_set']}, {_rack_note(rack, size)}; no node left")
            continue
        lines.append(f"# {rack['name']}: {rack['scale_set']}, {_rack_note(rack, size)}")
        lines.append(f"BlockName={rack['name']} Nodes={compress(rack['nodes'], sort=True)}")
    lines.append(f"BlockSizes={size}")
    return lines


def _topology_conf(out: dict[str, Any]) -> str:
    head = [f"# topology.conf for {_summary(out)}.",
            "# Slurm 25.05+ ignores this file while topology.yaml exists beside it."]
    body = _block_conf(out) if out.get("racks") else _tree_conf(out)
    return "\n".join(head + body) + "\n"


def _topology_yaml(out: dict[str, Any]) -> str:
    import yaml  # only for the slurm format

    leaves, top = _switches(out)
    switches: list[dict[str, str]] = [dict(s) for s in leaves]
    if top:
        switches.append({"switch": top, "children": compress((s["switch"] for s in leaves), sort=True)})
    topologies: list[dict[str, Any]] = []
    if out.get("racks"):
        topologies.append({"topology": f"{out['cluster']}-racks", "cluster_default": True, "block": {
            "block_sizes": [out["nodes_per_rack"]],
            "blocks": [{"block": r["name"], "nodes": compress(r["nodes"], sort=True)} for r in out["racks"]
                       if r["nodes"]]}})
    topologies.append({"topology": f"{out['cluster']}-{'infiniband' if out.get('infiniband') else 'network'}",
                       "cluster_default": not topologies, "tree": {"switches": switches}})
    head = [f"# topology.yaml for {_summary(out)}.",
            "# Slurm 25.05+ reads this file (and then ignores topology.conf); a partition picks a topology with",
            "# Topology=NAME in slurm.conf, the others use the cluster_default one."]
    if out.get("racks"):
        head += ["# Default: one block per NVLink rack (topology/block, see topology.conf); "
                 "the tree topology holds the",
                 "# InfiniBand domains for partitions that want topology/tree.", *_assumed_note(out)]
    elif out.get("infiniband") and len(leaves) > 1:
        head.append("# No switch joins the InfiniBand domains: InfiniBand connects only the VMs of one scale set.")
    return "\n".join(head) + "\n" + yaml.safe_dump(topologies, sort_keys=False, default_flow_style=False)


def slurm_files(out: dict[str, Any]) -> dict[str, str]:
    """slurm.conf.nodes, gres.conf, topology.conf and topology.yaml, by file name; on NVLink racks also the IMEX
    prolog and epilog (azgpu.imex)."""
    from .imex import files as imex_files

    return {"slurm.conf.nodes": _node_lines(out), "gres.conf": _gres(out), "topology.conf": _topology_conf(out),
            "topology.yaml": _topology_yaml(out), **(imex_files() if out.get("racks") else {})}


def separator(name: str) -> str:
    return f"# ---- {name} ----"


def slurm_stream(files: dict[str, str]) -> str:
    """The files in one stream, each after a `# ---- NAME ----` line (split with csplit or awk)."""
    return "".join(f"{separator(name)}\n{text}" for name, text in files.items())


# ------------------------------------------------------------------------------------ by format


def render_files(out: dict[str, Any], fmt: str, *, address: str = "private", slots: int | None = None) -> dict[str,
                                                                                                               str]:
    """The file(s) of a text format by name: what --out-dir writes and stdout shows."""
    if fmt == "slurm":
        return slurm_files(out)
    if fmt == "hostfile":
        return {"hostfile": openmpi_hostfile(out, address=address, slots=slots)}
    if fmt == "machinefile":
        return {"machinefile": mpich_machinefile(out, address=address, slots=slots)}
    if fmt == "nccl-env":
        return {"nccl.env": nccl_env(out)}
    raise ValueError(f"not a text format: {fmt}")
