"""Rendered bodies against Azure's published types: every property azgpu sets exists in the REST spec's
definitions for the api-version it uses, with a value of the declared kind, and enums hold allowed values.

The definitions are a fragment of ComputeRP.json 2026-04-01 and of the compute common types, kept in
tests/fixtures/azure/schemas with their source. A definition a body reaches that the fragment does not
hold is named in NOT_IN_FRAGMENT, so a new property cannot slip through unchecked: three of them are
enums this task sets, checked against azure-mgmt-compute (generated from the same spec) instead.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from azgpu.render.arm import render_arm

SCHEMAS = Path(__file__).resolve().parent / "fixtures" / "azure" / "schemas"
COMPUTE = json.loads((SCHEMAS / "compute-2026-04-01.definitions.json").read_text())["definitions"]
COMMON = json.loads((SCHEMAS / "compute-common-v1.definitions.json").read_text())["definitions"]
# TrackedResource (common-types/resource-management/v3): what every tracked resource body may carry.
TRACKED = {"location", "tags"}
NOT_IN_FRAGMENT = {
    "Sku", "UpgradePolicy", "LinuxConfiguration", "SecurityProfile", "StorageAccountTypes", "ApiEntityReference",
    "VirtualMachineScaleSetNetworkConfigurationProperties", "VirtualMachineEvictionPolicyTypes",
    "Common.ResourceIdentityType", "Common.UserAssignedIdentitiesValue",
}
ROOTS = {"Microsoft.Compute/virtualMachineScaleSets": "VirtualMachineScaleSet",
         "Microsoft.Compute/proximityPlacementGroups": "ProximityPlacementGroup"}


class Walk:
    def __init__(self):
        self.problems: list[str] = []
        self.unread: set[str] = set()
        self.seen: set[str] = set()

    def resolve(self, ref: str) -> tuple[str, dict | None]:
        name = ref.rsplit("/", 1)[-1]
        table = COMMON if "common-types/v1/common.json" in ref else COMPUTE
        if "resource-management/v3/types.json" in ref:
            return name, {"properties": {k: {} for k in TRACKED}}
        return name, table.get(name)

    def properties(self, schema: dict) -> dict:
        props = dict(schema.get("properties") or {})
        for parent in schema.get("allOf") or []:
            _, resolved = self.resolve(parent["$ref"])
            if resolved is not None:
                props.update(self.properties(resolved))
        return props

    def value(self, path: str, schema: dict, value: Any) -> None:
        if "$ref" in schema:
            name, resolved = self.resolve(schema["$ref"])
            if resolved is None:
                self.unread.add(name)
                return
            self.seen.add(name)
            schema = resolved
        if isinstance(value, str) and value.startswith("[") and not value.startswith("[["):
            return  # an ARM expression: its value is known at deployment only
        if schema.get("readOnly"):
            self.problems.append(f"{path}: read-only in the spec, but the body sets it")
        if "enum" in schema and value not in schema["enum"]:
            self.problems.append(f"{path}: {value!r} is not one of {schema['enum']}")
        kind = schema.get("type")
        if schema.get("properties") or schema.get("allOf") or kind == "object":
            if not isinstance(value, dict):
                self.problems.append(f"{path}: an object in the spec, {type(value).__name__} in the body")
                return
            known = self.properties(schema)
            extra = schema.get("additionalProperties")
            for key, item in value.items():
                if key in known:
                    self.value(f"{path}.{key}", known[key], item)
                elif extra is not None:
                    self.value(f"{path}[{key!r}]", extra, item)
                else:
                    self.problems.append(f"{path}.{key}: no such property in the spec")
        elif kind == "array":
            if not isinstance(value, list):
                self.problems.append(f"{path}: an array in the spec")
                return
            for i, item in enumerate(value):
                self.value(f"{path}[{i}]", schema["items"], item)
        elif kind == "string" and not isinstance(value, str):
            self.problems.append(f"{path}: a string in the spec, {value!r} in the body")
        elif kind == "boolean" and not isinstance(value, bool):
            self.problems.append(f"{path}: a boolean in the spec, {value!r} in the body")
        elif kind == "integer" and (isinstance(value, bool) or not isinstance(value, int)):
            self.problems.append(f"{path}: an integer in the spec, {value!r} in the body")
        elif kind == "number" and (isinstance(value, bool) or not isinstance(value, (int, float))):
            self.problems.append(f"{path}: a number in the spec, {value!r} in the body")


IDENTITY = "/subscriptions/s/resourceGroups/id-rg/providers/Microsoft.ManagedIdentity/userAssignedIdentities/reader"
REQUESTS = {
    "every option": dict(profile="nd-h100-v5", nodes=150, image="ubuntu-2204-gen2",
                         custom_data="#!/bin/bash\necho hi\n",
                         assign_identity=True, identity=[IDENTITY], ppg="train-ppg", spot=True, max_price=2.5,
                         eviction_policy="Deallocate", public_ip=True, ssh_source="203.0.113.7/32", data_disks=2,
                         ephemeral_os_disk=True, zone="2", boot_diagnostics=False),
    "gallery image on GB300": dict(profile="nd-gb300-v6", nodes=36,
                                   image="/subscriptions/s/resourceGroups/img/providers/Microsoft.Compute/galleries/g/images/gb"),
    "community image, existing group": dict(
        profile="nd-a100-v4", image="/CommunityGalleries/pub-1/Images/hpc/Versions/2.0.0", security_type="Standard",
        ppg="/subscriptions/s/resourceGroups/n/providers/Microsoft.Compute/proximityPlacementGroups/p"),
    "direct-shared image, ndv2 with extension": dict(profile="ndv2", image="/SharedGalleries/sub-G/Images/hpc"),
}


def _walk(plan) -> Walk:
    walk = Walk()
    for resource in render_arm(plan)["resources"]:
        root = ROOTS.get(resource["type"])
        if root is None:
            continue
        body = {k: v for k, v in resource.items() if k not in ("type", "apiVersion", "name", "dependsOn")}
        assert resource["apiVersion"] == "2026-04-01"
        walk.value(resource["name"], {"$ref": f"#/definitions/{root}"}, body)
    return walk


@pytest.mark.parametrize("values", REQUESTS.values(), ids=REQUESTS.keys())
def test_every_property_set_exists_in_the_published_definitions(az, values):
    walk = _walk(az.plan(**values))
    assert not walk.problems
    assert walk.unread <= NOT_IN_FRAGMENT, walk.unread - NOT_IN_FRAGMENT


def test_the_walk_reaches_what_this_task_sets(az):
    walk = _walk(az.plan(**REQUESTS["every option"]))
    assert {"VirtualMachineScaleSetIdentity", "DiagnosticsProfile", "BootDiagnostics", "ProximityPlacementGroup",
            "ProximityPlacementGroupPropertiesIntent", "ImageReference", "BillingProfile",
            "VirtualMachinePriorityTypes",
            "VirtualMachineScaleSetOSProfile"} <= walk.seen


def test_the_walk_notices_a_property_the_spec_lacks(az):
    plan = az.plan(**REQUESTS["every option"])
    vmss = next(r for r in plan.resources if r.stage == "scale-set")
    vmss.body["properties"]["virtualMachineProfile"]["diagnosticsProfile"]["bootDiagnostics"]["managed"] = True
    vmss.body["properties"]["proximityPlacementGroup"] = {"id": "x", "name": "y"}
    walk = _walk(plan)
    assert any(p.endswith("bootDiagnostics.managed: no such property in the spec") for p in walk.problems)
    assert any(p.endswith("proximityPlacementGroup.name: no such property in the spec") for p in walk.problems)


def test_the_walk_notices_a_value_outside_an_enum(az):
    plan = az.plan(**REQUESTS["every option"])
    ppg = next(r for r in plan.resources if r.type == "Microsoft.Compute/proximityPlacementGroups")
    ppg.body["properties"]["proximityPlacementGroupType"] = "Premium"
    assert any("'Premium' is not one of" in p for p in _walk(plan).problems)


def test_enums_outside_the_fragment_hold_values_the_sdk_publishes(az):
    """evictionPolicy and identity.type: azure-mgmt-compute's enums are generated from the same 2026-04-01 spec."""
    from azure.mgmt.compute.models import ResourceIdentityType, VirtualMachineEvictionPolicyTypes

    for policy in ("Delete", "Deallocate"):
        plan = az.plan(**{**REQUESTS["every option"], "eviction_policy": policy})
        vmss = next(r for r in plan.resources if r.stage == "scale-set")
        assert vmss.body["properties"]["virtualMachineProfile"]["evictionPolicy"] in {
            e.value for e in VirtualMachineEvictionPolicyTypes}
    for values in ({"assign_identity": True}, {"identity": [IDENTITY]},
                   {"assign_identity": True, "identity": [IDENTITY]}):
        vmss = next(r for r in az.plan(profile="nd-a100-v4", **values).resources if r.stage == "scale-set")
        assert vmss.body["identity"]["type"] in {e.value for e in ResourceIdentityType}
