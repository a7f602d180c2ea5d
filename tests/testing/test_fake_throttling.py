"""The fake's throttling (FakeAzure(throttle="azure")) against Microsoft's documented numbers.

The numbers below are copied from Learn, not from the fake, so that changing one in
azgpu/testing/models/throttling.py fails here:
- "Compute throttling limits" (MicrosoftDocs/azure-compute-docs, articles/virtual-machines/
  compute-throttling-limits.md @ 1a043fb3): per policy, bucket refill rate and maximum capacity per
  minute, for the resource and for the subscription, and the worked example of a 12-token bucket.
- "Understand how Azure Resource Manager throttles requests", "Regional throttling and token bucket
  algorithm": subscription reads 250 refilled 25 a second, writes and deletes 200 refilled 10 a second.
- The same page, "Network throttling": 1,000 writes and 10,000 reads per 5 minutes.
- "Troubleshooting API throttling errors" (MicrosoftDocs/SupportArticles-docs @ 0a1f3ea5): the 429's
  body and headers (tests/fixtures/azure/errors/compute_throttled.json).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from azure.core.exceptions import HttpResponseError
from azure.mgmt.compute import ComputeManagementClient

from azgpu.testing import FakeAzure, FakeCredential
from azgpu.testing.models.throttling import Bucket, Limit, Throttle

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
SUB = "00000000-0000-0000-0000-000000000000"
RG = f"/subscriptions/{SUB}/resourceGroups/rg"
VMSS = f"{RG}/providers/Microsoft.Compute/virtualMachineScaleSets/s1"
OPERATION = f"/subscriptions/{SUB}/providers/Microsoft.Compute/locations/eastus/operations/op1"
BINDING = f"{VMSS}/virtualMachines/3/runCommands/azgpu-slurm-node"
VM = f"{RG}/providers/Microsoft.Compute/virtualMachines/v1"
RESERVATION = f"{RG}/providers/Microsoft.Compute/capacityReservationGroups/g/capacityReservations/r"

# (method, path, exists, the policy Learn's table puts it under, resource level (refill, max) or None,
# subscription level (refill, max)) for every request azgpu sends to Compute.
COMPUTE = [
    ("PUT", VMSS, False, "PutVMScaleSet", (4, 12), (125, 375)),  # Put (Create new scale set)
    ("PUT", VMSS, True, "UpdateVMScaleSet", (4, 12), (500, 1500)),  # Update: Create Or Update of an existing one
    ("PATCH", VMSS, True, "UpdateVMScaleSet", (4, 12), (500, 1500)),  # Update (capacity)
    ("DELETE", VMSS, True, "DeleteVMScaleSet", (4, 12), (175, 525)),
    ("GET", VMSS, True, "GetVMScaleSet", (12, 36), (800, 2400)),  # Low Cost Get
    ("GET", f"{VMSS}/virtualMachines", True, "HighCostGetVMScaleSet", None, (360, 1080)),  # not listed: see model
    ("POST", f"{VMSS}/virtualMachines/3/runCommand", True, "UpdateVMScaleSetVM", (4, 12), (500, 1500)),
    ("POST", f"{VMSS}/delete", True, "DeleteVMScaleSetVM", (4, 12), (500, 1500)),
    ("GET", f"{VMSS}/virtualMachines/3", True, "GetVMScaleSetVM", (12, 36), (2000, 6000)),
    ("GET", OPERATION, True, "GetOperation", (15, 45), (5000, 15000)),  # Status of asynchronous operations
    # A node's Slurm binding (deploy/nodes.py): a managed Run Command of the instance, which Learn lists as
    # "RunCommands - Create Or Update" (Update scale set VMs), "RunCommands - Delete" (Delete scale set VMs)
    # and "RunCommands - Get" (Get scale set VMs).
    ("PUT", BINDING, False, "UpdateVMScaleSetVM", (4, 12), (500, 1500)),
    ("PUT", BINDING, True, "UpdateVMScaleSetVM", (4, 12), (500, 1500)),
    ("DELETE", BINDING, True, "DeleteVMScaleSetVM", (4, 12), (500, 1500)),
    ("GET", BINDING, True, "GetVMScaleSetVM", (12, 36), (2000, 6000)),
]
ARM = {"reads": (25, 250), "writes": (10, 200), "deletes": (10, 200)}  # per second: refill, bucket


@pytest.mark.parametrize("method, path, exists, policy, resource, subscription", COMPUTE,
                         ids=[f"{c[0]} {c[3]}" for c in COMPUTE])
def test_each_compute_request_draws_on_its_documented_buckets(method, path, exists, policy, resource, subscription):
    charge = Throttle(SUB).charge(method, path, region="eastus", exists=exists,
                                  target=f"{VMSS}/virtualMachines/3" if "operations" in path else None)
    compute = {("resource" if len(key) == 4 else "subscription"): limit for key, limit, _ in charge.buckets
               if key[0] == "compute"}
    assert charge.policy == policy
    assert (compute["subscription"].refill, compute["subscription"].capacity, compute["subscription"].period) == \
        (*subscription, 60)
    if resource is None:
        assert "resource" not in compute
    else:
        assert (compute["resource"].refill, compute["resource"].capacity, compute["resource"].period) == (*resource, 60)


@pytest.mark.parametrize("method, kind", [("GET", "reads"), ("HEAD", "reads"), ("PUT", "writes"),
                                          ("POST", "writes"), ("PATCH", "writes"), ("DELETE", "deletes")])
def test_every_request_draws_on_resource_managers_bucket_of_its_kind(method, kind):
    arm = {key: limit for key, limit, _ in Throttle(SUB).charge(method, VMSS, region="eastus", exists=True).buckets
           if key[0] == "arm"}
    assert [(k[3], lim.refill, lim.capacity, lim.period) for k, lim in arm.items()] == [(kind, *ARM[kind], 1)]


# Where Learn's tables put what a VM or a scale set's VM is asked, that the fake models: Power Off is an
# Update of a VM but a Delete of a scale set's VM, Simulate Eviction the other way round; a VM's Run
# Commands and extensions are Updates of it, their deletion too, their Get a Low Cost Get.
CATEGORIES = [
    ("POST", f"{VM}/powerOff", True, "UpdateVM"), ("POST", f"{VM}/deallocate", True, "DeleteVM"),
    ("POST", f"{VM}/simulateEviction", True, "DeleteVM"), ("DELETE", VM, True, "DeleteVM"),
    ("PUT", VM, False, "PutVM"), ("PUT", VM, True, "UpdateVM"),
    ("PUT", f"{VM}/runCommands/c", False, "UpdateVM"), ("DELETE", f"{VM}/runCommands/c", True, "UpdateVM"),
    ("DELETE", f"{VM}/extensions/e", True, "UpdateVM"), ("GET", f"{VM}/runCommands/c", True, "LowCostGet"),
    ("POST", f"{VMSS}/virtualMachines/3/powerOff", True, "DeleteVMScaleSetVM"),
    ("POST", f"{VMSS}/virtualMachines/3/deallocate", True, "DeleteVMScaleSetVM"),
    ("POST", f"{VMSS}/virtualMachines/3/simulateEviction", True, "UpdateVMScaleSetVM"),
    ("PUT", f"{VMSS}/virtualMachines/3/extensions/e", False, "UpdateVMScaleSetVM"),
    ("DELETE", f"{VMSS}/virtualMachines/3/extensions/e", True, "DeleteVMScaleSetVM"),
]


@pytest.mark.parametrize("method, path, exists, policy", CATEGORIES, ids=[f"{c[0]} {c[1][-24:]}" for c in CATEGORIES])
def test_requests_fall_in_learns_policy_categories(method, path, exists, policy):
    assert Throttle(SUB).charge(method, path, region="eastus", exists=exists).policy == policy


@pytest.mark.parametrize("method", ["PUT", "GET", "DELETE"])
def test_capacity_reservations_draw_only_on_resource_managers_buckets(method):
    """Learn's Compute tables name no policy for capacity reservation groups or their reservations (what
    reserve, release and preflight send), so Resource Manager's per-subscription bucket of the request's
    kind counts them, as it does every request."""
    charge = Throttle(SUB).charge(method, RESERVATION, region="eastus", exists=True)
    assert charge.policy is None
    assert sorted(k[0] for k, _, _ in charge.buckets) == ["arm", "arm-global"]


def test_network_requests_draw_on_its_five_minute_limits():
    nsg = f"{RG}/providers/Microsoft.Network/networkSecurityGroups/n"
    limits = {}
    for method in ("PUT", "DELETE", "GET"):
        for key, limit, _ in Throttle(SUB).charge(method, nsg, region="eastus", exists=True).buckets:
            if key[0] == "network":
                limits[method] = (limit.capacity, limit.refill, limit.period)
    assert limits == {"PUT": (1000, 1000, 300), "DELETE": (1000, 1000, 300), "GET": (10000, 10000, 300)}


def test_a_bucket_refills_and_refuses_as_learns_worked_example():
    """Learn's table: 12 tokens refilled 4 a minute; requests per minute 0, 8, 0, 13, 5, 0 leave 12, 4, 8,
    0, 0, 4 and are throttled 0, 0, 0, 1, 1, 0 times."""
    bucket = Bucket(Limit(12, 4, 60), created=0.0)
    throttled, left = [], []
    for minute, requests in enumerate([0, 8, 0, 13, 5, 0]):
        refused = 0
        for i in range(requests):
            now = minute * 60 + i
            if bucket.available(now) <= 0:
                refused += 1
            else:
                bucket.take(now)
        throttled.append(refused)
        left.append(bucket.available(minute * 60 + 59))
    assert (throttled, left) == ([0, 0, 0, 1, 1, 0], [12, 4, 8, 0, 0, 4])


@pytest.mark.parametrize("method, path, exists, policy, resource, subscription", COMPUTE,
                         ids=[f"{c[0]} {c[3]}" for c in COMPUTE])
def test_each_policy_refuses_when_its_bucket_is_empty_and_refills_a_minute_later(method, path, exists, policy,
                                                                                 resource, subscription):
    """Against the whole model (Resource Manager's buckets too, which these requests stay under): the
    resource's bucket (or the subscription's, where Learn gives only that) lets exactly its capacity
    through within a minute, refuses the next with 429 and a Retry-After to the refill, and after it
    lets exactly the refill through."""
    throttle = Throttle(SUB)
    refill, capacity = resource or subscription
    spacing = 0.001 if resource else 0.05  # 20 reads a second: under Resource Manager's 25
    kw = {"region": "eastus", "exists": exists, "target": f"{VMSS}/virtualMachines/3" if "operations" in path else None}
    answers = [throttle.admit(method, path, now=i * spacing, **kw) for i in range(capacity + 1)]
    assert [isinstance(a, tuple) for a in answers] == [False] * capacity + [True]
    status, body, headers = answers[-1]
    assert status == 429 and body["details"][0]["target"] == policy
    assert headers["Retry-After"] == str(math.ceil(60 - capacity * spacing))
    assert f"Microsoft.Compute/{policy};0" in headers["x-ms-ratelimit-remaining-resource"]
    later = [throttle.admit(method, path, now=60 + i * spacing, **kw) for i in range(refill + 1)]
    assert [isinstance(a, tuple) for a in later] == [False] * refill + [True]


def test_resource_managers_read_bucket_refuses_the_251st_read_of_a_second_and_refills_25_a_second():
    throttle = Throttle(SUB)  # the bucket starts full at its first request (0.5 s) and refills each second after
    answers = [throttle.admit("GET", f"{RG}/providers/Microsoft.Network/virtualNetworks/v{i}", now=0.5, region="eastus")
               for i in range(251)]
    assert [isinstance(a, tuple) for a in answers] == [False] * 250 + [True]
    assert answers[249]["x-ms-ratelimit-remaining-subscription-reads"] == "0"
    status, body, headers = answers[250]
    assert (status, body["error"]["code"], headers["Retry-After"]) == (429, "SubscriptionRequestsThrottled", "1")
    assert "Please try again after '1' seconds after additional tokens are available" in body["error"]["message"]
    after = [throttle.admit("GET", f"{RG}/providers/Microsoft.Network/virtualNetworks/w{i}", now=1.5, region="eastus")
             for i in range(26)]
    assert [isinstance(a, tuple) for a in after] == [False] * 25 + [True]


def test_the_sdk_meets_computes_429_in_learns_shape():
    """Through the real SDK: the 37th GET of one scale set within a minute (Low Cost Get, 36 per resource)."""
    with FakeAzure(throttle="azure") as azure:
        compute = ComputeManagementClient(FakeCredential(), azure.subscription_id, polling_interval=0, retry_total=0)
        azure.add_resource(f"/subscriptions/{azure.subscription_id}/resourceGroups/rg", {"location": "eastus"})
        azure.add_resource(f"{VMSS}", {"location": "eastus", "sku": {"name": "Standard_D2s_v5", "capacity": 0}})
        for _ in range(36):
            compute.virtual_machine_scale_sets.get("rg", "s1")
        with pytest.raises(HttpResponseError) as err:
            compute.virtual_machine_scale_sets.get("rg", "s1")
    answer = err.value.response
    learn = json.loads((FIXTURES / "azure" / "errors" / "compute_throttled.json").read_text())
    body = answer.json()
    assert answer.status_code == 429 and set(body) == set(learn) and body["code"] == learn["code"]
    assert [set(d) for d in body["details"]] == [set(d) for d in learn["details"]]
    assert body["details"][0]["target"] == "GetVMScaleSet"
    measured = json.loads(body["details"][0]["message"])
    assert set(measured) == set(json.loads(learn["details"][0]["message"])) and measured["allowedRequestCount"] == 36
    assert int(answer.headers["Retry-After"]) <= 60
    assert answer.headers["x-ms-ratelimit-remaining-resource"].startswith("Microsoft.Compute/GetVMScaleSet;0")
    assert azure.throttled() == {"GetVMScaleSet": 1}


def test_without_throttle_the_fake_sends_no_limit_headers():
    with FakeAzure() as azure:
        compute = ComputeManagementClient(FakeCredential(), azure.subscription_id, polling_interval=0)
        azure.add_resource(f"/subscriptions/{azure.subscription_id}/resourceGroups/rg", {"location": "eastus"})
        azure.add_resource(f"{VMSS}", {"location": "eastus", "sku": {"name": "Standard_D2s_v5", "capacity": 0}})
        for _ in range(40):
            compute.virtual_machine_scale_sets.get("rg", "s1")
        assert azure.throttled() == {}
