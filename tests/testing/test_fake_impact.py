"""The fake's Microsoft.Impact as a client other than azgpu meets it: plain HTTP through the fake's own
transport, the way AzNHC's triggerGHR.sh or an 'az rest' script would report."""

from __future__ import annotations

import pytest
from fake_azure_support import ND_A100, RG, Clients

from azgpu.testing import FakeAzure

ARM = "https://management.azure.com"
V = "2023-02-01-preview"


@pytest.fixture
def vm(azure: FakeAzure, clients: Clients, network) -> str:
    """A scale-set instance's resource id (the fake's own scale set of one)."""
    clients.compute.virtual_machine_scale_sets.begin_create_or_update(RG, "ss", {
        "location": "eastus", "sku": {"name": ND_A100, "capacity": 1},
        "properties": {"orchestrationMode": "Uniform", "singlePlacementGroup": True,
                       "upgradePolicy": {"mode": "Manual"},
                       "virtualMachineProfile": {
                           "storageProfile": {"imageReference": {"publisher": "microsoft-dsvm", "offer": "ubuntu-hpc",
                                                                 "sku": "2204", "version": "latest"}},
                           "osProfile": {"computerNamePrefix": "ss", "adminUsername": "azureuser",
                                         "linuxConfiguration": {"disablePasswordAuthentication": True, "ssh": {
                                             "publicKeys": [{"path": "/home/azureuser/.ssh/authorized_keys",
                                                             "keyData": "ssh-ed25519 AAAA test"}]}}},
                           "networkProfile": {"networkInterfaceConfigurations": [{"name": "nic", "properties": {
                               "primary": True, "ipConfigurations": [{"name": "ip", "properties": {
                                   "subnet": {"id": network["subnet"]}}}]}}]}}},
    }).result()
    (instance,) = azure.resources(type="Microsoft.Compute/virtualMachineScaleSets/virtualMachines")
    return instance["id"]


def impact(azure: FakeAzure, name: str, body: dict, method: str = "PUT", api: str = V):
    url = (f"{ARM}/subscriptions/{azure.subscription_id}/providers/Microsoft.Impact/workloadImpacts/{name}"
           f"?api-version={api}")
    return azure.requests_session().request(method, url, json=body if method == "PUT" else None)


def ghr_body(resource_id: str, category: str = "Resource.Hpc.Unhealthy.HpcMissingGpu", **extra) -> dict:
    return {"properties": {"startDateTime": "2026-03-14T09:00:00Z", "impactCategory": category,
                           "impactDescription": "Missing GPU device", "impactedResourceId": resource_id,
                           "additionalProperties": {"PhysicalHostName": "GGBB90904476", **extra}}}


def code(response) -> str:
    return response.json()["error"]["code"]


def test_a_report_is_stored_and_read_back(azure, vm):
    put = impact(azure, "0f8fad5b-d9cb-469f-a165-70867728950e", ghr_body(vm))
    assert put.status_code == 200
    got = impact(azure, "0f8fad5b-d9cb-469f-a165-70867728950e", {}, method="GET")
    assert got.json()["properties"]["impactCategory"] == "Resource.Hpc.Unhealthy.HpcMissingGpu"
    assert got.json()["properties"]["provisioningState"] == "Succeeded"


def test_a_later_api_version_creates_with_201(azure, vm):
    assert impact(azure, "impact-201", ghr_body(vm), api="2025-01-01-preview").status_code == 201


def test_a_reused_name_is_refused(azure, vm):
    impact(azure, "impact-001", ghr_body(vm))
    again = impact(azure, "impact-001", ghr_body(vm))
    assert (again.status_code, code(again)) == (409, "Conflict")


def test_an_impacted_resource_that_does_not_exist_is_404(azure, vm):
    gone = vm.rsplit("/", 1)[0] + "/77"
    answer = impact(azure, "impact-404", ghr_body(gone))
    assert (answer.status_code, code(answer)) == (404, "ResourceNotFound")


