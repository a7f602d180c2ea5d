"""Quota increases through Microsoft.Quota: filed from the preflight's shortfall, followed by id, and
an escalated request ends with its id and Learn's remedy (exit 1). The bodies sent are the REST
specification's (patchComputeQuotaRequest.json), and its answers are read through the real SDK."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import responses
from deploy_support import LOCATION, RG, calls, create_args, request, writes

from azgpu.deploy import quota_requests as qr
from azgpu.deploy.session import Session
from azgpu.testing import FakeCredential

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "azure" / "quota"
A100_FAMILY = "standardNDASv4_A100Family"
NEEDED = 2 * 96
ARM = "https://management.azure.com"
SUB = "00000000-0000-0000-0000-000000000000"


def example(name: str) -> dict:
    return json.loads((FIXTURES / f"{name}.json").read_text())


def norm(name: str) -> str:
    return name.replace(" ", "").lower()


def yes(short) -> bool:
    return True


# -- shortfall and filing over the fake -----------------------------------------------------------

def test_shortfall_is_the_preflights_arithmetic(azure, session):
    azure.set_quota(LOCATION, A100_FAMILY, limit=100, usage=10)
    short = qr.shortfalls(session, request())
    assert [(norm(s.quota), s.usage, s.limit, s.needed, s.new_limit) for s in short] == \
        [(norm(A100_FAMILY), 10, 100, NEEDED, 10 + NEEDED)]


def test_spot_asks_for_the_regional_spot_quota_only(azure, session):
    azure.set_quota(LOCATION, "lowPriorityCores", limit=10)
    azure.set_quota(LOCATION, A100_FAMILY, limit=0)
    short = qr.shortfalls(session, request(spot=True))
    assert [s.quota for s in short] == ["lowPriorityCores"]


def test_fallback_locations_are_asked_for_too(azure, session):
    azure.set_quota(LOCATION, A100_FAMILY, limit=0)
    azure.set_quota("westus2", A100_FAMILY, limit=0)
    short = qr.shortfalls(session, request(), ["westus2"])
    assert sorted(s.location for s in short) == ["eastus", "westus2"]


def test_the_body_sent_is_the_specifications(azure, session):
    azure.set_quota(LOCATION, A100_FAMILY, limit=100)
    result = qr.request_increases(session, request(), confirm=yes)
    sent = calls(azure, "PATCH", path="/providers/Microsoft.Quota/quotas/")
    assert len(sent) == 1 and writes(azure) == sent, "nothing but the quota request is written"
    spec_body = example("patchComputeQuotaRequest")["parameters"]["createQuotaRequest"]
    assert set(sent[0].body) == set(spec_body) and set(sent[0].body["properties"]) == set(spec_body["properties"])
    assert sent[0].body["properties"]["limit"] == {"limitObjectType": "LimitValue", "value": NEEDED}
    assert sent[0].api_version == "2025-09-01"
    prefix = f"/providers/Microsoft.Compute/locations/{LOCATION}/providers/Microsoft.Quota/quotas/"
    assert prefix in sent[0].path and norm(sent[0].path.rsplit("/", 1)[1]) == norm(A100_FAMILY)
    assert result["requests"][0]["state"] == "Succeeded"
    assert azure.usages(LOCATION) and qr.shortfalls(session, request()) == []


def test_declined_files_nothing(azure, session):
    azure.set_quota(LOCATION, A100_FAMILY, limit=100)
    result = qr.request_increases(session, request(), confirm=lambda short: False)
    assert result["declined"] and writes(azure) == []


def test_escalated_request_raises_with_its_id_and_remedy(azure, session):
    azure.set_quota(LOCATION, A100_FAMILY, limit=100)
    azure.set_quota_outcome(LOCATION, A100_FAMILY, "escalate")
    with pytest.raises(Exception) as info:
        qr.request_increases(session, request(), confirm=yes)
    err = info.value
    assert err.code == "QUOTA_REQUEST_ESCALATED" and err.exit_code == 1
    request_id = err.result["requests"][0]["id"]
    assert request_id in err.message and "ContactSupport" in err.message
    assert "support request" in err.remedy and "per-vm-quota-requests" in err.remedy
    assert qr.shortfalls(session, request()), "an escalated request raises no limit"


# -- the SDK reads the specification's own answers ------------------------------------------------

@pytest.fixture
def live():
    return Session(SUB, FakeCredential(), polling_interval=0)


def test_replay_patch_answer_gives_the_request_id(live):
    ex = example("patchComputeQuotaRequest")
    answer = ex["responses"]["200"]
    with responses.RequestsMock() as mock:
        mock.add("PATCH",
                 re.compile(re.escape(ARM)
                            + r"/subscriptions/.*/providers/Microsoft\.Quota/quotas/standardFSv2Family.*"),
                 json=answer["body"], headers={"Location": answer["headers"]["location"]})
        filed = qr.file(live, qr.Shortfall("eastus", "standardFSv2Family", "Standard FSv2 Family vCPUs", 0, 0, 10))
        sent = json.loads(mock.calls[0].request.body)
    assert sent == ex["parameters"]["createQuotaRequest"]
    assert filed.id == "2B5C8515-37D8-4B6A-879B-CD641A2CF605"


def test_replay_202_answer_gives_the_request_id_from_the_operation_status(live):
    answer = example("patchComputeQuotaRequest")["responses"]["202"]
    with responses.RequestsMock() as mock:
        mock.add("PATCH", re.compile(re.escape(ARM) + r"/.*"), status=202,
                 headers={"Location": answer["headers"]["location"]})
        filed = qr.file(live, qr.Shortfall("eastus", "standardFSv2Family", "x", 0, 0, 10))
    assert filed.id == "2B5C8515-37D8-4B6A-879B-CD641A2CF605"


@pytest.mark.parametrize("name, state, code", [("getQuotaRequestStatusById", "Succeeded", ""),
                                               ("getQuotaRequestStatusFailed", "Failed", "ContactSupport")])
def test_replay_status(live, name, state, code):
    with responses.RequestsMock() as mock:
        mock.add("GET", re.compile(re.escape(ARM) + r"/.*/providers/Microsoft\.Quota/quotaRequests/2B5C8515.*"),
                 json=example(name)["responses"]["200"]["body"])
        found = qr.read(live, "eastus", "2B5C8515-37D8-4B6A-879B-CD641A2CF605")
    assert (found.state, found.error_code, found.quota, found.limit) == (state, code, "standardNCPromoFamily", 50)
    assert found.escalated == (state == "Failed")


@pytest.mark.parametrize("name", ["getQuotaRequestStatusById", "getQuotaRequestStatusFailed"])
def test_fake_status_has_the_examples_shape(azure, session, name):
    from test_azure_examples import shape_differences

    azure.set_quota(LOCATION, A100_FAMILY, limit=100)
    if name.endswith("Failed"):
        azure.set_quota_outcome(LOCATION, A100_FAMILY, "escalate")
    filed = qr.file(session, qr.shortfalls(session, request())[0])
    path = f"/subscriptions/{azure.subscription_id}/providers/Microsoft.Compute/locations/{LOCATION}/providers/" \
           f"Microsoft.Quota/quotaRequests/{filed.id}"
    fake = session.quota.quota_request_status.get(id=filed.id, scope=qr.scope(session, LOCATION)).as_dict()
    assert calls(azure, "GET", path=path)
    real = example(name)["responses"]["200"]["body"]
    assert shape_differences(real, _wire(fake)) == []


def _wire(model_dict: dict) -> dict:
    """The SDK model's as_dict() back in the REST names (camelCase)."""
    def camel(key: str) -> str:
        head, *rest = key.split("_")
        return head + "".join(p.title() for p in rest)

    if isinstance(model_dict, dict):
        return {camel(k): _wire(v) for k, v in model_dict.items()}
    if isinstance(model_dict, list):
        return [_wire(v) for v in model_dict]
    return model_dict


