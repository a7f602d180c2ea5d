"""constraints-lowest.txt pins every dependency of pyproject.toml (runtime and test extras) at its
floor, so CI's second run on the lowest versions tests what pyproject.toml promises."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# name>=VERSION (a floor), or name==VERSION for a tool pinned exactly (ruff: its rules change between releases),
# whose floor is that version.
REQUIREMENT = re.compile(r"^([A-Za-z0-9_.\-]+)\s*(?:>=|==)\s*([0-9][0-9.]*)$")
# Floors whose exact version was never published: the lowest release they allow is pinned instead.
UNPUBLISHED = {"build": "1.2.1"}  # build 1.2.0 does not exist on PyPI


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _floors() -> dict[str, str]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    out = {}
    for requirement in [*project["dependencies"], *project["optional-dependencies"]["test"]]:
        match = REQUIREMENT.match(requirement.strip())
        assert match, f"{requirement!r}: give every dependency a floor, as name>=VERSION (or an exact name==VERSION)"
        out[_norm(match.group(1))] = match.group(2)
    return out


def _pins() -> dict[str, str]:
    pins = {}
    for line in (REPO / "constraints-lowest.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, _, version = line.partition("==")
            pins[_norm(name)] = version.strip()
    return pins


def _release(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


@pytest.mark.parametrize("name, floor", sorted(_floors().items()))
def test_every_floor_is_pinned_exactly(name, floor):
    pins = _pins()
    assert name in pins, f"constraints-lowest.txt has no pin for {name} (floor {floor})"
    if name in UNPUBLISHED:
        assert pins[name] == UNPUBLISHED[name] and _release(pins[name])[:len(_release(floor))] == _release(floor)
        return
    pin, low = _release(pins[name]), _release(floor)
    width = max(len(pin), len(low))
    padded = pin + (0,) * (width - len(pin)), low + (0,) * (width - len(low))
    assert padded[0] == padded[1], f"{name}: pinned {pins[name]}, floor {floor}"


def test_nothing_is_pinned_that_pyproject_does_not_ask_for():
    assert set(_pins()) <= set(_floors())
