"""create --check [--replace-unhealthy]: the gate after the scale sets succeed, from Python and the CLI;
failing nodes are replaced for a bounded number of rounds, with a hook while their VMs still exist."""

from __future__ import annotations

import json

import pytest
from deploy_support import NAME, RG, VM, assert_cli_error, calls, create_args, request

from azgpu.deploy import CreateOptions, GateOptions, create
from azgpu.deploy import health_gate as health
from azgpu.deploy.interface import CheckOptions
from azgpu.deploy.lifecycle import live_cluster
from azgpu.health.outcome import UnhealthyNodes, unhealthy_error


@pytest.fixture
def quota(azure):
    azure.set_quota("eastus", "Standard NDASv4_A100 Family", limit=2000)
    azure.set_quota("eastus", "cores", limit=2000)


def ids(azure):
    return sorted(int(vm["instanceId"]) for vm in azure.resources(type=VM))


def test_replacing_two_faulty_nodes_of_sixteen_ends_healthy(azure, session, quota):
    azure.unhealthy_next(1, gpus=7)
    azure.unhealthy_next(1, ib_down="mlx5_ib3")
    hosts = []
    result = create(session, request("nd-a100-v4", nodes=16), CreateOptions(
        gate=GateOptions(check=True, replace_unhealthy=True),
        before_delete=lambda nodes: hosts.extend(n.physical_host for n in nodes))).as_dict()
    report = result["health"]
    assert report["healthy"] and report["passed"] == 16
    assert [r["round"] for r in report["rounds"]] == [0, 1]
    assert [r["instance_id"] for r in report["replaced"]] == ["0", "1"]
    assert ids(azure) == list(range(2, 18))  # 0 and 1 gone, 16 and 17 new
    assert hosts == [r["physical_host"] for r in report["replaced"]] and all(hosts)
    assert session.compute.virtual_machine_scale_sets.get(RG, "c1-vmss000").sku.capacity == 16


def test_without_replacement_the_bad_nodes_stay_and_create_raises(azure, session):
    azure.unhealthy_next(1, xid=79)
    result = create(session, request("nd-a100-v4", nodes=3), CreateOptions(gate=GateOptions(check=True)))
    error = result.unhealthy_error()
    assert not result.healthy and isinstance(error, UnhealthyNodes)
    assert error.code == "UNHEALTHY_NODES" and "--replace-unhealthy" in error.remedy
    assert error.result["health"]["failed"] == 1 and error.result["scale_sets"]
    assert ids(azure) == [0, 1, 2]
    assert not calls(azure, "POST", path="/delete")


def test_the_hook_runs_while_the_vms_exist(azure, session):
    azure.unhealthy_next(1, gpus=7)
    seen = []

    def before_delete(nodes):
        seen.extend((n.instance_id, azure.get(n.resource_id) is not None) for n in nodes)

    assert create(session, request("nd-a100-v4", nodes=3), CreateOptions(
        gate=GateOptions(replace_unhealthy=True), before_delete=before_delete)).healthy
    assert seen == [("0", True)]


def test_a_hook_that_raises_deletes_nothing(azure, session):
    azure.unhealthy_next(1, gpus=7)

    def refuse(nodes):
        raise RuntimeError("Guest Health Reporting refused")

    with pytest.raises(RuntimeError):
        create(session, request("nd-a100-v4", nodes=3), CreateOptions(
            gate=GateOptions(replace_unhealthy=True), before_delete=refuse))
    assert ids(azure) == [0, 1, 2] and not calls(azure, "POST", path="/delete")


