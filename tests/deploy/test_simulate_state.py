"""The --simulate state file: a damaged one is refused with the file's name and how to reset it;
concurrent commands on one file serialise instead of losing each other's clusters."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from deploy_support import LOCATION, SSH_KEY, VMSS, assert_cli_error, cluster_args, create_args
from filelock import FileLock

from azgpu.testing import FakeAzure, persistence

CLI = "import sys; from azgpu.cli import main; sys.exit(main(sys.argv[1:]))"

DAMAGED = {
    "truncated": '{"version": 1, "resources": {"/subscriptions/0',
    "garbage": "\x00\x01garbage\xff",
    "empty": "",
    "a list": "[]",
    "wrong shape": '{"version": 1, "resources": [], "operations": {}, "sku_overrides": [], "quota": {}, '
                   '"images": [], "counter": 0}',
    "wrong version": '{"version": 99}',
    "a resource without an id": '{"version": 1, "resources": {"x": {"type": "t"}}, "operations": {}, '
                                '"sku_overrides": [], "quota": {}, "images": [], "counter": 0}',
}


@pytest.mark.parametrize("content", DAMAGED.values(), ids=DAMAGED.keys())
@pytest.mark.parametrize("command", [["status", *cluster_args()], create_args()], ids=["status", "create"])
def test_damaged_state_file_exits_2_naming_the_file_and_the_reset(sim, state_file, content, command):
    state_file.write_bytes(content.encode("utf-8", "surrogateescape"))
    rc, out, err = sim(*command)
    assert_cli_error(rc, err, 2, "SIMULATE_STATE_INVALID", f"rm '{state_file}'")
    assert str(state_file) in err.splitlines()[0]
    assert out == ""
    assert state_file.read_bytes() == content.encode("utf-8", "surrogateescape")  # left as it was


def test_state_path_that_is_a_directory_exits_2(run, tmp_path):
    rc, out, err = run("status", *cluster_args(), "--simulate", "--simulate-latency", "0", "--simulate-state", tmp_path)
    assert_cli_error(rc, err, 2, "SIMULATE_STATE_INVALID", "pass the path of a file")
    assert "is a directory" in err


def test_state_file_locked_too_long_by_another_process_fails_clearly(sim, state_file, monkeypatch):
    monkeypatch.setattr(persistence, "LOCK_TIMEOUT", 0)  # fail at once instead of waiting
    with FileLock(f"{state_file}.lock"):
        rc, out, err = sim("status", *cluster_args())
    assert_cli_error(rc, err, 1, "SIMULATE_STATE_BUSY", f"{state_file}.lock")


def test_a_write_that_fails_leaves_the_previous_state_and_no_temporary_file(tmp_path, monkeypatch):
    state = tmp_path / "state.json"
    with FakeAzure(state_file=state) as azure:
        azure.add_resource(f"/subscriptions/{azure.subscription_id}/resourceGroups/kept", {"location": LOCATION})
    before = state.read_bytes()

    def broken_dump(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(json, "dump", broken_dump)
    with pytest.raises(OSError), FakeAzure(state_file=state) as azure:
        azure.add_resource(f"/subscriptions/{azure.subscription_id}/resourceGroups/lost", {"location": LOCATION})
    assert state.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.json", "state.json.lock"]


def test_two_fakes_on_one_file_each_see_the_others_changes(tmp_path):
    state = tmp_path / "state.json"
    with FakeAzure(state_file=state) as first, FakeAzure(state_file=state) as second:
        first.add_resource(f"/subscriptions/{first.subscription_id}/resourceGroups/one", {"location": LOCATION})
        second.add_resource(f"/subscriptions/{second.subscription_id}/resourceGroups/two", {"location": LOCATION})
        assert sorted(r["name"] for r in first.resources()) == ["one", "two"]
    with FakeAzure(state_file=state) as third:
        assert sorted(r["name"] for r in third.resources()) == ["one", "two"]


CONCURRENT = 4


def test_concurrent_creates_on_one_state_file_keep_every_cluster(tmp_path):
    """Real processes, started together: before the state file was locked, each loaded the file once
    and saved its own copy, so all of them exited 0 and only the last writer's cluster survived."""
    state = tmp_path / "state.json"
    names = [f"c{i}" for i in range(CONCURRENT)]
    procs = [subprocess.Popen(
        [sys.executable, "-c", CLI, "create", "--profile", "ndv2", "-n", name, "-g", f"rg-{name}", "-l", LOCATION,
         "--nodes", "1", "--ssh-key", SSH_KEY, "--simulate", "--simulate-latency", "0", "--simulate-state", str(state),
         "-o", "none"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path) for name in names]
    results = [(p.returncode, err) for p in procs for _, err in [p.communicate()]]  # no timeout: no polling sleep
    assert [rc for rc, _ in results] == [0] * CONCURRENT, results
    with FakeAzure(state_file=state) as azure:
        clusters = sorted(r["tags"]["azgpu-cluster"] for r in azure.resources(type=VMSS))
    assert clusters == names
