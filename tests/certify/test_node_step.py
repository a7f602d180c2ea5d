"""azgpu/health/certify_node.sh run on stub tools in a sandbox (the real tools' recorded output), and its
answer read back by azgpu/certify/node_step.py: pages, digests, and hostile answers."""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path

import pytest

from azgpu.certify import node_step
from azgpu.certify.node_step import NodeOutputError, assemble, body, read
from azgpu.testing.node_sandbox import Sandbox

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "certify"
DCGM = (FIXTURES / "dcgm-3.1.0-diag-8gpu.json.txt").read_text()


def run_step(tmp_path, mode: str, settings: dict, tools=(), files=()) -> tuple[str, Sandbox]:
    box = Sandbox(tmp_path / "node")
    for name, text in tools:
        box.tool(name, text)
    for path, text in files:
        box.file(path, text)
    ran = box.run(body(mode, settings)["script"])
    return ran.stdout, box


def test_the_body_is_the_script_with_its_settings_quoted(tmp_path):
    b = body("dcgm", {"AZGPU_DCGM_LEVEL": 2, "AZGPU_JOBS": "1 a; rm -rf /"})
    assert b["commandId"] == "RunShellScript"
    assert b["script"][:3] == ["#!/bin/bash", node_step.MARKER, "AZGPU_MODE=dcgm"]
    assert "AZGPU_JOBS='1 a; rm -rf /'" in b["script"]
    with pytest.raises(ValueError):
        body("dcgm", {"PATH": "/tmp"})
    with pytest.raises(ValueError):
        body("rm", {})


def test_a_dcgm_document_comes_back_in_pages_whose_digest_holds(tmp_path):
    big = DCGM * 4  # a document of 8 GPUs at -r 3 is several times this one
    out, box = run_step(tmp_path, "dcgm", {"AZGPU_RUN": "run-00000001", "AZGPU_DCGM_LEVEL": 2}, tools=[("dcgmi", big)])
    first = read(out)
    assert first.mode == "dcgm" and first.ok and first.bytes == len(big.encode()) and first.pages == 4
    assert len(out.encode()) < 4000  # fits Run Command's 4,096-byte tail
    pages = []
    for n in range(1, first.pages):
        ran = box.run(body("page", {"AZGPU_PAGE_RUN": first.run, "AZGPU_PAGE": n})["script"])
        pages.append(read(ran.stdout))
        assert len(ran.stdout.encode()) < 4000
    assert assemble(first, pages) == big


def test_a_tool_the_image_lacks_is_said_so(tmp_path):
    out, _ = run_step(tmp_path, "dcgm", {"AZGPU_RUN": "run-00000002"})
    v = read(out)
    assert (v.ok, v.exit, v.error) == (False, 127, "dcgmi is not installed")


def test_a_fabric_job_line_that_is_not_azgpus_is_refused_not_run(tmp_path):
    out, box = run_step(tmp_path, "fabric", {"AZGPU_RUN": "run-00000003", "AZGPU_ADMIN_USER": "azureuser",
                                             "AZGPU_EXPECT_GPUS": 8,
                                             "AZGPU_JOBS": "1 collective all_reduce 8G 8G 10.0.0.4 $(touch /tmp/x);"
                                                           "2 ibpair 10.0.0.4 `id`;3 nonsense"})
    v = read(out)
    text = assemble(v, [])
    assert text.count("==== job refused") == 3 and "==== job 1" not in text


def test_the_launchers_key_is_forgotten(tmp_path):
    out, box = run_step(tmp_path, "forget", {"AZGPU_RUN": "run-00000004", "AZGPU_ADMIN_USER": "azureuser"},
                        files=[("/home/azureuser/.azgpu-nccl/id_ed25519", "secret")])
    assert read(out).ok and not (box.root / "home/azureuser/.azgpu-nccl").exists()


def verdict_line(**fields) -> str:
    data = {"azgpu_certify": 1, "mode": "dcgm", "run": "run-00000005", "ok": True, "exit": 0, "seconds": 3,
            "bytes": 5, "pages": 1, "sha256": hashlib.sha256(b"hello").hexdigest(),
            "output": base64.b64encode(b"hello").decode(), **fields}
    return json.dumps({k: v for k, v in data.items() if v is not ...})


HOSTILE = {
    "nan": verdict_line(seconds=float("nan")),
    "unknown key": verdict_line(extra="x"),
    "wrong version": verdict_line(azgpu_certify=2),
    "bad base64": verdict_line(output="!!!!"),
    "page too big": verdict_line(output=base64.b64encode(b"x" * 2800).decode(), bytes=2800, pages=2),
    "pages do not add up": verdict_line(bytes=50_000, pages=1),
    "too many pages": verdict_line(bytes=10**7, pages=4000),
    "control characters": verdict_line(error="a\x1bb"),
    "negative": verdict_line(seconds=-1),
    "a huge number": verdict_line(exit=10**30),
    "not a mode": verdict_line(mode="rm"),
    "a bad run id": verdict_line(run="../../etc/passwd"),
    "versions not text": verdict_line(versions={"driver": 5}),
    "versions unknown": verdict_line(versions={"kernel": "x"}),
    "a huge line": '{"azgpu_certify": 1, "mode": "' + "a" * 20000 + '"}',
    "nested": '{"azgpu_certify": ' + "[" * 5000 + "]" * 5000 + "}",
}