def test_the_rounds_are_bounded(azure, session):
    create(session, request("nd-a100-v4", nodes=3))
    azure.make_unhealthy("c1-vmss000/0", gpus=7)
    azure.unhealthy_next(1, ib_down=True)  # every replacement is bad too, each in a new way
    azure.unhealthy_next(1, xid=79)
    outcome = health.gate(session, live_cluster(session, NAME, RG), GateOptions(replace_unhealthy=True,
                                                                                max_rounds=2))
    assert not outcome.healthy and [r["round"] for r in outcome.rounds] == [0, 1, 2]
    assert outcome.stopped == "still unhealthy after 2 replacement round(s)"
    assert [r["instance_id"] for r in outcome.replaced] == ["0", "3"]
    error = unhealthy_error(outcome.as_dict(), cluster=NAME, resource_group=RG, replacing=True,
                                   stopped=outcome.stopped)
    assert error.code == "UNHEALTHY_NODES" and "after 2 replacement round(s)" in error.remedy


def test_when_every_node_fails_nothing_is_replaced(azure, session):
    azure.unhealthy_next(3, gpus=7)
    result = create(session, request("nd-a100-v4", nodes=3), CreateOptions(gate=GateOptions(replace_unhealthy=True)))
    error = result.unhealthy_error()
    assert not result.healthy and isinstance(error, UnhealthyNodes)
    assert "no node shows a host fault" in error.report["stopped"]
    assert error.code == "HEALTH_INCONCLUSIVE" and "image, the driver or the configuration" in error.remedy
    assert {n["status"] for n in error.report["nodes"]} == {"inconclusive"}
    assert {n["reason_code"] for n in error.report["nodes"]} == {"common"}
    assert ids(azure) == [0, 1, 2] and not calls(azure, "POST", path="/delete")


def test_a_finding_that_follows_the_node_to_a_new_host_stops_the_rounds(azure, session):
    create(session, request("nd-a100-v4", nodes=3))
    azure.make_unhealthy("c1-vmss000/0", gpus=7)
    azure.unhealthy_next(5, gpus=7)  # the replacement shows it too: not the host
    outcome = health.gate(session, live_cluster(session, NAME, RG), GateOptions(replace_unhealthy=True,
                                                                                max_rounds=3))
    assert [r["instance_id"] for r in outcome.replaced] == ["0"]
    assert "followed them to new hosts" in outcome.stopped


def test_a_node_busy_with_another_run_command_is_not_replaced(azure, session):
    create(session, request("nd-a100-v4", nodes=3))
    azure.make_unhealthy("c1-vmss000/1", run_command="timeout")
    health.check(session, NAME, RG, CheckOptions(node_timeout=60))  # leaves a Run Command running there
    # The fake's clock is shared: the 409 waits on instance 1 (3 x 30 s) pass for the others too.
    outcome = health.gate(session, live_cluster(session, NAME, RG),
                          GateOptions(replace_unhealthy=True, node=CheckOptions(node_timeout=600)))
    assert outcome.report.unreachable[0].reason_code == "conflict"
    assert outcome.stopped.startswith("no node can be replaced")
    assert ids(azure) == [0, 1, 2]


def test_check_needs_the_deployment_to_finish(session):
    from azgpu.errors import InputError

    with pytest.raises(InputError) as info:
        create(session, request("nd-a100-v4"), CreateOptions(wait=False, gate=GateOptions(check=True)))
    assert info.value.code == "CHECK_NEEDS_WAIT"


def test_the_round_limit_is_checked(session):
    from azgpu import deploy
    from azgpu.errors import InputError

    create(session, request("nd-a100-v4", nodes=1))
    with pytest.raises(InputError) as info:  # at create's door, the gate's only caller
        deploy.create(session, request("nd-a100-v4", nodes=1),
                      CreateOptions(gate=GateOptions(replace_unhealthy=True, max_rounds=0)))
    assert info.value.code == "INVALID_MAX_ROUNDS"


# ------------------------------------------------------------------------------ the CLI, simulated


@pytest.fixture
def fault(run, state_file):
    """`provision simulate fault ARGS --simulate-state STATE` (the state the `sim` commands use)."""

    def _fault(*args):
        return run("simulate", "fault", *args, "--simulate-state", state_file)

    return _fault


