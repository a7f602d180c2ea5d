"""What a failing node tells Guest Health Reporting: its categories (from AzNHC's real failure lines and
the fallback's findings), one report per category with a deterministic name, the body in Learn's shape,
and what the insights say. Pure: no Azure."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from node_support import Node, fixture, nvidia_q

from azgpu.deploy.ghr import (
    NAME_PATTERN,
    CategoryNotAllowed,
    impact_body,
    impact_name,
    insight_state,
    not_reportable,
    reports_for,
)
from azgpu.health.impact import LEARN_CATEGORIES, impact_category, possible_categories
from azgpu.health.results import Failure, GpuRef, NodeResult, failure_of

AZURE = Path(__file__).resolve().parents[1] / "fixtures" / "azure"
NOW = datetime(2026, 3, 14, 9, 26, 53, tzinfo=UTC)
RID = ("/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/ml-rg/providers/Microsoft.Compute/"
       "virtualMachineScaleSets/train01-vmss000/virtualMachines/7")
U = "Resource.Hpc.Unhealthy."


def failed(*failures: Failure, **fields) -> NodeResult:
    base = dict(scale_set="train01-vmss000", instance_id="7", resource_id=RID, computer_name="train01-000-000007",
                status="failed", checker="fallback", failures=failures, physical_host="AMS081063509028",
                vm_id="5f0a3c2e-1111-4c4c-9e9e-0123456789ab", vm_size="Standard_ND96isr_H100_v5")
    return NodeResult(**{**base, **fields})


MISSING = Failure("gpu_count", "missing_gpu", "nvidia-smi lists 7 of 8 GPUs", "8", "7",
                  gpus=(GpuRef("0008:00:00.0", ""),))
PORT3 = Failure("ib_port", "ib_port_down", "InfiniBand port mlx5_ib3:1 is DOWN (Polling)", "ACTIVE LinkUp",
                "DOWN Polling", port="mlx5_ib3:1")
PORT5 = Failure("ib_port", "ib_port_down", "InfiniBand port mlx5_ib5:1 is DOWN (Polling)", "ACTIVE LinkUp",
                "DOWN Polling", port="mlx5_ib5:1")


# ------------------------------------------------------------------------------ categories


def test_azgpu_can_send_only_categories_on_learns_list():
    assert possible_categories() <= LEARN_CATEGORIES, possible_categories() - LEARN_CATEGORIES


def test_a_category_not_on_learns_list_is_never_put_in_a_body():
    with pytest.raises(CategoryNotAllowed):
        impact_body(failed(MISSING), U + "GpuMelted", (MISSING,), start=NOW)


def test_the_fakes_list_of_hpc_categories_is_learns_too():
    from azgpu.testing.models.impact_reporting import data

    assert set(data()["hpc_categories"]) == set(LEARN_CATEGORIES)


@pytest.mark.parametrize("failure, category", [
    (MISSING, "HpcMissingGpu"),
    (PORT3, "IBPortDown"),
    (Failure("ib_port", "ib_missing", "6 of 8 InfiniBand ports present"), "MissingIB"),
    (Failure("xid", "xid", "m", xid=79), "XID79FallenOffBus"),
    (Failure("xid", "xid", "m", xid=48), "XID48DoubleBitECC"),
    (Failure("xid", "xid", "m", xid=94), "XID94ContainedECCError"),
    (Failure("xid", "xid", "m", xid=95), "XID95UncontainedECCError"),
    (Failure("xid", "xid", "m", xid=119), "GpuXIDError"),
    (Failure("nvidia-smi", "nvidia_smi_hang", "m"), "UnhealthyGPUNvidiasmi"),
    (Failure("nvlink", "nvlink", "m"), "NvLink"),
    (Failure("nvidia-smi", "nvidia_smi_error", "nvidia-smi -q failed (exit 9)"), "HpcGenericFailure"),
    (Failure("gpu_memory", "gpu_memory", "m"), "HpcGenericFailure"),
    (Failure("rocm-smi", "rocm_smi_hang", "m"), "HpcGenericFailure"),
])
def test_the_fallbacks_findings_map_to_their_category(failure, category):
    assert impact_category(failure) == U + category


# The die lines of AzNHC's checks (tests/fixtures/health/aznhc-die-lines.txt), in order, through the
# real node script into the category azgpu reports: None for the check's own set-up (NHCNA).
DIE_LINES = [
    "HpcMissingGpu", "XID79FallenOffBus", "XID94ContainedECCError", "GpuXIDError", "HpcInforomCorruption", None,
    "HpcRowRemapFailure", "DBEOverLimit", "NvLink", "IBPerformance", "IBPortFlapping", "ManualInvestigation",
    "HpcGpuDcgmDiagFailure", "HpcGenericFailure", None, None,
]
HEAD = "Azure Healthcheck log\n------ VM Meta Data ------\nPHYSICAL HOST NAME: AMS081063509028\n"


@pytest.fixture
def node(tmp_path) -> Node:
    return Node(tmp_path)


def _categories_of_aznhc_line(node: Node, line: str) -> list[str | None]:
    node.aznhc(HEAD + line + "\n", rc=1)
    verdict = node.check()
    assert verdict["checker"] == "aznhc" and verdict["host"]["physical_host"] == "AMS081063509028"
    return [impact_category(failure_of(f)) for f in verdict["failures"]]


@pytest.mark.parametrize("index", range(len(DIE_LINES)), ids=[c or "none" for c in DIE_LINES])
def test_aznhcs_failure_lines_map_to_the_categories_of_its_dictionary(node, index):
    line = fixture("aznhc-die-lines.txt").splitlines()[index]
    category = DIE_LINES[index]
    assert _categories_of_aznhc_line(node, line) == [U + category if category else None]


def test_the_real_h100_line_with_its_stray_dash_e_reports_a_missing_gpu(node):
    real = fixture("aznhc-lines-real.txt").splitlines()
    assert real[1].split("Health check failed:  ")[1].startswith("-e check_gpu_count")
    assert _categories_of_aznhc_line(node, real[1]) == [U + "HpcMissingGpu"]


def test_the_real_check_hw_ib_line_without_a_fault_code_reports_the_port(node):
    node.box.ib_port("mlx5_ib0", state="1: DOWN", phys_state="2: Polling", rate="400 Gb/sec (4X NDR)")
    assert _categories_of_aznhc_line(node, fixture("aznhc-lines-real.txt").splitlines()[2]) == [U + "IBPortDown"]


def test_the_real_setup_failure_of_aznhc_reports_nothing(node):
    # Issue #72's line (HPCX_DIR is not set) carries no FaultCode at all: its check is a set-up check.
    assert _categories_of_aznhc_line(node, fixture("aznhc-lines-real.txt").splitlines()[4]) == [None]


def test_the_fallback_names_the_missing_gpus_bus(node):
    node.nvidia(nvidia_q(7))
    (failure,) = node.check()["failures"]
    report, = reports_for(failed(failure_of(failure)), now=NOW, gpu_vendor="nvidia")
    assert report.category == U + "HpcMissingGpu"
    assert report.body["properties"]["additionalProperties"]["Location"] == "0008:00:00.0"


# ------------------------------------------------------------------------------ what a node files


def test_one_report_per_category_ports_together():
    reports = reports_for(failed(MISSING, PORT3, PORT5), now=NOW, gpu_vendor="nvidia")
    assert [r.category for r in reports] == [U + "HpcMissingGpu", U + "IBPortDown"]
    assert reports[1].failures == (PORT3, PORT5)
    assert "mlx5_ib3" in reports[1].body["properties"]["impactDescription"]


def test_the_body_has_learns_fields_in_learns_case():
    report, = reports_for(failed(MISSING), now=NOW, gpu_vendor="nvidia")
    props = report.body["properties"]
    assert set(report.body) == {"properties"}
    assert set(props) == {"startDateTime", "impactCategory", "impactDescription", "impactedResourceId",
                          "additionalProperties"}
    assert props["startDateTime"] == "2026-03-14T09:26:53Z" and props["impactedResourceId"] == RID
    assert props["additionalProperties"] == {"PhysicalHostName": "AMS081063509028",
                                             "VmUniqueId": "5f0a3c2e-1111-4c4c-9e9e-0123456789ab",
                                             "Manufacturer": "Nvidia", "Location": "0008:00:00.0"}


def test_one_gpu_concerned_sends_its_serial_and_location():
    xid = Failure("xid", "xid", "Xid 79 on GPU 0003:00:00", xid=79, gpus=(GpuRef("0003:00:00.0", "1654471053015"),))
    report, = reports_for(failed(xid), now=NOW, gpu_vendor="nvidia")
    extra = report.body["properties"]["additionalProperties"]
    assert (extra["SerialNumber"], extra["Location"]) == ("1654471053015", "0003:00:00.0")


def test_several_gpus_are_named_in_the_description_not_in_one_serial_field():
    two = (Failure("xid", "xid", "m", xid=79, gpus=(GpuRef("0003:00:00.0", "11"),)),
           Failure("xid", "xid", "m", xid=79, gpus=(GpuRef("0004:00:00.0", "12"),)))
    report, = reports_for(failed(*two), now=NOW, gpu_vendor="nvidia")
    extra = report.body["properties"]["additionalProperties"]
    assert "SerialNumber" not in extra and "Location" not in extra
    assert "0003:00:00.0 (SN 11), 0004:00:00.0 (SN 12)" in report.body["properties"]["impactDescription"]


def test_an_infiniband_report_carries_no_gpu_fields():
    report, = reports_for(failed(PORT3), now=NOW, gpu_vendor="nvidia")
    assert set(report.body["properties"]["additionalProperties"]) == {"PhysicalHostName", "VmUniqueId"}


def test_the_smbios_uuid_is_not_sent_as_the_vm_unique_id():
    node = failed(PORT3, vm_id=None, node_vm_id="2E3C0A5F-1111-4C4C-9E9E-0123456789AB", node_vm_id_source="smbios")
    report, = reports_for(node, now=NOW)
    assert "VmUniqueId" not in report.body["properties"]["additionalProperties"]


@pytest.mark.parametrize("node, reason", [
    (failed(Failure("check_cpu_stream", "cpu_performance", "m", fault_code="NHCNA")), "set-up"),
    (failed(MISSING, physical_host=None, vm_id=None), "PhysicalHostName"),
    (NodeResult("s", "1", RID, "n", "unreachable", reason_code="timeout", reason="no result"), "no verdict"),
    (NodeResult("s", "1", RID, "n", "passed"), "passed"),
])
def test_nodes_that_file_nothing_say_why(node, reason):
    assert reason in not_reportable(node) and reports_for(node, now=NOW) == []


# ------------------------------------------------------------------------------ names


def test_the_name_is_the_same_for_the_same_node_fault_and_day():
    a = impact_name(RID, "train01-vmss000", "7", U + "HpcMissingGpu", "20260314")
    assert a == impact_name(RID.upper(), "train01-vmss000", "7", U + "HpcMissingGpu", "20260314")
    assert a.startswith("azgpu-train01-vmss000-7-HpcMissingGpu-20260314-")


@pytest.mark.parametrize("change", ["day", "category", "group"])
def test_another_day_fault_or_group_is_another_name(change):
    args = {"resource_id": RID, "scale_set": "train01-vmss000", "instance_id": "7", "category": U + "HpcMissingGpu",
            "day": "20260314"}
    other = dict(args)
    if change == "day":
        other["day"] = "20260315"
    elif change == "category":
        other["category"] = U + "NvLink"
    else:
        other["resource_id"] = RID.replace("ml-rg", "ml-rg2")
    assert impact_name(**args) != impact_name(**other)


def test_the_longest_names_fit_the_specs_pattern():
    longest = max(possible_categories(), key=len)
    name = impact_name(RID, "c" * 50 + "-vmss099", "123456", longest, "20260314")
    assert NAME_PATTERN.fullmatch(name) and len(name) <= 120


# ------------------------------------------------------------------------------ insights


def test_learns_insight_example_ends_in_node_removed_from_service():
    example = json.loads((AZURE / "impact" / "ghr-insights-learn.json").read_text())
    state = insight_state(example["value"])
    assert (state["status_code"], state["terminal"], state["insights"]) == ("NodeRemovedFromService", True, 2)


def test_the_latest_insight_is_the_latest_event_not_the_last_listed():
    def insight(code, when, terminal=False):
        return {"properties": {"eventTime": when,
                               "additionalDetails": {"statusCode": code, "terminalInsight": terminal}}}

    state = insight_state([insight("UpdatingNodeHealthState", "2025-07-15T17:50:16.7183274Z"),
                           insight("AcknowledgedUnhealthy", "2025-06-15T04:00:00.009223Z")])
    assert state["status_code"] == "UpdatingNodeHealthState" and state["terminal"] is False


def test_no_insight_yet():
    assert insight_state([]) == {"status_code": None, "terminal": False, "status": None, "title": None,
                                 "event_time": None, "insights": 0}
