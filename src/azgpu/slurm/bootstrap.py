"""The node bootstrap: what makes a resumed VM a slurmd of the user's cluster, and how it reaches the VM.

After the health check passes and a Slurm name is bound to the VM, resume sends one script as a
managed Run Command (VirtualMachineScaleSetVMRunCommands_CreateOrUpdate). It installs Slurm's slurmd
and munge from the image's package manager where the image lacks them, refuses a slurmd the controller
cannot talk to (Slurm's compatibility window, below), writes the cluster's munge key, starts munged and
slurmd with its Slurm name (`slurmd -N`: without it slurmd looks for its host name in slurm.conf and
stops with "Unable to determine this slurmd's NodeName", src/slurmd/slurmd/slurmd.c) and the
controller to fetch its configuration from (`--conf-server`, configless Slurm: slurmctld needs
SlurmctldParameters=enable_configless, doc/html/configless_slurm.shtml), and installs azgpu's node
check in the background with Slurm's HealthCheckProgram (azgpu.slurm.health_check).

Why a managed Run Command carries the munge key (docs/slurm.md, "How a node joins", has the sources):
its protectedParameters reach only the VM (RunCommandHandlerLinux takes them from the extension's
protected settings and sets them as the script's environment, internal/exec/exec.go), while the VM's
customData, tags and the Run Command's own script and parameters are readable by anyone who can read
the VM. The script never prints the key, never puts it on a command line (printf is a shell builtin),
and unsets it before any daemon starts, so no process inherits it. A Key Vault secret read with the
node's identity would also keep it out of Azure's view of the VM, but needs a vault, an identity with
access to it and a path from every node to the vault; the Run Command needs nothing the resume does
not already use.

The same text (script()) goes to Azure and into the tests, which run it as root in each simulated
VM's own namespaces (tests/slurm/machines.py).
"""

from __future__ import annotations

import base64
import json
import re
import shlex
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import InputError
from . import health_check
from .conf import release

VERSION = 1
RUN_COMMAND_NAME = "azgpu-slurm-join"
TIMEOUT = 1200  # seconds the script may take on the VM (package installation included)
MARKER = f"# azgpu Slurm node bootstrap, version {VERSION}"
DEFAULT_MUNGE_KEY = "/etc/munge/munge.key"
MUNGE_KEY_MIN = 32  # munged 0.5.15: "Keyfile must be at least 32 bytes"
MUNGE_KEY_MAX = 1024 * 1024
# Slurm's compatibility window: the releases whose slurmd a controller of each release accepts (doc/html/
# upgrades.shtml of slurm-24.11, "Compatibility Window"; for 22.05, doc/html/quickstart_admin.shtml of
# slurm-22.05: "the two previous major releases"). A slurmd newer than its controller is never accepted.
COMPATIBLE = {
    "22.05": ("21.08", "20.11"),
    "23.02": ("22.05", "21.08"),
    "23.11": ("23.02", "22.05"),
    "24.05": ("23.11", "23.02"),
    "24.11": ("24.05", "23.11", "23.02"),
    "25.05": ("24.11", "24.05", "23.11"),
    "25.11": ("25.05", "24.11", "24.05"),
}
_SERVER = re.compile(r"[A-Za-z0-9][A-Za-z0-9.-]*(:\d{1,5})?(,[A-Za-z0-9][A-Za-z0-9.-]*(:\d{1,5})?)*")


def releases(version: str) -> list[str]:
    """The controller's release, then the older releases whose slurmd it accepts."""
    mine = release(version)
    return [mine, *COMPATIBLE.get(mine, ())]


@dataclass(frozen=True)
class JoinSettings:
    """What resume needs to make a VM a slurmd: where slurmd fetches its configuration (the
    controller), the controller's Slurm version, and the munge key file it reads."""

    conf_server: str
    slurm_version: str
    munge_key: str = DEFAULT_MUNGE_KEY
    node_check_interval: int = health_check.NODE_CHECK_INTERVAL

    def __post_init__(self):
        ports = [int(port) for port in re.findall(r":(\d+)", self.conf_server or "")]
        if not _SERVER.fullmatch(self.conf_server or "") or not all(0 < port < 65536 for port in ports):
            raise InputError(f"'{self.conf_server}' is not a Slurm controller address", code="INVALID_CONF_SERVER",
                             remedy="pass the controller as slurmd --conf-server takes it, a host and an optional port "
                                    "(e.g. --conf-server ctl01:6817)")
        release(self.slurm_version)
        if self.node_check_interval < 1:
            raise InputError("the node check interval must be at least 1 second", code="INVALID_NODE_CHECK_INTERVAL",
                             remedy="pass a whole number of seconds, e.g. --node-check-interval 300")


