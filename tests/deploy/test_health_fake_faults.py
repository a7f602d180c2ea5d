"""The fake's GPU memory, lost-GPU and GB fabric/IMEX faults, judged by the real node script end to end:
AzNHC's path where the size has a conf (the fake prints check_gpu_ecc's and check_gpu_count's die lines),
the fallback on ND GB200 v6 (no AzNHC conf), where the fabric of a healthy node lands in its result."""

from __future__ import annotations

import pytest
from deploy_support import NAME, RG, request

from azgpu.deploy import create
from azgpu.deploy import health_gate as health
from azgpu.health.impact import impact_category
from azgpu.profiles import find_size


def category(node) -> set[str]:
    return {impact_category(f).rsplit(".", 1)[-1] for f in node.failures if impact_category(f)}


@pytest.fixture
def gb(azure, session):
    family = find_size("Standard_ND128isr_NDR_GB200_v6")[1].cap("quota_family")
    azure.set_quota("eastus", family, limit=3000)
    azure.set_quota("eastus", "cores", limit=3000)
    create(session, request("nd-gb200-v6", nodes=18))


def node_of(session, instance: str):
    return next(n for n in health.check(session, NAME, RG) if n.instance_id == instance)


def test_healthy_gb_nodes_pass_with_their_fabric_in_the_result(azure, session, gb):
    report = health.check(session, NAME, RG)
    assert report.healthy
    fabrics = {(n.fabric["clusterUuid"], n.fabric["cliqueId"]) for n in report}
    assert len(fabrics) == 1 and all(n.fabric["complete"] for n in report)
    assert set(report[0].as_dict()["fabric"]) == {"clusterUuid", "cliqueId", "state", "status", "complete"}


@pytest.mark.parametrize("fault,kinds", [({"fabric_incomplete": True}, {"fabric"}),
                                         ({"imex_missing": True}, {"imex_channel"}),
                                         ({"ecc": 3}, {"gpu_ecc"}), ({"row_remap": "failure"}, {"gpu_row_remap"}),
                                         ({"gpu_lost": True}, {"gpu_lost"}), ({"no_devices": True}, {"missing_gpu"})])
def test_gb_fallback_catches_each_fault_with_its_category(azure, session, gb, fault, kinds):
    azure.make_unhealthy("c1-vmss000/5", **fault)
    node = node_of(session, "5")
    assert node.status == "failed" and {f.kind for f in node.failures} == kinds
    assert category(node) == {"fabric": {"NvLink"}, "imex_channel": {"NvLink"}, "gpu_ecc": {"DBEOverLimit"},
                              "gpu_row_remap": {"HpcRowRemapFailure"}, "gpu_lost": {"XID79FallenOffBus"},
                              "missing_gpu": {"HpcMissingGpu"}}[next(iter(kinds))]


@pytest.mark.parametrize("fault,check,cat", [({"ecc": 2}, "check_gpu_ecc", "DBEOverLimit"),
                                             ({"row_remap": "pending"}, "check_gpu_ecc", "HpcRowRemapFailure"),
                                             ({"no_devices": True}, "check_gpu_count", "HpcMissingGpu")])
def test_aznhc_path_reports_the_same_faults(azure, session, fault, check, cat):
    create(session, request("nd-a100-v4", nodes=2))
    azure.make_unhealthy("c1-vmss000/1", **fault)
    node = node_of(session, "1")
    assert node.checker == "aznhc" and [f.check for f in node.failures] == [check] and category(node) == {cat}
