"""The simulated VMs' operating systems, where a test attaches them: the fake as Azure's hypervisor.

The fake models a VM's Azure side (its resource, NIC, hardware as the node check sees it); what a
script does inside the VM's OS (install, write files, start daemons) needs a machine. A test that has
such machines (tests/slurm/machines.py: one network, mount and PID namespace per VM) listens on a
UNIX socket and attaches it with `FakeAzure.attach_machines(path)`; the path is part of the simulated
state, so every process using the same `--simulate-state` (slurmctld's resume program included)
reaches the same machines. Without one, the fake does not pretend: a managed Run Command raises
NotImplementedInFake.

Two requests, one JSON object each way per connection:
- run: a VM's script, run as Azure's Run Command handler runs it (RunCommandHandlerLinux
  internal/exec/exec.go: named parameters, protected ones included, become environment variables of
  `/bin/bash -c`); answers stdout, stderr and the exit code.
- gone: VMs Azure deleted; their machines stop, with every process in them.
"""

from __future__ import annotations

import json
import socket
from typing import Any

# A reply may carry a script's whole output; the fake keeps only the tail (TAIL in vm_actions).
_MAX_REPLY = 8 * 1024 * 1024


class MachineError(Exception):
    """The machines' side did not answer as it should (gone, crashed, malformed)."""


def _ask(address: str, request: dict[str, Any], timeout: float) -> dict[str, Any]:
    data = (json.dumps(request) + "\n").encode()
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.settimeout(timeout)
            conn.connect(address)
            conn.sendall(data)
            conn.shutdown(socket.SHUT_WR)
            chunks, size = [], 0
            while True:
                chunk = conn.recv(65536)
                if not chunk:
                    break
                size += len(chunk)
                if size > _MAX_REPLY:
                    raise MachineError("the machines' reply is too long")
                chunks.append(chunk)
    except OSError as exc:
        raise MachineError(f"the simulated machines at {address} did not answer: {exc}") from None
    try:
        reply = json.loads(b"".join(chunks).decode())
    except ValueError as exc:
        raise MachineError(f"the simulated machines sent no JSON: {exc}") from None
    if not isinstance(reply, dict):
        raise MachineError("the simulated machines sent no JSON object")
    return reply


def run(address: str, vm: dict, script: str, env: dict[str, str], timeout: float) -> tuple[str, str, int]:
    """Run `script` as root in the VM's OS; (stdout, stderr, exit code). vm: id, computer_name, ip, and node
    (its simulated hardware, testing/hardware.py)."""
    reply = _ask(address, {"op": "run", "vm": vm, "script": script, "env": env, "timeout": timeout}, timeout + 30)
    try:
        return str(reply["stdout"]), str(reply["stderr"]), int(reply["rc"])
    except (KeyError, TypeError, ValueError):
        raise MachineError(f"the simulated machines answered without stdout, stderr and rc: {sorted(reply)}") from None


def gone(address: str, vm_ids: list[str]) -> None:
    """The VMs Azure deleted: their machines stop (best effort: a test without them does not care)."""
    try:
        _ask(address, {"op": "gone", "vms": vm_ids}, 60)
    except MachineError:
        pass
