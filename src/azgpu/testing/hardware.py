"""Simulated node hardware: what each scale-set instance of the fake has, and how it breaks.

The fake's own data, not azgpu's profiles (a fake built from the product's beliefs can only agree
with them): per size, GPUs as nvidia-smi names them, memory as the driver reports it, InfiniBand
ports and rate, whether AzNHC has a configuration for the size (Azure/azurehpc-health-checks conf/
on main at 0e0a1ac2: no GB200, GB300, ND v1 or NG), and the multi-node all-reduce bus bandwidth a
healthy scale set measures. Each instance gets a node state when it is created: its GPUs (PCI bus
ids as Azure shows them, serial numbers), ports, kernel log, physical host; faults change that
state, and Run Command answers from it by running azgpu's real node script in a sandbox.
"""

from __future__ import annotations

import re
import uuid
import zlib
from dataclasses import dataclass
from importlib import resources

from . import skus
from .store import key


@dataclass(frozen=True)
class Model:
    vendor: str  # nvidia | amd | none
    gpus: int
    gpu_name: str = ""
    gpu_mib: int = 0
    ib_ports: int = 0
    ib_rate: int = 0
    ib_gen: str = ""
    accelerated_ib_vf: bool = False  # mlx5_an0: the accelerated-networking VF, an Ethernet RDMA device
    aznhc_conf: str = ""  # the conf/ file AzNHC's main branch has for the size ("" = unsupported)
    nvlink: bool = False
    busbw_gbps: float = 0.0  # all_reduce_perf at 8 GiB across healthy nodes of one scale set


# nvidia-smi names and memory: A100 40 GB/80 GB, H100 (a real capture: 81559 MiB), H200, V100, P40 as
# the drivers print them; bus bandwidth: ND A100 v4 measured 180-190 GB/s (a Microsoft engineer's
# benchmark notes), the others 95 % of the per-node InfiniBand bandwidth.
MODELS: dict[str, Model] = {
    "standard_nd96asr_v4": Model("nvidia", 8, "NVIDIA A100-SXM4-40GB", 40960, 8, 200, "HDR", True,
                                 "nd96asr_v4.conf", True, 186.0),
    "standard_nd96amsr_a100_v4": Model("nvidia", 8, "NVIDIA A100-SXM4-80GB", 81920, 8, 200, "HDR", True,
                                       "nd96amsr_a100_v4.conf", True, 186.0),
    "standard_nd96isr_h100_v5": Model("nvidia", 8, "NVIDIA H100 80GB HBM3", 81559, 8, 400, "NDR", True,
                                      "nd96isr_h100_v5.conf", True, 380.0),
    "standard_nd96isr_h200_v5": Model("nvidia", 8, "NVIDIA H200", 143771, 8, 400, "NDR", True,
                                      "nd96isr_h200_v5.conf", True, 380.0),
    "standard_nd96isr_mi300x_v5": Model("amd", 8, "AMD Instinct MI300X", 196592, 8, 400, "NDR", False,
                                        "nd96isr_mi300x_v5.conf", False, 380.0),
    "standard_nd128isr_ndr_gb200_v6": Model("nvidia", 4, "NVIDIA GB200", 189471, 4, 400, "NDR", False, "", True,
                                            190.0),
    "standard_nd128isr_gb300_v6": Model("nvidia", 4, "NVIDIA GB300", 284208, 4, 800, "XDR", False, "", True, 380.0),
    "standard_nd128isrg5_gb300_v6": Model("nvidia", 4, "NVIDIA GB300", 284208, 4, 800, "XDR", False, "", True,
                                          380.0),
    "standard_nd40rs_v2": Model("nvidia", 8, "Tesla V100-SXM2-32GB", 32510, 1, 100, "EDR", False, "nd40rs_v2.conf",
                                True, 11.9),
    "standard_nd6s": Model("nvidia", 1, "Tesla P40", 24451),
    "standard_nd12s": Model("nvidia", 2, "Tesla P40", 24451),
    "standard_nd24s": Model("nvidia", 4, "Tesla P40", 24451),
    "standard_nd24rs": Model("nvidia", 4, "Tesla P40", 24451, 1, 56, "FDR", False, "", False, 5.3),
    "standard_ng8ads_v620_v1": Model("amd", 1, "AMD Radeon PRO V620", 8176),
    "standard_ng16ads_v620_v1": Model("amd", 1, "AMD Radeon PRO V620", 16368),
    "standard_ng32ads_v620_v1": Model("amd", 1, "AMD Radeon PRO V620", 32752),
    "standard_ng32adms_v620_v1": Model("amd", 1, "AMD Radeon PRO V620", 32752),
}
NO_GPU = Model("none", 0)