@pytest.mark.parametrize("name", list(HOSTILE))
def test_hostile_answers_are_refused_in_one_line(name):
    with pytest.raises(NodeOutputError) as exc:
        read("noise\n" + HOSTILE[name] + "\n")
    assert "\n" not in str(exc.value)


def test_a_line_cut_at_its_start_is_no_verdict():
    assert read(verdict_line()[40:]) is None and read(None) is None and read("") is None


def test_pages_of_another_output_or_a_wrong_digest_are_refused():
    first = read(verdict_line(bytes=2701, pages=2, sha256="0" * 64))
    other = read(verdict_line(bytes=2701, pages=2, sha256="0" * 64, page=1, run="run-00000099"))
    with pytest.raises(NodeOutputError, match="another output"):
        assemble(first, [other])
    same = read(verdict_line(bytes=2701, pages=2, sha256="0" * 64, page=1))
    with pytest.raises(NodeOutputError, match="not the output"):
        assemble(first, [same])


# ---- the fake's stub tools answer what the command line asks, as the real tools do


def _sandboxed(mode: str, settings: dict, script_edit=None, **fault):
    from azgpu.testing import certify_sandbox, fabric, node_fault_table

    node = fabric.make_node("n0", "Standard_ND96isr_H100_v5", 0)
    if fault:
        node_fault_table.apply_fault(node, **fault)
    script = body(mode, {"AZGPU_RUN": "run-00000009", "AZGPU_EXPECT_GPUS": 8, "AZGPU_ADMIN_USER": "azureuser",
                         **settings})["script"]
    if script_edit:
        script = [script_edit(line) for line in script]
    vmss = {"id": "/x", "properties": {}}
    job = certify_sandbox.prepare(None, node, vmss, script, lambda: {})
    out, _, _ = certify_sandbox.execute(job)
    return read(out)


def _loopback_busbw(verdict) -> float:
    from azgpu.certify import nccl_tests

    assert verdict.ok and verdict.pages == 1, verdict
    return nccl_tests.parse(verdict.output.decode()).busbw


def test_the_loopback_sees_a_degraded_port_only_with_nvlink_and_shared_memory_off(tmp_path):
    """NCCL's Environment Variables (NVIDIA NCCL user guide): NCCL_P2P_DISABLE turns off the NVLink/PCI
    transport and NCCL_SHM_DISABLE the shared-memory one; only then does NCCL carry one node's traffic over
    its InfiniBand ports. The fake's mpirun answers so: the same step with either flag removed from the
    script measures the node's inside and misses the port (this fails if the fake ignores the flags)."""
    degraded = _loopback_busbw(_sandboxed("loopback", {}, ib_degraded="mlx5_ib3:0.6"))
    healthy = _loopback_busbw(_sandboxed("loopback", {}))
    assert degraded < 0.9 * healthy
    for flag in ("-x NCCL_P2P_DISABLE=1 ", "-x NCCL_SHM_DISABLE=1 "):
        inside = _loopback_busbw(_sandboxed("loopback", {}, lambda line, f=flag: line.replace(f, ""),
                                            ib_degraded="mlx5_ib3:0.6"))
        assert inside > 0.97 * healthy


def test_dcgmi_runs_the_level_the_step_asks_and_answers_json_only_with_j(tmp_path):
    """dcgmi diag -r N -j (NVIDIA DCGM user guide): the fake answers the level on the command line; a script
    that ran another level, or dropped -j, gets no document azgpu could misread as the one asked for."""
    three = _sandboxed("dcgm", {"AZGPU_DCGM_LEVEL": 3})
    assert three.ok and three.exit == 0 and three.output.lstrip().startswith(b"{")
    wrong = _sandboxed("dcgm", {"AZGPU_DCGM_LEVEL": 3}, lambda line: line.replace('-r "$AZGPU_DCGM_LEVEL"', "-r 2"))
    assert wrong.exit == 1 and not wrong.output.startswith(b"{")
    plain = _sandboxed("dcgm", {"AZGPU_DCGM_LEVEL": 2},
                       lambda line: line.replace('"$AZGPU_DCGM_LEVEL" -j', '"$AZGPU_DCGM_LEVEL"'))
    assert plain.exit == 1 and not plain.output.startswith(b"{")


def test_the_nccl_version_is_read_only_where_nccl_debug_asks_nccl_to_print_it(tmp_path):
    """NCCL prints "NCCL version X" with NCCL_DEBUG=VERSION (NCCL user guide, Environment Variables); the
    loopback passes it so that the certificate names the NCCL the image ran. Without the flag the fake's
    NCCL says nothing, as the real one does."""
    from azgpu.certify import nccl_tests

    with_flag = _sandboxed("loopback", {})
    assert nccl_tests.parse(with_flag.output.decode()).nccl_version == "2.23.4"
    without = _sandboxed("loopback", {}, lambda line: line.replace("-x NCCL_DEBUG=VERSION ", ""))
    assert nccl_tests.parse(without.output.decode()).nccl_version is None
