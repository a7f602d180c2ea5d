"""Guest Health Reporting against Azure's published bodies (tests/fixtures/azure/impact, each with its
source): replayed through azgpu's reporter under the real pipeline, and the fake's answers compared
with their shape."""

from __future__ import annotations

import json
import re
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

import pytest
import responses
from deploy_support import NAME, RG, request

from azgpu.deploy import arm, create, ghr
from azgpu.deploy import health_gate as health
from azgpu.deploy.session import Session
from azgpu.health.results import Failure, NodeResult
from azgpu.testing import FakeCredential

IMPACT = Path(__file__).resolve().parents[1] / "fixtures" / "azure" / "impact"
SUB = "00000000-0000-0000-0000-000000000000"
ARM = "https://management.azure.com"
NOW = datetime(2026, 3, 14, 9, 0, tzinfo=UTC)
VM_ID = (f"/subscriptions/{SUB}/resourceGroups/{RG}/providers/Microsoft.Compute/virtualMachineScaleSets/c1-vmss000"
         "/virtualMachines/4")


def example(name: str) -> dict:
    return json.loads((IMPACT / f"{name}.json").read_text())


def body(name: str, status: str = "200"):
    return example(name)["responses"][status]["body"]


@pytest.fixture
def live():
    """A Session against nothing but what a test serves: any other request fails, none goes out."""
    return Session(SUB, FakeCredential(), polling_interval=0, sleep=lambda seconds: None)


@contextmanager
def serving(*answers: tuple[str, str, object, int]):
    """Serve (method, path regex, body, status) in turn; every one must be asked for."""
    with responses.RequestsMock(assert_all_requests_are_fired=True) as mock:
        for method, path, payload, status in answers:
            mock.add(method, re.compile(re.escape(ARM) + path + r"(\?.*)?$"), json=payload, status=status)
        yield mock


def node() -> NodeResult:
    missing = Failure("gpu_count", "missing_gpu", "nvidia-smi lists 7 of 8 GPUs", "8", "7")
    return NodeResult("c1-vmss000", "4", VM_ID, "c1-000-000004", "failed", checker="fallback", failures=(missing,),
                      physical_host="AMS081063509028", vm_id="5f0a3c2e-1111-4c4c-9e9e-0123456789ab",
                      vm_size="Standard_ND96asr_v4")


IMPACTS = r"/subscriptions/[^/]+/providers/Microsoft\.Impact/workloadImpacts/[^/?]+"


def keys(value, path: str = "") -> set[str]:
    """Every key path of a JSON body (list items merged)."""
    out: set[str] = set()
    if isinstance(value, dict):
        for k, v in value.items():
            out.add(f"{path}.{k}")
            out |= keys(v, f"{path}.{k}")
    elif isinstance(value, list):
        for v in value:
            out |= keys(v, f"{path}[]")
    return out


# ------------------------------------------------------------------------------ replayed through azgpu


def test_a_published_impact_answering_the_get_means_nothing_is_filed_again(live):
    # The spec's 2023-02-01-preview example as the answer to azgpu's GET-first: no PUT follows.
    with serving(("GET", IMPACTS, body("WorkloadImpact_Get"), 200),
                 ("GET", IMPACTS + "/insights", {"value": []}, 200)):
        (entry,) = _report(live, node())
    assert entry["state"] == "already_filed"


def _report(session, one: NodeResult):
    reporter = ghr.Reporter(session, now=lambda: NOW, insight_timeout=0)
    reporter.checked = {"offered_hpc_categories": None}  # the preflight is replayed on its own below
    return reporter.report([one])


def test_the_published_create_answer_counts_as_filed(live):
    with serving(("GET", IMPACTS, {"error": {"code": "ResourceNotFound", "message": "not found"}}, 404),
                 ("PUT", IMPACTS, body("performanceImpact"), 200),
                 ("GET", IMPACTS + "/insights", body("Insights_ListBySubscription"), 200)) as mock:
        (entry,) = _report(live, node())
        put, insights = mock.calls[1].request, mock.calls[2].request
    assert entry["state"] == "filed" and "api-version=2023-02-01-preview" in put.url
    assert json.loads(put.body)["properties"]["impactCategory"] == "Resource.Hpc.Unhealthy.HpcMissingGpu"
    assert "api-version=2025-01-01-preview" in insights.url
    # The spec's insight example has no additionalDetails: nothing terminal can be read from it.
    assert entry["insight"]["terminal"] is False and entry["insight"]["insights"] == 1


