"""Slurm's resume at Azure's pace: a node's binding (a managed Run Command PUT on its VM, deploy/nodes.py)
takes its seconds in Azure like any operation, so a resume of many nodes records them at once, under the
session's pace (deploy/pacing.py), not one after another. Run in the fake's simulated time
(FakeAzure(timeline=True)) with Azure's throttling on (Learn's buckets, testing/models/throttling.py)."""

from __future__ import annotations

import contextlib

import azgpu
from azgpu.deploy import CreateOptions, create
from azgpu.deploy.session import Session
from azgpu.hostlist import compress
from azgpu.slurm import power
from azgpu.slurm.names import domains
from azgpu.testing import FakeAzure, FakeCredential

SSH_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJOgAYClhajeh3m7rJp5Bf+XHzOywcIepjITM9B6OJMg azgpu-test"
VM = "Microsoft.Compute/virtualMachineScaleSets/virtualMachines"
BINDING = f"{VM}/runCommands"
BIND, CHECK, GROW = 10.0, 20.0, 180.0  # seconds of a binding PUT, a Run Command, a scale set's growth


class Scontrol(power.Slurmctld):
    def __init__(self):
        super().__init__("scontrol")
        self.calls: list[list[str]] = []

    def update(self, nodes: str, **fields: str) -> None:
        self.calls.append([nodes, *(f"{k}={v}" for k, v in fields.items())])

    def show(self, hostlist: str):  # slurmctld answers and holds no address yet: every name powered down
        return {}


def _fake() -> FakeAzure:
    return FakeAzure(timeline=True, throttle="azure", quota_limits={"gpuFamily": 10**6, "cores": 10**6},
                      lro_seconds={"microsoft.compute/virtualmachinescalesets/virtualmachines:action": CHECK,
                                   "microsoft.compute/virtualmachinescalesets:put": GROW, "*": BIND})


def _cluster(azure: FakeAzure, state_dir, nodes: int, **more) -> tuple[power.Context, list[str]]:
    """A cluster whose scale sets are empty, and the Context slurm's programs would build for it."""
    session = Session(azure.subscription_id, FakeCredential(), polling_interval=0, sleep=azure.sleep,
                      requests_session=azure.requests_session, clock=azure.now)
    request = azgpu.build_request(profile="nd-a100-v4", name="pace", resource_group="pace-rg",
                                  location="eastus", nodes=nodes, ssh_key=SSH_KEY, **more)
    spec = azgpu.validate(request, command="create")
    create(session, request, CreateOptions(scale_sets=tuple(0 for _ in spec.scale_sets)))

    @contextlib.contextmanager
    def open_session():
        yield session

    ctx = power.Context(request=request, spec=spec, open_session=open_session, state_dir=str(state_dir),
                        slurm=Scontrol(), log=power.EventLog(None, echo=lambda line: None))
    return ctx, [n for d in domains(spec) for n in d.names]


def test_a_resume_records_its_nodes_bindings_at_once(tmp_path):
    nodes = 12
    with _fake() as azure:
        ctx, names = _cluster(azure, tmp_path, nodes)
        start = azure.now()
        outcome = power.resume(ctx, compress(names))
        took = azure.now() - start
        bound = azure.resources(type=BINDING, resource_group="pace-rg")
    assert sorted(outcome["resumed"]) == sorted(names) and not outcome["failed"]
    assert len(bound) == nodes
    # Growth, the check, then every binding at once (one after another it took GROW + CHECK + 12 x BIND).
    assert took <= GROW + CHECK + 2 * BIND


def test_a_binding_that_fails_leaves_a_state_the_next_resume_converges_from(tmp_path):
    """One VM refuses its binding: the resume ends DOWN for the names not up, and the next resume brings
    every name up, each on its own VM, with no VM left over and none without a name."""
    with _fake() as azure:
        ctx, names = _cluster(azure, tmp_path, 6)
        azure.inject(method="PUT", path="/virtualMachines/3/runCommands/", status=409, code="Conflict", times=1)
        first = power.resume(ctx, compress(names))
        second = power.resume(ctx, compress(names))
        vms = {r["id"].lower() for r in azure.resources(type=VM, resource_group="pace-rg")}
        bound = {r["id"].lower().rsplit("/runcommands/", 1)[0]: r["tags"]["azgpu-slurm-node"]
                 for r in azure.resources(type=BINDING, resource_group="pace-rg")}
    assert first["failed"] and len(first["resumed"]) + len(first["failed"]) == 6
    assert sorted(second["resumed"]) == sorted(names) and not second["failed"]
    assert set(bound) == vms and sorted(bound.values()) == sorted(names)


