"""One case of azgpu at scale against Azure's documented limits, in simulated time, for benchmarks/run.py
(or by hand: `python benchmarks/scale_worker.py --case check --nodes 1000`).

The real create path, health gate and Slurm resume run through the real Azure SDK against
azgpu.testing.FakeAzure with Azure's throttling on (throttle="azure": Compute's, Resource Manager's and
Network's token buckets with Learn's numbers) and one simulated time for all threads (timeline=True):
nothing waits for real, so thousands of nodes take seconds of wall time and the figures are simulated
seconds. Every operation takes the time DURATIONS gives (with where each comes from).

Each case is compared with the floor the same limits impose (floor()): an ideal client that sends each
operation's one write at the earliest moment every bucket it draws on has a token, reads its status
and result (two reads) the moment it ends, and nothing else. It prints one JSON object: simulated
seconds, the floor and their ratio, the 429s drawn (as the fake answered them, by bucket, and as azgpu's
pacing saw them), requests by kind against the minimum, nodes unreachable, wall and CPU seconds, and
the timeline's stalls (moments it had to guess that every thread waited: 0 means the time is exact).

Cases: create, check (of a cluster created first, not counted), gate (create --check
--replace-unhealthy with 1 % of the nodes, at least one, coming up with a GPU missing) and resume (Slurm's
ResumeProgram bringing every node of a cluster whose scale sets are empty up: what azgpu.slurm.power.resume
does on this branch, called through its public function).
"""

from __future__ import annotations

import argparse
import heapq
import json
import math
import sys
import time
from dataclasses import dataclass

import azgpu
from azgpu.deploy import CheckOptions, CreateOptions, GateOptions, create
from azgpu.deploy import health_gate as health
from azgpu.deploy.session import Session
from azgpu.testing import DEFAULT_SUBSCRIPTION, FakeAzure, FakeCredential
from azgpu.testing.models import throttling

LOCATION, NAME, RG = "eastus", "scale", "scale-rg"
SSH_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJOgAYClhajeh3m7rJp5Bf+XHzOywcIepjITM9B6OJMg azgpu-benchmark"
PROFILE, SIZE = "nd-a100-v4", "Standard_ND96asr_v4"

# Seconds each kind of operation takes (lro.Operations keys), and where the figure comes from.
RUN_COMMAND = 20.0  # Learn, linux/run-command: a script takes "about 20 seconds" at the least (D-rc-linux)
SCALE_SET = 180.0  # not documented for GPU sizes: Learn's scale-set quickstarts say creating one "takes a few
#                    minutes"; 3 minutes taken here, the same for growing one (a PUT or PATCH of its capacity)
DELETE_INSTANCES = 60.0  # not documented: taken as one minute
NETWORK = 10.0  # not documented (NSG, public IP, NAT gateway, virtual network): taken as 10 s
BINDING = NETWORK  # not documented: a managed Run Command PUT with asyncExecution, whose provisioning "will
#                    complete as soon as the script starts" (the REST spec's asyncExecution); taken as 10 s
DURATIONS = {
    "microsoft.compute/virtualmachinescalesets/virtualmachines:action": RUN_COMMAND,
    "microsoft.compute/virtualmachinescalesets:put": SCALE_SET,
    "microsoft.compute/virtualmachinescalesets:deleteinstances": DELETE_INSTANCES,
    "microsoft.compute/virtualmachinescalesets:delete": DELETE_INSTANCES,
    "*": NETWORK,
}
READS_PER_OPERATION = 2  # ARM's asynchronous pattern: the status URL until terminal, then the result


# ------------------------------------------------------------------------------------ the floor


@dataclass
class Op:
    """One operation of the ideal client: its write's buckets, how long it runs, its reads' buckets."""
    write: list
    seconds: float
    read: list
    reads: int = READS_PER_OPERATION


def floor(start: float, phases: list[list[Op]]) -> float:
    """When an ideal client is done: each phase's operations start once the previous phase ended, each
    write goes at the earliest moment all its buckets hold a token (the fake's own bucket model and
    Learn's numbers), each read likewise once its operation ended."""
    buckets: dict[tuple, throttling.Bucket] = {}
    t = start
    for ops in phases:
        if ops:
            t = _phase(t, ops, buckets)
    return t


