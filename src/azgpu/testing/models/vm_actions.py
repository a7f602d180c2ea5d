"""Scale-set VM actions in the fake: action Run Command and instance deletion.

Run Command (POST .../virtualMachines/{id}/runCommand, Learn linux/run-command, REST spec
VirtualMachineScaleSetVMs_RunCommand): one at a time per VM (a second gets 409 Conflict, as
azure-cli#32305 shows), long-running (202 with Azure-AsyncOperation and a Location that answers with
the result), and on Linux one status whose message is "Enable succeeded: \\n[stdout]\\n...\\n[stderr]\\n..."
with only the last 4,096 bytes of each stream (run-command-extension-linux). The script runs for real,
azgpu's node check only, in a sandbox built from the node's simulated hardware (testing/hardware.py).
A node without an outbound path (subnet defaultOutboundAccess false, no NAT gateway, no public IP)
never returns its result, as Learn warns; neither does one with a 'timeout' fault.

Instance deletion (POST .../virtualMachineScaleSets/{vmss}/delete with instanceIds, or DELETE of one
instance) removes the VMs, their NICs and node states, and lowers the scale set's capacity.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import tempfile
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from .. import certify_sandbox, hardware, node_fault_table
from ..errors import ArmError, NotImplementedInFake
from ..messages import Response
from ..node_sandbox import Sandbox
from ..store import NIC_TYPE, key, parse_id

TAIL = 4096  # bytes of stdout and of stderr Run Command returns (maxTailLen in main/cmds.go)
MARKER = "# azgpu node health check, verdict version 1"
CONFLICT = ("Run command extension execution is in progress. Please wait for completion before invoking a run "
            "command.")


def _vm(backend, vmss: dict, instance: str) -> dict:
    vm = backend.find(f"{vmss['id']}/virtualMachines/{instance}")
    if vm is None:
        raise ArmError(404, "NotFound", f"The entity was not found in this Azure location. Instance {instance} of "
                                        f"{vmss['name']}.")
    return vm


def node_of(backend, vm: dict, vmss: dict) -> dict:
    node = backend.store.nodes.get(key(vm["id"]))
    if node is None:  # an instance from a state file written before nodes were simulated
        node = hardware.new_node(backend.store, vm, vmss)
        node_fault_table.apply_pending(backend.store, node)
    return node


def _running(backend, vm_id: str) -> dict | None:
    for op in backend.ops.running_on(vm_id):
        if op.get("on_finish") == "run_command":
            return op
    return None


def has_outbound(backend, vm: dict) -> bool:
    """Outbound to Azure's public addresses: a public IP on the NIC, a NAT gateway on the subnet, or
    the subnet's default outbound access (off when defaultOutboundAccess is false)."""
    for nic in backend.store.under(vm["id"]):
        if nic.get("type") != NIC_TYPE:
            continue
        for ipc in nic["properties"].get("ipConfigurations", []):
            props = ipc.get("properties", {})
            if props.get("publicIPAddress"):
                return True
            subnet = backend.find((props.get("subnet") or {}).get("id"))
            if subnet is None:
                continue
            sp = subnet.get("properties", {})
            if sp.get("natGateway"):
                return True
            if sp.get("defaultOutboundAccess") is False:
                return False
    return True


