"""ND GB300 v6 racks end to end in the fake: spare racks pruned to whole healthy racks, unhealthy nodes
of a rack reported and left out (Azure creates vertical-connect scale sets only in whole racks), and
the scheduler files' racks measured from the nodes (docs/gb-racks.md)."""

from __future__ import annotations

import json

import pytest
import requests
from deploy_support import VMSS, assert_cli_error, calls, cluster_args, create_args

GB300_FAMILY = "standardNDISRGB300V6Family"
REPORT = ("--check", "--replace-unhealthy", "--report-to-azure", "--yes", "--insight-timeout", "60")
# Azure reports each instance's interconnect subgroup (Compute 2026-03-01, read from the REST answer): the
# racks are Azure's ("reported"), and what each node's GPUs report (NodeResult.fabric) is checked against them.
BASIS = "reported"


@pytest.fixture
def racks_quota(azure):
    azure.set_quota("eastus", GB300_FAMILY, limit=54 * 128)
    azure.set_quota("eastus", "cores", limit=54 * 128)


def capacity(azure) -> list[int]:
    return [v["sku"]["capacity"] for v in azure.resources(type=VMSS)]


def test_spare_rack_with_one_bad_node_ends_with_two_whole_healthy_racks(cli, azure, racks_quota, tmp_path):
    azure.unhealthy_next(1, gpus=3)  # instance 0: the first rack
    rc, out, err = cli(*create_args("nd-gb300-v6", nodes=36), "--spare-racks", "1", *REPORT)
    assert rc == 0, err
    result = json.loads(out)
    assert capacity(azure) == [36]
    assert [(r["short"], len(r["nodes"]), r["basis"]) for r in result["racks"]] == [(0, 18, BASIS)] * 2
    (removed,) = result["spare_racks"]["removed"]
    assert removed["reason"].startswith("unhealthy: ") and len(removed["nodes"]) == 18
    (entry,) = result["guest_health_reports"]
    assert entry["category"] == "Resource.Hpc.Unhealthy.HpcMissingGpu"
    # Reported while the VM still existed: the report's POST comes before the rack's deleteInstances.
    posts = [r.path.lower() for r in calls(azure, "POST", "PUT")]
    report = next(i for i, p in enumerate(posts) if "microsoft.impact" in p)
    delete = next(i for i, p in enumerate(posts) if p.endswith("/delete"))
    assert report < delete
    rc, out, err = cli("outputs", *cluster_args(), "--format", "slurm")
    assert rc == 0, err
    topo = out.split("# ---- topology.conf ----")[1].split("# ---- topology.yaml ----")[0]
    assert topo.count("BlockName=") == 2 and f"Blocks marked '{BASIS}'" in topo and "ASSUME" not in topo


def test_without_spare_racks_a_bad_node_is_reported_left_out_and_its_rack_named_short(cli, azure, racks_quota):
    azure.unhealthy_next(1, gpus=3)
    rc, out, err = cli(*create_args("nd-gb300-v6", nodes=36), *REPORT)
    assert rc == 1
    assert "UNHEALTHY_NODES" in err and "rack(s) c1-rack000 short" in err and "left out" in err
    assert capacity(azure) == [36]  # nothing deleted: Azure refuses a scale set off a multiple of 18
    assert not [r for r in calls(azure, "POST") if r.path.lower().endswith("/delete")]
    rc, out, err = cli("outputs", *cluster_args(), "--format", "hostfile")
    assert rc == 0, err
    assert "# Left out: c1-000-000000" in out and "SHORT: 17 of 18" in out
    assert len([x for x in out.splitlines() if x and not x.startswith("#")]) == 35


def test_a_node_outside_its_racks_nvlink_domain_is_inconclusive_and_left_out(cli, azure, racks_quota):
    azure.short_rack_next()
    rc, out, err = cli(*create_args("nd-gb300-v6", nodes=36), "--check")
    assert rc == 1 and "HEALTH_INCONCLUSIVE" in err and "Traceback" not in err
    result = json.loads(out)
    # The stray node's GPUs report another NVLink domain than its rack-mates': Azure's rack holds it, the node
    # disagrees, so it is inconclusive and left out of the rack's block.
    (stray,) = [n for n in result["health"]["nodes"] if n["status"] != "passed"]
    assert (stray["status"], stray["reason_code"]) == ("inconclusive", "rack_identity")
    assert sorted(len(r["nodes"]) for r in result["racks"]) == [17, 18]
    assert any(r.get("agrees_with_azure") is False for r in result["racks"])