def _phase(start: float, ops: list[Op], buckets: dict) -> float:
    """Events in (time, order) order: a heap of times, each time's events in the order they were scheduled.
    An operation that finds a bucket empty tries again at that bucket's next refill. At 10,000 nodes
    thousands wait on one bucket for hundreds of refills, so operations of one stage that draw on the same
    shared buckets wait as one group: once one of them finds only shared buckets empty, each behind it
    finds the same at that moment (a refused try takes nothing, and a bucket only one operation draws on
    is emptied by that operation alone, never while it waits). The result is that of trying each."""
    shared = _shared_keys(ops)
    resolved: dict[tuple, tuple] = {}  # (op, stage) -> (its buckets, the shared ones among them)
    runs: list[list] = []
    for i, op in enumerate(ops):  # every write is first tried at the start: its buckets exist from then
        held, common = _resolve(resolved, buckets, shared, op, i, "write", start)
        alone = any(b.available(start) <= 0 for b in held if not any(b is c for c in common))
        if runs and not alone and runs[-1][0] is not None and _same(runs[-1][0], common):
            runs[-1][1].append((i, "write", 0))
        else:
            runs.append([None if alone else common, [(i, "write", 0)]])
    times, slots = [start], {start: [group for _, group in runs]}
    end = start
    while times:
        now = heapq.heappop(times)
        slot = slots[now]
        k = 0
        while k < len(slot):  # events scheduled for now while its slot is read go last
            group, k = slot[k], k + 1
            for m, (i, stage, done) in enumerate(group):
                op = ops[i]
                held, common = resolved.get((i, stage)) or _resolve(resolved, buckets, shared, op, i, stage, now)
                empty = [b for b in held if b.available(now) <= 0]
                if empty:
                    later = max(b.created + (b.periods + 1) * b.limit.period for b in empty)
                    if all(any(b is c for c in common) for b in empty):
                        _schedule(times, slots, later, group[m:])  # the rest of its group waits as it does
                        break
                    _schedule(times, slots, later, [(i, stage, done)])
                    continue
                for b in held:
                    b.take(now)
                if stage == "write":
                    _schedule(times, slots, now + op.seconds, [(i, "read", 0)])
                elif done + 1 < op.reads:
                    _schedule(times, slots, now, [(i, "read", done + 1)])
                else:
                    end = max(end, now)
        del slots[now]
    return end


def _shared_keys(ops: list[Op]) -> set:
    """The bucket keys more than one operation of the phase draws on."""
    seen: dict[tuple, int] = {}
    for i, op in enumerate(ops):
        for key, _, _ in (*op.write, *op.read):
            if seen.setdefault(key, i) != i:
                seen[key] = -1
    return {key for key, i in seen.items() if i == -1}


def _resolve(resolved: dict, buckets: dict, shared: set, op: Op, i: int, stage: str, now: float) -> tuple:
    wanted = op.write if stage == "write" else op.read
    held = tuple(_bucket(buckets, key, limit, now) for key, limit, _ in wanted)
    common = tuple(b for b, (key, _, _) in zip(held, wanted, strict=True) if key in shared)
    resolved[(i, stage)] = (held, common)
    return held, common


def _same(a: tuple, b: tuple) -> bool:
    return len(a) == len(b) and all(x is y for x, y in zip(a, b, strict=True))


def _schedule(times: list, slots: dict, when: float, group: list) -> None:
    slot = slots.get(when)
    if slot is None:
        slot = slots[when] = []
        heapq.heappush(times, when)
    slot.append(group)


def _bucket(buckets: dict, key: tuple, limit, now: float) -> throttling.Bucket:
    if key not in buckets:
        buckets[key] = throttling.Bucket(limit, now)
    return buckets[key]


def _charge(method: str, path: str, *, exists: bool = False, target: str | None = None) -> list:
    throttle = throttling.Throttle(DEFAULT_SUBSCRIPTION)
    return throttle.charge(method, path, region=LOCATION, exists=exists, target=target).buckets


def _vmss(name: str) -> str:
    return f"/subscriptions/{DEFAULT_SUBSCRIPTION}/resourceGroups/{RG}/providers/Microsoft.Compute/" \
           f"virtualMachineScaleSets/{name}"


