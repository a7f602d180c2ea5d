"""Guest Health Reporting in the health gate, in its own process, for benchmarks/run.py (not meant to be
run by hand).

It creates --nodes ND96isr_H100_v5 with `create(CreateOptions(gate=GateOptions(replace_unhealthy=True),
report=ReportOptions(report_to_azure=True)))` (what `provision create --check --replace-unhealthy
--report-to-azure --yes` calls) against azgpu.testing.FakeAzure in virtual time, with --faulty instances
coming up missing a GPU: Azure's cadence without anyone waiting (insights read every 30 s, the fake's
terminal insight two minutes after the report). It counts the requests to Microsoft.Impact and
Microsoft.Authorization, runs the same create again (which must file nothing), and prints one JSON
object.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import azgpu
from azgpu.deploy import CreateOptions, GateOptions, ReportOptions, create
from azgpu.deploy.session import Session
from azgpu.testing import DEFAULT_SUBSCRIPTION, FakeAzure, FakeCredential

LOCATION, NAME, RG = "eastus", "bench", "bench-rg"
SSH_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJOgAYClhajeh3m7rJp5Bf+XHzOywcIepjITM9B6OJMg azgpu-benchmark"


def kind(method: str, path: str) -> str | None:
    low = path.lower()
    if "/providers/microsoft.authorization/permissions" in low:
        return "permissions"
    if "/providers/microsoft.impact/impactcategories" in low:
        return "categories"
    if low.endswith("/providers/microsoft.impact"):
        return "provider"
    if low.endswith("/insights"):
        return "insight_read"
    if "/workloadimpacts/" in low:
        return "impact_put" if method == "PUT" else "impact_get"
    return None


def count(requests) -> dict[str, int]:
    out: dict[str, int] = {}
    for r in requests:
        k = kind(r.method, r.path)
        if k:
            out[k] = out.get(k, 0) + 1
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=16)
    parser.add_argument("--faulty", type=int, default=1)
    args = parser.parse_args()

    request = azgpu.build_request(profile="nd-h100-v5", name=NAME, resource_group=RG, location=LOCATION,
                                  nodes=args.nodes, ssh_key=SSH_KEY)
    size = azgpu.find_size("Standard_ND96isr_H100_v5")[1]
    with FakeAzure(DEFAULT_SUBSCRIPTION) as azure:
        vcpus = args.nodes * size.vcpus
        azure.set_quota(LOCATION, size.cap("quota_family"), limit=vcpus + 1000)
        azure.set_quota(LOCATION, "cores", limit=vcpus + 1000)
        azure.unhealthy_next(args.faulty, gpus=7)
        session = Session(DEFAULT_SUBSCRIPTION, FakeCredential(), polling_interval=0, sleep=azure.sleep,
                          requests_session=azure.requests_session, clock=azure.now)
        options = CreateOptions(gate=GateOptions(replace_unhealthy=True), report=ReportOptions(report_to_azure=True))
        start = len(azure.requests)
        virtual = azure.now()
        wall = time.perf_counter()
        done = create(session, request, options)  # Guest Health Reporting's preflight first, inside create
        result, entries = done.as_dict(), done.reports
        first = count(azure.requests[start:])
        report_seconds = max((e.get("insight_followed_seconds", 0) for e in entries), default=0)
        mark = len(azure.requests)
        create(session, request, options)
        json.dump({
            "nodes": args.nodes, "faulty": args.faulty, "healthy": result["health"]["healthy"],
            "passed": result["health"]["passed"], "impacts": len(azure.impacts()),
            "states": [e["state"] for e in entries],
            "insights": [(e.get("insight") or {}).get("status_code") for e in entries],
            "requests": first, "rerun_requests": count(azure.requests[mark:]),
            "virtual_seconds_following_insights": report_seconds,
            "virtual_seconds_create": azure.now() - virtual, "wall_seconds": time.perf_counter() - wall,
        }, sys.stdout)


if __name__ == "__main__":
    main()
