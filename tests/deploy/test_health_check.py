"""`provision check` / azgpu.deploy.health_gate.check against the fake: per-node results with the failing
check and measured value, unreachable told apart from failed, the outbound path, the bound on Run
Commands in flight, and the multi-node NCCL check."""

from __future__ import annotations

import json

import pytest
from deploy_support import NAME, RG, assert_cli_error, calls, cluster_args, request

from azgpu import find_size
from azgpu.deploy import create, run_command
from azgpu.deploy import health_gate as health
from azgpu.deploy.interface import CheckOptions


@pytest.fixture
def sixteen(azure, session):
    """A 16-node ND96asr_v4 cluster (the subscription's quota raised for it)."""
    azure.set_quota("eastus", "Standard NDASv4_A100 Family", limit=2000)
    azure.set_quota("eastus", "cores", limit=2000)
    create(session, request("nd-a100-v4", nodes=16))
    return "c1-vmss000"


def by_name(report):
    return {n.computer_name: n for n in report}


def test_two_faulty_nodes_of_sixteen_are_exactly_the_two_reported(azure, session, sixteen):
    azure.make_unhealthy(f"{sixteen}/3", gpus=7)
    azure.make_unhealthy(f"{sixteen}/11", ib_down="mlx5_ib5")
    report = health.check(session, NAME, RG)
    failed = {n.instance_id: n for n in report.failed}
    assert sorted(failed) == ["11", "3"] and len(report) == 16 and not report.unreachable
    (gpu,) = failed["3"].failures
    assert (gpu.check, gpu.kind, gpu.expected, gpu.measured, gpu.fault_code) == \
           ("check_gpu_count", "missing_gpu", "8", "7", "NHC2009")
    (ib,) = failed["11"].failures
    assert (ib.check, ib.kind, ib.port, ib.measured) == ("check_hw_ib", "ib_port_down", "mlx5_ib5:1",
                                                         "DOWN Polling 200 Gb/sec")


def test_the_cli_reports_the_two_and_exits_1(azure, cli, sixteen):
    azure.make_unhealthy(f"{sixteen}/3", gpus=7)
    azure.make_unhealthy(f"{sixteen}/11", xid=79)
    rc, out, err = cli("check", *cluster_args())
    assert_cli_error(rc, err, 1, "UNHEALTHY_NODES", "--replace-unhealthy")
    report = json.loads(out)
    assert (report["healthy"], report["passed"], report["failed"]) == (False, 14, 2)
    bad = {n["instance_id"]: n for n in report["nodes"] if n["status"] == "failed"}
    assert bad["11"]["failures"][0]["xid"] == 79
    assert bad["11"]["failures"][0]["impact_category"] == "Resource.Hpc.Unhealthy.XID79FallenOffBus"


def test_the_cli_exits_0_when_every_node_passed(cli, sixteen):
    rc, out, err = cli("check", *cluster_args())
    assert rc == 0, err
    assert json.loads(out)["passed"] == 16


@pytest.fixture
def three(azure, session):
    create(session, request("nd-a100-v4", nodes=3))
    return "c1-vmss000"


@pytest.fixture
def six(azure, session):
    create(session, request("nd-a100-v4", nodes=6))
    return "c1-vmss000"


def test_one_run_command_per_node(azure, session, six):
    before = len(azure.requests)
    health.check(session, NAME, RG)
    assert len(calls(azure, "POST", since=before, path="/runCommand")) == 6


def test_the_report_carries_what_guest_health_reporting_needs(azure, session, three):
    azure.make_unhealthy(f"{three}/2", gpus=7)
    node = by_name(health.check(session, NAME, RG))["c1-000-000002"]
    vm = azure.get(node.resource_id)
    assert node.vm_id == vm["properties"]["vmId"] == node.node_vm_id and node.node_vm_id_source == "imds"
    assert node.physical_host == azure.node(f"{three}/2")["physical_host"]
    assert node.resource_id.endswith(f"/virtualMachineScaleSets/{three}/virtualMachines/2")
    assert [g.serial for g in node.gpus] == [g["serial"] for g in azure.node(f"{three}/2")["gpus"][:7]]


# ------------------------------------------------------------------------------ each fault kind


def one(session, instance="1", **kw):
    return {n.instance_id: n for n in health.check(session, NAME, RG, CheckOptions(**kw))}[instance]


def test_a_port_at_a_lower_rate(azure, session, three):
    azure.make_unhealthy(f"{three}/1", ib_rate=100, ib_port="mlx5_ib2")
    (f,) = one(session).failures
    assert (f.kind, f.port, f.expected, f.measured) == ("ib_port_rate", "mlx5_ib2:1", "ACTIVE LinkUp 200 Gb/sec",
                                                        "ACTIVE LinkUp 100 Gb/sec")


