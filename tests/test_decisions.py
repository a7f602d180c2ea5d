"""Rules only check: the layout, driver and eviction decisions are taken once before the rules run
(layout.py, drivers.py, eviction.py), and the rules receive them in a frozen context."""

from __future__ import annotations

import ipaddress

import pytest
from msgspec import structs

import azgpu
from azgpu import profiles, rules
from azgpu.images import resolve
from azgpu.layout import decide_layout, resource_kinds
from azgpu.spec import decide

REQUESTS = [
    {"profile": "nd-a100-v4", "nodes": 250, "spot": True, "eviction_policy": "deallocate"},
    {"profile": "nd-a100-v4", "nodes": 4, "image": "ubuntu-2204-gen2", "outbound": False},
    {"profile": "nd-gb300-v6", "nodes": 90, "max_ib_domain": 40},
    {"profile": "nd-h100-v5", "nodes": 2, "max_ib_domain": 0, "spot": True},
    {"profile": "nd", "size": "ND24rs", "nodes": 3},
    {"profile": "nd-a100-v4", "nodes": 1, "max_price": 1.5},
]


def _context(az, values: dict, command: str = "render") -> rules.Context:
    request = az.request(**values)
    profile = azgpu.load_profile(request.profile)
    size = profile.size(request.size or profile.default_size)
    image = resolve(request.image or profile.default_image)
    return decide(request, profile, size, image, command, ipaddress.IPv4Network("10.0.0.0/16"))


def test_every_series_rule_a_profile_may_name_has_a_check():
    assert set(rules.SERIES_RULES) == set(profiles.SERIES_RULE_ARGS)


@pytest.mark.parametrize("values", REQUESTS)
def test_no_rule_depends_on_another_having_run(az, values):
    ctx = _context(az, values)
    together = rules.run(ctx)
    alone = {check: list(check(ctx)) for check in reversed(rules.UNIVERSAL)}
    series = [f for rule in ctx.profile.rules
              for f in rules.SERIES_RULES[rule.name](structs.replace(ctx, rule_source=rule.source), rule.args)]
    assert together == [f for check in rules.UNIVERSAL for f in alone[check]] + series
    assert together  # each request above gives findings


def test_the_rules_cannot_change_their_context(az):
    ctx = _context(az, REQUESTS[0])
    with pytest.raises(AttributeError):
        ctx.eviction_policy = "Delete"  # type: ignore[misc]


def test_the_spec_holds_the_decisions_the_rules_saw(az):
    values = REQUESTS[0]
    ctx, spec = _context(az, values), az.spec("render", **values)
    assert (spec.scale_sets, spec.ib_domain) == (ctx.layout.scale_sets, ctx.layout.ib_domain) == ((100, 100, 50), 100)
    assert spec.eviction_policy == ctx.eviction_policy == "Deallocate"
    assert (spec.install_ofed, spec.extensions) == (ctx.drivers.install_ofed, ctx.drivers.extensions)


def test_a_rack_series_splits_in_whole_racks():
    profile = azgpu.load_profile("nd-gb300-v6")
    layout = decide_layout(azgpu.build_request(profile="nd-gb300-v6", nodes=90, max_ib_domain=40), profile,
                           profile.size(profile.default_size))
    assert (layout.rack_cut, layout.ib_domain, layout.scale_sets) == (40, 36, (36, 36, 18))


@pytest.mark.parametrize("values", [
    {"nodes": 250},
    {"nodes": 3, "outbound": False},
    {"nodes": 2, "ppg": "train-ppg"},
    {"nodes": 2, "subnet_id": "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/net-rg/providers/"
                   "Microsoft.Network/virtualNetworks/vnet1/subnets/default"},
])
def test_the_validator_counts_the_resources_the_plan_creates(az, values):
    spec = az.spec("render", profile="nd-a100-v4", **values)
    kinds = resource_kinds(existing_subnet=bool(spec.subnet_id), nat_gateway=spec.nat_gateway,
                           new_ppg=bool(spec.ppg_name), scale_sets=len(spec.scale_sets))
    assert len(kinds) == len(azgpu.build_plan(spec).resources)


def test_a_finding_is_made_one_way_with_keywords():
    from azgpu.errors import Finding

    with pytest.raises(TypeError):
        Finding("INVALID_NODES", "--nodes must be 1 or more")  # type: ignore[misc]
    made = Finding(code="INVALID_NODES", message="--nodes must be 1 or more", field="nodes")
    assert (made.remedy, made.source, made.severity, made.is_error) == ("", "", "error", True)


def test_azgpu_validate_is_the_function_and_azgpu_spec_the_module():
    import importlib
    import types

    assert isinstance(azgpu.validate, types.FunctionType) and azgpu.validate.__module__ == "azgpu.spec"
    assert isinstance(importlib.import_module("azgpu.spec"), types.ModuleType)
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("azgpu.validate")