def run_commands(vms: list[tuple[str, str]]) -> list[Op]:
    """One Run Command per (scale set, instance)."""
    status = f"/subscriptions/{DEFAULT_SUBSCRIPTION}/providers/Microsoft.Compute/locations/{LOCATION}/operations/x"
    return [Op(_charge("POST", f"{_vmss(s)}/virtualMachines/{i}/runCommand"), RUN_COMMAND,
               _charge("GET", status, target=f"{_vmss(s)}/virtualMachines/{i}")) for s, i in vms]


def bindings(vms: list[tuple[str, str]]) -> list[Op]:
    """One Slurm binding (a managed Run Command PUT on the instance) per (scale set, instance)."""
    status = f"/subscriptions/{DEFAULT_SUBSCRIPTION}/providers/Microsoft.Compute/locations/{LOCATION}/operations/x"
    out = []
    for s, i in vms:
        path = f"{_vmss(s)}/virtualMachines/{i}/runCommands/azgpu-slurm-node"
        out.append(Op(_charge("PUT", path), BINDING, _charge("GET", status, target=path)))
    return out


def create_phases(plan) -> list[list[Op]]:
    """The plan's dependency waves: every resource's PUT, its operation, its status read."""
    phases = []
    for wave in plan.waves():
        ops = []
        for r in wave:
            path = f"/subscriptions/{DEFAULT_SUBSCRIPTION}/resourceGroups/{RG}/providers/{r.type}/{r.name}"
            seconds = SCALE_SET if r.type.lower().endswith("virtualmachinescalesets") else NETWORK
            if not r.kind.long_running:
                seconds = 0.0
            ops.append(Op(_charge("PUT", path), seconds, _charge("GET", path), reads=1 if r.kind.long_running else 0))
        phases.append(ops)
    return phases


# ------------------------------------------------------------------------------------ the runs


def cadence_polls(seconds: float) -> int:
    """Status polls of one operation waited exactly as the fake's Retry-After says (ceil(remaining),
    1 to 10 s): the polls the minimum counts."""
    remaining, polls = seconds, 0
    while remaining > 1e-9:
        remaining -= min(10, max(1, math.ceil(remaining - 1e-9)))
        polls += 1
    return max(polls, 1)


def _fake() -> tuple[FakeAzure, Session]:
    azure = FakeAzure(DEFAULT_SUBSCRIPTION, timeline=True, throttle="azure", lro_seconds=DURATIONS,
                      quota_limits={"gpuFamily": 10**7, "cores": 10**7})
    azure.start()
    session = Session(DEFAULT_SUBSCRIPTION, FakeCredential(), polling_interval=0, sleep=azure.sleep,
                      requests_session=azure.requests_session, clock=azure.now)
    return azure, session


def _request(nodes: int):
    return azgpu.build_request(profile=PROFILE, name=NAME, resource_group=RG, location=LOCATION, nodes=nodes,
                               ssh_key=SSH_KEY)


def _kinds(requests) -> dict[str, int]:
    out: dict[str, int] = {}
    for r in requests:
        low = r.path.lower()
        if r.status == 429:
            kind = "throttled"
        elif low.endswith("/runcommand"):
            kind = "run_command"
        elif "/operations/" in low or "/operationresults/" in low:
            kind = "result" if r.query.get("monitor") == "true" else "poll"
        elif r.method in ("PUT", "PATCH", "DELETE", "POST"):
            kind = r.method.lower()
        else:
            kind = "read"
        out[kind] = out.get(kind, 0) + 1
    return out


