"""User text never becomes template code: ARM expressions in tag names are escaped like values,
Bicep property names that are keywords or not identifiers are quoted, and a property-based test
feeds arbitrary strings into every user-controlled field."""

from __future__ import annotations

import json
import string
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from test_arm_bicep_equivalence import arm_canonical, arm_model, bicep_model, pycep_readable

import azgpu
from azgpu.expr import EXPR_TYPES, walk
from azgpu.render.arm import render_arm, render_arm_parameters, to_json
from azgpu.render.bicep import bicep_key, render_bicep, render_bicepparam

SSH_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJOgAYClhajeh3m7rJp5Bf+XHzOywcIepjITM9B6OJMg"


def rendered(az, **values):
    plan = az.plan(**values)
    return plan, json.loads(to_json(render_arm(plan))), render_bicep(plan)


# ------------------------------------------------------------------------------ the reported cases


def test_tag_name_that_is_an_arm_expression_is_escaped(az):
    _, arm, _ = rendered(az, profile="nd-a100-v4", tags={"[resourceGroup().name]": "x"})
    for resource in arm["resources"]:
        assert "[[resourceGroup().name]" in resource["tags"]
        assert "[resourceGroup().name]" not in resource["tags"]


def test_tag_name_already_starting_with_two_brackets_keeps_its_text(az):
    _, arm, _ = rendered(az, profile="nd-a100-v4", tags={"[[x]": "y"})
    assert arm_canonical(arm["resources"][0]["tags"]) == {"[[x]": "y", "managed-by": "azgpu", "azgpu-cluster": "demo",
                                                          "azgpu-profile": "nd-a100-v4"}


@pytest.mark.parametrize("name", ["true", "false", "null", "a b", "a-b", "1abc", "ü", "x\n", "k" * 256, ""])
def test_bicep_quotes_property_names_it_cannot_read_bare(name):
    assert bicep_key(name).startswith("'")


@pytest.mark.parametrize("name", ["team", "_x", "Cost_Center1", "k" * 255])
def test_bicep_leaves_identifiers_bare(name):
    assert bicep_key(name) == name


def test_keyword_tag_names_parse_back_in_bicep(az):
    _, arm, bicep = rendered(az, profile="nd-a100-v4", tags={"true": "1", "false": "0", "null": "-"})
    assert arm_model(arm) == bicep_model(bicep)


def test_control_characters_in_bicep_strings_are_escaped():
    from azgpu.render.bicep import bicep_string

    assert bicep_string("a\x00b\x1bc\u2028d") == "'a\\u{0}b\\u{1B}c\\u{2028}d'"


@pytest.mark.parametrize("tags, code", [
    ({"a\nb": "x"}, "INVALID_TAG"),
    ({"team": "ml\x1b[2J"}, "INVALID_TAG"),
    ({"team": "\udcff"}, "INVALID_TAG"),
    ({"": "x"}, "INVALID_TAG"),
    ({"Team": "a", "team": "b"}, "DUPLICATE_TAG"),
    ({"AZGPU-Cluster": "x"}, "RESERVED_TAG"),
])
def test_tags_azure_or_a_terminal_cannot_take_fail(az, tags, code):
    f = az.only(az.errors(profile="nd-a100-v4", tags=tags), code)
    assert f.remedy


# ------------------------------------------------------------------------------ property-based


def expressions(plan) -> set[str]:
    """Every ARM expression the plan itself means to write (references, parameters, functions)."""
    found: set[str] = set()

    def collect(e):
        found.add(f"[{e.arm()}]")
        return e

    for r in plan.resources:
        walk(r.body, collect)
        found.add(f"[resourceId('{r.type}', '{r.name}')]")
    for o in plan.outputs:
        walk(o.value, collect)
    for p in plan.parameters:
        if isinstance(p.default, EXPR_TYPES):
            collect(p.default)
    return found


def strings(value: Any):
    """Every string of a JSON document, property names included."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield k
            yield from strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from strings(v)


def bicepparam_values(text: str) -> dict:
    """main.bicepparam's values, read with the Bicep parser (pycep knows no 'using' files)."""
    body = "\n".join(("var" + line[len("param"):]) if line.startswith("param ") else line
                     for line in text.splitlines() if not line.startswith("using "))
    from pycep import BicepParser

    parsed = BicepParser().parse(text=pycep_readable(body) + "\n").get("variables", {})
    return {name: bicep_model_value(v["value"]) for name, v in parsed.items()}


def bicep_model_value(node):
    from test_arm_bicep_equivalence import BicepModel

    return BicepModel({}).value(node)


# Text built to look like template code: brackets, quotes, interpolation, escapes, line breaks,
# keywords, bytes that were not UTF-8 (lone surrogates), Unicode line separators.
NASTY = st.lists(st.sampled_from(list("[]()'\"${}\\ \n\r\t.,:=-_/aZ0é") + ["\u2028", "\x00", "\x1b", "\udcff",
                                                                            "true", "null", "parameters('x')"]),
                 max_size=12).map("".join)
