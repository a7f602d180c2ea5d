"""Shared helpers for azgpu's tests (tests/testing/ has its own conftest for the fake Azure).

Helpers are fixtures, not module imports: two conftest.py files share the module name
'conftest', so `from conftest import ...` could pick up the wrong one.

- `ssh_key`: a fixed OpenSSH public key literal (deterministic output, no ~/.ssh needed).
- `run(*argv)`: `azgpu.cli.main(argv)` in-process; returns (exit code, stdout, stderr).
- `az`: build requests with sensible defaults and get a Spec, a Plan or the findings.
- `profile_copy`: a writable copy of profiles/ that azgpu loads instead of the shipped one.
"""

from __future__ import annotations

import importlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import azgpu
from azgpu import images, profiles, sources
from azgpu import shipped_data as resources
from azgpu.errors import Finding, ValidationFailed

validate_module = importlib.import_module("azgpu.spec")  # the module; azgpu.validate is the function

REPO = Path(__file__).resolve().parents[1]

# A real ed25519 public key (the private half was thrown away); the comment marks it as a test key.
SSH_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJOgAYClhajeh3m7rJp5Bf+XHzOywcIepjITM9B6OJMg azgpu-test"

DEFAULTS = {"name": "demo", "location": "eastus", "ssh_key": SSH_KEY}


def clear_caches() -> None:
    """Forget every cached profile and catalog (after patching data paths)."""
    for fn in (resources.data_dir, profiles.load_profile, sources.sources, sources.seeds, images.catalog,
               images._by_urn, validate_module.regions):
        fn.cache_clear()


# Where azgpu (and the az CLI, whose defaults azgpu reads) keep a user's files. The suite points every
# one of them at folders of its own before anything is collected (test modules load profiles at
# import, which writes azgpu's cache), for itself and every subprocess it starts, so running the
# tests never reads or changes a user's simulated cloud, price cache or configuration.
USER_PLACES = ("HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "AZURE_CONFIG_DIR")
USER_SETTINGS = ("AZGPU_SIMULATE_STATE", "AZGPU_SIMULATE_LATENCY", "AZURE_DEFAULTS_GROUP", "AZURE_DEFAULTS_LOCATION",
                 "AZGPU_DEBUG")
USER_PREFIX = "azgpu-tests-user-"


def pytest_configure(config):
    base = Path(tempfile.mkdtemp(prefix=USER_PREFIX))
    config._azgpu_user = (base, {name: os.environ.get(name) for name in (*USER_PLACES, *USER_SETTINGS)})
    for name in USER_SETTINGS:
        os.environ.pop(name, None)
    for name in USER_PLACES:
        (base / name.lower()).mkdir()
        os.environ[name] = str(base / name.lower())
    os.environ["AZGPU_SIMULATE_STATE"] = str(base / "simulate.json")


def pytest_unconfigure(config):
    base, saved = getattr(config, "_azgpu_user", (None, {}))
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    if base is not None:
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(autouse=True)
def _isolated(request, tmp_path_factory, monkeypatch):
    """No test sees the developer's ~/.ssh keys, AZGPU_DEBUG or writes into the checkout."""
    # azgpu's per-user cache (parsed profiles, compiled templates) never lands in the real home.
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.getbasetemp() / "cache"))
    # `plan` and `create --dry-run` ask the Azure Retail Prices API: never from a test (subprocesses
    # inherit this too). Tests of pricing answer it through `responses` after clearing this.
    monkeypatch.setenv("AZGPU_PRICES", "off")
    if "testing" in request.node.path.relative_to(REPO / "tests").parts[:-1]:
        return  # tests/testing/ (the fake Azure) has its own conftest and owner
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    # What the health gate records per cluster (azgpu.rack_record) stays with the test that wrote it.
    monkeypatch.setenv("XDG_STATE_HOME", str(home / ".local" / "state"))
    monkeypatch.delenv("AZGPU_DEBUG", raising=False)
    monkeypatch.chdir(tmp_path_factory.mktemp("cwd"))


@pytest.fixture
def ssh_key() -> str:
    return SSH_KEY


@pytest.fixture
def ssh_key_file(tmp_path) -> str:
    path = tmp_path / "id_ed25519.pub"
    path.write_text(SSH_KEY + "\n")
    return str(path)


@pytest.fixture
def run(capsys):
    """`provision ARGV...` in-process: (exit code, stdout, stderr)."""
    from azgpu.cli import main

    def _run(*argv: Any) -> tuple[int, str, str]:
        capsys.readouterr()
        rc = main([str(a) for a in argv])
        out, err = capsys.readouterr()
        return rc, out, err

    return _run


class Az:
    """Requests with defaults (name demo, eastus, the test key) and what azgpu makes of them."""

    @staticmethod
    def request(**values: Any) -> azgpu.Request:
        return azgpu.build_request(**{**DEFAULTS, **values})

    @staticmethod
    def findings(command: str = "validate", **values: Any) -> list[Finding]:
        """Every finding, whether or not validation fails."""
        try:
            return list(azgpu.validate(Az.request(**values), command=command).findings)
        except ValidationFailed as exc:
            return exc.findings

    @staticmethod
    def spec(command: str = "validate", **values: Any) -> azgpu.Spec:
        try:
            return azgpu.validate(Az.request(**values), command=command)
        except ValidationFailed as exc:  # show what failed instead of a bare exception
            pytest.fail(f"expected {values} to validate: {[(f.code, f.message) for f in exc.errors]}")

    @staticmethod
    def plan(command: str = "render", **values: Any) -> azgpu.Plan:
        return azgpu.build_plan(Az.spec(command, **values))

    @staticmethod
    def errors(command: str = "validate", **values: Any) -> list[Finding]:
        """The error findings of a request that must fail validation."""
        with pytest.raises(ValidationFailed) as info:
            azgpu.validate(Az.request(**values), command=command)
        return info.value.errors

    @staticmethod
    def only(findings: list[Finding], code: str) -> Finding:
        """The one finding with `code`."""
        found = [f for f in findings if f.code == code]
        assert len(found) == 1, f"expected one {code}, got {[(f.severity, f.code) for f in findings]}"
        return found[0]

    @staticmethod
    def codes(findings: list[Finding]) -> set[str]:
        return {f.code for f in findings}


@pytest.fixture
def az() -> type[Az]:
    return Az


@pytest.fixture
def profile_copy(tmp_path, monkeypatch) -> Iterator[Path]:
    """A copy of profiles/ that azgpu reads instead of the shipped one; edit files in it freely."""
    folder = tmp_path / "profiles"
    shutil.copytree(profiles.profiles_dir(), folder)
    monkeypatch.setattr(profiles, "profiles_dir", lambda: folder)
    real_data_dir = resources.data_dir

    def data_dir(name: str) -> Path:
        return folder if name == "profiles" else real_data_dir(name)

    # images.py and validate.py reach profiles/ through data_dir, imported by name.
    monkeypatch.setattr(images, "data_dir", data_dir)
    monkeypatch.setattr(validate_module, "data_dir", data_dir)
    clear_caches()
    yield folder
    monkeypatch.undo()
    clear_caches()
