"""The fake's scale-set VM actions under the real SDK: Run Command (long-running, the Linux output
shape, 409 while one runs) answered by azgpu's real node script on simulated hardware, instance
deletion and scale-out, fault injection, and real Run Command bodies replayed through azgpu."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest
import responses
from deploy_support import RG, VM, request

from azgpu import find_size
from azgpu.deploy import create
from azgpu.deploy.arm import rest_shape
from azgpu.deploy.run_command import Instance, check_node
from azgpu.health.results import find_verdict, output_streams
from azgpu.health.script import Expectations, run_command_body
from azgpu.testing import FakeAzure, NotImplementedInFake

AZURE = Path(__file__).resolve().parents[1] / "fixtures" / "azure"
BODY = run_command_body("check", Expectations.of(find_size("Standard_ND96asr_v4")[1]).settings())


@pytest.fixture
def cluster(azure, session):
    create(session, request("nd-a100-v4", nodes=3))
    return "c1-vmss000"


def run(session, vmss, instance, body=BODY):
    return session.compute.virtual_machine_scale_set_vms.begin_run_command(RG, vmss, instance, body).result()


def verdict(result):
    return find_verdict(output_streams(result)[0])


def test_run_command_is_long_running_with_a_status_url_and_a_location_that_answers_the_result(azure, session, cluster):
    import requests

    poller = session.compute.virtual_machine_scale_set_vms.begin_run_command(RG, cluster, "0", BODY, polling=False)
    response = poller.polling_method()._initial_response.http_response
    assert response.status_code == 202
    status_url, location = response.headers["Azure-AsyncOperation"], response.headers["Location"]
    assert location == status_url + "&monitor=true"
    done = requests.get(location)  # one poll finishes an operation of this fake (lro_polls=1)
    assert done.status_code == 200 and done.json()["value"][0]["code"] == "ProvisioningState/succeeded"
    status = requests.get(status_url).json()
    assert status["status"] == "Succeeded" and status["properties"]["output"] == done.json()


def test_the_location_says_202_while_the_run_command_runs(session, cluster):
    import requests

    with FakeAzure(lro_polls=3) as azure:
        from azgpu.deploy.session import Session
        from azgpu.testing import FakeCredential

        s = Session(azure.subscription_id, FakeCredential(), polling_interval=0, sleep=azure.sleep, clock=azure.now)
        create(s, request("nd-a100-v4", nodes=1))
        poller = s.compute.virtual_machine_scale_set_vms.begin_run_command(RG, "c1-vmss000", "0", BODY, polling=False)
        location = poller.polling_method()._initial_response.http_response.headers["Location"]
        first = requests.get(location)
        assert first.status_code == 202 and first.headers["Location"] == location


def test_the_result_has_the_linux_shape_of_the_recorded_body(session, cluster):
    result = rest_shape(run(session, cluster, "0"))
    recorded = json.loads((AZURE / "run-command-linux-output.json").read_text())
    (status,) = result["value"]
    assert set(status) == set(recorded["value"][0])
    assert status["code"] == recorded["value"][0]["code"] == "ProvisioningState/succeeded"
    assert status["message"].startswith("Enable succeeded: \n[stdout]\n") and "\n[stderr]\n" in status["message"]


def test_a_healthy_node_answers_a_passing_verdict_from_the_real_script(session, cluster):
    v = verdict(run(session, cluster, "1"))
    assert v["failures"] == [] and v["checker"] == "aznhc" and v["host"]["vm_size"] == "Standard_ND96asr_v4"


def test_a_second_run_command_on_the_vm_is_refused_with_azures_409(azure, session, cluster):
    from azure.core.exceptions import HttpResponseError

    session.compute.virtual_machine_scale_set_vms.begin_run_command(RG, cluster, "0", BODY, polling=False)
    with pytest.raises(HttpResponseError) as info:
        session.compute.virtual_machine_scale_set_vms.begin_run_command(RG, cluster, "0", BODY, polling=False)
    recorded = json.loads((AZURE / "run-command-conflict-409.json").read_text())["error"]
    assert info.value.status_code == 409
    assert (info.value.error.code, info.value.error.message) == (recorded["code"], recorded["message"])


def test_an_unknown_command_id_is_not_found(session, cluster):
    from azure.core.exceptions import ResourceNotFoundError

    with pytest.raises(ResourceNotFoundError):
        run(session, cluster, "0", {"commandId": "RunFancyScript", "script": ["true"]})


def test_a_script_that_is_not_azgpus_is_not_run(session, cluster):
    with pytest.raises(NotImplementedInFake):
        run(session, cluster, "0", {"commandId": "RunShellScript", "script": ["rm -rf /"]})


def test_the_hardware_comes_from_the_fakes_own_data_not_the_profiles():
    source = (Path(__file__).resolve().parents[2] / "src/azgpu/testing/hardware.py").read_text()
    imported = {n.module for n in ast.walk(ast.parse(source)) if isinstance(n, ast.ImportFrom) and n.module}
    assert not any("profiles" in m for m in imported) and "azgpu.profiles" not in source


# ------------------------------------------------------------------------------ faults


def test_make_unhealthy_by_computer_name_changes_what_the_node_answers(azure, session, cluster):
    azure.make_unhealthy("c1-000-000002", gpus=7)
    (failure,) = verdict(run(session, cluster, "2"))["failures"]
    assert failure["check"] == "check_gpu_count" and failure["measured"] == "7"
    assert verdict(run(session, cluster, "1"))["failures"] == []


def test_unhealthy_next_applies_to_that_many_new_instances_only(azure, session):
    azure.unhealthy_next(2, xid=79)
    create(session, request("nd-a100-v4", nodes=3))
    assert [bool(azure.node(f"c1-vmss000/{i}")["xids"]) for i in range(3)] == [True, True, False]


def test_a_run_command_timeout_fault_never_finishes(azure, session, cluster):
    azure.make_unhealthy("c1-vmss000/0", run_command="timeout")
    poller = session.compute.virtual_machine_scale_set_vms.begin_run_command(RG, cluster, "0", BODY, polling=False)
    (op,) = [o for o in azure._backend.ops.pending() if o.get("on_finish") == "run_command"]
    for _ in range(5):
        azure._backend.ops.poll(op)
    assert op["status"] == "InProgress"
    del poller


def test_a_node_on_a_subnet_without_outbound_never_returns_its_result(azure, session):
    create(session, request("nd-a100-v4", nodes=3, outbound=False))  # a private subnet, no NAT gateway
    session.compute.virtual_machine_scale_set_vms.begin_run_command(RG, "c1-vmss000", "1", BODY, polling=False)
    (op,) = [o for o in azure._backend.ops.pending() if o.get("on_finish") == "run_command"]
    assert op.get("hang") is True


def test_an_unknown_fault_is_refused(azure, cluster):
    with pytest.raises(ValueError):
        azure.make_unhealthy("c1-vmss000/0", gpu=7)


def test_faults_and_nodes_survive_in_the_state_file(tmp_path, session):
    path = tmp_path / "state.json"
    with FakeAzure(state_file=path) as azure:
        from azgpu.deploy.session import Session
        from azgpu.testing import FakeCredential

        s = Session(azure.subscription_id, FakeCredential(), polling_interval=0, sleep=azure.sleep, clock=azure.now)
        create(s, request("nd-a100-v4", nodes=2))
        azure.make_unhealthy("c1-vmss000/1", ib_down="mlx5_ib3")
        azure.unhealthy_next(1, gpus=6)
    again = FakeAzure.load(path)
    assert again.node("c1-vmss000/1")["ib"][3]["state"] == "DOWN"
    assert again._store.pending_faults == [{"count": 1, "fault": {"gpus": 6}}]


# ------------------------------------------------------------------------------ deleting, scaling out


def test_deleting_instances_removes_vms_nics_nodes_and_lowers_capacity(azure, session, cluster):
    session.compute.virtual_machine_scale_sets.begin_delete_instances(RG, cluster, {"instanceIds": ["0", "2"]}).result()
    assert sorted(vm["instanceId"] for vm in azure.resources(type=VM)) == ["1"]
    assert session.compute.virtual_machine_scale_sets.get(RG, cluster).sku.capacity == 1
    assert all("/virtualMachines/0/" not in n["id"]
               for n in azure.resources(type="Microsoft.Network/networkInterfaces"))
    with pytest.raises(KeyError):
        azure.node("c1-vmss000/0")


def test_deleting_one_instance_works_too(azure, session, cluster):
    session.compute.virtual_machine_scale_set_vms.begin_delete(RG, cluster, "1").result()
    assert sorted(vm["instanceId"] for vm in azure.resources(type=VM)) == ["0", "2"]


def test_scaling_out_after_deleting_the_highest_instance_never_reuses_its_id(azure, session, cluster):
    session.compute.virtual_machine_scale_sets.begin_delete_instances(RG, cluster, {"instanceIds": ["2"]}).result()
    session.compute.virtual_machine_scale_sets.begin_update(
        RG, cluster, {"sku": {"name": "Standard_ND96asr_v4", "capacity": 3}}).result()
    assert sorted(int(vm["instanceId"]) for vm in azure.resources(type=VM)) == [0, 1, 3]


def test_replacement_instances_land_on_new_healthy_hosts(azure, session, cluster):
    azure.make_unhealthy("c1-vmss000/0", gpus=7)
    old = azure.node("c1-vmss000/0")["physical_host"]
    session.compute.virtual_machine_scale_sets.begin_delete_instances(RG, cluster, {"instanceIds": ["0"]}).result()
    session.compute.virtual_machine_scale_sets.begin_update(
        RG, cluster, {"sku": {"name": "Standard_ND96asr_v4", "capacity": 3}}).result()
    new = azure.node("c1-vmss000/3")
    assert new["physical_host"] != old and new["faults"] == []


def test_deleting_an_unknown_instance_is_a_bad_request_as_azure_answers_it(session, cluster):
    from azure.core.exceptions import HttpResponseError

    with pytest.raises(HttpResponseError) as info:
        session.compute.virtual_machine_scale_sets.begin_delete_instances(RG, cluster, {"instanceIds": ["9"]})
    assert (info.value.status_code, info.value.error.code) == (400, "InvalidParameter")
    assert "instanceId 9 is not an active Virtual Machine Scale Set VM instanceId" in info.value.error.message


# ------------------------------------------------------------------------------ real bodies through azgpu


NODE = Instance("vmss", "0", "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachineScaleSets/"
                "vmss/virtualMachines/0", "vmss000000", "v-1", "running", "Standard_ND96asr_v4")
# ARM matches paths without case, and SDKs spell them differently (azure-mgmt-compute 34: virtualmachines).
POST = re.compile(r"https://management\.azure\.com/subscriptions/0{8}-0{4}-0{4}-0{4}-0{12}/resourceGroups/rg/providers/"
                  r"Microsoft\.Compute/virtualMachineScaleSets/vmss/virtualMachines/0/runCommand(\?.*)?", re.IGNORECASE)
LOCATION = "https://management.azure.com/subscriptions/00000000-0000-0000-0000-000000000000/providers/" \
           "Microsoft.Compute/locations/eastus/operations/0f8d?monitor=true&api-version=2026-04-01"


def replay(session, final_body: dict, *, first: tuple[int, dict] | None = None):
    """POST runCommand -> 202 + Location, Location -> 200 with a real body; azgpu's check_node reads it."""
    import threading

    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        if first:
            mock.add(responses.POST, POST, json=first[1], status=first[0])
        mock.add(responses.POST, POST, status=202, headers={"Location": LOCATION, "Retry-After": "0"})
        mock.add(responses.GET, LOCATION, json=final_body, status=200)
        return check_node(session, "rg", NODE, BODY, 600, threading.Event()), mock