def read_key(path: str) -> bytes:
    """The munge key as resume reads it (as SlurmUser): refused when unreadable or not a key."""
    file = Path(path)
    problem, data = "", b""
    try:
        if not file.is_file():
            problem = f"the munge key '{path}' is not a file"
        elif not MUNGE_KEY_MIN <= file.stat().st_size <= MUNGE_KEY_MAX:
            problem = (f"the munge key '{path}' has {file.stat().st_size} bytes; munged needs {MUNGE_KEY_MIN} to "
                       f"{MUNGE_KEY_MAX}")
        else:
            data = file.read_bytes()
    except OSError as exc:
        problem = f"cannot read the munge key '{path}': {exc.strerror}"
    if problem:
        raise InputError(problem, code="SLURM_MUNGE_KEY",
                         remedy="give SlurmUser a copy it alone reads ('install -m 0400 -o slurm /etc/munge/munge.key "
                                "/etc/slurm/azgpu-munge.key') and pass it ('provision slurm config --munge-key "
                                "/etc/slurm/azgpu-munge.key')")
    return data


# ------------------------------------------------------------------------------------ the script

_HEAD = r"""#!/bin/bash
__MARKER__ (azgpu/slurm/bootstrap.py).
# Sent as a managed Run Command after the node passed azgpu's health check and got its Slurm name. Its
# inputs are the Run Command's parameters, which the VM agent sets as environment variables:
#   AZGPU_SLURM_NODE          this node's Slurm name (slurmd -N)
#   AZGPU_SLURM_CONF_SERVER   the controller slurmd fetches its configuration from (slurmd --conf-server)
#   AZGPU_SLURM_RELEASES      the controller's Slurm release, then the older ones its slurmctld accepts
#   AZGPU_NODE_CHECK_INTERVAL seconds between background runs of azgpu's node check
#   AZGPU_MUNGE_KEY           the cluster's munge key, base64 (a protected parameter: only this VM sees it)
set -euo pipefail
umask 022
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
say() { printf 'azgpu-bootstrap: %s\n' "$*"; }
fail() { printf 'azgpu-bootstrap: ERROR: %s\n' "$*" >&2; exit 1; }
name=${AZGPU_SLURM_NODE:-}
server=${AZGPU_SLURM_CONF_SERVER:-}
releases=${AZGPU_SLURM_RELEASES:-}
interval=${AZGPU_NODE_CHECK_INTERVAL:-__INTERVAL__}
[[ $name =~ ^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$ ]] || fail "no valid Slurm node name in AZGPU_SLURM_NODE"
[[ $server =~ ^[A-Za-z0-9][A-Za-z0-9.:,-]{0,253}$ ]] || fail "no valid controller in AZGPU_SLURM_CONF_SERVER"
[[ $releases =~ ^[0-9]{2}\.[0-9]{2}( [0-9]{2}\.[0-9]{2})*$ ]] || fail "no Slurm releases in AZGPU_SLURM_RELEASES"
[[ $interval =~ ^[1-9][0-9]{0,6}$ ]] || fail "no valid AZGPU_NODE_CHECK_INTERVAL"
[ -n "${AZGPU_MUNGE_KEY:-}" ] || fail "no munge key (the protected parameter AZGPU_MUNGE_KEY)"
systemd=0
[ -d /run/systemd/system ] && systemd=1

# --- Slurm and munge: the image's, else its package manager's
installed=""
if ! command -v slurmd >/dev/null || ! command -v munged >/dev/null; then
    if command -v apt-get >/dev/null; then
        say "installing slurmd and munge (apt-get)"
        DEBIAN_FRONTEND=noninteractive apt-get -q update >/dev/null
        DEBIAN_FRONTEND=noninteractive apt-get -q -y install slurmd munge >/dev/null
    elif command -v dnf >/dev/null; then
        say "installing slurm-slurmd and munge (dnf; Slurm comes from EPEL)"
        dnf -q -y install slurm-slurmd munge >/dev/null
    else
        fail "this image has no slurmd and no apt-get or dnf to install it: use an image with Slurm $releases"
    fi
    installed="slurmd munge"
fi
slurmd_bin=$(command -v slurmd)
munged_bin=$(command -v munged)
have=$("$slurmd_bin" -V | awk '{print $NF}')
mine=$(printf '%s' "$have" | grep -oE '^[0-9]{2}\.[0-9]{2}' || true)
case " $releases " in
    *" $mine "*) ;;
    *) fail "slurmd $have cannot join a Slurm ${releases%% *} controller (it accepts slurmd ${releases// /, }):" \
            "install a matching Slurm in the image" ;;
esac
say "slurmd $have for a ${releases%% *} controller"

# --- the munge key: from the environment into a file only munge reads; never on a command line or in output
getent passwd munge >/dev/null || fail "the munge package made no munge user"
install -d -m 0700 -o munge -g munge /etc/munge
key_tmp=$(mktemp /etc/munge/.munge.key.XXXXXX)
if ! printf '%s' "$AZGPU_MUNGE_KEY" | base64 -d >"$key_tmp" 2>/dev/null; then
    rm -f "$key_tmp"
    fail "the munge key is not base64"
fi
unset AZGPU_MUNGE_KEY
if [ "$(stat -c %s "$key_tmp")" -lt __KEY_MIN__ ]; then
    rm -f "$key_tmp"
    fail "the munge key has fewer than __KEY_MIN__ bytes"
fi
chown munge:munge "$key_tmp"
chmod 0400 "$key_tmp"
mv -f "$key_tmp" /etc/munge/munge.key

# --- azgpu's files: the node check, its background runner and judge, Slurm's HealthCheckProgram
# A verdict this VM kept from a name it carried before (a rack's waiting VM, one left for inspection) is older
# than the health check resume just passed: Slurm's HealthCheckProgram would drain the new name for it.
rm -f __VERDICT__ __DRAINED__
"""

