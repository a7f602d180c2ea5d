"""Azure's own preflight of exactly what azgpu is about to deploy: Deployments - Validate and What If.

Both take a template and write nothing (REST specification, resources deployments 2025-04-01,
Deployments_Validate / Deployments_WhatIf and their AtSubscriptionScope forms). The template holds
the deployer's own bodies, resolved, so ARM judges the very requests azgpu would send: property
and type checks, api-version support, Azure Policy with deny effects. A group that does not exist
yet cannot be a deployment's scope, so then both run at subscription scope with the group and a
nested deployment into it, as Learn's "Create resource groups and resources" does.

azure-mgmt-resource 26 no longer carries the Deployments operations (they moved to
azure-mgmt-resource-deployments, which needs azure-mgmt-core 1.6), so the two POSTs go through the
resources client's own ARM pipeline (credential, retries, throttling) as the REST spec defines them,
and their 202 answers are followed by Location as ARM's asynchronous pattern says.
"""

from __future__ import annotations

from typing import Any

from ..errors import AzureError
from ..render.arm import SCHEMA, arm_value
from ..resource_types import DEPLOYMENT, RESOURCE_GROUP
from .azure_errors import AuthError, translate

API_VERSION = DEPLOYMENT.api_version  # deployments (validate, whatIf)
SUBSCRIPTION_SCHEMA = "https://schema.management.azure.com/schemas/2018-05-01/subscriptionDeploymentTemplate.json#"
VALIDATE_ACTION = DEPLOYMENT.action("validate/action")
WHATIF_ACTION = DEPLOYMENT.action("whatIf/action")
SKIP_REMEDY = (f"ask for a role that grants {DEPLOYMENT.action('*')} on the resource group or subscription "
               "(Contributor does), or pass --no-arm-validate to skip Azure's template validation and what-if")
POLLS = 120  # at most this many status reads of one what-if (ARM answers within seconds to minutes)


def deployment_name(cluster: str) -> str:
    return f"azgpu-{cluster}"[:64]


def _template(deployer) -> dict[str, Any]:
    plan = deployer.plan
    resources = []
    for r in plan.resources:
        entry: dict[str, Any] = {"type": r.type, "apiVersion": r.api_version, "name": r.name}
        entry |= arm_value(deployer.body(r))
        deps = [plan.resource(k) for k in r.depends_on]
        if deps:
            entry["dependsOn"] = [f"[resourceId('{d.type}', '{d.name}')]" for d in deps]
        resources.append(entry)
    return {"$schema": SCHEMA, "contentVersion": "1.0.0.0", "resources": resources}


def request(deployer, *, group_exists: bool, location: str) -> tuple[str, dict[str, Any]]:
    """(path of the deployment, its body) for the cluster's template at the right scope."""
    sub, rg = deployer.session.subscription_id, deployer.resource_group
    name = deployment_name(deployer.cluster)
    inner = _template(deployer)
    if group_exists:
        return (f"/subscriptions/{sub}/resourceGroups/{rg}{DEPLOYMENT.provider_path(name)}",
                {"properties": {"template": inner, "parameters": {}, "mode": "Incremental"}})
    template = {"$schema": SUBSCRIPTION_SCHEMA, "contentVersion": "1.0.0.0", "resources": [
        {"type": RESOURCE_GROUP.type, "apiVersion": RESOURCE_GROUP.api_version, "name": rg, "location": location},
        {"type": DEPLOYMENT.type, "apiVersion": DEPLOYMENT.api_version, "name": name, "resourceGroup": rg,
         "dependsOn": [f"[resourceId('{RESOURCE_GROUP.type}', '{rg}')]"],
         # Inner scope: the nested template's own expressions (its dependsOn) resolve in the group, not here.
         "properties": {"mode": "Incremental", "expressionEvaluationOptions": {"scope": "inner"}, "template": inner}},
    ]}
    return (f"/subscriptions/{sub}{DEPLOYMENT.provider_path(name)}",
            {"location": location, "properties": {"template": template, "parameters": {}, "mode": "Incremental"}})


def _post(session, path: str, body: dict[str, Any]) -> Any:
    """POST, then follow a 202's Location until the answer; an error answer raises HttpResponseError."""
    from azure.core.exceptions import HttpResponseError
    from azure.core.rest import HttpRequest

    resources = session.resources
    client = resources._client  # the ARM pipeline of the resources client (see the module's docstring)
    # azure-mgmt-resource 26 keeps the endpoint in its configuration ("{endpoint}" in the pipeline's
    # base URL); 24's multi-API client has it in the pipeline's base URL itself.
    endpoint = getattr(resources._config, "base_url", None) or client._base_url
    response = client.send_request(HttpRequest("POST", endpoint.rstrip("/") + path,
                                               params={"api-version": API_VERSION}, json=body))
    for _ in range(POLLS):
        if response.status_code != 202:
            break
        location = response.headers.get("Location")
        if not location:
            break
        session.pause(float(response.headers.get("Retry-After") or 5))
        response = client.send_request(HttpRequest("GET", location))
    if response.status_code >= 400:
        raise HttpResponseError(response=response)
    return response.json() if response.content else {}


def _error(exc: Exception, action: str, what: str) -> AzureError:
    err = translate(exc, what=what) if hasattr(exc, "status_code") else exc
    if isinstance(err, AuthError) and action.lower() in str(err).lower():
        return AuthError(f"{what}: the caller may not run Azure's template checks ({action} is not granted)",
                         code="ARM_VALIDATE_NOT_AUTHORIZED", remedy=SKIP_REMEDY, azure_code="AuthorizationFailed")
    return err


def _ask(session, path: str, body: dict[str, Any], action: str, what: str) -> dict[str, Any]:
    """One of ARM's template checks; an SDK error comes back as azgpu's, naming the missing action."""
    try:
        return _post(session, path, body)
    except AzureError:
        raise
    except Exception as exc:
        raise _error(exc, action, what) from None


def validate(session, deployer, *, group_exists: bool, location: str) -> dict[str, Any]:
    """Azure's template validation of the cluster; raises the mapped error (policy, property, quota ...)."""
    path, body = request(deployer, group_exists=group_exists, location=location)
    answer = _ask(session, path + "/validate", body, VALIDATE_ACTION, "Azure's template validation")
    if isinstance(answer.get("error"), dict):  # older api-versions answered 200 with the error inside
        raise AzureError(f"Azure's template validation: {answer['error'].get('code')}: {answer['error'].get('message')}",
                         code="ARM_VALIDATION_FAILED", remedy="fix what the message names and re-run")
    validated = (answer.get("properties") or {}).get("validatedResources") or []
    return {"scope": "resource group" if group_exists else "subscription", "validated_resources": len(validated)}


def what_if(session, deployer, *, group_exists: bool, location: str) -> list[dict[str, Any]]:
    """ARM's what-if of the cluster's template: its `changes`, as Azure answered them."""
    path, body = request(deployer, group_exists=group_exists, location=location)
    body["properties"]["whatIfSettings"] = {"resultFormat": "FullResourcePayloads"}
    answer = _ask(session, path + "/whatIf", body, WHATIF_ACTION, "Azure's what-if")
    if (answer.get("status") or "Succeeded") != "Succeeded":
        error = answer.get("error") or {}
        raise AzureError(f"Azure's what-if: {error.get('code')}: {error.get('message')}", code="ARM_WHAT_IF_FAILED",
                         remedy="fix what the message names and re-run, or pass --no-arm-validate")
    return list((answer.get("properties") or {}).get("changes") or [])