def test_two_nodes_swapping_rack_identities_delete_nothing_and_exit_non_zero(cli, azure, racks_quota):
    rc, out, err = cli(*create_args("nd-gb300-v6", nodes=36), "-o", "none")
    assert rc == 0, err
    azure.swap_fabric("c1-vmss000/0", "c1-vmss000/18")  # compromised: each reports the other rack's ClusterUUID
    since = len(azure.requests)
    rc, out, err = cli(*create_args("nd-gb300-v6", nodes=18), "--spare-racks", "1", *REPORT)
    assert rc == 1, err
    assert "HEALTH_INCONCLUSIVE" in err and "Traceback" not in err and "while Azure places it in rack" in err
    result = json.loads(out)
    bad = sorted((n["instance_id"], n["status"], n["reason_code"]) for n in result["health"]["nodes"]
                 if n["status"] != "passed")
    assert bad == [("0", "inconclusive", "rack_identity"), ("18", "inconclusive", "rack_identity")]
    assert capacity(azure) == [36] and result["spare_racks"]["removed"] == []
    assert not [r for r in calls(azure, "POST", since=since) if r.path.lower().endswith("/delete")]
    assert not calls(azure, "PUT", since=since, path="Microsoft.Impact")  # nothing reported either
    assert [len(r["nodes"]) for r in result["racks"]] == [17, 17]  # each rack: Azure's, its disputed node left out
    rc, out, err = cli("check", *cluster_args())
    assert rc == 1 and "HEALTH_INCONCLUSIVE" in err
    assert sorted(n["instance_id"] for n in json.loads(out)["nodes"] if n["status"] == "inconclusive") == ["0", "18"]


def test_spare_racks_need_a_rack_profile(cli, azure):
    rc, out, err = cli(*create_args("nd-h100-v5", nodes=2), "--spare-racks", "1")
    assert_cli_error(rc, err, 2, "SPARE_RACKS_WITHOUT_RACKS", "nd-gb300-v6")
    assert not [r for r in azure.requests if r.method in ("PUT", "POST", "PATCH", "DELETE")]


def test_a_partial_rack_is_refused_before_azure_is_asked(cli, azure):
    rc, out, err = cli(*create_args("nd-gb300-v6", nodes=20))
    assert_cli_error(rc, err, 2, "NODES_NOT_RACK_MULTIPLE", "--nodes 18 or 36")
    assert not azure.requests


def test_check_shows_the_racks_and_a_short_one(cli, azure, racks_quota):
    rc, out, err = cli(*create_args("nd-gb300-v6", nodes=36))
    assert rc == 0, err
    azure.make_unhealthy("c1-vmss000/20", gpus=3)
    rc, out, err = cli("check", *cluster_args())
    assert rc == 1
    racks = json.loads(out)["racks"]
    assert [(len(r["nodes"]), r["short"]) for r in racks] == [(18, 0), (17, 1)]
    assert racks[1]["excluded"][0]["hostname"] == "c1-000-00000k"
    rc, out, err = cli("outputs", *cluster_args(), "--format", "hostfile")
    assert "# Left out: c1-000-00000k" in out


def test_simulate_rack_breaks_a_nodes_fabric_and_queues_a_short_rack(run, sim, state_file):
    rc, out, err = run("simulate", "rack", "--short-next", "1", "--simulate-state", state_file)
    assert rc == 0, err
    rc, out, err = sim(*create_args("nd-gb300-v6", nodes=18))
    assert rc == 0, err
    rc, out, err = run("simulate", "rack", "-n", "c1", "--fabric-incomplete", "3", "--simulate-state", state_file)
    assert rc == 0, err
    (node,) = json.loads(out)["nodes"]
    assert node["fabric"]["state"] == "In Progress"
    from azgpu.testing import FakeAzure

    fake = FakeAzure.load(str(state_file))
    domains = [fake.node(f"c1-vmss000/{i}")["fabric"]["clusterUuid"] for i in range(18)]
    assert sorted(domains.count(d) for d in set(domains)) == [1, 17]
    rc, out, err = run("simulate", "rack", "--simulate-state", state_file)
    assert_cli_error(rc, err, 2, "MISSING_ARGUMENT", "--short-next")


