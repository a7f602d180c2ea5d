"""The simulated subscription runs every example as written, and `provision simulate ...` shapes it:
quota, SKU restrictions and capacity, as FakeAzure.set_quota/set_sku/set_capacity do in Python."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from deploy_support import assert_cli_error, cluster_args, create_args

import azgpu

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((REPO / "examples").glob("*.toml"))
DEMO_KEY = REPO / "examples" / "demo_key.pub"


def deployable(path: Path) -> bool:
    request = azgpu.build_request({**azgpu.read_cluster_file(str(path)), "ssh-key": str(DEMO_KEY)})
    return not [f for f in azgpu.validate(request, command="render").findings if f.code == "SERIES_RETIRED"]


DEPLOYABLE = [p for p in EXAMPLES if deployable(p)]


@pytest.fixture
def knob(run, state_file):
    """`provision simulate ARGS --simulate-state TMP/state.json`."""

    def _knob(*args):
        return run("simulate", *args, "--simulate-state", state_file)

    return _knob


@pytest.mark.parametrize("example", DEPLOYABLE, ids=[p.stem for p in DEPLOYABLE])
def test_every_example_creates_reports_and_goes_away(sim, example):
    data = azgpu.read_cluster_file(str(example))
    target = ["-n", data["name"], "-g", data["resource-group"]]
    rc, out, err = sim("create", "-f", example, "--ssh-key", DEMO_KEY, "-o", "none")
    assert rc == 0, err
    rc, out, err = sim("status", *target)
    assert rc == 0, err
    assert sum(s["running"] for s in json.loads(out)["scale_sets"]) == data["nodes"]
    rc, out, err = sim("outputs", *target, "--format", "hostfile")
    hosts = [line for line in out.splitlines() if not line.startswith("#")]  # comments name the IB domains
    assert rc == 0 and len(hosts) == data["nodes"], err
    rc, out, err = sim("destroy", *target, "--yes")
    assert rc == 0 and json.loads(out)["resource_group_deleted"] is True, err


def test_the_retired_example_is_refused_before_the_simulated_cloud_is_touched(sim, state_file):
    assert [p.name for p in EXAMPLES if p not in DEPLOYABLE] == ["nd.toml"]
    rc, out, err = sim("create", "-f", REPO / "examples" / "nd.toml", "--ssh-key", DEMO_KEY)
    assert_cli_error(rc, err, 2, "SERIES_RETIRED")
    assert not state_file.exists()


def test_the_simulated_subscription_has_gpu_quota_for_the_largest_example(knob):
    rc, out, err = knob("quota", "list", "-l", "eastus")
    usages = {u["name"]: u["limit"] for u in json.loads(out)}
    assert usages["Standard NDASv4_A100 Family"] >= 150 * 96 and usages["cores"] >= 150 * 96


# -- quota -----------------------------------------------------------------------------------------

def test_quota_set_makes_create_fail_with_the_increase_to_ask_for(sim, knob):
    rc, out, err = knob("quota", "set", "-l", "eastus", "--name", "Standard NDASv4_A100 Family", "--limit", "96")
    assert rc == 0, err
    assert json.loads(out)["limit"] == 96
    rc, out, err = sim(*create_args(nodes=2))
    assert_cli_error(rc, err, 2, "QUOTA_INSUFFICIENT", "request an increase to 192")


def test_quota_set_by_the_localized_name_and_usage(knob):
    rc, out, err = knob("quota", "set", "-l", "eastus", "--name", "Total Regional vCPUs", "--usage", "100")
    assert rc == 0, err
    assert (json.loads(out)["name"], json.loads(out)["usage"]) == ("cores", 100)


def test_quota_list_counts_what_the_simulated_cluster_holds(sim, knob):
    assert sim(*create_args(nodes=2))[0] == 0
    rc, out, err = knob("quota", "list", "-l", "eastus")
    assert {u["name"]: u["usage"] for u in json.loads(out)}["Standard NDASv4_A100 Family"] == 2 * 96


def test_an_unknown_quota_name_is_bad_input(knob):
    rc, out, err = knob("quota", "set", "-l", "eastus", "--name", "Standard Nothing Family", "--limit", "1")
    assert_cli_error(rc, err, 2, "UNKNOWN_QUOTA", "provision simulate quota list -l eastus")


def test_quota_set_without_a_value_is_bad_input(knob):
    rc, out, err = knob("quota", "set", "-l", "eastus", "--name", "cores")
    assert_cli_error(rc, err, 2, "MISSING_ARGUMENT", "--limit and/or --usage")


# -- restrictions ----------------------------------------------------------------------------------

def test_sku_restrict_makes_the_preflight_refuse_the_size(sim, knob):
    rc, out, err = knob("sku", "restrict", "-l", "eastus", "--size", "ND96asr_v4")
    assert rc == 0 and json.loads(out)["size"] == "Standard_ND96asr_v4", err
    rc, out, err = sim(*create_args(nodes=2))
    assert_cli_error(rc, err, 2, "SKU_RESTRICTED", "choose another -l/--location")


def test_a_zone_restriction_refuses_that_zone_only(sim, knob):
    assert knob("sku", "restrict", "-l", "eastus", "--size", "Standard_ND96asr_v4", "--zone", "1")[0] == 0
    rc, out, err = sim(*create_args(nodes=1), "--zone", "1")
    assert_cli_error(rc, err, 2, "SKU_RESTRICTED", "choose another --zone")
    assert sim(*create_args(nodes=1), "--zone", "2")[0] == 0


def test_unrestrict_lifts_it(sim, knob):
    knob("sku", "restrict", "-l", "eastus", "--size", "Standard_ND96asr_v4")
    assert knob("sku", "unrestrict", "-l", "eastus", "--size", "Standard_ND96asr_v4")[0] == 0
    assert sim(*create_args(nodes=1))[0] == 0


# -- capacity --------------------------------------------------------------------------------------

def test_capacity_set_makes_the_deployment_fail_for_capacity(sim, knob):
    assert knob("capacity", "set", "-l", "eastus", "--size", "Standard_ND96asr_v4", "--max-vms", "1")[0] == 0
    rc, out, err = sim(*create_args(nodes=2))
    assert_cli_error(rc, err, 1, "CAPACITY_UNAVAILABLE", "--fallback-locations")


def test_fallback_locations_get_past_missing_capacity(sim, knob):
    knob("capacity", "set", "-l", "eastus", "--size", "Standard_ND96asr_v4", "--max-vms", "0")
    rc, out, err = sim(*create_args(nodes=2), "--fallback-locations", "westus2")
    assert rc == 0, err
    assert json.loads(out)["location"] == "westus2"


def test_zones_get_past_a_zone_without_capacity(sim, knob):
    knob("capacity", "set", "-l", "eastus", "--size", "Standard_ND96asr_v4", "--zone", "1", "--max-vms", "0")
    rc, out, err = sim(*create_args(nodes=2), "--zone", "1", "--zones", "1", "2")
    assert rc == 0, err
    rc, out, err = sim("status", *cluster_args())
    assert json.loads(out)["scale_sets"][0]["running"] == 2


def test_capacity_set_needs_a_limit_or_unlimited(knob):
    rc, out, err = knob("capacity", "set", "-l", "eastus", "--size", "Standard_ND96asr_v4")
    assert_cli_error(rc, err, 2, "MISSING_ARGUMENT", "--max-vms 0")


def test_capacity_unlimited_lifts_the_limit(sim, knob):
    knob("capacity", "set", "-l", "eastus", "--size", "Standard_ND96asr_v4", "--max-vms", "0")
    knob("capacity", "set", "-l", "eastus", "--size", "Standard_ND96asr_v4", "--unlimited")
    assert sim(*create_args(nodes=2))[0] == 0


# -- show and reset --------------------------------------------------------------------------------

def test_show_lists_what_was_changed(sim, knob):
    sim(*create_args(nodes=1))
    knob("capacity", "set", "-l", "eastus", "--size", "Standard_ND96asr_v4", "--max-vms", "9")
    knob("sku", "restrict", "-l", "westus2", "--size", "Standard_ND96asr_v4")
    rc, out, err = knob("show")
    shown = json.loads(out)
    assert shown["resource_groups"] == ["rg1"] and shown["resources"] > 0
    assert shown["capacity_limits"] == {"eastus": {"standard_nd96asr_v4": {"": 9}}}
    assert [c["location"] for c in shown["sku_changes"]] == ["westus2"]


def test_reset_forgets_everything(sim, knob, state_file):
    sim(*create_args(nodes=1))
    knob("quota", "set", "-l", "eastus", "--name", "cores", "--limit", "1")
    rc, out, err = knob("reset", "--yes")
    assert rc == 0, err
    state = json.loads(state_file.read_text())
    assert (state["resources"], state["quota"]) == ({}, {})
    rc, out, err = sim("status", *cluster_args())
    assert_cli_error(rc, err, 3, "CLUSTER_NOT_FOUND")


def test_reset_without_a_terminal_needs_yes(knob, state_file):
    rc, out, err = knob("reset")
    assert_cli_error(rc, err, 2, "CONFIRMATION_REQUIRED", "--yes")
