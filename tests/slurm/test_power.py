"""`provision slurm resume|suspend|resume-fail` in-process against one FakeAzure (so its request log
can be read), with an scontrol that records its calls and answers `show node` with output a real
slurmctld printed (tests/fixtures/slurm/show-node, with how each was captured): what reaches
slurmctld, what changes in Azure, and that the binding between names and VMs survives the
controller's state directory."""

from __future__ import annotations

import json
import shutil
from contextlib import contextmanager
from pathlib import Path

import pytest
from slurm_support import cluster_file

from azgpu import resource_types as rt
from azgpu.deploy.session import Session
from azgpu.testing import FakeAzure, FakeCredential

SHOW = Path(__file__).resolve().parents[1] / "fixtures" / "slurm" / "show-node"
VMSS = rt.VMSS.type
VM = rt.INSTANCES.type
BINDING = rt.INSTANCE_RUN_COMMAND.type
# What Debian 12's scontrol 22.05 printed when slurmctld did not answer (seen in the real-slurmctld runs).
NO_ANSWER = "slurm_update error: Socket timed out on send/recv operation"
GB300_FAMILY = "standardNDISRGB300V6Family"


class Scontrol:
    """An scontrol that records its arguments (one call a line) and answers `show node` with a recorded
    real output; updates can be made to fail as slurmctld's scontrol fails when it gets no answer."""

    def __init__(self, directory: Path):
        self.dir = directory
        self.log = directory / "scontrol.calls"
        self.script = directory / "scontrol"
        self.show_file = directory / "show.txt"
        self.fail_file = directory / "fail"
        self.script.write_text(
            "#!/bin/sh\n"
            f"printf '%s\\n' \"$*\" >> '{self.log}'\n"
            f"n=$(cat '{self.fail_file}' 2>/dev/null)\n"
            f"if [ \"$n\" = all ] || [ \"${{n:-0}}\" -gt 0 ] 2>/dev/null; then\n"
            f"  [ \"$n\" = all ] || echo $((n - 1)) > '{self.fail_file}'\n"
            f"  echo '{NO_ANSWER}' >&2; exit 1\nfi\n"
            f"[ \"$1\" = show ] && [ -f '{self.show_file}' ] && cat '{self.show_file}'\n"
            "exit 0\n")
        self.script.chmod(0o755)
        self.shows("powered-down.txt")

    def shows(self, recorded: str) -> None:
        shutil.copy(SHOW / recorded, self.show_file)

    def fail(self, times: int | str) -> None:
        """The next `times` calls fail ('all': every call); 0 ends it."""
        self.fail_file.write_text("" if times == 0 else str(times))

    def calls(self) -> list[str]:
        return self.log.read_text().splitlines() if self.log.exists() else []

    def updates(self) -> list[str]:
        return [c for c in self.calls() if c.startswith("update ")]


@pytest.fixture
def azure():
    with FakeAzure() as fake:
        yield fake


@pytest.fixture
def session(azure) -> Session:
    return Session(azure.subscription_id, FakeCredential(), polling_interval=0, sleep=azure.sleep,
                   requests_session=azure.requests_session, clock=azure.now)


class Slurm:
    def __init__(self, run, azure, directory: Path, *, nodes: int = 8, profile: str = "nd-h100-v5", extra: str = ""):
        self._run, self.azure, self.dir = run, azure, directory
        self.scontrol = Scontrol(directory)
        self.file = cluster_file(directory, nodes=nodes, profile=profile, extra=extra)
        self.state_dir = directory / "map"
        self.log = directory / "power.log"

    def __call__(self, command: str, hostlist: str, *extra, state_dir: Path | None = None):
        return self._run("slurm", command, "-f", self.file, "--state-dir", state_dir or self.state_dir,
                         "--log-file", self.log, "--scontrol", self.scontrol.script, *extra, hostlist)

    def text(self) -> str:
        return self.log.read_text() if self.log.exists() else ""

    def vms(self) -> dict[str, str]:
        """Instance id -> computer name of the cluster's VMs."""
        return {vm["instanceId"]: vm["properties"]["osProfile"]["computerName"]
                for vm in self.azure.resources(type=VM, resource_group="demo-rg")}

    def bindings(self) -> dict[str, str]:
        """Instance id -> the node name Azure keeps on it (the binding Run Command's tag)."""
        return {r["id"].split("/virtualMachines/")[1].split("/")[0]: r["tags"]["azgpu-slurm-node"]
                for r in self.azure.resources(type=BINDING, resource_group="demo-rg")}

    def capacity(self) -> list[int]:
        return [v["sku"]["capacity"] for v in self.azure.resources(type=VMSS, resource_group="demo-rg")]

    def cache(self, state_dir: Path | None = None) -> dict:
        return json.loads(((state_dir or self.state_dir) / "demo.json").read_text())


