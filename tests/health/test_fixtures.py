"""Every real-output fixture of the health gate names its source, and the simulated Azure's
templates are the same bytes."""

from __future__ import annotations

import tomllib
from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "health"
TEMPLATES = Path(__file__).resolve().parents[2] / "src" / "azgpu" / "testing" / "data" / "node"


def test_every_fixture_names_its_source():
    listed = tomllib.loads((FIXTURES / "sources.toml").read_text())
    files = {p.name for p in FIXTURES.iterdir() if p.name != "sources.toml"}
    assert files == set(listed)
    for name, entry in listed.items():
        assert entry.get("what") and entry.get("source"), name


def test_the_fakes_templates_are_the_fixtures():
    for template in TEMPLATES.iterdir():
        assert template.read_bytes() == (FIXTURES / template.name).read_bytes(), template.name
