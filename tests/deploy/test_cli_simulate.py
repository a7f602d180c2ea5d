"""The CLI end to end with --simulate: each command a fresh in-process main(), the simulated cloud
carried from one to the next in a state file, as separate `provision` processes would."""

from __future__ import annotations

import json

import pytest
from deploy_support import NAME, RG, SEED_SERIES, assert_cli_error, cluster_args, create_args

SMALL = 2


def nodes(profile: str) -> int:
    return 18 if "gb" in profile else SMALL  # GB: one whole NVL72 rack (NODES_NOT_RACK_MULTIPLE otherwise)


@pytest.fixture(params=SEED_SERIES)
def created(request, sim):
    """A cluster of each deployable seed series, created through the CLI; returns (profile, result)."""
    rc, out, err = sim(*create_args(request.param, nodes=nodes(request.param)))
    assert rc == 0, err
    return request.param, json.loads(out)


def test_create_deploys_every_resource(created):
    profile, result = created
    assert result["profile"] == profile and result["nodes"] == nodes(profile)
    assert {r["state"] for r in result["resources"]} == {"succeeded"}


def test_status_after_create_shows_every_instance_running(created, sim):
    profile, _ = created
    rc, out, err = sim("status", *cluster_args())
    assert rc == 0, err
    status = json.loads(out)
    assert status["profile"] == profile
    assert sum(s["running"] for s in status["scale_sets"]) == nodes(profile)
    assert {s["provisioning_state"] for s in status["scale_sets"]} == {"Succeeded"}


def test_outputs_after_create_list_every_node(created, sim):
    profile, _ = created
    rc, out, err = sim("outputs", *cluster_args(), "--format", "hostfile")
    assert rc == 0, err
    assert len([line for line in out.splitlines() if not line.startswith("#")]) == nodes(profile)


def test_second_create_converges_without_writing(created, sim, state_file):
    profile, _ = created
    before = json.loads(state_file.read_text())
    rc, out, err = sim(*create_args(profile, nodes=nodes(profile)))
    assert rc == 0, err
    assert {r["state"] for r in json.loads(out)["resources"]} == {"exists"}
    # A PUT would have started an operation and changed a resource: the state is unchanged.
    assert json.loads(state_file.read_text()) == before


def test_destroy_then_status_exits_3(created, sim, state_file):
    rc, out, err = sim("destroy", *cluster_args(), "--yes")
    assert rc == 0, err
    assert json.loads(out)["resource_group_deleted"] is True
    assert json.loads(state_file.read_text())["resources"] == {}
    rc, out, err = sim("status", *cluster_args())
    assert_cli_error(rc, err, 3, "CLUSTER_NOT_FOUND")


def test_no_wait_then_wait_converges(sim):
    rc, out, err = sim(*create_args("nd-a100-v4", nodes=SMALL), "--no-wait")
    assert rc == 0, err
    assert {r["state"] for r in json.loads(out)["resources"] if r["stage"] == "scale-set"} == {"accepted"}
    rc, out, err = sim("wait", *cluster_args())
    assert rc == 0, err
    assert [s["succeeded"] for s in json.loads(out)["scale_sets"]] == [SMALL]


def test_retired_nd_v1_is_refused_and_nothing_is_written(sim, state_file):
    rc, out, err = sim(*create_args("nd", nodes=SMALL))
    assert rc == 2 and "Traceback" not in err
    assert "ERROR: [SERIES_RETIRED]" in err
    assert not state_file.exists()


def test_table_output_of_create(sim):
    rc, out, err = sim(*create_args("ndv2", nodes=SMALL), "-o", "table")
    assert rc == 0, err
    assert NAME in out and RG in out
