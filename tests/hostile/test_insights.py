"""Hostile Guest Health Reporting answers (data/insights.json): a report's insights mutated from Learn's
example, and the answer to the report's own PUT. The report of the proven-faulty node stands; what Azure
says of it is read field by field (a malformed insight is not shown, never a traceback), status URLs lead
only to Resource Manager, every wait is bounded, and nothing is deleted (`report` deletes nothing)."""

from __future__ import annotations

import json

import pytest
from corpus import FIXTURES, assert_clean, error_code, ids, load, mutated

INSIGHTS = load("insights.json")
CASES = INSIGHTS["cases"]
BASE = json.loads((FIXTURES / "azure" / "impact" / "ghr-insights-learn.json").read_text())
KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJOgAYClhajeh3m7rJp5Bf+XHzOywcIepjITM9B6OJMg t"
STATUS = "/subscriptions/00000000-0000-0000-0000-000000000000/providers/Microsoft.Impact/operations/settle1"


@pytest.fixture
def bad_cluster(cli, azure):
    rc, out, err = cli("create", "--profile", "nd-a100-v4", "-n", "c1", "-g", "rg", "-l", "eastus", "--nodes", "3",
                       "--ssh-key", KEY, "-o", "none")
    assert rc == 0, err
    azure.make_unhealthy("c1-vmss000/1", gpus=7)


@pytest.mark.parametrize("case", CASES, ids=ids(CASES))
def test_an_insights_answer_gets_its_exact_reading(cli, azure, bad_cluster, case):
    if "put" in case:
        put = case["put"]
        headers = {k: ("https://management.azure.com" + STATUS if v == "@status" else v)
                   for k, v in put["headers"].items()}
        azure.inject(method="PUT", path=r"/workloadImpacts/azgpu-[^/]+$", status=put["status"], body=put["body"],
                     headers=headers)
        status_body = case["status_body"]["replace"] if "status_body" in case else {"status": "Succeeded"}
        azure.inject(method="GET", path=STATUS + "$", status=200, body=status_body, times=None)
    else:  # Learn's example as it is, or mutated
        body = case["body"]["replace"] if "body" in case else mutated(BASE, case)
        azure.inject(method="GET", path=r"/insights$", status=200, body=body, times=None)
    since = len(azure.requests)
    rc, out, err = cli("report", "-n", "c1", "-g", "rg", "--yes", "--insight-timeout", "60", "-o", "json")
    assert_clean(rc, out, err)
    expect = case["expect"]
    assert rc == expect["rc"], err
    assert not [r for r in azure.requests[since:] if r.method == "DELETE" or r.path.lower().endswith("/delete")]
    if "code" in expect:
        assert error_code(err) == expect["code"], err
    if "max_sleep" in expect:
        assert max(azure.sleeps, default=0) <= expect["max_sleep"], azure.sleeps
    if "filed" in expect:
        assert len(azure.impacts()) == expect["filed"]
    if rc:
        return
    (entry,) = json.loads(out)["guest_health_reports"]
    if expect.get("vm_gone"):
        assert entry["state"] == "vm_gone" and entry["reason"] == "the impacted VM no longer exists"
        return
    if "status_code" in expect:
        insight = entry.get("insight") or {}
        assert (insight.get("status_code"), insight.get("terminal", False)) == (expect["status_code"],
                                                                               expect["terminal"])
        assert bool(entry.get("insight_error")) == expect["insight_error"], entry
