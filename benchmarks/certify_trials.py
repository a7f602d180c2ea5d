#!/usr/bin/env python3
"""Issue #29's sweep: does certification name exactly the broken hardware, in how few rounds, in how long?

    python benchmarks/certify_trials.py                  # 1,000 trials, 2 processes: about 15-25 minutes on 2 cores
    python benchmarks/certify_trials.py --trials 50      # a quick look
    python benchmarks/certify_trials.py --fake           # also one 64-node `certify --level standard` through the fake

1. Trials: a 64-node ND H100 v5 domain with 1 to 3 injected faults, each one of a link at 60 %, a GPU that
   throttles after 60 s under load, a flapping port (azgpu.testing.fabric.inject; a healthy node may get one
   transient slowdown too), certified at `standard` by the real suite (azgpu.certify.suite) over the fake's
   hardware model, in the real tools' output formats. A trial passes when every faulty node or link is named
   and no healthy node is. Prints the pass count, and each failure's seed.
2. Localisation: the same domains, with 1 to 3 nodes that slow every collective they join (their ports pass
   alone), localised from a failing 64-node all_reduce: the rounds it took (at most ceil(log2 64) + 2 = 8)
   against N - 1 = 63 for testing each node with a reference one pair at a time, and whether it named exactly
   those nodes.
3. With --fake: one 64-node `certify --level standard` through the simulated Azure (the real SDK, Run Command,
   azgpu's node script on stub tools), its simulated minutes (target <= 45) and critical path, and wall time.

Writes the figures as JSON (default benchmarks/results-certify.json, git-ignored). Exit 0 whatever the
figures (1 only if the benchmark itself breaks).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
NODES = 64


def _cluster(size: str):
    from azgpu.testing import fabric

    return {f"n{i:02d}": fabric.make_node(f"n{i:02d}", size, i) for i in range(NODES)}


def trial(seed: int) -> dict:
    from azgpu.certify.levels import LEVELS
    from azgpu.certify.runner import NodeInfo
    from azgpu.certify.suite import SuitePlan, run
    from azgpu.profiles import find_size
    from azgpu.testing import fabric

    size = find_size("Standard_ND96isr_H100_v5")[1]
    rng = random.Random(seed)
    nodes = _cluster(size.name)
    expected = fabric.inject(rng, nodes, rng.randint(1, 3))
    plan = SuitePlan(size.name, LEVELS["standard"], size.certify, 8, tuple(f"mlx5_ib{i}" for i in range(8)), seed=seed)
    result = run(fabric.ModelRunner(nodes, seed), [NodeInfo(n) for n in nodes], plan)
    named = result.named_subjects()
    faulty = {s.split(":")[0] for s in expected}
    missing = sorted(set(expected) - named)
    wrong = sorted(s for s in named if s.split(":")[0] not in faulty)
    return {"seed": seed, "faults": len(expected), "kinds": sorted(expected.values()), "missing": missing,
            "wrong": wrong, "minutes": result.timeline.total / 60, "ok": not missing and not wrong,
            "localisation_rounds": [loc.rounds for loc in result.localisation]}


def localisation(seed: int) -> dict:
    from azgpu.certify.localise import localise
    from azgpu.certify.nccl_tests import parse
    from azgpu.testing import fabric

    rng = random.Random(10_000 + seed)
    nodes = _cluster("Standard_ND96isr_H100_v5")
    bad = set(rng.sample(sorted(nodes), rng.randint(1, 3)))
    for name in bad:
        nodes[name]["collective_share"] = 0.6
    runner = fabric.ModelRunner(nodes, seed)

    class Job:
        kind, op, fabric, min_bytes, max_bytes = "collective", "all_reduce", "ib", "16G", "16G"

        def __init__(self, group):
            self.nodes = group

    def measure(groups):
        return [parse(a.text).busbw for a in runner.fabric([Job(g) for g in groups])]

    (whole,) = measure([tuple(nodes)])
    found = localise([("domain", sorted(nodes))], measure, lambda v: v is not None and v >= 400)
    return {"seed": seed, "culprits": len(bad), "domain_busbw": whole, "rounds": found.rounds, "bound": found.bound,
            "exhaustive": found.exhaustive, "exact": set(found.culprits) == bad}


def through_the_fake() -> dict:
    """One 64-node certify --level standard through the simulated Azure."""
    sys.path.insert(0, str(HERE.parent / "tests" / "deploy"))
    from azgpu import Request
    from azgpu.deploy import CertifyOptions, CreateOptions, certify, create
    from azgpu.deploy.session import Session
    from azgpu.testing import FakeAzure, FakeCredential

    key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJOgAYClhajeh3m7rJp5Bf+XHzOywcIepjITM9B6OJMg azgpu-benchmark"
    with FakeAzure(quota_limits={"gpuFamily": 25000, "cores": 50000}) as azure:
        session = Session(azure.subscription_id, FakeCredential(), polling_interval=0, sleep=azure.sleep,
                          clock=azure.now, requests_session=azure.requests_session)
        create(session, Request(profile="nd-h100-v5", name="c64", resource_group="bench-rg", location="eastus",
                                nodes=NODES, ssh_key=key), CreateOptions())
        start = time.perf_counter()
        done = certify(session, "c64", "bench-rg", CertifyOptions(level="standard"))
        wall = time.perf_counter() - start
        record = done.as_dict()
        run_commands = sum(1 for r in azure.requests if r.method == "POST" and r.path.endswith("/runCommand"))
    return {"verdict": record["verdict"], "simulated_minutes": record["timeline"]["minutes"],
            "critical_path": record["timeline"]["critical_path"], "wall_seconds": round(wall, 1),
            "run_commands": run_commands}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=1000)
    parser.add_argument("--localisations", type=int, default=None, help="default: as many as --trials")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--fake", action="store_true", help="also certify 64 nodes through the simulated Azure")
    parser.add_argument("--out", type=Path, default=HERE / "results-certify.json")
    args = parser.parse_args()
    started = time.perf_counter()
    trials, locs = [], []
    with ProcessPoolExecutor(max_workers=max(1, args.workers)) as pool:
        for t in pool.map(trial, range(args.trials), chunksize=4):
            trials.append(t)
            if len(trials) % 50 == 0:  # progress on stderr: a long sweep shows where it stands
                print(f"  {len(trials)} trials, {sum(x['ok'] for x in trials)} passed "
                      f"({time.perf_counter() - started:.0f} s)", file=sys.stderr, flush=True)
        locs = list(pool.map(localisation, range(args.localisations or args.trials), chunksize=16))
    passed = sum(t["ok"] for t in trials)
    rounds = [loc["rounds"] for loc in locs]
    out = {
        "trials": {"count": len(trials), "passed": passed, "failed": [t for t in trials if not t["ok"]],
                   "faults": {n: sum(1 for t in trials if t["faults"] == n) for n in (1, 2, 3)},
                   "simulated_minutes_max": round(max((t["minutes"] for t in trials), default=0), 1)},
        "localisation": {"count": len(locs), "exact": sum(loc["exact"] for loc in locs),
                         "rounds_max": max(rounds, default=0), "rounds_mean": round(statistics.mean(rounds), 2)
                         if rounds else 0, "bound": math.ceil(math.log2(NODES)) + 2, "exhaustive": NODES - 1},
        "seconds": round(time.perf_counter() - started, 1),
    }
    print(f"trials: {passed} of {len(trials)} named every fault and no healthy node "
          f"(1/2/3 faults: {out['trials']['faults']})")
    for t in out["trials"]["failed"][:20]:
        print(f"  seed {t['seed']}: missing {t['missing']}, wrongly named {t['wrong']}")
    loc = out["localisation"]
    print(f"localisation: {loc['exact']} of {loc['count']} exact; rounds max {loc['rounds_max']}, mean "
          f"{loc['rounds_mean']} "
          f"(bound ceil(log2 {NODES}) + 2 = {loc['bound']}; exhaustive pairing {loc['exhaustive']})")
    if args.fake:
        fake = through_the_fake()
        out["fake_64_standard"] = fake
        print(f"64-node certify --level standard through the fake: {fake['verdict']}, {fake['simulated_minutes']} "
              f"simulated minutes (target <= 45), {fake['wall_seconds']} s wall, {fake['run_commands']} Run Commands")
        for stage in fake["critical_path"]:
            print(f"  {stage['stage']:<32} {stage['seconds'] / 60:6.1f} min  slowest: {stage['slowest']}")
    print(f"({out['seconds']} s)")
    args.out.write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