def run_command(backend, req, rg: str, vmss_name: str, instance: str) -> Response:
    vmss = backend.require(f"{backend.rg_id(rg)}/providers/Microsoft.Compute/virtualMachineScaleSets/{vmss_name}")
    vm = _vm(backend, vmss, instance)
    body = req.body or {}
    if body.get("commandId") != "RunShellScript":
        # Learn: an unknown command id gets "The entity was not found in this Azure location".
        raise ArmError(404, "NotFound", "The entity was not found in this Azure location.")
    script = body.get("script") or []
    if MARKER not in script[:3] and not certify_sandbox.is_certify(script):
        raise NotImplementedInFake(req.method, req.path, "the fake runs azgpu's node scripts only (the health check "
                                                         "and the certification step)")
    if _running(backend, vm["id"]):
        raise ArmError(409, "Conflict", CONFLICT)
    node = node_of(backend, vm, vmss)
    fault = backend.faults.firing(req.method, req.path, operation=True)
    backend.dirty = True
    op = backend.ops.start("action", vm["id"], location=vm["location"], api_version=req.api_version,
                           error=fault.error() if fault else None)
    op["on_finish"] = "run_command"
    op["script"] = script
    if node["run_command"] == "timeout" or not has_outbound(backend, vm):
        op["hang"] = True
    elif node["run_command"] != "no_verdict":
        _start(backend, op, node, vmss, script)
    return Response(202, None, backend.ops.headers(op))


def finish(backend, op: dict) -> None:
    if op["status"] != "Succeeded":
        op.pop("script", None)
        return
    vm = backend.find(op["target"])
    script = op.pop("script", [])
    if vm is None:
        op["result"] = {"value": []}
        return
    vmss = backend.find(parse_id(vm["id"]).parent)
    node = node_of(backend, vm, vmss)
    future = backend.run_command_futures.pop(op["id"], None)
    if node["run_command"] == "no_verdict":
        stdout, stderr = "", f"/var/lib/waagent/run-command/download/{op['id'][:4]}/script.sh: line 1: 4711 Killed\n"
    else:
        # Started in this process at the POST, or (the POST was in an earlier --simulate process) now.
        stdout, stderr, files = future.result() if future else _run_now(backend, node, vmss, script)
        node["files"] = {k: v for k, v in files.items() if not k.startswith("certify:")}
        if certify_sandbox.is_certify(script):  # the outputs the script keeps for paging stay with the node
            node["certify_outputs"] = {k.split(":", 1)[1]: v for k, v in files.items() if k.startswith("certify:")}
    op["result"] = {"value": [{
        "code": "ProvisioningState/succeeded", "level": "Info", "displayStatus": "Provisioning succeeded",
        "message": f"Enable succeeded: \n[stdout]\n{_tail(stdout)}\n[stderr]\n{_tail(stderr)}",
    }]}


def _run_now(backend, node: dict, vmss: dict, script: list[str]):
    if certify_sandbox.is_certify(script):
        return certify_sandbox.execute(certify_sandbox.prepare(backend, node, vmss, script,
                                                               lambda: _nodes_by_ip(backend, vmss)))
    return execute(prepare(backend, node, vmss, script))


def _tail(text: str) -> str:
    data = text.encode()
    return data[-TAIL:].decode(errors="replace") if len(data) > TAIL else text


# ------------------------------------------------------------------------------ the node in a sandbox

HOME_FILES = (".ssh/authorized_keys", ".azgpu-nccl/id_ed25519", ".azgpu-nccl/id_ed25519.pub")
# Node scripts run beside the fake, one process each: as many at once as there are CPUs.
_POOL = ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2), thread_name_prefix="azgpu-node")


def prepare(backend, node: dict, vmss: dict, script: list[str], *, copy_node: bool = True) -> dict[str, Any]:
    """Everything the node's run needs, copied out of the store (under the fake's lock)."""
    digest, settings = _script(script)
    job = {"node": copy.deepcopy(node) if copy_node else node, "script": list(script), "digest": digest,
           "mode": settings.get("AZGPU_MODE", "check")}
    if job["mode"] == "nccl-run":
        job["mpirun"] = _mpirun(backend, node, vmss, settings)
    return job


# One node script serves every Run Command of a gate: its settings and digest are read once, not per node
# (parsing 40 KB of script cost about a millisecond a node).
_SCRIPTS: dict[tuple, tuple[str, dict]] = {}


def _script(script: list[str]) -> tuple[str, dict]:
    from azgpu.health.script import settings_of

    key = tuple(script)
    known = _SCRIPTS.get(key)
    if known is None:
        if len(_SCRIPTS) >= 64:
            _SCRIPTS.clear()
        known = _SCRIPTS[key] = (hashlib.sha256("\n".join(script).encode()).hexdigest(), settings_of(script))
    return known