_TAIL = r"""
# --- munged, slurmd (with its Slurm name, configless) and the background node check
# -b: slurmd reports the node rebooted. slurmctld finishes a resume only for a node whose BootTime is newer
# than the resume request, and a VM may have booted before it got its name (a rack's waiting VMs); slurm.conf(5)
# ResumeProgram: "If the node isn't actually rebooted ... starting slurmd with "-b" option might be useful."
slurmd_args=(-b -N "$name" --conf-server "$server")
stop_named() {  # processes of this machine by command name (no systemd to ask)
    local comm
    for comm in /proc/[0-9]*/comm; do
        if [ "$(cat "$comm" 2>/dev/null)" = "$1" ]; then
            local pid=${comm#/proc/}
            kill "${pid%/comm}" 2>/dev/null || true
        fi
    done
}
if [ "$systemd" = 1 ]; then
    cat >/etc/systemd/system/azgpu-slurmd.service <<AZGPU_UNIT
[Unit]
Description=Slurm node daemon of azgpu node $name (configuration from $server)
After=munge.service network-online.target
Wants=munge.service network-online.target

[Service]
Type=simple
ExecStart=$slurmd_bin -D ${slurmd_args[*]}
ExecReload=/bin/kill -HUP \$MAINPID
KillMode=process
LimitNOFILE=131072
LimitMEMLOCK=infinity
LimitSTACK=infinity
Delegate=yes
TasksMax=infinity
Restart=on-failure

[Install]
WantedBy=multi-user.target
AZGPU_UNIT
__UNITS__
    sed -i "s/^OnActiveSec=.*/OnActiveSec=$interval/; s/^OnUnitActiveSec=.*/OnUnitActiveSec=$interval/" \
        /etc/systemd/system/__SERVICE__.timer
    systemctl daemon-reload
    systemctl disable --now slurmd.service >/dev/null 2>&1 || true  # the package's unit needs a local slurm.conf
    systemctl enable munge.service >/dev/null 2>&1 || true
    systemctl restart munge.service
    systemctl enable azgpu-slurmd.service __SERVICE__.timer >/dev/null 2>&1
    systemctl restart azgpu-slurmd.service
    systemctl restart __SERVICE__.timer
else  # no systemd (a container): the daemons detach themselves
    stop_named slurmd
    stop_named munged
    install -d -o munge -g munge -m 0755 /run/munge
    runuser -u munge -- "$munged_bin"
    "$slurmd_bin" "${slurmd_args[@]}"
    setsid -f bash -c "while :; do sleep $interval; __RUNNER__; done" </dev/null >/dev/null 2>&1
fi
for _ in $(seq 1 60); do
    [ -e /run/slurm/conf/slurm.conf ] && break
    sleep 1
done
[ -e /run/slurm/conf/slurm.conf ] ||
    fail "slurmd fetched no configuration from $server within 60 s (slurmctld needs enable_configless)"
printf '{"azgpu_bootstrap":__VERSION__,"node":"%s","slurmd":"%s","installed":"%s"}\n' "$name" "$have" "$installed"
"""


def _heredoc(path: str, mode: str, content: str, number: int) -> str:
    end = f"AZGPU_FILE_{number}"
    if any(line == end for line in content.splitlines()):
        raise AssertionError(f"{path} holds the line {end}")  # cannot happen with azgpu's own files
    text = content if content.endswith("\n") else content + "\n"
    return (f"install -d -m 0755 {shlex.quote(str(Path(path).parent))}\n"
            f"cat >{shlex.quote(path)} <<'{end}'\n{text}{end}\nchmod {mode} {shlex.quote(path)}\n")


