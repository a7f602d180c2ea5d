"""A real slurmctld drives azgpu's power-saving programs, and the simulated VMs join by themselves.

On Slurm 22.05 (Debian 12, this host) and 24.11 (Debian 13, a root tools/slurm_test_root.py builds),
the controller and every simulated VM are machines of their own (tests/slurm/machines.py: their own
mount, network, UTS and PID namespaces, on a private Ethernet segment from which no packet leaves this
host). The test plays the user: `provision slurm config` on the controller, slurm.conf around the
fragment, munged and slurmctld. A job asks for four CLOUD nodes; slurmctld runs the resume program,
which creates the VMs in the simulated subscription, checks them, binds their names and sends azgpu's
node bootstrap as a managed Run Command; the fake hands it to the VM's machine, where it writes the
munge key and starts munged and slurmd with the node's name and the controller to fetch its
configuration from. The test never starts a slurmd nor names a node. `srun -N4 hostname` prints the
VMs' names; after SuspendTime the suspend program deletes exactly those VMs (their machines stop); a
second job does it all again.

It needs root and skips, saying why, without it, without Slurm 22.05 here, or without the 24.11 root.
"""

from __future__ import annotations

import base64
import json
import subprocess
import time

import pytest
from slurm_cluster import VERSIONS, Cluster, skip_reason, unavailable
from slurm_support import cluster_file, instances, status

pytestmark = [pytest.mark.slow, pytest.mark.real_slurm]

RESUME = 180  # seconds for a resume: create, health check, bootstrap, registration
SUSPEND_TIME = 20  # idle seconds before the suspend program: time to read the nodes' background verdicts


@pytest.fixture(params=VERSIONS)
def cluster(request, tmp_path_factory):
    reason = skip_reason(request.param)
    if reason:
        unavailable(reason)
    # munged's socket and the machines' paths stay short: a directory of its own under /tmp.
    found = Cluster(request.param, tmp_path_factory.mktemp("sl"))
    try:
        yield found
    finally:
        found.close()


PROBE = """
import errno, socket
for kind in (socket.SOCK_DGRAM, socket.SOCK_STREAM):
    s = socket.socket(socket.AF_INET, kind)
    s.settimeout(2)
    try:
        s.connect(("1.1.1.1", 53))
        print("connected")
    except OSError as exc:
        print(errno.errorcode.get(exc.errno, str(exc)))
    finally:
        s.close()
"""


def _configure(cluster: Cluster, cfile, *extra: str, suspend_time: int = SUSPEND_TIME) -> str:
    done = cluster.provision("slurm", "config", "-f", str(cfile), "--out-dir", "/etc/slurm", "--state-dir",
                             "/var/lib/azgpu-slurm", "--log-file", str(cluster.power_log), "--resume-timeout",
                             str(RESUME), "--suspend-time", str(suspend_time), "--suspend-timeout", "10",
                             "--conf-server", "10.255.255.254", "--simulate", "--simulate-state", str(cluster.state),
                             *extra)
    fragment = cluster.controller.path("/etc/slurm/azgpu.conf").read_text()
    assert f"Written for Slurm {cluster.version}" in fragment, done.stdout
    return fragment


