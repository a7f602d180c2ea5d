"""Failure paths of azgpu's power-saving programs, driven by a real slurmctld (Debian's slurm-wlm).

The harness is tests/slurm/lo_namespace.py (a private network namespace with only `lo`, munged
and slurmctld run from a temporary directory with the configuration `provision slurm config`
wrote). Here no VM ever boots: a job asks for CLOUD nodes, slurmctld runs the resume program, and
Azure (the simulated subscription) or slurmctld itself fails it. What slurmctld then shows and
does (the Reason of each node, ResumeTimeout, the programs it runs next) is slurmctld's own; the
test only submits the job, plays the administrator, and stops slurmctld where a test says so.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest
from lo_namespace import Daemons, NetNamespace
from lo_namespace import missing as _missing
from lo_namespace import sbin as _sbin
from lo_namespace import wait as _wait
from slurm_cluster import unavailable
from slurm_support import cluster_file, provision

pytestmark = [pytest.mark.slow, pytest.mark.real_slurm]

H100 = "Standard_ND96isr_H100_v5"


class Controller:
    """munged and slurmctld in the namespace, with the fragment and programs `slurm config` wrote."""

    def __init__(self, root: Path, daemons: Daemons, netns: NetNamespace, *, resume_timeout: int, suspend_time: int,
                 latency: float = 0):
        self.root, self.daemons, self.netns = root, daemons, netns
        self.state = root / "sim" / "state.json"
        self.state.parent.mkdir()
        self.sim = ["--simulate", "--simulate-state", str(self.state), "--simulate-latency", "0"]
        self.cfile = cluster_file(root, nodes=8)
        self.log = root / "power.log"
        out = root / "azgpu"
        # The programs run with `latency`: each long-running Azure operation then takes that long.
        done = provision("slurm", "config", "-f", str(self.cfile), "--out-dir", str(out), "--state-dir",
                         str(root / "map"), "--log-file", str(self.log), "--resume-timeout", str(resume_timeout),
                         "--suspend-time", str(suspend_time), *self.sim[:-1], str(latency))
        assert done.returncode == 0, done.stderr
        fragment = (out / "azgpu.conf").read_text()
        munge = root / "munge"
        munge.mkdir(mode=0o700)
        key = munge / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        sock = munge / "sock"
        daemons.start(netns.prefix() + [_sbin("munged"), "-F", "--force", f"--key-file={key}", f"--socket={sock}",
                                        f"--pid-file={munge}/pid", f"--log-file={munge}/log",
                                        f"--seed-file={munge}/seed"], dict(os.environ), root / "munged.out")
        _wait("munged's socket", sock.exists, 15)
        conf = root / "etc"
        for directory in (conf, root / "spool", root / "state"):
            directory.mkdir()
        base = 21000
        host = socket.gethostname().split(".")[0]
        devices = root / "dev"
        devices.mkdir()
        for i in range(8):
            (devices / f"nvidia{i}").touch()
        (conf / "gres.conf").write_text(f"NodeName=demo-d000-[0001-0008] Name=gpu File={devices}/nvidia[0-7]\n")
        shutil.copy(out / "topology.conf", conf / "topology.conf")
        ports = f" Port={base + 2}-{base + 9}"
        lines = [line + ports if line.startswith("NodeName=") else line for line in fragment.splitlines()]
        (conf / "slurm.conf").write_text("\n".join([
            "ClusterName=azgputest", f"SlurmctldHost={host}(127.0.0.1)", f"SlurmctldPort={base}",
            f"SlurmdPort={base + 1}", "SlurmUser=root", "AuthType=auth/munge", f"AuthInfo=socket={sock}",
            f"StateSaveLocation={root}/state", f"SlurmdSpoolDir={root}/spool/%n",
            f"SlurmctldPidFile={root}/slurmctld.pid", f"SlurmdPidFile={root}/slurmd-%n.pid",
            f"SlurmctldLogFile={root}/slurmctld.log", f"SlurmdLogFile={root}/slurmd-%n.log",
            "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none", "SelectType=select/cons_tres",
            "SchedulerType=sched/builtin", "MpiDefault=none", "JobCompType=jobcomp/none",
            "AccountingStorageType=accounting_storage/none", "ReturnToService=2", "GresTypes=gpu",
            "TopologyPlugin=topology/tree", "SlurmdParameters=config_overrides", "SlurmctldParameters=cloud_reg_addrs",
            *lines, ""]))
        self.env = {**os.environ, "SLURM_CONF": str(conf / "slurm.conf")}
        self.slurmctld = daemons.start(netns.prefix() + [_sbin("slurmctld"), "-D", "-c", "-i"], self.env,
                                       root / "slurmctld.out")
        _wait("slurmctld", lambda: "UP" in self.sc("scontrol", "ping", check=False), 30, details=self.details)

    def sc(self, *argv: str, check: bool = True) -> str:
        done = subprocess.run(self.netns.prefix() + list(argv), env=self.env, capture_output=True, text=True,
                              timeout=60)
        if check:
            assert done.returncode == 0, f"{argv}: {done.stderr}"
        return done.stdout

    def nodes(self, *, busy_ok: bool = False) -> dict[str, dict[str, str]]:
        """NodeName -> State and Reason, as `scontrol show node -o` prints them (Reason without [user@time]).

        busy_ok: while slurmctld pings unreachable nodes scontrol can time out ("Socket timed out on
        send/recv operation"); a caller that polls gets {} and asks again.
        """
        found = {}
        for line in self.sc("scontrol", "show", "node", "-o", check=not busy_ok).splitlines():
            name = re.search(r"NodeName=(\S+)", line)
            state = re.search(r" State=(\S+)", line)
            reason = re.search(r" Reason=(.*?)(?: \[[^\]]*\])?\s*$", line)
            if name and state:
                found[name.group(1)] = {"State": state.group(1), "Reason": reason.group(1) if reason else ""}
        return found

    def text(self) -> str:
        return self.log.read_text() if self.log.exists() else ""

    def details(self) -> str:
        tail = (self.root / "slurmctld.log").read_text()[-3000:] if (self.root / "slurmctld.log").exists() else ""
        return f"power.log:\n{self.text()}\nslurmctld.log tail:\n{tail}"

    def vms(self) -> list[dict]:
        shown = provision("status", "-n", "demo", "-g", "demo-rg", *self.sim, "-o", "json")
        if shown.returncode == 3:  # no cluster (not created yet)
            return []
        assert shown.returncode == 0, shown.stderr
        return [{"instance_id": i["instance_id"], "capacity": s["capacity"]}
                for s in json.loads(shown.stdout)["scale_sets"] for i in s["instances"]]

    def capacities(self) -> list[int]:
        shown = provision("status", "-n", "demo", "-g", "demo-rg", *self.sim, "-o", "json")
        return [s["capacity"] for s in json.loads(shown.stdout)["scale_sets"]] if shown.returncode == 0 else []

    def bindings(self) -> dict[str, str]:
        """Instance id -> the node name Azure keeps on it (the simulated subscription's Run Commands)."""
        from azgpu.testing import FakeAzure

        fake = FakeAzure.load(self.state)
        return {r["id"].split("/virtualMachines/")[1].split("/")[0]: r["tags"]["azgpu-slurm-node"]
                for r in fake.resources(resource_group="demo-rg") if r["id"].lower().endswith("/azgpu-slurm-node")}


@pytest.fixture
def controller(tmp_path_factory):
    reason = _missing()
    if reason:
        unavailable(reason)
    root = Path(tmp_path_factory.mktemp("sl"))
    netns = NetNamespace()
    daemons = Daemons()
    made: list[Controller] = []

    def make(**kwargs) -> Controller:
        made.append(Controller(root, daemons, netns, **kwargs))
        return made[-1]

    try:
        yield make
    finally:
        for c in made:
            if c.slurmctld.poll() is None:
                c.slurmctld.send_signal(signal.SIGCONT)  # a test that stopped it: let it end
        daemons.stop()
        netns.close()


def _simulate(c: Controller, *argv: str) -> None:
    done = provision("simulate", *argv, "--simulate-state", str(c.state))
    assert done.returncode == 0, done.stderr


def test_allocation_failed_and_quota_keep_azgpus_reason_and_an_administrators_resume(controller):
    c = controller(resume_timeout=20, suspend_time=600)
    _simulate(c, "capacity", "set", "-l", "eastus", "--size", H100, "--max-vms", "2")
    job = c.sc("sbatch", "--parsable", "-N4", "-p", "demo-vmss000", "--wrap", "hostname").strip()
    _wait("the resume to give up", lambda: "setting DOWN" in c.text(), 90, details=c.details)
    nodes = _wait("slurmctld to show azgpu's reason",
                  lambda: (n := c.nodes(busy_ok=True)) and all(n[f"demo-d000-000{i}"]["Reason"].startswith("azgpu ")
                                                    for i in range(1, 5)) and n, 30, details=c.details)
    reason = nodes["demo-d000-0001"]["Reason"]
    assert reason.startswith("azgpu CAPACITY_UNAVAILABLE") and "; remedy: " in reason, reason
    # The failed grow left no capacity and no VM without a name, before and after the next program.
    assert c.capacities() == [0] and c.vms() == []
    _wait("the suspend program slurmctld runs for the powered-down names", lambda: " suspend " in c.text(), 60,
          details=c.details)
    assert c.vms() == [] and c.bindings() == {}
    # An administrator returns one node before ResumeTimeout would have passed; slurmctld reaches it.
    # (scontrol may time out waiting for the answer while slurmctld pings the nodes; the update is made.)
    c.sc("scontrol", "update", "nodename=demo-d000-0004", "state=resume", check=False)
    _wait("the administrator's resume",
          lambda: c.nodes(busy_ok=True).get("demo-d000-0004", {}).get("State", "").startswith("IDLE"), 60,
          details=c.details)
    time.sleep(25)
    nodes = _wait("scontrol show node", lambda: c.nodes(busy_ok=True), 60, details=c.details)
    assert nodes["demo-d000-0001"]["Reason"] == reason  # slurmctld's "ResumeTimeout reached" never replaced it
    assert "DOWN" in nodes["demo-d000-0001"]["State"]
    assert nodes["demo-d000-0004"]["State"].startswith("IDLE"), nodes["demo-d000-0004"]  # not undone
    assert " resume-fail " not in c.text()
    c.sc("scancel", job)


def test_quota_reason_survives_resume_timeout(controller):
    c = controller(resume_timeout=15, suspend_time=600)
    _simulate(c, "quota", "set", "-l", "eastus", "--name", "standardNDSH100v5Family", "--limit", "96")
    c.sc("sbatch", "--parsable", "-N2", "-p", "demo-vmss000", "--wrap", "hostname")
    _wait("the resume to give up", lambda: "setting DOWN" in c.text(), 90, details=c.details)
    time.sleep(25)  # past ResumeTimeout
    nodes = _wait("scontrol show node", lambda: c.nodes(busy_ok=True), 60, details=c.details)
    for name in ("demo-d000-0001", "demo-d000-0002"):
        assert nodes[name]["Reason"].startswith("azgpu QUOTA_INSUFFICIENT: "), nodes[name]
        assert "remedy: request an increase" in nodes[name]["Reason"]
    assert c.vms() == []


def test_slurmctld_not_answering_during_resume_leaves_no_vm_without_a_name(controller):
    # Each Azure operation takes 10 s, so the Run Command health check is still running when the
    # test stops slurmctld: the addresses are given to a slurmctld that no longer answers.
    c = controller(resume_timeout=150, suspend_time=600, latency=10)
    c.sc("sbatch", "--parsable", "-N2", "-p", "demo-vmss000", "--wrap", "hostname")
    _wait("the health check", lambda: "health check of 2 node(s)" in c.text(), 90, details=c.details)
    c.slurmctld.send_signal(signal.SIGSTOP)  # slurmctld stops answering while the nodes are checked
    try:
        _wait("the resume to give up on slurmctld", lambda: "could not set" in c.text() or "setting DOWN" in c.text()
              and "did not take its address" in c.text(), 180, details=c.details)
    finally:
        c.slurmctld.send_signal(signal.SIGCONT)
    assert "did not take its address" in c.text()
    assert sorted(c.bindings().values()) == ["demo-d000-0001", "demo-d000-0002"]  # named, not leaked
    # slurmctld reaches ResumeTimeout and runs resume-fail: azgpu's reason, and the VMs freed.
    _wait("resume-fail", lambda: " resume-fail " in c.text() and c.vms() == [], 200, details=c.details)
    nodes = _wait("scontrol show node", lambda: c.nodes(busy_ok=True), 60, details=c.details)
    for name in ("demo-d000-0001", "demo-d000-0002"):
        assert nodes[name]["Reason"].startswith("azgpu SCONTROL_FAILED"), nodes[name]
    assert c.bindings() == {} and c.capacities() == [0]
