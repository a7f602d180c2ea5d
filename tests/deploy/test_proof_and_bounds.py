"""Issue 28's remaining cases against the fake: two nodes naming one physical host are not reported, the NCCL
launcher keeps no private key, Run Command's error text reaches no terminal raw, quota polling is bounded on
the session's clock (no busy loop at latency 0), and destroy always says why it keeps a group."""

from __future__ import annotations

import json

from deploy_support import NAME, RG, calls, cluster_args, request

from azgpu.deploy import CreateOptions, create
from azgpu.deploy import health_gate as health
from azgpu.deploy import quota_requests as qr
from azgpu.deploy.interface import CheckOptions
from azgpu.testing.models import vm_actions

FIXTURES_QUOTA = "getQuotaRequestStatusById"


def test_two_nodes_naming_one_physical_host_are_neither_reported(cli, azure, session):
    create(session, request("nd-a100-v4", nodes=3), CreateOptions())
    azure.make_unhealthy("c1-vmss000/1", gpus=7)
    azure.make_unhealthy("c1-vmss000/2", gpus=7)
    host = azure.node("c1-vmss000/1")["physical_host"]
    stolen = next(n for n in health.check(session, NAME, RG).nodes if n.instance_id == "2")
    # Node 2 prints its real finding with node 1's physical host in it.
    line = json.dumps({"azgpu_health": 1, "mode": "check", "checker": "fallback", "aznhc": "missing",
                       "host": {"computer": stolen.computer_name, "physical_host": host, "vm_id": stolen.vm_id,
                                "vm_id_source": "imds", "vm_size": "Standard_ND96asr_v4"},
                       "failures": [{"check": "gpu_count", "kind": "missing_gpu",
                                     "message": "nvidia-smi lists 7 of 8 GPUs",
                                     "expected": "8", "measured": "7"}],
                       "more": 0, "dropped": {}}, separators=(",", ":"))
    azure.forge_output("c1-vmss000/2", line + "\n")
    rc, out, err = cli("report", *cluster_args(), "--yes", "--insight-timeout", "0")
    assert rc == 0, err
    assert not calls(azure, "PUT", path="Microsoft.Impact/workloadImpacts")
    entries = {e["node"]: e for e in json.loads(out)["guest_health_reports"]}
    assert {e["state"] for e in entries.values()} == {"not_reported"}
    assert all("same physical host" in e["reason"] for e in entries.values())


def test_the_launcher_keeps_no_private_key_when_the_check_stops_early(azure, session, monkeypatch):
    create(session, request("nd-a100-v4", nodes=3), CreateOptions())
    real = vm_actions._public_key
    monkeypatch.setattr(vm_actions, "_public_key", lambda seed: real(seed) + " azgpu-nccl\\nssh-ed25519 " + real("x"))
    (entry,) = health.check(session, NAME, RG, CheckOptions(nccl=True)).nccl
    assert entry["status"] == "error"
    for i in range(3):  # the launcher made a key pair: it is gone again, and nobody trusts it
        files = azure.node(f"c1-vmss000/{i}")["files"]
        assert ".azgpu-nccl/id_ed25519" not in files and ".azgpu-nccl/id_ed25519.pub" not in files


def test_the_launcher_keeps_no_private_key_after_a_passing_check(azure, session):
    create(session, request("nd-a100-v4", nodes=3), CreateOptions())
    (entry,) = health.check(session, NAME, RG, CheckOptions(nccl=True)).nccl
    assert entry["status"] == "passed"
    assert all(".azgpu-nccl/id_ed25519" not in azure.node(f"c1-vmss000/{i}")["files"] for i in range(3))


def test_run_command_error_text_from_azure_reaches_no_terminal_raw(cli, azure, session):
    create(session, request("nd-a100-v4", nodes=2), CreateOptions())
    azure.inject(method="POST", path=r"/virtualMachines/0/runCommand$", status=400, code="BadRequest",
                 message="bad \x1b]0;owned\x07\x1b[2J\x9b31m request\u202e", times=None)
    for fmt in ("json", "table", "tsv", "yaml"):
        rc, out, err = cli("check", *cluster_args(), "-o", fmt, "--verbose")
        assert rc == 1 and "Traceback" not in err
        for line in (out + err).splitlines():
            assert all(ch.isprintable() or ch == "\t" for ch in line), ascii(line)
    rc, out, err = cli("check", *cluster_args(), "-o", "json")
    (node,) = [n for n in json.loads(out)["nodes"] if n["instance_id"] == "0"]
    assert "\x1b]0;owned" in node["reason"]  # the same text, shown escaped, not changed


def test_quota_polling_at_latency_0_is_bounded_by_the_sessions_clock(azure, session):
    from deploy_support import FIXTURES

    body = json.loads((FIXTURES / "quota" / f"{FIXTURES_QUOTA}.json").read_text())["responses"]["200"]["body"]
    body["properties"]["provisioningState"] = "InProgress"  # a state QuotaRequestState defines, not yet final
    azure.inject(method="GET", path=r"/quotaRequests/[^/]+$", status=200, body=body, times=None)
    filed = qr.Filed("eastus", "standardNCPromoFamily", 50, "2B5C8515-37D8-4B6A-879B-CD641A2CF605")
    now = qr.follow(session, filed, timeout=30.0, interval=10.0)
    assert now.state == "InProgress"
    reads = calls(azure, "GET", path="/quotaRequests/")
    assert 2 <= len(reads) <= 5  # once, then every 10 virtual seconds until 30 have passed: never a busy loop


def test_destroy_says_why_it_keeps_a_group_azgpu_did_not_create(cli, azure, session):
    session.resources.resource_groups.create_or_update(RG, {"location": "eastus"})  # the user's own group
    create(session, request("ndv2", nodes=1), CreateOptions())
    rc, out, err = cli("destroy", *cluster_args(), "--yes")
    assert rc == 0, err
    result = json.loads(out)
    assert not result["resource_group_deleted"] and result["resource_group_kept"] == "azgpu did not create it"


def test_destroy_names_what_keeps_a_group_it_created(cli, azure, session):
    create(session, request("ndv2", nodes=1), CreateOptions())
    base = f"/subscriptions/{azure.subscription_id}/resourceGroups/{RG}/providers/Microsoft.Network"
    azure.add_resource(f"{base}/publicIPAddresses/orphan", {"location": "eastus", "tags": {"managed-by": "azgpu"},
                                                            "sku": {"name": "Standard"}, "properties": {}})
    rc, out, err = cli("destroy", *cluster_args(), "--yes")
    assert rc == 0, err
    kept = json.loads(out)["resource_group_kept"]
    assert kept.startswith("it still holds ") and "orphan" in kept  # the empty reason of before: "it still holds "