def test_four_nodes_join_by_themselves_run_a_job_and_go_twice(cluster):
    started = time.monotonic()
    # No packet leaves this host: the controller reaches the machines' segment and nothing else.
    probe = cluster.controller.run(["python3", "-c", PROBE]).stdout.split()
    assert probe == ["ENETUNREACH", "ENETUNREACH"]
    assert sorted(cluster.network.interfaces()) == ["br0", "lo", "p1"]

    # Another cluster already in the subscription: nothing of it may change.
    other = cluster_file(cluster.work, nodes=2, name="other")
    assert cluster.provision("create", "-f", str(other), "--simulate", "--simulate-state", str(cluster.state),
                             "--simulate-latency", "0", "-o", "none").returncode == 0
    other_before = status(cluster.state, "other")

    cfile = cluster_file(cluster.work, nodes=8)
    fragment = _configure(cluster, cfile, "--health-check", "--health-check-interval", "3",
                          "--node-check-interval", "2")
    assert "NodeName=demo-d000-[0001-0008] State=CLOUD CPUs=96 Boards=1 SocketsPerBoard=2 CoresPerSocket=48" \
           " ThreadsPerCore=1" in fragment
    key = cluster.munge_key()
    cluster.slurm_conf(fragment)
    vms = cluster.attach_vms()
    cluster.start_controller()

    # Cycle 1: the job's nodes are resumed; each VM's slurmd was started by azgpu's bootstrap alone.
    first = cluster.slurm("srun", "-N4", "-p", "demo-vmss000", "hostname", timeout=RESUME + 60, check=False)
    assert first.returncode == 0, f"{first.stderr}\n{cluster.details()}"
    machines = {m.name: m for m in vms.machines.values()}
    assert sorted(first.stdout.split()) == sorted(machines) and len(machines) == 4
    names = [f"demo-d000-{i:04d}" for i in range(1, 5)]
    nodes = cluster.nodes()
    for name in names:  # registered under its name, from its VM's address, by the slurmd there
        vm = next(v for v in vms.vms.values() if v["computer_name"] == nodes[name]["NodeHostName"])
        assert nodes[name]["NodeAddr"] == vm["ip"] and nodes[name]["Version"].startswith(cluster.version), nodes[name]
        assert "POWER" not in nodes[name]["State"] and "IDLE" in nodes[name]["State"], nodes[name]
    assert all(n.get("Version", "N/A") == "N/A" for k, n in nodes.items() if k not in names)  # no other slurmd
    vm_logs = {}
    for machine in machines.values():
        assert {"slurmd", "munged"} <= set(machine.processes())
        assert machine.path("/etc/munge/munge.key").read_bytes() == key
        assert (machine.path("/etc/munge/munge.key").stat().st_mode & 0o777) == 0o400
        for where in ("/var/log/slurm", "/var/log/munge", "/var/lib/waagent"):  # its logs, the Run Command's output
            for path in machine.path(where).rglob("*"):
                if path.is_file():
                    vm_logs[f"{machine.name}:{path}"] = path.read_bytes()
    # Every VM ran two Run Commands: azgpu's binding (deploy/nodes.py: no parameters, nothing to run) and its
    # bootstrap, with the key a protected parameter.
    from azgpu.deploy.nodes import SCRIPT as BINDING_SCRIPT
    from azgpu.slurm.bootstrap import MARKER

    cluster.wait("the bindings' runs (asyncExecution: resume does not wait for them)", lambda: len(vms.runs) >= 8, 30)
    joins = [r for r in vms.runs if MARKER in r["script"]]
    assert len(joins) == 4 and all("AZGPU_MUNGE_KEY" in r["parameters"] and r["rc"] == 0 for r in joins)
    assert sorted(r["vm"] for r in vms.runs if r["script"] == BINDING_SCRIPT) == sorted(r["vm"] for r in joins)
    assert len(vms.runs) == 8 and all(r["parameters"] == [] for r in vms.runs if r not in joins)
    # slurmd registers while the bootstrap's Run Command is still being polled by resume, so the job can end
    # before resume has read the four answers and logged them.
    cluster.wait("resume to log the four joins", lambda: cluster.power_log.read_text().count(
        "joined the cluster (slurmd started by azgpu's bootstrap)") == 4, 60)
    # azgpu's node check ran in the background on each node (the VMs' simulated hardware is healthy): passed,
    # and Slurm's HealthCheckProgram, which reads it, drains nothing.
    cluster.wait("the nodes' first background verdicts", lambda: all(
        m.path("/var/lib/azgpu/node-check.json").exists() for m in machines.values()), SUSPEND_TIME / 2)
    for machine in machines.values():
        verdict = json.loads(machine.path("/var/lib/azgpu/node-check.json").read_text())
        assert verdict["status"] == "passed" and verdict["reason"] == "", verdict
    time.sleep(4)  # one more HealthCheckInterval
    assert not any("DRAIN" in n["State"] for n in cluster.nodes().values()), cluster.details()

    # After SuspendTime the suspend program deletes exactly those VMs; their machines stop.
    cluster.wait("the suspend program to delete the VMs", lambda: not instances(cluster.state), 120)
    assert "suspend demo-d000-[0001-0004]: deleting 4 instance(s) of demo-vmss000" in cluster.power_log.read_text()
    assert not vms.machines and not any(m.running() for m in machines.values())
    cluster.wait("the nodes to be powered down", lambda: all(
        "POWERED_DOWN" in cluster.nodes()[n]["State"] for n in names), 60)

    # Cycle 2: the same names come up again on new VMs.
    second = cluster.slurm("srun", "-N4", "-p", "demo-vmss000", "hostname", timeout=RESUME + 60, check=False)
    assert second.returncode == 0, f"{second.stderr}\n{cluster.details()}"
    again = {m.name for m in vms.machines.values()}
    assert sorted(second.stdout.split()) == sorted(again) and len(again) == 4
    assert len([r for r in vms.runs if MARKER in r["script"]]) == 8
    cluster.wait("the second suspend", lambda: not instances(cluster.state), 120)
    assert status(cluster.state, "other") == other_before

    # slurmctld took azgpu's lines without an error or a warning.
    problems = [line for line in cluster.slurmctld_log().splitlines() if "error:" in line or "warning:" in line]
    assert _about_azgpu(problems) == [], "\n".join(problems)

    # The munge key is in no template, parameters file, model, tag, log or output.
    for argv in (("render", "-f", str(cfile), "--out-dir", str(cluster.work / "render")),
                 ("status", "-n", "demo", "-g", "demo-rg", "--simulate", "--simulate-state", str(cluster.state),
                  "-o", "json"),
                 ("outputs", "-n", "demo", "-g", "demo-rg", "--simulate", "--simulate-state", str(cluster.state))):
        (cluster.work / f"out-{argv[0]}.txt").write_text(cluster.provision(*argv).stdout)
    _nowhere(cluster, key, vm_logs)
    print(f"\n{cluster.version}: {time.monotonic() - started:.0f} s")