class NoHardwareModel(LookupError):
    """A GPU size the fake has no hardware row for: simulating it as a node without GPUs would let every
    check of its GPUs and ports pass against nothing."""


def model(size: str) -> Model:
    """The hardware of a size: its row of MODELS; a size of no GPU (a head node's D-series) has none; a GPU
    size without a row is an error, not a node without GPUs."""
    found = MODELS.get(size.lower())
    if found is not None:
        return found
    if skus.is_gpu({"name": size}):
        raise NoHardwareModel(f"the fake has no hardware model for the GPU size {size}: add its row to MODELS in "
                              "azgpu/testing/hardware.py (GPUs, memory, InfiniBand ports and rate, AzNHC conf, "
                              "bus bandwidth), each figure from a source")
    return NO_GPU


def _hpc_image(vmss: dict) -> bool:
    """The Azure HPC images carry AzNHC (azhpc-images components/install_health_checks.sh)."""
    ref = ((vmss.get("properties", {}).get("virtualMachineProfile") or {}).get("storageProfile") or {}).get(
        "imageReference") or {}
    return "hpc" in (ref.get("offer", "") + " " + ref.get("sku", "")).lower()


def gpu_bus(index: int, count: int) -> str:
    """PCI bus ids as Azure's multi-GPU nodes show them (00000001:00:00.0 ...: AzNHC's test data of an
    8-GPU node), and 0000:00:06.0 for a single GPU (a real single-H100 VM), in sysfs form."""
    return "0000:00:06.0" if count == 1 else f"{index + 1:04x}:00:00.0"


def new_node(store, vm: dict, vmss: dict) -> dict:
    """The node state of a new instance: healthy, on a fresh host (node_fault_table.apply_pending then gives it
    the faults queued for it)."""
    number = store.next_number()
    m = model(vmss["sku"]["name"])
    location = vm.get("location", "eastus")
    node = {
        "size": vmss["sku"]["name"],
        "vm_id": vm["properties"]["vmId"],
        "computer": vm["properties"]["osProfile"]["computerName"],
        "vm_name": vm["name"],
        # A real one reads like AMS081063509028 (Azure/az-hop#1796): three letters, twelve digits.
        "physical_host": f"{location[:3].upper()}{number:012d}",
        "hpc_image": _hpc_image(vmss),
        "admin_user": ((vmss["properties"].get("virtualMachineProfile") or {}).get("osProfile") or {}).get(
            "adminUsername", "azureuser"),
        **healthy_parts(m, number),
    }
    store.nodes[key(vm["id"])] = node
    return node


def healthy_parts(m: Model, number: int) -> dict:
    """What a healthy node of this model shows (its GPUs, ports and tools), the `number`th host's serials."""
    return {
        "gpus": [{"bus": gpu_bus(i, m.gpus), "serial": f"{1650000000000 + number * 16 + i}", "present": True}
                 for i in range(m.gpus)],
        "ib": [{"dev": f"mlx5_ib{i}", "state": "ACTIVE", "phys": "LinkUp", "rate": m.ib_rate, "width": 4}
               for i in range(m.ib_ports)],
        "xids": [],
        "nvidia_smi": "ok",
        "nvlink": "ok",
        "run_command": "ok",
        "faults": [],
        "files": {},
    }


def gb_family(size: str) -> bool:
    """ND GB200 v6 / ND GB300 v6: the GPUs of a rack share an NVLink fabric (nvidia-smi -q's Fabric)."""
    return bool(re.search(r"_gb[23]00", size.lower()))


def fabric_of(node: dict) -> dict | None:
    """The node's NVLink fabric as nvidia-smi -q shows it: node["fabric"] where set (racks), else a healthy
    one shared by the scale set (a ClusterUUID and CliqueId derived from its name)."""
    if not gb_family(node["size"]):
        return None
    scale_set = node["vm_name"].rsplit("_", 1)[0]
    default = {"clusterUuid": str(uuid.uuid5(uuid.NAMESPACE_URL, f"azgpu-fake-fabric/{scale_set}")),
               "cliqueId": 1 + zlib.crc32(scale_set.encode()) % 32766, "state": "Completed", "status": "Success"}
    return {**default, **(node.get("fabric") or {})}


# ------------------------------------------------------------------------------ what the tools print


