"""Running the tests never reads or changes a user's files: the simulated cloud's state file, the
price cache, the az CLI's configuration. The suite runs as a user of its own (tests/conftest.py);
these tests hold that against a user whose files are all in place."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from azgpu import pricing
from azgpu.testing import FakeAzure

REPO = Path(__file__).resolve().parents[1]
KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJOgAYClhajeh3m7rJp5Bf+XHzOywcIepjITM9B6OJMg azgpu-test"
# The tests that reset, create or price a simulated cloud, run the docs' commands, start the fake and
# load profiles while being collected: the ones that wrote into a user's files before the suite had
# a user of its own.
SUBSET = ["tests/test_docs.py::test_a_page_that_changes_the_readmes_simulated_cloud_fails",
          "tests/test_docs.py::test_the_library_pages_first_example_runs_offline",
          "tests/test_pricing.py", "tests/testing/test_fake_retail_prices.py", "tests/deploy/test_cli_simulate.py",
          "tests/test_profiles.py"]


def seed_user(home: Path) -> tuple[dict[str, str], dict[Path, bytes]]:
    """A user with a simulated cluster, a price cache and az defaults, in both XDG and home layouts."""
    env = {"HOME": str(home), "XDG_STATE_HOME": str(home / "xdg-state"), "XDG_CACHE_HOME": str(home / "xdg-cache"),
           "XDG_CONFIG_HOME": str(home / "xdg-config"), "AZGPU_SIMULATE_STATE": str(home / "mine" / "simulate.json"),
           "AZURE_CONFIG_DIR": str(home / ".azure"), "AZURE_DEFAULTS_GROUP": "users-rg",
           "AZURE_DEFAULTS_LOCATION": "westus2"}
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519.pub").write_text(KEY + "\n")
    user_env = {**os.environ, **env}
    user_env.pop("AZGPU_PRICES", None)
    # The user made a cluster in their simulated cloud, as the README's quick start does.
    done = subprocess.run([sys.executable, "-m", "azgpu.cli", "create", "--profile", "nd-a100-v4", "-n", "mine",
                           "-g", "mine-rg", "-l", "eastus", "--nodes", "2", "--simulate", "--simulate-latency", "0",
                           "-o", "none"], env=user_env, capture_output=True, text=True, cwd=home)
    assert done.returncode == 0, done.stderr
    state = Path(env["AZGPU_SIMULATE_STATE"])
    prices = b'{"https://prices.azure.com/api/retail/prices|standard_nd96asr_v4|eastus|USD": {"items": [], "ttl": 1}}'
    files = {state: state.read_bytes(),
             home / ".azure" / "config": b"[defaults]\ngroup = users-rg\nlocation = westus2\n"}
    for cache in (home / "xdg-cache", home / ".cache"):
        files[cache / "azgpu" / pricing.CACHE_FILE] = prices
    for place in (home / "xdg-state", home / ".local" / "state"):
        files[place / "azgpu" / "simulate.json"] = state.read_bytes()
    for path, content in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
    return env, files


def everything_under(home: Path) -> dict[str, bytes]:
    return {str(p.relative_to(home)): p.read_bytes() for p in sorted(home.rglob("*")) if p.is_file()}


@pytest.mark.slow
def test_the_suite_leaves_a_users_files_byte_for_byte_unchanged(tmp_path):
    home = tmp_path / "home"
    env, files = seed_user(home)
    before = everything_under(home)
    assert len(before) >= len(files)
    run_env = {**os.environ, **env}
    run_env.pop("AZGPU_PRICES", None)
    done = subprocess.run([sys.executable, "-m", "pytest", "-o", "addopts=", "-q", "-x", "-p", "no:cacheprovider",
                           *SUBSET],
                          env=run_env, cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert re.search(r"\b\d\d+ passed", done.stdout), done.stdout[-2000:]
    after = everything_under(home)
    assert after.keys() == before.keys(), f"files appeared or vanished: {sorted(after.keys() ^ before.keys())}"
    changed = [name for name in before if before[name] != after[name]]
    assert not changed, f"the tests changed the user's {changed}"


def test_the_suite_runs_as_a_user_of_its_own():
    base = Path(os.environ["AZGPU_SIMULATE_STATE"]).parent
    assert base.name.startswith("azgpu-tests-user-")
    for name in ("XDG_CONFIG_HOME", "AZURE_CONFIG_DIR"):
        assert Path(os.environ[name]).parent == base, name
    # HOME, the state directory (what the gate records per cluster) and the cache are each test's own
    # (tests/conftest.py's _isolated), under pytest's temp dir.
    assert "azgpu-tests-user-" in os.environ["HOME"] or "pytest" in os.environ["HOME"]
    assert Path(os.environ["XDG_STATE_HOME"]).is_relative_to(os.environ["HOME"])
    assert "AZURE_DEFAULTS_GROUP" not in os.environ and "AZURE_DEFAULTS_LOCATION" not in os.environ
    # A subprocess inherits it.
    done = subprocess.run([sys.executable, "-c", "import os; print(os.environ['AZGPU_SIMULATE_STATE'])"],
                          capture_output=True, text=True)
    assert done.stdout.strip() == os.environ["AZGPU_SIMULATE_STATE"]


def test_the_fake_never_writes_nor_reads_the_price_cache(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    monkeypatch.delenv(pricing.PRICES_ENV, raising=False)
    # A real answer cached earlier, which the fake's run must neither show nor overwrite.
    key = pricing._cache_key(pricing.ENDPOINT, "Standard_ND96asr_v4", "eastus", "USD")
    pricing._write_cache(key, {"items": [], "ttl": pricing.PRICE_TTL})
    written = (cache / "azgpu" / pricing.CACHE_FILE).read_bytes()
    with FakeAzure():
        price = pricing.lookup("Standard_ND96asr_v4", "eastus")
        other = pricing.lookup("Standard_ND96amsr_A100_v4", "eastus")
    assert price.status == "known" and price.per_hour == 27.197  # the fake's recording, not the cached answer
    assert price.source == other.source == f"{pricing.SOURCE} (simulated)"
    assert (cache / "azgpu" / pricing.CACHE_FILE).read_bytes() == written
    # Once the fake has stopped, the real cache is read again.
    assert pricing.lookup("Standard_ND96asr_v4", "eastus").status == "unknown"
