"""Outcome classes through the whole gate and `provision report`, on the fake running the real node script:
only a node with a host fault is ever replaced or reported; AzNHC's watchdog, set-up faults (NHCNA), a
finding every node shares (one node too, when the image lacks the driver's tools) and a verdict that does
not validate are inconclusive; a node that does not answer is unreachable. Nothing else is deleted.

The AzNHC lines are in the formats of tests/fixtures/health/aznhc-die-lines.txt (AzNHC's die statements)
and LBNL NHC's watchdog (facts 14.2)."""

from __future__ import annotations

import json

import pytest
from deploy_support import NAME, RG, calls, request

from azgpu.deploy import CreateOptions, GateOptions, create, ghr
from azgpu.deploy import health_gate as health
from azgpu.deploy.interface import CheckOptions
from azgpu.deploy.lifecycle import live_cluster
from azgpu.health.outcome import UnhealthyNodes, unhealthy_error
from azgpu.testing import hardware
from azgpu.testing.models import vm_actions

WATCHDOG = 'Script timed out while executing "check_ib_bw_gdr 380".'
NHCNA = "-e check_cpu_stream: Failed to run because stream executable was not built. FaultCode: NHCNA"


@pytest.fixture
def aznhc_says(monkeypatch):
    """AzNHC's log on the named nodes holds these failure lines (the rest of the log as the fake writes it)."""
    lines: dict[str, list[str]] = {}
    real = hardware.aznhc_log
    monkeypatch.setattr(vm_actions, "REUSE_RUNS", False)  # the nodes differ by name only

    def log(node, vm_size):
        text, rc = real(node, vm_size)
        extra = lines.get(node["computer"])
        if extra is None:
            return text, rc
        body = "".join(f"ERROR:  nhc:  Health check failed:  {line}\n" for line in extra)
        return text.replace("Health checks completed", body + "Health checks completed"), 1

    monkeypatch.setattr(hardware, "aznhc_log", log)
    return lines


def node_says(monkeypatch, outputs: dict[str, str]):
    """The named nodes print exactly this (a hostile or broken node), the others run the real script."""
    real = vm_actions.execute
    monkeypatch.setattr(vm_actions, "REUSE_RUNS", False)  # the nodes differ by name only

    def execute(job):
        said = outputs.get(job["node"]["computer"])
        if said is not None and job["mode"] == "check":
            return said, "", job["node"]["files"]
        return real(job)

    monkeypatch.setattr(vm_actions, "execute", execute)


def by_name(report) -> dict:
    return {n["computer_name"]: n for n in report["nodes"]}


def test_the_watchdog_and_nhcna_only_are_inconclusive_and_only_the_host_fault_is_replaced(azure, session, aznhc_says):
    create(session, request("nd-a100-v4", nodes=4))
    aznhc_says["c1-000-000001"] = [WATCHDOG]
    aznhc_says["c1-000-000002"] = [NHCNA]
    azure.make_unhealthy("c1-vmss000/3", gpus=7)
    outcome = health.gate(session, live_cluster(session, NAME, RG), GateOptions(replace_unhealthy=True))
    nodes = {n.computer_name: n for n in outcome.report}
    assert nodes["c1-000-000001"].status == "inconclusive" and nodes["c1-000-000001"].reason_code == "watchdog"
    assert "watchdog" in nodes["c1-000-000001"].reason
    assert nodes["c1-000-000002"].status == "inconclusive" and nodes["c1-000-000002"].reason_code == "setup"
    assert [r["instance_id"] for r in outcome.replaced] == ["3"]
    error = unhealthy_error(outcome.as_dict(), cluster=NAME, resource_group=RG, replacing=True,
                                   stopped=outcome.stopped)
    assert error.code == "HEALTH_INCONCLUSIVE" and "2 inconclusive" in error.message


