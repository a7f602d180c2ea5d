"""`certify` end to end against the fake Azure: the real SDK, Run Command running azgpu's real
certify_node.sh on stub tools that print what the fake's hardware model says (in the real tools'
formats), Guest Health Reporting, replacement."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from deploy_support import RG, request

from azgpu.deploy import CertifyOptions, CreateOptions, ReportOptions, certify, create

SCHEMA = Path(__file__).resolve().parents[1] / "fixtures" / "certify" / "dcgm-4.6.0-diag-schema.json"


@pytest.fixture
def h100(azure, session):
    create(session, request("nd-h100-v5", nodes=6), CreateOptions())
    return azure


def computer(azure, instance: str) -> str:
    vm = azure.get(f"/subscriptions/{azure.subscription_id}/resourceGroups/{RG}/providers/Microsoft.Compute/"
                   f"virtualMachineScaleSets/c1-vmss000/virtualMachines/{instance}")
    return vm["properties"]["osProfile"]["computerName"]


def test_a_healthy_cluster_is_certified_with_every_figure_and_its_source(h100, session):
    done = certify(session, "c1", RG, CertifyOptions(level="quick"))
    record = done.as_dict()
    assert done.certified and record["verdict"] == "certified" and record["summary"]["certified"] == 6
    assert record["summary"]["links_measured"] == 6 * 8
    figures = record["expected"]["Standard_ND96isr_H100_v5"]
    assert figures["allreduce_busbw"] == {"unit": "GB/s", "expected": 450.0, "warn": 400.0, "floor": 300.0,
                                          "source": ["R-aia"], "note": figures["allreduce_busbw"]["note"]}
    (collective,) = record["collectives"]
    assert collective["verdict"] == "pass" and collective["source"] == ["R-aia"]
    link = record["links"][0]
    assert link["check"] == "ib_write_bw" and link["floor"] == 380 and link["value"] > 380
    versions = record["versions"]
    assert versions["driver"][0]["value"] == "570.133.20" and versions["driver"][0]["nodes"] == 6
    assert versions["hca_fw"][0]["value"] == "28.43.1014" and "dcgm" in versions
    assert versions["nccl"] == [{"value": "2.23.4", "nodes": 6, "example": versions["nccl"][0]["example"]}]
    assert "image" in versions
    stages = [s["stage"] for s in record["timeline"]["critical_path"]]
    assert stages[:3] == ["health gate", "dcgmi diag -r 1", "nvbandwidth"]


def test_outputs_larger_than_run_commands_tail_come_back_in_pages(h100, session):
    before = len(h100.requests)
    certify(session, "c1", RG, CertifyOptions(level="standard"))
    pages = [r for r in h100.requests[before:] if r.method == "POST" and r.path.endswith("/runCommand")
             and "AZGPU_MODE=page" in (r.body or {}).get("script", [])]
    assert pages  # -r 2's document of 8 GPUs does not fit 4 KB; its pages were fetched and checked


def test_faults_are_reported_with_their_evidence_before_their_nodes_are_deleted(h100, session):
    link, hot, flap = computer(h100, "1"), computer(h100, "2"), computer(h100, "4")
    h100.make_unhealthy(link, ib_degraded="mlx5_ib3:0.6")
    h100.make_unhealthy(hot, gpu_throttle="2:60")
    h100.make_unhealthy(flap, ib_flapping="mlx5_ib1:30")
    done = certify(session, "c1", RG, CertifyOptions(replace=True, report=ReportOptions(report_to_azure=True,
                                                                                        insight_timeout=0)))
    record = done.as_dict()
    assert {f["subject"] for f in record["faults"]} >= {f"{link}:mlx5_ib3", hot, f"{flap}:mlx5_ib1"}
    impacts = {i["properties"]["impactedResourceId"].lower(): i["properties"] for i in h100.impacts()}
    categories = {p["impactCategory"].rsplit(".", 1)[1] for p in impacts.values()}
    assert categories == {"IBPerformance", "HpcDcgmiThermalReport", "IBPortFlapping"}
    thermal = next(p for p in impacts.values() if p["impactCategory"].endswith("HpcDcgmiThermalReport"))
    assert "HW Thermal Slowdown" in thermal["impactDescription"]
    assert thermal["additionalProperties"]["Location"] == "0003:00:00.0"  # the throttling GPU, by bus id
    assert thermal["additionalProperties"]["SerialNumber"]
    degraded = next(p for p in impacts.values() if p["impactCategory"].endswith("IBPerformance"))
    assert "mlx5_ib3" in degraded["impactDescription"] and "Gb/s" in degraded["impactDescription"]
    # Each report was filed before the request that deleted its node.
    order = [(r.method, r.path, json.dumps(r.body or {})) for r in h100.requests]
    for resource_id in impacts:
        instance = resource_id.rsplit("/", 1)[1]
        put = next(i for i, (m, p, _) in enumerate(order) if m == "PUT" and "/workloadimpacts/" in p.lower()
                   and f"-{instance}-" in p)
        delete = next(i for i, (m, p, b) in enumerate(order) if m == "POST" and p.endswith("/delete")
                      and f'"{instance}"' in b)
        assert put < delete
    assert record["verdict"] == "certified" and len(record["replaced"]) == 3
    assert all(r["by"] for r in record["replaced"])  # each replacement was certified in its place


def test_a_fault_every_node_shares_is_reported_nowhere_and_replaces_nothing(h100, session):
    for i in range(6):
        h100.make_unhealthy(computer(h100, str(i)), gpu_throttle="0:60")
    before = len(h100.requests)
    done = certify(session, "c1", RG, CertifyOptions(replace=True, report=ReportOptions(report_to_azure=True,
                                                                                        insight_timeout=0)))
    record = done.as_dict()
    assert not done.certified and not record["faults"] and record["common"]
    writes = [r for r in h100.requests[before:] if r.method in ("PUT", "POST", "DELETE", "PATCH")]
    assert not [r for r in writes if "workloadimpacts" in r.path.lower() or r.path.endswith("/delete")]
    assert h100.impacts() == []


def test_a_fault_that_follows_its_replacement_stops_replacing_as_the_gate_does(h100, session):
    """health_gate.replacement_stop decides for certify too: a replacement on a new host that shows the
    finding of the node it replaced points at the image or the configuration, so nothing more is deleted
    (the old loop replaced until max_rounds)."""
    h100.make_unhealthy(computer(h100, "3"), gpu_throttle="2:60")
    h100.unhealthy_next(3, gpu_throttle="2:60")
    before = len(h100.requests)
    done = certify(session, "c1", RG, CertifyOptions(replace=True, max_rounds=3))
    record = done.as_dict()
    deletes = [r for r in h100.requests[before:] if r.method == "POST" and r.path.endswith("/delete")]
    assert len(deletes) == 1 and len(record["replaced"]) == 1
    assert "followed them to new hosts" in record["stopped"] and not done.certified


@pytest.mark.slow  # 36 nodes created and certified through the fake: about 35 s of CPU
def test_on_nvl72_sizes_a_faulty_node_is_reported_then_its_whole_rack_replaced_and_certified(azure, session):
    """ND GB300 v6: Azure creates and shrinks these scale sets only in whole racks of 18 (facts §14.1), so
    a faulty node's rack is replaced whole, through nodes.delete_instances, after the report."""
    azure.set_quota("eastus", "standardNDISRGB300V6Family", limit=54 * 128)
    azure.set_quota("eastus", "cores", limit=54 * 128)
    create(session, request("nd-gb300-v6", nodes=36, ephemeral_os_disk=True), CreateOptions())
    vmss = "/".join(["", "subscriptions", azure.subscription_id, "resourceGroups", RG, "providers",
                     "Microsoft.Compute", "virtualMachineScaleSets", "c1-vmss000"])
    hot = azure.get(f"{vmss}/virtualMachines/20")["properties"]["osProfile"]["computerName"]  # the second rack
    azure.make_unhealthy(hot, ib_degraded="mlx5_ib1:0.6")
    before = len(azure.requests)
    done = certify(session, "c1", RG, CertifyOptions(level="quick", replace=True,
                                                     report=ReportOptions(report_to_azure=True, insight_timeout=0)))
    record = done.as_dict()
    assert f"{hot}:mlx5_ib1" in {f["subject"] for f in record["faults"]}, record.get("stopped")
    order = [(r.method, r.path.lower(), json.dumps(r.body or {})) for r in azure.requests[before:]]
    put = next(i for i, (m, p, _) in enumerate(order) if m == "PUT" and "/workloadimpacts/" in p)
    (delete,) = [i for i, (m, p, _) in enumerate(order) if m == "POST" and p.endswith("/delete")]
    assert put < delete and len(json.loads(order[delete][2])["instanceIds"]) == 18
    assert azure.get(vmss)["sku"]["capacity"] == 36
    assert len(record["replaced"]) == 18
    assert [r["node"] for r in record["replaced"] if "rack of" not in r["summary"]] == [hot]
    assert done.certified, record.get("stopped")


