"""A network namespace with only the loopback up, and daemons started in it: what
tests/slurm/test_slurmctld_failures.py runs a real slurmctld in. No VM boots there (Azure, the simulated
subscription, or slurmctld itself fails each resume), so it needs none of tests/slurm/machines.py's
machines: slurmctld holds the simulated VMs' 10.x addresses, and whatever it sends there fails with
"network unreachable" instead of leaving the host."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

PROGRAMS = ("munged", "slurmctld", "sbatch", "scontrol", "squeue")
ISOLATION = ("unshare", "nsenter", "ip")  # util-linux and iproute2: the private network namespace


def missing() -> str | None:
    gone = [p for p in PROGRAMS if not shutil.which(p) and not Path("/usr/sbin", p).exists()]
    if gone:
        return (f"Slurm is not installed here ({', '.join(gone)} missing): "
                "apt-get install slurm-wlm slurmctld munge slurm-client (.ci/run does)")
    if os.geteuid() != 0:
        return ("slurmd and slurmctld with SlurmUser=root, and the private network namespace they must run in, "
                "need root (CI runs as root)")
    gone = [p for p in ISOLATION if not shutil.which(p) and not Path("/usr/sbin", p).exists()]
    if gone:
        return (f"{', '.join(gone)} missing: the Slurm daemons must run in a private network namespace "
                "(apt-get install util-linux iproute2)")
    return None


class NetNamespace:
    """A network namespace with only `lo` up, held open by a sleeping process.

    slurmctld holds the simulated VMs' 10.x addresses until the slurmds register; whatever it sends
    there must fail here (no route: ENETUNREACH) instead of leaving the machine.
    """

    def __init__(self):
        self.holder = subprocess.Popen([sbin("unshare"), "--net", "--", "sleep", "3600"],
                                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                       stderr=subprocess.PIPE, start_new_session=True)
        self.path = f"/proc/{self.holder.pid}/ns/net"
        mine = os.readlink("/proc/self/ns/net")
        end = time.monotonic() + 10
        # unshare execs sleep only after it has unshared: until then the holder is still in ours.
        while self._ns() in (None, mine):
            if self.holder.poll() is not None or time.monotonic() > end:
                err = self.holder.stderr.read().decode() if self.holder.poll() is not None else "timed out"
                self.close()
                pytest.skip(f"cannot create a private network namespace (unshare --net: {err.strip()})")
            time.sleep(0.05)
        # A second loopback address: glibc's AI_ADDRCONFIG ignores 127.0.0.1 alone, and Slurm 22.05 asks
        # getaddrinfo for AF_INET with it, so with only 127.0.0.1 no daemon could bind or connect.
        for argv in (["link", "set", "lo", "up"], ["addr", "add", "127.0.0.2/8", "dev", "lo"]):
            done = subprocess.run(self.prefix() + [sbin("ip"), *argv], capture_output=True, text=True, timeout=10)
            if done.returncode:
                self.close()
                raise AssertionError(f"ip {' '.join(argv)} in the namespace: {done.stderr}")

    def _ns(self) -> str | None:
        try:
            return os.readlink(self.path)
        except OSError:
            return None

    def prefix(self) -> list[str]:
        """nsenter into the namespace; refuses once the holder is gone (its pid could be anyone's)."""
        assert self.holder.poll() is None, "the network namespace's holder process died"
        return [sbin("nsenter"), f"--net={self.path}", "--"]

    def close(self) -> None:
        if self.holder.poll() is None:
            self.holder.kill()
        self.holder.wait(timeout=10)
        self.holder.stderr.close()


# Run inside the namespace: only `lo` with loopback addresses, and an address outside unreachable


def wait(what: str, predicate, timeout: float, *, details=lambda: ""):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = predicate()
        if value:
            return value
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}\n{details()}")


def sbin(name: str) -> str:
    return shutil.which(name) or f"/usr/sbin/{name}"


class Daemons:
    def __init__(self):
        self.procs: list[subprocess.Popen] = []

    def start(self, argv: list[str], env: dict, log: Path) -> subprocess.Popen:
        proc = subprocess.Popen(argv, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
        self.procs.append(proc)
        return proc

    def stop(self) -> None:
        for proc in reversed(self.procs):
            if proc.poll() is None:
                proc.terminate()
        for proc in reversed(self.procs):
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)

