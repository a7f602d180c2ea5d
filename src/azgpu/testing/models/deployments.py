"""Deployments - Validate and Deployments - What If, as ARM runs them on a template: nothing is written.

Shapes follow the REST specification's examples (resources, deployments 2025-04-01:
PostDeploymentValidateOnResourceGroup.json, PostDeploymentWhatIfOnResourceGroup.json, and the
subscription-scope ones): validate answers 200 with `validatedResources`, or 400
InvalidTemplateDeployment whose details carry the preflight errors (PreflightValidationCheckFailed
-> the resource's own error with `target`); what-if answers 202 with a Location, which answers 200
with `{"status", "properties": {"changes": [...]}}` once done.

What this fake's preflight knows is what a test or `--simulate` seeded: Azure Policy assignments
that deny sizes (`RequestDisallowedByPolicy`, in the shape Learn shows for a Deny effect) and
properties Azure rejects (`fake.reject_property`). A template's resources are taken literally;
azgpu sends them resolved, so the only expressions are `dependsOn`'s, which order nothing here.
"""

from __future__ import annotations

import copy
import hashlib
import json
from typing import Any

from ..errors import ArmError
from ..store import stable_uuid
from . import network

VALIDATE_ACTION = "Microsoft.Resources/deployments/validate/action"
WHATIF_ACTION = "Microsoft.Resources/deployments/whatIf/action"
DEPLOYMENT_TYPE = "Microsoft.Resources/deployments"
GROUP_TYPE = "Microsoft.Resources/resourceGroups"
VMSS_TYPE = "Microsoft.Compute/virtualMachineScaleSets"
# Read-only properties a GET returns and a template never sets: what-if leaves them out of the delta
# (ARM's what-if knows them from the provider's schema).
READ_ONLY = frozenset({"provisioningState", "resourceGuid", "etag", "uniqueId", "timeCreated", "ipConfigurations",
                       "id", "type", "defaultSecurityRules", "subnets", "purpose"})
# Per type: read-only back-references and the defaults the service fills in (what-if compares with
# the provider's schema, where these are known as such).
READ_ONLY_PATHS = {
    "microsoft.network/publicipaddresses": {"properties.ipAddress", "properties.natGateway",
                                            "properties.ipConfiguration", "properties.idleTimeoutInMinutes"},
}


