"""A certification step on a simulated node: azgpu's real certify_node.sh on stub tools.

Run Command with the certification script's marker lands here (models/vm_actions.py). `prepare` runs
under the fake's lock: it reads the step's settings, asks the hardware model (fabric.py) what each tool
prints and how long it runs -- which moves the node's own clock and its link_downed counters and uses up
its transients, as hardware would -- and writes that into stub tools. `execute` runs the script on them
in a sandbox (node_sandbox.py) beside the fake: dcgmi, dcgmproftester, nvidia-smi, nvbandwidth, mpirun,
ssh and runuser are stubs, the InfiniBand counters are sysfs files, and `date` and `sleep` keep the
sandbox's own virtual clock, so a 15-minute diagnostic reports 900 s at once. The launcher of a fabric
round reaches the other nodes only if they accept its key (authorized_keys, as the gate's NCCL check).
Outputs the script keeps for paging stay with the node between Run Commands.
"""

from __future__ import annotations

import json
import random
import re
import shlex
import tempfile
import zlib
from typing import Any

from . import fabric, hardware
from .node_sandbox import Sandbox

MARKER = "# azgpu node certification step, verdict version 1"
OUTDIR = "/var/log/azgpu/certify"
KEEP_OUTPUTS = 8
_SETTING = re.compile(r"(AZGPU_[A-Z0-9_]+)=(.*)")
_IP = re.compile(r"(?:\d{1,3}\.){3}\d{1,3}")

CLOCK = """#!/bin/bash
# The sandbox's virtual clock: seconds since the step began, in a file.
f=@CLOCK@
case "$1" in
  now) cat "$f" ;;
  add) echo $(( $(cat "$f") + $2 )) >"$f" ;;
  atleast) c=$(cat "$f"); [ "$2" -gt "$c" ] && echo "$2" >"$f" ;;
esac
"""
RUNUSER = "#!/bin/bash\nwhile [ $# -gt 0 ] && [ \"$1\" != -- ]; do shift; done\nshift\nexec \"$@\"\n"
DATE = """#!/bin/bash
if [ "$*" = "+%s" ]; then echo $(( @BASE@ + $(@TICK@ now) )); else exec @REAL@ "$@"; fi
"""


def is_certify(script: list[str]) -> bool:
    return MARKER in script[:3]


def settings(script: list[str]) -> dict[str, str]:
    """The AZGPU_* lines above the script text (what azgpu's body builder writes)."""
    out: dict[str, str] = {}
    for line in script[1:]:
        if line.startswith("# azgpu's on-node certification step"):
            break
        m = _SETTING.fullmatch(line)
        if m:
            parts = shlex.split(m.group(2)) if m.group(2) else [""]
            out[m.group(1)] = parts[0] if parts else ""
    return out


def _rng(node: dict, mode: str) -> random.Random:
    return random.Random(zlib.crc32(f"{node['vm_id']}|{mode}|{node.get('clock', 0)}".encode()))