def template(name: str) -> str:
    """A real capture shipped with the fake (data/node/, the same bytes as tests/fixtures/health/)."""
    return resources.files("azgpu.testing").joinpath("data", "node", name).read_text()


def capture_body(text: str) -> str:
    """A gpu-samples capture without its '$ command' first line and '[exit N]' last line."""
    lines = text.splitlines(keepends=True)
    if lines and lines[0].startswith("$ "):
        lines = lines[1:]
    if lines and re.fullmatch(r"\[exit \d+\]\s*", lines[-1]):
        lines = lines[:-1]
    return "".join(lines)


def _set(text: str, pattern: str, value: object) -> str:
    """text with the first match of pattern's group 1 followed by value in place of the match (a function,
    not a replacement string, so a value's backslashes stay as they are)."""
    return re.sub(pattern, lambda m: m.group(1) + str(value), text, count=1)


def nvidia_smi_q(gpus: list[dict], name: str, mib: int, fabric: dict | None = None) -> str:
    """nvidia-smi -q for these GPUs, each section the real H100 one with its bus id, serial, UUID,
    product name and memory total replaced; a GPU's injected SRAM ECC errors and row-remap state, and on
    GB sizes the Fabric block (State, Status, CliqueId, ClusterUUID) in the same layout."""
    body = capture_body(template("h100-nvidia-smi-q.txt"))
    head, _, section = body.partition("GPU 00000000:00:06.0\n")
    head = re.sub(r"(Attached GPUs\s+: )\d+", lambda m: f"{m.group(1)}{len(gpus)}", head)
    out = [head]
    for i, gpu in enumerate(gpus):
        bus8 = f"{int(gpu['bus'].split(':')[0], 16):08X}:{gpu['bus'].split(':', 1)[1].upper()}"
        text = "GPU 00000000:00:06.0\n" + section
        text = text.replace("00000000:00:06.0", bus8)
        text = _set(text, r"(Serial Number\s+: )\S+", gpu["serial"])
        text = _set(text, r"(GPU UUID\s+: GPU-)\S+",
                    f"{int(gpu['serial']):032x}"[:8] + "-0000-0000-0000-" + f"{i:012x}")
        text = _set(text, r"(Product Name\s+: ).*", name)
        text = _set(text, r"(FB Memory Usage\n\s+Total\s+: )\d+", mib)
        text = _set(text, r"(Minor Number\s+: )\d+", i)
        if gpu.get("ecc_sram"):
            text = _set(text, r"(?ms)(^        Volatile\n.*?^            SRAM Uncorrectable SEC-DED\s+: )0",
                        gpu["ecc_sram"])
        if gpu.get("remap") == "pending":
            text = _set(text, r"(?m)^(        Pending\s+: )No", "Yes")
        if gpu.get("remap") == "failure":
            text = _set(text, r"(?m)^(        Remapping Failure Occurred\s+: )No", "Yes")
        if fabric:
            # key, not name: name is the product name every GPU's section prints (was rebound here, so a GB
            # node's second GPU onwards printed "clusterUuid" as its Product Name)
            for field, key in (("State", "state"), ("Status", "status"), ("CliqueId", "cliqueId"),
                               ("ClusterUUID", "clusterUuid")):
                text = _set(text, rf"(?ms)(^    Fabric\n.*?^        {field}\s+: )N/A", fabric[key])
        out.append(text)
    return "".join(out)


def nvlink_status(node: dict, name: str) -> str:
    """nvidia-smi nvlink -s: every GPU's 12 links (AzNHC's good sample), or its bad sample for GPU 0."""
    good = template("aznhc-good_nvlink_status.txt")
    link_lines = good.split("\n", 1)[1]
    out = []
    for i, gpu in enumerate(g for g in node["gpus"] if g["present"]):
        head = f"GPU {i}: {name} (UUID: GPU-{int(gpu['serial']):032x}"[:60] + ")\n"
        if node["nvlink"] == "down" and i == 0:
            out.append(head + "NVML: Unable to retrieve NVLink information as all links are inactive\n")
        else:
            out.append(head + link_lines)
    return "".join(out)


def rocm_smi_showbus(node: dict) -> str:
    """rocm-smi --showbus in the real layout (8 x MI60 sample), one line per present GPU."""
    lines = template("rocm-smi-showbus-8xmi60.txt").splitlines()
    body = [f"GPU[{i}]          : PCI Bus: {gpu['bus'].upper()}" for i, gpu in
            enumerate(g for g in node["gpus"] if g["present"])]
    return "\n".join(lines[:2] + body + lines[-2:]) + "\n"