class Measure:
    """Simulated and wall time, CPU, requests and 429s of one part of a run."""

    def __init__(self, azure: FakeAzure, session: Session):
        self.azure, self.session = azure, session

    def __enter__(self):
        self.t0, self.w0, self.c0 = self.azure.now(), time.perf_counter(), time.process_time()
        self.r0, self.p0 = len(self.azure.requests), dict(self.session.pacer.throttled)
        self.f0 = dict(self.azure.throttled())
        return self

    def __exit__(self, *exc):
        self.simulated = self.azure.now() - self.t0
        self.wall = time.perf_counter() - self.w0
        self.cpu = time.process_time() - self.c0
        self.requests = self.azure.requests[self.r0:]
        now = self.azure.throttled()
        self.throttled = {k: v - self.f0.get(k, 0) for k, v in now.items() if v - self.f0.get(k, 0)}

    def figures(self, floor_seconds: float, minimum: int) -> dict:
        return {"simulated_seconds": round(self.simulated, 1), "floor_seconds": round(floor_seconds, 1),
                "ratio": round(self.simulated / floor_seconds, 3) if floor_seconds else None,
                "throttled_429": sum(self.throttled.values()), "throttled_by_bucket": self.throttled,
                "requests": len(self.requests), "minimum_requests": minimum,
                "request_ratio": round(len(self.requests) / minimum, 3) if minimum else None,
                "by_kind": _kinds(self.requests), "wall_seconds": round(self.wall, 2),
                "cpu_seconds": round(self.cpu, 2)}


def create_minimum(plan, created_group: bool) -> int:
    """A PUT per resource, its status polls at the Retry-After cadence and a final GET (as
    benchmarks/deploy_worker.py counts it), and the resource group's PUT."""
    total = 1 if created_group else 0
    for r in plan.resources:
        seconds = SCALE_SET if r.type.lower().endswith("virtualmachinescalesets") else NETWORK
        total += 1 + (cadence_polls(seconds) + 1 if r.kind.long_running else 0)
    return total


def case_create(nodes: int) -> dict:
    azure, session = _fake()
    request = _request(nodes)
    plan = azgpu.build_plan(azgpu.validate(request, command="create"))
    with Measure(azure, session) as m:
        result = create(session, request)
    start = 0.0
    out = m.figures(floor(start, create_phases(plan)) - start, create_minimum(plan, result.resource_group_created))
    azure.stop()
    return {**out, "scale_sets": len(plan.scale_sets), "waves": len(plan.waves()),
            "stalls": azure.timeline.stalls, "pacing": _pacing(session)}


def _check_minimum(nodes: int, scale_sets: int, subnets: int = 1) -> int:
    # Per node its Run Command, its status and its result; per check the listing that finds the cluster and
    # each subnet's GET (outbound path: the scale sets share one), and per scale set its GET and its instances'
    # listing.
    return nodes * 3 + 1 + subnets + 2 * scale_sets


def case_check(nodes: int) -> dict:
    azure, session = _fake()
    request = _request(nodes)
    create(session, request)
    plan = azgpu.build_plan(azgpu.validate(request, command="create"))
    vms = _vms(azure)
    with Measure(azure, session) as m:
        report = health.check(session, NAME, RG, CheckOptions())
    out = m.figures(floor(0.0, [run_commands(vms)]), _check_minimum(nodes, len(plan.scale_sets)))
    azure.stop()
    return {**out, "passed": sum(1 for n in report if n.passed), "unreachable": len(report.unreachable),
            "unreachable_reasons": sorted({n.reason_code for n in report.unreachable}),
            "stalls": azure.timeline.stalls, "pacing": _pacing(session)}


def _vms(azure: FakeAzure) -> list[tuple[str, str]]:
    out = []
    for vm in azure.resources(type="Microsoft.Compute/virtualMachineScaleSets/virtualMachines"):
        out.append((vm["id"].split("/")[-3], vm["id"].split("/")[-1]))
    return out