@pytest.fixture
def slurm(run, session, azure, monkeypatch, tmp_path):
    from azgpu.cli import options
    from azgpu.slurm import power

    @contextmanager
    def bound(*args, **kwargs):
        yield session

    monkeypatch.setattr(options, "session_for", bound)
    monkeypatch.setattr(power, "SCONTROL_WAITS", (0.0, 0.0), raising=False)
    return Slurm(run, azure, tmp_path)


def _fields(line: str) -> dict[str, str]:
    return dict(f.split("=", 1) for f in line.split()[1:] if "=" in f)


def test_resume_binds_names_in_azure_gives_addresses_and_converges(slurm):
    rc, out, err = slurm("resume", "demo-d000-[0001-0004]")
    assert rc == 0, err
    assert json.loads(out) == {"resumed": [f"demo-d000-000{i}" for i in range(1, 5)], "failed": []}
    updates = slurm.scontrol.updates()
    assert len(updates) == 4
    vms = slurm.vms()
    bound = slurm.bindings()
    for line in updates:
        fields = _fields(line)
        instance = next(i for i, host in vms.items() if host == fields["nodehostname"])
        assert bound[instance] == fields["nodename"]  # recorded on the VM before slurmctld heard of it
    # The same names again (slurmctld restarted): nothing created, the addresses given again.
    rc, out, err = slurm("resume", "demo-d000-[0003-0004]")
    assert rc == 0, err
    assert len(slurm.vms()) == 4
    assert slurm.scontrol.updates()[4:] == updates[2:]


def test_suspend_deletes_exactly_the_named_nodes(slurm):
    assert slurm("resume", "demo-d000-[0001-0004]")[0] == 0
    before = slurm.bindings()
    rc, out, err = slurm("suspend", "demo-d000-[0002,0004,0007]")
    assert rc == 0, err
    assert json.loads(out) == {"removed": ["demo-d000-0002", "demo-d000-0004"], "without_vm": ["demo-d000-0007"]}
    assert slurm.bindings() == {i: n for i, n in before.items() if n in ("demo-d000-0001", "demo-d000-0003")}
    assert sorted(slurm.vms()) == sorted(slurm.bindings())
    assert sorted(slurm.cache()["nodes"]) == ["demo-d000-0001", "demo-d000-0003"]


def test_unknown_names_are_refused_before_anything_runs(slurm, azure):
    rc, out, err = slurm("resume", "demo-d000-[0008-0009]")
    assert rc == 2
    assert "ERROR: [UNKNOWN_SLURM_NODE] 1 node name(s) are not CLOUD nodes of this cluster: demo-d000-0009" in err
    assert slurm.scontrol.calls() == [] and azure.requests == []
    assert "ERROR: [UNKNOWN_SLURM_NODE]" in slurm.text()


def test_the_final_error_reaches_the_log_in_its_line_format(slurm):
    rc, out, err = slurm("suspend", "demo-d000-[0001")
    assert rc == 2
    lines = slurm.text().splitlines()
    assert len(lines) == 2
    for line, what in zip(lines, ("ERROR: [INVALID_HOSTLIST]", "remedy: pass node names"), strict=True):
        stamp, rest = line.split(" ", 1)
        assert stamp[:4].isdigit() and "T" in stamp
        assert rest.startswith("azgpu-slurm[") and "] suspend demo-d000-[0001: " + what in rest


@pytest.mark.parametrize("hostlist", ["x[0-99999][0-99999]", "demo-d000-[０００１-０００２]", "a[1-3"])
def test_hostlists_are_bounded_per_expression_and_ascii(slurm, azure, hostlist):
    rc, out, err = slurm("resume", hostlist)
    assert rc == 2 and "[INVALID_HOSTLIST]" in err
    assert slurm.scontrol.calls() == [] and azure.requests == []


def test_failing_node_is_replaced_before_its_name_gets_an_address(slurm, azure):
    azure.unhealthy_next(1, gpus=7)
    rc, out, err = slurm("resume", "demo-d000-[0001-0002]")
    assert rc == 0, err
    text = slurm.text()
    assert "demo-000-000000 (instance 0) did not pass" in text
    assert "deleting 1 instance(s) of demo-vmss000 (they failed the health check): 0=demo-000-000000" in text
    hosts = {_fields(line)["nodehostname"] for line in slurm.scontrol.updates()}
    assert "demo-000-000000" not in hosts and len(hosts) == 2
    assert sorted(slurm.vms()) == ["1", "2"]


