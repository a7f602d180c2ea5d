"""A VM series has a room for each of its parts, and a series that skips one fails here: its profile
(profiles/ID.toml, every fact sourced, its quota family among them), the fake's SKU catalog entry of each size
with the quota family Azure lists it under (testing/data/resource_skus.json), the fake's hardware model of each
size (testing/hardware.py; tests/testing/test_fake_hardware_models.py checks its figures), and its row in the
README's table of series."""

from __future__ import annotations

from pathlib import Path

from msgspec import structs

from azgpu.profiles import Profile, list_profiles
from azgpu.testing import hardware, skus

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()


def series_gaps(profiles: list[Profile], readme: str, catalog: dict[str, dict]) -> list[str]:
    listed = {name.lower(): entry for name, entry in catalog.items()}
    gaps = []
    for profile in profiles:
        if f"`{profile.id}`" not in readme.split("## Series", 1)[-1].split("\n## ", 1)[0]:
            gaps.append(f"{profile.id}: not in the README's table of series")
        for size in profile.sizes:
            fact = size.facts.get("quota_family")
            if fact is None or not fact.value or not fact.source:
                gaps.append(f"{profile.id}: {size.name} has no sourced quota family")
            entry = listed.get(size.name.lower())
            if entry is None or not entry.get("family"):
                gaps.append(f"{profile.id}: {size.name} is not in the fake's SKU catalog with a family")
            if size.name.lower() not in hardware.MODELS:
                gaps.append(f"{profile.id}: {size.name} has no hardware model in the fake")
    return gaps


def test_every_series_has_every_room():
    profiles = list_profiles()
    assert len(profiles) > 5
    assert series_gaps(profiles, README, skus._entries()) == []


def test_a_series_that_skips_a_step_fails():
    profiles = list_profiles()
    first = profiles[0]
    new_size = structs.replace(first.sizes[0], name="Standard_ND96isr_X100_v9", aliases=())
    new_series = structs.replace(first, id="nd-x100-v9", sizes=(new_size,))
    assert series_gaps([*profiles, new_series], README, skus._entries()) == [
        "nd-x100-v9: not in the README's table of series",
        "nd-x100-v9: Standard_ND96isr_X100_v9 is not in the fake's SKU catalog with a family",
        "nd-x100-v9: Standard_ND96isr_X100_v9 has no hardware model in the fake",
    ]
    unsourced = structs.replace(first.sizes[0], facts={k: v for k, v in first.sizes[0].facts.items()
                                                           if k != "quota_family"})
    assert series_gaps([structs.replace(first, sizes=(unsourced,))], README, skus._entries()) == [
        f"{first.id}: {first.sizes[0].name} has no sourced quota family"]
