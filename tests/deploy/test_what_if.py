"""`create --what-if` against live state: `=` when nothing changed, `~` with the exact property, one
`-` per instance a shrink deletes, `#` for what Azure cannot change in place; nothing written."""

from __future__ import annotations

import json

import pytest
from deploy_support import RG, VM, calls, create_args, request, writes

import azgpu
from azgpu.deploy import create


def what_if_json(run_cli, *args, nodes: int = 2) -> dict:
    rc, out, err = run_cli(*create_args(*args, nodes=nodes), "--what-if", "-o", "json")
    assert rc == 0, err
    return json.loads(out)


def what_if_text(run_cli, *args, nodes: int = 2) -> str:
    rc, out, err = run_cli(*create_args(*args, nodes=nodes), "--what-if")
    assert rc == 0, err
    return out


@pytest.fixture
def existing(azure, session):
    """A 4-node ND A100 v4 cluster c1 in rg1, tagged team=a."""
    create(session, request(nodes=4, tags={"team": "a"}))
    return azure


def test_unchanged_cluster_shows_no_change_for_every_resource(existing, cli):
    result = what_if_json(cli, "nd-a100-v4", "--tag", "team=a", nodes=4)
    assert {c["name"]: c["symbol"] for c in result["changes"]} == {
        "c1-nsg": "=", "c1-natgw-ip": "=", "c1-natgw": "=", "c1-vnet": "=", "c1-vmss000": "="}
    assert result["summary"] == {"no_change": 5} and result["instances_to_delete"] == []


def test_unchanged_cluster_prints_equals_lines_the_az_way(existing, cli):
    text = what_if_text(cli, "nd-a100-v4", "--tag", "team=a", nodes=4)
    assert "  = Microsoft.Compute/virtualMachineScaleSets/c1-vmss000 [" in text
    assert "Resource changes: 5 no change." in text


def test_changed_tag_shows_modify_with_the_exact_property(existing, cli):
    result = what_if_json(cli, "nd-a100-v4", "--tag", "team=b", nodes=4)
    vmss = next(c for c in result["changes"] if c["name"] == "c1-vmss000")
    assert vmss["symbol"] == "~"
    assert vmss["delta"] == [{"path": "tags.team", "property_change_type": "Modify", "before": "a", "after": "b"}]
    assert '    ~ tags.team: "a" => "b"' in what_if_text(cli, "nd-a100-v4", "--tag", "team=b", nodes=4)


def test_shrink_shows_each_instance_it_deletes(existing, cli):
    result = what_if_json(cli, "nd-a100-v4", "--tag", "team=a", nodes=2)
    vmss = next(c for c in result["changes"] if c["name"] == "c1-vmss000")
    assert [(i["change_type"], i["name"]) for i in vmss["instances"]] == [("Delete", "c1-vmss000_3"),
                                                                          ("Delete", "c1-vmss000_2")]
    assert (vmss["instances_before"], vmss["instances_after"]) == (4, 2)
    assert result["instances_to_delete"] == ["c1-vmss000_3", "c1-vmss000_2"]
    text = what_if_text(cli, "nd-a100-v4", "--tag", "team=a", nodes=2)
    assert "    ~ sku.capacity: 4 => 2" in text
    assert "    - instance 3: c1-vmss000_3 (c1-000-000003, Succeeded" in text
    assert "    - instance 2: c1-vmss000_2 (c1-000-000002, Succeeded" in text


def test_size_change_is_refused_with_a_bang(existing, cli):
    result = what_if_json(cli, "ndm-a100-v4", "--tag", "team=a", nodes=4)
    vmss = next(c for c in result["changes"] if c["name"] == "c1-vmss000")
    assert vmss["symbol"] == "#" and "Azure cannot change that in place" in vmss["reason"]
    assert {"path": "sku.name", "property_change_type": "Modify", "before": "Standard_ND96asr_v4",
            "after": "Standard_ND96amsr_A100_v4", "refused": True} in vmss["delta"]
    assert '    # sku.name: "Standard_ND96asr_v4" => "Standard_ND96amsr_A100_v4"' in \
        what_if_text(cli, "ndm-a100-v4", "--tag", "team=a", nodes=4)


def test_what_if_writes_nothing(existing, cli):
    before = len(existing.requests)
    what_if_json(cli, "ndm-a100-v4", "--tag", "team=b", nodes=2)
    assert writes(existing, since=before) == []


def test_what_if_reads_instances_only_of_a_scale_set_that_shrinks(existing, cli):
    before = len(existing.requests)
    what_if_json(cli, "nd-a100-v4", "--tag", "team=a", nodes=4)
    assert [r.path for r in calls(existing, "GET", since=before) if r.path.endswith("/virtualMachines")] == []


def test_new_cluster_shows_every_resource_to_create(azure, cli):
    result = what_if_json(cli, "nd-a100-v4", nodes=3)
    assert [c["symbol"] for c in result["changes"]] == ["+"] * 5  # NSG, NAT public IP, NAT gateway, VNet, scale set
    vmss = result["changes"][-1]
    assert vmss["instances"] == [{"change_type": "Create", "count": 3}]
    assert azure.resources(resource_group=RG) == []


