"""Every real Azure body under tests/fixtures/azure names where it came from (see its README)."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "azure"
BODIES = sorted(FIXTURES.rglob("*.json"))


@pytest.mark.parametrize("body", BODIES, ids=[str(p.relative_to(FIXTURES)) for p in BODIES])
def test_fixture_has_its_source(body: Path):
    json.loads(body.read_text())  # a real body is valid JSON as published
    sidecar = body.with_name(body.name.removesuffix(".json") + ".source.toml")
    assert sidecar.is_file(), f"{body.name}: add {sidecar.name} (repo, path, commit, api_version)"
    source = tomllib.loads(sidecar.read_text())
    assert source.get("repo") and source.get("path"), f"{sidecar.name}: repo and path are required"
    if source["repo"] != "recorded":
        assert re.fullmatch(r"[0-9a-f]{40}", source.get("commit", "")), f"{sidecar.name}: commit must be 40 hex digits"


def test_sidecars_have_bodies():
    for sidecar in FIXTURES.rglob("*.source.toml"):
        assert sidecar.with_name(sidecar.name.removesuffix(".source.toml") + ".json").is_file(), sidecar
