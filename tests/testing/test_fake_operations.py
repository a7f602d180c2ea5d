"""Long-running operations as the SDK's real ARMPolling sees them."""

from __future__ import annotations

import pytest
from azure.core.exceptions import HttpResponseError
from fake_azure_support import LOCATION, RG, build_network, create_vmss, make_clients, vmss_body

from azgpu.testing import FakeAzure

FAMILY = "Standard NDASv4_A100 Family"


def _status_polls(azure) -> list:
    return [r for r in azure.requests if r.method == "GET" and "/operations/" in r.path]


def test_put_answers_201_with_an_async_operation_header(clients, network):
    poller = clients.compute.virtual_machine_scale_sets.begin_create_or_update(RG, "vmss", vmss_body(network["subnet"]))
    initial = poller.polling_method()._initial_response.http_response
    poller.result()
    assert initial.status_code == 201
    assert "/providers/Microsoft.Compute/locations/eastus/operations/" in initial.headers["Azure-AsyncOperation"]
    assert initial.headers["Retry-After"]


def test_operation_finishes_after_the_configured_number_of_polls():
    with FakeAzure(lro_polls=3) as azure:
        c = make_clients(azure)
        net = build_network(c)
        before = len(_status_polls(azure))
        create_vmss(c, net)
        assert len(_status_polls(azure)) - before == 3


def test_resource_is_creating_until_its_operation_finishes():
    with FakeAzure(lro_polls=2) as azure:
        c = make_clients(azure)
        net = build_network(c)
        c.compute.virtual_machine_scale_sets.begin_create_or_update(RG, "vmss", vmss_body(net["subnet"]), polling=False)
        assert c.compute.virtual_machine_scale_sets.get(RG, "vmss").provisioning_state == "Creating"


def test_instances_exist_only_once_the_create_succeeded(azure, clients, network):
    clients.compute.virtual_machine_scale_sets.begin_create_or_update(RG, "vmss", vmss_body(network["subnet"]),
                                                                      polling=False)
    assert azure.resources(type="Microsoft.Compute/virtualMachineScaleSets/virtualMachines") == []


def test_gets_of_the_resource_count_as_polls():
    """So a caller that started with --no-wait can wait by reading the resource."""
    with FakeAzure(lro_polls=2) as azure:
        c = make_clients(azure)
        net = build_network(c)
        c.compute.virtual_machine_scale_sets.begin_create_or_update(RG, "vmss", vmss_body(net["subnet"]), polling=False)
        states = [c.compute.virtual_machine_scale_sets.get(RG, "vmss").provisioning_state for _ in range(2)]
        assert states == ["Creating", "Succeeded"]


def test_delete_answers_202_with_a_location_header(azure, clients, network):
    create_vmss(clients, network)
    clients.compute.virtual_machine_scale_sets.begin_delete(RG, "vmss").result()
    delete = next(r for r in azure.requests if r.method == "DELETE")
    polls = [r.status for r in azure.requests if "/operationResults/" in r.path]
    assert (delete.status, polls) == (202, [204])


def test_injected_operation_error_fails_result_with_the_arm_code(azure, clients, network):
    azure.inject(method="PUT", path="virtualMachineScaleSets", operation_error="AllocationFailed",
                 message="Allocation failed. We do not have sufficient "
                         "capacity for the requested VM size in this region.")
    poller = clients.compute.virtual_machine_scale_sets.begin_create_or_update(RG, "vmss", vmss_body(network["subnet"]))
    with pytest.raises(HttpResponseError) as err:
        poller.result()
    assert err.value.error.code == "AllocationFailed"


def test_failed_create_leaves_the_scale_set_failed_without_instances(azure, clients, network):
    azure.inject(path="virtualMachineScaleSets", operation_error="AllocationFailed")
    with pytest.raises(HttpResponseError):
        create_vmss(clients, network)
    assert clients.compute.virtual_machine_scale_sets.get(RG, "vmss").provisioning_state == "Failed"
    assert list(clients.compute.virtual_machine_scale_set_vms.list(RG, "vmss")) == []


def test_failed_create_holds_no_quota(azure, clients, network):
    before = azure.usage(LOCATION, FAMILY)
    azure.inject(path="virtualMachineScaleSets", operation_error="ZonalAllocationFailed")
    with pytest.raises(HttpResponseError):
        create_vmss(clients, network)
    assert azure.usage(LOCATION, FAMILY) == before


def test_failed_scale_set_instance_view_names_the_error(azure, clients, network):
    azure.inject(path="virtualMachineScaleSets", operation_error="AllocationFailed")
    with pytest.raises(HttpResponseError):
        create_vmss(clients, network)
    view = clients.compute.virtual_machine_scale_sets.get_instance_view(RG, "vmss")
    assert view.statuses[0].code == "ProvisioningState/failed/AllocationFailed"


def test_recreating_a_failed_scale_set_succeeds(azure, clients, network):
    azure.inject(path="virtualMachineScaleSets", operation_error="AllocationFailed")
    with pytest.raises(HttpResponseError):
        create_vmss(clients, network)
    assert create_vmss(clients, network).provisioning_state == "Succeeded"


