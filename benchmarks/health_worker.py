"""The health gate in simulation, in its own process, for benchmarks/run.py (not meant to be run by hand).

It creates a cluster of --nodes ND96asr_v4 with `create(CreateOptions(gate=GateOptions(check=True,
replace_unhealthy=True)))` (what `provision create --check --replace-unhealthy` calls) through the real
Azure SDK against azgpu.testing.FakeAzure in real time, every long-running operation --latency seconds,
with --faulty instances coming up unhealthy (a GPU missing, an InfiniBand port down, alternately). Every
Run Command runs azgpu's real node script in a sandbox, as `--simulate` does. Then it checks the healthy
cluster once more, alone, for the requests one `provision check` sends per node. It prints one JSON
object.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import azgpu
from azgpu.deploy import CreateOptions, GateOptions, create
from azgpu.deploy import health_gate as health
from azgpu.deploy.session import Session
from azgpu.testing import DEFAULT_SUBSCRIPTION, FakeAzure, FakeCredential

LOCATION, NAME, RG = "eastus", "bench", "bench-rg"
SSH_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJOgAYClhajeh3m7rJp5Bf+XHzOywcIepjITM9B6OJMg azgpu-benchmark"


def kind(method: str, path: str, query: dict) -> str:
    """A request by what it is for. Actions (Run Commands, instance deletion) answer with a status URL
    and a Location with monitor=true: their polls and final GETs are counted apart from the deploy's."""
    low = path.lower()
    if low.endswith("/runcommand"):
        return "run_command_post"
    if "/operations/" in low or "/operationresults/" in low:
        return "action_final_get" if query.get("monitor") == "true" else "poll"
    if method == "POST" and low.endswith("/delete"):
        return "delete_instances"
    if method == "PATCH":
        return "scale_out"
    if method == "GET" and low.endswith("/virtualmachines"):
        return "instance_listing"
    if method == "GET" and "/subnets/" in low:
        return "subnet_get"
    if method == "GET" and low.endswith("/resources"):
        return "group_listing"
    if method == "GET" and "/virtualmachinescalesets/" in low:
        return "scale_set_get"
    return "other"


def classify(requests) -> dict[str, int]:
    out: dict[str, int] = {"total": len(requests)}
    for r in requests:
        k = kind(r.method, r.path, r.query)
        out[k] = out.get(k, 0) + 1
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=16)
    parser.add_argument("--faulty", type=int, default=2)
    parser.add_argument("--latency", type=float, default=2.0)
    args = parser.parse_args()

    request = azgpu.build_request(profile="nd-a100-v4", name=NAME, resource_group=RG, location=LOCATION,
                                  nodes=args.nodes, ssh_key=SSH_KEY)
    size = azgpu.find_size("Standard_ND96asr_v4")[1]
    azure = FakeAzure(DEFAULT_SUBSCRIPTION, clock=time.time, lro_seconds=args.latency)
    azure.start()
    vcpus = args.nodes * size.vcpus
    azure.set_quota(LOCATION, size.cap("quota_family"), limit=vcpus + 1000)
    azure.set_quota(LOCATION, "cores", limit=vcpus + 1000)
    for i in range(args.faulty):
        azure.unhealthy_next(1, **({"gpus": 7} if i % 2 == 0 else {"ib_down": "mlx5_ib3"}))
    session = Session(DEFAULT_SUBSCRIPTION, FakeCredential(), polling_interval=1)  # as --simulate
    marks: dict[str, float] = {}

    def notice(message: str) -> None:
        if message.startswith("health check"):  # the gate starts: everything before is the deployment
            marks["gate"], marks["gate_index"] = time.time(), len(azure.requests)

    begin = time.time()
    result = create(session, request,
                    CreateOptions(gate=GateOptions(check=True, replace_unhealthy=True), on_notice=notice))
    end = time.time()
    gate = azure.requests[marks["gate_index"]:]
    before = len(azure.requests)
    t0 = time.time()
    report = health.check(session, NAME, RG)
    check_seconds = time.time() - t0
    check_requests = azure.requests[before:]
    azure.stop()
    report_data = result.as_dict()["health"]
    json.dump({
        "nodes": args.nodes, "faulty": args.faulty, "latency": args.latency,
        "create_seconds": end - begin, "gate_seconds": end - marks["gate"],
        "healthy": report_data["healthy"], "rounds": len(report_data["rounds"]),
        "replaced": len(report_data["replaced"]),
        "requests": {"create_total": before, "gate": classify(gate)},
        "check": {"seconds": check_seconds, "requests": classify(check_requests),
                  "passed": sum(1 for n in report if n.passed)},
    }, sys.stdout)


if __name__ == "__main__":
    main()
