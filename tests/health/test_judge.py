"""azgpu.health.judge and `provision check --from-output / --print-script`: one node's captured output
judged exactly as the gate judges it, and the on-node script with a size's expectations, without Azure.
The captured outputs are the real node script's, run on sandboxed nodes built from real tool output."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from node_support import Node, fixture

from azgpu.health import judge, node_script
from azgpu.health.script import settings_of


@pytest.fixture
def node(tmp_path) -> Node:
    return Node(tmp_path / "node")


def run_script(node: Node, size: str) -> str:
    script = node_script(size).splitlines()
    return node.box.run(script).stdout


def test_the_24_failure_aznhc_run_is_judged_failed_with_the_missing_gpu(node):
    node.aznhc(fixture("aznhc-24-failures-gpu-count.log"), rc=1)
    result = judge(run_script(node, "Standard_ND96isr_H100_v5"), "Standard_ND96isr_H100_v5")
    assert result.status == "failed"
    (gpu,) = [f for f in result.as_dict()["failures"] if f["check"] == "check_gpu_count"]
    assert (gpu["expected"], gpu["measured"], gpu["impact_category"]) == \
           ("8", "1", "Resource.Hpc.Unhealthy.HpcMissingGpu")


def test_a_run_command_result_is_read_as_the_gate_reads_it(node):
    stdout = run_script(node, "ND96isr_H100_v5")
    rest = {"value": [{"code": "ProvisioningState/succeeded", "message": f"Enable succeeded: \n[stdout]\n{stdout}\n"
                                                                       "[stderr]\n"}]}
    assert judge(json.dumps(rest), "ND96isr_H100_v5").status == "passed"


def test_a_print_script_carries_the_sizes_expectations_and_the_whole_run_watchdog():
    settings = settings_of(node_script("Standard_ND128isr_NDR_GB200_v6").splitlines())
    assert (settings["AZGPU_EXPECT_GPUS"], settings["AZGPU_CHECK_FABRIC"]) == ("4", "1")
    assert int(settings["AZGPU_AZNHC_TIMEOUT"]) == 3600 - 180


def test_check_from_output_and_print_script_on_the_command_line(run, node, tmp_path):
    rc, out, err = run("check", "--print-script", "--size", "ND96isr_H100_v5")
    assert rc == 0 and out.startswith("#!/bin/bash\n") and "AZGPU_EXPECT_GPUS=8" in out
    node.nvidia(fixture("h100-nvidia-smi-q.txt").split("\n", 1)[1].rsplit("[exit", 1)[0])  # 1 GPU of 8
    captured = tmp_path / "out.txt"
    captured.write_text(node.box.run(out.splitlines()).stdout)
    rc, out, err = run("check", "--from-output", captured, "--size", "ND96isr_H100_v5", "-o", "json")
    assert rc == 1 and "UNHEALTHY_NODES" in err
    (n,) = json.loads(out)["nodes"]
    assert (n["status"], n["failures"][0]["check"], n["failures"][0]["measured"]) == ("failed", "gpu_count", "1")


@pytest.mark.parametrize("argv,code", [(["--print-script", "--size", "Standard_NoSuch_v9"], "UNKNOWN_SIZE"),
                                       (["--from-output", "x.txt"], "MISSING_ARGUMENT"),
                                       (["--from-output", "/nonexistent/out.txt", "--size", "ND96isr_H100_v5"],
                                        "UNREADABLE_FILE")])
def test_bad_input_is_one_error_line_and_exit_2(run, argv, code):
    rc, out, err = run("check", *argv)
    assert rc == 2 and out == "" and err.startswith(f"ERROR: [{code}]") and "Traceback" not in err


def test_judging_a_captured_output_imports_no_azure_sdk(tmp_path):
    captured = tmp_path / "out.txt"
    captured.write_text('{"azgpu_health":1,"mode":"check","failures":[],"more":0}\n')
    code = ("import sys; from azgpu.cli import main; rc = main(['check', '--from-output', sys.argv[1], '--size', "
            "'ND96isr_H100_v5', '-o', 'none']); print(rc, any(m.startswith('azure') for m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code, str(captured)], capture_output=True, text=True)
    assert done.stdout.split() == ["0", "False"], done.stderr