ANY_TEXT = st.one_of(NASTY, st.text(max_size=24))
# The same, printable: what a tag may hold, so that most requests with such tags render.
PRINTABLE = st.one_of(NASTY.map(lambda t: "".join(c for c in t if c.isprintable())),
                      st.text(st.characters(blacklist_categories=["Cc", "Cs", "Zl", "Zp"]), max_size=24))
# Whole strings in ARM's expression form, the shape an injection takes.
PRINTABLE = st.one_of(PRINTABLE, PRINTABLE.map(lambda t: f"[{t}]"))

VALID = {
    "profile": "nd-a100-v4", "name": "demo", "resource_group": "ml-rg", "location": "eastus",
    "image": "ubuntu-hpc-2204", "admin_username": "azureuser", "ssh_key": SSH_KEY, "zone": "1",
    "vnet_address_prefix": "10.1.0.0/16", "ssh_source": "203.0.113.7/32", "security_type": "Standard",
    "nodes": "2", "max_price": "2.5", "spot": True, "public_ip": True,
}
SAMPLES = {  # other valid values, to vary what renders
    "profile": ["nd-h100-v5"], "name": ["train-01"], "resource_group": ["rg.(a)_b"], "location": ["westus2"],
    "image": ["microsoft-dsvm:ubuntu-hpc:2204:latest"], "admin_username": ["hpc_admin"], "zone": ["3"],
    "ssh_source": ["*"], "security_type": ["standard"], "nodes": ["1"], "max_price": ["-1"],
}
HOSTILE = {
    **{k: ANY_TEXT for k in ("name", "resource_group", "location", "image", "admin_username", "zone",
                             "vnet_address_prefix", "ssh_source", "security_type", "size")},
    "ssh_key": st.builds(lambda c: f"{SSH_KEY} {c}", ANY_TEXT),
    "subnet_id": st.builds(lambda a, b: f"/subscriptions/0/resourceGroups/{a}/providers/Microsoft.Network/"
                                        f"virtualNetworks/{b}/subnets/s", ANY_TEXT, ANY_TEXT),
    "nodes": st.text(alphabet=string.digits + "_-+. \u0661e", max_size=6),
    "max_price": st.text(alphabet=string.digits + "_-+. e", max_size=6),
    "max_ib_domain": st.text(alphabet=string.digits + "_-+. ", max_size=4),
}


@st.composite
def requests(draw) -> dict:
    """A valid request with one or two fields replaced by arbitrary text, and arbitrary tags."""
    values = {k: draw(st.sampled_from([v, *SAMPLES.get(k, [])])) for k, v in VALID.items()}
    for name in draw(st.sets(st.sampled_from(sorted(HOSTILE)), max_size=2)):
        values[name] = draw(HOSTILE[name])
    if "subnet_id" in values:
        values.pop("vnet_address_prefix")
    names = PRINTABLE.map(lambda t: "".join(c for c in t if c not in "<>%&\\?/")).filter(str.strip)
    tags = st.one_of(st.dictionaries(names, PRINTABLE, max_size=5), st.dictionaries(ANY_TEXT, ANY_TEXT, max_size=3))
    values["tags"] = draw(tags)
    return values


def _check(values: dict) -> bool:
    """The property for one request; True when it rendered (False: refused with findings)."""
    request = azgpu.build_request({k: v for k, v in values.items() if v is not None})
    try:
        spec = azgpu.validate(request, command="render")
    except azgpu.ValidationFailed as exc:
        assert exc.errors and all(f.code.isupper() and f.remedy for f in exc.errors)
        return False
    plan = azgpu.build_plan(spec)
    arm = json.loads(to_json(render_arm(plan)))
    allowed = expressions(plan)
    for text in strings(arm):
        if text.startswith("[") and text.endswith("]") and not text.startswith("[["):
            assert text in allowed, f"unintended ARM expression {text!r}"
    assert arm_model(arm)["resources"] and all(res["body"]["tags"] == plan.tags
                                               for res in arm_model(arm)["resources"].values())
    assert arm_model(arm) == bicep_model(render_bicep(plan))
    params = {k: v["value"] for k, v in render_arm_parameters(plan)["parameters"].items()}
    assert bicepparam_values(render_bicepparam(plan)) == params
    return True


@settings(max_examples=150, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(values=requests())
def test_arbitrary_text_in_every_field_never_injects_and_bicep_reads_the_same_values(values):
    event("rendered" if _check(values) else "refused")


def test_the_property_holds_for_hostile_text_that_renders():
    """The property above is only as good as its rendered cases: this one must render, and hold."""
    assert _check({"profile": "nd-a100-v4", "name": "demo", "ssh_key": SSH_KEY + " it's ${x} [y] '''",
                   "tags": {"[resourceGroup().name]": "[parameters('x')]", "true": "'; }", "${x}": "[[y]",
                            "null": "\\", 'e "q"': "[concat('a')]"}})