@pytest.fixture
def bare_session():
    from azgpu.deploy.session import Session
    from azgpu.testing import FakeCredential

    slept = []
    return Session("00000000-0000-0000-0000-000000000000", FakeCredential(), polling_interval=0,
                   sleep=slept.append, clock=lambda: 0.0), slept


def test_the_recorded_linux_body_has_no_verdict_and_azgpu_says_what_came_back(bare_session):
    session, _ = bare_session
    result, _ = replay(session, json.loads((AZURE / "run-command-linux-output.json").read_text()))
    assert result.status == "unreachable" and result.reason_code == "no_verdict"
    assert "This is a sample script" in result.reason


def test_the_spec_example_body_is_read_as_stdout(bare_session):
    session, _ = bare_session
    result, _ = replay(session, json.loads((AZURE / "vmss-vm-run-command-200.json").read_text()))
    assert result.reason_code == "no_verdict" and "Hello World!" in result.reason


def test_a_real_409_is_waited_out_and_retried(bare_session):
    session, slept = bare_session
    conflict = json.loads((AZURE / "run-command-conflict-409.json").read_text())
    body = {"value": [{"code": "ProvisioningState/succeeded", "level": "Info",
                       "displayStatus": "Provisioning succeeded",
                       "message": "Enable succeeded: \n[stdout]\n" + json.dumps(
                           {"azgpu_health": 1, "mode": "check", "checker": "fallback", "failures": [], "more": 0,
                            "host": {"physical_host": "AMS081063509028"}}) + "\n\n[stderr]\n"}]}
    result, _ = replay(session, body, first=(409, conflict))
    assert result.status == "passed" and result.physical_host == "AMS081063509028"
    # The 409's wait, then the first look at the accepted Run Command's status, which waits the 20 s Learn
    # says a script takes at least (later polls at polling_interval=0 wait 0 s through the same function).
    assert [s for s in slept if s] == [30.0, 20.0]