def _literal(value: Any) -> Any:
    """ARM's escape: a string starting '[[' is the literal text starting '['."""
    if isinstance(value, str) and value.startswith("[["):
        return value[1:]
    if isinstance(value, dict):
        return {k: _literal(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_literal(v) for v in value]
    return value


def _resource_id(sub: str, rg: str, resource: dict) -> str:
    provider, *types = resource["type"].split("/")
    names = str(resource["name"]).split("/")
    path = "/".join(f"{t}/{n}" for t, n in zip(types, names, strict=False))
    return f"/subscriptions/{sub}/resourceGroups/{rg}/providers/{provider}/{path}"


def expand(sub: str, rg: str | None, template: dict) -> list[tuple[str, dict]]:
    """(resource group, resource) for every resource the template deploys, nested deployments opened.

    A subscription-scope template creates groups (Microsoft.Resources/resourceGroups) and deploys into
    them with nested deployments whose `resourceGroup` names the target, as Learn's "Create resource
    groups and resources" shows."""
    out: list[tuple[str, dict]] = []
    for resource in (template or {}).get("resources") or []:
        if not isinstance(resource, dict) or "type" not in resource:
            raise ArmError(400, "InvalidTemplate", "Deployment template validation failed: a resource has no type.")
        kind = resource["type"].lower()
        if kind == DEPLOYMENT_TYPE.lower():
            target = resource.get("resourceGroup") or rg
            inner = (resource.get("properties") or {}).get("template") or {}
            out += expand(sub, target, inner)
        elif kind == GROUP_TYPE.lower():
            out.append((resource["name"], _literal(resource)))
        elif rg is None:
            raise ArmError(400, "InvalidTemplate", f"The resource '{resource['type']}/{resource['name']}' needs a "
                                                   "resource group: deploy it in a nested deployment.")
        else:
            out.append((rg, _literal(resource)))
    return out


# ------------------------------------------------------------------------------------ preflight


def policy_denial(store, sub: str, rg: str, resource: dict) -> dict | None:
    """The RequestDisallowedByPolicy error a seeded assignment raises for this resource, if any."""
    if resource["type"].lower() != VMSS_TYPE.lower():
        return None
    size = ((resource.get("sku") or {}).get("name") or "")
    for policy in store.policies:
        if size.lower() not in {s.lower() for s in policy["denied_sizes"]}:
            continue
        scope = policy.get("scope") or f"/subscriptions/{sub}"
        if "/resourcegroups/" in scope.lower() and not scope.lower().endswith(f"/resourcegroups/{rg.lower()}"):
            continue
        assignment_id = f"{scope}/providers/Microsoft.Authorization/policyAssignments/{policy['name']}"
        definition_id = (f"/subscriptions/{sub}/providers/Microsoft.Authorization/policyDefinitions/"
                         f"{stable_uuid('policy', policy['name'])}")
        identifiers = [{"policyAssignment": {"name": policy["display_name"], "id": assignment_id},
                        "policyDefinition": {"name": "Allowed virtual machine size SKUs", "id": definition_id}}]
        return {
            "code": "RequestDisallowedByPolicy",
            "target": resource["name"],
            "message": f"Resource '{resource['name']}' was disallowed by policy. Policy identifiers: "
                       f"'{json.dumps(identifiers, separators=(',', ':'))}'.",
            "additionalInfo": [{"type": "PolicyViolation", "info": {
                "policyDefinitionDisplayName": "Allowed virtual machine size SKUs",
                "policyDefinitionId": definition_id,
                "policyDefinitionEffect": "Deny",
                "policyAssignmentId": assignment_id,
                "policyAssignmentName": policy["name"],
                "policyAssignmentDisplayName": policy["display_name"],
                "policyAssignmentScope": scope,
                "policyAssignmentParameters": {},
            }}],
        }
    return None


def _at(body: Any, path: str) -> tuple[bool, Any]:
    node = body
    for step in path.split("."):
        if not isinstance(node, dict) or step not in node:
            return False, None
        node = node[step]
    return True, node


def rejected_property(store, resource: dict) -> dict | None:
    """The error of a seeded rejection (fake.reject_property) this resource's body triggers."""
    for rule in store.rejections:
        if rule["type"].lower() != resource["type"].lower():
            continue
        present, _ = _at(resource, rule["path"])
        if present:
            return {"code": rule["code"], "target": rule["path"].rsplit(".", 1)[-1],
                    "message": rule["message"].format(name=resource["name"], path=rule["path"])}
    return None


def validate(backend, sub: str, rg: str | None, name: str, body: dict) -> dict:
    """The validate answer's body, or ArmError 400 InvalidTemplateDeployment with the preflight errors."""
    props = (body or {}).get("properties") or {}
    if "template" not in props:
        raise ArmError(400, "InvalidRequestContent",
                       "The request content was invalid: 'properties.template' is required "
                                                     "(templateLink is not supported here).")
    resources = expand(sub, rg, props["template"])
    errors = []
    for group, resource in resources:
        if resource["type"].lower() == GROUP_TYPE.lower():
            continue
        for error in (rejected_property(backend.store, resource), policy_denial(backend.store, sub, group, resource)):
            if error is not None:
                errors.append(error)
    tracking = stable_uuid("validate", name, backend.store.next_number())
    if errors:
        # A policy denial is the error itself; other preflight errors come under PreflightValidationCheckFailed.
        policy = [e for e in errors if e["code"] == "RequestDisallowedByPolicy"]
        details = policy or [{"code": "PreflightValidationCheckFailed",
                              "message": "Preflight validation failed. Please refer "
                                         "to the details for the specific errors.",
                              "details": errors}]
        raise ArmError(400, "InvalidTemplateDeployment",
                       f"The template deployment '{name}' is not valid according to the validation procedure. The "
                       f"tracking id is '{tracking}'. See inner errors for details.", details=details)
    scope = f"/subscriptions/{sub}" + (f"/resourceGroups/{rg}" if rg else "")
    return {
        "id": f"{scope}/providers/{DEPLOYMENT_TYPE}/{name}",
        "name": name,
        "type": DEPLOYMENT_TYPE,
        "properties": {
            "templateHash": str(int(hashlib.sha256(json.dumps(props["template"], sort_keys=True).encode())
                                    .hexdigest(), 16) % 10 ** 19),
            "parameters": props.get("parameters") or {},
            "mode": props.get("mode", "Incremental"),
            "provisioningState": "Succeeded",
            "correlationId": tracking,
            "validatedResources": [{"id": _resource_id(sub, g, r) if r["type"].lower() != GROUP_TYPE.lower()
                                    else f"/subscriptions/{sub}/resourceGroups/{r['name']}"} for g, r in resources],
        },
    }


# ------------------------------------------------------------------------------------ what-if


def _delta(before: Any, after: Any, path: str = "", skip: frozenset | set = frozenset()) -> list[dict]:
    """WhatIfPropertyChange entries: Create, Delete, Modify, and Array with children by index."""
    if isinstance(after, dict) and isinstance(before, dict):
        out = []
        for k in sorted(set(before) | set(after)):
            where = f"{path}.{k}" if path else k
            if (k in READ_ONLY or where in skip) and k not in after:
                continue
            if k not in before:
                out.append({"path": where, "propertyChangeType": "Create", "after": after[k]})
            elif k not in after:
                out.append({"path": where, "propertyChangeType": "Delete", "before": before[k]})
            else:
                out += _delta(before[k], after[k], where, skip)
        return out
    if isinstance(after, list) and isinstance(before, list):
        children = []
        for i in range(max(len(before), len(after))):
            if i >= len(before):
                children.append({"path": str(i), "propertyChangeType": "Create", "after": after[i]})
            elif i >= len(after):
                children.append({"path": str(i), "propertyChangeType": "Delete", "before": before[i]})
            else:
                inner = _delta(before[i], after[i])
                if inner:
                    children.append({"path": str(i), "propertyChangeType": "Modify", "children": inner})
        return [{"path": path, "propertyChangeType": "Array", "children": children}] if children else []
    if _same(before, after):
        return []
    return [{"path": path, "propertyChangeType": "Modify", "before": before, "after": after}]


def _same(before: Any, after: Any) -> bool:
    if isinstance(before, str) and isinstance(after, str):
        return before.lower() == after.lower() if before.startswith("/subscriptions/") else before == after
    return before == after


def _payload(resource: dict, api_version: str | None) -> dict:
    out = {k: copy.deepcopy(v) for k, v in resource.items() if k not in ("dependsOn", "apiVersion", "comments")}
    if api_version:
        out = {"apiVersion": api_version, **out}
    return out


def _live(backend, resource_id: str) -> dict | None:
    found = backend.find(resource_id)
    if found is None:
        return None
    return network.shown(backend,
                         found) if found["type"].lower().startswith("microsoft.network/") else copy.deepcopy(found)


def what_if(backend, sub: str, rg: str | None, name: str, body: dict) -> dict:
    """The what-if result: each template resource's change, and Ignore for what the groups hold besides."""
    props = (body or {}).get("properties") or {}
    if "template" not in props:
        raise ArmError(400, "InvalidRequestContent",
                       "The request content was invalid: 'properties.template' is required.")
    resources = expand(sub, rg, props["template"])
    changes, seen, groups = [], set(), set()
    for group, resource in resources:
        if resource["type"].lower() == GROUP_TYPE.lower():
            rid = f"/subscriptions/{sub}/resourceGroups/{resource['name']}"
            live = backend.store.get(rid)
            changes.append({"resourceId": rid, "changeType": "NoChange" if live else "Create",
                            **({"before": copy.deepcopy(live)} if live else {}), "after": _payload(resource, None)})
            seen.add(rid.lower())
            continue
        groups.add(group.lower())
        rid = _resource_id(sub, group, resource)
        seen.add(rid.lower())
        after = {"id": rid, **_payload(resource, resource.get("apiVersion"))}
        live = _live(backend, rid)
        if live is None:
            changes.append({"resourceId": rid, "changeType": "Create", "after": after})
            continue
        before = {"apiVersion": resource.get("apiVersion"), **live}
        delta = _delta(before, after, skip=READ_ONLY_PATHS.get(resource["type"].lower(), set()))
        changes.append({"resourceId": rid, "changeType": "Modify" if delta else "NoChange", "before": before,
                        "after": after, **({"delta": delta} if delta else {})})
    for group in sorted(groups):
        for existing in backend.top_level(group):
            if existing["id"].lower() not in seen:
                # Incremental mode leaves what the template does not name as it is.
                changes.append({"resourceId": existing["id"], "changeType": "Ignore"})
    return {"status": "Succeeded", "properties": {"changes": changes}}
