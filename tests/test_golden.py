"""Golden files: the rendered templates of one representative request per profile.

Each tests/golden/<profile>/cluster.toml is a cluster file (fixed name, location and SSH key
literal, so the output is deterministic); `provision render -f cluster.toml` must reproduce
main.json, main.parameters.json, main.bicep and main.bicepparam beside it byte for byte.

A change to the renderer, a template or a profile shows up in review as a diff of these files.
To accept an intended change, rewrite them and review the diff:

    AZGPU_UPDATE_GOLDEN=1 python -m pytest tests/test_golden.py
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

GOLDEN = Path(__file__).resolve().parent / "golden"
FILES = ("main.json", "main.parameters.json", "main.bicep", "main.bicepparam")
PROFILES = sorted(p.name for p in GOLDEN.iterdir() if (p / "cluster.toml").is_file())
UPDATE = os.environ.get("AZGPU_UPDATE_GOLDEN") == "1"


def render(run, folder: Path, out: Path) -> None:
    rc, _, err = run("render", "-f", folder / "cluster.toml", "--out-dir", out, "-o", "none")
    assert rc == 0, err


def test_there_is_a_golden_request_for_every_profile():
    from azgpu.profiles import profile_ids

    assert PROFILES == profile_ids()


@pytest.mark.parametrize("profile", PROFILES)
def test_rendered_templates_match_the_golden_files(run, tmp_path, profile):
    folder = GOLDEN / profile
    render(run, folder, tmp_path)
    if UPDATE:
        for name in FILES:
            (folder / name).write_bytes((tmp_path / name).read_bytes())
    for name in FILES:
        expected = folder / name
        assert expected.is_file(), f"{expected} is missing: run AZGPU_UPDATE_GOLDEN=1 pytest tests/test_golden.py"
        assert (tmp_path / name).read_text() == expected.read_text(), (
            f"{profile}/{name} differs from the golden file; if the change is intended, run "
            "AZGPU_UPDATE_GOLDEN=1 pytest tests/test_golden.py and review the diff")


@pytest.mark.parametrize("profile", PROFILES)
def test_rendering_twice_is_byte_identical(run, tmp_path, profile):
    render(run, GOLDEN / profile, tmp_path / "first")
    render(run, GOLDEN / profile, tmp_path / "second")
    for name in FILES:
        assert (tmp_path / "first" / name).read_bytes() == (tmp_path / "second" / name).read_bytes()


def test_golden_request_files_hold_only_a_public_key():
    for profile in PROFILES:
        assert "PRIVATE KEY" not in (GOLDEN / profile / "cluster.toml").read_text()