# What azgpu's files set (a parse error names the key), its names, and slurmctld's words for a bad setting.
AZGPU_WORDS = ("ResumeProgram", "SuspendProgram", "ResumeFailProgram", "ResumeTimeout", "SuspendTime", "SuspendTimeout",
               "CommunicationParameters", "NoAddrCache", "TreeWidth", "PrivateData", "HealthCheck", "NodeName",
               "PartitionName", "Gres", "gres.conf", "Features", "topology", "Topology", "Block", "SwitchName",
               "SlurmctldParameters", "cloud_reg_addrs", "enable_configless", "azgpu", "demo-",
               "specified more than once", "defunct")


def _about_azgpu(lines: list[str]) -> list[str]:
    return [line for line in lines if any(word in line for word in AZGPU_WORDS)]


def _nowhere(cluster: Cluster, key: bytes, vm_logs: dict[str, bytes]) -> None:
    forms = [key, base64.b64encode(key)]
    places = {"simulated state": cluster.state.read_bytes(), "power log": cluster.power_log.read_bytes(), **vm_logs}
    for path in cluster.work.rglob("*"):
        if path.is_file() and path.suffix != ".sock" and "machines" not in path.parts:
            places[str(path)] = path.read_bytes()
    for name in ("azgpu.conf", "gres.conf", "topology.conf", "azgpu-demo-resume", "azgpu-demo-suspend",
                 "azgpu-demo-resume-fail", "slurm.conf"):
        places[name] = cluster.controller.path(f"/etc/slurm/{name}").read_bytes()
    places["slurmctld.log"] = cluster.slurmctld_log().encode()
    found = [where for where, data in places.items() for form in forms if form in data]
    assert found == [], f"the munge key is in {found}"


