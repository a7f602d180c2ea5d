"""Resources that exist before a test starts: what a cluster references but azgpu does not create
(gallery and managed images, proximity placement groups, identities), and any resource a test
stores as already provisioned. The bodies are the REST API's shapes; FakeAzure's add_* call these.
"""

from __future__ import annotations

import copy

from .backend import Backend
from .lro import iso
from .models import galleries, instances
from .skus import normalize_location
from .store import parse_id, stable_uuid

GROUP_TYPE = "Microsoft.Resources/resourceGroups"
VNET_TYPE = "Microsoft.Network/virtualNetworks"
SUBNET_TYPE = "Microsoft.Network/virtualNetworks/subnets"
VMSS_TYPE = "Microsoft.Compute/virtualMachineScaleSets"
PPG_TYPE = "Microsoft.Compute/proximityPlacementGroups"


def add_resource(backend: Backend, resource_id: str, body: dict) -> dict:
    """Store a resource as provisioned (scale sets get their instances, a VNet's subnets their ids)."""
    resource = backend.new_resource(resource_id, body)
    resource["properties"].setdefault("provisioningState", "Succeeded")
    if resource["type"] == VNET_TYPE:
        resource["properties"]["subnets"] = [
            {**s, "id": f"{resource_id}/subnets/{s['name']}", "type": SUBNET_TYPE}
            for s in resource["properties"].get("subnets") or []]
    backend.put_child(resource)
    if resource["type"].lower() == VMSS_TYPE.lower():
        instances.reconcile(backend, resource)
    return copy.deepcopy(resource)


def seed(backend: Backend, resource_id: str, body: dict, *, provisioned: bool = True) -> dict:
    """Store a resource as existing (provisioning Succeeded where the type reports a provisioning state),
    making its resource group if missing."""
    rid = parse_id(resource_id)
    group_id = backend.rg_id(rid.resource_group)
    if backend.store.get(group_id) is None:
        backend.store.put({"id": group_id, "name": rid.resource_group, "type": GROUP_TYPE,
                           "location": normalize_location(body.get("location") or "eastus"), "tags": {},
                           "properties": {"provisioningState": "Succeeded"}})
    resource = backend.new_resource(resource_id, body)
    if provisioned:
        resource["properties"].setdefault("provisioningState", "Succeeded")
    backend.put_child(resource)
    return copy.deepcopy(resource)


def gallery_image(backend: Backend, resource_group: str, gallery: str, image: str, *, location: str,
                  hyper_v_generation: str, architecture: str, os_type: str, os_state: str, security_type: str | None,
                  publisher: str, offer: str | None, sku: str | None, community_name: str | None,
                  shared_name: str | None, body: dict | None, purchase_plan: dict | None) -> str:
    gallery_id = f"{backend.rg_id(resource_group)}/providers/{galleries.GALLERY_TYPE}/{gallery}"
    sharing: dict = {"permissions": "Private"}
    if community_name:
        sharing = {"permissions": "Community", "communityGalleryInfo": {"publicNames": [community_name]}}
    elif shared_name:
        sharing = {"permissions": "Groups"}
    if backend.store.get(gallery_id) is None or community_name or shared_name:
        unique = shared_name or f"{backend.subscription_id}-{gallery.upper()}"
        seed(backend, gallery_id, {"location": location, "properties": {
            "identifier": {"uniqueName": unique}, "sharingProfile": sharing}})
    image_body = body if body is not None else galleries.definition_body(
        location=location, os_type=os_type, os_state=os_state, hyper_v_generation=hyper_v_generation,
        architecture=architecture, security_type=security_type, publisher=publisher, offer=offer or gallery,
        sku=sku or image, purchase_plan=purchase_plan)
    return seed(backend, f"{gallery_id}/images/{image}", image_body)["id"]


def gallery_image_version(backend: Backend, image_id: str, version: str, *, regions: tuple[str, ...] | list[str],
                          replication_state: str | dict[str, str], exclude_from_latest: bool, replica_count: int,
                          shallow: bool, body: dict | None) -> str:
    image = backend.store.get(image_id)
    if image is None:
        raise KeyError(f"no gallery image {image_id!r}: add it with add_gallery_image first")
    states = replication_state if isinstance(replication_state, dict) else {r: replication_state for r in regions}
    version_body = body if body is not None else galleries.version_body(
        location=image.get("location", regions[0] if regions else "eastus"), regions=list(regions),
        replication={galleries.region_key(k): v for k, v in states.items()}, exclude_from_latest=exclude_from_latest,
        replica_count=replica_count, shallow=shallow, published=iso(backend.now()))
    return seed(backend, f"{image['id']}/versions/{version}", version_body)["id"]


def managed_image(backend: Backend, resource_group: str, name: str, *, location: str, hyper_v_generation: str,
                  os_type: str, os_state: str, body: dict | None) -> str:
    image_body = body if body is not None else {"location": location, "properties": {
        "storageProfile": {"osDisk": {"osType": os_type, "osState": os_state, "storageAccountType": "Premium_LRS"},
                           "dataDisks": []},
        "hyperVGeneration": hyper_v_generation}}
    return seed(backend, f"{backend.rg_id(resource_group)}/providers/{galleries.MANAGED_IMAGE_TYPE}/{name}",
                image_body)["id"]


def proximity_placement_group(backend: Backend, resource_group: str, name: str, *, location: str,
                              zones: list[str] | None, vm_sizes: list[str] | None, body: dict | None) -> str:
    ppg_body = body if body is not None else {"location": location, "properties": {
        "proximityPlacementGroupType": "Standard", **({"intent": {"vmSizes": list(vm_sizes)}} if vm_sizes else {})}}
    if zones and body is None:
        ppg_body["zones"] = list(zones)
    # ProximityPlacementGroup has no provisioningState (compute api 2026-04-01).
    return seed(backend, f"{backend.rg_id(resource_group)}/providers/{PPG_TYPE}/{name}", ppg_body,
                provisioned=False)["id"]


def user_assigned_identity(backend: Backend, resource_group: str, name: str, *, location: str,
                           body: dict | None) -> str:
    resource_id = f"{backend.rg_id(resource_group)}/providers/{galleries.IDENTITY_TYPE}/{name}"
    identity_body = body if body is not None else {"location": location, "tags": {}, "properties": {
        "tenantId": stable_uuid("tenant", backend.subscription_id),
        "principalId": stable_uuid("principal", resource_id),
        "clientId": stable_uuid("client", resource_id), "isolationScope": "None"}}
    return seed(backend, resource_id, identity_body, provisioned=False)["id"]


def set_capacity(backend: Backend, location: str, size: str, max_vms: int | None, zone: str | None) -> None:
    limits = backend.store.capacity.setdefault(normalize_location(location), {}).setdefault(size.lower(), {})
    if max_vms is None:
        limits.pop(str(zone or ""), None)
        if not limits:
            del backend.store.capacity[normalize_location(location)][size.lower()]
    else:
        limits[str(zone or "")] = int(max_vms)
