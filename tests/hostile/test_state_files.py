"""Hostile state files (data/state.json): --simulate's state with malformed node entries (a KeyError before),
nested too deep, of another shape; and the racks a gate recorded for `outputs`. Each gets its coded error,
exit 2, the file left as it was, no traceback; a state path where no lock can be made fails at once."""

from __future__ import annotations

import json
import os

import pytest
from corpus import assert_clean, error_code, ids, load, mutated, segments

STATE = load("state.json")
KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJOgAYClhajeh3m7rJp5Bf+XHzOywcIepjITM9B6OJMg t"
SIM = ["--simulate", "--simulate-latency", "0", "--simulate-state"]


@pytest.fixture(scope="module")
def saved_state(tmp_path_factory):
    """A real --simulate state: one ND96asr_v4 node created by `provision create`."""
    from azgpu.cli import main

    path = tmp_path_factory.mktemp("state") / "state.json"
    assert main(["create", "--profile", "nd-a100-v4", "-n", "c1", "-g", "rg", "-l", "eastus", "--nodes", "1",
                 "--ssh-key", KEY, "-o", "none", *SIM, str(path)]) == 0
    return json.loads(path.read_text())


def with_node(case: dict, node: str) -> dict:
    text = json.dumps(case).replace("@node", node.replace("~", "~0").replace("/", "~1"))
    return json.loads(text)


@pytest.mark.parametrize("case", STATE["simulate"], ids=ids(STATE["simulate"]))
@pytest.mark.parametrize("command", [["status", "-n", "c1", "-g", "rg"], ["check", "-n", "c1", "-g", "rg"]],
                         ids=["status", "check"])
def test_a_malformed_simulate_state_is_a_coded_error(run, tmp_path, saved_state, case, command):
    path = tmp_path / "state.json"
    if "text" in case:
        path.write_text(segments(case["text"], {}), encoding="utf-8", errors="surrogateescape")
    else:
        path.write_text(json.dumps(mutated(saved_state, with_node(case, next(iter(saved_state["nodes"]))))))
    before = path.read_bytes()
    rc, out, err = run(*command, *SIM, path)
    assert_clean(rc, out, err)
    assert (rc, error_code(err)) == (2, "SIMULATE_STATE_INVALID"), err
    assert path.read_bytes() == before


@pytest.mark.parametrize("where", ["/proc/azgpu-state.json", "/proc/self/azgpu/state.json", "/sys/azgpu-state.json"])
def test_a_state_path_where_no_lock_can_be_made_fails_at_once(run, where):
    if not os.path.isdir("/" + where.split("/")[1]):
        pytest.skip("no such file system here")
    rc, out, err = run("status", "-n", "c1", "-g", "rg", *SIM, where)
    assert_clean(rc, out, err)
    assert (rc, error_code(err)) == (2, "SIMULATE_STATE_INVALID"), err  # and without the 60 s lock wait


@pytest.fixture
def gb_cluster(cli, azure):
    azure.set_quota("eastus", "standardNDISRGB300V6Family", limit=18 * 128)
    azure.set_quota("eastus", "cores", limit=18 * 128)
    rc, out, err = cli("create", "--profile", "nd-gb300-v6", "-n", "c1", "-g", "rg", "-l", "eastus", "--nodes", "18",
                       "--ssh-key", KEY, "-o", "none")
    assert rc == 0, err


RECORD = {"version": 1, "cluster": "c1", "resource_group": "rg", "measured_at": "2026-11-25T06:00:00Z",
          "nodes": {"c1-000-000000": {"fabric": {"clusterUuid": "5c1e0000-0000-4000-8000-000000000001",
                                                 "cliqueId": 32766,
                                                 "state": "Completed", "status": "Success", "complete": True},
                                      "status": "passed", "physical_host": "EAS000000000001"}},
          "excluded": {}}


@pytest.mark.parametrize("case", STATE["rack_record"], ids=ids(STATE["rack_record"]))
def test_a_malformed_rack_record_is_a_coded_error(cli, azure, gb_cluster, case):
    from azgpu import rack_record

    path = rack_record.path(azure.subscription_id, "rg", "c1")
    path.parent.mkdir(parents=True, exist_ok=True)
    if "text" in case:
        path.write_text(segments(case["text"], {}))
    else:
        path.write_text(json.dumps(mutated(RECORD, case)))
    before = path.read_bytes()
    rc, out, err = cli("outputs", "-n", "c1", "-g", "rg")
    assert_clean(rc, out, err)
    if case["expect"] is None:
        assert rc == 0, err
    else:
        assert (rc, error_code(err)) == (2, case["expect"]), err
    assert path.read_bytes() == before