def test_growth_shows_the_new_instances(existing, cli):
    vmss = what_if_json(cli, "nd-a100-v4", "--tag", "team=a", nodes=6)["changes"][-1]
    assert vmss["instances"] == [{"change_type": "Create", "count": 2}]
    assert vmss["delta"] == [{"path": "sku.capacity", "property_change_type": "Modify", "before": 4, "after": 6}]


def test_a_scale_set_the_plan_no_longer_has_is_deleted_with_its_instances(azure, session, cli):
    create(session, request(nodes=4, max_ib_domain=2))  # c1-vmss000 and c1-vmss001, two nodes each
    result = what_if_json(cli, "nd-a100-v4", "--max-ib-domain", "2", nodes=2)
    gone = next(c for c in result["changes"] if c["name"] == "c1-vmss001")
    assert gone["symbol"] == "-" and (gone["instances_before"], gone["instances_after"]) == (2, 0)
    assert result["instances_to_delete"] == ["c1-vmss001_1", "c1-vmss001_0"]


def test_a_same_named_resource_azgpu_did_not_make_is_refused(azure, cli):
    sub = azure.subscription_id
    azure.add_resource(f"/subscriptions/{sub}/resourceGroups/{RG}", {"location": "eastus"})
    azure.add_resource(f"/subscriptions/{sub}/resourceGroups/{RG}/providers/Microsoft.Network/networkSecurityGroups/c1-nsg",
                       {"location": "eastus", "tags": {}, "properties": {"securityRules": []}})
    nsg = what_if_json(cli, "nd-a100-v4")["changes"][0]
    assert nsg["symbol"] == "#" and "was not created by azgpu" in nsg["reason"]


def test_what_if_comes_with_the_cost_before_and_after(existing, cli):
    cost = what_if_json(cli, "nd-a100-v4", "--tag", "team=a", nodes=2)["cost"]
    # The fake answers prices.azure.com from its recording; this session is not --simulate, so the
    # lookups are off (AZGPU_PRICES=off in the test suite) and say so.
    assert cost["status"] == "unknown" and "AZGPU_PRICES" in cost["reason"]
    assert (cost["nodes"], cost["before"]["nodes"]) == (2, 4)


def test_dry_run_shows_the_what_if_with_the_instances_it_would_delete(existing, cli):
    rc, out, err = cli(*create_args("nd-a100-v4", "--tag", "team=a", nodes=3), "--dry-run")
    assert rc == 0, err
    assert json.loads(out)["what_if"]["instances_to_delete"] == ["c1-vmss000_3"]
    assert len(existing.resources(type=VM)) == 4


def test_what_if_and_dry_run_together_are_refused(cli):
    rc, out, err = cli(*create_args(), "--what-if", "--dry-run")
    assert rc == 2 and "ERROR: [CONFLICTING_OPTIONS]" in err and "remedy: pass one" in err


def test_python_api_what_if(existing, session):
    result = azgpu.what_if(session, request(nodes=3, tags={"team": "a"}), prices=False)
    assert [i.name for _, i in result.deleted_instances] == ["c1-vmss000_3"]
    assert result.cost is None and result.as_dict()["summary"] == {"to_modify": 1, "no_change": 4}


def test_simulated_what_if_prices_from_the_simulated_retail_prices_api(sim):
    rc, out, err = sim(*create_args("nd-a100-v4", nodes=2), "--what-if", "-o", "json")
    assert rc == 0, err
    cost = json.loads(out)["cost"]
    assert (cost["status"], cost["per_node_hourly"], cost["hourly"]) == ("known", 27.197, 54.394)
    assert cost["monthly"] == round(54.394 * 730, 2) and cost["source"].endswith("(simulated)")


def test_a_preflight_error_is_reported_and_the_changes_still_shown(existing, cli):
    existing.set_quota("eastus", "standardNDASv4_A100Family", limit=4 * 96)
    rc, out, err = cli(*create_args("nd-a100-v4", "--tag", "team=a", nodes=6), "--what-if", "-o", "json")
    assert rc == 0, err
    assert "ERROR: [QUOTA_INSUFFICIENT]" in err and "request an increase to 576" in err
    result = json.loads(out)
    assert result["changes"][-1]["instances"] == [{"change_type": "Create", "count": 2}]
    assert [f["code"] for f in result["preflight"]["findings"] if f["severity"] == "error"] == ["QUOTA_INSUFFICIENT"]


def test_table_output_is_the_report_too(existing, cli):
    rc, out, err = cli(*create_args("nd-a100-v4", "--tag", "team=a", nodes=4), "--what-if", "-o", "table")
    assert rc == 0, err
    assert out.startswith("Resource and property changes are indicated with this symbol:\n  = Nochange\n")


def test_create_with_a_currency_the_api_does_not_offer_exits_2_before_azure(azure, cli):
    rc, out, err = cli(*create_args(), "--what-if", "--currency", "ABC")
    assert rc == 2 and "ERROR: [INVALID_CURRENCY]" in err and "remedy: use one of USD" in err
    assert azure.requests == []
