"""azgpu at Azure's limits: its own pace under the buckets (deploy/pacing.py), a node's deadline from
its Run Command's acceptance, and the requests create leaves out. The world's half is the fake's
throttling (FakeAzure(throttle="azure"), Learn's numbers: tests/testing/test_fake_throttling.py)."""

from __future__ import annotations

import math

import pytest
from deploy_support import NAME, RG, request

from azgpu.deploy import CheckOptions, create
from azgpu.deploy import health_gate as health
from azgpu.deploy.pacing import Pacer, remaining, shape
from azgpu.deploy.session import Session
from azgpu.testing import FakeAzure, FakeCredential
from azgpu.testing.models import throttling
from azgpu.testing.models.throttling import Limit


def _timeline(**kwargs) -> tuple[FakeAzure, Session]:
    """A fake with one simulated time for every thread (operations take their time concurrently, as in
    Azure), and a session on it."""
    azure = FakeAzure(timeline=True, quota_limits={"gpuFamily": 100000, "cores": 100000}, **kwargs)
    azure.start()
    return azure, Session(azure.subscription_id, FakeCredential(), polling_interval=0, sleep=azure.sleep,
                          requests_session=azure.requests_session, clock=azure.now)


def test_a_nodes_deadline_counts_from_when_azure_accepted_its_run_command():
    """A Run Command POST that waits out a 120 s throttle before Azure accepts it still has its whole
    60 s to answer (it used to time out: the wait counted against the node)."""
    azure, session = _timeline(lro_seconds={"*:action": 20.0, "*": 1.0})
    try:
        create(session, request(nodes=2))
        azure.inject(method="POST", path="/runCommand", status=429, retry_after=120, times=1)
        start = azure.now()
        report = health.check(session, NAME, RG, CheckOptions(node_timeout=60))
        assert [n.status for n in report] == ["passed", "passed"]
        assert 140 <= azure.now() - start < 150  # accepted after 120 s, answered 20 s later
        assert azure.timeline.stalls == 0
    finally:
        azure.stop()


def test_no_more_run_commands_in_flight_than_the_bound_while_one_node_hangs(monkeypatch):
    """--parallel 3 with one node that never answers: it holds its slot until its deadline, 60 s after its
    Run Command was accepted, while the five others go two at a time (20 s each)."""
    from azgpu.testing.models import vm_actions

    azure, session = _timeline(lro_seconds={"*:action": 20.0, "*": 1.0})
    seen = []
    real = vm_actions.run_command

    def counting(backend, req, *args):
        seen.append(sum(1 for op in backend.ops.pending() if op.get("on_finish") == "run_command"))
        return real(backend, req, *args)

    try:
        create(session, request(nodes=6))
        monkeypatch.setattr(vm_actions, "run_command", counting)
        azure.make_unhealthy("c1-vmss000/0", run_command="timeout")
        report = health.check(session, NAME, RG, CheckOptions(parallel=3, node_timeout=60))
    finally:
        azure.stop()
    assert len(seen) == 6 and max(seen) <= 2  # at most 2 others in flight when the third starts
    assert [n.reason_code for n in report.unreachable] == ["timeout"]


def test_create_reads_no_resource_after_its_operation_succeeded(azure, session):
    """Each long-running PUT is followed by its status polls only: the first waits for Retry-After (no
    status check right after the PUT) and no GET of the resource follows the Succeeded status."""
    create(session, request(nodes=4))
    puts = [(i, r) for i, r in enumerate(azure.requests) if r.method == "PUT" and "/providers/" in r.path]
    assert puts
    for i, put in puts:
        assert not [r for r in azure.requests[i + 1:] if r.method == "GET" and r.path.lower() == put.path.lower()]
    polls = [r for r in azure.requests if "/operations/" in r.path.lower()]
    assert len(polls) == len(puts)  # one poll each: the fake ends an operation at its first poll


def _gate_at_a_small_write_bucket(monkeypatch, *, paced: bool, nodes: int = 48):
    # The world shrunk to a small N: Resource Manager's write bucket holds 16 tokens (refilled 10 a
    # second, as Learn says), so 48 Run Commands at once run into it.
    monkeypatch.setitem(throttling.ARM_LIMITS, "writes", Limit(16, 10, 1.0))
    if not paced:
        monkeypatch.setattr(Pacer, "before", lambda self, method, url: ())
    azure = FakeAzure(timeline=True, throttle="azure", lro_seconds={"*:action": 20.0, "*": 1.0},
                      quota_limits={"gpuFamily": 100000, "cores": 100000})
    with azure:
        session = Session(azure.subscription_id, FakeCredential(), polling_interval=0, sleep=azure.sleep,
                          requests_session=azure.requests_session, clock=azure.now)
        create(session, request(nodes=nodes))
        before, start = dict(azure.throttled()), azure.now()
        report = health.check(session, NAME, RG)
        took = azure.now() - start
        throttled = sum(azure.throttled().values()) - sum(before.values())
    return report, took, throttled