def test_fake_quota_get_has_the_examples_shape(azure, session):
    from test_azure_examples import shape_differences

    got = session.quota.quota.get(resource_name=A100_FAMILY, scope=qr.scope(session, LOCATION)).as_dict()
    real = example("getComputeOneSkuQuotaLimit")["responses"]["200"]["body"]
    assert shape_differences(real, _wire(got)) == []


# -- the command line, in simulation ---------------------------------------------------------------

@pytest.fixture
def shape(run, state_file):
    """`provision simulate ...` on the same state file as `sim`."""
    def _shape(*args):
        rc, out, err = run("simulate", *args, "--simulate-state", state_file)
        assert rc == 0, err
    return _shape


def test_simulated_create_blocked_then_request_then_status_then_create(sim, shape):
    shape("quota", "set", "-l", LOCATION, "--name", A100_FAMILY, "--limit", "96")
    rc, out, err = sim(*create_args())
    assert rc == 2 and "QUOTA_INSUFFICIENT" in err and "usage 0 + needed 192 exceeds the limit 96" in err
    rc, out, err = sim("quota", "request", "--profile", "nd-a100-v4", "-n", "c1", "-g", RG, "-l", LOCATION,
                       "--nodes", "2", "-o", "json")
    assert rc == 2 and "CONFIRMATION_REQUIRED" in err, "no terminal, no --yes: nothing is filed"
    rc, out, err = sim("quota", "request", "--profile", "nd-a100-v4", "-n", "c1", "-g", RG, "-l", LOCATION,
                       "--nodes", "2", "--yes", "-o", "json")
    assert rc == 0, err
    filed = json.loads(out)["requests"][0]
    assert filed["new_limit"] == 192 and filed["id"] in err
    rc, out, err = sim("quota", "status", "-l", LOCATION, "--id", filed["id"], "-o", "json")
    assert rc == 0 and json.loads(out)["state"] == "Succeeded"
    rc, out, err = sim(*create_args())
    assert rc == 0, err


