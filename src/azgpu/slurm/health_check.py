"""azgpu's node check in the background, and Slurm's HealthCheckProgram that reads its verdict.

slurm.conf(5), 22.05 through 25.11: HealthCheckProgram "will be killed if it does not terminate
normally within 60 seconds", and slurmd runs it with SLURMD_NODENAME as its whole environment
(src/slurmd/slurmd/slurmd.c, run_script_health_check). AzNHC alone takes minutes, so the check runs
beside Slurm, as Azure CycleCloud's health agent does: a timer the node bootstrap installs
(azgpu.slurm.bootstrap) runs the node check every NODE_CHECK_INTERVAL seconds, skipping a round
while a job step runs on the node (a job's GPUs are not the check's), and keeps the verdict in
VERDICT_PATH. The HealthCheckProgram only reads that file: it returns at once, drains a node whose
verdict is `failed` with the finding as the Reason, and never drains on `inconclusive` (the check's
own fault: a tool the image lacks, AzNHC's set-up or watchdog) or `unreachable` (no verdict).

The node judges its own output with azgpu's code (health/results.py, model.py, impact.py and the
constants of health/script.py, shipped as they are by the bootstrap): a node, the health gate and
`provision check --from-output` judge the same output alike. What the node prints stays evidence:
the verdict is validated, the reason is printable text of bounded length, nothing is executed.
"""

from __future__ import annotations

import json
from importlib import resources

from ..health import node_script as health_node_script
from .conf import HEALTH_CHECK_PATH

NODE_SCRIPT_PATH = "/usr/local/lib/azgpu/node-check.sh"
RUNNER_PATH = "/usr/local/sbin/azgpu-node-check"
LIB_DIR = "/usr/local/lib/azgpu/python"
JUDGE_PATH = "/usr/local/lib/azgpu/judge.py"
STATE_DIR = "/var/lib/azgpu"
VERDICT_PATH = STATE_DIR + "/node-check.json"
DRAINED_PATH = STATE_DIR + "/node-check.drained"  # the verdict a drain was made for: an admin's resume sticks
ENV_FILE = "/etc/default/azgpu-node-check"  # the runner's environment (systemd EnvironmentFile=-, optional)
SERVICE = "azgpu-node-check"
# The check may run this long; the script gets the same node timeout so that AzNHC's own watchdog ends first
# and the node still prints its verdict line.
CHECK_TIMEOUT = 900
NODE_CHECK_INTERVAL = 3600  # seconds between background runs (each runs AzNHC on the GPUs of an idle node)
REASON_LIMIT = 200
# What the node needs of azgpu to judge a verdict: the package markers and pure modules (stdlib only), the
# health package's and those they import from azgpu itself (tests/slurm/test_background_health_check.py
# judges with only these, in a Python without site-packages).
SHIPPED = ("__init__.py", "model.py", "results.py", "impact.py", "script.py")
SHIPPED_TOP = ("bounded.py",)

_RUNNER = r"""#!/bin/bash
# azgpu's node check in the background, installed by azgpu's Slurm node bootstrap: runs the check unless
# a job step runs here, and keeps its judged verdict for Slurm's HealthCheckProgram (__PROGRAM__).
set -u
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
# Optional settings (AZGPU_ROOT, PATH ...) for the check, as systemd's EnvironmentFile= reads them.
if [ -r __ENV_FILE__ ]; then set -a; . __ENV_FILE__; set +a; fi
for comm in /proc/[0-9]*/comm; do  # a job's GPUs are not the check's: skip this round
    [ "$(cat "$comm" 2>/dev/null)" = slurmstepd ] && exit 0
done
mkdir -p __STATE_DIR__
out=$(mktemp __STATE_DIR__/.check.XXXXXX) || exit 1
timeout __KILL_AFTER__ __SCRIPT__ >"$out" 2>/dev/null
tmp=$(mktemp __STATE_DIR__/.verdict.XXXXXX) || exit 1
if python3 -I __JUDGE__ <"$out" >"$tmp"; then
    chmod 0644 "$tmp" && mv -f "$tmp" __VERDICT__
else
    rm -f "$tmp"
fi
rm -f "$out"
"""

_JUDGE = r'''"""Judge azgpu's node check output as the health gate does (installed by azgpu's Slurm node bootstrap)."""
import json
import socket
import sys
import time

sys.path.insert(0, __LIB__)
try:
    from azgpu.health.results import FAILED, NodeRef, result_of
except Exception as exc:  # an image whose python3 cannot load the judge: say so, never drain for it
    print(json.dumps({"status": "inconclusive", "finding": "this node's python3 cannot judge the verdict: "
                      + type(exc).__name__, "reason": "", "checked": time.time()}))
    sys.exit(0)
output = sys.stdin.read(4 * 1024 * 1024)
result = result_of(NodeRef("", "", "", socket.gethostname(), None, __SIZE__), output)
finding = result.summary() if result.status == FAILED else result.reason
finding = " ".join("".join(c if c.isprintable() else " " for c in finding).split())
reason = ("azgpu " + finding)[:__LIMIT__] if result.status == FAILED else ""
print(json.dumps({"status": result.status, "finding": finding[:1000], "reason": reason, "checked": time.time()}))
'''

