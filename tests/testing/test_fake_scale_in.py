"""Scale-set instances going away as Azure documents it: DeleteInstances by name, a lower capacity
by the scale-in policy; instances know when they were created; simulated capacity fails an
allocation the way Azure does."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fake_azure_support import LOCATION, ND_A100, RG, create_vmss, vmss_body

from azgpu.testing import FakeAzure

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "azure"
VM = "Microsoft.Compute/virtualMachineScaleSets/virtualMachines"
FAMILY = "standardNDASv4_A100Family"


def instance_ids(clients, name: str = "vmss") -> list[str]:
    return [vm.instance_id for vm in clients.compute.virtual_machine_scale_set_vms.list(RG, name)]


def put(clients, network, name: str = "vmss", **kw):
    return clients.compute.virtual_machine_scale_sets.begin_create_or_update(
        RG, name, vmss_body(network["subnet"], **kw)).result()


# -- DeleteInstances -------------------------------------------------------------------------------

def test_delete_instances_removes_exactly_the_named_ones_and_lowers_the_capacity(azure, clients, network):
    create_vmss(clients, network, capacity=4)
    clients.compute.virtual_machine_scale_sets.begin_delete_instances(RG, "vmss", {"instanceIds": ["0", "2"]}).result()
    assert instance_ids(clients) == ["1", "3"]
    assert clients.compute.virtual_machine_scale_sets.get(RG, "vmss").sku.capacity == 2


def test_delete_instances_answers_like_the_rest_spec_example(azure, clients, network):
    example = json.loads((FIXTURES / "vmss-delete-instances.json").read_text())
    create_vmss(clients, network, capacity=2)
    clients.compute.virtual_machine_scale_sets.begin_delete_instances(RG, "vmss", {"instanceIds": ["1"]}).result()
    post = next(r for r in azure.requests if r.method == "POST")
    assert post.path.endswith("/virtualMachineScaleSets/vmss/delete")
    assert set(post.body) == set(example["parameters"]["vmInstanceIDs"])  # {"instanceIds": [...]}
    assert post.status in {int(s) for s in example["responses"]}


def test_deleted_instances_give_their_quota_back(azure, clients, network):
    create_vmss(clients, network, capacity=3)
    clients.compute.virtual_machine_scale_sets.begin_delete_instances(RG, "vmss", {"instanceIds": ["1"]}).result()
    assert azure.usage(LOCATION, FAMILY) == 2 * 96


def test_delete_instances_without_ids_is_a_bad_request(azure, clients, network):
    from azure.core.exceptions import HttpResponseError

    create_vmss(clients, network, capacity=1)
    with pytest.raises(HttpResponseError) as info:
        clients.compute.virtual_machine_scale_sets.begin_delete_instances(RG, "vmss", {"instanceIds": []}).result()
    assert info.value.error.code == "InvalidParameter"
    assert instance_ids(clients) == ["0"]


# -- a lower capacity follows the scale-in policy ---------------------------------------------------

def test_default_policy_removes_the_highest_instance_ids(azure, clients, network):
    create_vmss(clients, network, capacity=5)
    put(clients, network, capacity=3)
    assert instance_ids(clients) == ["0", "1", "2"]


def test_oldest_vm_policy_removes_the_oldest_instances(azure, clients, network):
    create_vmss(clients, network, capacity=2)
    put(clients, network, capacity=4)  # instances 2 and 3 are created later than 0 and 1
    body = vmss_body(network["subnet"], capacity=2)
    body["properties"]["scaleInPolicy"] = {"rules": ["OldestVM"]}
    azure.sleep(60)  # the virtual clock moves on, so creation times differ
    clients.compute.virtual_machine_scale_sets.begin_create_or_update(RG, "vmss", body).result()
    assert instance_ids(clients) == ["2", "3"]


def test_default_policy_balances_fault_domains_before_taking_the_highest_id(azure, clients, network):
    # Fault domains of ids 0..5 are 0, 1, 2, 0, 1, 2; without 2, domain 2 holds only 5.
    create_vmss(clients, network, capacity=6)
    clients.compute.virtual_machine_scale_sets.begin_delete_instances(RG, "vmss", {"instanceIds": ["2"]}).result()
    put(clients, network, capacity=4)
    assert instance_ids(clients) == ["0", "1", "3", "5"]


def test_zone_spanning_scale_in_balances_the_zones_first(azure, clients, network):
    # Ids 0..5 go to zones 1, 2, 3, 1, 2, 3; without 2, zone 3 holds only 5, the highest id.
    create_vmss(clients, network, capacity=6, zones=["1", "2", "3"])
    clients.compute.virtual_machine_scale_sets.begin_delete_instances(RG, "vmss", {"instanceIds": ["2"]}).result()
    put(clients, network, capacity=4, zones=["1", "2", "3"])
    assert instance_ids(clients) == ["0", "1", "3", "5"]  # 4 went from zone 2, not 5 from zone 3


def test_instances_report_when_they_were_created(azure, clients, network):
    create_vmss(clients, network, capacity=1)
    vm = next(iter(clients.compute.virtual_machine_scale_set_vms.list(RG, "vmss")))
    assert vm.time_created is not None


# -- simulated capacity ------------------------------------------------------------------------------

def test_a_scale_set_beyond_the_capacity_fails_with_allocation_failed(azure, clients, network):
    from azure.core.exceptions import HttpResponseError

    azure.set_capacity(LOCATION, ND_A100, 2)
    with pytest.raises(HttpResponseError) as info:
        create_vmss(clients, network, capacity=3)
    assert "AllocationFailed" in str(info.value)
    assert azure.resources(type=VM) == []


def test_capacity_counts_every_scale_set_of_the_size(azure, clients, network):
    from azure.core.exceptions import HttpResponseError

    azure.set_capacity(LOCATION, ND_A100, 3)
    create_vmss(clients, network, "a", capacity=2)
    with pytest.raises(HttpResponseError):
        create_vmss(clients, network, "b", capacity=2)
    create_vmss(clients, network, "c", capacity=1)


def test_a_zone_beyond_its_capacity_fails_with_zonal_allocation_failed(azure, clients, network):
    from azure.core.exceptions import HttpResponseError

    azure.set_capacity(LOCATION, ND_A100, 0, zone="1")
    with pytest.raises(HttpResponseError) as info:
        create_vmss(clients, network, "z1", capacity=1, zones=["1"])
    assert "ZonalAllocationFailed" in str(info.value)
    create_vmss(clients, network, "z2", capacity=1, zones=["2"])


def test_lifting_the_capacity_limit_lets_the_scale_set_grow(azure, clients, network):
    azure.set_capacity(LOCATION, ND_A100, 1)
    create_vmss(clients, network, capacity=1)
    azure.set_capacity(LOCATION, ND_A100, None)
    put(clients, network, capacity=3)
    assert instance_ids(clients) == ["0", "1", "2"]


def test_capacity_limits_are_kept_in_the_state_file(tmp_path):
    state = tmp_path / "azure.json"
    FakeAzure(state_file=state).set_capacity(LOCATION, ND_A100, 7, zone="2")
    assert FakeAzure.load(state).capacity_limits() == {LOCATION: {ND_A100.lower(): {"2": 7}}}


# -- default quota of the subscription ----------------------------------------------------------------

def test_quota_limits_set_the_subscriptions_default_limits():
    azure = FakeAzure(quota_limits={"gpuFamily": 20000, "cores": 30000})
    usages = {u["name"]["value"]: u["limit"] for u in azure.usages(LOCATION)}
    assert usages["Standard NDASv4_A100 Family"] == 20000 and usages["cores"] == 30000
    assert usages["lowPriorityCores"] == 1000  # not given: the fake's own default


def test_quota_limits_survive_a_reset():
    azure = FakeAzure(quota_limits={"cores": 30000})
    azure.reset()
    assert {u["name"]["value"]: u["limit"] for u in azure.usages(LOCATION)}["cores"] == 30000