def test_an_18_node_job_lands_in_one_nvlink_rack(cluster):
    """GB300 racks (18 VMs each) as slurmctld reads azgpu's topology: an 18-node job fits a rack or waits, never
    straddles two. One node of the first rack is drained, so only the second rack can hold the job; slurmctld
    says where it would start it (sbatch --test-only) without powering anything up."""
    cfile = cluster_file(cluster.work, nodes=36, profile="nd-gb300-v6")
    fragment = _configure(cluster, cfile)
    cluster.munge_key()
    cluster.slurm_conf(fragment)
    cluster.start_controller()
    cluster.slurm("scontrol", "update", "nodename=demo-d000-0003", "state=drain", "reason=held back by the test")
    placed = cluster.slurm("sbatch", "--test-only", "-N18", "-p", "demo-vmss000", "--wrap", "true")
    assert "on nodes demo-d000-[0019-0036]" in placed.stderr, placed.stderr
    if cluster.version >= "23.11":  # topology/block: slurmctld knows the racks as blocks
        shown = cluster.slurm("scontrol", "show", "topology").stdout
        assert "BlockName=demo-vmss000-rack000" in shown and "Nodes=demo-d000-[0001-0018]" in shown, shown
        assert "BlockName=demo-vmss000-rack001" in shown and "Nodes=demo-d000-[0019-0036]" in shown, shown
    problems = [line for line in cluster.slurmctld_log().splitlines() if "error:" in line or "warning:" in line]
    assert _about_azgpu(problems) == [], "\n".join(problems)


def test_health_check_drains_a_failed_node_with_its_finding_and_never_an_inconclusive_one(cluster):
    """Under slurmd: the background node check's verdict is what HealthCheckProgram acts on. One node's hardware
    loses a GPU (the fake's model, which its check reads); another node's image lacks nvidia-smi and AzNHC, so its
    check can say nothing about the host (inconclusive)."""
    from azgpu.testing import FakeAzure

    cfile = cluster_file(cluster.work, nodes=4)
    fragment = _configure(cluster, cfile, "--health-check", "--health-check-interval", "2", "--node-check-interval",
                          "2", suspend_time=300)
    cluster.munge_key()
    cluster.slurm_conf(fragment)
    vms = cluster.attach_vms()
    cluster.start_controller()
    up = cluster.slurm("srun", "-N2", "-p", "demo-vmss000", "true", timeout=RESUME + 60, check=False)
    assert up.returncode == 0, f"{up.stderr}\n{cluster.details()}"
    by_host = {n["NodeHostName"]: name for name, n in cluster.nodes().items() if n.get("Version", "N/A") != "N/A"}
    broken, blind = sorted(vms.vms.values(), key=lambda v: v["computer_name"])
    fake = FakeAzure.load(cluster.state)
    fake.make_unhealthy(broken["id"], gpus=7)
    vms.change_hardware(broken["id"], fake.node(broken["id"]))
    vms.change_hardware(blind["id"], fake.node(blind["id"]), remove=("/opt/azurehpc", "nvidia-smi"))
    broken_name, blind_name = by_host[broken["computer_name"]], by_host[blind["computer_name"]]

    node = cluster.wait(f"{broken_name} to be drained", lambda: (lambda n: n if "DRAIN" in n["State"] else None)(
        cluster.nodes()[broken_name]), 90)
    finding = json.loads(_verdict(vms.machines[broken["id"].lower()]))["finding"]
    assert node["Reason"].startswith(f"azgpu {finding}"[:200]) and "gpu_count" in finding, (node["Reason"], finding)
    blind_machine = vms.machines[blind["id"].lower()]
    try:
        cluster.wait(f"{blind_name}'s inconclusive verdict", lambda: '"inconclusive"' in _verdict(blind_machine), 60)
    except AssertionError:
        raise AssertionError(_verdict(blind_machine)) from None
    time.sleep(5)  # two more HealthCheckIntervals
    assert "DRAIN" not in cluster.nodes()[blind_name]["State"], cluster.nodes()[blind_name]

    # The program as slurmd runs it (its whole environment is SLURMD_NODENAME): seconds, not slurm.conf(5)'s 60.
    machine = vms.machines[broken["id"].lower()]
    machine.path("/var/lib/azgpu/node-check.drained").unlink()
    started = time.monotonic()
    done = subprocess.run(machine.prefix() + ["/usr/local/sbin/azgpu-slurm-health-check"], env={
        "SLURMD_NODENAME": broken_name}, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and time.monotonic() - started < 10, (done.stderr, time.monotonic() - started)


def _verdict(machine) -> str:
    try:
        return machine.path("/var/lib/azgpu/node-check.json").read_text()
    except OSError:
        return ""