def prepare(backend, node: dict, vmss: dict, script: list[str], nodes_by_ip) -> dict[str, Any]:
    """Everything the step's run needs, decided now under the fake's lock (the model moves on)."""
    s = settings(script)
    mode = s.get("AZGPU_MODE", "")
    job: dict[str, Any] = {"certify": True, "mode": mode, "script": list(script), "node": _identity(node),
                           "stubs": {}, "files": {}, "sleep_advances": False}
    stubs, files = job["stubs"], job["files"]
    gpus = fabric.present(node)
    rng = _rng(node, mode)
    for rel, content in (node.get("certify_outputs") or {}).items():
        files[f"{OUTDIR}/{rel}"] = content
    _ports(job, node)
    if mode == "dcgm":
        level = int(s.get("AZGPU_DCGM_LEVEL", "2") or 2)
        text, seconds = fabric.dcgm(node, level)
        # dcgmi prints JSON only with -j, and runs the level its -r names (NVIDIA DCGM user guide, "dcgmi diag"):
        # the model answers the level the step asked for, so a command line that runs another one, or no JSON,
        # gets DCGM's refusal instead of a document azgpu would misread.
        stubs["dcgmi"] = _tool(text, seconds, require=("diag", f"-r {level}", "-j"),
                               otherwise=_tool("Error: the fake's dcgmi answers 'dcgmi diag -r N -j' for the level the "
                                               "step asked\n", 1, rc=1))
    elif mode == "thermal":
        seconds, every = int(s.get("AZGPU_THERMAL_SECONDS") or 120), int(s.get("AZGPU_THERMAL_SAMPLE") or 15)
        raw = fabric.thermal(node, seconds, every)
        job["sleep_advances"] = True
        job["samples"] = {k: text for k, text in raw["samples"]}
        job["every"] = every
        job["gpu_query"] = raw["gpus"]
    elif mode == "nvbandwidth":
        text, seconds = fabric.nvbandwidth(node, rng)
        stubs["nvbandwidth"] = _tool(text, seconds)
        job["image"] = json.dumps((vmss["properties"].get("virtualMachineProfile") or {}).get("storageProfile", {}).get(
            "imageReference") or {})
        job["hca_fw"] = "28.43.1014"
    elif mode == "loopback":
        raw = fabric.loopback(node, rng, s.get("AZGPU_NCCL_MIN", "8G"), s.get("AZGPU_NCCL_MAX", "16G"))
        job["counters"] = raw["before"]
        after = "".join(f"echo {n} >\"$AZGPU_ROOT/sys/class/infiniband/{dev}/ports/1/counters/link_downed\"\n"
                        for dev, n in raw["after"].items())
        # NCCL uses the InfiniBand ports between a node's own GPUs only with both the P2P (NVLink/PCI) and the
        # shared-memory transports disabled (NVIDIA NCCL user guide, Environment Variables: NCCL_P2P_DISABLE,
        # NCCL_SHM_DISABLE); otherwise the traffic stays inside the node and the ports' faults do not show.
        inside = fabric.loopback_inside(node, rng, s.get("AZGPU_NCCL_MIN", "8G"), s.get("AZGPU_NCCL_MAX", "16G"))
        # NCCL prints its "NCCL version" line only when NCCL_DEBUG asks for it (VERSION, or INFO; NCCL user
        # guide, Environment Variables: NCCL_DEBUG), so the certificate's NCCL version needs the flag.
        text = raw["text"] if _nccl_debug(script) else _VERSION_LINE.sub("", raw["text"])
        stubs["mpirun"] = _tool(text, raw["seconds"], extra=after,
                                require=("NCCL_P2P_DISABLE=1", "NCCL_SHM_DISABLE=1"),
                                otherwise=_tool(inside, raw["seconds"]))
        files["/opt/nccl-tests/build/all_reduce_perf"] = "#!/bin/bash\nexit 0\n"
    elif mode == "ibpair":
        _ibpair(job, node, s, nodes_by_ip, rng)
    elif mode == "fabric":
        # `provision simulate fabric`: the scale set's InfiniBand fabric carries only this share
        _fabric(job, node, s, nodes_by_ip, rng, backend.store.fabric.get(vmss["id"].lower(), 1.0))
    job["stubs"]["runuser"] = RUNUSER
    job["gpus"] = gpus
    return job


_VERSION_LINE = re.compile(r"(?m)^NCCL version .*\n?")


def _nccl_debug(script: list[str]) -> bool:
    """Whether the step's mpirun passes NCCL_DEBUG=VERSION or INFO (read from the script as written)."""
    return any(re.search(r"-x NCCL_DEBUG=(?:VERSION|INFO)\b", line) for line in script)


def _identity(node: dict) -> dict:
    return {k: node[k] for k in ("size", "computer", "vm_id", "admin_user", "gpus", "ib", "files")}


def _ports(job: dict, node: dict) -> None:
    job["ports"] = [{"dev": p["dev"], "state": p["state"], "phys": p["phys"],
                     "rate": hardware.rate_text(p, hardware.model(node["size"]).ib_gen)} for p in node["ib"]]
    job["counters"] = {p["dev"]: int((node.get("link_downed") or {}).get(p["dev"], 0)) for p in node["ib"]}


def _tool(text: str, seconds: float, extra: str = "", rc: int = 0, require: tuple[str, ...] = (),
          otherwise: dict | None = None) -> dict:
    """A stub tool's answer. require: phrases (whole words) its command line must each hold, else it answers
    `otherwise`."""
    return {"text": text, "seconds": int(round(seconds)), "extra": extra, "rc": rc, "require": list(require),
            "otherwise": otherwise}