def test_an_hpc_report_needs_a_host_name_or_vm_id(azure, vm):
    body = ghr_body(vm)
    body["properties"]["additionalProperties"] = {}
    assert impact(azure, "impact-nohost", body).status_code == 400
    body["properties"]["additionalProperties"] = {"VmUniqueId": "5f0a3c2e-1111-4c4c-9e9e-0123456789ab"}
    assert impact(azure, "impact-vmid", body).status_code == 200


@pytest.mark.parametrize("category", ["Resource.Hpc.Unhealthy.GpuMelted", "Resource.Hpc.Investigate.NVLink"])
def test_only_approved_categories_are_taken(azure, vm, category):
    answer = impact(azure, "impact-cat", ghr_body(vm, category))
    assert (answer.status_code, code(answer)) == (400, "BadRequest")


def test_a_name_outside_the_specs_pattern_is_refused(azure, vm):
    assert impact(azure, "ab", ghr_body(vm)).status_code == 400  # must end in 3+ alphanumerics


def test_insights_appear_on_the_fakes_clock_and_end_terminal(azure, vm):
    impact(azure, "impact-ins", ghr_body(vm))
    url = (f"{ARM}/subscriptions/{azure.subscription_id}/providers/Microsoft.Impact/workloadImpacts/impact-ins/"
           "insights?api-version=2025-01-01-preview")
    seen = []
    for _ in range(3):
        value = azure.requests_session().get(url).json()["value"]
        seen.append([(i["properties"]["additionalDetails"]["statusCode"],
                      i["properties"]["additionalDetails"]["terminalInsight"]) for i in value])
        azure.sleep(60)
    assert seen == [[], [("AcknowledgedUnhealthy", False)],
                    [("AcknowledgedUnhealthy", False), ("NodeRemovedFromService", True)]]


def test_an_unregistered_provider_answers_missing_subscription_registration(azure, vm):
    azure.set_provider("Microsoft.Impact", "NotRegistered")
    answer = impact(azure, "impact-unreg", ghr_body(vm))
    assert (answer.status_code, code(answer)) == (409, "MissingSubscriptionRegistration")
    assert "Microsoft.Impact" in answer.json()["error"]["message"]
    provider = azure.requests_session().get(
        f"{ARM}/subscriptions/{azure.subscription_id}/providers/Microsoft.Impact?api-version=2024-11-01").json()
    assert (provider["namespace"], provider["registrationState"]) == ("Microsoft.Impact", "NotRegistered")


def test_a_caller_without_write_gets_authorization_failed(azure, vm):
    azure.set_permissions(["*/read"])
    answer = impact(azure, "impact-403", ghr_body(vm))
    assert (answer.status_code, code(answer)) == (403, "AuthorizationFailed")
    assert "Microsoft.Impact/workloadImpacts/write" in answer.json()["error"]["message"]


def test_the_provider_of_another_namespace_is_not_invented(azure):
    from azgpu.testing import NotImplementedInFake

    with pytest.raises(NotImplementedInFake):
        azure.requests_session().get(f"{ARM}/subscriptions/{azure.subscription_id}/providers/Microsoft.Compute"
                                     "?api-version=2024-11-01")


def test_impacts_and_onboarding_survive_the_state_file(tmp_path):
    state = tmp_path / "state.json"
    elsewhere = ("/subscriptions/11111111-1111-1111-1111-111111111111/resourceGroups/x/providers/Microsoft.Compute/"
                 "virtualMachines/vm1")  # Learn: the VM can be in any subscription
    with FakeAzure(state_file=state) as first:
        assert impact(first, "impact-kept", ghr_body(elsewhere)).status_code == 200
        first.set_permissions(["*/read"])
    with FakeAzure.load(state) as again:
        assert [i["name"] for i in again.impacts()] == ["impact-kept"]
        assert impact(again, "impact-more", ghr_body(elsewhere)).status_code == 403
