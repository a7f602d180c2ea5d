"""azgpu's node check as Slurm's HealthCheckProgram, installed on every node by cloud-init.

slurm.conf(5), HealthCheckProgram: run as root on the compute nodes every HealthCheckInterval;
"Any action to be taken must be explicitly performed by the program (e.g. execute `scontrol update
NodeName=foo State=drain Reason=...`)". The program runs the same node script the health gate
sends through Run Command, with the size's expectations written into it, and drains the node
with the first failing check as the Reason. The verdict is parsed, never executed: what a node
prints is evidence.
"""

from __future__ import annotations

import yaml

from ..health import node_script as health_node_script
from .conf import HEALTH_CHECK_PATH

NODE_SCRIPT_PATH = "/usr/local/lib/azgpu/node-check.sh"
# The program kills the check after this many seconds; the script gets the same node timeout so that
# AzNHC's own watchdog ends first and the node still prints its verdict line.
CHECK_TIMEOUT = 900

_PROGRAM = r"""#!/bin/bash
# Slurm HealthCheckProgram written by azgpu (provision slurm config --health-check): runs azgpu's node
# check and drains this node with the failing check as the Reason. The verdict is the check's last line.
set -u
verdict=$(timeout __TIMEOUT__ __SCRIPT__ 2>/dev/null | tail -n 1)
reason=$(printf '%s' "$verdict" | python3 -c '
import json, sys
try:
    v = json.loads(sys.stdin.read())
except ValueError:
    print("azgpu health check: no verdict (timed out or crashed)")
    sys.exit()
failures = v.get("failures") or []
if not failures:
    sys.exit()
f = failures[0]
more = len(failures) - 1 + int(v.get("more") or 0)
text = "azgpu %s: %s" % (f.get("check", "check"), f.get("message", "failed"))
print((text + (" (+%d more)" % more if more else "")).replace("\n", " ")[:200])
')
[ -z "$reason" ] && exit 0
node=${SLURMD_NODENAME:-}
if [ -z "$node" ]; then  # the Slurm name whose NodeHostName is this host (set by azgpu's resume)
    node=$(scontrol show node -o 2>/dev/null | awk -v h="$(hostname)" '$0 ~ ("NodeHostName=" h " ") {sub("NodeName=", "", $1); print $1; exit}')
fi
[ -n "$node" ] || node=$(hostname)
logger -t azgpu-health "draining $node: $reason" 2>/dev/null || true
exec scontrol update nodename="$node" state=DRAIN reason="$reason"
"""


def program() -> str:
    return _PROGRAM.replace("__SCRIPT__", NODE_SCRIPT_PATH).replace("__TIMEOUT__", str(CHECK_TIMEOUT))


def node_script(size) -> str:
    """The script `provision check --print-script --size` prints for this size (one way to make it)."""
    return health_node_script(size.name, node_timeout=CHECK_TIMEOUT)


def cloud_config(size) -> str:
    """The cloud-config part that installs the node script (this size's expectations) and the program."""
    files = [{"path": NODE_SCRIPT_PATH, "permissions": "0755", "owner": "root:root", "content": node_script(size)},
             {"path": HEALTH_CHECK_PATH, "permissions": "0755", "owner": "root:root", "content": program()}]
    return "#cloud-config\n" + yaml.safe_dump({"write_files": files}, sort_keys=False, default_flow_style=False)
