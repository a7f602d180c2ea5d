"""The built wheel ships profiles/: install it into a fresh virtual environment
(no system site-packages) and run the installed `provision` from outside the checkout.

Dependencies come from the package indexes pip is configured with on this machine (pip config /
PIP_* environment); nothing is downloaded by the test itself. Marked `slow` (about 15 s): it runs
in the default suite and CI; deselect it locally with `-m "not slow"`.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJOgAYClhajeh3m7rJp5Bf+XHzOywcIepjITM9B6OJMg azgpu-test"


def sh(*argv, cwd, timeout=600, env=None) -> subprocess.CompletedProcess:
    done = subprocess.run([str(a) for a in argv], cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env)
    assert done.returncode == 0, f"{argv}\n{done.stdout}\n{done.stderr}"
    return done


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """bin/ of a fresh venv with the wheel installed."""
    work = tmp_path_factory.mktemp("wheel")
    dist = work / "dist"
    build = [sys.executable, "-m", "build", "--wheel", "--outdir", dist]
    if importlib.util.find_spec("hatchling"):
        build.append("--no-isolation")  # the backend is already here: no index round trip
    sh(*build, REPO, cwd=REPO)
    (wheel,) = dist.glob("azgpu-*.whl")
    venv = work / "venv"
    sh(sys.executable, "-m", "venv", venv, cwd=work)
    bin_dir = venv / ("Scripts" if os.name == "nt" else "bin")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    sh(bin_dir / "python", "-m", "pip", "install", "--quiet", wheel, cwd=work, env=env)
    return bin_dir


@pytest.fixture
def outside(tmp_path) -> dict:
    """Run from an empty directory with a clean environment: nothing of the checkout is reachable."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["HOME"] = str(tmp_path)
    return {"cwd": tmp_path, "env": env}


@pytest.mark.slow
def test_installed_package_is_not_the_checkout(installed, outside):
    done = sh(installed / "python", "-c", "import azgpu, azgpu.shipped_data as r; print(azgpu.__file__);"
              "print(r.data_dir('profiles'))", **outside)
    module, profiles = done.stdout.split()
    assert str(REPO) not in module + profiles
    assert Path(profiles).name == "profiles"


@pytest.mark.slow
def test_installed_cli_lists_the_profiles(installed, outside):
    done = sh(installed / "provision", "profiles", "list", "--query", "[].id", **outside)
    assert len(json.loads(done.stdout)) == 10


@pytest.mark.slow
def test_installed_cli_renders_templates(installed, outside):
    out = outside["cwd"] / "out"
    sh(installed / "provision", "render", "--profile", "nd-a100-v4", "-n", "demo", "--nodes", "250", "-l", "eastus",
       "--ssh-key", KEY, "--out-dir", out, "-o", "none", **outside)
    assert sorted(p.name for p in out.iterdir()) == ["main.bicep", "main.bicepparam", "main.json",
                                                     "main.parameters.json"]
    assert "resource vmss002 'Microsoft.Compute/virtualMachineScaleSets@" in (out / "main.bicep").read_text()
    assert len(json.loads((out / "main.json").read_text())["resources"]) == 7  # NSG, NAT gateway + IP, VNet, 3 sets


@pytest.mark.slow
def test_installed_fake_azure_ships_its_catalog_data(installed, outside):
    done = sh(installed / "python", "-c", "from azgpu.testing import images, skus; import azgpu.testing as t;"
              "print(t.__file__); print(len(skus.catalog_data()['skus']), len(images.seed_images()))", **outside)
    module, sku_count, image_count = done.stdout.split()
    assert str(REPO) not in module
    assert int(sku_count) >= 20 and int(image_count) >= 35


@pytest.mark.slow
def test_installed_package_ships_the_node_check_and_the_fakes_captures(installed, outside):
    done = sh(installed / "python", "-c", "from azgpu.health.script import node_script_text; "
              "from azgpu.testing.hardware import template; "
              "print('AZGPU_MODE' in node_script_text(), "
              "template('h100-nvidia-smi-q.txt').startswith('$ nvidia-smi -q'))",
              **outside)
    assert done.stdout.split() == ["True", "True"]