XID_TEXT = {79: "GPU has fallen off the bus.", 48: "An uncorrectable double bit error (DBE) has been detected on GPU.",
            94: "Contained ECC error.", 95: "Uncontained ECC error."}


def dmesg(node: dict) -> str:
    """The real NVRM lines of a boot, then an Xid line for each injected Xid (the driver's format:
    'NVRM: Xid (PCI:0000:01:00): 79, pid=..., ...')."""
    out = capture_body(template("h100-dmesg-xid.txt")) if model(node["size"]).vendor == "nvidia" else ""
    for n, xid in enumerate(node["xids"]):
        bus = node["gpus"][0]["bus"].rsplit(".", 1)[0] if node["gpus"] else "0000:00:00"
        out += f"[{12345.678901 + n:.6f}] NVRM: Xid (PCI:{bus}): {xid}, pid=4242, name=python3, " \
               f"{XID_TEXT.get(xid, 'Graphics Exception')}\n"
    return out


def rate_text(port: dict, gen: str) -> str:
    return f"{port['rate']} Gb/sec ({port['width']}X {gen})"


STATE_NUMBERS = {"DOWN": 1, "INIT": 2, "ARMED": 3, "ACTIVE": 4}
PHYS_NUMBERS = {"Sleep": 1, "Polling": 2, "Disabled": 3, "LinkUp": 5}


def aznhc_log(node: dict, vm_size: str) -> tuple[str, int]:
    """What run-health-checks.sh writes for this node, in AzNHC's and LBNL NHC's line formats
    (customTests/*.nhc, nhc die()/pass()), and its exit code."""
    m = model(node["size"])
    present = [g for g in node["gpus"] if g["present"]]
    lines = ["Azure Healthcheck log", "------ VM Meta Data ------", f"VM NAME: {node['vm_name']}",
             f"COMPUTER NAME: {node['computer']}", f"VM HOST NAME: {node['computer']}", f"VM ID: {node['vm_id']}",
             f"VM SKU: {vm_size.lower()}", f"PHYSICAL HOST NAME: {node['physical_host']}",
             "Kernel Version: 5.15.0-1074-azure"]
    failed = []

    def result(ok: bool, passed: str, failure: str) -> None:
        if ok:
            lines.append(f"SUCCESS:  nhc:  Health check passed:  {passed}")
        else:
            lines.append(f"ERROR:  nhc:  Health check failed:  {failure}")
            failed.append(failure)

    if node["nvidia_smi"] == "hang":
        result(False, "", "check_nvsmi_healthmon:  nvidia-smi:  Caught fatal signal 9. FaultCode: NHC2015")
    elif node["nvidia_smi"] == "driver_not_loaded":
        # csc_nvidia_smi.nhc's die for nvidia-smi's exit 9; azure_gpu_count.nhc counts `nvidia-smi --list-gpus`
        # lines, none when the tool prints its error on stderr (which stream it uses is not documented).
        result(False, "", f"-e check_gpu_count: Expected to see {m.gpus} but found 0. FaultCode: NHC2009")
        result(False, "", "check_nvsmi_healthmon:  nvidia-smi:  NVIDIA driver not loaded. FaultCode: NHCNA")
    elif node["nvidia_smi"] == "no_devices":
        result(False, "", f"-e check_gpu_count: Expected to see {m.gpus} but found 0. FaultCode: NHC2009")
    elif any(g.get("lost") for g in present):
        result(False, "", "check_nvsmi_healthmon:  nvidia-smi:  GPU is lost. FaultCode: NHC2015")
    else:
        result(len(present) == m.gpus, f"check_gpu_count: Expected {m.gpus} and found {len(present)}",
               f"-e check_gpu_count: Expected to see {m.gpus} but found {len(present)}. FaultCode: NHC2009")
        if m.vendor == "nvidia":
            result(True, "check_nvsmi_healthmon: nvidia-smi completed successfully", "")
            for line in dmesg(node).splitlines():
                if "Xid" in line:
                    result(False, "", f"check_gpu_xid: GPU Xid errors detected: {line}. FaultCode: NHC2001")
                    break
            else:
                result(True, "check_gpu_xid:  GPU XID error check passed.", "")
            # check_gpu_ecc's die lines (customTests/azure_gpu_ecc.nhc), for the first GPU that has a fault.
            for i, gpu in enumerate(present):
                if gpu.get("remap"):
                    what = "Row remap pending" if gpu["remap"] == "pending" else "Row remap error"
                    result(False, "", f"check_gpu_ecc: GPU id {i}: {what}. FaultCode: NHC2007")
                    break
                if gpu.get("ecc_sram"):
                    result(False, "", f"check_gpu_ecc: GPU id {i}: SRAM Uncorrectable ECC error count detected, "
                                      f"({gpu['ecc_sram']},{gpu['ecc_sram']}). FaultCode: NHC2019")
                    break
            else:
                result(True, "check_gpu_ecc: ECC error counts normal", "")
            if m.nvlink:
                result(node["nvlink"] == "ok", "check_nvlink_status: NVLink is active",
                       "check_nvlink_status: Failed to get NVLINK status with error code 0. FaultCode: NHC2016")
    for port in node["ib"]:
        ok = port["state"] == "ACTIVE" and port["phys"] == "LinkUp" and port["rate"] == m.ib_rate
        result(ok, f"check_hw_ib: {port['dev']}:1 ACTIVE",
               f"check_hw_ib:  No IB port {port['dev']}:1 is ACTIVE (LinkUp {m.ib_rate} Gb/sec).")
    if failed:
        lines.append(f"ERROR:  nhc:  {len(failed)} health checks failed.")
    rc = 1 if failed else 0
    lines.append(f"Health checks completed with exit code: {rc}.")
    return "\n".join(lines) + "\n", rc