def test_a_hung_nvidia_smi(azure, session, three):
    azure.make_unhealthy(f"{three}/1", nvidia_smi_hang=True)
    (f,) = one(session).failures
    assert (f.check, f.fault_code) == ("check_nvsmi_healthmon", "NHC2015")


def test_a_run_command_that_never_returns_is_unreachable_not_failed(azure, session, three):
    azure.make_unhealthy(f"{three}/1", run_command="timeout")
    node = one(session, node_timeout=120)
    assert (node.status, node.reason_code) == ("unreachable", "timeout") and "120 s" in node.reason


def test_a_run_command_without_verdict_is_unreachable(azure, session, three):
    azure.make_unhealthy(f"{three}/1", run_command="no_verdict")
    node = one(session)
    assert (node.status, node.reason_code) == ("unreachable", "no_verdict") and "Killed" in node.reason


def test_a_vm_busy_with_another_run_command_is_retried_then_reported(azure, session, three):
    azure.make_unhealthy(f"{three}/1", run_command="timeout")
    health.check(session, NAME, RG, CheckOptions(node_timeout=60))  # leaves a run command running on instance 1
    sleeps = len(azure.sleeps)
    node = one(session, node_timeout=600)  # (the fake's clock is shared: the 409 waits pass for all)
    assert (node.status, node.reason_code) == ("unreachable", "conflict")
    assert azure.sleeps[sleeps:].count(run_command.CONFLICT_WAIT) == run_command.CONFLICT_RETRIES


def test_the_fallback_runs_where_aznhc_has_no_conf(azure, session):
    family = find_size("Standard_ND128isr_NDR_GB200_v6")[1].cap("quota_family")
    azure.set_quota("eastus", family, limit=3000)
    azure.set_quota("eastus", "cores", limit=3000)
    create(session, request("nd-gb200-v6", nodes=18))
    azure.make_unhealthy("c1-vmss000/4", gpus=3)
    node = one(session, "4")
    assert (node.checker, node.aznhc) == ("fallback", "unsupported")
    (f,) = node.failures
    assert (f.check, f.kind, f.expected, f.measured) == ("gpu_count", "missing_gpu", "4", "3")
    assert f.gpus[0].bus == "0004:00:00.0"


def test_an_amd_node_without_infiniband_passes_the_fallback(session):
    create(session, request("ng", nodes=2))
    node = one(session, "0")
    assert (node.status, node.checker, node.gpus_found) == ("passed", "fallback", 1)


# ------------------------------------------------------------------------------ outbound


@pytest.fixture
def private(azure, session):
    """A cluster made with --no-outbound: a private subnet and no NAT gateway."""
    create(session, request("nd-a100-v4", nodes=3, outbound=False))
    return "c1-vmss000"


def test_a_subnet_without_outbound_is_named_as_the_reason(azure, session, private):
    report = health.check(session, NAME, RG, CheckOptions(node_timeout=60))
    assert {n.reason_code for n in report} == {"no_outbound"}
    assert "no outbound path" in report.as_dict()["warnings"][0]


def test_the_cli_says_to_add_a_nat_gateway(azure, cli, private):
    rc, out, err = cli("check", *cluster_args(), "--node-timeout", "60")
    assert_cli_error(rc, err, 1, "NO_OUTBOUND_PATH", "NAT gateway")


def test_a_nat_gateway_on_the_subnet_is_an_outbound_path(azure, session, three):
    vnet = azure.resources(type="Microsoft.Network/virtualNetworks")[0]
    subnet = azure._backend.find(vnet["properties"]["subnets"][0]["id"])
    subnet["properties"].update(defaultOutboundAccess=False, natGateway={"id": vnet["id"] + "/natgw"})
    report = health.check(session, NAME, RG)
    assert report.healthy and report.outbound[0]["path"] == "NAT gateway"


# ------------------------------------------------------------------------------ input and output


def test_a_missing_cluster_exits_3(cli):
    rc, out, err = cli("check", *cluster_args())
    assert_cli_error(rc, err, 3, "CLUSTER_NOT_FOUND")


@pytest.mark.parametrize("flag, value, code", [("--parallel", "0", "INVALID_PARALLEL"),
                                               ("--parallel", "501", "INVALID_PARALLEL"),
                                               ("--node-timeout", "10", "INVALID_NODE_TIMEOUT")])
def test_out_of_range_options_are_refused(cli, three, flag, value, code):
    rc, out, err = cli("check", *cluster_args(), flag, value)
    assert_cli_error(rc, err, 2, code, "use ")


