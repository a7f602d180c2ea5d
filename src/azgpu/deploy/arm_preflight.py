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

from ..bounded import BoundedError, array, obj, retry_after_of, text
from ..errors import AzureError
from ..render.arm import SCHEMA, arm_value
from ..resource_types import DEPLOYMENT, RESOURCE_GROUP
from .arm import BASE, answer, arm_url, invalid_answer
from .azure_errors import AuthError, translate

API_VERSION = DEPLOYMENT.api_version  # deployments (validate, whatIf)
SUBSCRIPTION_SCHEMA = "https://schema.management.azure.com/schemas/2018-05-01/subscriptionDeploymentTemplate.json#"
VALIDATE_ACTION = DEPLOYMENT.action("validate/action")
WHATIF_ACTION = DEPLOYMENT.action("whatIf/action")
SKIP_REMEDY = (f"ask for a role that grants {DEPLOYMENT.action('*')} on the resource group or subscription "
               "(Contributor does), or pass --no-arm-validate to skip Azure's template validation and what-if")
POLLS = 120  # at most this many status reads of one what-if (ARM answers within seconds to minutes)
POLL_TIME = 1800.0  # and at most this long in all: a check still running then is an error, never a pass
DEFAULT_POLL = 5.0  # seconds between status reads when Azure names none
MAX_POLL_WAIT = 60.0  # the longest Retry-After followed between two reads


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


def _post(session, path: str, body: dict[str, Any], what: str) -> dict[str, Any]:
    """POST, then follow a 202's Location until the answer (each wait Retry-After as bounded.retry_after reads
    it, at most POLLS reads and POLL_TIME seconds); the answer's JSON object. An error answer raises
    HttpResponseError; an answer azgpu cannot read, or one still running when azgpu stops following it,
    raises a coded AzureError: never read as a success with nothing in it."""
    from azure.core.exceptions import HttpResponseError
    from azure.core.rest import HttpRequest

    resources = session.resources
    client = resources._client  # the ARM pipeline of the resources client (see the module's docstring)
    # azure-mgmt-resource 26 keeps the endpoint in its configuration ("{endpoint}" in the pipeline's
    # base URL); 24's multi-API client has it in the pipeline's base URL itself.
    endpoint = getattr(resources._config, "base_url", None) or client._base_url
    response = client.send_request(HttpRequest("POST", endpoint.rstrip("/") + path,
                                               params={"api-version": API_VERSION}, json=body))
    start = session.clock()
    polls = 0
    while response.status_code == 202:
        location = response.headers.get("Location") or ""
        if location.startswith("/"):  # the spec's examples write it as a path below Resource Manager
            location = BASE + location
        if not arm_url(location):
            raise invalid_answer(what, "accepted the request (202) without a Resource Manager Location to follow it "
                                       f"({ascii(location[:100]) if location else 'none'})")
        if polls >= POLLS or session.clock() - start >= POLL_TIME:
            raise AzureError(f"{what}: still running after {polls} status reads ({session.clock() - start:g} s); its "
                             "answer was not read, so nothing is known to be valid", code="ARM_CHECK_INCOMPLETE",
                             remedy="re-run (nothing was written), or pass --no-arm-validate to go on without "
                                    "Azure's template checks")
        session.pause(retry_after_of(response.headers, default=DEFAULT_POLL, maximum=MAX_POLL_WAIT))
        response = client.send_request(HttpRequest("GET", location))
        polls += 1
    if response.status_code >= 400:
        raise HttpResponseError(response=response)
    if response.status_code != 200:
        raise invalid_answer(what, f"is HTTP {response.status_code}, not 200 with a result")
    data = answer(response, what)
    if not data:
        raise invalid_answer(what, "is empty: no result")
    return data


def _error(exc: Exception, action: str, what: str) -> AzureError:
    err = translate(exc, what=what) if hasattr(exc, "status_code") else exc
    if isinstance(err, AuthError) and action.lower() in str(err).lower():
        return AuthError(f"{what}: the caller may not run Azure's template checks ({action} is not granted)",
                         code="ARM_VALIDATE_NOT_AUTHORIZED", remedy=SKIP_REMEDY, azure_code="AuthorizationFailed")
    return err


def _ask(session, path: str, body: dict[str, Any], action: str, what: str) -> dict[str, Any]:
    """One of ARM's template checks; an SDK error comes back as azgpu's, naming the missing action."""
    try:
        return _post(session, path, body, what)
    except AzureError:
        raise
    except Exception as exc:
        raise _error(exc, action, what) from None


def _error_of(value: Any, what: str) -> tuple[str, str] | None:
    """(code, message) of an answer's ErrorResponse, None when it has none; ARM_ANSWER_INVALID for another shape."""
    if value is None:
        return None
    try:
        error = obj(value, "its error")
        return (text(error.get("code"), "its error code", 200) or "", text(error.get("message"), "its error message")
                or "")
    except BoundedError as exc:
        raise invalid_answer(what, str(exc)) from None


