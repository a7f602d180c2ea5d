"""examples/: every cluster file validates (render), the retired ND one is refused for real
deployments, and examples/render_cluster.py renders through the public API."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import azgpu

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
CLUSTER_FILES = sorted(p.name for p in EXAMPLES.glob("*.toml"))


def request(name: str, ssh_key: str) -> azgpu.Request:
    path = EXAMPLES / name
    return azgpu.build_request({**azgpu.read_cluster_file(str(path)), "ssh-key": ssh_key}, origin=str(path))


def test_there_is_an_example_per_seed_series():
    assert {"nd.toml", "ndv2.toml", "ng.toml", "nd-a100-v4.toml", "nd-gb300-v6.toml"} <= set(CLUSTER_FILES)


@pytest.mark.parametrize("name", CLUSTER_FILES)
def test_example_validates_for_render(name, ssh_key):
    spec = azgpu.validate(request(name, ssh_key), command="render")
    assert spec.profile.id == Path(name).stem
    assert spec.request.resource_group


@pytest.mark.parametrize("name", CLUSTER_FILES)
def test_example_keys_are_flag_names(name):
    for key in azgpu.read_cluster_file(str(EXAMPLES / name)):
        assert "_" not in key, f"{name}: write '{key.replace('_', '-')}' like the flag"


def test_retired_nd_example_is_refused_for_deployment(ssh_key):
    with pytest.raises(azgpu.ValidationFailed) as info:
        azgpu.validate(request("nd.toml", ssh_key), command="create")
    assert [f.code for f in info.value.errors] == ["SERIES_RETIRED"]


def test_render_cluster_script_writes_both_formats(tmp_path, ssh_key_file):
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / "render_cluster.py"), str(EXAMPLES / "nd-a100-v4.toml"), str(tmp_path / "out"),
         "--ssh-key", ssh_key_file], capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        "main.bicep", "main.bicepparam", "main.json", "main.parameters.json"]
    assert "WARNING: [IB_DOMAIN_SPLIT]" in done.stderr
    assert "150 x Standard_ND96asr_v4 in 2 scale set(s)" in done.stdout


def test_render_cluster_script_reports_errors_and_exits_2(tmp_path, ssh_key_file):
    bad = tmp_path / "bad.toml"
    bad.write_text('profile = "ndv2"\nname = "volta"\nimage = "ubuntu-hpc-2204"\n')
    done = subprocess.run([sys.executable, str(EXAMPLES / "render_cluster.py"), str(bad), str(tmp_path / "out"),
                           "--ssh-key", ssh_key_file], capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 2
    assert "ERROR: [IMAGE_CUDA_UNSUPPORTED]" in done.stderr
    assert "  remedy: use the V100 image: --image ubuntu-hpc-2204-v100" in done.stderr
    assert not (tmp_path / "out").exists()