def script(size, *, racks: bool = False) -> str:
    """The bootstrap for nodes of this size (its node check's expectations are written into it); on
    NVLink racks (GB200/GB300) with the IMEX prolog and epilog (azgpu.imex)."""
    from .. import imex

    body = [_HEAD.replace("__MARKER__", MARKER).replace("__INTERVAL__", str(health_check.NODE_CHECK_INTERVAL))
            .replace("__KEY_MIN__", str(MUNGE_KEY_MIN)).replace("__VERDICT__", health_check.VERDICT_PATH)
            .replace("__DRAINED__", health_check.DRAINED_PATH)]
    installed = health_check.files(size) + (imex.node_files() if racks else [])
    for number, (path, mode, content) in enumerate(installed):
        body.append(_heredoc(path, mode, content, number))
    units = "".join(f"    cat >{shlex.quote(path)} <<'AZGPU_UNIT_{i}'\n{text}AZGPU_UNIT_{i}\n"
                    for i, (path, text) in enumerate(health_check.units(health_check.NODE_CHECK_INTERVAL).items()))
    body.append(_TAIL.replace("__UNITS__", units.rstrip("\n")).replace("__SERVICE__", health_check.SERVICE)
                .replace("__RUNNER__", health_check.RUNNER_PATH).replace("__VERSION__", str(VERSION)))
    return "".join(body)


def parameters(name: str, settings: JoinSettings) -> list[dict[str, str]]:
    """The Run Command's public parameters (Azure shows them to any reader of the VM)."""
    return [{"name": "AZGPU_SLURM_NODE", "value": name},
            {"name": "AZGPU_SLURM_CONF_SERVER", "value": settings.conf_server},
            {"name": "AZGPU_SLURM_RELEASES", "value": " ".join(releases(settings.slurm_version))},
            {"name": "AZGPU_NODE_CHECK_INTERVAL", "value": str(settings.node_check_interval)}]


def body(spec, name: str, location: str, settings: JoinSettings, key: bytes) -> dict[str, Any]:
    """The managed Run Command in REST shape; the key only in protectedParameters."""
    return {"location": location, "properties": {
        "source": {"script": script(spec.size, racks=bool(spec.profile.rack_size))},
        "parameters": parameters(name, settings),
        "protectedParameters": [{"name": "AZGPU_MUNGE_KEY", "value": base64.b64encode(key).decode()}],
        "timeoutInSeconds": TIMEOUT,
        "treatFailureAsDeploymentFailure": False,
    }}


# ------------------------------------------------------------------------------------ sending it


@dataclass(frozen=True)
class Target:
    name: str  # the Slurm name bound to the VM
    scale_set: str
    instance_id: str
    location: str  # the scale set's (a Run Command is created in its VM's location)


def _outcome(result: Any, name: str) -> str | None:
    """None when the node joined; else why not (from the instance view: evidence, bounded, never run)."""
    view = getattr(result, "instance_view", None)
    state = getattr(view, "execution_state", None)
    state = getattr(state, "value", state)  # the SDK's enum, or the string
    output = getattr(view, "output", None) or ""
    error = " ".join((getattr(view, "error", None) or getattr(view, "execution_message", None) or "").split())[-300:]
    if state != "Succeeded" or getattr(view, "exit_code", None) != 0:
        code = getattr(view, "exit_code", None)
        return f"the bootstrap ended {state or 'without a state'} (exit {code}): {error or 'no error output'}"
    last = output.strip().splitlines()[-1] if output.strip() else ""
    try:
        verdict = json.loads(last)
    except ValueError:
        verdict = None
    if not isinstance(verdict, dict) or verdict.get("azgpu_bootstrap") != VERSION or verdict.get("node") != name:
        return f"the bootstrap printed no result for {name}"
    return None


def join_all(session, resource_group: str, spec, targets: list[Target], settings: JoinSettings,
             log: Callable[[str], None]) -> dict[str, str]:
    """Bootstrap every target in parallel; the names that did not join, with why."""
    from ..deploy import run_on_node

    if not targets:
        return {}
    key = read_key(settings.munge_key)

    def one(target: Target) -> tuple[str, str | None]:
        sent = body(spec, target.name, target.location, settings, key)
        try:
            result = run_on_node(session, resource_group, target.scale_set, target.instance_id, RUN_COMMAND_NAME,
                                 sent)
        except Exception as exc:  # Azure's own failure to run it: the node did not join, with Azure's words
            return target.name, f"the bootstrap could not run: {getattr(exc, 'message', None) or exc}"
        return target.name, _outcome(result, target.name)

    with ThreadPoolExecutor(max_workers=min(16, len(targets))) as pool:
        outcomes = dict(pool.map(one, targets))
    for name, problem in outcomes.items():
        log(f"{name}: joined the cluster (slurmd started by azgpu's bootstrap)" if problem is None
            else f"{name}: did not join: {problem}")
    return {name: problem for name, problem in outcomes.items() if problem}