def test_a_one_node_cluster_without_the_drivers_tools_is_neither_replaced_nor_reported(azure, session, monkeypatch):
    missing = ('{"azgpu_health":1,"mode":"check","checker":"fallback","aznhc":"missing","host":{"computer":"x",'
               '"physical_host":"AMS081063509028","vm_id":"","vm_id_source":"","vm_size":""},"failures":[{"check":'
               '"nvidia-smi","kind":"tool_missing","message":"nvidia-smi '
               'is not installed or not executable (exit 127)","expected":"nvidia-smi","measured":"exit '
               '127"}],"more":0,"dropped":{},"log":"/var/log/azgpu/h.log","seconds":1}\n')
    node_says(monkeypatch, {"c1-000-000000": missing})
    reporter = ghr.Reporter(session)
    result = create(session, request("nd-a100-v4", nodes=1), CreateOptions(
        gate=GateOptions(replace_unhealthy=True), before_delete=reporter))
    error = result.unhealthy_error()
    assert not result.healthy and isinstance(error, UnhealthyNodes)
    assert error.code == "HEALTH_INCONCLUSIVE"
    (node,) = error.report["nodes"]
    assert (node["status"], node["reason_code"]) == ("inconclusive", "image")
    assert not calls(azure, "POST", path="/delete") and not azure.impacts() and not reporter.entries


def test_a_finding_every_node_shares_replaces_and_reports_nothing(cli, azure, session):
    create(session, request("nd-a100-v4", nodes=3))
    for i in range(3):
        azure.make_unhealthy(f"c1-vmss000/{i}", ib_rate=100)
    rc, out, err = cli("report", "-n", NAME, "-g", RG, "--yes", "-o", "json")
    assert rc == 0, err
    result = json.loads(out)
    assert (result["failed"], result["inconclusive"], result["reports_filed"]) == (0, 3, 0)
    assert not azure.impacts() and "inconclusive, not reported" in err


def test_report_files_only_the_failed_node(cli, azure, session, aznhc_says):
    create(session, request("nd-a100-v4", nodes=3))
    aznhc_says["c1-000-000000"] = [WATCHDOG]
    azure.make_unhealthy("c1-vmss000/1", run_command="timeout")
    azure.make_unhealthy("c1-vmss000/2", gpus=7)
    rc, out, err = cli("report", "-n", NAME, "-g", RG, "--yes", "--node-timeout", "60", "-o", "json")
    assert rc == 0, err
    result = json.loads(out)
    assert (result["failed"], result["inconclusive"], result["unreachable"], result["reports_filed"]) == (1, 1, 1, 1)
    (impact,) = azure.impacts()
    assert "c1-vmss000/virtualMachines/2" in json.dumps(impact)


# ------------------------------------------------------------------------------ hostile or broken verdicts


def verdict(**fields) -> str:
    base = {"azgpu_health": 1, "mode": "check", "checker": "fallback", "aznhc": "missing",
            "host": {"computer": "c", "physical_host": "AMS081063509028", "vm_id": "", "vm_id_source": "",
                     "vm_size": ""}, "failures": [], "more": 0, "dropped": {}, "log": "/var/log/azgpu/h.log",
            "seconds": 1}
    return json.dumps({**base, **fields}) + "\n"


