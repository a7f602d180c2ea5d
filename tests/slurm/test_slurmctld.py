"""A real slurmctld (Debian's slurm-wlm) drives azgpu's power-saving programs over the loopback.

Every Slurm process of the test (munged, slurmctld, each slurmd, every sbatch/scontrol/squeue, and so
the resume and suspend programs slurmctld spawns) runs inside a network namespace the test creates,
with only `lo` up: slurmctld is given the simulated VMs' 10.x addresses and may try to reach them
(after ResumeTimeout, or before the slurmds register), and no packet may ever leave this machine.
Inside the namespace any such packet fails with ENETUNREACH; the test checks that before it starts
anything. It needs root (unshare/nsenter) and skips, saying why, without it.

munged and slurmctld run from a temporary directory with the configuration `provision slurm
config` wrote; a job asks for four CLOUD nodes of one InfiniBand domain. slurmctld must call the
resume program once with their hostlist; azgpu creates the scale set in the simulated
subscription, checks the nodes and gives slurmctld their addresses (checked with scontrol before
any slurmd runs). Then the test plays the booted VMs: one slurmd per node (slurm.conf(5) Port, and
`slurmd -b`, which slurm.conf(5) ResumeProgram suggests where a node is not really rebooted),
which register from 127.0.0.1 (SlurmctldParameters=cloud_reg_addrs). The job runs, the nodes go
idle, and after SuspendTime slurmctld calls the suspend program, which deletes exactly those VMs.
Another cluster in the same simulated subscription must stay as it was.

.ci/run installs the packages; elsewhere the test skips, saying which program is missing.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from slurm_support import cluster_file, instances, nodes, provision, status

pytestmark = pytest.mark.slow

PROGRAMS = ("munged", "slurmctld", "slurmd", "sbatch", "scontrol", "squeue")
ISOLATION = ("unshare", "nsenter", "ip")  # util-linux and iproute2: the private network namespace
DEADLINE = 150  # seconds for the whole cycle; slurmctld checks configuring jobs about every 30 s


def _missing() -> str | None:
    gone = [p for p in PROGRAMS if not shutil.which(p) and not Path("/usr/sbin", p).exists()]
    if gone:
        return (f"Slurm is not installed here ({', '.join(gone)} missing): "
                "apt-get install slurm-wlm slurmctld slurmd munge (.ci/run does)")
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
        self.holder = subprocess.Popen([_sbin("unshare"), "--net", "--", "sleep", "3600"],
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
            done = subprocess.run(self.prefix() + [_sbin("ip"), *argv], capture_output=True, text=True, timeout=10)
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
        return [_sbin("nsenter"), f"--net={self.path}", "--"]

    def close(self) -> None:
        if self.holder.poll() is None:
            self.holder.kill()
        self.holder.wait(timeout=10)
        self.holder.stderr.close()


# Run inside the namespace: only `lo` with loopback addresses, and an address outside unreachable
# before any packet is made (connect() on an unrouted address fails in the route lookup).
PROBE = """
import errno, ipaddress, json, socket, subprocess
def ip(*argv):
    return subprocess.run(["ip", "-o", *argv], capture_output=True, text=True, check=True).stdout.splitlines()
links = [l.split(":")[1].strip().split("@")[0] for l in ip("link", "show", "up")]
addrs = [ipaddress.ip_interface(l.split()[3]).ip for l in ip("addr", "show")]
errors = {}
for kind in (socket.SOCK_DGRAM, socket.SOCK_STREAM):
    s = socket.socket(socket.AF_INET, kind)
    s.settimeout(2)
    try:
        s.connect(("10.0.0.4", 6818))
        errors[kind.name] = "connected"
    except OSError as exc:
        errors[kind.name] = errno.errorcode.get(exc.errno, str(exc))
    finally:
        s.close()
print(json.dumps({"links": links, "loopback_only": bool(addrs) and all(a.is_loopback for a in addrs),
                  "errors": errors}))
