"""azgpu's ownership tags have one owner: azgpu.ownership writes each tag name, every other module asks it."""

from __future__ import annotations

import ast
from pathlib import Path
from types import SimpleNamespace

import pytest

from azgpu import ownership
from azgpu.profiles import find_size

SRC = Path(ownership.__file__).resolve().parent
TAG_NAMES = {ownership.MANAGED_BY_TAG, ownership.CLUSTER_TAG, ownership.PROFILE_TAG, ownership.CREATED_TAG,
             ownership.NODE_TAG}


def literal_tag_names(sources: dict[str, str]) -> list[str]:
    """module: tag name, for every string constant (an f-string's parts included) that is a tag name."""
    found = []
    for name, source in sorted(sources.items()):
        for node in ast.walk(ast.parse(source)):
            text = _folded(node) if isinstance(node, (ast.Constant, ast.BinOp)) else None
            if text in TAG_NAMES:
                found.append(f"{name}: {text!r}")
    return found


def _folded(node: ast.AST) -> str | None:
    """The string a constant, or a sum of constants ("azgpu-" + "cluster"), spells; None for anything else."""
    if isinstance(node, ast.Constant):
        return node.value if isinstance(node.value, str) else None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _folded(node.left), _folded(node.right)
        return left + right if left is not None and right is not None else None
    return None


def _sources() -> dict[str, str]:
    # The fake (azgpu.testing) is left out: it plays Azure's part, borrows none of the product's constants
    # (tests/testing/test_fake_boundaries.py), and azgpu's tags mean nothing to it.
    return {str(p.relative_to(SRC)): p.read_text() for p in SRC.rglob("*.py")
            if p.relative_to(SRC).parts[0] != "testing"}


def test_the_tag_names_are_written_in_the_ownership_module_only():
    sources = _sources()
    assert {"plan.py", "deploy/nodes.py", "deploy/lifecycle.py"} <= set(sources)  # the walk sees the package
    found = literal_tag_names(sources)
    assert sorted(found) == sorted(f"ownership.py: {t!r}" for t in TAG_NAMES)  # each once, there


def test_the_walk_finds_a_tag_name_written_again():
    bad = {"x.py": 'def f(tags):\n    return tags.get("azgpu-cluster"), {"managed-by": 1}, f"{tags}azgpu-profile"\n'}
    assert sorted(literal_tag_names(bad)) == ["x.py: 'azgpu-cluster'", "x.py: 'azgpu-profile'", "x.py: 'managed-by'"]
    assert literal_tag_names({"z.py": 'PREFIX = 1\nTAG = "azgpu-" + "clu" + "ster"\n'}) == ["z.py: 'azgpu-cluster'"]
    # A tag name inside prose is prose (help text, docstrings); only a whole string is a tag written again.
    assert literal_tag_names({"y.py": '"""Tagged managed-by: azgpu."""\n'}) == []


def test_ours_and_created():
    tags = ownership.created_group_tags("c1")
    assert ownership.is_ours(tags, "c1") and ownership.created_by_azgpu(tags) and ownership.is_azgpu(tags)
    assert not ownership.is_ours(tags, "c2")
    assert not ownership.created_by_azgpu(ownership.cluster_tags("c1", "nd-h100-v5"))
    assert not ownership.is_ours({ownership.CLUSTER_TAG: "c1"}, "c1")  # not managed by azgpu
    assert not ownership.is_azgpu(None) and ownership.cluster_of(None) is None


def _scale_set(size: str, tags: dict | None) -> SimpleNamespace:
    return SimpleNamespace(sku=SimpleNamespace(name=size), tags=tags)


@pytest.mark.parametrize("tags", [None, {}, {ownership.PROFILE_TAG: "no-such-profile"}])
def test_a_live_scale_set_without_a_usable_profile_tag_takes_the_profile_that_knows_its_size(tags):
    profile, size = ownership.live_profile(_scale_set("Standard_ND96isr_H100_v5", tags))
    assert (profile.id, size.name) == (find_size("Standard_ND96isr_H100_v5")[0].id, "Standard_ND96isr_H100_v5")


def test_a_live_scale_set_takes_the_profile_its_tag_names(monkeypatch):
    monkeypatch.setattr("azgpu.profiles.find_size", lambda size: pytest.fail("the tag was not read"))
    profile, size = ownership.live_profile(_scale_set("Standard_ND96isr_H100_v5",
                                                      ownership.cluster_tags("c1", "nd-h100-v5")))
    assert (profile.id, size.name) == ("nd-h100-v5", "Standard_ND96isr_H100_v5")