def test_simulated_escalation_exits_1_with_id_and_remedy(sim, shape):
    shape("quota", "set", "-l", LOCATION, "--name", A100_FAMILY, "--limit", "96")
    shape("quota", "outcome", "-l", LOCATION, "--name", A100_FAMILY, "--outcome", "escalate")
    rc, out, err = sim("quota", "request", "--profile", "nd-a100-v4", "-n", "c1", "-g", RG, "-l", LOCATION, "--nodes",
                       "2",
                       "--yes", "-o", "json")
    assert rc == 1
    request_id = json.loads(out)["requests"][0]["id"]
    assert "ERROR: [QUOTA_REQUEST_ESCALATED]" in err and request_id in err and "remedy:" in err
    rc, out, err = sim("quota", "status", "-l", LOCATION, "--id", request_id)
    assert rc == 1 and "QUOTA_REQUEST_ESCALATED" in err


def test_create_request_quota_files_and_goes_on(sim, shape):
    shape("quota", "set", "-l", LOCATION, "--name", A100_FAMILY, "--limit", "96")
    rc, out, err = sim(*create_args(), "--request-quota", "--yes", "-o", "json")
    assert rc == 0, err
    assert "filed quota request" in err


# -- what Azure ends a request with, and what it raises by itself ----------------------------------------

def test_an_invalid_request_is_refused_not_escalated(azure, session):
    """QuotaRequestState: Invalid is its own end; only Failed with ContactSupport is sent to support
    (getQuotaRequestStatusFailed.json; Learn, per-VM quota requests)."""
    azure.set_quota(LOCATION, A100_FAMILY, limit=100)
    azure.set_quota_outcome(LOCATION, A100_FAMILY, "invalid")
    with pytest.raises(Exception) as info:
        qr.request_increases(session, request(), confirm=yes)
    err = info.value
    assert err.code == "QUOTA_REQUEST_REFUSED" and err.exit_code == 1
    assert err.result["requests"][0]["state"] == "Invalid" and "Invalid" in err.message
    assert "not approved automatically" not in err.message and "support request for the same increase" not in err.remedy


def test_quota_status_of_an_invalid_request_is_not_escalated(sim, shape):
    shape("quota", "set", "-l", LOCATION, "--name", A100_FAMILY, "--limit", "96")
    shape("quota", "outcome", "-l", LOCATION, "--name", A100_FAMILY, "--outcome", "invalid")
    rc, out, err = sim("quota", "request", "--profile", "nd-a100-v4", "-n", "c1", "-g", RG, "-l", LOCATION, "--nodes",
                       "2", "--yes", "-o", "json")
    assert rc == 1 and "QUOTA_REQUEST_REFUSED" in err and "QUOTA_REQUEST_ESCALATED" not in err
    request_id = json.loads(out)["requests"][0]["id"]
    rc, out, err = sim("quota", "status", "-l", LOCATION, "--id", request_id)
    assert rc == 1 and "QUOTA_REQUEST_REFUSED" in err


