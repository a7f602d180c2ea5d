"""A Slurm cluster as a user runs one with azgpu: a controller machine (slurmctld, munged, and azgpu
installed there), and simulated VMs that become nodes only through azgpu's own bootstrap.

The test plays the user: it writes the controller's slurm.conf (its own settings, the lines the
fragment asks to merge, `Include azgpu.conf`), gives the controller a munge key and starts munged and
slurmctld there. It never starts a slurmd nor names a node: the fake (azgpu's --simulate) creates the
VMs, and machines.Hypervisor runs azgpu's Run Command scripts in them as Azure's agent would.

Versions: "22.05" is the host's Debian 12 (slurm-wlm 22.05); "24.11" is the Debian 13 root that
tools/slurm_test_root.py builds (AZGPU_SLURM_ROOTS). Each is the controller's image and the VMs'.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from machines import CONTROLLER_ADDRESS, ISOLATION, REPO, ROOTS, Hypervisor, Machine, Network, sbin

VERSIONS = ("22.05", "24.11")
SLURM = ("munged", "slurmctld", "slurmd", "srun", "sbatch", "scontrol")
VENV = "/opt/azgpu"
CONFIG = "/etc/slurm"


def image_of(version: str) -> Path:
    return Path("/") if version == "22.05" else ROOTS / "trixie"


def unavailable(reason: str) -> None:
    """Skip, saying why; under .ci/run as root (AZGPU_REQUIRE_REAL_SLURM=1), where everything the real-Slurm
    tests need was installed or built, fail instead: a skip there would hide a CI that tests nothing."""
    import pytest

    if os.environ.get("AZGPU_REQUIRE_REAL_SLURM") == "1":
        pytest.fail(f"the real-Slurm test cannot run in CI: {reason}")
    pytest.skip(reason)


def skip_reason(version: str) -> str | None:
    if os.geteuid() != 0:
        return ("the machines (mount, network, UTS and PID namespaces, chroot) and SlurmUser=root need root "
                "(CI runs as root)")
    gone = [p for p in ISOLATION + ("chroot",) if not shutil.which(p) and not Path("/usr/sbin", p).exists()]
    if gone:
        return f"{', '.join(gone)} missing: apt-get install util-linux iproute2 coreutils"
    image = image_of(version)
    if version == "22.05":
        gone = [p for p in SLURM if not shutil.which(p) and not Path("/usr/sbin", p).exists()]
        if gone:
            return (f"Slurm is not installed here ({', '.join(gone)} missing): "
                    "apt-get install slurm-wlm slurmctld slurmd munge slurm-client (.ci/run does)")
        done = subprocess.run([sbin("slurmctld"), "-V"], capture_output=True, text=True)
        if "22.05" not in done.stdout:
            return f"the host's Slurm is {done.stdout.strip()}, not Debian 12's 22.05"
        return None
    stamp = image / "azgpu-root.json"
    if not stamp.exists():
        return f"no Debian 13 root with Slurm 24.11 at {image}: python tools/slurm_test_root.py (.ci/run does)"
    sys.path.insert(0, str(REPO / "tools"))
    try:
        from slurm_test_root import current
    finally:
        sys.path.pop(0)
    if not current(image, "trixie"):
        return f"the root at {image} was built for other requirements: python tools/slurm_test_root.py rebuilds it"
    return None


class Cluster:
    def __init__(self, version: str, work: Path):
        self.version = version
        self.work = work
        self.image = image_of(version)
        self.state = work / "sim" / "state.json"
        self.state.parent.mkdir()
        self.power_log = work / "power.log"
        self.network = Network()
        self.controller = Machine("ctl", self.image, work / "machines",
                                  binds=((work, work, False), (REPO, REPO, True)))
        self.network.plug(self.controller.pid, CONTROLLER_ADDRESS)
        with self.controller.path("/etc/hosts").open("a") as hosts:
            hosts.write(f"{CONTROLLER_ADDRESS} ctl\n")
        self.daemons: list[subprocess.Popen] = []
        self.hypervisor: Hypervisor | None = None
        if version == "22.05":
            self.python = sys.executable  # the checkout's venv: the host's file system is the controller's image
        else:  # azgpu installed on the controller as a user installs it; its dependencies came with the root
            self.python = f"{VENV}/bin/python"
            self.controller.run([f"{VENV}/bin/pip", "install", "-q", "--no-index", "--no-deps", "--no-build-isolation",
                                 "--disable-pip-version-check", str(REPO)], timeout=300)

    # -- the user's side ------------------------------------------------------------------------
    def provision(self, *args: str, timeout: float = 180, check: bool = True) -> subprocess.CompletedProcess:
        """The CLI on the controller (as the user runs it there)."""
        env = {"AZGPU_SIMULATE_STATE": str(self.state), "XDG_CACHE_HOME": str(self.work / "cache"),
               "XDG_STATE_HOME": str(self.work / "xdg-state")}
        return self.controller.run([self.python, "-m", "azgpu.cli", *args], env=env, timeout=timeout, check=check)

    def attach_vms(self, on_boot=None) -> Hypervisor:
        """The simulated VMs' operating systems: the controller's image, one machine per VM."""
        from azgpu.testing import FakeAzure

        gres = self.controller.path(f"{CONFIG}/gres.conf").read_text()
        devices = tuple(f"/dev/nvidia{i}" for i in range(8)) if "File=/dev/nvidia[0-7]" in gres else ()
        self.hypervisor = Hypervisor(self.work, self.image, self.network, devices=devices, on_boot=on_boot)
        FakeAzure.load(self.state).attach_machines(self.hypervisor.path)
        return self.hypervisor

    def munge_key(self) -> bytes:
        """The controller's munge key: made with the controller's own tool, as an administrator does."""
        self.controller.run(["sh", "-c", "rm -f /etc/munge/munge.key; dd if=/dev/urandom of=/etc/munge/munge.key "
                             "bs=1024 count=1 2>/dev/null; chown munge:munge /etc/munge/munge.key; "
                             "chmod 0400 /etc/munge/munge.key"])
        return self.controller.path("/etc/munge/munge.key").read_bytes()

    def slurm_conf(self, fragment: str, **extra: str) -> None:
        """slurm.conf beside azgpu.conf: the test's settings, then what the fragment asks to merge."""
        merge = dict(line[1:].split("=", 1) for line in fragment.splitlines()
                     if line.startswith(("#SlurmctldParameters=", "#TopologyPlugin=")))
        plugin = next(line.split('"')[1].split("=", 1)[1] for line in fragment.splitlines()
                      if "TopologyPlugin=" in line and line.startswith("# "))
        settings = {
            "ClusterName": "azgputest", "SlurmctldHost": f"ctl({CONTROLLER_ADDRESS})", "SlurmUser": "root",
            "AuthType": "auth/munge", "StateSaveLocation": "/var/spool/slurmctld",
            "SlurmdSpoolDir": "/var/spool/slurmd",
            "SlurmctldPidFile": "/run/slurmctld.pid", "SlurmdPidFile": "/run/slurmd.pid",
            "SlurmctldLogFile": "/var/log/slurm/slurmctld.log", "SlurmdLogFile": "/var/log/slurm/slurmd.log",
            "SlurmctldDebug": "info", "SlurmdDebug": "info",
            "ProctrackType": "proctrack/linuxproc", "TaskPlugin": "task/none", "SelectType": "select/cons_tres",
            "MpiDefault": "none", "JobCompType": "jobcomp/none", "AccountingStorageType": "accounting_storage/none",
            "ReturnToService": "2", "GresTypes": "gpu", "TopologyPlugin": plugin,
            # The machines are this host's CPUs and memory, not an H100 VM's.
            "SlurmdParameters": "config_overrides",
            "SlurmctldParameters": merge["SlurmctldParameters"], **extra}
        conf = self.controller.path(CONFIG)
        (conf / "slurm.conf").write_text("".join(f"{k}={v}\n" for k, v in settings.items()) + "Include azgpu.conf\n")
        self.controller.run(["mkdir", "-p", "/var/spool/slurmctld", "/var/log/slurm"])

    def start_controller(self) -> None:
        # What munge.service's RuntimeDirectory= makes on a systemd host.
        self.controller.run(["install", "-d", "-o", "munge", "-g", "munge", "-m", "0755", "/run/munge"])
        self.daemons.append(self.controller.start(["runuser", "-u", "munge", "--", "munged", "-F"],
                                                  log=self.work / "munged.out"))
        self.wait("munged", lambda: self.controller.path("/run/munge/munge.socket.2").exists(), 20)
        self.daemons.append(self.controller.start(["slurmctld", "-D", "-i"], log=self.work / "slurmctld.out"))
        self.wait("slurmctld", lambda: "UP" in self.slurm("scontrol", "ping", check=False).stdout, 40)

    # -- reading it ----------------------------------------------------------------------------------
    def slurm(self, *argv: str, timeout: float = 60, check: bool = True) -> subprocess.CompletedProcess:
        return self.controller.run(list(argv), timeout=timeout, check=check)

    def nodes(self) -> dict[str, dict[str, str]]:
        out = self.slurm("scontrol", "show", "node", "-o").stdout
        found = {}
        for line in out.splitlines():
            fields = {}
            for item in line.split():
                if "=" in item:
                    k, v = item.split("=", 1)
                    fields.setdefault(k, v)
            reason = line.split(" Reason=", 1)[1] if " Reason=" in line else ""
            fields["Reason"] = reason
            found[fields["NodeName"]] = fields
        return found

    def slurmctld_log(self) -> str:
        path = self.controller.path("/var/log/slurm/slurmctld.log")
        return path.read_text(errors="replace") if path.exists() else ""

    def details(self) -> str:
        nodes = self.slurm("scontrol", "show", "node", "-o", check=False).stdout
        vms = "".join(f"--- {m.name} slurmd.log:\n" + _tail(m.path("/var/log/slurm/slurmd.log"), 8)
                      for m in (self.hypervisor.machines.values() if self.hypervisor else ()))
        errors = "\n".join(self.hypervisor.errors) if self.hypervisor else ""
        return (f"power.log:\n{_tail(self.power_log, 40)}\nnodes:\n{nodes}\nslurmctld.log:\n"
                f"{self.slurmctld_log()[-3000:]}\n{vms}\nhypervisor errors: {errors}")

    def wait(self, what: str, predicate, timeout: float):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            value = predicate()
            if value:
                return value
            time.sleep(0.5)
        raise AssertionError(f"timed out waiting for {what}\n{self.details()}")

    def close(self) -> None:
        if self.hypervisor:
            self.hypervisor.close()
        for proc in reversed(self.daemons):
            if proc.poll() is None:
                proc.terminate()
        self.controller.stop()
        for proc in self.daemons:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
        self.network.close()


def _tail(path: Path, lines: int) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) + "\n"
    except OSError:
        return "(none)\n"
