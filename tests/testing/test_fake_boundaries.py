"""What the fake refuses loudly, what it records, and its credential."""

from __future__ import annotations

import threading

import pytest
import requests
from azure.core.exceptions import ResourceNotFoundError
from azure.mgmt.resource.resources import ResourceManagementClient
from fake_azure_support import RG

from azgpu.testing import FakeAzure, FakeCredential, NotImplementedInFake, OfflineError


def test_unimplemented_request_raises_not_implemented_in_fake(azure, clients):
    clients.resource.resource_groups.create_or_update(RG, {"location": "eastus"})
    with pytest.raises(NotImplementedInFake) as err:
        clients.compute.availability_sets.get(RG, "avset")
    assert (err.value.method, err.value.path.endswith("/availabilitySets/avset")) == ("GET", True)


def test_unimplemented_request_is_logged_without_a_status(azure, clients):
    with pytest.raises(NotImplementedInFake):
        clients.compute.virtual_machines.get(RG, "vm")
    assert (azure.requests[-1].method, azure.requests[-1].status) == ("GET", None)


def test_unsupported_filter_is_not_silently_ignored(azure, clients):
    with pytest.raises(NotImplementedInFake):
        list(clients.compute.resource_skus.list(filter="location eq 'eastus' and name eq 'x'"))


def test_other_hosts_never_reach_the_network(azure):
    with pytest.raises(NotImplementedInFake):
        requests.get("https://example.com/anything", timeout=1)


def test_another_subscription_is_not_found(azure):
    other = ResourceManagementClient(FakeCredential(), "11111111-1111-1111-1111-111111111111", polling_interval=0)
    with pytest.raises(ResourceNotFoundError) as err:
        other.resource_groups.get(RG)
    assert err.value.error.code == "SubscriptionNotFound"


def test_every_call_is_logged_with_api_version_and_body(azure, clients):
    clients.resource.resource_groups.create_or_update(RG, {"location": "eastus", "tags": {"k": "v"}})
    logged = azure.requests[-1]
    assert (logged.method, logged.path, logged.body, logged.status) == (
        "PUT", f"/subscriptions/{azure.subscription_id}/resourcegroups/{RG}",
        {"location": "eastus", "tags": {"k": "v"}}, 201)
    assert logged.api_version and logged.query["api-version"] == logged.api_version


def test_credential_gives_a_far_future_token_for_both_protocols():
    cred = FakeCredential()
    token, info = cred.get_token("https://management.azure.com/.default"), cred.get_token_info("https://management.azure.com/.default")
    assert (token.token, info.token) == ("fake", "fake")
    assert min(token.expires_on, info.expires_on) > 4_000_000_000


def test_add_resource_seeds_a_scale_set_with_instances(azure):
    azure.add_resource(f"/subscriptions/{azure.subscription_id}/resourceGroups/{RG}", {"location": "eastus"})
    vnet = azure.add_resource(
        f"/subscriptions/{azure.subscription_id}/resourceGroups/{RG}/providers/Microsoft.Network/virtualNetworks/v",
        {"location": "eastus", "properties": {"addressSpace": {"addressPrefixes": ["10.1.0.0/16"]},
                                              "subnets": [{"name": "s",
                                                           "properties": {"addressPrefix": "10.1.0.0/24"}}]}})
    azure.add_resource(
        f"/subscriptions/{azure.subscription_id}/resourceGroups/{RG}/providers/Microsoft.Compute/virtualMachineScaleSets/old",
        {"location": "eastus", "sku": {"name": "Standard_D2s_v5", "capacity": 2},
         "properties": {"virtualMachineProfile": {
            "networkProfile": {"networkInterfaceConfigurations": [{"name": "n", "properties": {"ipConfigurations": [
                {"name": "i", "properties": {"subnet": {"id": vnet["properties"]["subnets"][0]["id"]}}}]}}]}}}})
    vms = azure.resources(type="Microsoft.Compute/virtualMachineScaleSets/virtualMachines")
    assert [vm["name"] for vm in vms] == ["old_0", "old_1"]


# -- a transport that cannot leave the process ---------------------------------------------------------

def _offline_client(azure):
    from azure.core.pipeline.transport import RequestsTransport

    transport = RequestsTransport(session=azure.requests_session(), session_owner=False)
    return ResourceManagementClient(FakeCredential(), azure.subscription_id, polling_interval=0, transport=transport,
                                    retry_total=0)


def test_requests_session_is_answered_by_the_running_fake(azure):
    client = _offline_client(azure)
    assert client.resource_groups.create_or_update(RG, {"location": "eastus"}).name == RG


def test_after_stop_its_requests_fail_in_process_and_never_open_a_socket(monkeypatch):
    import socket

    connects = []
    monkeypatch.setattr(socket.socket, "connect", lambda self, address: connects.append(address))
    monkeypatch.setattr(socket, "create_connection", lambda *a, **k: connects.append(a))
    azure = FakeAzure()
    azure.start()
    client = _offline_client(azure)
    azure.stop()
    with pytest.raises(OfflineError):
        client.resource_groups.get(RG)
    assert connects == []


def test_its_adapter_cannot_connect_even_when_the_mock_is_gone(azure):
    adapter = azure.requests_session().get_adapter("https://management.azure.com")
    with pytest.raises(OfflineError):
        adapter.get_connection_with_tls_context(requests.Request("GET", "https://management.azure.com/").prepare(),
                                                True)


def test_stop_waits_for_the_requests_in_flight():
    azure = FakeAzure()
    azure.start()
    client = _offline_client(azure)
    order: list[str] = []
    azure._lock.acquire()  # the fake's answer waits for this lock: the request stays in flight
    try:
        sender = threading.Thread(target=lambda: order.append(client.resource_groups.check_existence(RG) and "x"
                                                              or "answered"))
        sender.start()
        with azure._transport._flights:
            assert azure._transport._flights.wait_for(lambda: azure._transport._in_flight == 1, timeout=5)
        stopper = threading.Thread(target=lambda: (azure.stop(), order.append("stopped")))
        stopper.start()
    finally:
        azure._lock.release()
    sender.join(5)
    stopper.join(5)
    assert order == ["answered", "stopped"]  # the fake answered it before it was uninstalled


# What the fake may take from azgpu itself: the exception bases its errors derive from (so the CLI
# reports a bad state file like any input error), the price cache it keeps the fake's prices out of,
# and the node script it runs on simulated hardware. Never resource types, api-versions or profiles:
# the fake is a second opinion on what Azure answers, not a copy of azgpu's.
ALLOWED_PRODUCT_IMPORTS = {"azgpu.errors", "azgpu.pricing", "azgpu.health.script"}


def _imports(path, package: str) -> set[str]:
    import ast

    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")
            base = base[: len(base) - node.level + 1] if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            found |= {module} if node.module else {f"{module}.{alias.name}" for alias in node.names}
    return found


def test_the_fake_takes_no_constants_from_azgpu():
    from pathlib import Path

    root = Path(__file__).resolve().parents[2] / "src" / "azgpu" / "testing"
    taken = {}
    for path in root.rglob("*.py"):
        package = ".".join(["azgpu", *path.relative_to(root.parent).parent.parts])
        for module in _imports(path, package):
            if module.startswith("azgpu.") and not module.startswith("azgpu.testing"):
                taken.setdefault(module, []).append(path.name)
    assert set(taken) <= ALLOWED_PRODUCT_IMPORTS, taken