def test_the_sku_api_without_a_gpu_count_is_not_drift(azure, session, racks_quota):
    # Microsoft's GB300 test notes the Compute SKU metadata lacks the GPUs capability (R-agentbaker-gb300).
    from deploy_support import request

    from azgpu.deploy import create
    from azgpu.testing.skus import capability, catalog_data

    (sku,) = [s for s in catalog_data()["skus"] if s["name"] == "Standard_ND128isr_GB300_v6"]
    assert capability(sku, "GPUs") is None
    result = create(session, request("nd-gb300-v6", nodes=18, ephemeral_os_disk=True)).as_dict()
    assert not [f for f in result["preflight"]["findings"] if f["code"] == "SKU_DRIFT"]
    (vmss,) = azure.resources(type=VMSS)
    assert vmss["properties"]["virtualMachineProfile"]["storageProfile"]["osDisk"]["diffDiskSettings"]["placement"] \
        == "CacheDisk"


def test_destroy_forgets_what_was_measured_so_a_new_cluster_of_the_same_name_starts_clean(cli, azure, racks_quota):
    azure.unhealthy_next(1, gpus=3)
    rc, out, err = cli(*create_args("nd-gb300-v6", nodes=18), "--check")
    assert rc == 1
    assert cli("destroy", *cluster_args(), "--yes")[0] == 0
    rc, out, err = cli(*create_args("nd-gb300-v6", nodes=18))
    assert rc == 0, err
    rc, out, err = cli("outputs", *cluster_args(), "--format", "hostfile")
    assert "Left out" not in out and len([x for x in out.splitlines() if not x.startswith("#")]) == 18


@pytest.mark.parametrize("command", [["outputs", "--format", "slurm"], ["check"]])
def test_an_instance_that_is_not_an_object_is_an_error_not_a_shorter_list(cli, azure, racks_quota, command):
    """arm.pages dropped an item that was not an object: one rack member fewer, where a rack's deletion rests
    on the list. It is ARM_ANSWER_INVALID, read through the one page reader every listing uses."""
    rc, out, err = cli(*create_args("nd-gb300-v6", nodes=18), "-o", "none")
    assert rc == 0, err
    path = "virtualMachineScaleSets/c1-vmss000/virtualMachines"
    listed = requests.get(f"https://management.azure.com{azure.resources(type=VMSS)[0]['id']}/virtualMachines",
                          params={"api-version": "2026-03-01", "$expand": "instanceView"}, timeout=5).json()
    azure.inject(method="GET", path=f"{path}$", status=200, body={**listed, "value": [*listed["value"][1:], 7]},
                 times=None)
    rc, _out, err = cli(command[0], *cluster_args(), *command[1:])
    assert rc == 1 and "ARM_ANSWER_INVALID" in err and "not an object" in err and "Traceback" not in err, err


def test_instance_pages_that_never_end_are_an_error_not_a_shorter_list(cli, azure, racks_quota):
    """A rack's members come from the scale set's instance pages (whether a rack is deleted rests on them): a
    nextLink back to a page already read, or pages that go on past the bound, is ARM_ANSWER_INVALID, not the
    instances read so far (it followed 1,000 pages and answered with them as the whole list)."""
    rc, out, err = cli(*create_args("nd-gb300-v6", nodes=18), "-o", "none")
    assert rc == 0, err
    path = "virtualMachineScaleSets/c1-vmss000/virtualMachines"
    listed = requests.get(f"https://management.azure.com{azure.resources(type=VMSS)[0]['id']}/virtualMachines",
                          params={"api-version": "2026-03-01", "$expand": "instanceView"}, timeout=5).json()
    again = (f"https://management.azure.com{azure.resources(type=VMSS)[0]['id']}/virtualMachines"
             "?$expand=instanceView&api-version=2026-03-01&$skiptoken=1")
    azure.inject(method="GET", path=f"{path}$", status=200, body={**listed, "nextLink": again}, times=None)
    since = len(azure.requests)
    rc, _out, err = cli("outputs", *cluster_args(), "--format", "slurm")
    assert rc == 1 and "ARM_ANSWER_INVALID" in err and "Traceback" not in err, err
    assert len(calls(azure, "GET", since=since, path=path)) <= 3