def test_the_table_has_one_row_per_node(azure, cli, three):
    azure.make_unhealthy(f"{three}/2", gpus=7)
    rc, out, err = cli("check", *cluster_args(), "-o", "table")
    assert rc == 1
    rows = [line.split() for line in out.splitlines() if line.startswith("c1-000-00000")]
    assert len(rows) == 3
    assert rows[2][3:9] == ["failed", "aznhc", "check_gpu_count", "8", "7", "NHC2009"]


def test_check_runs_in_simulation_from_the_state_file(sim):
    rc, out, err = sim("create", "--profile", "nd-a100-v4", "-n", NAME, "-g", RG, "-l", "eastus", "--nodes", "2",
                       "--ssh-key",
                       "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJOgAYClhajeh3m7rJp5Bf+XHzOywcIepjITM9B6OJMg x",
                       "-o", "none")
    assert rc == 0, err
    rc, out, err = sim("check", *cluster_args())
    assert rc == 0, err
    assert json.loads(out)["passed"] == 2


# ------------------------------------------------------------------------------ multi-node NCCL


def test_nccl_measures_the_bus_bandwidth_across_the_scale_set(azure, session, three):
    report = health.check(session, NAME, RG, CheckOptions(nccl=True))
    (entry,) = report.nccl
    assert (entry["status"], entry["nodes"], entry["ranks"], entry["measured_busbw_gbps"],
            entry["expected_busbw_gbps"]) == ("passed", 3, 24, 186.0, 180.0)


def test_nccl_catches_a_slow_fabric_that_every_node_passes(azure, session, three):
    azure.degrade_fabric(three, 0.5)
    report = health.check(session, NAME, RG, CheckOptions(nccl=True))
    assert all(n.passed for n in report)
    (entry,) = report.nccl
    assert entry["status"] == "failed" and entry["measured_busbw_gbps"] == 93.0 and not report.healthy


def test_nccl_leaves_no_key_behind(azure, session, three):
    health.check(session, NAME, RG, CheckOptions(nccl=True))
    for i in range(3):
        files = azure.node(f"{three}/{i}")["files"]
        assert "azgpu-nccl" not in files.get(".ssh/authorized_keys", "") and ".azgpu-nccl/id_ed25519" not in files


def test_nccl_skips_a_size_without_infiniband(session):
    create(session, request("ng", nodes=2))
    (entry,) = health.check(session, NAME, RG, CheckOptions(nccl=True)).nccl
    assert entry["status"] == "skipped"


def test_scale_sets_on_one_subnet_read_it_once(azure, session):
    """The subnet's body lists every NIC on it: read once per scale set, a 10,000-node check (100 scale sets on
    one subnet) read 100 times 10,000 IP configurations. Each scale set still gets its outbound path."""
    create(session, request("nd-a100-v4", nodes=6, max_ib_domain=2))  # three scale sets of two, one subnet
    since = len(azure.requests)
    report = health.check(session, NAME, RG)
    subnet_reads = [r for r in azure.requests[since:] if r.method == "GET" and "/subnets/" in r.path]
    assert len(subnet_reads) == 1
    assert [o["path"] for o in report.outbound] == ["NAT gateway"] * 3 and report.healthy


def test_the_run_command_body_goes_on_the_wire_as_the_sdk_would_send_it():
    """run_all encodes a scale set's body once and hands the SDK bytes. Whatever azure-mgmt-compute is installed
    (39 json.dumps a dict; 34, the floor, serialises it through its RunCommandInput model), the bytes go on the
    wire as the dict would, as application/json, and a retry after a 429 sends them again intact. Measured on
    the wire, not against an SDK module private to one version."""
    import re

    import responses
    from azure.mgmt.compute import ComputeManagementClient

    from azgpu.health.script import run_command_body
    from azgpu.testing import FakeCredential

    body = run_command_body("check", {"AZGPU_AZNHC_TIMEOUT": "300"})
    seen: list[tuple[str | None, bytes]] = []

    def answer(req):
        seen.append((req.headers.get("Content-Type"), req.body if isinstance(req.body, bytes) else req.body.encode()))
        if len(seen) % 2:  # every first try throttled: the SDK's retry sends the body again
            return 429, {"Retry-After": "0"}, "{}"
        return 200, {"Content-Type": "application/json"}, "{}"

    client = ComputeManagementClient(FakeCredential(), "sub", polling_interval=0, retry_backoff_factor=0)
    with responses.RequestsMock() as mock:
        mock.add_callback(responses.POST, re.compile(r".*/runCommand\b.*"), callback=answer)
        for sent in (body, run_command.encoded(body)):
            client.virtual_machine_scale_set_vms.begin_run_command(RG, "ss", "0", sent).result()
    assert len(seen) == 4 and {ct for ct, _ in seen} == {"application/json"}
    assert len({raw for _, raw in seen}) == 1 and json.loads(seen[0][1]) == body
