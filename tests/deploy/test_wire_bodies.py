"""What is reviewed is what is deployed: every PUT body equals the rendered ARM resource, evaluated.

The evaluator below is written from ARM's documentation, independent of azgpu's Resolver: it knows
exactly the forms azgpu's templates use, `[parameters('x')]`, `[resourceId('type', 'name', ...)]`
and `[format('text {0}', ...)]`, and the `[[` escape of a literal string starting with '['.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from deploy_support import ALL_SERIES, LOCATION, RG, calls, request

import azgpu
from azgpu.deploy import create
from azgpu.profiles import load_profile
from azgpu.render.arm import render_arm, render_arm_parameters

TOKEN = re.compile(r"\s*(?:'((?:[^']|'')*)'|([A-Za-z_][A-Za-z0-9_]*)|([(),]))")


class ArmEvaluator:
    def __init__(self, subscription: str, resource_group: str, parameters: dict[str, Any]):
        self.subscription, self.resource_group, self.parameters = subscription, resource_group, parameters

    def value(self, node: Any) -> Any:
        if isinstance(node, dict):
            return {k: self.value(v) for k, v in node.items()}
        if isinstance(node, list):
            return [self.value(v) for v in node]
        if isinstance(node, str) and node.startswith("[[") and node.endswith("]"):
            return node[1:]
        if isinstance(node, str) and node.startswith("[") and node.endswith("]"):
            tokens = self._tokens(node[1:-1])
            result = self._expr(tokens)
            assert not tokens, f"trailing tokens in {node!r}"
            return result
        return node

    @staticmethod
    def _tokens(text: str) -> list[tuple[str, str]]:
        out, pos = [], 0
        while pos < len(text.rstrip()):
            m = TOKEN.match(text, pos)
            assert m and m.end() > pos, f"cannot parse {text[pos:]!r}"
            string, name, punct = m.groups()
            out.append(("str", string.replace("''", "'")) if string is not None else ("name", name) if name
                       else ("p", punct))
            pos = m.end()
        return out

    def _expr(self, tokens: list) -> Any:
        kind, text = tokens.pop(0)
        if kind == "str":
            return text
        assert kind == "name" and tokens.pop(0) == ("p", "("), f"expected a call at {text!r}"
        args = []
        while tokens[0] != ("p", ")"):
            args.append(self._expr(tokens))
            if tokens[0] == ("p", ","):
                tokens.pop(0)
        tokens.pop(0)
        return getattr(self, f"fn_{text}")(*args)

    def fn_parameters(self, name: str) -> Any:
        return self.parameters[name]

    def fn_resourceId(self, type_: str, *names: str) -> str:
        namespace, *types = type_.split("/")
        assert len(types) == len(names), (type_, names)
        path = "/".join(f"{t}/{n}" for t, n in zip(types, names, strict=True))
        return f"/subscriptions/{self.subscription}/resourceGroups/{self.resource_group}/providers/{namespace}/{path}"

    def fn_format(self, template: str, *args: Any) -> str:
        return re.sub(r"\{(\d+)\}", lambda m: str(args[int(m.group(1))]), template)

    def fn_base64(self, text: str) -> str:
        import base64

        return base64.b64encode(text.encode("utf-8")).decode("ascii")


def test_evaluator_knows_the_three_forms_and_the_escape():
    ev = ArmEvaluator("S", "G", {"user": "ann"})
    assert ev.value("[parameters('user')]") == "ann"
    assert ev.value("[format('/home/{0}/.ssh', parameters('user'))]") == "/home/ann/.ssh"
    assert ev.value("[resourceId('Microsoft.Network/virtualNetworks/subnets', 'v', 's')]") == \
        "/subscriptions/S/resourceGroups/G/providers/Microsoft.Network/virtualNetworks/v/subnets/s"
    assert ev.value("[[not an expression]") == "[not an expression]"


def _template_and_puts(azure, session, req: azgpu.Request):
    if req.nodes and req.nodes >= 18:  # a GB rack: 18 x 128 vCPUs, above the fake's default family limit
        family = load_profile(req.profile).size(load_profile(req.profile).default_size).cap("quota_family")
        azure.set_quota(LOCATION, family, limit=req.nodes * 128)
    create(session, req)
    plan = azgpu.build_plan(azgpu.validate(req, command="create"))
    template = render_arm(plan)
    parameters = {k: v["value"] for k, v in render_arm_parameters(plan)["parameters"].items()}
    parameters.setdefault("sshPublicKey", req.ssh_key)
    ev = ArmEvaluator(azure.subscription_id, RG, parameters)
    expected = {}
    for resource in template["resources"]:
        path = (f"/subscriptions/{azure.subscription_id}/resourceGroups/{RG}/providers/{resource['type']}"
                f"/{resource['name']}")
        body = {k: v for k, v in resource.items() if k not in ("type", "apiVersion", "name", "dependsOn")}
        expected[path.lower()] = (resource["apiVersion"], ev.value(body))
    puts = [r for r in calls(azure, "PUT") if "/providers/" in r.path]  # the resource group is not in the template
    return expected, puts


# GB200/GB300 come in whole racks of 18 VMs (NODES_NOT_RACK_MULTIPLE otherwise).
REQUESTS = {p: {"profile": p, **({"nodes": 18} if "gb" in p else {})} for p in ALL_SERIES}
REQUESTS["everything"] = {"profile": "nd-h100-v5", "nodes": 5, "max_ib_domain": 2, "spot": True, "public_ip": True,
                          "ssh_source": "203.0.113.0/24", "data_disks": 2, "zone": "2", "tags": {"team": "ml"},
                          "admin_username": "ops"}


@pytest.mark.parametrize("values", REQUESTS.values(), ids=REQUESTS.keys())
def test_every_put_body_equals_the_rendered_arm_resource(azure, session, values):
    expected, puts = _template_and_puts(azure, session, request(**values))
    assert sorted(r.path.lower() for r in puts) == sorted(expected)  # each template resource PUT once
    for r in puts:
        assert r.body == expected[r.path.lower()][1], r.path


@pytest.mark.parametrize("values", REQUESTS.values(), ids=REQUESTS.keys())
def test_every_put_uses_the_templates_api_version(azure, session, values):
    expected, puts = _template_and_puts(azure, session, request(**values))
    assert puts
    for r in puts:
        assert r.api_version == expected[r.path.lower()][0], r.path


def test_the_only_put_outside_the_template_is_the_resource_group(azure, session):
    create(session, request())
    assert [r.path.lower() for r in calls(azure, "PUT") if "/providers/" not in r.path] == \
        [f"/subscriptions/{azure.subscription_id}/resourcegroups/{RG}"]


def test_wire_body_of_a_scale_set_has_expressions_resolved(azure, session):
    _, puts = _template_and_puts(azure, session, request(admin_username="ops"))
    body = next(r.body for r in puts if "virtualMachineScaleSets" in r.path)
    profile = body["properties"]["virtualMachineProfile"]
    assert body["location"] == LOCATION
    ssh = profile["osProfile"]["linuxConfiguration"]["ssh"]
    assert ssh["publicKeys"][0]["path"] == "/home/ops/.ssh/authorized_keys"
    subnet = profile["networkProfile"]["networkInterfaceConfigurations"][0]["properties"]["ipConfigurations"][0][
        "properties"]["subnet"]["id"]
    assert subnet.endswith(f"/resourceGroups/{RG}/providers/Microsoft.Network/virtualNetworks/c1-vnet/subnets/compute")
    assert not [s for s in _strings(body) if s.startswith("[")]  # no unevaluated ARM expression on the wire


def _strings(node: Any):
    if isinstance(node, dict):
        node = list(node.values())
    if isinstance(node, list):
        for item in node:
            yield from _strings(item)
    elif isinstance(node, str):
        yield node
