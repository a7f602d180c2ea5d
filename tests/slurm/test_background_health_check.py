"""azgpu's node check in the background and Slurm's HealthCheckProgram that reads it (azgpu/slurm/health_check.py).

The node judges the node check's output with azgpu's own code, shipped as it is; the program drains only
on `failed`, once per verdict, and returns at once. tests/slurm/test_slurmctld.py runs both under slurmd.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from azgpu.health.results import FAILED, INCONCLUSIVE, PASSED, NodeRef, result_of
from azgpu.profiles import find_size
from azgpu.slurm import health_check

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "health"))
from node_support import Node, nvidia_q

SIZE = find_size("Standard_ND96isr_H100_v5")[1]
CHECK = {"AZGPU_EXPECT_GPUS": 8, "AZGPU_GPU_VENDOR": "nvidia", "AZGPU_GPU_MEMORY_MIB_MIN": 77824,
         "AZGPU_CHECK_NVLINK": 1, "AZGPU_EXPECT_IB_PORTS": 8, "AZGPU_EXPECT_IB_RATE": 400}


def _output(node: Node) -> str:
    from azgpu.health.script import script_lines

    return node.box.run(script_lines("check", CHECK)).stdout


def _judged(tmp_path: Path, output: str) -> dict:
    """The node's judge, with the shipped modules where the bootstrap puts them (here: a copy of them), in a
    Python that has no azgpu of its own (-S: no site-packages)."""
    lib = tmp_path / "lib"
    for path, text in health_check.shipped().items():
        target = lib / Path(path).relative_to(health_check.LIB_DIR)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    judge = tmp_path / "judge.py"
    judge.write_text(health_check.judge(SIZE).replace(json.dumps(health_check.LIB_DIR), json.dumps(str(lib))))
    done = subprocess.run([sys.executable, "-I", "-S", str(judge)], input=output, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.parametrize("fault, status", [(None, PASSED), ("gpus", FAILED), ("no_nvidia_smi", INCONCLUSIVE)])
def test_the_node_judges_its_check_as_the_gate_does(tmp_path, fault, status):
    node = Node(tmp_path / "node")
    if fault == "gpus":
        node.nvidia(nvidia_q(7))
    elif fault == "no_nvidia_smi":  # the image lacks the driver's tools: the check's fault, not the host's
        (node.box.stubs / "nvidia-smi").unlink()
    output = _output(node)
    gate = result_of(NodeRef("", "", "", "nd-node-0", None, SIZE.name), output)
    mine = _judged(tmp_path, output)
    assert gate.status == mine["status"] == status
    if status == FAILED:
        assert mine["reason"] == ("azgpu " + gate.summary())[:health_check.REASON_LIMIT] and "7" in mine["reason"]
    else:
        assert mine["reason"] == ""


def test_a_python_that_cannot_load_the_judge_never_drains(tmp_path):
    judge = tmp_path / "judge.py"
    judge.write_text(health_check.judge(SIZE).replace(json.dumps(health_check.LIB_DIR), json.dumps(str(tmp_path))))
    done = subprocess.run([sys.executable, "-I", "-S", str(judge)], input="", capture_output=True, text=True,
                          timeout=60)
    assert json.loads(done.stdout)["status"] == INCONCLUSIVE and json.loads(done.stdout)["reason"] == ""


@pytest.fixture
def program(tmp_path):
    """The HealthCheckProgram with its files under tmp_path and an scontrol that records its arguments."""
    verdict, drained = tmp_path / "verdict.json", tmp_path / "drained"
    path = tmp_path / "prog"
    path.write_text(health_check.program().replace(health_check.VERDICT_PATH, str(verdict))
                    .replace(health_check.DRAINED_PATH, str(drained))
                    .replace("PATH=/usr/local/sbin", f"PATH={tmp_path / 'bin'}:/usr/local/sbin"))
    path.chmod(0o755)
    (tmp_path / "bin").mkdir()
    calls = tmp_path / "calls"
    scontrol = tmp_path / "bin" / "scontrol"
    scontrol.write_text(f"#!/bin/sh\nprintf '%s\\n' \"$*\" >> {calls}\n")
    scontrol.chmod(0o755)

    def run(**verdict_fields) -> list[str]:
        if verdict_fields:
            verdict.write_text(json.dumps(verdict_fields))
        started = time.monotonic()
        # slurmd's whole environment for the program (slurmd.c run_script_health_check).
        done = subprocess.run([str(path)], env={"SLURMD_NODENAME": "demo-d000-0003"}, capture_output=True, text=True,
                              timeout=30)
        assert done.returncode == 0 and time.monotonic() - started < 10, done.stderr
        return calls.read_text().splitlines() if calls.exists() else []

    return run


def test_a_failed_verdict_drains_with_the_finding_once(program):
    reason = "azgpu missing_gpu: expected 8 GPUs, measured 7"
    drain = [f"update nodename=demo-d000-0003 state=DRAIN reason={reason}"]
    assert program(status="failed", reason=reason, finding="...", checked=1.5) == drain
    assert program() == drain, "the same verdict drains once: an administrator's resume is not overruled"
    assert program(status="failed", reason=reason, finding="...", checked=2.5) == drain * 2


@pytest.mark.parametrize("status", ["inconclusive", "unreachable", "passed"])
def test_anything_but_failed_drains_nothing(program, status):
    assert program(status=status, reason="", finding="AzNHC's watchdog ended the run", checked=1.0) == []


def test_no_verdict_or_a_broken_one_drains_nothing(program, tmp_path):
    assert program() == []
    (tmp_path / "verdict.json").write_text("not json; rm -rf /")
    assert program() == []


def test_the_runner_skips_a_round_while_a_job_step_runs(tmp_path):
    # The runner scans /proc for slurmstepd (no pgrep needed); a process of that name pauses the check.
    text = health_check.runner()
    assert 'for comm in /proc/[0-9]*/comm' in text and '= slurmstepd ] && exit 0' in text
    assert f"timeout {health_check.CHECK_TIMEOUT + 60} {health_check.NODE_SCRIPT_PATH}" in text


def test_the_node_check_asks_only_that_imex_is_installed(tmp_path):
    # On a Slurm node nvidia-imex runs for a job's nodes only (azgpu/imex.py); channel0 is the image's.
    assert "AZGPU_IMEX_SERVICE=installed" in health_check.node_script(SIZE)
    assert "AZGPU_IMEX_SERVICE" not in subprocess.run(
        [sys.executable, "-m", "azgpu.cli", "check", "--print-script", "--size", SIZE.name], capture_output=True,
        text=True, env={**os.environ}).stdout.split("# azgpu's on-node health check")[0]


def test_what_the_node_is_shipped_holds_every_azgpu_module_it_imports():
    """A module the judge's code imports but the bootstrap does not ship makes every node's verdict
    inconclusive (health/model.py, when the result types moved there, and bounded.py before it)."""
    import ast

    shipped = {path.removeprefix(f"{health_check.LIB_DIR}/"): text for path, text in health_check.shipped().items()}
    for path, text in shipped.items():
        package = path.rpartition("/")[0].replace("/", ".")
        for node in ast.parse(text).body:  # what loads with the module (a function's own import loads on call)
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names if alias.name.split(".")[0] == "azgpu"]
            elif isinstance(node, ast.ImportFrom) and node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                module = f"{base}.{node.module}" if node.module else base
                # `from . import x` loads x as a module when the package does not define it
                modules = [module] if node.module else [f"{module}.{alias.name}" for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "azgpu":
                modules = [node.module]
            else:
                continue
            for module in modules:
                candidates = [module.replace(".", "/") + ".py", module.replace(".", "/") + "/__init__.py"]
                assert any(c in shipped for c in candidates), f"{path} imports {module}, which is not shipped"