GPU = {"check": "gpu_count", "kind": "missing_gpu", "message": "m", "expected": "8", "measured": "7"}
HOSTILE = {
    "nan": verdict(failures=[{**GPU, "xid": "NaN"}]).replace('"NaN"', "NaN"),
    "infinity": verdict(failures=[{**GPU, "xid": "Inf"}]).replace('"Inf"', "Infinity"),
    "object_as_string": verdict(host="AMS081063509028"),
    "list_as_fault_code": verdict(failures=[{**GPU, "fault_code": ["NHC2009"]}]),
    "failures_as_object": verdict(failures={"a": GPU}),
    "huge_string": verdict(failures=[{**GPU, "message": "x" * 3000}]),
    "control_characters": verdict(failures=[{**GPU, "message": "\x1b]0;owned\x07\x1b[2J"}]),
    "key_with_newline": verdict(failures=[{**GPU, "check\nfrom=\"*\" ssh-ed25519 AAAA": "x"}]),
    "bool_as_count": verdict(more=True),
    "unknown_key": verdict(pubkey_for_all="ssh-ed25519 AAAA"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_a_hostile_verdict_is_inconclusive_and_deletes_nothing(azure, session, monkeypatch, case):
    create(session, request("nd-a100-v4", nodes=2))
    node_says(monkeypatch, {"c1-000-000001": HOSTILE[case]})
    outcome = health.gate(session, live_cluster(session, NAME, RG), GateOptions(replace_unhealthy=True))
    nodes = {n.computer_name: n for n in outcome.report}
    assert nodes["c1-000-000001"].status == "inconclusive" and nodes["c1-000-000001"].reason_code == "invalid_verdict"
    assert nodes["c1-000-000000"].status == "passed"
    assert not outcome.replaced and not calls(azure, "POST", path="/delete")
    assert all(c.isprintable() for c in nodes["c1-000-000001"].reason)


def test_names_shown_are_azures_not_the_nodes(azure, session, monkeypatch):
    create(session, request("nd-a100-v4", nodes=1))
    lying = verdict(host={"computer": "someone-else", "physical_host": "bad host; rm", "vm_id": "", "vm_id_source": "",
                          "vm_size": "Standard_Other"}, failures=[GPU])
    node_says(monkeypatch, {"c1-000-000000": lying})
    (node,) = health.check(session, NAME, RG)
    assert (node.computer_name, node.vm_size, node.physical_host) == ("c1-000-000000", "Standard_ND96asr_v4", None)


def test_a_launcher_key_with_a_second_line_is_refused_and_nothing_is_trusted(azure, session, monkeypatch):
    create(session, request("nd-a100-v4", nodes=3))
    real = vm_actions._public_key
    monkeypatch.setattr(vm_actions, "_public_key", lambda seed: real(seed) + " azgpu-nccl\\nssh-ed25519 " + real("x"))
    report = health.check(session, NAME, RG, CheckOptions(nccl=True))
    (entry,) = report.nccl
    assert entry["status"] == "error" and "refused" in entry["message"]
    for i in range(3):
        assert ".ssh/authorized_keys" not in azure.node(f"c1-vmss000/{i}")["files"]


# ------------------------------------------------------------------------------ what check prints


def test_check_shows_progress_in_a_pipe(cli, azure, session):
    create(session, request("nd-a100-v4", nodes=3))
    azure.make_unhealthy("c1-vmss000/2", gpus=7)
    rc, out, err = cli("check", "-n", NAME, "-g", RG, "-o", "json")
    assert rc == 1
    assert "checking 3 node(s)" in err and "3 of 3 node(s) answered (2 passed, 1 failed), 0 pending" in err
    (line,) = [e for e in err.splitlines() if e.startswith("ERROR: [UNHEALTHY_NODES]")]
    # the check and its code once each, not the message's copy of them again
    assert line.count("check_gpu_count") == 1 and line.count("NHC2009") == 1


def test_control_characters_from_a_node_never_reach_the_terminal(cli, azure, session, aznhc_says):
    create(session, request("nd-a100-v4", nodes=1))
    aznhc_says["c1-000-000000"] = ["check_hw_ib:  No IB port mlx5_ib0:1 is ACTIVE "
                                   "(LinkUp 200 Gb/sec). \x1b]0;x\x07\x1b[2J"]
    for fmt in ("table", "tsv"):
        rc, out, err = cli("check", "-n", NAME, "-g", RG, "-o", fmt)
        assert "\x1b" not in out and "\x07" not in out and "\x1b" not in err


def test_the_nccl_table_says_gb_per_second(cli, azure, session):
    create(session, request("nd-a100-v4", nodes=2))
    rc, out, err = cli("check", "-n", NAME, "-g", RG, "--nccl", "-o", "table")
    assert rc == 0, err
    assert "Measured busbw GB/s" in out and "Gb/s" not in out


def test_the_fake_runs_the_script_once_per_node_state_and_each_node_keeps_its_identity(azure, session, monkeypatch):
    create(session, request("nd-a100-v4", nodes=6))
    azure.make_unhealthy("c1-vmss000/4", gpus=7)
    runs = []
    real = vm_actions.execute
    monkeypatch.setattr(vm_actions, "execute", lambda job: runs.append(job["node"]["computer"]) or real(job))
    report = health.check(session, NAME, RG)
    assert len(runs) == 2  # five healthy nodes in one state, the broken one in another
    hosts = {n.computer_name: n.physical_host for n in report}
    assert len(set(hosts.values())) == 6
    assert all(hosts[n.computer_name] == azure.node(f"c1-vmss000/{n.instance_id}")["physical_host"] for n in report)
    assert [n.instance_id for n in report if not n.passed] == ["4"]


def test_a_reused_run_names_the_gpus_of_its_own_node(azure, session, monkeypatch):
    create(session, request("nd-a100-v4", nodes=2))
    for i in range(2):
        azure.make_unhealthy(f"c1-vmss000/{i}", xid=79)
    report = health.check(session, NAME, RG)
    for n in report:
        serials = {g["serial"] for g in azure.node(f"c1-vmss000/{n.instance_id}")["gpus"]}
        assert n.gpus and {g.serial for g in n.gpus} == serials  # the GPU inventory of a failing node
