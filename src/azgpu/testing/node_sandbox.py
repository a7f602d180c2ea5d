"""A directory that stands in for a node: stub tools and files, and the real node script run on them.

azgpu's node check (azgpu/health/node_check.sh) reads everything through AZGPU_ROOT and calls its
tools through PATH, so it runs unchanged against a sandbox: stub commands that print recorded
output (nvidia-smi, rocm-smi, dmesg, curl for IMDS, AzNHC's run-health-checks.sh ...), files under
the root (sysfs, the KVP pool, the admin's home), and a PATH holding only those stubs and a short
list of ordinary system tools, so nothing the script runs can reach a real device or the network.
Tests build sandboxes from real output; the simulated Azure builds one per Run Command from the
node's simulated hardware.
"""

from __future__ import annotations

import atexit
import functools
import os
import shlex
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

# System tools the script may use; everything that touches hardware or the network is a stub.
SYSTEM_TOOLS = ("bash", "sh", "sed", "awk", "grep", "tr", "dd", "head", "tail", "wc", "cat", "date", "mktemp", "rm",
                "mkdir", "cut", "sort", "uniq", "basename", "dirname", "ls", "chmod", "touch", "cp", "mv", "timeout",
                "env", "tee", "sleep", "printf", "readlink", "id", "tac", "xargs", "find", "stat", "true", "false",
                "base64", "sha256sum")


@dataclass
class Ran:
    stdout: str
    stderr: str
    returncode: int


@functools.cache
def _system_tools() -> Path:
    """One directory of links to the allowed system tools, shared by every sandbox of the process."""
    path = Path(tempfile.mkdtemp(prefix="azgpu-tools-"))
    atexit.register(shutil.rmtree, path, True)
    for tool in SYSTEM_TOOLS:
        found = shutil.which(tool, path=os.defpath + os.pathsep + "/usr/bin:/bin")
        if found:
            (path / tool).symlink_to(found)
    return path


class Sandbox:
    def __init__(self, root: str | os.PathLike):
        self.root = Path(root)
        self.stubs = self.root / ".azgpu-stubs"
        self.system = _system_tools()
        for d in (self.stubs, self.root / "tmp"):
            d.mkdir(parents=True, exist_ok=True)
        self._outputs = 0

    # -- building the node ------------------------------------------------------------------
    def file(self, path: str, content: str | bytes, mode: int | None = None) -> Path:
        """A file at an absolute node path (e.g. /sys/class/infiniband/mlx5_ib0/ports/1/state)."""
        target = self.root / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            target.write_bytes(content)
        else:
            target.write_text(content)
        if mode is not None:
            target.chmod(mode)
        return target

    def _saved(self, text: str) -> Path:
        self._outputs += 1
        path = self.stubs / f".out{self._outputs}"
        path.write_text(text)
        return path

    def tool(self, name: str, stdout: str = "", *, rc: int = 0, stderr: str = "",
             cases: list[tuple[str, str, int]] = (), path: str | None = None) -> None:
        """A stub command. cases: (glob matched against "$*", stdout, exit code), tried in order;
        otherwise it prints stdout/stderr and exits rc. path: an absolute node path instead of PATH."""
        lines = ["#!/bin/bash", 'case "$*" in']
        for pattern, out, code in cases:
            glob = pattern.replace(" ", "\\ ")  # a glob: spaces escaped, * and ? kept
            lines.append(f"  {glob}) cat {shlex.quote(str(self._saved(out)))}; exit {int(code)};;")
        err = f" ; cat {shlex.quote(str(self._saved(stderr)))} >&2" if stderr else ""
        lines.append(f"  *) cat {shlex.quote(str(self._saved(stdout)))}{err}; exit {int(rc)};;")
        lines.append("esac")
        self.script(name, "\n".join(lines) + "\n", path=path)

    def script(self, name: str, text: str, *, path: str | None = None) -> None:
        """A stub command written as a shell script of its own."""
        target = self.file(path, text) if path else self.stubs / name
        if not path:
            target.write_text(text)
        target.chmod(0o755)

    def ib_port(self, device: str, port: int = 1, *, state: str = "4: ACTIVE", phys_state: str = "5: LinkUp",
                rate: str = "200 Gb/sec (4X HDR)", link_layer: str = "InfiniBand") -> None:
        """A port as the kernel shows it under /sys/class/infiniband (drivers/infiniband/core/sysfs.c)."""
        base = f"/sys/class/infiniband/{device}/ports/{port}"
        for name, value in (("state", state), ("phys_state", phys_state), ("rate", rate), ("link_layer", link_layer)):
            self.file(f"{base}/{name}", value + "\n")

    def pci_device(self, bus: str, vendor: str, device_class: str) -> None:
        self.file(f"/sys/bus/pci/devices/{bus}/vendor", vendor + "\n")
        self.file(f"/sys/bus/pci/devices/{bus}/class", device_class + "\n")

    def kvp_pool(self, pool: int, records: dict[str, str]) -> None:
        """/var/lib/hyperv/.kvp_pool_N: records of a 512-byte key and a 2,048-byte value, NUL-padded
        (struct kvp_record, HV_KVP_EXCHANGE_MAX_KEY_SIZE / _VALUE_SIZE)."""
        data = b"".join(k.encode().ljust(512, b"\0") + v.encode().ljust(2048, b"\0") for k, v in records.items())
        self.file(f"/var/lib/hyperv/.kvp_pool_{pool}", data)

    # -- running the script -------------------------------------------------------------------
    def run(self, script_lines: list[str], *, env: dict[str, str] | None = None, timeout: float = 120) -> Ran:
        script = self.root / "tmp" / "script.sh"
        script.write_text("\n".join(script_lines) + "\n")
        script.chmod(0o755)
        environment = {"PATH": f"{self.stubs}:{self.system}", "AZGPU_ROOT": str(self.root),
                       "TMPDIR": str(self.root / "tmp"), "HOME": str(self.root / "root"), "LC_ALL": "C",
                       **(env or {})}
        command = [str(self.system / "bash"), str(script)]
        if (self.system / "timeout").exists():
            # timeout(1), not subprocess's timeout=, which polls with time.sleep (tests forbid real sleeps).
            command = [str(self.system / "timeout"), f"{timeout:g}", *command]
        done = subprocess.run(command, capture_output=True, text=True, env=environment, cwd=self.root)
        return Ran(done.stdout, done.stderr, done.returncode)