def test_learns_insight_example_ends_the_wait_at_node_removed_from_service(live):
    with serving(("GET", IMPACTS, {"error": {"code": "ResourceNotFound", "message": "not found"}}, 404),
                 ("PUT", IMPACTS, body("performanceImpact"), 200),
                 ("GET", IMPACTS + "/insights", example("ghr-insights-learn"), 200)):
        reporter = ghr.Reporter(live, now=lambda: NOW)
        reporter.checked = {"offered_hpc_categories": None}
        (entry,) = reporter.report([node()])
    assert (entry["insight"]["status_code"], entry["insight"]["terminal"]) == ("NodeRemovedFromService", True)


def test_learns_permissions_example_lets_a_contributor_report(live):
    provider = {"id": f"/subscriptions/{SUB}/providers/Microsoft.Impact", "namespace": "Microsoft.Impact",
                "registrationState": "Registered"}
    with serving(("GET", r"/subscriptions/[^/]+/providers/Microsoft\.Impact", provider, 200),
                 ("GET", r"/subscriptions/[^/]+/providers/Microsoft\.Authorization/permissions",
                  example("permissions-subscription-learn"), 200),
                 ("GET", r"/subscriptions/[^/]+/providers/Microsoft\.Impact/impactCategories",
                  body("ImpactCategories_ListBySubscription"), 200)):
        checked = ghr.preflight(live)
    # "*" minus Microsoft.Authorization writes allows workload impacts; the spec's category listing
    # names no Resource.Hpc category, so it says nothing about GHR's.
    assert checked["permissions_checked"] is True and checked["offered_hpc_categories"] is None


def test_learns_reader_permission_alone_may_not_report():
    readers = [p for p in example("permissions-subscription-learn")["value"] if p["actions"] == ["*/read"]]
    assert readers and not ghr.allowed(readers, ghr.WRITE_ACTION) and ghr.allowed(readers, ghr.READ_ACTION)


def test_the_published_listing_of_a_plain_vm_is_not_a_clusters_report(live):
    with serving(("GET", r"/subscriptions/[^/]+/providers/Microsoft\.Impact/workloadImpacts",
                  body("WorkloadImpact_ListBySubscription"), 200)):
        assert ghr.list_reports(live, "resource-rg") == []


# ------------------------------------------------------------------------------ the fake's shape


@pytest.fixture
def filed(azure, session):
    create(session, request("nd-a100-v4", nodes=1))
    azure.make_unhealthy("c1-vmss000/0", gpus=7)
    (bad,) = [n for n in health.check(session, NAME, RG) if not n.passed]
    reporter = ghr.Reporter(session, now=lambda: NOW)
    (entry,) = reporter.report([bad])
    return entry


def test_the_fakes_impact_has_the_examples_shape(azure, session, filed):
    fake = arm.json_body(arm.send(session, "GET", filed["impact_id"], ghr.API_VERSION))
    real = body("WorkloadImpact_Get")
    # connectivity and workload belong to other kinds of impact; Learn's GHR body has neither.
    only_real = {".properties.connectivity", ".properties.workload", ".properties.endDateTime"}
    # The fake adds ARM's systemData and provisioningState, as the later api-versions' examples show.
    only_fake = {".systemData", ".properties.provisioningState"}
    real_keys = {k for k in keys(real) if not k.startswith(".properties.additionalProperties.")}
    fake_keys = {k for k in keys(fake) if not k.startswith(".properties.additionalProperties.")}
    assert {k for k in real_keys - fake_keys if not any(k.startswith(o) for o in only_real)} == set()
    assert {k for k in fake_keys - real_keys if not any(k.startswith(o) for o in only_fake)} == set()


def test_the_fakes_insights_have_learns_shape(azure, session, filed):
    fake = arm.json_body(arm.send(session, "GET", filed["impact_id"] + "/insights", ghr.INSIGHTS_API_VERSION))
    real = example("ghr-insights-learn")
    assert keys(fake) == keys(real)
    assert [i["properties"]["additionalDetails"] for i in fake["value"]] == \
           [i["properties"]["additionalDetails"] for i in real["value"]]


def test_the_fakes_category_listing_is_the_examples(azure, session):
    path = f"/subscriptions/{azure.subscription_id}/providers/Microsoft.Impact/impactCategories"
    fake = arm.json_body(arm.send(session, "GET", path, ghr.API_VERSION))
    assert fake == body("ImpactCategories_ListBySubscription")


def test_the_fakes_permissions_have_learns_shape(azure, session):
    path = f"/subscriptions/{azure.subscription_id}/providers/Microsoft.Authorization/permissions"
    fake = arm.json_body(arm.send(session, "GET", path, ghr.PERMISSIONS_API_VERSION))
    assert keys(example("permissions-subscription-learn")) <= keys(fake)