def test_the_certificate_names_versions_and_the_chart_shows_the_slow_node(h100, session):
    """The certificate's table and chart: one row and one bar per node, the faulty node marked in the
    terminal and red in the SVG (which is well-formed XML, names escaped), the floor drawn."""
    from xml.etree import ElementTree

    from azgpu.certify import certificate, chart

    slow = computer(h100, "2")
    h100.make_unhealthy(slow, ib_degraded="mlx5_ib5:0.6")
    record = certify(session, "c1", RG, CertifyOptions(level="quick")).as_dict()
    rows = certificate.table(record)["nodes"]
    assert len(rows) == 6 and {r["status"] for r in rows if r["node"] == slow} != {"certified"}
    lines = chart.terminal(record).splitlines()
    assert lines[0].startswith("loopback_busbw per node (GB/s)") and len(lines) == 7
    marked = [line.split()[0] for line in lines[1:] if "<-" in line]
    assert marked == [slow]
    bars = {line.split()[0]: line.split()[1].count("#") for line in lines[1:]}
    assert bars[slow] < min(n for name, n in bars.items() if name != slow)
    record["cluster"] = "<c1&>"  # a name is text in the SVG, never markup
    root = ElementTree.fromstring(chart.svg(record))
    rects = root.findall("{http://www.w3.org/2000/svg}rect")
    assert len(rects) == 6 and [r.get("fill") for r in rects].count("#d33") == 1
    assert "<c1&>" in "".join(root.itertext())


def test_the_fakes_dcgm_answer_validates_against_nvidias_schema(h100, session):
    """NVIDIA's schema of dcgmi diag -j (DCGM 4): what the fake prints is what DCGM documents."""
    from azgpu.testing import fabric

    node = fabric.make_node("n0", "Standard_ND96isr_H100_v5", 0)
    node["gpu_throttle"] = {"1": 30}
    text, _ = fabric.dcgm(node, 3)
    _validate(json.loads(text), json.loads(SCHEMA.read_text()))


def _validate(value, schema, where="$"):
    kind = schema.get("type")
    types = {"object": dict, "array": list, "string": str, "integer": int}
    if kind in types:
        assert isinstance(value, types[kind]), f"{where}: {type(value).__name__}, not {kind}"
    if kind == "object":
        for key in schema.get("required", []):
            assert key in value, f"{where}: '{key}' missing"
        for key, sub in schema.get("properties", {}).items():
            if key in value:
                _validate(value[key], sub, f"{where}.{key}")
    if kind == "array" and "items" in schema:
        for i, item in enumerate(value):
            _validate(item, schema["items"], f"{where}[{i}]")
