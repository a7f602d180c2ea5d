"""The simulated subscription's Azure Impact Reporting (Microsoft.Impact) and what it takes to use it.

- Workload impacts: PUT, GET and list in the REST spec's shape (WorkloadImpact, api-versions
  2023-02-01-preview ... 2026-01-01-preview), with what Learn documents of Guest Health Reporting:
  only approved categories, every HPC report naming a PhysicalHostName or VmUniqueId, 404 when the
  impacted resource does not exist (facts sheet 12.3, Learn's reporting page), and no second impact
  under a name already used.
- Insights: after a report, a sequence in the shape of Learn's example (AcknowledgedUnhealthy, then
  the terminal NodeRemovedFromService), each appearing on the fake's clock.
- The onboarding Learn describes that an API can see: the Microsoft.Impact resource provider's
  registration state (409 MissingSubscriptionRegistration while unregistered, as ARM answers), and
  the caller's permissions (403 AuthorizationFailed without Microsoft.Impact/workloadImpacts/write).

Error codes Learn does not spell out for this API are ARM's usual ones: ResourceNotFound (404),
Conflict (409), BadRequest (400), and the ones above.
"""

from __future__ import annotations

import copy
import json
import re
from functools import cache
from importlib import resources
from typing import Any

from ..errors import ArmError
from ..lro import iso
from ..store import Store, stable_uuid
from . import providers
from .authorization import allowed, authorization_failed

NAMESPACE = "Microsoft.Impact"
WRITE = "Microsoft.Impact/workloadImpacts/write"
READ = "Microsoft.Impact/workloadImpacts/read"
NAME = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9-:]*[a-zA-Z0-9]{3,120}$")  # WorkloadImpact.name in the spec
VIRTUAL_STEP = 60.0  # seconds between insights when the fake keeps virtual time
# The api-versions of Microsoft.Impact/workloadImpacts in Azure/azure-rest-api-specs (specification/impact).
API_VERSIONS = ["2026-01-01-preview", "2025-01-01-preview", "2024-05-01-preview", "2023-12-01-preview",
                "2023-07-01-preview", "2023-02-01-preview", "2022-11-01-preview"]


@cache
def data() -> dict[str, Any]:
    return json.loads(resources.files("azgpu.testing").joinpath("data/impact_reporting.json").read_text())


# ------------------------------------------------------------------------------ the provider (models/providers.py)

RESOURCE_TYPES = ("workloadImpacts", "workloadImpacts/insights", "impactCategories", "operations")


def registration_state(store: Store) -> str:
    return providers.registration_state(store, NAMESPACE)


def provider_body(store: Store, subscription: str) -> dict[str, Any]:
    return providers.provider_body(store, subscription, NAMESPACE, RESOURCE_TYPES, API_VERSIONS)


def not_registered() -> ArmError:
    return providers.not_registered(NAMESPACE)


# ------------------------------------------------------------------------------ categories


def categories(store: Store) -> list[dict[str, Any]]:
    """ImpactCategories - List By Subscription: the spec example's categories plus those a test added."""
    listed = copy.deepcopy(data()["categories"])
    for name in store.impact_categories:
        listed.append({"id": f"/subscriptions/00000000-0000-0000-0000-000000000000/providers/microsoft.Impact/"
                             f"ImpactCategories/{name}",
                       "name": name, "type": "Microsoft.Impact/impactCategories",
                       "properties": {"description": name, "categoryId": stable_uuid("impact-category", name)}})
    return listed


def accepted_category(store: Store, name: str) -> bool:
    known = {c["name"].lower() for c in categories(store)} | {c.lower() for c in data()["hpc_categories"]}
    return name.lower() in known


# ------------------------------------------------------------------------------ workload impacts


def impact_id(subscription: str, name: str) -> str:
    return f"/subscriptions/{subscription}/providers/{NAMESPACE}/workloadImpacts/{name}"