def test_a_finding_every_new_node_shares_stops_the_round(slurm, azure):
    azure.unhealthy_next(2, gpus=7)  # both new nodes fail alike: the image or driver, not the hosts
    rc, out, err = slurm("resume", "demo-d000-[0001-0002]")
    assert rc == 1
    text = slurm.text()
    assert "failed the health check" not in text and text.count("growing") == 1
    (down,) = [c for c in slurm.scontrol.updates() if "state=DOWN" in c]
    assert down.startswith("update nodename=demo-d000-[0001-0002] state=DOWN reason=azgpu COMMON_FINDING: every node")
    assert "remedy: fix the image" in down
    assert sorted(slurm.vms()) == ["0", "1"]  # left for inspection, each carrying its name (resume-fail frees them)
    assert {n: e["status"] for n, e in slurm.cache()["nodes"].items()} == {
        "demo-d000-0001": "inspect", "demo-d000-0002": "inspect"}


def test_a_node_that_crashes_the_check_sets_the_names_down_with_the_reason(slurm, monkeypatch):
    from azgpu.deploy import health_gate

    def deep(*args, **kwargs):  # what a verdict nested 1,500 deep did to the parser before it was bounded
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(health_gate, "check", deep)
    rc, out, err = slurm("resume", "demo-d000-[0001-0002]")
    assert rc == 1
    assert json.loads(out)["failed"] == ["demo-d000-0001", "demo-d000-0002"]
    (down, power) = slurm.scontrol.updates()
    assert "state=DOWN reason=azgpu NODE_INPUT_INVALID" in down
    assert power == "update nodename=demo-d000-[0001-0002] state=POWER_DOWN"
    assert slurm.vms() == {}  # the VMs it grew carry no name: deleted at once


def test_capacity_error_moves_to_the_next_zone(slurm, azure, run):
    azure.set_capacity("eastus", "Standard_ND96isr_H100_v5", 2, zone="2")
    slurm.file = cluster_file(slurm.dir, nodes=8, extra='zone = "2"\n')
    rc, out, err = slurm("resume", "demo-d000-[0001-0004]", "--zone", "3")
    assert rc == 0, slurm.text()
    assert "trying eastus zone 3" in slurm.text()
    assert slurm.capacity() == [4]
    assert len(slurm.scontrol.updates()) == 4


def test_allocation_failed_puts_the_capacity_back_and_leaves_no_vm_without_a_name(slurm, azure):
    azure.set_capacity("eastus", "Standard_ND96isr_H100_v5", 2)
    assert slurm("resume", "demo-d000-[0001-0002]")[0] == 0
    rc, out, err = slurm("resume", "demo-d000-[0003-0006]")  # 4 more: Azure has room for none
    assert rc == 1
    text = slurm.text()
    assert "capacity 6 but 2 VM(s)" in text and "setting it to 2" in text
    assert slurm.capacity() == [2] and sorted(slurm.vms()) == sorted(slurm.bindings())
    down = [c for c in slurm.scontrol.updates() if "state=" in c]
    assert down[0].startswith("update nodename=demo-d000-[0003-0006] state=DOWN reason=azgpu ")
    assert "remedy:" in down[0]
    assert down[1] == "update nodename=demo-d000-[0003-0006] state=POWER_DOWN"  # no ResumeTimeout, no resume-fail
    # Azure finds room later: nothing is placed without a name, and the next resume grows only what it needs.
    azure.set_capacity("eastus", "Standard_ND96isr_H100_v5", None)
    assert slurm("resume", "demo-d000-0003")[0] == 0
    assert slurm.capacity() == [3] and sorted(slurm.vms()) == sorted(slurm.bindings())


def test_quota_ends_down_with_the_code_and_remedy_and_powered_down(slurm, azure):
    azure.set_quota("eastus", "standardNDSH100v5Family", limit=96)
    rc, out, err = slurm("resume", "demo-d000-[0001-0004]")
    assert rc == 1
    assert json.loads(out)["failed"] == [f"demo-d000-000{i}" for i in range(1, 5)]
    text = slurm.text()
    error = next(line for line in text.splitlines() if "ERROR: [" in line and "QUOTA" in line)
    assert "resume demo-d000-[0001-0004]: ERROR: [QUOTA_INSUFFICIENT]" in error
    down, power = slurm.scontrol.updates()
    assert down.startswith("update nodename=demo-d000-[0001-0004] state=DOWN reason=azgpu QUOTA_INSUFFICIENT: ")
    assert "; remedy: request an increase" in down
    assert power == "update nodename=demo-d000-[0001-0004] state=POWER_DOWN"
    assert slurm.vms() == {}
    assert slurm.cache()["failed"]["demo-d000-0001"]["reason"].startswith("azgpu QUOTA_INSUFFICIENT")