"""


def _wait(what: str, predicate, timeout: float, *, details=lambda: ""):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = predicate()
        if value:
            return value
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}\n{details()}")


def _sbin(name: str) -> str:
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


@pytest.fixture
def slurm(tmp_path_factory):
    reason = _missing()
    if reason:
        pytest.skip(reason)
    # munged's socket path must stay short (AF_UNIX: 108 bytes): a directory of its own under /tmp.
    root = Path(tmp_path_factory.mktemp("sl"))
    netns = NetNamespace()
    daemons = Daemons()
    try:
        yield root, daemons, netns
    finally:
        daemons.stop()
        netns.close()


def test_job_on_four_cloud_nodes_resumes_then_suspends_one_domain(slurm, tmp_path):
    root, daemons, netns = slurm
    probe = subprocess.run(netns.prefix() + [sys.executable, "-c", PROBE], capture_output=True, text=True,
                           timeout=30)
    assert probe.returncode == 0, probe.stderr
    isolation = json.loads(probe.stdout)
    assert isolation == {"links": ["lo"], "loopback_only": True, "errors": {"SOCK_DGRAM": "ENETUNREACH", "SOCK_STREAM": "ENETUNREACH"}}
    state = root / "sim" / "state.json"
    state.parent.mkdir()
    sim = ["--simulate", "--simulate-state", str(state), "--simulate-latency", "0"]
    env = {"AZGPU_SIMULATE_STATE": str(state)}

    # Another cluster already in the subscription: nothing of it may change.
    other = cluster_file(root, nodes=2, name="other")
    done = provision("create", "-f", str(other), *sim, "-o", "none", env=env)
    assert done.returncode == 0, done.stderr
    other_before = status(state, "other")

    cfile = cluster_file(root, nodes=8)
    out = root / "azgpu"
    log = root / "power.log"
    done = provision("slurm", "config", "-f", str(cfile), "--out-dir", str(out), "--state-dir", str(root / "map"),
                     "--log-file", str(log), "--resume-timeout", "120", "--suspend-time", "5", *sim, env=env)
    assert done.returncode == 0, done.stderr
    fragment = (out / "azgpu.conf").read_text()
    assert "NodeName=demo-d000-[0001-0008] State=CLOUD" in fragment

    # --- munge
    munge = root / "munge"
    munge.mkdir(mode=0o700)
    key = munge / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o400)
    sock = munge / "sock"
    daemons.start(netns.prefix() + [_sbin("munged"), "-F", "--force", f"--key-file={key}", f"--socket={sock}",
                   f"--pid-file={munge}/pid", f"--log-file={munge}/log", f"--seed-file={munge}/seed"], dict(os.environ),
                  root / "munged.out")
    _wait("munged's socket", sock.exists, 15)

    # --- slurm.conf: the test's own settings, then the generated fragment (slurmd ports added)
    conf = root / "etc"
    for directory in (conf, root / "spool", root / "state"):
        directory.mkdir()
    base = 21000  # the namespace's loopback is the test's own: every port is free
    host = socket.gethostname().split(".")[0]
    devices = root / "dev"
    devices.mkdir()
    for i in range(8):  # slurmd checks that gres.conf's files exist; these stand in for /dev/nvidia*
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
        "TopologyPlugin=topology/tree",
        # The nodes here are slurmds on this host: their CPUs and memory are not an H100 VM's.
        "SlurmdParameters=config_overrides", "SlurmctldParameters=cloud_reg_addrs",
        *lines, ""]))
    senv = {**os.environ, "SLURM_CONF": str(conf / "slurm.conf")}

    def slurm_cmd(*argv: str) -> str:
        done = subprocess.run(netns.prefix() + list(argv), env=senv, capture_output=True, text=True, timeout=30)
        assert done.returncode == 0, f"{argv}: {done.stderr}"
        return done.stdout

    def details() -> str:
        tail = (root / "slurmctld.log").read_text()[-3000:] if (root / "slurmctld.log").exists() else ""
        shown = subprocess.run(netns.prefix() + ["scontrol", "show", "node", "-o"], env=senv, capture_output=True, text=True).stdout
        slurmd = "".join(f"{p.name}:\n" + "\n".join(p.read_text().splitlines()[-6:]) + "\n"
                         for p in sorted(root.glob("slurmd-*")))
        return (f"power.log:\n{log.read_text() if log.exists() else ''}\nnodes:\n{shown}\n"
                f"slurmctld.log tail:\n{tail}\n{slurmd}")

    daemons.start(netns.prefix() + [_sbin("slurmctld"), "-D", "-c", "-i"], senv, root / "slurmctld.out")
    _wait("slurmctld", lambda: subprocess.run(netns.prefix() + ["scontrol", "ping"], env=senv, capture_output=True, text=True,
                                             timeout=10).stdout.count("UP"), 30, details=details)

    job = slurm_cmd("sbatch", "--parsable", "-N4", "-p", "demo-vmss000", "--wrap", "hostname").strip()

    def addresses() -> dict[str, str]:
        out = slurm_cmd("scontrol", "show", "node", "-o")
        found = {}
        for line in out.splitlines():
            fields = dict(f.split("=", 1) for f in line.split() if "=" in f)
            found[fields["NodeName"]] = (fields.get("NodeAddr"), fields.get("NodeHostName"))
        return found

    def resumed() -> dict[str, tuple[str, str]] | None:
        up = {n: a for n, a in addresses().items() if a[0] and a[0].startswith("10.")}
        return up if len(up) == 4 else None

    up = _wait("four node addresses in slurmctld", resumed, 60, details=details)
    text = log.read_text()
    requested = [line for line in text.splitlines() if "requested" in line]
    assert len(requested) == 1 and "resume demo-d000-[0001-0004]: requested 4 node(s) in demo-vmss000" in requested[0]
    assert "growing demo-vmss000 from 0 to 4 instance(s)" in text
    assert "health check of 4 node(s) of demo-vmss000" in text
    assert text.count("passed the health check; address given to slurmctld") == 4
    # The addresses slurmctld holds are the VMs' own, one VM per node.
    vms = nodes(state)
    assert len(vms) == 4
    assert sorted((ip, hostname) for ip, hostname in up.values()) == sorted((ip, h) for h, ip in vms.items())
    assert [s["capacity"] for s in status(state)["scale_sets"]] == [4]

    # The VMs boot: one slurmd per node registers (from the loopback).
    for name in sorted(up):
        daemons.start(netns.prefix() + [_sbin("slurmd"), "-D", "-b", "-N", name], senv, root / f"slurmd-{name}.out")

    def finished() -> bool:
        out = slurm_cmd("scontrol", "show", "job", job, "-o")
        return "JobState=COMPLETED" in out

    _wait(f"job {job} to complete", finished, DEADLINE, details=details)
    _wait("the suspend program to delete the VMs", lambda: "suspend" in log.read_text() and not instances(state),
          DEADLINE, details=details)
    text = log.read_text()
    assert "suspend demo-d000-[0001-0004]: deleting 4 instance(s) of demo-vmss000" in text
    assert [s["capacity"] for s in status(state)["scale_sets"]] == [0]
    assert status(state, "other") == other_before
    shown = provision("simulate", "show", "--simulate-state", str(state), "-o", "json")
    assert json.loads(shown.stdout)["resource_groups"] == ["demo-rg", "other-rg"]
    map_file = json.loads((root / "map" / "demo.json").read_text())
    assert map_file["nodes"] == {}