def _bindings(azure: FakeAzure) -> dict[str, str]:
    """VM id -> the node name Azure keeps on it."""
    return {r["id"].lower().rsplit("/runcommands/", 1)[0]: r["tags"]["azgpu-slurm-node"]
            for r in azure.resources(type=BINDING, resource_group="pace-rg")}


def test_a_resume_of_several_domains_grows_them_at_once(tmp_path):
    """Three InfiniBand domains (scale sets) of 4: Azure creates scale sets side by side, so their growth,
    check and bindings take one domain's time, not three (one after another it took 3 x (GROW + CHECK + BIND))."""
    with _fake() as azure:
        ctx, names = _cluster(azure, tmp_path, 12, max_ib_domain=4)
        assert len(ctx.domains) == 3
        start = azure.now()
        outcome = power.resume(ctx, compress(names))
        took = azure.now() - start
        vms = {r["id"].lower() for r in azure.resources(type=VM, resource_group="pace-rg")}
        bound = _bindings(azure)
        validations = [r for r in azure.requests if r.method == "POST" and r.path.lower().endswith("/validate")]
    assert sorted(outcome["resumed"]) == sorted(names) and not outcome["failed"]
    assert set(bound) == vms and sorted(bound.values()) == sorted(names)
    assert len(validations) == 2  # the create of the empty cluster, then one create grows the three
    assert took <= GROW + CHECK + 3 * BIND
    cached = power.state.load(str(tmp_path), "pace")["nodes"]  # every thread's bindings are in the saved cache
    assert sorted(cached) == sorted(names) and all(e["status"] == "up" for e in cached.values())
    assert sorted(call[0] for call in ctx.slurm.calls) == sorted(names)  # each name given its address once


def test_a_domain_that_cannot_grow_with_the_others_grows_alone_and_only_its_names_go_down(tmp_path):
    """Azure cannot place the second scale set's VMs (AllocationFailed): the create that grows the three
    fails, the others' VMs came and their names come up; the second tries again on its own, as a resume of
    one domain does, and its names go DOWN with Azure's code; no VM is left without a name nor capacity above
    the VMs there are."""
    with _fake() as azure:
        ctx, names = _cluster(azure, tmp_path, 12, max_ib_domain=4)
        second = ctx.domains[1]
        azure.inject(method="PUT", path=f"/virtualMachineScaleSets/{second.scale_set}", times=None,
                     operation_error="AllocationFailed")
        outcome = power.resume(ctx, compress(names))
        vms = {r["id"].lower() for r in azure.resources(type=VM, resource_group="pace-rg")}
        bound = _bindings(azure)
        sets = azure.resources(type="Microsoft.Compute/virtualMachineScaleSets", resource_group="pace-rg")
        capacity = {v["name"]: v["sku"]["capacity"] for v in sets}
    others = [n for d in (ctx.domains[0], ctx.domains[2]) for n in d.names]
    assert sorted(outcome["resumed"]) == sorted(others)
    assert outcome["failed"] == sorted(second.names)
    assert set(bound) == vms and sorted(bound.values()) == sorted(others)
    assert capacity == {ctx.domains[0].scale_set: 4, second.scale_set: 0, ctx.domains[2].scale_set: 4}
    down = [c for c in ctx.slurm.calls if "state=DOWN" in c]
    assert down and down[0][0] == compress(second.names) and "AllocationFailed" in down[0][2]


def test_a_domain_that_replaces_a_node_grows_alone_and_leaves_the_others_as_they_are(tmp_path):
    """The first VM Azure creates comes up with a GPU missing: its domain deletes it and grows again, on its
    own, while the other domains check and bind theirs; the grow sizes the others as Azure lists them, so none
    of their VMs goes, and every name comes up on a VM of its own."""
    with _fake() as azure:
        ctx, names = _cluster(azure, tmp_path, 12, max_ib_domain=4)
        azure.unhealthy_next(1, gpus=7)
        outcome = power.resume(ctx, compress(names))
        vms = {r["id"].lower() for r in azure.resources(type=VM, resource_group="pace-rg")}
        bound = _bindings(azure)
        sets = azure.resources(type="Microsoft.Compute/virtualMachineScaleSets", resource_group="pace-rg")
        deletions = [r for r in azure.requests if r.method == "POST" and r.path.lower().endswith("/delete")]
        validations = [r for r in azure.requests if r.method == "POST" and r.path.lower().endswith("/validate")]
    assert len(validations) == 3  # the empty cluster's create, the grow of all, the replacement's grow alone
    assert sorted(outcome["resumed"]) == sorted(names) and not outcome["failed"]
    assert set(bound) == vms and sorted(bound.values()) == sorted(names)
    assert sorted(v["sku"]["capacity"] for v in sets) == [4, 4, 4]
    assert len(deletions) == 1  # the one unhealthy VM, nothing of the others
