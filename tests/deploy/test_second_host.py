"""A finding the image could cause (a driver that does not load: nvidia-smi exit 9) is confirmed on a second
host before anything is reported or replaced (issue 28). On a 1-node cluster that second host is a VM
grown for the purpose and removed again: the scale set ends at the capacity it had, and a re-run converges.
The driver's answer is the fake's (nvidia-smi(1): exit 9 "NVIDIA driver is not loaded", NVIDIA's message);
AzNHC's classification of it is its own customTests/csc_nvidia_smi.nhc ("NVIDIA driver not loaded", NHCNA)."""

from __future__ import annotations

import json

from deploy_support import NAME, RG, VM, VMSS, calls, cluster_args, create_args, request

from azgpu.deploy import CreateOptions, GateOptions, create, ghr
from azgpu.deploy import health_gate as health

REPLACE = CreateOptions(gate=GateOptions(replace_unhealthy=True))

IMPACTS = "Microsoft.Impact/workloadImpacts"
REPORT = ("--check", "--replace-unhealthy", "--report-to-azure", "--yes", "--insight-timeout", "0")


def ids(azure) -> list[int]:
    return sorted(int(vm["instanceId"]) for vm in azure.resources(type=VM))


def capacity(azure) -> list[int]:
    return [v["sku"]["capacity"] for v in azure.resources(type=VMSS)]


def impacts(azure) -> list:
    return calls(azure, "PUT", path=IMPACTS)


def test_check_of_a_one_node_cluster_whose_driver_does_not_load_proves_nothing(azure, session):
    create(session, request("ndv2", nodes=1), CreateOptions())
    azure.make_unhealthy("c1-vmss000/0", driver_not_loaded=True)
    report = health.check(session, NAME, RG)
    (node,) = report.nodes
    assert (node.status, node.reason_code) == ("inconclusive", "unconfirmed")
    # ND40rs v2 has AzNHC on the HPC image: its csc_nvidia_smi.nhc names the driver, check_gpu_count finds none.
    assert any("driver not loaded" in f.message for f in node.failures) and "no other host" in node.reason
    assert ghr.not_reportable(node).startswith("inconclusive")
    assert ids(azure) == [0]  # plain check grows nothing


def test_one_node_whose_driver_does_not_load_files_no_report_when_the_second_host_fails_alike(cli, azure):
    rc, out, err = cli(*create_args("ndv2", nodes=1), "-o", "none")
    assert rc == 0, err
    azure.make_unhealthy("c1-vmss000/0", driver_not_loaded=True)
    azure.unhealthy_next(5, driver_not_loaded=True)  # the image: every new host shows it too
    rc, out, err = cli(*create_args("ndv2", nodes=1), *REPORT)
    assert rc == 1, err
    assert "HEALTH_INCONCLUSIVE" in err and "Traceback" not in err
    result = json.loads(out)
    (node,) = result["health"]["nodes"]
    assert (node["status"], node["reason_code"]) == ("inconclusive", "image")
    assert "same finding on a second host" in node["reason"]
    assert not impacts(azure)  # nothing reported
    assert result["health"]["replaced"] == []
    assert ids(azure) == [0] and capacity(azure) == [1]  # the VM grown to compare is gone again
    assert [r for r in calls(azure, "PATCH") if "virtualMachineScaleSets/" in r.path]  # it was grown
    assert "adding one VM" in err and "removed again" in err


def test_one_node_whose_driver_does_not_load_is_reported_once_a_second_host_passes(cli, azure):
    rc, out, err = cli(*create_args("ndv2", nodes=1), "-o", "none")
    assert rc == 0, err
    azure.make_unhealthy("c1-vmss000/0", driver_not_loaded=True)
    rc, out, err = cli(*create_args("ndv2", nodes=1), *REPORT)
    assert rc == 0, err
    result = json.loads(out)
    (entry,) = result["guest_health_reports"]
    assert entry["state"] == "filed" and entry["instance_id"] == "0"
    assert [r["instance_id"] for r in result["health"]["replaced"]] == ["0"]
    assert result["health"]["healthy"] and capacity(azure) == [1] and len(ids(azure)) == 1


def test_report_on_a_one_node_cluster_confirms_before_filing(cli, azure):
    rc, out, err = cli(*create_args("ndv2", nodes=1), "-o", "none")
    azure.make_unhealthy("c1-vmss000/0", driver_not_loaded=True)
    azure.unhealthy_next(1, driver_not_loaded=True)
    rc, out, err = cli("report", *cluster_args(), "--yes", "--insight-timeout", "0")
    assert rc == 0, err
    assert not impacts(azure) and ids(azure) == [0] and capacity(azure) == [1]
    assert "inconclusive, not reported" in err and "same finding on a second host" in err


def test_a_second_existing_host_is_checked_instead_of_growing_one(cli, azure):
    rc, out, err = cli(*create_args("ndv2", nodes=2), "-o", "none")
    azure.make_unhealthy("c1-vmss000/0", driver_not_loaded=True)
    rc, out, err = cli("report", *cluster_args(), "--node", "c1-vmss000/0", "--yes", "--insight-timeout", "0")
    assert rc == 0, err
    (impact,) = impacts(azure)
    assert ids(azure) == [0, 1] and not calls(azure, "PATCH")  # instance 1 passed: no VM was grown


def test_a_rack_size_is_not_grown_to_compare(azure, session):
    from azgpu.deploy import second_host

    azure.set_quota("eastus", "standardNDISRGB300V6Family", limit=18 * 128)
    azure.set_quota("eastus", "cores", limit=18 * 128)
    create(session, request("nd-gb300-v6", nodes=18), CreateOptions())
    report = health.check(session, NAME, RG)
    node = report.nodes[0]
    fake = type(node)(**{**node.__dict__, "status": "inconclusive", "reason_code": "unconfirmed"})
    out = second_host.confirm(session, RG, [fake, *report.nodes[1:]], health.CheckOptions())[0]
    assert out.reason_code == "unconfirmed" and "cannot grow by one VM" in out.reason
    assert not calls(azure, "PATCH")


def test_replace_with_a_driver_fault_on_one_of_several_nodes_replaces_it(azure, session):
    azure.unhealthy_next(1, driver_not_loaded=True)
    result = create(session, request("ndv2", nodes=3), REPLACE)
    assert result.healthy and [r["instance_id"] for r in result.health.replaced] == ["0"]
    assert not [r for r in calls(azure, "PATCH") if '"capacity": 4' in json.dumps(r.body or {})]  # nothing grown


def test_the_driver_fault_of_every_node_is_the_image(azure, session):
    azure.unhealthy_next(3, driver_not_loaded=True)
    result = create(session, request("ndv2", nodes=3), REPLACE)
    assert not result.healthy and result.unhealthy_error().code == "HEALTH_INCONCLUSIVE"
    assert ids(azure) == [0, 1, 2]