def create(backend, subscription: str, name: str, body: Any, now: float) -> dict[str, Any]:
    """Validate a PUT and store the impact; the stored record (its resource body under 'resource')."""
    store: Store = backend.store
    if registration_state(store).lower() != "registered":
        raise not_registered()
    scope = impact_id(subscription, name)
    if not allowed(store, WRITE):
        raise authorization_failed(WRITE, scope)
    if not NAME.fullmatch(name):
        raise ArmError(400, "BadRequest", f"The workload impact name '{name}' does not match "
                                          f"'{NAME.pattern}'.")
    if name.lower() in store.impacts:
        raise ArmError(409, "Conflict", f"A workload impact named '{name}' already exists; use another name.")
    props = (body or {}).get("properties") if isinstance(body, dict) else None
    if not isinstance(props, dict):
        raise ArmError(400, "BadRequest", "The request body must have a 'properties' object.")
    missing = [k for k in ("startDateTime", "impactedResourceId", "impactCategory") if not props.get(k)]
    if missing:
        raise ArmError(400, "BadRequest", f"Required properties are missing: {', '.join(missing)}.")
    category = str(props["impactCategory"])
    if not accepted_category(store, category):
        raise ArmError(400, "BadRequest", f"The impact category '{category}' is not supported.")
    extra = props.get("additionalProperties") or {}
    if category.lower().startswith("resource.hpc.") and not (extra.get("PhysicalHostName") or extra.get("VmUniqueId")):
        # Learn: "All HPC impact requests must include either PhysicalHostName (preferred) or VmUniqueId."
        raise ArmError(400, "BadRequest", "HPC impact reports must include additionalProperties.PhysicalHostName "
                                          "or additionalProperties.VmUniqueId.")
    target = str(props["impactedResourceId"])
    if target.lower().startswith(f"/subscriptions/{subscription.lower()}/") and backend.find(target) is None:
        raise ArmError(404, "ResourceNotFound", f"The impacted resource '{target}' was not found.")
    resource = {
        "id": scope, "name": name, "type": "Microsoft.Impact/workloadImpacts",
        "properties": {**copy.deepcopy(props), "provisioningState": "Succeeded",
                       "impactUniqueId": stable_uuid("impact", subscription, name.lower()),
                       "reportedTimeUtc": iso(now)},
        "systemData": {"createdBy": stable_uuid("principal", "caller"), "createdByType": "Application",
                       "createdAt": iso(now), "lastModifiedBy": stable_uuid("principal", "caller"),
                       "lastModifiedByType": "Application", "lastModifiedAt": iso(now)},
    }
    if resource["properties"].get("endDateTime") is None:
        resource["properties"].pop("endDateTime", None)
    record = {"resource": resource, "reported": now, "insights": copy.deepcopy(schedule(store))}
    store.impacts[name.lower()] = record
    return record


def require(store: Store, subscription: str, name: str) -> dict[str, Any]:
    if registration_state(store).lower() != "registered":
        raise not_registered()
    if not allowed(store, READ):
        raise authorization_failed(READ, impact_id(subscription, name))
    record = store.impacts.get(name.lower())
    if record is None:
        raise ArmError(404, "ResourceNotFound",
                       f"The Resource 'Microsoft.Impact/workloadImpacts/{name}' was not found.")
    return record


def listed(store: Store) -> list[dict[str, Any]]:
    if registration_state(store).lower() != "registered":
        raise not_registered()
    return [copy.deepcopy(r["resource"]) for r in store.impacts.values()]


# ------------------------------------------------------------------------------ insights


def schedule(store: Store) -> list[dict[str, Any]]:
    """The insights a new report gets: set_impact_insights' stages, else the data file's."""
    return store.impact_insights if store.impact_insights is not None else data()["insights"]


def insights(record: dict[str, Any], now: float, step: float | None) -> list[dict[str, Any]]:
    """The insights that have appeared by `now`, in the shape of Learn's example.

    Once shown, an insight stays (record["revealed"], kept in the state file): a later --simulate
    process whose virtual clock starts behind the one that saw it still lists it.
    """
    resource = record["resource"]
    wait = step if step else VIRTUAL_STEP
    out = []
    for number, stage in enumerate(record["insights"], start=1):
        at = record["reported"] + float(stage.get("after", number)) * wait
        if now < at and number > record.get("revealed", 0):
            continue
        record["revealed"] = max(record.get("revealed", 0), number)
        name = f"insight{number:04d}"
        out.append({
            "id": f"{resource['id']}/insights/{name}",
            "name": name,
            "type": "microsoft.impact/workloadimpacts/insights",
            "properties": {
                "additionalDetails": {"statusCode": stage["statusCode"],
                                      "terminalInsight": bool(stage["terminalInsight"])},
                "category": stage.get("category", "MitigationAction"),
                "content": {"title": stage.get("title", stage["statusCode"]),
                            "description": stage.get("description", stage["statusCode"])},
                "eventTime": iso(at),
                "impact": {"endTime": "0001-01-01T00:00:00Z", "impactId": resource["id"],
                           "impactedResourceId": resource["properties"]["impactedResourceId"],
                           "startTime": resource["properties"]["startDateTime"]},
                "insightUniqueId": stable_uuid("insight", resource["id"], number),
                "provisioningState": "Succeeded",
                "status": stage.get("status", "Resolved"),
            },
            "systemData": {"createdAt": iso(at), "createdBy": stable_uuid("principal", "impact-rp"),
                           "createdByType": "Application", "lastModifiedAt": iso(at),
                           "lastModifiedBy": stable_uuid("principal", "impact-rp"),
                           "lastModifiedByType": "Application"},
        })
    return out