def case_gate(nodes: int) -> dict:
    azure, session = _fake()
    request = _request(nodes)
    plan = azgpu.build_plan(azgpu.validate(request, command="create"))
    bad = max(1, nodes // 100)
    azure.unhealthy_next(bad, gpus=7)
    with Measure(azure, session) as m:
        result = create(session, request, CreateOptions(gate=GateOptions(check=True, replace_unhealthy=True)))
    vms = [(s, i) for s, i in _vms(azure)]
    phases = create_phases(plan) + [run_commands(vms[:nodes])]
    # Then delete the bad ones (one deletion per scale set holding them), scale those back out, check the new.
    sets = sorted({r["scale_set"] for r in result.health.replaced}) or [plan.scale_sets[0].name]
    delete = [Op(_charge("POST", f"{_vmss(s)}/delete"), DELETE_INSTANCES, _charge("GET", _vmss(s)), reads=1)
              for s in sets]
    grow = [Op(_charge("PATCH", _vmss(s)), SCALE_SET, _charge("GET", _vmss(s)), reads=1) for s in sets]
    phases += [delete, grow, run_commands([(sets[0], f"n{i}") for i in range(bad)])]
    health_report = result.health
    minimum = create_minimum(plan, result.resource_group_created) + _check_minimum(nodes, len(plan.scale_sets)) \
        + 3 * 2 * len(sets) + len(sets) + 3 * bad
    out = m.figures(floor(0.0, phases), minimum)
    azure.stop()
    return {**out, "unhealthy_injected": bad, "replaced": len(health_report.replaced), "healthy": health_report.healthy,
            "rounds": len(health_report.rounds), "unreachable": len(health_report.report.unreachable),
            "stalls": azure.timeline.stalls, "pacing": _pacing(session)}


def case_resume(nodes: int) -> dict:
    """Slurm resume of every node of a cluster whose scale sets are empty, through azgpu.slurm.power.resume
    as this branch has it; a resume program that no longer fits this call is reported, not run."""
    import contextlib
    import tempfile

    try:
        from azgpu.slurm import power
        from azgpu.slurm.names import domains
    except ImportError as exc:
        return {"skipped": f"azgpu.slurm.power: {exc}"}
    azure, session = _fake()
    request = _request(nodes)
    spec = azgpu.validate(request, command="create")
    plan = azgpu.build_plan(spec)
    create(session, request, CreateOptions(scale_sets=tuple(0 for _ in spec.scale_sets)))

    class Scontrol(power.Slurmctld):
        def update(self, nodes: str, **fields: str) -> None:
            self.calls.append([nodes, *(f"{k}={v}" for k, v in fields.items())])

    @contextlib.contextmanager
    def open_session():
        yield session

    names = [n for d in domains(spec) for n in d.names]
    with tempfile.TemporaryDirectory() as state_dir:
        try:
            ctx = power.Context(request=request, spec=spec, open_session=open_session, state_dir=state_dir,
                                slurm=Scontrol(), log=power.EventLog(None))
        except TypeError as exc:
            azure.stop()
            return {"skipped": f"azgpu.slurm.power.Context changed: {exc}"}
        from azgpu.hostlist import compress

        with Measure(azure, session) as m:
            outcome = power.resume(ctx, compress(names))
    vms = _vms(azure)
    grow = [Op(_charge("PUT", _vmss(s.name), exists=True), SCALE_SET, _charge("GET", _vmss(s.name)), reads=1)
            for s in plan.scale_sets]
    # Each scale set grown by one PUT (its polls at the cadence, a final GET), then every node checked, then
    # every node's name recorded on its VM (deploy/nodes.py: a managed Run Command PUT, its status, its final
    # GET, after one read that finds the new VM carries none); the bindings draw on the same Compute policy
    # as the Run Commands (Update scale set VMs, 500 a minute per subscription).
    minimum = len(plan.scale_sets) * (2 + cadence_polls(SCALE_SET)) + _check_minimum(len(vms), len(plan.scale_sets)) \
        + len(vms) * (3 + cadence_polls(BINDING))
    out = m.figures(floor(0.0, [grow, run_commands(vms), bindings(vms)]), minimum)
    azure.stop()
    return {**out, "resumed": len(outcome.get("resumed", [])), "failed": len(outcome.get("failed", [])),
            "stalls": azure.timeline.stalls, "pacing": _pacing(session)}


def _pacing(session: Session) -> dict:
    return {"waited_seconds_all_threads": round(session.pacer.waited, 1), "saw_429": dict(session.pacer.throttled)}


CASES = {"create": case_create, "check": case_check, "gate": case_gate, "resume": case_resume}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--case", choices=sorted(CASES), default="check")
    parser.add_argument("--nodes", type=int, default=1000)
    args = parser.parse_args()
    started = time.perf_counter()
    out = CASES[args.case](args.nodes)
    json.dump({"case": args.case, "nodes": args.nodes, **out,
               "process_wall_seconds": round(time.perf_counter() - started, 2)}, sys.stdout)
    print()


if __name__ == "__main__":
    main()
