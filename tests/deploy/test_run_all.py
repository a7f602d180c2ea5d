"""run_all (deploy/run_command.py): a failure no node result holds surfaces at once, not after every worker."""

from __future__ import annotations

import threading
import time

import pytest

from azgpu.deploy import run_command
from azgpu.deploy.run_command import Instance, run_all
from azgpu.health.results import NodeResult


def _node(i: int) -> Instance:
    return Instance("vmss0", str(i), f"/x/vmss0/virtualMachines/{i}", f"node{i}", None, "running",
                    "Standard_ND96asr_v4")


def test_a_failure_outside_any_node_stops_the_others_and_surfaces_at_once(monkeypatch):
    """A worker's exception (the throttling budget spent, a bug) left run_all's loop, then its pool's shutdown
    waited for every other worker: at 10,000 nodes, hundreds still queued under the pace, it looked hung."""
    answered: dict[str, threading.Event] = {}
    stopped: dict[str, bool] = {}

    def check_node(session, resource_group, node, body, timeout, stop) -> NodeResult:
        if node.instance_id == "0":
            raise RuntimeError("budget spent")
        answered[node.instance_id] = threading.Event()
        # The others wait as a poller does: until run_all tells them to stop (or 10 s pass).
        stopped[node.instance_id] = stop.wait(10)
        answered[node.instance_id].set()
        raise AssertionError("not reached by run_all's caller")

    monkeypatch.setattr(run_command, "check_node", check_node)
    started = time.monotonic()
    with pytest.raises(RuntimeError, match="budget spent"):
        run_all(None, "rg", [(_node(i), {}) for i in range(3)], 60.0, 3, None)
    took = time.monotonic() - started
    assert took < 5, f"run_all waited {took:.1f} s for the other workers"
    for event in list(answered.values()):
        event.wait(10)
    assert all(stopped.values()), f"workers not told to stop: {stopped}"


@pytest.mark.parametrize("error", [
    ValueError("Expecting value: line 1 column 1 (char 0)"),  # json.JSONDecodeError is one: a 200 that is no JSON
    UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte"),  # a body that is not UTF-8
    LookupError("unknown encoding: x-bogus"),  # Content-Type: application/json; charset=x-bogus
])
def test_a_run_command_answer_the_sdk_cannot_read_is_the_node_unreachable(monkeypatch, error):
    """azure-mgmt-compute 39 reads the answer with json.loads (a ValueError), 34 with its own deserializer
    (DeserializationError): neither is an AzureError, and either escaped the node's check as a traceback."""
    class Poller:
        def result(self):
            raise error

    class Instances:
        def begin_run_command(self, *args, **kwargs):
            return Poller()

    monkeypatch.setattr(run_command, "INSTANCES", Instances())
    monkeypatch.setattr(run_command, "_polling", lambda *args: None)
    with pytest.raises(run_command.Unreachable) as info:
        run_command._run(None, "rg", _node(0), {}, 60.0, threading.Event())
    assert info.value.code == "run_command_failed"