def test_resume_fail_restores_azgpus_reason_and_leaves_an_administrators_resume(slurm, azure):
    azure.set_quota("eastus", "standardNDSH100v5Family", limit=96)
    assert slurm("resume", "demo-d000-[0001-0002]")[0] == 1
    quota_reason = slurm.cache()["failed"]["demo-d000-0001"]["reason"]
    # slurmctld reached ResumeTimeout (had it not been powered down): both DOWN, "ResumeTimeout reached".
    slurm.scontrol.shows("after-resume-timeout.txt")
    before = len(slurm.scontrol.calls())
    rc, out, err = slurm("resume-fail", "demo-d000-[0001-0002]")
    assert rc == 0, err
    assert json.loads(out) == {"down": ["demo-d000-0001", "demo-d000-0002"], "left": [], "removed": [],
                               "without_vm": ["demo-d000-0001", "demo-d000-0002"]}
    (update,) = [c for c in slurm.scontrol.calls()[before:] if c.startswith("update")]
    assert update == f"update nodename=demo-d000-[0001-0002] state=DOWN reason={quota_reason}"
    # An administrator returned 0001 (State=IDLE+...): resume-fail leaves it exactly as it is.
    slurm.scontrol.shows("resumed-after-timeout.txt")
    before = len(slurm.scontrol.calls())
    rc, out, err = slurm("resume-fail", "demo-d000-[0001-0002]")
    assert rc == 0, err
    assert json.loads(out)["left"] == ["demo-d000-0001"]
    (update,) = [c for c in slurm.scontrol.calls()[before:] if c.startswith("update")]
    assert update.startswith("update nodename=demo-d000-0002 state=DOWN reason=azgpu ")
    assert "not DOWN any more" in slurm.text()


def test_resume_fail_checks_the_names_before_telling_slurmctld_anything(slurm, azure):
    rc, out, err = slurm("resume-fail", "demo-d000-[0001-0002],root")
    assert rc == 2 and "[UNKNOWN_SLURM_NODE]" in err
    assert slurm.scontrol.calls() == [] and azure.requests == []


def test_resume_fail_frees_the_vms_of_down_nodes(slurm):
    assert slurm("resume", "demo-d000-[0001-0002]")[0] == 0
    slurm.scontrol.shows("after-resume-timeout.txt")
    rc, out, err = slurm("resume-fail", "demo-d000-0002")
    assert rc == 0, err
    assert json.loads(out)["removed"] == ["demo-d000-0002"]
    assert list(slurm.bindings().values()) == ["demo-d000-0001"]
    down = [c for c in slurm.scontrol.updates() if "state=DOWN" in c]
    assert down == ["update nodename=demo-d000-0002 state=DOWN reason=azgpu AZGPU_NOT_REGISTERED: the node did not "
                    "register with slurmctld within ResumeTimeout; remedy: see the power log, then 'scontrol update "
                    "nodename=... state=resume'"]