def aznhc_stub(node: dict, vm_size: str) -> str:
    """run-health-checks.sh as the image has it, answering from the node state: the 'not supported'
    line and exit 0 for a size without a conf, else the log at -o and on stdout."""
    m = model(node["size"])
    if not m.aznhc_conf:
        sku = vm_size.lower().replace("standard_", "")
        msg = f"The vm SKU 'standard_{sku}' is currently not supported by Azure health checks."
        return ("#!/bin/bash\nOUT=./health.log\nwhile [ $# -gt 0 ]; do [ \"$1\" = -o ] && OUT=$2; shift; done\n"
                "echo 'No custom conf file specified, detecting VM SKU...'\n"
                f"echo \"{msg}\" | tee -a \"$OUT\"\nexit 0\n")
    log, rc = aznhc_log(node, vm_size)
    return ("#!/bin/bash\nOUT=./health.log\nwhile [ $# -gt 0 ]; do [ \"$1\" = -o ] && OUT=$2; shift; done\n"
            "echo 'No custom conf file specified, detecting VM SKU...'\n"
            f"cat >>\"$OUT\" <<'AZNHC_LOG'\n{log}AZNHC_LOG\ncat \"$OUT\"\nexit {rc}\n")


def nccl_output(ranks_by_host: list[tuple[str, int]], busbw: float, name: str) -> str:
    """all_reduce_perf's output in the real layout (2 x 8 H100 sample) for these hosts, with the
    rows scaled so the largest size measures busbw."""
    text = template("nccl-all_reduce_perf-2x8-h100.txt")
    lines = text.splitlines()
    header = [line for line in lines if line.startswith("#") and "Rank" not in line and "Out of bounds" not in line
              and "Avg bus" not in line]
    using = header.index("# Using devices")
    ranks = []
    rank = 0
    for host, gpus in ranks_by_host:
        for device in range(gpus):
            ranks.append(f"#  Rank {rank:2d} Group  0 Pid {4000 + rank:6d} on {host:>13} device {device:2d} "
                         f"[0x{device + 1:02x}] {name}")
            rank += 1
    rows = [line for line in lines if re.match(r"^\s+\d+\s+\d+\s+float", line)]
    last = float(rows[-1].split()[7])
    scaled = []
    for row in rows:
        f = row.split()
        factor = busbw / last
        f[6] = f"{float(f[6]) * factor:.2f}"
        f[7] = f"{float(f[7]) * factor:.2f}"
        f[10] = f"{float(f[10]) * factor:.2f}"
        f[11] = f"{float(f[11]) * factor:.2f}"
        scaled.append(f"{f[0]:>12}  {f[1]:>12}  {f[2]:>8}  {f[3]:>6}  {f[4]:>6}  {f[5]:>7}  {f[6]:>6}  {f[7]:>6}  "
                      f"{f[8]:>5}  {f[9]:>7}  {f[10]:>6}  {f[11]:>6}  {f[12]:>5}")
    avg = sum(float(r.split()[7]) for r in scaled) / len(scaled)
    out = header[:using + 1] + ranks + header[using + 1:] + scaled
    out += ["# Out of bounds values : 0 OK", f"# Avg bus bandwidth    : {avg:.3f} "]
    return "\n".join(out) + "\n"

