"""ARM JSON and Bicep declare the same deployment.

main.bicep is parsed back with pycep-parser (no Bicep compiler can be installed here), both
sides are brought to one canonical form, and the whole trees are compared: resources (type,
apiVersion, name, every property, dependencies), parameters (type, default, description,
@secure) and outputs.

Canonical form of a value:
  literal text        -> str (ARM '[[x]' and Bicep escapes undone)
  number              -> ("num", n)            (so True is never mistaken for 1)
  parameter           -> ("param", name)       ARM [parameters('x')]      Bicep x
  resource ID         -> ("rid", type, *names) ARM [resourceId('T', ...)] Bicep nsg.id,
                                                vnet.properties.subnets[0].id
  interpolation       -> ("format", template, *args)  ARM [format('/home/{0}', ...)]
                                                      Bicep '/home/${adminUsername}'
  resource group loc. -> ("rgloc",)            ARM [resourceGroup().location]  Bicep the same
  Bicep variables (tags) are replaced by their value; json('2.5') is the number 2.5.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from pycep import BicepParser
from pycep.models import BicepElement

from azgpu.render.arm import render_arm
from azgpu.render.bicep import render_bicep

GOLDEN = Path(__file__).resolve().parent / "golden"
PROFILES = sorted(p.name for p in GOLDEN.iterdir() if (p / "cluster.toml").is_file())


# ------------------------------------------------------------------------------ ARM side


TOKEN = re.compile(r"\s*(?:(?P<str>'(?:[^']|'')*')|(?P<num>-?\d+(?:\.\d+)?)|(?P<name>[A-Za-z_][A-Za-z0-9_]*)"
                   r"|(?P<punct>[(),.\[\]]))")


def arm_expression(text: str) -> Any:
    """Parse the inside of an ARM '[...]' expression: calls, string/number literals, .property."""
    tokens, pos = [], 0
    while pos < len(text):
        m = TOKEN.match(text, pos)
        assert m and m.end() > pos, f"cannot tokenize ARM expression {text!r} at {pos}"
        kind = m.lastgroup
        value = m.group(kind)
        tokens.append((kind, value))
        pos = m.end()
        while pos < len(text) and text[pos].isspace():
            pos += 1
    index = 0

    def peek():
        return tokens[index] if index < len(tokens) else (None, None)

    def take(expected=None):
        nonlocal index
        tok = tokens[index]
        assert expected is None or tok[1] == expected, f"expected {expected!r} in {text!r}, got {tok}"
        index += 1
        return tok

    def primary():
        kind, value = take()
        if kind == "str":
            node: Any = value[1:-1].replace("''", "'")
        elif kind == "num":
            node = ("num", float(value) if "." in value else int(value))
        elif kind == "name":
            take("(")
            args = []
            while peek()[1] != ")":
                args.append(primary())
                if peek()[1] == ",":
                    take(",")
            take(")")
            node = ("call", value, *args)
        else:
            raise AssertionError(f"unexpected {value!r} in ARM expression {text!r}")
        while peek()[1] == ".":
            take(".")
            node = ("prop", node, take()[1])
        return node

    node = primary()
    assert index == len(tokens), f"trailing tokens in ARM expression {text!r}"
    return canonical_call(node)


def canonical_call(node: Any) -> Any:
    if not isinstance(node, tuple) or node[0] == "num":
        return node
    if node[0] == "prop":
        inner = node[1]
        if inner == ("call", "resourceGroup") and node[2] == "location":
            return ("rgloc",)
        return ("prop", canonical_call(inner), node[2])
    _, name, *args = node
    args = [canonical_call(a) for a in args]
    if name == "parameters":
        return ("param", *args)
    if name == "resourceId":
        return ("rid", *args)
    if name == "format":
        return ("format", *args)
    if name == "json" and len(args) == 1:
        return ("num", json.loads(args[0]))
    return ("call", name, *args)


def arm_canonical(value: Any) -> Any:
    if isinstance(value, str):
        # ARM's ExpressionParser: only a string that starts with '[' and ends with ']' is read as
        # code; of those, '[[...]' is the literal text without its first bracket. '[[' alone is text.
        if value.startswith("[") and value.endswith("]"):
            return value[1:] if value.startswith("[[") else arm_expression(value[1:-1])
        return value
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, (int, float)):
        return ("num", value)
    if isinstance(value, dict):
        return {arm_key(k): arm_canonical(v) for k, v in value.items()}
    if isinstance(value, list):
        return [arm_canonical(v) for v in value]
    raise AssertionError(f"unexpected ARM value {value!r}")


def arm_key(name: str) -> Any:
    """A property name as ARM reads it: ARM evaluates an expression in a property name too, so an
    unescaped '[x]' name is an expression (never equal to Bicep's text), '[[x]' the text '[x]'."""
    canonical = arm_canonical(name)
    return canonical if isinstance(canonical, str) else ("expression as property name", canonical)


def arm_model(template: dict) -> dict:
    resources = {}
    for res in template["resources"]:
        key = (res["type"], res["apiVersion"], res["name"])
        assert key not in resources, f"duplicate resource {key}"
        body = {k: arm_canonical(v) for k, v in res.items() if k not in ("type", "apiVersion", "name", "dependsOn")}
        deps = {arm_canonical(d) for d in res.get("dependsOn", [])}
        resources[key] = {"body": body, "depends_on": deps}
    parameters = {}
    for name, p in template["parameters"].items():
        kind = p["type"].lower()
        parameters[name] = {
            "type": "string" if kind == "securestring" else "object" if kind == "secureobject" else kind,
            "secure": kind.startswith("secure"),
            "default": arm_canonical(p["defaultValue"]) if "defaultValue" in p else None,
            "description": p.get("metadata", {}).get("description"),
        }
    outputs = {name: {"type": o["type"].lower(), "value": arm_canonical(o["value"])}
               for name, o in template.get("outputs", {}).items()}
    return {"resources": resources, "parameters": parameters, "outputs": outputs}


# ------------------------------------------------------------------------------ Bicep side


ESCAPES = {"\\": "\\", "'": "'", "n": "\n", "r": "\r", "t": "\t", "$": "$"}


def bicep_text(raw: str) -> tuple[str, list[str]]:
    """A Bicep string body as pycep leaves it (escapes intact) -> (format template, interpolated exprs)."""
    out, exprs, i = [], [], 0
    while i < len(raw):
        ch = raw[i]
        if ch == "\\":
            nxt = raw[i + 1]
            if nxt == "u":  # \u{XXXX}
                end = raw.index("}", i)
                out.append(chr(int(raw[i + 3:end], 16)))
                i = end + 1
                continue
            assert nxt in ESCAPES, f"unknown Bicep escape \\{nxt} in {raw!r}"
            out.append(ESCAPES[nxt])
            i += 2
        elif raw.startswith("${", i):
            end = raw.index("}", i)
            out.append("{" + str(len(exprs)) + "}")
            exprs.append(raw[i + 2:end].strip())
            i = end + 1
        else:
            out.append(ch)
            i += 1
    return "".join(out), exprs


class BicepModel:
    def __init__(self, parsed: dict):
        self.parsed = parsed
        self.params = parsed.get("parameters", {})
        self.variables = parsed.get("variables", {})
        self.resources = parsed.get("resources", {})
        self.refs: set[str] = set()  # resource symbols referenced by the value being canonicalised

    def identifier(self, name: str) -> Any:
        if name in self.params:
            return ("param", name)
        if name in self.variables:
            return self.value(self.variables[name]["value"])
        raise AssertionError(f"Bicep identifier {name!r} is neither a parameter nor a variable")

    def resource_name(self, symbol: str) -> str:
        return self.value(self.resources[symbol]["config"]["name"])

    def path(self, node: Any) -> list:
        """Flatten pycep's right-nested property/index accessors into [head, seg, seg, ...]."""
        if isinstance(node, dict) and "operator" in node:
            op = node["operator"]
            a, b = op["operands"]["operand_1"], op["operands"]["operand_2"]
            if op["type"] == "property_accessor":
                return self.path(a) + self.path(b)
            if op["type"] == "index_accessor":
                return self.path(a) + [b]
            raise AssertionError(f"unexpected operator {op['type']} in an accessor")
        if isinstance(node, dict) and "function" in node:
            return [("fn", node["function"]["type"])]
        return [node]

    def accessor(self, node: dict) -> Any:
        head, *rest = self.path(node)
        if head == ("fn", "resource_group") and rest == ["location"]:
            return ("rgloc",)
        if isinstance(head, BicepElement) and head in self.resources:
            res = self.resources[head]
            self.refs.add(str(head))
            if rest == ["id"]:
                return ("rid", res["type"], self.resource_name(head))
            # symbol.properties.<collection>[i].id: the ID of an inline child resource.
            if len(rest) == 4 and rest[0] == "properties" and isinstance(rest[2], int) and rest[3] == "id":
                child = res["config"]["properties"][rest[1]][rest[2]]
                return ("rid", f"{res['type']}/{rest[1]}", self.resource_name(head), self.value(child["name"]))
        raise AssertionError(f"unsupported Bicep accessor {[head, *rest]}")

    def value(self, node: Any) -> Any:
        if isinstance(node, BicepElement):
            if node in self.resources:
                raise AssertionError(f"bare resource reference {node!r}")
            return self.identifier(str(node))
        if isinstance(node, str):
            template, exprs = bicep_text(node)
            if not exprs:
                return template
            return ("format", template, *(self.identifier(e) for e in exprs))
        if isinstance(node, bool) or node is None:
            return node
        if isinstance(node, int):
            return ("num", node)
        if isinstance(node, list):
            return [self.value(v) for v in node]
        if isinstance(node, dict):
            if "operator" in node:
                op = node["operator"]
                if op["type"] == "minus":
                    number = self.value(op["operands"]["integer_value"])
                    return ("num", -number[1])
                return self.accessor(node)
            if "function" in node:
                fn = node["function"]
                if fn["type"] == "json":
                    return ("num", json.loads(self.value(fn["parameters"]["arg_1"])))
                if fn["type"] == "base64":  # osProfile.customData from its secure parameter
                    return ("call", "base64", self.value(fn["parameters"]["input_string"]))
                raise AssertionError(f"unsupported Bicep function {fn['type']}")
            return {self.key(k): self.value(v) for k, v in node.items()}
        raise AssertionError(f"unexpected Bicep value {node!r}")

    @staticmethod
    def key(raw: str) -> str:
        if raw.startswith("'") and raw.endswith("'"):
            text, exprs = bicep_text(raw[1:-1])
            assert not exprs, f"interpolated key {raw!r}"
            return text
        return raw

    def model(self) -> dict:
        resources = {}
        for symbol, res in self.resources.items():
            assert not res["existing"] and not res["decorators"], symbol
            config = dict(res["config"])
            name = self.value(config.pop("name"))
            self.refs = set()
            body = {self.key(k): self.value(v) for k, v in config.items()}
            deps = {("rid", self.resources[s]["type"], self.resource_name(s)) for s in self.refs - {symbol}}
            resources[(res["type"], res["api_version"], name)] = {"body": body, "depends_on": deps}
        parameters = {}
        for name, p in self.params.items():
            decorators = {d["type"]: d.get("argument") for d in p["decorators"]}
            assert set(decorators) <= {"description", "secure"}, decorators
            parameters[name] = {
                "type": p["type"],
                "secure": "secure" in decorators,
                "default": self.value(p["default"]) if p["default"] is not None else None,
                "description": bicep_text(decorators["description"])[0] if "description" in decorators else None,
            }
        outputs = {}
        for name, o in self.parsed.get("outputs", {}).items():
            self.refs = set()
            outputs[name] = {"type": o["type"], "value": self.value(o["value"])}
        return {"resources": resources, "parameters": parameters, "outputs": outputs}


def pycep_readable(text: str) -> str:
    """The same Bicep, spelled so that pycep lexes it: its string token lets an escaped backslash
    before the closing quote ('\\\\') escape the quote, and reads '\\${' as the start of an
    interpolation; \\u{5C} and \\u{24} are the same characters in Bicep and lex right."""
    return re.sub(r"\\([\\$])", lambda m: "\\u{" + format(ord(m.group(1)), "X") + "}", text)


def bicep_model(text: str) -> dict:
    return BicepModel(BicepParser().parse(text=pycep_readable(text))).model()


# ------------------------------------------------------------------------------ the normaliser itself


def test_arm_expressions_normalise():
    assert arm_canonical("[parameters('location')]") == ("param", "location")
    assert arm_canonical("[resourceId('Microsoft.Network/virtualNetworks/subnets', 'v', 's')]") == (
        "rid", "Microsoft.Network/virtualNetworks/subnets", "v", "s")
    assert arm_canonical("[format('/home/{0}/x', parameters('u'))]") == ("format", "/home/{0}/x", ("param", "u"))
    assert arm_canonical("[resourceGroup().location]") == ("rgloc",)
    assert arm_canonical("[[literal]") == "[literal]"
    assert arm_canonical("it''s") == "it''s"
    assert arm_canonical(True) is True and arm_canonical(1) == ("num", 1)


def test_bicep_expressions_normalise():
    text = (
        "param adminUsername string = 'azureuser'\n"
        "var tags = {\n  'a-b': 'it\\'s'\n}\n"
        "resource vnet 'Microsoft.Network/virtualNetworks@2026-03-01' = {\n  name: 'v'\n  tags: tags\n"
        "  properties: {\n    subnets: [\n      {\n        name: 's'\n      }\n    ]\n  }\n}\n"
        "output o string = vnet.properties.subnets[0].id\n"
        "output p string = '/home/${adminUsername}/x'\n"
        "output q int = -1\n"
        "output r object = {\n  price: json('2.5')\n  loc: resourceGroup().location\n}\n"
    )
    model = bicep_model(text)
    (res,) = model["resources"].values()
    assert res["body"]["tags"] == {"a-b": "it's"}
    assert model["outputs"]["o"]["value"] == ("rid", "Microsoft.Network/virtualNetworks/subnets", "v", "s")
    assert model["outputs"]["p"]["value"] == ("format", "/home/{0}/x", ("param", "adminUsername"))
    assert model["outputs"]["q"]["value"] == ("num", -1)
    assert model["outputs"]["r"]["value"] == {"price": ("num", 2.5), "loc": ("rgloc",)}


def test_the_comparison_notices_an_expression_as_property_name():
    arm = arm_model({"parameters": {}, "resources": [
        {"type": "T", "apiVersion": "1", "name": "n", "tags": {"[resourceGroup().name]": "x"}}]})
    bicep = bicep_model("resource r 'T@1' = {\n  name: 'n'\n  tags: {\n    '[resourceGroup().name]': 'x'\n  }\n}\n")
    assert arm["resources"] != bicep["resources"]
    escaped = arm_model({"parameters": {}, "resources": [
        {"type": "T", "apiVersion": "1", "name": "n", "tags": {"[[resourceGroup().name]": "x"}}]})
    assert escaped["resources"] == bicep["resources"]


def test_the_comparison_notices_a_difference():
    arm = arm_model({"parameters": {}, "resources": [
        {"type": "T", "apiVersion": "1", "name": "n", "properties": {"enabled": True}}]})
    bicep = bicep_model("resource r 'T@1' = {\n  name: 'n'\n  properties: {\n    enabled: false\n  }\n}\n")
    assert arm["resources"].keys() == bicep["resources"].keys()
    assert arm["resources"] != bicep["resources"]


# ------------------------------------------------------------------------------ every profile


@pytest.fixture(scope="module")
def rendered(tmp_path_factory) -> dict[str, tuple[dict, str]]:
    from azgpu.cli import main

    out = {}
    for profile in PROFILES:
        folder = tmp_path_factory.mktemp(profile)
        assert main(["render", "-f", str(GOLDEN / profile / "cluster.toml"), "--out-dir", str(folder), "-o",
                     "none"]) == 0
        out[profile] = (json.loads((folder / "main.json").read_text()), (folder / "main.bicep").read_text())
    return out


@pytest.fixture(scope="module")
def models(rendered) -> dict[str, tuple[dict, dict]]:
    return {p: (arm_model(arm), bicep_model(bicep)) for p, (arm, bicep) in rendered.items()}


@pytest.mark.parametrize("profile", PROFILES)
def test_same_resources(models, profile):
    arm, bicep = models[profile]
    assert list(arm["resources"]) == list(bicep["resources"])


@pytest.mark.parametrize("profile", PROFILES)
def test_same_resource_properties(models, profile):
    arm, bicep = models[profile]
    for key, resource in arm["resources"].items():
        assert resource["body"] == bicep["resources"][key]["body"], key


@pytest.mark.parametrize("profile", PROFILES)
def test_arm_depends_on_what_bicep_references(models, profile):
    arm, bicep = models[profile]
    for key, resource in arm["resources"].items():
        bicep_deps = {("rid", t, n) for (_, t, n, *rest) in bicep["resources"][key]["depends_on"] if not rest}
        assert resource["depends_on"] == bicep_deps, key


@pytest.mark.parametrize("profile", PROFILES)
def test_same_parameters(models, profile):
    arm, bicep = models[profile]
    assert arm["parameters"] == bicep["parameters"]


@pytest.mark.parametrize("profile", PROFILES)
def test_same_outputs(models, profile):
    arm, bicep = models[profile]
    assert arm["outputs"] == bicep["outputs"]


IDENTITY = "/subscriptions/s/resourceGroups/id-rg/providers/Microsoft.ManagedIdentity/userAssignedIdentities/reader"
GALLERY_VERSION = ("/subscriptions/s/resourceGroups/img/providers/Microsoft.Compute/galleries/hpc/images/gb"
                   "/versions/1.2.0")
PPG_ID = "/subscriptions/s/resourceGroups/net/providers/Microsoft.Compute/proximityPlacementGroups/storage-ppg"

VARIANTS = {
    "literal strings that look like expressions or need escapes": dict(
        profile="nd-a100-v4", tags={"note": "[not an expression]", "quote": "it's ${not} a\\path", "unicode": "café"}),
    "tag names that look like expressions, keywords or are not identifiers": dict(
        profile="nd-a100-v4", tags={"[resourceGroup().name]": "x", "[[x]": "y", "true": "t", "null": "n", "a b": "c",
                                    "it's": "q", "${x}": "d", "ü": "u", "k" * 300: "long", "_ok1": "bare"}),
    "whole-number max price": dict(profile="nd-h100-v5", spot=True, max_price=-1.0),
    "cloud-init and extension together": dict(profile="ndv2", image="ubuntu-2204-gen2", nodes=120, max_ib_domain=60),
    "plain image on nd-a100-v4": dict(profile="nd-a100-v4", image="ubuntu-2204-gen2", ephemeral_os_disk=True),
    "marketplace image with a purchase plan": dict(profile="nd-a100-v4", image="almalinux-hpc-8-10"),
    "every custom option": dict(
        profile="nd-h100-v5", nodes=150, image="ubuntu-2204-gen2",
        custom_data="#cloud-config\nruncmd:\n  - [echo, 'it''s']\n",
        assign_identity=True, identity=[IDENTITY], ppg="train-ppg", spot=True, eviction_policy="Deallocate",
        boot_diagnostics=False, zone="1"),
    "gallery image, existing placement group": dict(
        profile="nd-gb300-v6", nodes=36, image=GALLERY_VERSION, identity=[IDENTITY], ppg=PPG_ID),
    "community gallery image": dict(profile="nd-a100-v4", image="/CommunityGalleries/pub-123/Images/hpc"),
    "managed image": dict(profile="nd-a100-v4",
                          image="/subscriptions/s/resourceGroups/img/providers/Microsoft.Compute/images/hpc"),
    "zonal NAT gateway and per-node Standard public IPs": dict(profile="ng", zone="2", public_ip=True,
                                                             ssh_source="203.0.113.7/32"),
    "no outbound: private subnet, no NAT gateway": dict(profile="nd-h100-v5", outbound=False),
    "existing subnet": dict(profile="nd-a100-v4", subnet_id="/subscriptions/0000/resourceGroups/net-rg/providers/"
                                                            "Microsoft.Network/virtualNetworks/hub/subnets/gpu"),
}


@pytest.mark.parametrize("values", VARIANTS.values(), ids=VARIANTS.keys())
def test_variants_are_equivalent(az, values):
    plan = az.plan(**values)
    arm, bicep = arm_model(render_arm(plan)), bicep_model(render_bicep(plan))
    assert arm == bicep