def validate(session, deployer, *, group_exists: bool, location: str) -> dict[str, Any]:
    """Azure's template validation of the cluster; raises the mapped error (policy, property, quota ...).
    The answer is a DeploymentValidateResult (REST spec, deployments 2025-04-01): its types are checked, and
    one that is not one is ARM_ANSWER_INVALID, never a validation that passed."""
    what = "Azure's template validation"
    path, body = request(deployer, group_exists=group_exists, location=location)
    answer_ = _ask(session, path + "/validate", body, VALIDATE_ACTION, what)
    error = _error_of(answer_.get("error"), what)
    if error:  # older api-versions answered 200 with the error inside
        raise AzureError(f"Azure's template validation: {error[0]}: {error[1]}", code="ARM_VALIDATION_FAILED",
                         remedy="fix what the message names and re-run")
    try:
        props = obj(answer_.get("properties"), "its properties")
        if not props:
            raise BoundedError("holds no properties (no validated deployment)")
        state = text(props.get("provisioningState"), "its provisioningState", 64)
        validated = array(props.get("validatedResources"), "its validatedResources")
        for i, item in enumerate(validated):
            text(obj(item, f"validatedResources[{i}]").get("id"), f"validatedResources[{i}].id", 2000)
    except BoundedError as exc:
        raise invalid_answer(what, str(exc)) from None
    if state and state.lower() not in ("succeeded", "accepted"):
        raise invalid_answer(what, f"says the validation is {ascii(state)}, not Succeeded")
    return {"scope": "resource group" if group_exists else "subscription", "validated_resources": len(validated)}


CHANGE_TYPES = {"Create", "Delete", "Ignore", "Deploy", "NoChange", "Modify", "Unsupported"}  # WhatIfChange
PROPERTY_CHANGE_TYPES = {"Create", "Delete", "Modify", "Array", "NoEffect"}  # WhatIfPropertyChange
MAX_CHANGES = 10000


def _changes(value: Any, what: str) -> list[dict[str, Any]]:
    """ARM's `changes`, each WhatIfChange checked as the REST spec types it (the strings are text, the deltas
    lists of property changes, nested through `children`); ARM_ANSWER_INVALID otherwise."""
    try:
        changes = array(value, "its changes", MAX_CHANGES)
        for i, change in enumerate(changes):
            where = f"changes[{i}]"
            change = obj(change, where)
            text(change.get("resourceId"), f"{where}.resourceId", 2000, optional=False)
            kind = text(change.get("changeType"), f"{where}.changeType", 32, optional=False)
            if kind not in CHANGE_TYPES:
                raise BoundedError(f"{where}.changeType is {ascii(kind[:40])}, not one the REST spec defines")
            text(change.get("unsupportedReason"), f"{where}.unsupportedReason")
            for side in ("before", "after"):
                after = obj(change.get(side), f"{where}.{side}")
                text(after.get("apiVersion"), f"{where}.{side}.apiVersion", 32)
            stack = [(change.get("delta"), f"{where}.delta")]
            while stack:  # nested property changes, without recursion (depth is bounded by the parse)
                items, at = stack.pop()
                for j, delta in enumerate(array(items, at, MAX_CHANGES)):
                    delta = obj(delta, f"{at}[{j}]")
                    text(delta.get("path"), f"{at}[{j}].path", 2000, optional=False)
                    if text(delta.get("propertyChangeType"), f"{at}[{j}].propertyChangeType", 32) not in (
                            None, *PROPERTY_CHANGE_TYPES):
                        raise BoundedError(f"{at}[{j}].propertyChangeType is not one the REST spec defines")
                    if delta.get("children") is not None:
                        stack.append((delta["children"], f"{at}[{j}].children"))
        return changes
    except BoundedError as exc:
        raise invalid_answer(what, str(exc)) from None


def what_if(session, deployer, *, group_exists: bool, location: str) -> list[dict[str, Any]]:
    """ARM's what-if of the cluster's template: its `changes`, as Azure answered them (a WhatIfOperationResult,
    its types checked: ARM_ANSWER_INVALID for anything else)."""
    what = "Azure's what-if"
    path, body = request(deployer, group_exists=group_exists, location=location)
    body["properties"]["whatIfSettings"] = {"resultFormat": "FullResourcePayloads"}
    answer_ = _ask(session, path + "/whatIf", body, WHATIF_ACTION, what)
    try:
        status = text(answer_.get("status"), "its status", 64)
    except BoundedError as exc:
        raise invalid_answer(what, str(exc)) from None
    error = _error_of(answer_.get("error"), what)
    if (status or "Succeeded") != "Succeeded" or error:
        code, message = error or ("", "")
        raise AzureError(f"Azure's what-if: {status or 'Failed'}: {code}: {message}", code="ARM_WHAT_IF_FAILED",
                         remedy="fix what the message names and re-run, or pass --no-arm-validate")
    try:
        props = obj(answer_.get("properties"), "its properties")
    except BoundedError as exc:
        raise invalid_answer(what, str(exc)) from None
    return list(_changes(props.get("changes"), what))