_PROGRAM = r"""#!/bin/bash
# Slurm HealthCheckProgram written by azgpu: reads the verdict azgpu's node check left in the background
# (__RUNNER__) and drains this node when it is `failed`, with the finding as the Reason. It never drains
# on `inconclusive`, and returns within seconds (slurm.conf(5): killed after 60 s).
set -u
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
node=${SLURMD_NODENAME:-}  # slurmd's only variable for this program (slurmd.c, run_script_health_check)
[ -n "$node" ] && [ -r __VERDICT__ ] || exit 0
read -r checked reason < <(python3 -I -c '
import json, sys
try:
    v = json.loads(open(sys.argv[1]).read(65536))
except (OSError, ValueError):
    sys.exit()
reason = v.get("reason") if v.get("status") == "failed" else ""
if isinstance(reason, str) and reason:
    print(repr(v.get("checked")), " ".join("".join(c if c.isprintable() else " " for c in reason).split())[:__LIMIT__])
' __VERDICT__)
[ -n "${reason:-}" ] || exit 0
# Drain once per verdict: an administrator who resumes the node is not overruled by the same old verdict.
[ "$(cat __DRAINED__ 2>/dev/null)" = "$checked" ] && exit 0
logger -t azgpu-health "draining $node: $reason" 2>/dev/null || true
timeout 30 scontrol update nodename="$node" state=DRAIN reason="$reason" && printf '%s\n' "$checked" >__DRAINED__
"""

_SERVICE = """[Unit]
Description=azgpu node check (its verdict is what Slurm's HealthCheckProgram reads)
After=network-online.target

[Service]
Type=oneshot
EnvironmentFile=-{env}
ExecStart={runner}
"""

_TIMER = """[Unit]
Description=azgpu node check every {interval} s

[Timer]
OnActiveSec={interval}
OnUnitActiveSec={interval}

[Install]
WantedBy=timers.target
"""


def _fill(text: str, **values: str) -> str:
    for name, value in values.items():
        text = text.replace(f"__{name}__", value)
    return text


def program() -> str:
    """The HealthCheckProgram: reads the verdict, drains on `failed`."""
    return _fill(_PROGRAM, RUNNER=RUNNER_PATH, VERDICT=VERDICT_PATH, DRAINED=DRAINED_PATH, LIMIT=str(REASON_LIMIT))


def runner() -> str:
    """The background run of the node check (systemd timer, or the bootstrap's loop without systemd)."""
    return _fill(_RUNNER, PROGRAM=HEALTH_CHECK_PATH, ENV_FILE=ENV_FILE, STATE_DIR=STATE_DIR,
                 KILL_AFTER=str(CHECK_TIMEOUT + 60), SCRIPT=NODE_SCRIPT_PATH, JUDGE=JUDGE_PATH, VERDICT=VERDICT_PATH)


def judge(size) -> str:
    return _fill(_JUDGE, LIB=json.dumps(LIB_DIR), SIZE=json.dumps(size.name), LIMIT=str(REASON_LIMIT))


def node_script(size) -> str:
    """The node check for this size, as `provision check --print-script --size` prints it, on a Slurm node:
    nvidia-imex runs only inside a job there (azgpu.imex), so the check asks only that it is installed."""
    return health_node_script(size.name, node_timeout=CHECK_TIMEOUT, extra={"AZGPU_IMEX_SERVICE": "installed"})


def units(interval: int) -> dict[str, str]:
    return {f"/etc/systemd/system/{SERVICE}.service": _SERVICE.format(env=ENV_FILE, runner=RUNNER_PATH),
            f"/etc/systemd/system/{SERVICE}.timer": _TIMER.format(interval=int(interval))}


def shipped() -> dict[str, str]:
    """azgpu's own judging code, as the installed package holds it, under LIB_DIR."""
    health = resources.files("azgpu.health")
    out = {f"{LIB_DIR}/azgpu/__init__.py": '"""azgpu\'s node-side code, shipped by its Slurm node bootstrap."""\n'}
    for name in SHIPPED:
        out[f"{LIB_DIR}/azgpu/health/{name}"] = health.joinpath(name).read_text(encoding="utf-8")
    for name in SHIPPED_TOP:
        out[f"{LIB_DIR}/azgpu/{name}"] = resources.files("azgpu").joinpath(name).read_text(encoding="utf-8")
    return out


def files(size) -> list[tuple[str, str, str]]:
    """(path, mode, content) of every file the bootstrap installs for the check, timer units aside."""
    out = [(NODE_SCRIPT_PATH, "0755", node_script(size)), (RUNNER_PATH, "0755", runner()),
           (JUDGE_PATH, "0644", judge(size)), (HEALTH_CHECK_PATH, "0755", program())]
    return out + [(path, "0644", text) for path, text in shipped().items()]