def execute(job: dict[str, Any]) -> tuple[str, str, dict[str, str]]:
    """Run azgpu's node script in a sandbox of the node: (stdout, stderr, the admin's files after).
    Touches nothing of the fake, so runs of several nodes go in parallel."""
    node, mode = job["node"], job["mode"]
    if mode == "check" and node.get("forged") is not None:
        # A compromised node: root on it prints whatever it likes where the script's verdict would be.
        return node["forged"], "", dict(node["files"])
    with tempfile.TemporaryDirectory(prefix="azgpu-node-") as root:
        box = Sandbox(root)
        home = f"/home/{node['admin_user']}"
        for rel, content in node["files"].items():
            if rel in HOME_FILES:
                box.file(f"{home}/{rel}", content)
        _identity(box, node)
        if mode == "check":
            _hardware(box, node)
        elif mode == "nccl-keygen":
            box.script("ssh-keygen", _SSH_KEYGEN.replace("@KEY@", _public_key(node["vm_id"])))
        elif mode == "nccl-run":
            box.script("runuser",
                       "#!/bin/bash\nwhile [ $# -gt 0 ] && [ \"$1\" != -- ]; do shift; done\nshift\nexec \"$@\"\n")
            box.tool("mpirun", **job["mpirun"])
        ran = box.run(job["script"])
        files = {}
        for rel in HOME_FILES:
            path = box.root / home.lstrip("/") / rel
            if path.is_file():
                files[rel] = path.read_text()
        return ran.stdout, ran.stderr, files


# A check's output depends on the node's state and the script, not on which VM it is: the fake runs the
# real script once per distinct state and gives every other node in that state the same output with its own
# identity (computer name, physical host, VM id) in the verdict. A 1,000-node gate of healthy nodes runs
# the script once, as a real cluster's nodes would each run it once at the same time.
REUSE_RUNS = True
IDENTITY = ("vm_id", "computer", "vm_name", "physical_host", "files")
MAX_REUSED = 256


