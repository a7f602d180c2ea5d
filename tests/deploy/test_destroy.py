"""destroy deletes exactly the cluster's tagged resources; status/destroy of a missing cluster exit 3."""

from __future__ import annotations

import io
import sys

import pytest
from deploy_support import (
    LOCATION,
    NAME,
    NAT,
    NSG,
    PIP,
    RG,
    RG_TYPE,
    VMSS,
    VNET,
    assert_cli_error,
    calls,
    cluster_args,
    ours,
    request,
)

from azgpu.deploy import create
from azgpu.deploy.lifecycle import destroy

OTHER = {"managed-by": "azgpu", "azgpu-cluster": "c2", "azgpu-profile": "nd-a100-v4"}


def rid(azure, type_: str, name: str, rg: str = RG) -> str:
    return f"/subscriptions/{azure.subscription_id}/resourceGroups/{rg}/providers/{type_}/{name}"


def seed_foreign(azure) -> list[dict]:
    """Neighbours in the same resource group: an untagged scale set, another cluster's, an untagged NSG."""
    vmss = {"location": LOCATION, "sku": {"name": "Standard_D2s_v5", "tier": "Standard", "capacity": 1},
            "properties": {"orchestrationMode": "Uniform", "singlePlacementGroup": False}}
    return [
        azure.add_resource(rid(azure, VMSS, "web"), vmss),
        azure.add_resource(rid(azure, VMSS, "c2-vmss000"), {**vmss, "tags": OTHER}),
        azure.add_resource(rid(azure, NSG, "c1-nsg-manual"), {"location": LOCATION, "properties": {}}),
    ]


@pytest.fixture
def cluster(azure, session):
    create(session, request(nodes=6, max_ib_domain=2))
    return azure


def test_destroy_leaves_no_resource_of_the_cluster(cluster, session):
    destroy(session, NAME, RG)
    assert [r["id"] for r in cluster.resources() if ours(r) and r["type"] != RG_TYPE] == []


def test_destroy_deletes_scale_sets_before_the_network(cluster, session):
    before = len(cluster.requests)
    destroy(session, NAME, RG)
    deletes = [r.path for r in calls(cluster, "DELETE", since=before)]
    last_vmss = max(i for i, p in enumerate(deletes) if "virtualMachineScaleSets" in p)
    first_network = min(i for i, p in enumerate(deletes) if "Microsoft.Network" in p)
    assert last_vmss < first_network


def test_destroy_touches_no_untagged_or_foreign_resource(cluster, session):
    foreign = seed_foreign(cluster)
    before = len(cluster.requests)
    destroy(session, NAME, RG)
    for resource in foreign:
        assert cluster.get(resource["id"]) == resource
    touched = {r.path.lower() for r in calls(cluster, "PUT", "PATCH", "DELETE", since=before)}
    assert not touched & {r["id"].lower() for r in foreign}


def test_destroy_keeps_a_resource_group_that_still_holds_other_resources(cluster, session):
    seed_foreign(cluster)
    result = destroy(session, NAME, RG)
    assert result["resource_group_deleted"] is False
    assert cluster.resources(type=RG_TYPE)


def test_destroy_deletes_the_resource_group_azgpu_created_once_empty(cluster, session):
    result = destroy(session, NAME, RG)
    assert result["resource_group_deleted"] is True
    assert cluster.resources() == []


def test_destroy_keeps_a_resource_group_azgpu_did_not_create(azure, session):
    azure.add_resource(f"/subscriptions/{azure.subscription_id}/resourceGroups/{RG}", {"location": LOCATION})
    create(session, request())
    result = destroy(session, NAME, RG)
    assert result["resource_group_deleted"] is False
    assert [g["name"] for g in azure.resources(type=RG_TYPE)] == [RG]
    assert azure.resources(resource_group=RG) == []


def test_destroy_with_yes_via_cli(cluster, cli):
    rc, out, err = cli("destroy", *cluster_args(), "--yes")
    assert rc == 0, err
    assert cluster.resources() == []


def test_destroy_without_terminal_and_without_yes_refuses(cluster, cli, monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    before = len(cluster.requests)
    rc, out, err = cli("destroy", *cluster_args())
    assert_cli_error(rc, err, 2, "CONFIRMATION_REQUIRED", "--yes")
    assert cluster.requests[before:] == []  # refused before talking to Azure
    assert len(cluster.resources(type=VMSS)) == 3


@pytest.mark.parametrize("command", ["status", "outputs", "destroy", "wait"])
def test_missing_cluster_exits_3(azure, cli, command):
    azure.add_resource(f"/subscriptions/{azure.subscription_id}/resourceGroups/{RG}", {"location": LOCATION})
    extra = ["--yes"] if command == "destroy" else []
    rc, out, err = cli(command, *cluster_args(), *extra)
    assert_cli_error(rc, err, 3, "CLUSTER_NOT_FOUND", "-n/--name")


def test_status_in_a_missing_resource_group_exits_3(azure, cli):
    rc, out, err = cli("status", *cluster_args(rg="nope"))
    assert_cli_error(rc, err, 3, "CLUSTER_NOT_FOUND", "-g/--resource-group")


def test_another_clusters_resources_do_not_make_this_one_exist(azure, session, cli):
    create(session, request(name="c2"))
    rc, out, err = cli("status", *cluster_args())
    assert rc == 3, err


def test_status_reports_every_scale_set_and_instance(cluster, cli):
    import json

    rc, out, err = cli("status", *cluster_args())
    assert rc == 0, err
    status = json.loads(out)
    assert [s["name"] for s in status["scale_sets"]] == ["c1-vmss000", "c1-vmss001", "c1-vmss002"]
    assert [(s["succeeded"], s["running"], s["capacity"]) for s in status["scale_sets"]] == [(2, 2, 2)] * 3
    assert {n["type"] for n in status["network"]} == {NSG, VNET, NAT, PIP}
    assert status["profile"] == "nd-a100-v4"