def _ibpair(job: dict, node: dict, s: dict[str, str], nodes_by_ip, rng: random.Random) -> None:
    """One end of a pair: the client's reports come from both ends' ports (the server's prints nothing azgpu
    reads); a peer that is not a node of the scale set is not reached ('Couldn't connect')."""
    peer = nodes_by_ip().get(s.get("AZGPU_IB_PEER", ""))
    job["ib_reports"] = {}
    if s.get("AZGPU_IB_ROLE") == "client":
        if peer is None:
            job["ib_reports"] = {p["dev"]: _tool(f" Couldn't connect to {s.get('AZGPU_IB_PEER')}:18515\n", 1, rc=1)
                                 for p in node["ib"]}
        else:
            reports, seconds = fabric.ibpair(node, peer, rng)
            job["ib_reports"] = {dev: _tool(text, seconds) for dev, text in reports.items()}
    else:
        job["ib_reports"] = {p["dev"]: _tool("", fabric.PAIR_SECONDS) for p in node["ib"]}


def _fabric(job: dict, launcher: dict, s: dict[str, str], nodes_by_ip, rng: random.Random, share: float) -> None:
    """The launcher's round: each job's answer, by the nodes behind its addresses."""
    by_ip = nodes_by_ip()
    pubkey = (launcher["files"].get(".azgpu-nccl/id_ed25519.pub") or "").strip()
    files = job["files"]
    for exe in ("all_reduce", "alltoall"):
        files[f"/opt/nccl-tests/build/{exe}_perf"] = "#!/bin/bash\nexit 0\n"
    job["mpi_jobs"] = {}
    for line in (s.get("AZGPU_JOBS") or "").split(";"):
        fields = line.split()
        if len(fields) < 3 or not fields[0].isdigit():
            continue
        jid, kind, rest = fields[0], fields[1], fields[2:]
        ips = rest[3].split(",") if kind == "collective" and len(rest) >= 4 else rest
        members = [by_ip.get(ip) for ip in ips]
        refused = next((ip for ip, n in zip(ips, members, strict=True) if n is None or (
            n is not launcher and (not pubkey or pubkey not in (n["files"].get(".ssh/authorized_keys") or "")))), None)
        if refused is not None:
            error = (f"{launcher['admin_user']}@{refused}: Permission denied (publickey).\n"
                     "--------------------------------------------------------------------------\n"
                     "ORTE was unable to reliably start one or more daemons.\n")
            job["mpi_jobs"][jid] = _tool(error, 5, rc=1)
            continue
        if kind == "collective" and len(rest) in (4, 5):
            fab = "mnnvl" if rest[-1] == "mnnvl" else "ib"
            ips = rest[3].split(",")
            members = [by_ip.get(ip) for ip in ips]
            text, seconds = fabric.collective(members, rest[0], fab, rest[1], rest[2], rng, share)
            job["mpi_jobs"][jid] = _tool(text, seconds)


# ------------------------------------------------------------------------------ the run


def execute(job: dict[str, Any]) -> tuple[str, str, dict[str, str]]:
    """Run certify_node.sh on the job's stubs: (stdout, stderr, the node's files after)."""
    node = job["node"]
    with tempfile.TemporaryDirectory(prefix="azgpu-certify-") as root:
        box = Sandbox(root)
        home = f"/home/{node['admin_user']}"
        for rel, content in node["files"].items():
            if not rel.startswith("certify:"):
                box.file(f"{home}/{rel}", content)
        for path, content in job["files"].items():
            box.file(path, content, mode=0o755 if path.startswith("/opt/") else None)
        clock = box.root / ".azgpu-clock"
        clock.write_text("0")
        tick = box.stubs / "tick"
        box.script("tick", CLOCK.replace("@CLOCK@", shlex.quote(str(clock))))
        box.script("date", DATE.replace("@BASE@", "1764000000").replace("@TICK@", shlex.quote(str(tick)))
                   .replace("@REAL@", shlex.quote(str(box.system / "date"))))
        box.script("sleep", f"#!/bin/bash\n{shlex.quote(str(tick))} add ${{1%.*}}\n" if job["sleep_advances"]
                   else "#!/bin/bash\nexit 0\n")
        for port in job["ports"]:
            box.ib_port(port["dev"], state=f"{hardware.STATE_NUMBERS.get(port['state'], 1)}: {port['state']}",
                        phys_state=f"{hardware.PHYS_NUMBERS.get(port['phys'], 2)}: {port['phys']}", rate=port["rate"])
            box.file(f"/sys/class/infiniband/{port['dev']}/ports/1/counters/link_downed",
                     f"{job['counters'].get(port['dev'], 0)}\n")
            box.file(f"/sys/class/infiniband/{port['dev']}/fw_ver", job.get("hca_fw", "28.43.1014") + "\n")
        _stubs(box, job, tick)
        ran = box.run(job["script"], timeout=300)
        files = {rel: content for rel, content in node["files"].items() if not rel.startswith("certify:")}
        home_dir = box.root / home.lstrip("/")
        for rel in (".ssh/authorized_keys", ".azgpu-nccl/id_ed25519", ".azgpu-nccl/id_ed25519.pub"):
            if (home_dir / rel).is_file():
                files[rel] = (home_dir / rel).read_text()
        outdir = box.root / OUTDIR.lstrip("/")
        kept = sorted(outdir.glob("run-*"), key=lambda p: p.stat().st_mtime)[-KEEP_OUTPUTS:] if outdir.is_dir() else []
        for path in kept:
            files[f"certify:{path.name}"] = path.read_text(errors="replace")
        return ran.stdout, ran.stderr, files