def test_a_check_paces_its_run_commands_under_the_write_bucket(monkeypatch):
    report, took, throttled = _gate_at_a_small_write_bucket(monkeypatch, paced=True)
    assert [n.status for n in report].count("passed") == 48 and not report.unreachable
    assert throttled <= 2
    floor = math.ceil((48 - 16) / 10) + 20.0  # the last write's token, then its Run Command's 20 s
    assert took <= 1.2 * floor


def test_without_pacing_the_same_check_draws_many_429s(monkeypatch):
    """The control: the same run without azgpu's pace (what the test above would see if pacing broke)."""
    _, _, throttled = _gate_at_a_small_write_bucket(monkeypatch, paced=False)
    assert throttled >= 10


def test_remaining_counts_are_read_as_azure_sends_them():
    """Learn's example of a scale-set deletion's answer (one header per policy, the resource's and the
    subscription's under one name), as one comma-joined value, which HTTP makes the same."""
    headers = {"x-ms-ratelimit-remaining-resource": "Microsoft.Compute/DeleteVMScaleSet;107,"
               "Microsoft.Compute/DeleteVMScaleSet;587,Microsoft.Compute/VMScaleSetBatchedVMRequests;3704, "
               "Microsoft.Compute/VmssQueuedVMOperations;4720"}
    assert remaining(headers) == {"Microsoft.Compute/DeleteVMScaleSet": (107, 587),
                                  "Microsoft.Compute/VMScaleSetBatchedVMRequests": (3704, 3704),
                                  "Microsoft.Compute/VmssQueuedVMOperations": (4720, 4720)}
    assert remaining({"x-ms-ratelimit-remaining-resource": "garbage;;,;x"}) == {}


def test_requests_of_one_operation_share_a_shape():
    base = "https://management.azure.com/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/"
    one = shape("POST", base + "virtualMachineScaleSets/a/virtualMachines/1/runCommand?api-version=1")
    two = shape("POST", base + "virtualMachineScaleSets/b/virtualMachines/7/runCommand?api-version=1")
    assert one == two != shape("GET", base + "virtualMachineScaleSets/a/virtualMachines/1")


@pytest.mark.parametrize("retry_after", ["60", "1"])
def test_a_429_holds_its_bucket_until_retry_after(retry_after):
    now = [100.0]
    waits = []

    def pause(seconds):
        waits.append(seconds)
        now[0] += seconds

    pacer = Pacer(lambda: now[0], pause)
    url = "https://management.azure.com/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/" \
          "virtualMachineScaleSets/a?api-version=1"
    taken = pacer.before("GET", url)
    pacer.after("GET", url, 429, {"Retry-After": retry_after,
                                  "x-ms-ratelimit-remaining-resource": "Microsoft.Compute/GetVMScaleSet;0"}, taken)
    pacer.before("GET", url)
    assert waits == [float(retry_after)] and pacer.throttled == {"Microsoft.Compute/GetVMScaleSet": 1}


def test_slurm_bindings_are_paced_under_the_instances_run_command_bucket():
    """A node's Slurm binding is a managed Run Command PUT on its instance (deploy/nodes.py), which Learn's
    "Compute throttling limits" counts as an Update of the scale set's VM: 12 a minute per instance, 4 more
    each minute after. Binding one instance 13 times goes through the session's pace: the 13th waits for
    the refill (at most one probe meets the 429) instead of failing or hammering the bucket."""
    from azgpu.deploy import bind_node

    azure, session = _timeline(throttle="azure", lro_seconds={"*": 1.0})
    try:
        create(session, request(nodes=1))
        start = azure.now()
        for i in range(13):
            bind_node(session, RG, "c1-vmss000", "0", location="eastus", cluster=NAME, name=f"gpu-{i}")
        took = azure.now() - start
        throttled = azure.throttled()
    finally:
        azure.stop()
    put = shape("PUT", "https://management.azure.com/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/"
                       "virtualMachineScaleSets/a/virtualMachines/0/runCommands/azgpu-slurm-node?api-version=1")
    assert "Microsoft.Compute/UpdateVMScaleSetVM" in session.pacer._policies[put]  # learnt from Azure
    assert 60 <= took < 130  # the 13th after the first refill, a minute after the bucket was made
    assert throttled.get("UpdateVMScaleSetVM", 0) <= 1


def test_reservation_reads_go_through_the_sessions_pace():
    """reserve and release read capacity reservation groups over arm.send; those reads answer with Resource
    Manager's remaining-reads header (Learn: 250 a subscription, 25 a second) and the session's pacer
    counts them like every other read."""
    from azgpu.deploy import reservations

    azure, session = _timeline(throttle="azure")
    try:
        group = f"/subscriptions/{azure.subscription_id}/resourceGroups/{RG}/providers/Microsoft.Compute/" \
                "capacityReservationGroups/g1"
        for _ in range(5):
            assert reservations.read_group(session, group) is None
        reads = session.pacer._buckets["arm:reads"]  # what the pacer learnt
        assert reads.tokens is not None and reads.tokens <= 250 - 5
    finally:
        azure.stop()
