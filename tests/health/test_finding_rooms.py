"""A health finding has a room for each of its parts: the node script or the AzNHC reader gives it a kind, and
health/impact.py gives every kind a class (a Guest Health Reporting category of its own, generic on purpose,
not the host's fault, or one the image could cause). A kind added to the script without a class fails here."""

from __future__ import annotations

import re
from importlib import resources

from azgpu.health import impact
from azgpu.health.results import AZNHC_KINDS


def script_kinds(text: str) -> set[str]:
    """The kinds the node script's add_failure calls name (add_failure CHECK KIND ...), literal ones only."""
    kinds = {m.group(1) for m in re.finditer(r"add_failure\s+\S+\s+\"?([a-z_]+)\"?[\s\\]", text)}
    return kinds


def classed() -> set[str]:
    return set(impact.KINDS) | impact.NOT_THE_HOST | impact.IMAGE_SUSPECT | impact.GENERIC_KINDS | {"xid"}


def unclassed(kinds: set[str]) -> list[str]:
    return sorted(kinds - classed())


def _script() -> str:
    return resources.files("azgpu.health").joinpath("node_check.sh").read_text()


def test_the_script_names_its_kinds():
    kinds = script_kinds(_script())
    assert {"missing_gpu", "gpu_row_remap", "ib_port_down", "xid", "imex_channel", "tool_missing"} <= kinds


def test_every_kind_the_node_script_gives_has_a_class():
    assert unclassed(script_kinds(_script())) == []


def test_every_kind_the_aznhc_reader_gives_has_a_class():
    assert unclassed(set(AZNHC_KINDS.values()) | {"aznhc"}) == []


def test_a_new_kind_in_the_script_without_a_class_fails():
    grown = _script() + '\nadd_failure gpu_fan gpu_fan_stopped "a fan stopped" "" ""\n'
    assert unclassed(script_kinds(grown)) == ["gpu_fan_stopped"]


def test_no_kind_is_in_two_classes():
    groups = [set(impact.KINDS), impact.NOT_THE_HOST, impact.IMAGE_SUSPECT, impact.GENERIC_KINDS]
    seen: set[str] = set()
    for group in groups:
        assert not (group & seen), group & seen
        seen |= group