def _tool_script(tool: dict, tick, box: Sandbox) -> str:
    out = box._saved(tool["text"])
    head = ""
    if tool.get("require") and tool.get("otherwise"):
        alt = tool["otherwise"]
        refuse = (f"cat {shlex.quote(str(box._saved(alt['text'])))}; {shlex.quote(str(tick))} atleast "
                  f"{alt['seconds']}; exit {alt['rc']}")
        head = "".join(f'case " $* " in\n  *{shlex.quote(" " + phrase + " ")}*) ;;\n  *) {refuse} ;;\nesac\n'
                       for phrase in tool["require"])
    return (f"#!/bin/bash\n{head}cat {shlex.quote(str(out))}\n{tool['extra']}"
            f"{shlex.quote(str(tick))} atleast {tool['seconds']}\nexit {tool['rc']}\n")


def _stubs(box: Sandbox, job: dict, tick) -> None:
    for name, tool in job["stubs"].items():
        if isinstance(tool, str):
            box.script(name, tool)
        else:
            box.script(name, _tool_script(tool, tick, box))
    smi_cases = [("--query-gpu=driver_version,vbios_version --format=csv,noheader", "570.133.20, 96.00.9D.00.02\n", 0),
                 ("--query-gpu=index,pci.bus_id,serial --format=csv,noheader", job.get("gpu_query", ""), 0)]
    if job["mode"] == "thermal":
        samples = job["samples"]
        every = job["every"]
        for k, text in samples.items():
            box.file(f"/.azgpu-samples/{k}", text)
        first = min(samples) if samples else 0
        box.script("nvidia-smi", f"""#!/bin/bash
case "$*" in
  "-q -d PERFORMANCE")
    k=$(( $({shlex.quote(str(tick))} now) / {every} * {every} )); [ $k -lt {first} ] && k={first}
    d="$AZGPU_ROOT/.azgpu-samples"; f="$d/$k"
    [ -f "$f" ] || f="$d/$(ls -1 "$d" | sort -n | tail -n 1)"
    cat "$f" ;;
  "--query-gpu=index,pci.bus_id,serial --format=csv,noheader") cat {shlex.quote(str(box._saved(job['gpu_query'])))} ;;
  *) exit 0 ;;
esac
""")
        box.script("dcgmproftester13", "#!/bin/bash\nexit 0\n")
    else:
        box.tool("nvidia-smi", "", cases=smi_cases)
    box.tool("ofed_info", "OFED-internal-24.10-1.1.4:\n")
    box.tool("curl", "", rc=7, cases=[("*imageReference*", job.get("image", "{}"), 0)])
    if job["mode"] == "ibpair":
        for dev, tool in job["ib_reports"].items():
            box.file(f"/.azgpu-ib/{dev}", _tool_script(tool, tick, box))
        box.script("ib_write_bw", '''#!/bin/bash
dev=""; while [ $# -gt 0 ]; do [ "$1" = -d ] && dev=$2; shift; done
f="$AZGPU_ROOT/.azgpu-ib/$dev"
[ -f "$f" ] && exec bash "$f"
echo " Couldn't connect" >&2
exit 1
''')
    if job["mode"] == "fabric":
        for jid, tool in job["mpi_jobs"].items():
            box.file(f"/.azgpu-jobs/{jid}", _tool_script(tool, tick, box))
        box.script("mpirun", '#!/bin/bash\nf="$AZGPU_ROOT/.azgpu-jobs/${AZGPU_JOB:-none}"\n'
                             '[ -f "$f" ] && exec bash "$f"\necho "mpirun: no such job" >&2\nexit 1\n')

