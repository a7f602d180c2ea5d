"""Plan -> ARM JSON template, built as data and serialized (never through a text template)."""

from __future__ import annotations

import json
from typing import Any

from ..expr import EXPR_TYPES, walk
from ..plan import Plan

SCHEMA = "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#"
PARAMS_SCHEMA = "https://schema.management.azure.com/schemas/2019-04-01/deploymentParameters.json#"
ARM_TYPES = {"string": "string", "int": "int", "bool": "bool", "array": "array", "object": "object"}


def _literal(value: Any) -> Any:
    """Escape literal strings ARM would evaluate: '[x]' is an expression, '[[x]' the text '[x]'.

    Property names too: ARM evaluates an expression used as a property name (a tag name taken from a
    parameter, as Microsoft Learn's tag-resources page does), so a tag named '[resourceGroup().name]'
    would otherwise become the group's name.
    """
    if isinstance(value, str) and value.startswith("[") and value.endswith("]"):
        return "[" + value
    if isinstance(value, dict):
        return {_literal(k): _literal(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_literal(v) for v in value]
    return value


def arm_value(value: Any) -> Any:
    """A property tree with every expression as an ARM template expression string."""
    return walk(_literal(value), lambda e: f"[{e.arm()}]")


def resource_json(plan: Plan, resource) -> dict[str, Any]:
    out: dict[str, Any] = {"type": resource.type, "apiVersion": resource.api_version, "name": resource.name}
    out |= arm_value(resource.body)
    deps = [plan.resource(k) for k in resource.depends_on]
    if deps:
        out["dependsOn"] = [f"[resourceId('{d.type}', '{d.name}')]" for d in deps]
    return out


def render_arm(plan: Plan) -> dict[str, Any]:
    """The deployment template as a dict (json.dumps it, or use to_json)."""
    parameters = {}
    for p in plan.parameters:
        entry: dict[str, Any] = {"type": "securestring" if p.secure else ARM_TYPES[p.type]}
        if p.default is not None:
            entry["defaultValue"] = f"[{p.default.arm()}]" if isinstance(p.default, EXPR_TYPES) else p.default
        entry["metadata"] = {"description": p.description}
        parameters[p.name] = entry
    return {
        "$schema": SCHEMA,
        "contentVersion": "1.0.0.0",
        "metadata": {
            "generator": {"name": "azgpu", "profile": plan.spec.profile.id, "size": plan.spec.size.name},
            "description": f"{plan.spec.nodes} x {plan.spec.size.name} ({plan.spec.profile.series}) cluster "
                           f"'{plan.spec.names.cluster}'",
        },
        "parameters": parameters,
        "resources": [resource_json(plan, r) for r in plan.resources],
        "outputs": {o.name: {"type": o.type, "value": arm_value(o.value)} for o in plan.outputs},
    }


def render_arm_parameters(plan: Plan) -> dict[str, Any]:
    """main.parameters.json: the values this request gave. A secure value (customData) is written here, the
    file the user keeps, and never into the template, its outputs or azgpu's own output."""
    values = {p.name: {"value": p.value} for p in plan.parameters if p.value is not None}
    return {"$schema": PARAMS_SCHEMA, "contentVersion": "1.0.0.0", "parameters": values}


def to_json(document: dict[str, Any]) -> str:
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"
