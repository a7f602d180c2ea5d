"""One simulated deployment, in its own process, for benchmarks/run.py (not meant to be run by hand).

It runs the real create path (azgpu.deploy.create, what `provision create` calls) through
the real Azure SDK clients against azgpu.testing.FakeAzure in real time: every long-running
operation takes --latency seconds, and the fake answers with Retry-After = ceil(remaining), from
1 to 10 s. It prints one JSON object: phase times, every request by kind, the waits, peak memory.

--cold-start does everything except create() (interpreter, azgpu, the Azure SDK clients, the fake)
and exits: its wall time is the cold start that the critical path includes.
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import sys
import threading
import time

STARTED = time.time()

import azgpu  # noqa: E402
from azgpu.deploy import CreateOptions, create  # noqa: E402
from azgpu.deploy.session import Session  # noqa: E402
from azgpu.testing import DEFAULT_SUBSCRIPTION, FakeAzure, FakeCredential  # noqa: E402

LOCATION, NAME, RG = "eastus", "bench", "bench-rg"
SSH_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJOgAYClhajeh3m7rJp5Bf+XHzOywcIepjITM9B6OJMg azgpu-benchmark"
THROTTLE_RETRY_AFTER = 1.5  # distinct from the fake's whole-second poll cadence and the 5xx backoffs
# A share of every request (GET, PUT, polls, preflight) fails; the shares are exact and repeatable.
FAULTS = [
    {"status": 429, "retry_after": THROTTLE_RETRY_AFTER, "share": 0.10},
    {"status": 503, "share": 0.05},
    {"status": 500, "share": 0.03},
    {"reset": True, "share": 0.03},
]
TRANSIENT = (429, 500, 502, 503, 504)


def cadence_polls(seconds: float) -> int:
    """Status polls of one operation that waits exactly as the fake's Retry-After says
    (ceil(remaining), 1..10 s): the polls the issue's minimum counts."""
    remaining, polls = seconds, 0
    while remaining > 1e-9:
        remaining -= min(10, max(1, math.ceil(remaining - 1e-9)))
        polls += 1
    return polls


def classify(requests, plan, created_group: bool) -> dict[str, int]:
    """Every logged request by kind. A GET of a planned resource before its PUT is azgpu's
    existence check; after it, the poller's final GET."""
    names = {r.name.lower() for r in plan.resources}
    put_seen: set[str] = set()
    out = {k: 0 for k in ("put", "poll", "final_get", "failed_attempt", "preflight", "group_check", "group_listing",
                          "existence_get", "other")}
    for r in requests:
        path = r.path.rstrip("/")
        leaf = path.rsplit("/", 1)[-1].lower()
        low = path.lower()
        if r.status is None or r.status in TRANSIENT:
            out["failed_attempt"] += 1
        elif "/operations/" in low or "/operationresults/" in low:
            out["poll"] += 1
        elif r.method == "PUT":
            out["put"] += 1
            put_seen.add(leaf)
        elif r.method == "HEAD":
            out["group_check"] += 1
        elif low.endswith(("/skus", "/usages", "/versions")) or "/versions/" in low:
            out["preflight"] += 1
        elif low.endswith("/resources"):
            out["group_listing"] += 1
        elif r.method == "GET" and leaf in names:
            out["final_get" if leaf in put_seen else "existence_get"] += 1
        else:
            out["other"] += 1
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=64)
    parser.add_argument("--latency", type=float, default=2.0)
    parser.add_argument("--faults", action="store_true")
    parser.add_argument("--cold-start", action="store_true")
    args = parser.parse_args()

    waits: list[float] = []
    lock = threading.Lock()
    real_pause = Session.pause

    def recording_pause(session, seconds):  # every wait of the SDK (retries, polling) goes through it
        with lock:
            waits.append(float(seconds))
        real_pause(session, seconds)

    Session.pause = recording_pause

    request = azgpu.build_request(profile="nd-a100-v4", name=NAME, resource_group=RG, location=LOCATION,
                                  nodes=args.nodes, ssh_key=SSH_KEY)
    spec = azgpu.validate(request, command="create")
    plan = azgpu.build_plan(spec)
    azure = FakeAzure(DEFAULT_SUBSCRIPTION, clock=time.time, lro_seconds=args.latency)
    azure.start()
    vcpus = args.nodes * spec.size.vcpus
    azure.set_quota(LOCATION, spec.size.cap("quota_family"), limit=vcpus + 1000)
    azure.set_quota(LOCATION, "cores", limit=vcpus + 1000)
    session = Session(DEFAULT_SUBSCRIPTION, FakeCredential(), polling_interval=1,  # as --simulate
                      requests_session=azure.requests_session)
    session.compute, session.network, session.resources  # noqa: B018 - build the clients (imports the SDK)
    ready = time.time()
    if args.cold_start:
        azure.stop()
        json.dump({"started": STARTED, "ready": ready, "peak_rss_mb": _peak_rss_mb()}, sys.stdout)
        return

    faults = [azure.inject(times=None, **f) for f in FAULTS] if args.faults else []
    events: list[tuple[float, str, str]] = []
    error = ""
    begin = time.time()
    try:
        result = create(session, request,
                        CreateOptions(on_event=lambda e: events.append((time.time(), e.name, e.state))))
    except Exception as exc:  # reported, the benchmark counts it as a surfaced error
        result, error = {}, f"{type(exc).__name__}: {getattr(exc, 'code', '')} {exc}"
    end = time.time()
    azure.stop()

    lros = len(plan.resources)
    created_group = bool(result.resource_group_created)
    kinds = classify(azure.requests, plan, created_group)
    per_op = cadence_polls(args.latency)
    minimum = {"put": lros + (1 if created_group else 0), "poll": lros * per_op, "final_get": lros}
    first_write = min((t for t, _, state in events if state == "creating"), default=end)
    last_done = max((t for t, _, state in events if state in ("succeeded", "exists")), default=end)
    states = sorted({r["properties"].get("provisioningState") for r in azure.resources(resource_group=RG)
                     if r["type"] in {p.type for p in plan.resources}})
    json.dump({
        "nodes": args.nodes,
        "latency": args.latency,
        "faults": args.faults,
        "scale_sets": len(plan.scale_sets),
        "resources": lros,
        "waves": len(plan.waves()),
        "started": STARTED,
        "ready": ready,
        "begin": begin,
        "end": end,
        "phases": {"before_first_write": first_write - begin, "waves": last_done - first_write,
                   "after": end - last_done},
        "error": error,
        "states": states,
        "requests": {"total": len(azure.requests), **kinds},
        "minimum": {"total": sum(minimum.values()), **minimum, "cadence_polls_per_operation": per_op},
        "waits": waits,
        "injected": [{**f, "fired": fault.fired} for f, fault in zip(FAULTS, faults, strict=True)],
        "peak_rss_mb": _peak_rss_mb(),
    }, sys.stdout)


def _peak_rss_mb() -> float:
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return round(rss / (1024 * 1024 if sys.platform == "darwin" else 1024), 1)  # bytes on macOS, KiB on Linux


if __name__ == "__main__":
    main()