def test_injected_error_on_delete_fails_the_delete(azure, clients, network):
    create_vmss(clients, network)
    azure.inject(method="DELETE", operation_error="InternalOperationError")
    with pytest.raises(HttpResponseError) as err:
        clients.compute.virtual_machine_scale_sets.begin_delete(RG, "vmss").result()
    assert err.value.error.code == "InternalOperationError"
    assert azure.get(network["subnet"].split("/providers/")[0]
                     + "/providers/Microsoft.Compute/virtualMachineScaleSets/vmss") is not None


def test_duration_mode_finishes_after_lro_seconds_on_the_virtual_clock():
    with FakeAzure(lro_seconds=30) as azure:
        c = make_clients(azure)
        net = build_network(c)
        start = azure.now()
        create_vmss(c, net)
        assert azure.now() - start >= 30


def _vmss_id(net: dict, name: str = "vmss") -> str:
    return net["subnet"].split("/providers/")[0] + f"/providers/Microsoft.Compute/virtualMachineScaleSets/{name}"


def test_a_second_put_while_the_first_runs_is_refused_as_compute_does():
    with FakeAzure(lro_polls=2) as azure:
        c = make_clients(azure)
        net = build_network(c)
        c.compute.virtual_machine_scale_sets.begin_create_or_update(RG, "vmss", vmss_body(net["subnet"]), polling=False)
        with pytest.raises(HttpResponseError) as err:
            c.compute.virtual_machine_scale_sets.begin_create_or_update(RG, "vmss",
                                                                        vmss_body(net["subnet"], capacity=4),
                                                                        polling=False)
        assert (err.value.status_code, err.value.error.code) == (409, "OperationNotAllowed")
        message = err.value.error.message
        assert "Virtual Machine Scale Set 'vmss'" in message and "in progress" in message
        vmss = azure.get(_vmss_id(net))
        assert (vmss["properties"]["provisioningState"], vmss["sku"]["capacity"]) == ("Creating", 3)  # untouched


def test_a_delete_while_the_create_runs_is_refused():
    with FakeAzure(lro_polls=2) as azure:
        c = make_clients(azure)
        net = build_network(c)
        c.compute.virtual_machine_scale_sets.begin_create_or_update(RG, "vmss", vmss_body(net["subnet"]), polling=False)
        with pytest.raises(HttpResponseError) as err:
            c.compute.virtual_machine_scale_sets.begin_delete(RG, "vmss", polling=False)
        assert (err.value.status_code, err.value.error.code) == (409, "OperationNotAllowed")


def test_a_put_while_the_delete_runs_is_refused_as_marked_for_deletion(clients, network):
    create_vmss(clients, network)
    clients.compute.virtual_machine_scale_sets.begin_delete(RG, "vmss", polling=False)
    with pytest.raises(HttpResponseError) as err:
        clients.compute.virtual_machine_scale_sets.begin_create_or_update(RG, "vmss", vmss_body(network["subnet"]),
                                                                          polling=False)
    assert err.value.status_code == 409 and "since it is marked for deletion" in err.value.error.message


def test_a_repeated_delete_follows_the_running_one(azure, clients, network):
    create_vmss(clients, network)
    clients.compute.virtual_machine_scale_sets.begin_delete(RG, "vmss", polling=False)
    ops = len(azure._store.operations)
    clients.compute.virtual_machine_scale_sets.begin_delete(RG, "vmss").result()
    assert len(azure._store.operations) == ops  # no second operation started
    assert azure.get(_vmss_id(network)) is None


def test_network_answers_another_operation_in_progress_with_the_status_uri():
    with FakeAzure(lro_polls=3) as azure:
        c = make_clients(azure)
        c.resource.resource_groups.create_or_update(RG, {"location": LOCATION})
        body = {"location": LOCATION, "properties": {"addressSpace": {"addressPrefixes": ["10.0.0.0/16"]}}}
        c.network.virtual_networks.begin_create_or_update(RG, "vnet", body, polling=False)
        with pytest.raises(HttpResponseError) as err:
            c.network.virtual_networks.begin_create_or_update(RG, "vnet", body, polling=False)
        assert (err.value.status_code, err.value.error.code) == (409, "AnotherOperationInProgress")
        assert "/providers/Microsoft.Network/locations/eastus/operations/" in err.value.error.message


def test_a_group_being_deleted_takes_no_writes():
    with FakeAzure(lro_polls=3) as azure:
        c = make_clients(azure)
        c.resource.resource_groups.create_or_update(RG, {"location": LOCATION})
        c.resource.resource_groups.begin_delete(RG, polling=False)
        with pytest.raises(HttpResponseError) as err:
            c.resource.resource_groups.create_or_update(RG, {"location": LOCATION})
        assert (err.value.status_code, err.value.error.code) == (409, "ResourceGroupBeingDeleted")


def test_a_put_after_the_operation_ended_is_accepted(clients, network):
    create_vmss(clients, network)
    updated = clients.compute.virtual_machine_scale_sets.begin_create_or_update(
        RG, "vmss", vmss_body(network["subnet"], capacity=4)).result()
    assert (updated.provisioning_state, updated.sku.capacity) == ("Succeeded", 4)


def test_leaving_the_context_lets_unawaited_pollers_finish_against_the_fake():
    with FakeAzure(lro_polls=3) as azure:
        c = make_clients(azure)
        net = build_network(c)
        c.compute.virtual_machine_scale_sets.begin_create_or_update(RG, "vmss", vmss_body(net["subnet"]))
    last = azure.requests[-1]
    assert (last.method, last.path.endswith("/virtualMachineScaleSets/vmss"), last.status) == ("GET", True, 200)