def test_create_simulate_check_replace_unhealthy(sim, fault):
    rc, out, err = fault("--next", "2", "--gpus", "7")
    assert rc == 0, err
    rc, out, err = sim(*create_args("nd-a100-v4", nodes=4), "--check", "--replace-unhealthy")
    assert rc == 0, err
    result = json.loads(out)
    assert result["health"]["healthy"] and len(result["health"]["replaced"]) == 2


def test_create_check_without_replacement_prints_the_report_and_exits_1(sim, fault):
    fault("--next", "1", "--xid", "79")
    rc, out, err = sim(*create_args("nd-a100-v4", nodes=3), "--check")
    assert_cli_error(rc, err, 1, "UNHEALTHY_NODES")
    assert json.loads(out)["health"]["failed"] == 1


def test_create_check_with_no_wait_is_refused(sim):
    rc, out, err = sim(*create_args("nd-a100-v4"), "--check", "--no-wait")
    assert_cli_error(rc, err, 2, "CHECK_NEEDS_WAIT", "provision check")


@pytest.mark.parametrize("flag, value, code", [("--max-rounds", "0", "INVALID_MAX_ROUNDS"),
                                               ("--parallel", "0", "INVALID_PARALLEL"),
                                               ("--node-timeout", "5", "INVALID_NODE_TIMEOUT")])
def test_bad_gate_options_fail_before_anything_is_created(sim, state_file, flag, value, code):
    rc, out, err = sim(*create_args("nd-a100-v4"), "--check", flag, value)
    assert_cli_error(rc, err, 2, code, "use ")
    assert not state_file.exists() or not json.loads(state_file.read_text())["resources"]


def test_simulate_fault_names_nodes_or_the_next_ones(fault):
    rc, out, err = fault("--gpus", "7")
    assert_cli_error(rc, err, 2, "MISSING_ARGUMENT", "--next")


def test_simulate_fault_refuses_an_impossible_fault(sim, fault):
    sim(*create_args("nd-a100-v4", nodes=1), "-o", "none")
    rc, out, err = fault("-n", NAME, "--instance", "0", "--gpus", "9")
    assert_cli_error(rc, err, 2, "INVALID_FAULT")


def test_simulate_fault_on_an_existing_node_is_what_check_finds(sim, fault):
    sim(*create_args("nd-a100-v4", nodes=2), "-o", "none")
    rc, out, err = fault("-n", NAME, "--instance", "1", "--ib-rate", "100")
    assert rc == 0, err
    rc, out, err = sim("check", "-n", NAME, "-g", RG)
    assert rc == 1
    (bad,) = [n for n in json.loads(out)["nodes"] if n["status"] == "failed"]
    assert bad["instance_id"] == "1" and bad["failures"][0]["kind"] == "ib_port_rate"


def test_simulate_fault_takes_every_gpu_gone_and_refuses_a_port_index_the_node_lacks(sim, fault):
    """--gpus 0 is a fault (0 == False once dropped it, and with it the whole fault); --ib-port 99 is one clear
    error, not an IndexError's traceback."""
    rc, out, err = fault("--next", "1", "--gpus", "0", "--xid", "79")
    assert rc == 0, err
    assert json.loads(out)["fault"] == {"gpus": 0, "xid": 79}
    assert sim(*create_args("nd-a100-v4", nodes=1))[0] == 0
    rc, out, err = fault("--instance", "c1-000-000000", "--gpus", "0")
    assert rc == 0, err
    assert "0 of 8 GPUs" in json.loads(out)["nodes"][0]["faults"]
    rc, out, err = fault("--instance", "c1-000-000000", "--ib-rate", "200", "--ib-port", "99")
    assert rc == 2 and "Traceback" not in err
    assert "ERROR: [INVALID_FAULT] no InfiniBand port '99'" in err