def test_two_concurrent_resumes_of_one_domain_create_the_nodes_once(slurm, tmp_path):
    import subprocess
    import sys

    state = tmp_path / "sim.json"
    argv = [sys.executable, "-m", "azgpu.cli", "slurm", "resume", "-f", str(slurm.file), "--state-dir",
            str(slurm.state_dir), "--log-file", str(slurm.log), "--scontrol", str(slurm.scontrol.script),
            "--simulate", "--simulate-state", str(state), "--simulate-latency", "1"]
    procs = [subprocess.Popen([*argv, "demo-d000-[0001-0004]"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for _ in range(2)]
    results = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [r[1] for r in results]
    text = slurm.text()
    assert text.count("growing demo-vmss000") == 1
    assert text.count("already up on") == 4


# ------------------------------------------------------------------------------------ the binding survives


def test_losing_the_state_directory_deletes_nothing_and_finds_the_vms_again(slurm):
    assert slurm("resume", "demo-d000-[0001-0004]")[0] == 0
    first = slurm.bindings()
    shutil.rmtree(slurm.state_dir)
    rc, out, err = slurm("resume", "demo-d000-[0005-0006]")
    assert rc == 0, err
    assert sorted(slurm.vms()) == ["0", "1", "2", "3", "4", "5"]  # two new VMs: none of the four taken, none deleted
    bound = slurm.bindings()
    assert {i: n for i, n in bound.items() if i in first} == first and len(bound) == 6
    shutil.rmtree(slurm.state_dir)
    rc, out, err = slurm("suspend", "demo-d000-[0001-0004]")
    assert rc == 0, err
    assert json.loads(out)["removed"] == [f"demo-d000-000{i}" for i in range(1, 5)]
    assert sorted(slurm.bindings().values()) == ["demo-d000-0005", "demo-d000-0006"]


def test_a_run_from_another_state_directory_sees_the_first_ones_nodes(slurm):
    other = slurm.dir / "elsewhere"
    assert slurm("resume", "demo-d000-[0001-0002]")[0] == 0
    assert slurm("resume", "demo-d000-[0003-0004]", state_dir=other)[0] == 0
    assert len(slurm.vms()) == 4 and len(set(slurm.bindings().values())) == 4
    rc, out, err = slurm("resume", "demo-d000-0002", state_dir=other)  # up already: found in Azure
    assert rc == 0, err
    assert "demo-d000-0002: already up on" in slurm.text() and len(slurm.vms()) == 4
    rc, out, err = slurm("suspend", "demo-d000-0001", state_dir=other)
    assert rc == 0, err
    assert json.loads(out)["removed"] == ["demo-d000-0001"]
    assert sorted(slurm.bindings().values()) == ["demo-d000-0002", "demo-d000-0003", "demo-d000-0004"]


def test_slurmctlds_addresses_recover_a_binding_azure_lost(slurm, session):
    assert slurm("resume", "demo-d000-[0001-0004]")[0] == 0
    for instance in ("0", "1", "2", "3"):  # as if recorded before Azure kept bindings
        rt.INSTANCE_RUN_COMMAND.begin_delete(session, "demo-rg", "demo-vmss000", instance, "azgpu-slurm-node").result()
    shutil.rmtree(slurm.state_dir)
    slurm.scontrol.shows("powering-up-with-addresses.txt")  # slurmctld holds 10.0.0.4-7 for 0001-0004
    rc, out, err = slurm("resume", "demo-d000-[0005-0006]")
    assert rc == 0, err
    assert "slurmctld holds 10.0.0.4, instance 0 of demo-vmss000" in slurm.text()
    assert {slurm.bindings()[i] for i in "0123"} == {f"demo-d000-000{i}" for i in range(1, 5)}
    assert len(slurm.vms()) == 6


def test_a_vm_slurmctld_gives_to_another_name_is_never_deleted(slurm, session):
    assert slurm("resume", "demo-d000-[0001-0002]")[0] == 0
    # Azure says instance 0 carries demo-d000-0005 (a stale or foreign record), slurmctld gives its address to 0001.
    rt.INSTANCE_RUN_COMMAND.begin_put(session, "demo-rg", "demo-vmss000", "0", "azgpu-slurm-node", {
        "location": "eastus", "tags": {"azgpu-slurm-node": "demo-d000-0005", "azgpu-cluster": "demo"},
        "properties": {"source": {"script": "exit 0"}}}).result()
    shutil.rmtree(slurm.state_dir)
    slurm.scontrol.shows("powering-up-with-addresses.txt")
    rc, out, err = slurm("suspend", "demo-d000-0005")
    assert rc == 0, err
    assert "0" in slurm.vms() and "neither deleted nor given to another name" in slurm.text()


def test_vms_without_a_name_after_a_crash_are_taken_or_deleted(slurm, run):
    # A resume that died after its create: two VMs that carry no name.
    rc, out, err = run("create", "-f", slurm.file, "--nodes", "2", "-o", "none")
    assert rc == 0, err
    assert slurm.bindings() == {} and len(slurm.vms()) == 2
    rc, out, err = slurm("resume", "demo-d000-0001")
    assert rc == 0, err
    assert "growing" not in slurm.text()
    assert slurm.bindings() == {"0": "demo-d000-0001"}
    assert sorted(slurm.vms()) == ["0"]  # the other went: no name needed it
    assert "deleting 1 instance(s) of demo-vmss000 (they carry no Slurm name): 1=demo-000-000001" in slurm.text()


def test_slurmctld_not_answering_leaves_named_vms_that_resume_fail_frees(slurm):
    slurm.scontrol.fail("all")
    rc, out, err = slurm("resume", "demo-d000-[0001-0002]")
    assert rc == 1
    text = slurm.text()
    assert "slurmctld did not take its address" in text and "could not set demo-d000-[0001-0002] DOWN" in text
    assert sorted(slurm.bindings().values()) == ["demo-d000-0001", "demo-d000-0002"]  # no VM without a name
    assert all(c.startswith(("update", "show")) for c in slurm.scontrol.calls())
    # slurmctld answers again and reaches ResumeTimeout: resume-fail gives azgpu's reason and frees the VMs.
    slurm.scontrol.fail(0)
    slurm.scontrol.shows("after-resume-timeout.txt")
    rc, out, err = slurm("resume-fail", "demo-d000-[0001-0002]")
    assert rc == 0, err
    (down,) = [c for c in slurm.scontrol.updates() if c.endswith("DOWN") or "state=DOWN" in c][-1:]
    assert "reason=azgpu SCONTROL_FAILED" in down
    assert slurm.vms() == {} and slurm.bindings() == {}


def test_a_transient_scontrol_failure_is_tried_again(slurm):
    slurm.scontrol.fail(1)  # the first call (show node) fails; later ones answer
    rc, out, err = slurm("resume", "demo-d000-0001")
    assert rc == 0, err
    slurm.scontrol.fail(2)
    rc, out, err = slurm("resume", "demo-d000-0001")  # the address given again: two failures, then it takes
    assert rc == 0, err
    assert slurm.scontrol.updates()[-3:] == [slurm.scontrol.updates()[-1]] * 3


def test_vms_left_for_inspection_are_not_picked_first(slurm, azure):
    azure.unhealthy_next(1, run_command="timeout")
    rc, out, err = slurm("resume", "demo-d000-0001", "--node-timeout", "120")
    assert rc == 1
    assert "left for inspection in demo-vmss000: instance(s) 0" in slurm.text()
    assert slurm.cache()["nodes"]["demo-d000-0001"]["status"] == "inspect"
    down = [c for c in slurm.scontrol.updates() if "state=" in c]
    assert down == [down[0]] and "NODES_UNREACHABLE" in down[0]  # not powered down: resume-fail may --keep it
    rc, out, err = slurm("resume", "demo-d000-0001", "--node-timeout", "120")  # the administrator resumed it
    assert rc == 0, err
    text = slurm.text().split("requested 1 node(s)")[-1]
    assert "health check of 1 node(s)" in text and "demo-000-000000" not in text.split("health check")[1]
    assert slurm.bindings() == {"1": "demo-d000-0001"} and sorted(slurm.vms()) == ["1"]


# ------------------------------------------------------------------------------------ files the programs read


def test_malformed_state_file_and_symlinked_lock_give_coded_errors(slurm, tmp_path):
    slurm.state_dir.mkdir()
    (slurm.state_dir / "demo.json").write_text('{"nodes": {"demo-d000-0001": {"scale_set": 3}}}')
    rc, out, err = slurm("suspend", "demo-d000-0001")
    assert rc == 2 and "[SLURM_STATE_INVALID]" in err and "Traceback" not in err
    (slurm.state_dir / "demo.json").write_text("[" * 5000 + "]" * 5000)
    rc, out, err = slurm("suspend", "demo-d000-0001")
    assert rc == 2 and "[SLURM_STATE_INVALID]" in err
    (slurm.state_dir / "demo.json").unlink()
    (slurm.state_dir / "demo.lock").unlink(missing_ok=True)
    target = tmp_path / "elsewhere"
    (slurm.state_dir / "demo.lock").symlink_to(target)
    rc, out, err = slurm("suspend", "demo-d000-0001")
    assert rc == 2 and "[SLURM_STATE_LINK]" in err
    assert not target.exists()  # never followed


def test_symlinked_state_file_is_not_followed(slurm, tmp_path):
    slurm.state_dir.mkdir()
    secret = tmp_path / "secret.json"
    secret.write_text('{"nodes": {}}')
    (slurm.state_dir / "demo.json").symlink_to(secret)
    rc, out, err = slurm("suspend", "demo-d000-0001")
    assert rc == 2 and "[SLURM_STATE_LINK]" in err


@pytest.mark.parametrize("kind", ["fifo", "directory"])
def test_a_state_file_swapped_for_no_file_after_the_link_check_is_refused_without_waiting(tmp_path, kind,
                                                                                         monkeypatch):
    """The lstat check refuses a FIFO that is there first; one put in place between that check and the open
    blocked the program (open without O_NONBLOCK) until slurmctld's timeout."""
    import os
    import threading

    from azgpu.errors import InputError
    from azgpu.slurm import state

    (tmp_path / "state").mkdir(mode=0o700)
    path = tmp_path / "state" / "demo.json"
    os.mkfifo(path) if kind == "fifo" else path.mkdir()
    monkeypatch.setattr(state, "_refuse_link", lambda path, what: None)  # the swap lands after the check
    outcome: list = []

    def load():
        try:
            state.load(str(tmp_path / "state"), "demo")
        except InputError as exc:
            outcome.append(exc.code)

    worker = threading.Thread(target=load, daemon=True)
    worker.start()
    worker.join(10)
    assert not worker.is_alive() and outcome == ["SLURM_STATE_INVALID"]


def test_a_missing_or_symlinked_log_is_a_coded_error(slurm, tmp_path):
    slurm.log = tmp_path / "no-such-dir" / "power.log"
    rc, out, err = slurm("suspend", "demo-d000-0001")
    assert rc == 2 and "[SLURM_LOG_FILE]" in err and "its directory does not exist" in err
    target = tmp_path / "target.log"
    slurm.log = tmp_path / "link.log"
    slurm.log.symlink_to(target)
    rc, out, err = slurm("suspend", "demo-d000-0001")
    assert rc == 2 and "[SLURM_LOG_FILE]" in err and "symbolic link" in err
    assert not target.exists()


# ------------------------------------------------------------------------------------ whole racks


@pytest.fixture
def racks(slurm, azure, monkeypatch):
    monkeypatch.delenv("AZGPU_PRICES", raising=False)  # the log prices a waiting rack: the fake's Retail Prices API
    azure.set_quota("eastus", GB300_FAMILY, limit=36 * 128)
    azure.set_quota("eastus", "cores", limit=36 * 128)
    slurm.file = cluster_file(slurm.dir, nodes=36, profile="nd-gb300-v6")
    return slurm


def _deletes(azure) -> list:
    """Every request that deletes instances: DeleteInstances (POST .../delete) or DELETE of one VM."""
    def one_vm(path: str) -> bool:
        return "/virtualmachines/" in path and "/runcommands/" not in path

    return [r for r in azure.requests if (r.method == "POST" and r.path.lower().endswith("/delete"))
            or (r.method == "DELETE" and one_vm(r.path.lower()))]


def test_a_two_rack_gb300_cluster_grows_binds_and_frees_whole_racks(racks, azure):
    rc, out, err = racks("resume", "demo-d000-[0001-0004]")
    assert rc == 0, racks.text()
    assert "growing demo-vmss000 from 0 to 18 instance(s)" in racks.text() and len(racks.vms()) == 18
    rc, out, err = racks("resume", "demo-d000-[0005-0008]")
    assert rc == 0, racks.text()
    assert racks.text().count("growing") == 1 and len(racks.vms()) == 18  # waiting VMs of that rack
    rc, out, err = racks("suspend", "demo-d000-[0001-0004]")
    assert rc == 0, err
    assert len(racks.vms()) == 18 and _deletes(azure) == []  # nothing deleted while 0005-0008 run
    assert json.loads(out) == {"removed": [], "without_vm": [], "waiting": [f"demo-d000-000{i}" for i in range(1, 5)]}
    assert sorted(racks.bindings().values()) == [f"demo-d000-000{i}" for i in range(5, 9)]  # 14 wait unnamed
    kept = next(line for line in racks.text().splitlines() if "keeps its 18 VM(s)" in line)
    # what they cost, from azgpu's pricing: the fake's recorded Retail Prices have no GB300 row, so "not known"
    assert "demo-d000-[0005-0008] still use it; their price is not known (the Azure Retail Prices API" in kept
    rc, out, err = racks("suspend", "demo-d000-[0005-0008]")
    assert rc == 0, err
    assert json.loads(out)["removed"] == [f"demo-d000-000{i}" for i in range(5, 9)]
    assert racks.vms() == {} and racks.capacity() == [0]
    (delete,) = _deletes(azure)  # the whole rack in one request, never a single instance
    assert delete.method == "POST" and sorted(delete.body["instanceIds"], key=int) == [str(i) for i in range(18)]


def test_names_of_another_block_take_another_rack(racks):
    assert racks("resume", "demo-d000-0001")[0] == 0
    rc, out, err = racks("resume", "demo-d000-0019")  # the second block of 18 names
    assert rc == 0, racks.text()
    assert "growing demo-vmss000 from 18 to 36 instance(s)" in racks.text()
    first, second = (int(i) for i, n in sorted(racks.bindings().items()) if n in ("demo-d000-0001", "demo-d000-0019"))
    assert first < 18 <= second


def test_the_fake_refuses_a_delete_that_leaves_a_rack_partial(racks, session, azure):
    from azgpu.deploy import delete_instances
    from azgpu.errors import InputError

    assert racks("resume", "demo-d000-0001")[0] == 0
    before = len(azure.requests)
    with pytest.raises(InputError, match="NOT_WHOLE_RACKS|not a whole number of racks"):
        delete_instances(session, "demo-rg", "demo-vmss000", ["3"])
    assert azure.requests[before:][-1].method == "GET"  # refused by azgpu before anything was sent
    from azure.core.exceptions import HttpResponseError

    with pytest.raises(HttpResponseError, match="Capacity must be a multiple of 18"):
        rt.VMSS.begin_delete_instances(session, "demo-rg", "demo-vmss000", ["3"]).result()
    assert len(racks.vms()) == 18


def test_a_waiting_rack_is_priced_from_azgpus_pricing():
    from types import SimpleNamespace

    from azgpu.pricing import Price
    from azgpu.slurm.names import Domain
    from azgpu.slurm.power import _Run, _Set

    asked = []

    def price(size, location):
        asked.append((size, location))
        return Price("known", 98.32, "USD", "pay-as-you-go")

    run = _Run.__new__(_Run)
    run.ctx = SimpleNamespace(price=price)
    s = _Set(Domain(0, "demo-vmss000", 36, ()), {"size": "Standard_ND128isr_GB300_v6", "location": "eastus"})
    assert run.cost(s, 18) == "; they cost 1769.76 USD/h (18 x Standard_ND128isr_GB300_v6)"
    assert asked == [("Standard_ND128isr_GB300_v6", "eastus")]


def test_a_vm_whose_nvlink_domain_is_not_its_racks_carries_no_name_of_the_rack(racks, azure):
    azure.short_rack_next()  # Azure reports instance 0 in the rack; its GPUs sit in an NVLink domain of their own
    rc, out, err = racks("resume", "demo-d000-[0001-0002]")
    assert rc == 0, racks.text()
    text = racks.text()
    assert "measure 2 NVLink domains: checking its other" in text
    assert "demo-000-000000 (instance 0) passed, but its NVLink domain" in text
    assert "0" not in racks.bindings() and len(racks.bindings()) == 2
    assert len(racks.vms()) == 18 and _deletes(azure) == []  # it waits in its rack, marked; nothing single deleted
    assert racks.cache()["inspect"]["demo-vmss000/0"]["reason"].startswith("did not pass the health check, or its")


@pytest.mark.parametrize("version", ["22.05", "24.11"])
def test_the_names_resume_binds_to_one_rack_are_one_block_of_topology_conf(racks, azure, version):
    # topology.conf (slurm config) must say what resume does: a job of up to 18 nodes that Slurm places in one
    # block (24.11, topology/block) or under one rack switch (22.05, topology/tree) runs in one NVLink rack only
    # when every name of that block is bound to a VM of one rack of Azure's (the fake's rack of each VM).
    from azgpu.slurm.names import expand

    rc, _, err = racks._run("slurm", "config", "-f", racks.file, "--out-dir", racks.dir / "conf", "--slurm-version",
                            version)
    assert rc == 0, err
    key = "BlockName=" if version == "24.11" else "SwitchName="
    lines = [line.split() for line in (racks.dir / "conf" / "topology.conf").read_text().splitlines()
             if line.startswith(key) and " Nodes=" in line]
    blocks = [set(expand(fields[1].removeprefix("Nodes="))) for fields in lines]
    assert [len(b) for b in blocks] == [18, 18]
    rc, _, _ = racks("resume", "demo-d000-[0001,0017-0020,0036]")  # names of both blocks, each block's edges
    assert rc == 0, racks.text()
    by_rack: dict[int, set[str]] = {}
    for instance, name in racks.bindings().items():
        by_rack.setdefault(azure.node(f"demo-vmss000/{instance}")["rack"]["number"], set()).add(name)
    assert len(by_rack) == 2, by_rack
    for names in by_rack.values():
        assert sum(1 for b in blocks if names <= b) == 1, (names, blocks)


def test_free_text_after_the_fields_is_not_read_as_the_nodes_state(slurm):
    """slurm_sprint_node_table (SchedMD/slurm src/api/node_info.c) prints Comment= and Extra= (Extra can be set
    by the node's own `slurmd --extra`) after every structured field: text there that reads like fields is text.
    Two running nodes whose Extra says "State=DOWN" are no DOWN nodes for resume-fail: nothing deleted."""
    assert slurm("resume", "demo-d000-[0001-0002]")[0] == 0
    vms = slurm.vms()
    lines = (SHOW / "registered.txt").read_text().splitlines()[:2]
    slurm.scontrol.show_file.write_text(
        lines[0] + " Comment=moved State=DOWN+CLOUD NodeAddr=demo-d000-0001\n"
        + lines[1] + ' Extra={"note":"x State=DOWN+CLOUD+POWERED_DOWN Reason=gone"}\n')
    before = len(slurm.scontrol.calls())
    rc, out, err = slurm("resume-fail", "demo-d000-[0001-0002]")
    assert rc == 0, err
    assert json.loads(out)["down"] == [] and json.loads(out)["left"] == ["demo-d000-0001", "demo-d000-0002"]
    assert slurm.vms() == vms
    assert not [c for c in slurm.scontrol.calls()[before:] if c.startswith("update")]
