"""`provision check` of a large simulated cluster, in its own process, for benchmarks/run.py (or by hand:
`python benchmarks/health_scale_worker.py --nodes 1000`).

It deploys --nodes ND96asr_v4 (no simulated latency: every operation ends at its first poll) on
azgpu.testing.FakeAzure in real time, then times one `health.check` of every node through the real Azure
SDK, as `provision check --simulate` runs it. Every Run Command runs azgpu's real node script in a sandbox
(once per distinct node state: the fake reuses that output for the other nodes in the same state).

What it separates: the wall time; the CPU of this process (the launcher: azgpu and the SDK) less the CPU
the fake spends answering requests (measured inside the fake's request handler, per thread); the CPU of
the node scripts (child processes); requests per node. And the critical path Azure's documented limits
impose on the same check: Compute takes 500 scale-set VM Run Commands a minute per subscription (Learn,
compute-throttling-limits, D-compute-throttle) and a Run Command takes about 20 s at least (Learn,
linux/run-command): N/500 minutes for the POSTs, plus the last one's 20 s. (The throttle's bucket of 1,500
would let a first burst through faster; the documented steady rate is what the floor is taken from, as in
issue 16.) It prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time

import azgpu
from azgpu.deploy import CheckOptions, create
from azgpu.deploy import health_gate as health
from azgpu.deploy.session import Session
from azgpu.testing import DEFAULT_SUBSCRIPTION, FakeAzure, FakeCredential

LOCATION, NAME, RG = "eastus", "scale", "scale-rg"
SSH_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJOgAYClhajeh3m7rJp5Bf+XHzOywcIepjITM9B6OJMg azgpu-benchmark"
RUN_COMMANDS_PER_MINUTE = 500  # per subscription (D-compute-throttle)
RUN_COMMAND_MIN_SECONDS = 20  # Learn linux/run-command: a script takes about 20 s at least


def critical_path(nodes: int) -> float:
    return nodes / RUN_COMMANDS_PER_MINUTE * 60 + RUN_COMMAND_MIN_SECONDS


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--parallel", type=int, default=health.PARALLEL)
    parser.add_argument("--no-reuse", action="store_true", help="run the node script for every node (as before)")
    args = parser.parse_args()
    if args.no_reuse:
        from azgpu.testing.models import vm_actions

        vm_actions.REUSE_RUNS = False

    request = azgpu.build_request(profile="nd-a100-v4", name=NAME, resource_group=RG, location=LOCATION,
                                  nodes=args.nodes, ssh_key=SSH_KEY)
    size = azgpu.find_size("Standard_ND96asr_v4")[1]
    azure = FakeAzure(DEFAULT_SUBSCRIPTION, clock=time.time, lro_seconds=0)
    fake_cpu = [0.0]  # CPU the fake spends answering, counted only during the check
    counting = [False]
    lock = threading.Lock()
    answer = azure._answer

    def timed(prepared):
        start = time.thread_time()
        try:
            return answer(prepared)
        finally:
            if counting[0]:
                with lock:
                    fake_cpu[0] += time.thread_time() - start

    azure._answer = timed
    azure.start()
    vcpus = args.nodes * size.vcpus
    azure.set_quota(LOCATION, size.cap("quota_family"), limit=vcpus + 1000)
    azure.set_quota(LOCATION, "cores", limit=vcpus + 1000)
    session = Session(DEFAULT_SUBSCRIPTION, FakeCredential(), polling_interval=1)  # as --simulate
    t0 = time.time()
    create(session, request)
    deploy_seconds = time.time() - t0

    counting[0] = True
    first_answer: list[float] = []
    before = len(azure.requests)
    cpu0, children0 = time.process_time(), os.times()
    t0 = time.time()
    report = health.check(session, NAME, RG, CheckOptions(parallel=args.parallel),
                          on_node=lambda r: first_answer or first_answer.append(time.time() - t0))
    wall = time.time() - t0
    cpu1, children1 = time.process_time(), os.times()
    requests = len(azure.requests) - before
    azure.stop()
    process_cpu = cpu1 - cpu0
    node_cpu = (children1.children_user - children0.children_user) + (children1.children_system -
                                                                      children0.children_system)
    path = critical_path(args.nodes)
    json.dump({
        "nodes": args.nodes, "parallel": args.parallel, "reuse": not args.no_reuse,
        "deploy_seconds": round(deploy_seconds, 1),
        "check_seconds": round(wall, 1), "first_answer_seconds": round(first_answer[0], 2) if first_answer else None,
        "critical_path_seconds": round(path, 1), "ratio_to_critical_path": round(wall / path, 2),
        "passed": sum(1 for n in report if n.passed), "requests": requests,
        "requests_per_node": round(requests / args.nodes, 2),
        "launcher_cpu_ms_per_node": round((process_cpu - fake_cpu[0]) / args.nodes * 1000, 2),
        "fake_cpu_ms_per_node": round(fake_cpu[0] / args.nodes * 1000, 2),
        "node_script_cpu_s": round(node_cpu, 2),
    }, sys.stdout)
    print()


if __name__ == "__main__":
    main()