def test_an_approved_family_increase_raises_the_regional_quota_itself(azure, session):
    """Learn, "Increase VM-family vCPU quotas": "If your request to increase your VM-family quota is approved,
    Azure will automatically increase the regional vCPU quota for the region"; the regional request is computed
    before either is filed, and filed only if that leaves it short."""
    azure.set_quota(LOCATION, A100_FAMILY, limit=0)
    azure.set_quota(LOCATION, "cores", limit=100, usage=90)
    short = qr.shortfalls(session, request())
    assert [(norm(s.quota), s.new_limit) for s in short] == [(norm(A100_FAMILY), NEEDED), ("cores", 90 + NEEDED)]
    result = qr.request_increases(session, request(), confirm=yes)
    sent = calls(azure, "PATCH", path="/providers/Microsoft.Quota/quotas/")
    assert [norm(r.path.rsplit("/", 1)[1]) for r in sent] == [norm(A100_FAMILY)], "no request below the raised limit"
    assert result["raised_by_azure"] == [{"location": LOCATION, "quota": "cores", "limit": 100 + NEEDED,
                                          "needed": 90 + NEEDED}]
    assert qr.shortfalls(session, request()) == []


def test_a_regional_request_still_short_after_the_family_is_filed(azure, session):
    azure.set_quota(LOCATION, A100_FAMILY, limit=96)
    azure.set_quota(LOCATION, "cores", limit=50, usage=40)
    qr.request_increases(session, request(), confirm=yes)
    sent = calls(azure, "PATCH", path="/providers/Microsoft.Quota/quotas/")
    assert [norm(r.path.rsplit("/", 1)[1]) for r in sent] == [norm(A100_FAMILY), "cores"]
    assert [r.body["properties"]["limit"]["value"] for r in sent] == [NEEDED, 40 + NEEDED]


def test_every_quota_request_speaks_the_documented_api_version(azure, session):
    """docs/capacity.md states Microsoft.Quota 2025-09-01: the lowest allowed azure-mgmt-quota (2.0, whose default
    is 2025-03-01) sends it too, because the session sets it (CI runs this on constraints-lowest.txt)."""
    from azgpu.resource_types import QUOTA

    docs = (Path(__file__).resolve().parents[2] / "docs" / "capacity.md").read_text()
    assert f"api {QUOTA.api_version}" in docs
    azure.set_quota(LOCATION, A100_FAMILY, limit=100)
    qr.request_increases(session, request(), confirm=yes)
    qr.listed(session, LOCATION)
    sent = calls(azure, path="/providers/Microsoft.Quota/")
    assert {r.method for r in sent} >= {"PATCH", "GET"} and len(sent) >= 3
    assert {r.api_version for r in sent} == {QUOTA.api_version}


@pytest.mark.parametrize("state", ["Escalated", "Canceled", None])
def test_a_state_the_specification_does_not_list_is_not_an_approval(azure, session, cli, state):
    """QuotaRequestState lists Accepted, Invalid, Succeeded, Failed and InProgress; anything else (Escalated is a
    group-quota state) or no state at all raises no limit, and create --request-quota must not go on."""
    azure.set_quota(LOCATION, A100_FAMILY, limit=100)
    body = {"id": "x", "name": "hostile-1", "type": "Microsoft.Quota/quotaRequests",
            "properties": {"message": "hmm", "value": [{"name": {"value": A100_FAMILY},
                                                        "limit": {"limitObjectType": "LimitValue", "value": NEEDED}}]}}
    if state:
        body["properties"]["provisioningState"] = state
    azure.inject(method="GET", path="/quotaRequests/", status=200, body=body, times=None)
    with pytest.raises(Exception) as info:
        qr.request_increases(session, request(), confirm=yes)
    err = info.value
    assert err.code == "QUOTA_REQUEST_REFUSED" and err.exit_code == 1 and (state or "no state") in err.message
    rc, out, said = cli("quota", "status", "-l", LOCATION, "--id", "hostile-1")
    assert rc == 1 and "ERROR: [QUOTA_REQUEST_REFUSED]" in said and "Traceback" not in said