def _state_key(job: dict[str, Any]) -> str | None:
    if job["mode"] != "check" or not REUSE_RUNS:
        return None
    node = job["node"]
    state = {k: v for k, v in node.items() if k not in IDENTITY}
    state["gpus"] = [{**g, "serial": i} for i, g in enumerate(node["gpus"])]  # serials: per board, like the name
    state["fabric"] = hardware.fabric_of(node)  # derived from the scale set's name where not set
    text = json.dumps([state, job["digest"]], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


class _Reused:
    """The first run of a node state, as another node in the same state answers it."""

    def __init__(self, first, first_node: dict, node: dict):
        self.first, self.first_node, self.node = first, first_node, node

    def result(self) -> tuple[str, str, dict[str, str]]:
        stdout, stderr, _ = self.first.result()
        for field, name in (("computer", "computer"), ("physical_host", "physical_host"), ("vm_id", "vm_id")):
            stdout = stdout.replace(f'"{field}":{json.dumps(self.first_node[name])}',
                                    f'"{field}":{json.dumps(self.node[name])}')
        for mine, theirs in zip(self.first_node["gpus"], self.node["gpus"], strict=False):
            stdout = stdout.replace(f'"serial":{json.dumps(mine["serial"])}',
                                    f'"serial":{json.dumps(theirs["serial"])}')
        return stdout, stderr, dict(self.node["files"])


def _start(backend, op: dict, node: dict, vmss: dict, script: list[str]) -> None:
    """Start the node's run at once, beside the fake (or reuse the run of a node in the same state): its
    result is collected when the operation ends."""
    if certify_sandbox.is_certify(script):
        job = certify_sandbox.prepare(backend, node, vmss, script, lambda: _nodes_by_ip(backend, vmss))
        backend.run_command_futures[op["id"]] = _POOL.submit(certify_sandbox.execute, job)
        return
    job = prepare(backend, node, vmss, script, copy_node=False)
    state = _state_key(job)
    first = backend.node_runs.get(state) if state else None
    if first is not None:
        identity = {k: node[k] for k in ("computer", "physical_host", "vm_id")}
        identity["gpus"] = [{"serial": g["serial"]} for g in node["gpus"]]
        identity["files"] = dict(node["files"])
        backend.run_command_futures[op["id"]] = _Reused(first[0], first[1], identity)
        return
    job["node"] = copy.deepcopy(node)  # the run goes on beside the fake: its own copy
    future = _POOL.submit(execute, job)
    if state:
        if len(backend.node_runs) >= MAX_REUSED:
            backend.node_runs.clear()
        backend.node_runs[state] = (future, job["node"])
    backend.run_command_futures[op["id"]] = future


def _public_key(seed: str) -> str:
    """An ed25519 public key blob in OpenSSH's wire format (RFC 8709), its 32 bytes derived from the seed."""
    import base64
    import hashlib

    name = b"ssh-ed25519"
    blob = len(name).to_bytes(4, "big") + name + (32).to_bytes(4, "big") + hashlib.sha256(seed.encode()).digest()
    return base64.b64encode(blob).decode()


_SSH_KEYGEN = """#!/bin/bash
while [ $# -gt 0 ]; do [ "$1" = -f ] && F=$2; shift; done
printf -- '-----BEGIN OPENSSH PRIVATE KEY-----\\n(simulated)\\n-----END OPENSSH PRIVATE KEY-----\\n' >"$F"
printf 'ssh-ed25519 @KEY@ azgpu-nccl\\n' >"$F.pub"
"""


def _identity(box: Sandbox, node: dict) -> None:
    box.tool("hostname", node["computer"] + "\n")
    box.tool("curl", "", rc=7, cases=[("*compute/vmId*", node["vm_id"], 0), ("*compute/vmSize*", node["size"], 0)])
    records = {"HostName": node["physical_host"], "PhysicalHostName": node["physical_host"],
               "PhysicalHostNameFullyQualified": node["physical_host"], "VirtualMachineName": node["vm_name"]}
    box.kvp_pool(3, records)
    if node["hpc_image"]:  # the HPC images compile kvp_client from microsoft/lis-test
        box.tool("kvp_client", "".join(f"Key: {k}; Value: {v}\n" for k, v in records.items()),
                 path="/opt/azurehpc/tools/kvp_client")


def _hardware(box: Sandbox, node: dict) -> None:
    m = hardware.model(node["size"])
    present = [g for g in node["gpus"] if g["present"]]
    if m.vendor == "nvidia":
        fabric = hardware.fabric_of(node)
        q = hardware.nvidia_smi_q(present, m.gpu_name, m.gpu_mib, fabric)
        cases = [("-q", q, 124 if node["nvidia_smi"] == "hang" else 0),
                 ("nvlink -s", hardware.nvlink_status(node, m.gpu_name), 0)]
        lost = next((g for g in present if g.get("lost")), None)
        if lost is not None:  # the driver's words for a GPU that fell off the bus (nvidia-smi exits 15)
            bus8 = f"{int(lost['bus'].split(':')[0], 16):08X}:{lost['bus'].split(':', 1)[1].upper()}"
            cases[0] = ("-q", f"Unable to determine the device handle for GPU {bus8}: GPU is lost.  Reboot the "
                              "system to recover this GPU\n", 15)
        if node["nvidia_smi"] == "no_devices":
            cases[0] = ("-q", "No devices were found\n", 6)
        if node["nvidia_smi"] == "driver_not_loaded":  # nvidia-smi(1) RETURN VALUE 9: the driver is not loaded
            cases = [("*", "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure "
                           "that the latest NVIDIA driver is installed and running.\n\n", 9)]
        # A hung nvidia-smi: the stub answers as timeout(1) does when it kills one, at once.
        if node["nvidia_smi"] == "hang":
            cases = [("*", "", 124)]
        box.tool("nvidia-smi", "", cases=cases)
        if fabric is not None:  # GB: the IMEX service and its channel (azhpc-images verify_nvidia_imex_service)
            box.tool("systemctl", "active\n", cases=[("is-active nvidia-imex", "active\n", 0)])
            if node.get("imex") != "missing":
                box.file("/dev/nvidia-caps-imex-channels/channel0", "")
    elif m.vendor == "amd":
        box.tool("rocm-smi", "", cases=[("--showbus", hardware.rocm_smi_showbus(node), 0)])
    box.tool("dmesg", hardware.dmesg(node))
    for gpu in node["gpus"]:
        box.pci_device(gpu["bus"], "0x10de" if m.vendor == "nvidia" else "0x1002", "0x030200")
    for port in node["ib"]:
        box.ib_port(port["dev"], state=f"{hardware.STATE_NUMBERS.get(port['state'], 1)}: {port['state']}",
                    phys_state=f"{hardware.PHYS_NUMBERS.get(port['phys'], 2)}: {port['phys']}",
                    rate=hardware.rate_text(port, m.ib_gen))
    if m.accelerated_ib_vf:
        box.ib_port("mlx5_an0", rate="100 Gb/sec (4X EDR)", link_layer="Ethernet")
    if node["hpc_image"]:
        box.script("run-health-checks.sh", hardware.aznhc_stub(node, node["size"]),
                   path="/opt/azurehpc/test/azurehpc-health-checks/run-health-checks.sh")


def _mpirun(backend, launcher: dict, vmss: dict, settings: dict[str, str]) -> dict[str, Any]:
    """mpirun's answer: all_reduce_perf over the hosts, slower when a port is down or slow or the
    scale set's fabric is degraded; ssh refused by a host that does not trust the launcher's key."""
    m = hardware.model(launcher["size"])
    hosts = settings.get("AZGPU_NCCL_HOSTS", "").split()
    by_ip = _nodes_by_ip(backend, vmss)
    pubkey = launcher["files"].get(".azgpu-nccl/id_ed25519.pub", "").strip()
    factor = backend.store.fabric.get(key(vmss["id"]), 1.0)
    ranks = []
    for ip in hosts:
        node = by_ip.get(ip)
        if node is None:
            return {"stdout": "", "stderr": f"ssh: connect to host {ip} port 22: No route to host\n"
                    "--------------------------------------------------------------------------\n"
                    "ORTE was unable to reliably start one or more daemons.\n", "rc": 1}
        if node is not launcher and (not pubkey or pubkey not in node["files"].get(".ssh/authorized_keys", "")):
            return {"stdout": "", "stderr": f"{node['admin_user']}@{ip}: Permission denied (publickey).\n"
                    "--------------------------------------------------------------------------\n"
                    "ORTE was unable to reliably start one or more daemons.\n", "rc": 1}
        up = sum(p["rate"] for p in node["ib"] if p["state"] == "ACTIVE" and p["phys"] == "LinkUp")
        factor = min(factor, up / (m.ib_rate * m.ib_ports) if m.ib_ports else 0.0)
        ranks.append((node["computer"], sum(1 for g in node["gpus"] if g["present"])))
    return {"stdout": hardware.nccl_output(ranks, round(m.busbw_gbps * factor, 2), m.gpu_name), "rc": 0}


def _nodes_by_ip(backend, vmss: dict) -> dict[str, dict]:
    out = {}
    for vm in backend.store.under(vmss["id"]):
        if vm.get("type") != "Microsoft.Compute/virtualMachineScaleSets/virtualMachines":
            continue
        node = node_of(backend, vm, vmss)
        for nic in backend.store.under(vm["id"]):
            for ipc in (nic.get("properties") or {}).get("ipConfigurations", []):
                ip = ipc.get("properties", {}).get("privateIPAddress")
                if ip:
                    out[ip] = node
    return out
