"""What the certification tools print on the fake's nodes, in their real formats.

Each generator starts from a real capture shipped with the fake (data/certify/, the same bytes as
tests/fixtures/certify/, where each names its source) and changes only the values: nccl-tests' table
(2 x 8 H100 all_reduce_perf), perftest's ib_write_bw client report (--use_cuda), nvbandwidth's matrices
(a real ND96isr_H100_v5), DCGM 4's JSON (a real results block of DCGM 4, arranged as NVIDIA's schema
testing/python3/dcgm_diag_schema.json lays the document out; error messages and categories as
dcgmlib/dcgm_errors.h words them), and the clocks block of `nvidia-smi -q` (a real H100).
"""

from __future__ import annotations

import json
import re
from functools import cache, lru_cache
from importlib import resources

from .hardware import capture_body
from .hardware import template as node_template


@cache
def template(name: str) -> str:
    return resources.files("azgpu.testing").joinpath("data", "certify", name).read_text()


# ------------------------------------------------------------------------------ nccl-tests


def _size(text: str) -> int:
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    m = re.fullmatch(r"(\d+)([KMG]?)", text)
    return int(m.group(1)) * units.get(m.group(2), 1) if m else 8 << 30


def nccl_table(op: str, hosts: list[str], gpus: int, busbw: float, min_bytes: str, max_bytes: str, gpu_name: str,
               nccl_version: str = "2.23.4") -> str:
    """nccl-tests' output for `op` (all_reduce or alltoall) over these hosts: rank lines, the header and
    one row per size from min to max (factor 2), every row at `busbw` (the bandwidth of large messages)."""
    lines = template("nccl-all_reduce_perf-2x8-h100.txt").splitlines()
    header = [line for line in lines if line.startswith("#") and "Rank" not in line and "Out of bounds" not in line
              and "Avg bus" not in line]
    first = header[0].replace("minBytes 8", f"minBytes {_size(min_bytes)}").replace(
        "maxBytes 8589934592", f"maxBytes {_size(max_bytes)}")
    using = header.index("# Using devices")
    ranks = []
    for h, host in enumerate(hosts):
        for device in range(gpus):
            rank = h * gpus + device
            ranks.append(f"#  Rank {rank:2d} Group  0 Pid {4000 + rank:6d} on {host:>13} device {device:2d} "
                         f"[0x{device + 1:02x}] {gpu_name}")
    n = max(2, len(hosts) * gpus)
    factor = 2 * (n - 1) / n if op == "all_reduce" else (n - 1) / n
    redop = "sum" if op == "all_reduce" else "none"
    rows = []
    size = _size(min_bytes)
    while size <= _size(max_bytes):
        algbw = busbw / factor
        time_us = size / (algbw * 1e3) if algbw > 0 else 0.0
        cells = [str(size), str(size // 4), "float", redop, "-1", f"{time_us:.1f}", f"{algbw:.2f}", f"{busbw:.2f}", "0",
                 f"{time_us:.1f}", f"{algbw:.2f}", f"{busbw:.2f}", "0"]
        rows.append(f"{cells[0]:>12}  {cells[1]:>12}  {cells[2]:>8}  {cells[3]:>6}  {cells[4]:>6}  {cells[5]:>7}  "
                    f"{cells[6]:>6}  {cells[7]:>6}  {cells[8]:>5}  {cells[9]:>7}  {cells[10]:>6}  {cells[11]:>6}  "
                    f"{cells[12]:>5}")
        size *= 2
    out = [first, *header[1:using + 1], *ranks, f"NCCL version {nccl_version}+cuda12.4", *header[using + 1:], *rows,
           "# Out of bounds values : 0 OK", f"# Avg bus bandwidth    : {busbw:.3f} ", "#"]
    return "\n".join(out) + "\n"


# ------------------------------------------------------------------------------ perftest


def ib_write_bw(device: str, gbps: float | None, gpu_name: str, seconds: int = 5) -> str:
    """ib_write_bw's client report with --use_cuda and -D: the real capture with this port, this GPU and
    this average; gbps None is a run the link's drop ended: perftest's completion error, in the words of its
    NOTIFY_COMP_ERROR_SEND (linux-rdma/perftest src/perftest_resources.h), status 12 being
    IBV_WC_RETRY_EXC_ERR (transport retries exhausted)."""
    text = template("perftest-ib_write_bw-cuda-client.txt")
    text = text.replace("Device         : mlx5_1", f"Device         : {device}")
    text = text.replace("device name = [NVIDIA A40]", f"device name = [{gpu_name}]")
    text = text.replace("Link type       : Ethernet", "Link type       : IB")
    head, _, tail = text.partition(" #bytes ")
    if gbps is None:
        return head + (" Completion with error at client\n Failed status 12: wr_id 0 syndrom 0x81\n"
                       "scnt=128, ccnt=0\n deallocating GPU buffer 00007f3dfa600000\n")
    rate = gbps * 1e9 / 8 / 65536 / 1e6
    iterations = int(rate * 1e6 * seconds)
    row = f" 65536      {iterations:<10d}       0.00               {gbps:.2f} \t\t     {rate:.6f}"
    rest = tail.splitlines()
    return head + " #bytes " + rest[0] + "\n" + row + "\n" + "\n".join(rest[2:]) + "\n"


# ------------------------------------------------------------------------------ nvbandwidth


def nvbandwidth(gpu_name: str, h2d: list[float], d2h: list[float], d2d: list[list[float | None]],
                driver: str = "570.133.20") -> str:
    """nvbandwidth -t host_to_device_memcpy_ce -t device_to_host_memcpy_ce -t device_to_device_memcpy_read_ce,
    laid out as the real capture (header, device list, matrices with N/A on the diagonal, SUM lines)."""
    capture = template("nvbandwidth-v0.4-h100-8gpu-d2d-read-ce.txt")
    head = capture.split("Device 0:")[0].replace("Driver Version: 570.133.20", f"Driver Version: {driver}")
    n = len(h2d)
    out = [head.rstrip("\n")]
    out += [f"Device {i}: {gpu_name}" for i in range(n)]
    out.append("")

    def matrix(name: str, description: str, rows: list[list[float | None]], labels: list[int]) -> None:
        out.append(f"Running {name}.")
        out.append(description)
        out.append(" " * 4 + "".join(f"{c:>10}" for c in range(len(rows[0]))))
        for label, row in zip(labels, rows, strict=True):
            out.append(f"{label:<4}" + "".join(f"{'N/A' if v is None else f'{v:.2f}':>10}" for v in row))
        total = sum(v for row in rows for v in row if v is not None)
        out.append("")
        out.append(f"SUM {name} {total:.2f}")
        out.append("")

    matrix("host_to_device_memcpy_ce", "memcpy CE CPU(row) -> GPU(column) bandwidth (GB/s)", [h2d], [0])
    matrix("device_to_host_memcpy_ce", "memcpy CE CPU(row) <- GPU(column) bandwidth (GB/s)", [d2h], [0])
    matrix("device_to_device_memcpy_read_ce", "memcpy CE GPU(row) -> GPU(column) bandwidth (GB/s)", d2d, list(range(n)))
    return "\n".join(out) + "\n"


# ------------------------------------------------------------------------------ DCGM

# dcgmlib/dcgm_errors.h: DCGM_FR_THERMAL_VIOLATIONS (40), category DCGM_FR_EC_HARDWARE_THERMAL (9),
# severity DCGM_ERROR_MONITOR (1); the message format DCGM_FR_THERMAL_VIOLATIONS_MSG.
THERMAL_VIOLATIONS = (40, 9, 1, "There were thermal violations totaling {seconds:.1f} seconds for GPU {gpu}")
# The tests of each level as DCGM 4 names them (NvvsJsonStrings.h; -r 3 adds the stress plugins).
LEVEL_TESTS = {
    1: [("Deployment", "software")],
    2: [("Deployment", "software"), ("Hardware", "memory"), ("Integration", "pcie")],
    3: [("Deployment", "software"), ("Hardware", "memory"), ("Integration", "pcie"), ("Stress", "memory_bandwidth"),
        ("Stress", "targeted_stress"), ("Stress", "targeted_power"), ("Stress", "diagnostic")],
}


def dcgm_json(level: int, gpus: list[dict], failures: dict[int, tuple[int, int, int, str]], *, driver: str,
              version: str = "4.2.3") -> str:
    """dcgmi diag -r N -j of DCGM 4: every GPU passes each test of the level except those in `failures`
    (gpu index -> (error_id, category, severity, message)), which fail the level's last test."""
    text = _dcgm_layout(level, len(gpus), tuple(sorted(failures.items())), driver, version)
    for i, gpu in enumerate(gpus):
        text = text.replace(f'"@serial{i}@"', json.dumps(gpu["serial"]), 1)
    return text


@lru_cache(maxsize=256)
def _dcgm_layout(level: int, count: int, failures: tuple, driver: str, version: str) -> str:
    failed = dict(failures)
    tests = LEVEL_TESTS[min(level, 3)]
    categories: dict[str, list[dict]] = {}
    for c, (category, name) in enumerate(tests):
        results = []
        for i in range(count):
            result: dict = {"entity_group": "GPU", "entity_group_id": 1, "entity_id": i, "status": "Pass"}
            if i in failed and c == len(tests) - 1:
                error_id, cat, severity, message = failed[i]
                result = {**result, "status": "Fail", "warnings": [
                    {"error_category": cat, "error_id": error_id, "error_severity": severity, "warning": message}]}
            results.append(result)
        summary = "Fail" if any(r["status"] == "Fail" for r in results) else "Pass"
        categories.setdefault(category, []).append({"name": name, "results": results,
                                                    "test_summary": {"status": summary}})
    document = {
        "DCGM Diagnostic": {"test_categories": [{"category": c, "tests": t} for c, t in categories.items()]},
        "entity_groups": [{"entity_group": "GPU", "entity_group_id": 1, "entities": [
            {"entity_id": i, "device_id": "2330", "serial_num": f"@serial{i}@"} for i in range(count)]}],
        "metadata": {"version": version, "Driver Version Detected": driver},
    }
    # jsoncpp's styled writer, as dcgmi prints it: tabs and ' : '
    return json.dumps(document, indent="\t", separators=(",", " : ")) + "\n"


# ------------------------------------------------------------------------------ nvidia-smi


def clocks_block(gpus: list[dict], throttled: dict[int, int]) -> str:
    """nvidia-smi -q -d PERFORMANCE for these GPUs: each GPU's 'Clocks Event Reasons' block as the real H100
    prints it, HW Slowdown and HW Thermal Slowdown active for the throttled ones (index -> microseconds)."""
    head, block = _clocks_parts()
    out = [head]
    for i, gpu in enumerate(gpus):
        bus8 = f"{int(gpu['bus'].split(':')[0], 16):08X}:{gpu['bus'].split(':', 1)[1].upper()}"
        text = block
        if i in throttled:
            text = re.sub(r"(HW Slowdown\s+: )Not Active", r"\1Active", text, count=1)
            text = re.sub(r"(HW Thermal Slowdown\s+: )Not Active", r"\1Active", text, count=1)
            text = re.sub(r"(HW Thermal Slowdown\s+: )0 us", rf"\g<1>{throttled[i]} us", text, count=1)
        out.append(f"GPU {bus8}\n{text}")
    return "".join(out)


@cache
def _clocks_parts() -> tuple[str, str]:
    q = capture_body(node_template("h100-nvidia-smi-q.txt"))
    block = q[q.index("    Performance State"):q.index("    Sparse Operation Mode")]
    block = block.replace("Idle                                           : Active",
                          "Idle                                           : Not Active")  # under load
    return q[:q.index("Attached GPUs")], block


def gpu_query(gpus: list[dict]) -> str:
    """nvidia-smi --query-gpu=index,pci.bus_id,serial --format=csv,noheader."""
    return "".join(f"{i}, {int(g['bus'].split(':')[0], 16):08X}:{g['bus'].split(':', 1)[1].upper()}, {g['serial']}\n"
                   for i, g in enumerate(gpus))
