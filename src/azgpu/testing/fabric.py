"""The fake's fabric and GPUs under load: a hardware model that can be wrong the ways hardware is.

Each simulated node (a node state of hardware.py, a plain dict kept in the store) carries, besides its
GPUs and ports, what makes certification find something: a port that is up at full rate but carries
only a share of its bandwidth (`ib_degraded` {port: share}, a bad cable the gate cannot see), a port
whose link drops every so many seconds (`ib_flapping` {port: period}; the kernel's link_downed counter
counts each drop), a GPU that throttles after so many seconds under load (`gpu_throttle` {index:
seconds}), a node whose next fabric tests are slowed once each (`transient`: how many), and, on NVL72
sizes, its NVLink carrying a share of its bandwidth (`nvlink_degraded`). The model answers each tool:
ib_write_bw per port between two nodes (the slower end bounds it), a collective over a group (the
slowest port of any member bounds it: NCCL spreads a ring over every rail), the loopback over a node's
own ports, nvbandwidth, DCGM and the thermal run, each taking the time it takes on the node's own
clock (durations below), in the real tools' formats (tool_output.py).

The healthy figures are the fake's own data, not azgpu's profiles; where one comes from a measurement
it says which, the rest are the fake's estimates. `ModelRunner` answers the certification suite's
questions directly from the model (the benchmark's thousand trials); the simulated Azure answers the
same questions through Run Command by running azgpu's node script on stub tools that print what the
model says (testing/certify_sandbox.py).
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from . import hardware, tool_output

DROP_SECONDS = 2.0  # a flapping link stays down this long each time
TRANSIENT_SHARE = 0.7  # what a transient slowdown leaves of a measurement
NOISE = 0.003  # run-to-run scatter of a healthy measurement


@dataclass(frozen=True)
class Figures:
    port_gbps: float  # ib_write_bw, one port, GPUDirect
    loopback: float  # all_reduce over one node's own ports (GB/s)
    allreduce: float  # all_reduce across nodes over InfiniBand, 16 GiB (GB/s)
    alltoall: float
    mnnvl: float  # all_reduce across one rack over NVLink (GB/s)
    h2d: float
    d2h: float
    d2d: float


# ND H100 v5: ports 392.8-393.0 Gb/s and copies 370-373 GB/s on a real node (AlizeeChen11/azurehpc-health-checks,
# customTests/debugging-test-failure.md); all_reduce about 450 GB/s (Azure/ai-infrastructure-on-azure,
# sku_baselines.md); loopback, all-to-all and host copies are the fake's estimates.
_H100 = Figures(392.9, 40.0, 450.0, 300.0, 0.0, 55.2, 55.1, 371.0)
# ND A100 v4: all_reduce 180-190 GB/s measured (a Microsoft engineer's benchmark notes); the rest estimates
# a little above AzNHC's floors (conf/nd96asr_v4.conf).
_A100 = Figures(196.0, 20.0, 186.0, 120.0, 0.0, 24.5, 24.5, 262.0)
# ND GB300 v6: all_reduce inside a rack about 937 GB/s, between racks about 200 (sku_baselines.md); host copies
# as Microsoft's benchmarking guide measured on GB200 (201/193 GB/s); the rest estimates.
_GB300 = Figures(392.9, 40.0, 200.0, 150.0, 937.0, 201.0, 193.0, 750.0)
FIGURES = {
    "standard_nd96isr_h100_v5": _H100, "standard_nd96isr_h200_v5": _H100,
    "standard_nd96asr_v4": _A100, "standard_nd96amsr_a100_v4": _A100,
    "standard_nd128isr_gb300_v6": _GB300, "standard_nd128isrg5_gb300_v6": _GB300,
    "standard_nd128isr_ndr_gb200_v6": Figures(392.9, 40.0, 180.0, 130.0, 900.0, 201.0, 193.0, 750.0),
}
DEFAULT = Figures(100.0, 10.0, 50.0, 30.0, 0.0, 12.0, 12.0, 50.0)
# How long each step runs on the node (seconds): DCGM's as NVIDIA documents them (-r 1 seconds, -r 2 about
# two minutes, -r 3 about 15 minutes); the others the fake's estimates.
DCGM_SECONDS = {1: 45.0, 2: 120.0, 3: 900.0, 4: 1800.0}
NVBANDWIDTH_SECONDS = 60.0
LOOPBACK_SECONDS = 90.0
PAIR_SECONDS = 25.0  # every port at once, each -D 5, a server's start between them
LAUNCH_SECONDS = 20.0  # mpirun reaching every node


def figures(node: dict) -> Figures:
    return FIGURES.get(node["size"].lower(), DEFAULT)


def make_node(name: str, size: str, number: int, *, rack: str | None = None) -> dict:
    """A node state without the fake Azure around it (the benchmark's trials), healthy."""
    m = hardware.model(size)
    node = {"size": size, "computer": name, "vm_name": f"{name}_0", "vm_id": f"00000000-0000-0000-0000-{number:012d}",
            "physical_host": f"EUS{number:012d}", "nvidia_smi": "ok", "nvlink": "ok", "run_command": "ok",
            "xids": [], "faults": [], "files": {}, "hpc_image": True, "admin_user": "azureuser",
            "gpus": [{"bus": hardware.gpu_bus(i, m.gpus), "serial": f"{1650000000000 + number * 16 + i}",
                      "present": True} for i in range(m.gpus)],
            "ib": [{"dev": f"mlx5_ib{i}", "state": "ACTIVE", "phys": "LinkUp", "rate": m.ib_rate, "width": 4}
                   for i in range(m.ib_ports)]}
    if rack:
        node["rack"] = rack
    return node


# ------------------------------------------------------------------------------ the model


def _noise(rng: random.Random) -> float:
    return 1.0 + rng.uniform(-NOISE, NOISE)


def port_share(node: dict, dev: str) -> float:
    port = next((p for p in node["ib"] if p["dev"] == dev), None)
    if port is None or port["state"] != "ACTIVE" or port["phys"] != "LinkUp":
        return 0.0
    full = hardware.model(node["size"]).ib_rate or port["rate"]
    return min(1.0, port["rate"] / full) * float((node.get("ib_degraded") or {}).get(dev, 1.0))


def link_matrix(nodes: Sequence[dict], dev: str) -> list[list[float]]:
    """The per-link bandwidth matrix of one port (Gb/s): what ib_write_bw with GPUDirect measures between
    each two nodes on it, the slower end's link bounding it (0 on the diagonal)."""
    return [[0.0 if a is b else round(figures(a).port_gbps * min(port_share(a, dev), port_share(b, dev)), 2)
             for b in nodes] for a in nodes]


def node_share(node: dict) -> float:
    return min((port_share(node, p["dev"]) for p in node["ib"]), default=1.0)


def flaps(node: dict, dev: str, start: float, seconds: float) -> int:
    """How often the port's link drops in [start, start + seconds) of the node's clock."""
    period = (node.get("ib_flapping") or {}).get(dev)
    if not period:
        return 0
    period = float(period)
    first = int(start // period) + (1 if start % period else 0)
    last = int((start + seconds) // period)
    return max(0, last - first + 1) if (start + seconds) % period else max(0, last - first)


def _flap(node: dict, dev: str, seconds: float) -> int:
    clock = float(node.get("clock", 0.0))
    n = flaps(node, dev, clock, seconds)
    if n:
        counters = node.setdefault("link_downed", {})
        counters[dev] = int(counters.get(dev, 0)) + n
    return n


def _advance(nodes: Sequence[dict], seconds: float) -> None:
    for node in nodes:
        node["clock"] = float(node.get("clock", 0.0)) + seconds


def _transient(nodes: Sequence[dict]) -> float:
    """A slowdown of this one test when a member still has a transient to give."""
    for node in nodes:
        if int(node.get("transient", 0)) > 0:
            node["transient"] = int(node["transient"]) - 1
            return TRANSIENT_SHARE
    return 1.0


def throttled(node: dict, under_load: float) -> dict[int, float]:
    """GPU index -> seconds it has throttled after `under_load` seconds of load."""
    return {int(i): under_load - float(after) for i, after in (node.get("gpu_throttle") or {}).items()
            if under_load > float(after)}


def gpu_name(node: dict) -> str:
    return hardware.model(node["size"]).gpu_name or "NVIDIA GPU"


def present(node: dict) -> list[dict]:
    return [g for g in node["gpus"] if g.get("present", True)]


def driver(node: dict) -> str:
    return "570.133.20"


# ------------------------------------------------------------------------------ the tools


def dcgm(node: dict, level: int) -> tuple[str, float]:
    seconds = DCGM_SECONDS.get(level, 120.0)
    error_id, category, severity, message = tool_output.THERMAL_VIOLATIONS
    failures = {i: (error_id, category, severity, message.format(seconds=hot, gpu=i))
                for i, hot in throttled(node, seconds).items()} if level >= 2 else {}
    _advance([node], seconds)
    return tool_output.dcgm_json(level, present(node), failures, driver=driver(node)), seconds


def thermal(node: dict, seconds: int, every: int) -> dict:
    """What the thermal step's tools print: the GPU list, each load's exit code, and the clocks sampled
    every `every` seconds under load."""
    gpus = present(node)
    samples = []
    for k in range(every, seconds + 1, every):
        hot = throttled(node, k)
        samples.append((k, tool_output.clocks_block(gpus, {i: int(s * 1e6) for i, s in hot.items()})))
    _advance([node], seconds + 5)
    return {"gpus": tool_output.gpu_query(gpus), "exits": [0] * len(gpus), "samples": samples,
            "seconds": float(seconds + 5)}


def nvbandwidth(node: dict, rng: random.Random) -> tuple[str, float]:
    f = figures(node)
    n = len(present(node))
    share = float(node.get("nvlink_degraded", 1.0)) if not hardware.gb_family(node["size"]) else 1.0
    d2d = [[None if i == j else round(f.d2d * share * _noise(rng), 2) for j in range(n)] for i in range(n)]
    text = tool_output.nvbandwidth(gpu_name(node), [round(f.h2d * _noise(rng), 2) for _ in range(n)],
                                   [round(f.d2h * _noise(rng), 2) for _ in range(n)], d2d, driver(node))
    _advance([node], NVBANDWIDTH_SECONDS)
    return text, NVBANDWIDTH_SECONDS


def loopback(node: dict, rng: random.Random, min_bytes: str, max_bytes: str) -> dict:
    before = {p["dev"]: int((node.get("link_downed") or {}).get(p["dev"], 0)) for p in node["ib"]}
    dropped = [p["dev"] for p in node["ib"] if _flap(node, p["dev"], LOOPBACK_SECONDS)]
    share = node_share(node) * (0.85 if dropped else 1.0)
    busbw = round(figures(node).loopback * share * _noise(rng), 2)
    text = tool_output.nccl_table("all_reduce", [node["computer"]], len(present(node)), busbw, min_bytes, max_bytes,
                                  gpu_name(node))
    after = {p["dev"]: int((node.get("link_downed") or {}).get(p["dev"], 0)) for p in node["ib"]}
    _advance([node], LOOPBACK_SECONDS)
    return {"text": text, "before": before, "after": after, "seconds": LOOPBACK_SECONDS}


def loopback_inside(node: dict, rng: random.Random, min_bytes: str, max_bytes: str) -> str:
    """The same all_reduce with NCCL's P2P or shared-memory transport left on: the GPUs talk inside the node,
    so the ports' faults (degraded, flapping) do not show; its own time is not modelled apart."""
    busbw = round(figures(node).loopback * _noise(rng), 2)
    return tool_output.nccl_table("all_reduce", [node["computer"]], len(present(node)), busbw, min_bytes, max_bytes,
                                  gpu_name(node))


def collective(nodes: Sequence[dict], op: str, fabric: str, min_bytes: str, max_bytes: str,
               rng: random.Random, fabric_share: float = 1.0) -> tuple[str, float]:
    f = figures(nodes[0])
    if fabric == "mnnvl":
        base = f.mnnvl or f.allreduce
        share = min(float(n.get("nvlink_degraded", 1.0)) for n in nodes)
    else:
        base = f.allreduce if op == "all_reduce" else f.alltoall
        share = min(min(node_share(n), float(n.get("collective_share", 1.0))) for n in nodes)
    busbw = round(base * share * (fabric_share if fabric != "mnnvl" else 1.0) * _transient(nodes) * _noise(rng), 2)
    size = tool_output._size(max_bytes)
    seconds = LAUNCH_SECONDS + 25 * size / max(1.0, busbw) / 1e9 * 2
    text = tool_output.nccl_table(op, [n["computer"] for n in nodes], len(present(nodes[0])), busbw, min_bytes,
                                  max_bytes, gpu_name(nodes[0]))
    _advance(nodes, seconds)
    return text, seconds


def ibpair(a: dict, b: dict, rng: random.Random) -> tuple[dict[str, str], float]:
    """Each port's client report of ib_write_bw from a to b (the slower end bounds it; a link that drops
    during the test ends it with perftest's completion error)."""
    f = figures(a)
    slow = _transient([a, b])
    out = {}
    for port in a["ib"]:
        dev = port["dev"]
        down = _flap(a, dev, PAIR_SECONDS) + _flap(b, dev, PAIR_SECONDS)
        share = min(port_share(a, dev), port_share(b, dev))
        gbps = None if down or share == 0 else round(f.port_gbps * share * slow * _noise(rng), 2)
        out[dev] = tool_output.ib_write_bw(dev, gbps, gpu_name(a))
    _advance([a, b], PAIR_SECONDS)
    return out, PAIR_SECONDS


# ------------------------------------------------------------------------------ as the node script returns it

_NCCL_LINES = re.compile(r"(?m)^(?: *\d+ +\d+ +[A-Za-z]|.*NCCL version"
                         r"|# (?:nThread|Collective test|Out of bounds|Avg bus)).*\n?")
_PERFTEST_LINES = re.compile(r"(?m)^(?: *#bytes|.*Device *:| *\d+ +\d+ +[\d.]+ +[\d.]+|.*initializing CUDA"
                             r"|.*device name =|.*Couldn.t|.*Failed|.*[Ee]rror).*\n?")
_SAMPLE_LINES = re.compile(r"(?m)^(?:GPU |.*Clocks (?:Event|Throttle) Reasons|.*Slowdown).*\n?")


def nccl_lines(text: str) -> str:
    """certify_node.sh's nccl_lines: of nccl-tests' output, the rows and the trailer."""
    return "".join(_NCCL_LINES.findall(text))


def perftest_lines(text: str) -> str:
    """certify_node.sh's perftest_lines: of ib_write_bw's report, what azgpu reads."""
    return "".join(_PERFTEST_LINES.findall(text))


def sample_lines(text: str) -> str:
    return "".join(_SAMPLE_LINES.findall(text))


def thermal_text(raw: dict, seconds: int) -> str:
    """The thermal step's output as certify_node.sh puts it together."""
    out = "== gpus\n" + raw["gpus"]
    out += "".join(f"== load gpu {i} exit {rc}\n" for i, rc in enumerate(raw["exits"]))
    active = next(((k, s) for k, s in raw["samples"] if re.search(r"Slowdown.*: Active", s)), None)
    if active:
        out += f"== sample at {active[0]} s\n" + sample_lines(active[1])
    last = raw["samples"][-1][1] if raw["samples"] else ""
    return out + f"== final sample at {seconds} s\n" + sample_lines(last)


def loopback_text(raw: dict) -> str:
    out = "".join(f"before {dev} link_downed {n}\n" for dev, n in raw["before"].items())
    out += nccl_lines(raw["text"])
    return out + "".join(f"after {dev} link_downed {n}\n" for dev, n in raw["after"].items())


def ibpair_text(reports: dict[str, str]) -> str:
    return "".join(f"---- rail {dev}\n" + perftest_lines(text) for dev, text in reports.items())


@dataclass(frozen=True)
class Answer:
    """One step's answer, with the fields of the suite's Output (the fake borrows no product type)."""

    text: str | None
    seconds: float = 0.0
    error: str | None = None
    image: bool = False
    versions: dict = field(default_factory=dict)
    pages: int = 1


class ModelRunner:
    """The certification suite's runner over the model: no Azure, no shell, the same answers. Jobs are read
    by their fields (kind, nodes, op, fabric, min_bytes, max_bytes)."""

    def __init__(self, nodes: dict[str, dict], seed: int = 0):
        self.nodes = nodes
        self.rng = random.Random(seed)

    def per_node(self, mode, nodes, settings):
        out = {}
        for info in nodes:
            node = self.nodes[info.name]
            if mode == "dcgm":
                text, seconds = dcgm(node, int(settings.get("AZGPU_DCGM_LEVEL", 2)))
            elif mode == "thermal":
                s = int(settings.get("AZGPU_THERMAL_SECONDS", 120))
                every = int(settings.get("AZGPU_THERMAL_SAMPLE", 15))
                raw = thermal(node, s, every)
                text, seconds = thermal_text(raw, s), raw["seconds"]
            elif mode == "nvbandwidth":
                text, seconds = nvbandwidth(node, self.rng)
            elif mode == "loopback":
                raw = loopback(node, self.rng, str(settings.get("AZGPU_NCCL_MIN", "8G")),
                               str(settings.get("AZGPU_NCCL_MAX", "16G")))
                text, seconds = loopback_text(raw), raw["seconds"]
            else:
                raise ValueError(mode)
            out[info.name] = Answer(text, seconds)
        return out

    def fabric(self, jobs):
        out = []
        for job in jobs:
            members = [self.nodes[n] for n in job.nodes]
            if job.kind == "ibpair":
                reports, seconds = ibpair(members[0], members[1], self.rng)
                out.append(Answer(ibpair_text(reports), seconds))
            else:
                text, seconds = collective(members, job.op, job.fabric, job.min_bytes, job.max_bytes, self.rng)
                out.append(Answer(nccl_lines(text), seconds))
        return out


# ------------------------------------------------------------------------------ trials

KINDS = ("link", "thermal", "flapping")


def inject(rng: random.Random, nodes: dict[str, dict], count: int, *, transient: bool = True) -> dict[str, str]:
    """Break `count` things at random, each one of KINDS (issue #29's trial: a link at 60 %, a GPU that
    throttles after 60 s under load, a flapping port), and maybe give a healthy node one transient.
    Returns what a certification must name: subject (NODE or NODE:PORT) -> kind."""
    names = sorted(nodes)
    expected: dict[str, str] = {}
    for _ in range(count):
        kind = rng.choice(KINDS)
        name = rng.choice(names)
        node = nodes[name]
        port = rng.choice(node["ib"])["dev"]
        if kind == "link":
            node.setdefault("ib_degraded", {})[port] = 0.6
            expected[f"{name}:{port}"] = kind
        elif kind == "thermal":
            node.setdefault("gpu_throttle", {})[str(rng.randrange(len(node["gpus"])))] = 60
            expected[name] = kind
        else:
            node.setdefault("ib_flapping", {})[port] = rng.choice((15, 20, 30, 45, 60))
            expected[f"{name}:{port}"] = kind
    if transient:
        healthy = [n for n in names if not any(s.split(":")[0] == n for s in expected)]
        if healthy:
            nodes[rng.choice(healthy)]["transient"] = 1
    return expected
