"""Guest Health Reporting before the health gate deletes a node: from Python, the CLI and --simulate,
against the fake's Microsoft.Impact (workload impacts, insights, categories), its provider registration
and the caller's permissions; nothing is deleted when reporting was asked for and cannot happen."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
import requests
from deploy_support import NAME, RG, VM, assert_cli_error, calls, create_args, request

from azgpu.deploy import CheckOptions, CreateOptions, GateOptions, arm, create, ghr
from azgpu.deploy import health_gate as health
from azgpu.deploy.interface import GateHooks
from azgpu.deploy.lifecycle import live_cluster
from azgpu.errors import AzgpuError, ValidationFailed
from azgpu.health.outcome import UnhealthyNodes

IMPACTS = "Microsoft.Impact/workloadImpacts"
NOW = datetime(2026, 3, 14, 9, 0, tzinfo=UTC)
MISSING_GPU = "Resource.Hpc.Unhealthy.HpcMissingGpu"


def ids(azure):
    return sorted(int(vm["instanceId"]) for vm in azure.resources(type=VM))


def reporter(session, **kwargs) -> ghr.Reporter:
    return ghr.Reporter(session, now=lambda: NOW, **kwargs)


def puts(azure, since: int = 0) -> list:
    return calls(azure, "PUT", since=since, path=IMPACTS)


def deletes(azure, since: int = 0) -> list:
    return calls(azure, "POST", since=since, path="/delete")


@pytest.fixture
def h100_quota(azure):
    azure.set_quota("eastus", "Standard NDSH100v5 Family", limit=2000)
    azure.set_quota("eastus", "cores", limit=2000)


@pytest.fixture
def bad_cluster(azure, session):
    """c1: 3 x ND96asr_v4 whose instance 1 lost a GPU, made without reporting."""
    create(session, request("nd-a100-v4", nodes=3))
    azure.make_unhealthy("c1-vmss000/1", gpus=7)
    return azure.node("c1-vmss000/1")


# ------------------------------------------------------------------------------ the loop, from Python


def test_sixteen_h100_with_a_missing_gpu_file_one_report_then_replace_the_node(azure, session, h100_quota):
    azure.unhealthy_next(1, gpus=7)
    ghr_reporter = reporter(session)
    result = create(session, request("nd-h100-v5", nodes=16), CreateOptions(
        gate=GateOptions(replace_unhealthy=True), before_delete=ghr_reporter)).as_dict()
    (impact,) = azure.impacts()
    props = impact["properties"]
    bad = result["health"]["replaced"][0]
    assert props["impactCategory"] == MISSING_GPU
    assert props["additionalProperties"]["PhysicalHostName"] == bad["physical_host"]
    assert props["impactedResourceId"] == bad["resource_id"]
    assert result["health"]["healthy"] and result["health"]["passed"] == 16
    (entry,) = ghr_reporter.entries
    assert (entry["state"], entry["insight"]["status_code"], entry["insight"]["terminal"]) == \
           ("filed", "NodeRemovedFromService", True)


def test_the_report_is_filed_and_followed_before_the_instance_is_deleted(azure, session):
    azure.unhealthy_next(1, gpus=7)
    assert create(session, request("nd-a100-v4", nodes=3), CreateOptions(
        gate=GateOptions(replace_unhealthy=True), before_delete=reporter(session))).healthy
    order = [(r.method, r.path) for r in azure.requests]
    put = order.index(next((m, p) for m, p in order if m == "PUT" and IMPACTS in p))
    insight = max(i for i, (m, p) in enumerate(order) if p.endswith("/insights"))
    delete = order.index(next((m, p) for m, p in order if m == "POST" and p.endswith("/delete")))
    assert put < insight < delete


def test_a_rerun_the_same_day_files_nothing_new(azure, session, bad_cluster):
    first = reporter(session)
    health.gate(session, live_cluster(session, NAME, RG), GateOptions())
    nodes = [n for n in health.check(session, NAME, RG) if not n.passed]
    first.report(nodes)
    mark = len(azure.requests)
    again = reporter(session).report(nodes)
    assert [e["state"] for e in again] == ["already_filed"]
    assert not puts(azure, mark) and len(azure.impacts()) == 1


def test_the_body_carries_the_nodes_host_vm_id_and_the_check(azure, session, bad_cluster):
    (node,) = [n for n in health.check(session, NAME, RG) if not n.passed]
    reporter(session).report([node])
    (impact,) = azure.impacts()
    extra = impact["properties"]["additionalProperties"]
    assert extra["PhysicalHostName"] == bad_cluster["physical_host"]
    assert extra["VmUniqueId"] == azure.get(node.resource_id)["properties"]["vmId"]
    assert extra["Manufacturer"] == "Nvidia"
    assert "check_gpu_count" in impact["properties"]["impactDescription"]
    assert impact["name"] == f"azgpu-c1-vmss000-1-HpcMissingGpu-20260314-{impact['name'][-8:]}"


def test_an_unreachable_node_is_neither_replaced_nor_reported(azure, session):
    azure.unhealthy_next(1, run_command="timeout")
    outcome_reporter = reporter(session)
    result = create(session, request("nd-a100-v4", nodes=3), CreateOptions(
        gate=GateOptions(replace_unhealthy=True, node=CheckOptions(node_timeout=60)), before_delete=outcome_reporter))
    error = result.unhealthy_error()
    assert not result.healthy and isinstance(error, UnhealthyNodes)
    assert error.code == "NODES_UNREACHABLE" and "never replaced or reported" in error.remedy
    assert not azure.impacts() and not outcome_reporter.entries
    assert not calls(azure, "POST", path="/delete")


# ------------------------------------------------------------------------------ preflight: nothing deleted


def test_a_subscription_not_onboarded_stops_before_anything_is_deleted(azure, session, bad_cluster):
    azure.set_provider("Microsoft.Impact", "NotRegistered")
    mark = len(azure.requests)
    with pytest.raises(ValidationFailed) as info:
        health.gate(session, live_cluster(session, NAME, RG), GateOptions(replace_unhealthy=True),
                    GateHooks(before_delete=reporter(session)))
    (finding,) = info.value.findings
    assert finding.code == "GHR_NOT_ONBOARDED" and "NotRegistered" in finding.message
    assert "az provider register --namespace Microsoft.Impact" in finding.remedy and "tenant ID" in finding.remedy
    assert ids(azure) == [0, 1, 2] and not deletes(azure, mark) and not puts(azure, mark)


def test_a_caller_without_the_reporter_role_stops_before_anything_is_deleted(azure, session, bad_cluster):
    azure.set_permissions(["*/read"])
    with pytest.raises(ValidationFailed) as info:
        reporter(session).preflight()
    (finding,) = info.value.findings
    assert finding.code == "GHR_NOT_PERMITTED" and "Microsoft.Impact/workloadImpacts/write" in finding.message
    assert "Azure Impact Reporter" in finding.remedy


def test_both_problems_are_reported_at_once(azure, session):
    azure.set_provider("Microsoft.Impact", "Unregistered")
    azure.set_permissions(["Microsoft.Compute/*"])
    with pytest.raises(ValidationFailed) as info:
        ghr.preflight(session)
    assert [f.code for f in info.value.findings] == ["GHR_NOT_ONBOARDED", "GHR_NOT_PERMITTED"]


@pytest.mark.parametrize("actions, not_actions, ok", [
    (["*"], [], True),
    (["Microsoft.Impact/WorkloadImpacts/*"], [], True),  # Learn: the Impact Reporter role's action
    (["microsoft.impact/*"], [], True),
    (["*"], ["Microsoft.Impact/*/write"], False),
    (["*/read"], [], False),
])
def test_permissions_with_wildcards_in_any_case(azure, session, actions, not_actions, ok):
    azure.set_permissions(actions, not_actions)
    if ok:
        assert ghr.preflight(session)["permissions_checked"] is True
    else:
        with pytest.raises(ValidationFailed):
            ghr.preflight(session)


def test_a_report_azure_refuses_deletes_nothing(azure, session, bad_cluster):
    azure.inject(method="PUT", path=IMPACTS, status=403)
    mark = len(azure.requests)
    with pytest.raises(ghr.ReportingUnavailable) as info:
        health.gate(session, live_cluster(session, NAME, RG), GateOptions(replace_unhealthy=True),
                    GateHooks(before_delete=reporter(session)))
    assert info.value.code == "GHR_NOT_PERMITTED" and info.value.exit_code == 2
    assert ids(azure) == [0, 1, 2] and not deletes(azure, mark)


def test_declining_the_prompt_reports_and_deletes_nothing(azure, session, bad_cluster):
    asked = []
    with pytest.raises(ghr.ReportingUnavailable) as info:
        health.gate(session, live_cluster(session, NAME, RG), GateOptions(replace_unhealthy=True), GateHooks(
            before_delete=reporter(session, confirm=lambda reports: asked.extend(reports) or False)))
    assert info.value.code == "GHR_DECLINED" and "--yes" in info.value.remedy
    assert [r.category for r in asked] == [MISSING_GPU]
    assert not azure.impacts() and ids(azure) == [0, 1, 2]


def test_a_category_the_live_listing_does_not_offer_is_not_sent(azure, session, bad_cluster):
    azure.set_impact_categories(["Resource.Hpc.Unhealthy.IBPortDown"])  # a listing with HPC categories speaks
    with pytest.raises(ghr.ReportingUnavailable) as info:
        health.gate(session, live_cluster(session, NAME, RG), GateOptions(replace_unhealthy=True),
                    GateHooks(before_delete=reporter(session)))
    assert info.value.code == "GHR_CATEGORY_NOT_OFFERED" and MISSING_GPU in info.value.message
    assert not azure.impacts() and ids(azure) == [0, 1, 2]


# ------------------------------------------------------------------------------ Azure's answers


def test_throttling_is_waited_out_as_retry_after_says(azure, session, bad_cluster):
    (node,) = [n for n in health.check(session, NAME, RG) if not n.passed]
    fault = azure.inject(method="PUT", path=IMPACTS, status=429, retry_after=7)
    (entry,) = reporter(session).report([node])
    assert fault.fired == 1 and 7 in azure.sleeps
    assert entry["state"] == "filed" and len(azure.impacts()) == 1


def test_a_vm_that_is_already_gone_is_not_reported_and_not_an_error(azure, session, bad_cluster):
    (node,) = [n for n in health.check(session, NAME, RG) if not n.passed]
    session.compute.virtual_machine_scale_sets.begin_delete_instances(RG, "c1-vmss000", {"instanceIds": ["1"]}).result()
    (entry,) = reporter(session).report([node])
    assert entry["state"] == "vm_gone" and "not found" in entry["reason"] and not azure.impacts()


def test_a_name_taken_between_the_get_and_the_put_is_our_earlier_report(azure, session, bad_cluster):
    (node,) = [n for n in health.check(session, NAME, RG) if not n.passed]
    reporter(session).report([node])
    mark = len(azure.requests)
    missed = azure.inject(method="GET", path=IMPACTS + "/azgpu-", status=404, code="ResourceNotFound")
    (entry,) = reporter(session).report([node])
    assert missed.fired == 1 and [r.status for r in puts(azure, mark)] == [409]  # the fake refuses the name
    assert entry["state"] == "already_filed" and len(azure.impacts()) == 1


def test_insights_are_followed_no_longer_than_the_timeout(azure, session, bad_cluster):
    azure.set_impact_insights([])  # Azure never answers
    (node,) = [n for n in health.check(session, NAME, RG) if not n.passed]
    before = azure.now()
    (entry,) = reporter(session, insight_timeout=120).report([node])
    assert entry["insight"]["status_code"] is None and entry["insight_followed_seconds"] <= 120
    assert azure.now() - before <= 120
    assert len(calls(azure, "GET", path="/insights")) == 5  # at 0, 30, 60, 90 and 120 s


def test_an_insight_timeout_of_zero_reads_the_insights_once(azure, session, bad_cluster):
    (node,) = [n for n in health.check(session, NAME, RG) if not n.passed]
    (entry,) = reporter(session, insight_timeout=0).report([node])
    assert len(calls(azure, "GET", path="/insights")) == 1 and entry["insight"]["insights"] == 0


def test_a_terminal_too_many_requests_insight_ends_the_wait(azure, session, bad_cluster):
    azure.set_impact_insights([{"statusCode": "TooManyRequests", "terminalInsight": True, "after": 1}])
    (node,) = [n for n in health.check(session, NAME, RG) if not n.passed]
    (entry,) = reporter(session).report([node])
    assert (entry["insight"]["status_code"], entry["insight"]["terminal"]) == ("TooManyRequests", True)


def test_the_insight_timeout_is_checked():
    with pytest.raises(ghr.ReportingUnavailable) as info:
        ghr.validate_options(insight_timeout=-1)
    assert info.value.code == "INVALID_INSIGHT_TIMEOUT"


# ------------------------------------------------------------------------------ what was filed, from Azure


def test_reports_are_read_from_azure_for_the_cluster_only(azure, session, bad_cluster):
    (node,) = [n for n in health.check(session, NAME, RG) if not n.passed]
    reporter(session).report([node])
    create(session, request("nd-a100-v4", nodes=1, name="c2"))
    other = azure.resources(type=VM, resource_group=RG)
    c2 = next(vm for vm in other if "/c2-vmss000/" in vm["id"])
    # A report another tool filed (AzNHC's triggerGHR.sh uses a GUID name) for the other cluster's node.
    body = {"properties": {"startDateTime": "2026-03-14T08:00:00Z", "impactCategory": "Resource.Hpc.Unhealthy.NvLink",
                           "impactedResourceId": c2["id"], "additionalProperties": {"PhysicalHostName": "X"}}}
    arm.send(session, "PUT", f"/subscriptions/{azure.subscription_id}/providers/Microsoft.Impact/workloadImpacts/"
                              "0f8fad5b-d9cb-469f-a165-70867728950e", ghr.API_VERSION, body)
    mine = ghr.list_reports(session, RG, NAME)
    assert [(r["category"], r["scale_set"], r["instance_id"], r["by_azgpu"]) for r in mine] == \
           [(MISSING_GPU, "c1-vmss000", "1", True)]
    assert mine[0]["status_code"] == "NodeRemovedFromService"
    everything = ghr.list_reports(session, RG)
    assert {r["scale_set"] for r in everything} == {"c1-vmss000", "c2-vmss000"}
    assert ghr.list_reports(session, "another-rg") == []


@pytest.mark.parametrize("link", ["https://collector.example/steal-token", "https://management.azure.com.example.com/x",
                                  "https://x@management.azure.com/x", "http://management.azure.com/x",
                                  "https://management.azure.com:8443/x", 7])
def test_a_listing_page_is_followed_only_to_resource_manager(azure, session, link):
    """Every request carries the session's ARM token: a nextLink anywhere else is ARM_ANSWER_INVALID, the one
    check (arm.arm_url in arm.send) that reservations' pages and What-If's status URLs use too."""
    azure.inject(method="GET", path=r"/providers/Microsoft.Impact/workloadImpacts$", status=200,
                 body={"value": [], "nextLink": link}, times=1)
    since = len(azure.requests)
    with pytest.raises(AzgpuError) as info:
        ghr.list_reports(session, RG, NAME)
    assert info.value.code == "ARM_ANSWER_INVALID"
    assert len(azure.requests) - since == 1  # the listing, and nothing after it


# ------------------------------------------------------------------------------ the CLI


REPORT = ("--check", "--replace-unhealthy", "--report-to-azure")


def test_create_report_to_azure_needs_replace_unhealthy(cli, azure):
    rc, out, err = cli(*create_args("nd-a100-v4"), "--check", "--report-to-azure", "--yes")
    assert_cli_error(rc, err, 2, "REPORT_NEEDS_REPLACE", "provision report")
    assert not azure.requests


def test_create_report_to_azure_without_a_terminal_needs_yes(cli, azure):
    rc, out, err = cli(*create_args("nd-a100-v4"), *REPORT)
    assert_cli_error(rc, err, 2, "CONFIRMATION_REQUIRED", "--yes")
    assert not azure.requests


def test_create_on_a_subscription_not_onboarded_exits_2_and_keeps_every_instance(cli, azure, bad_cluster):
    azure.set_provider("Microsoft.Impact", "NotRegistered")
    mark = len(azure.requests)
    rc, out, err = cli(*create_args("nd-a100-v4", nodes=3), *REPORT, "--yes")
    assert_cli_error(rc, err, 2, "GHR_NOT_ONBOARDED", "Microsoft.Impact")
    assert "onboard" in err and ids(azure) == [0, 1, 2]
    assert not calls(azure, "PUT", "POST", "PATCH", "DELETE", since=mark)


def test_create_reports_then_replaces_and_prints_the_reports(cli, azure):
    azure.unhealthy_next(1, ib_down="mlx5_ib2")
    rc, out, err = cli(*create_args("nd-a100-v4", nodes=3), *REPORT, "--yes", "--insight-timeout", "60")
    assert rc == 0, err
    (entry,) = json.loads(out)["guest_health_reports"]
    assert entry["category"] == "Resource.Hpc.Unhealthy.IBPortDown" and entry["state"] == "filed"
    assert entry["insight"]["status_code"] == "AcknowledgedUnhealthy" and entry["insight"]["terminal"] is False


def test_create_without_the_flag_reports_nothing(cli, azure):
    azure.unhealthy_next(1, gpus=7)
    rc, out, err = cli(*create_args("nd-a100-v4", nodes=3), "--check", "--replace-unhealthy")
    assert rc == 0, err
    assert "guest_health_reports" not in json.loads(out)
    assert not calls(azure, path="Microsoft.Impact") and not calls(azure, path="Microsoft.Authorization")


def test_report_command_files_once_per_day(cli, azure, bad_cluster):
    rc, out, err = cli("report", "-n", NAME, "-g", RG, "--yes", "-o", "json")
    assert rc == 0, err
    first = json.loads(out)
    assert (first["failed"], first["reports_filed"]) == (1, 1)
    assert ids(azure) == [0, 1, 2]  # reporting deletes nothing
    rc, out, err = cli("report", "-n", NAME, "-g", RG, "--yes", "-o", "json")
    assert (json.loads(out)["reports_filed"], json.loads(out)["reports_existing"]) == (0, 1)
    assert len(azure.impacts()) == 1


def test_report_command_shows_each_node_in_a_pipe(cli, azure, bad_cluster):
    rc, out, err = cli("report", "-n", NAME, "-g", RG, "--yes", "-o", "none")
    assert rc == 0, err
    lines = err.splitlines()
    # One line per node as its verdict arrives, as create shows each resource, before the report lines.
    assert sum(1 for line in lines if line.startswith("c1-000-00000") and "): " in line) == 3
    assert any(": failed: " in line for line in lines)


def test_report_command_checks_only_the_named_node(cli, azure, bad_cluster):
    rc, out, err = cli("report", "-n", NAME, "-g", RG, "--yes", "--node", "c1-vmss000/2", "-o", "json")
    assert rc == 0, err
    assert json.loads(out)["nodes_checked"] == 1 and not azure.impacts()
    assert len(calls(azure, "POST", path="/runCommand")) == 1


def test_report_command_refuses_an_unknown_node(cli, azure, bad_cluster):
    rc, out, err = cli("report", "-n", NAME, "-g", RG, "--yes", "--node", "c1-000-00zzzz")
    assert_cli_error(rc, err, 2, "UNKNOWN_NODE", "SCALESET/INSTANCE_ID")


def test_report_command_without_a_terminal_needs_yes(cli, azure, bad_cluster):
    mark = len(azure.requests)
    rc, out, err = cli("report", "-n", NAME, "-g", RG)
    assert_cli_error(rc, err, 2, "CONFIRMATION_REQUIRED", "--yes")
    assert len(azure.requests) == mark


def test_reports_command_lists_the_clusters_reports_as_a_table(cli, azure, bad_cluster):
    cli("report", "-n", NAME, "-g", RG, "--yes", "-o", "none")
    rc, out, err = cli("reports", "-n", NAME, "-g", RG, "-o", "table")
    assert rc == 0, err
    header, rule, row = out.splitlines()
    assert header.split() == ["Impact", "Node", "Physical", "host", "Insight", "Terminal"]
    assert "c1-vmss000/1" in row and "HpcMissingGpu" in row and "NodeRemovedFromService" in row
    rc, out, err = cli("reports", "-g", RG, "--query", "[].physical_host", "-o", "tsv")
    assert out.strip() == bad_cluster["physical_host"]


def test_reports_command_on_a_subscription_not_onboarded_says_so(cli, azure):
    azure.set_provider("Microsoft.Impact", "NotRegistered")
    rc, out, err = cli("reports", "-g", RG)
    assert_cli_error(rc, err, 2, "GHR_NOT_ONBOARDED", "az provider register")


# ------------------------------------------------------------------------------ --simulate


def test_simulated_sixteen_h100_with_a_missing_gpu_report_replace_and_rerun(sim, run, state_file):
    run("simulate", "fault", "--next", "1", "--gpus", "7", "--simulate-state", state_file)
    args = [*create_args("nd-h100-v5", nodes=16), *REPORT, "--yes"]
    rc, out, err = sim(*args)
    assert rc == 0, err
    result = json.loads(out)
    (entry,) = result["guest_health_reports"]
    assert entry["category"] == MISSING_GPU and entry["state"] == "filed"
    assert entry["physical_host"] == result["health"]["replaced"][0]["physical_host"]
    assert entry["insight"]["status_code"] == "NodeRemovedFromService"
    assert result["health"]["healthy"] and result["health"]["passed"] == 16
    rc, out, err = sim(*args)
    assert rc == 0, err
    assert json.loads(out)["guest_health_reports"] == []
    rc, out, err = sim("reports", "-g", RG, "-n", NAME)
    (listed,) = json.loads(out)
    assert listed["impact"] == entry["impact"] and listed["status_code"] == "NodeRemovedFromService"


def test_simulated_subscription_not_onboarded_loses_no_instance(sim, run, state_file):
    sim(*create_args("nd-a100-v4", nodes=3), "-o", "none")
    run("simulate", "fault", "-n", NAME, "--instance", "1", "--gpus", "7", "--simulate-state", state_file)
    rc, out, err = run("simulate", "ghr", "--provider-state", "NotRegistered", "--simulate-state", state_file)
    assert rc == 0, err
    rc, out, err = sim(*create_args("nd-a100-v4", nodes=3), *REPORT, "--yes")
    assert_cli_error(rc, err, 2, "GHR_NOT_ONBOARDED", "Microsoft.Impact")
    rc, out, err = sim("status", "-n", NAME, "-g", RG)
    assert sorted(i["instance_id"] for s in json.loads(out)["scale_sets"] for i in s["instances"]) == ["0", "1", "2"]


def test_simulate_ghr_needs_something_to_set(run, state_file):
    rc, out, err = run("simulate", "ghr", "--simulate-state", state_file)
    assert_cli_error(rc, err, 2, "MISSING_ARGUMENT", "--provider-state")


def test_a_listing_whose_next_page_goes_round_is_an_error_not_a_thousand_copies(azure, session, bad_cluster):
    """One report, listed on a page whose nextLink names the same page again: ARM_ANSWER_INVALID after the second
    read. It read 1,000 pages, then asked Azure for the insight of each of the 1,000 copies of the report."""
    (node,) = [n for n in health.check(session, NAME, RG) if not n.passed]
    reporter(session).report([node])
    listing = f"{arm.BASE}/subscriptions/{azure.subscription_id}/providers/{IMPACTS}?api-version={ghr.API_VERSION}"
    page = requests.get(listing, timeout=5).json()
    assert len(page["value"]) == 1
    azure.inject(method="GET", path=r"/providers/Microsoft.Impact/workloadImpacts$", status=200,
                 body={**page, "nextLink": listing + "&$skiptoken=2"}, times=None)
    since = len(azure.requests)
    with pytest.raises(AzgpuError) as info:
        ghr.list_reports(session, RG, NAME)
    assert info.value.code == "ARM_ANSWER_INVALID" and "already read" in info.value.message
    assert len(azure.requests) - since <= 3
