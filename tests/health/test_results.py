"""Reading a Run Command result, the per-node model, and the Guest Health Reporting category of a
failure as a pure function of it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from azgpu.health.impact import impact_category
from azgpu.health.results import Failure, GpuRef, NodeResult, VerdictError, failure_of, find_verdict, output_streams
from azgpu.health.script import MARKER, node_script_text, run_command_body, script_lines, settings_of

AZURE = Path(__file__).resolve().parents[1] / "fixtures" / "azure"


def body(name: str) -> dict:
    return json.loads((AZURE / name).read_text())


def test_the_recorded_linux_output_splits_into_stdout_and_stderr():
    stdout, stderr = output_streams(body("run-command-linux-output.json"))
    assert stdout == "This is a sample script\nOptional parameters: /var/lib/waagent/run-command/download/0/script.sh\n"
    assert stderr == ""


def test_the_spec_example_windows_shape_gives_stdout_and_stderr():
    assert output_streams(body("vmss-vm-run-command-200.json")) == ("Hello World!", "")


VERDICT = {"azgpu_health": 1, "mode": "check", "failures": [], "more": 0}


def test_the_last_verdict_line_wins():
    first = json.dumps({**VERDICT, "seconds": 1})
    last = json.dumps({**VERDICT, "seconds": 2})
    assert find_verdict(f"noise\n{first}\nmore noise\n{last}\n")["seconds"] == 2


def test_a_verdict_cut_by_the_4kb_tail_does_not_count():
    line = json.dumps(VERDICT)
    assert find_verdict(line[10:] + "\n") is None


def test_a_verdict_of_another_version_is_refused():
    with pytest.raises(VerdictError):
        find_verdict(json.dumps({**VERDICT, "azgpu_health": 2}))


def test_no_verdict_is_none():
    assert find_verdict("Enable succeeded\n") is None


@pytest.mark.parametrize("check, measured, kind", [
    ("check_gpu_count", "7", "missing_gpu"),
    ("check_hw_ib", "DOWN Polling 400 Gb/sec", "ib_port_down"),
    ("check_hw_ib", "ACTIVE LinkUp 200 Gb/sec", "ib_port_rate"),
    ("check_hw_ib", "absent", "ib_missing"),
    ("check_nvsmi_healthmon", None, "nvidia_smi"),
    ("check_ib_link_flapping", None, "ib_port_flapping"),
    ("check_something_new", None, "aznhc"),
])
def test_aznhc_checks_get_a_stable_kind(check, measured, kind):
    assert failure_of({"check": check, "kind": "", "message": "m", "measured": measured}).kind == kind


def test_the_fallback_kind_is_kept():
    assert failure_of({"check": "ib_port", "kind": "ib_port_rate", "message": "m"}).kind == "ib_port_rate"


@pytest.mark.parametrize("failure, category", [
    (Failure("check_gpu_count", "missing_gpu", "m", fault_code="NHC2009"), "HpcMissingGpu"),
    (Failure("check_gpu_xid", "xid", "m", fault_code="NHC2001", xid=79), "XID79FallenOffBus"),
    (Failure("xid", "xid", "m", xid=95), "XID95UncontainedECCError"),
    (Failure("xid", "xid", "m", xid=74), "GpuXIDError"),
    (Failure("check_hw_ib", "ib_port_down", "m"), "IBPortDown"),
    (Failure("ib_port", "ib_port_rate", "m"), "IBPerformance"),
    (Failure("ib_port", "ib_missing", "m"), "MissingIB"),
    (Failure("nvidia-smi", "nvidia_smi_hang", "m"), "UnhealthyGPUNvidiasmi"),
    (Failure("nvlink", "nvlink", "m"), "NvLink"),
    (Failure("check_gpu_ecc", "gpu_ecc", "m", fault_code="NHC2007"), "HpcRowRemapFailure"),
    (Failure("gpu_memory", "gpu_memory", "m"), "HpcGenericFailure"),
])
def test_impact_category_is_a_function_of_the_failure(failure, category):
    assert impact_category(failure) == "Resource.Hpc.Unhealthy." + category


def test_a_setup_fault_of_the_check_itself_has_no_category():
    assert impact_category(Failure("check_all_reduce_dependencies", "aznhc_setup", "m", fault_code="NHCNA")) is None


def test_a_node_result_carries_what_guest_health_reporting_needs():
    failure = Failure("check_gpu_count", "missing_gpu", "m", "8", "7", "NHC2009", gpus=(GpuRef("0008:00:00.0", "17"),))
    node = NodeResult("c1-vmss000", "3", "/subscriptions/s/.../virtualMachines/3", "c1-000-000003", "failed",
                      checker="aznhc", failures=(failure,), physical_host="AMS081063509028", vm_id="v-1")
    data = node.as_dict()
    assert (data["resource_id"], data["physical_host"], data["vm_id"]) == \
           ("/subscriptions/s/.../virtualMachines/3", "AMS081063509028", "v-1")
    assert data["failures"][0]["impact_category"] == "Resource.Hpc.Unhealthy.HpcMissingGpu"
    assert data["failures"][0]["gpus"] == [{"bus": "0008:00:00.0", "serial": "17"}]
    assert data["summary"] == "check_gpu_count: expected 8, measured 7 (NHC2009)"


def test_the_run_command_body_is_a_run_shell_script_with_the_settings_above_the_script():
    sent = run_command_body("check", {"AZGPU_EXPECT_GPUS": 8, "AZGPU_XIDS": "48 79"})
    assert sent["commandId"] == "RunShellScript" and "parameters" not in sent
    assert sent["script"][:5] == ["#!/bin/bash", MARKER, "AZGPU_MODE=check", "AZGPU_EXPECT_GPUS=8",
                                  "AZGPU_XIDS='48 79'"]
    assert sent["script"][5:] == node_script_text().splitlines()
    assert settings_of(sent["script"]) == {"AZGPU_MODE": "check", "AZGPU_EXPECT_GPUS": "8", "AZGPU_XIDS": "48 79"}


def test_a_setting_name_must_be_azgpu():
    with pytest.raises(ValueError):
        script_lines("check", {"PATH": "/tmp"})


def test_the_script_stays_far_below_run_commands_limit():
    # run-command-extension-linux refuses scripts over 256 KiB; each node's request carries it whole.
    assert len("\n".join(script_lines("check", {}))) < 48 * 1024


def test_the_same_finding_on_every_gpu_is_summarised_once_with_its_count():
    fabric = Failure("fabric", "nvlink", "m", expected="Completed Success", measured="In Progress N/A")
    node = NodeResult("c1-vmss000", "0", "/id/0", "c1-000-000000", "failed", "fallback",
                      failures=(fabric, fabric, fabric, fabric,
                                Failure("check_gpu_count", "missing_gpu", "m", "4", "3", "NHC2009")))
    assert node.summary() == ("fabric: expected Completed Success, measured In Progress N/A, 4 times; "
                              "check_gpu_count: expected 4, measured 3 (NHC2009)")
