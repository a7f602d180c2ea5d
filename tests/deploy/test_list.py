"""`provision list`: every azgpu cluster across resource groups from one listing of the subscription,
found by azgpu's tags; one instance listing per scale set for the nodes that run."""

from __future__ import annotations

import json

import pytest
from deploy_support import LOCATION, NSG, assert_cli_error, request

from azgpu.deploy import create
from azgpu.deploy.cluster_list import list_clusters


@pytest.fixture
def three(azure, session):
    """c1 (2 x ND A100 v4, one scale set) and c2 (3 x NDv2, two scale sets) in rg1, c3 (NG) in rg2."""
    create(session, request(nodes=2))
    create(session, request("ndv2", name="c2", nodes=3, max_ib_domain=2))
    create(session, request("ng", name="c3", resource_group="rg2", nodes=1))
    return azure


def rows(cli, *args) -> list[dict]:
    rc, out, err = cli("list", *args)
    assert rc == 0, err
    return json.loads(out)


def test_every_cluster_across_resource_groups_with_one_listing(three, cli):
    before = len(three.requests)
    found = rows(cli)
    assert [(r["name"], r["resource_group"], r["profile"]) for r in found] == [
        ("c1", "rg1", "nd-a100-v4"), ("c2", "rg1", "ndv2"), ("c3", "rg2", "ng")]
    listings = [r for r in three.requests[before:] if r.path.endswith("/resources")]
    assert len(listings) == 1 and listings[0].path == f"/subscriptions/{three.subscription_id}/resources"


def test_apart_from_the_listing_one_request_per_scale_set(three, cli):
    before = len(three.requests)
    rows(cli)
    instance_reads = [r for r in three.requests[before:] if r.path.endswith("/virtualMachines")]
    assert len(three.requests) - before == 1 + len(instance_reads) == 1 + 4  # c1: 1, c2: 2, c3: 1 scale sets
    assert {r.query.get("$expand") for r in instance_reads} == {"instanceView"}


def test_nodes_running_and_total_infiniband_domains_size_location_created(three, cli):
    c1, c2, c3 = rows(cli)
    assert (c1["running"], c1["total"], c1["ib_domains"], c1["size"], c1["location"]) == \
           (2, 2, 1, "Standard_ND96asr_v4", LOCATION)
    assert (c2["running"], c2["total"], c2["ib_domains"]) == (3, 3, 2)
    assert (c3["ib_domains"], c3["size"]) == (0, "Standard_NG32ads_V620_v1")  # NG has no InfiniBand
    assert c1["created"] and c1["state"] == "Succeeded"


def test_stopped_nodes_count_in_the_total_not_as_running(three, session, cli, monkeypatch):
    from azgpu.deploy import cluster_list as inventory

    monkeypatch.setattr(inventory, "_power_state", lambda vm: "deallocated" if vm.instance_id == "1" else "running")
    c1 = rows(cli)[0]
    assert (c1["running"], c1["total"]) == (1, 2)


def test_one_resource_group(three, cli):
    assert [r["name"] for r in rows(cli, "-g", "rg2")] == ["c3"]


def test_a_missing_resource_group_exits_3(three, cli):
    rc, out, err = cli("list", "-g", "nope")
    assert_cli_error(rc, err, 3, "RESOURCE_GROUP_NOT_FOUND", "leave -g out")


def test_resources_azgpu_did_not_tag_are_no_cluster(azure, session):
    sub = azure.subscription_id
    azure.add_resource(f"/subscriptions/{sub}/resourceGroups/other", {"location": LOCATION})
    azure.add_resource(f"/subscriptions/{sub}/resourceGroups/other/providers/{NSG}/web",
                       {"location": LOCATION, "tags": {"azgpu-cluster": "web"}, "properties": {}})
    assert list_clusters(session) == []


def test_a_cluster_whose_scale_sets_are_gone_still_shows_with_no_nodes(azure, session):
    create(session, request(nodes=1))
    session.compute.virtual_machine_scale_sets.begin_delete("rg1", "c1-vmss000").result()
    (c1,) = list_clusters(session)
    assert (c1["name"], c1["running"], c1["total"], c1["size"]) == ("c1", 0, 0, None)


def test_table_and_query(three, cli):
    rc, out, err = cli("list", "-o", "table")
    assert rc == 0, err
    assert out.splitlines()[0].split()[:4] == ["Name", "Resource", "group", "Location"]
    rc, out, err = cli("list", "--query", "[?total > `2`].name", "-o", "tsv")
    assert out.split() == ["c2"]


def test_simulated_list(sim):
    from deploy_support import create_args

    assert sim(*create_args("ndv2"))[0] == 0
    rc, out, err = sim("list")
    assert rc == 0, err
    assert [(r["name"], r["running"], r["total"]) for r in json.loads(out)] == [("c1", 2, 2)]
