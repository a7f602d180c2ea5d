"""Azure Compute Gallery images, managed images and user-assigned identities, as the fake stores them.

Bodies follow the REST spec's examples (tests/fixtures/azure/compute, msi): a gallery image
definition carries osType, osState, hyperVGeneration, architecture, features and identifier; a
version carries publishingProfile.targetRegions and, on request, replicationStatus; community and
direct-shared galleries answer the same images under their public or unique name, per location.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

from ..errors import ArmError, resource_not_found
from ..skus import check_bootable, normalize_location
from ..store import parse_id

if TYPE_CHECKING:
    from ..backend import Backend

GALLERY_TYPE = "Microsoft.Compute/galleries"
IMAGE_TYPE = "Microsoft.Compute/galleries/images"
VERSION_TYPE = "Microsoft.Compute/galleries/images/versions"
MANAGED_IMAGE_TYPE = "Microsoft.Compute/images"
IDENTITY_TYPE = "Microsoft.ManagedIdentity/userAssignedIdentities"
# What the community and shared gallery GETs return of a definition and of a version (their examples).
SHARED_IMAGE_KEYS = ("osType", "osState", "endOfLifeDate", "identifier", "recommended", "disallowed",
                     "hyperVGeneration",
                     "features", "purchasePlan", "architecture", "privacyStatementUri", "eula", "disclaimer",
                     "artifactTags")
SHARED_VERSION_KEYS = ("publishedDate", "endOfLifeDate", "excludeFromLatest", "storageProfile", "artifactTags",
                       "imageState")


def region_key(name: str) -> str:
    """'West US' and 'westus' name one region (targetRegions use display names in the examples)."""
    return normalize_location(name).replace(" ", "").lower()


def version_key(name: str) -> tuple:
    """Gallery versions are Major.Minor.Patch: compared as numbers (Learn: Store and share images)."""
    return tuple(int(p) if p.isdigit() else -1 for p in name.split("."))


def definition_body(*, location: str, os_type: str, os_state: str, hyper_v_generation: str, architecture: str,
                    security_type: str | None, publisher: str, offer: str, sku: str,
                    purchase_plan: dict | None = None) -> dict:
    properties: dict[str, Any] = {
        "osType": os_type, "osState": os_state, "hyperVGeneration": hyper_v_generation,
        "identifier": {"publisher": publisher, "offer": offer, "sku": sku}, "architecture": architecture,
        "provisioningState": "Succeeded",
    }
    if security_type:
        properties["features"] = [{"name": "SecurityType", "value": security_type}]
    if purchase_plan:  # GalleryImageProperties.purchasePlan (ImagePurchasePlan: name, publisher, product)
        properties["purchasePlan"] = dict(purchase_plan)
    return {"location": location, "properties": properties}


def version_body(*, location: str, regions: list[str], replication: dict[str, str], exclude_from_latest: bool,
                 replica_count: int, shallow: bool, published: str, size_gb: int = 30) -> dict:
    profile: dict[str, Any] = {
        "targetRegions": [{"name": r, "regionalReplicaCount": replica_count, "storageAccountType": "Standard_LRS",
                           "excludeFromLatest": False} for r in regions],
        "replicaCount": replica_count, "excludeFromLatest": exclude_from_latest, "publishedDate": published,
        "storageAccountType": "Standard_LRS",
    }
    if shallow:
        profile["replicationMode"] = "Shallow"
    summary = [{"region": r, "state": replication.get(region_key(r), "Completed"), "details": "",
                "progress": 100 if replication.get(region_key(r), "Completed") == "Completed" else 50} for r in regions]
    states = {s["state"] for s in summary}
    return {
        "location": location,
        "properties": {
            "publishingProfile": profile,
            "storageProfile": {"osDiskImage": {"sizeInGB": size_gb, "hostCaching": "ReadOnly"}},
            "replicationStatus": {"aggregatedState": "Completed" if states <= {"Completed"} else "InProgress",
                                  "summary": summary},
            "provisioningState": "Succeeded",
        },
    }


def without_replication(version: dict) -> dict:
    """A version as GET answers it without $expand=ReplicationStatus."""
    out = copy.deepcopy(version)
    out.get("properties", {}).pop("replicationStatus", None)
    return out


def versions_of(backend: Backend, image_id: str) -> list[dict]:
    found = [r for r in backend.store.under(image_id) if r.get("type", "").lower() == VERSION_TYPE.lower()]
    return sorted(found, key=lambda v: version_key(v["name"]))


def target_regions(version: dict) -> dict[str, dict]:
    profile = (version.get("properties") or {}).get("publishingProfile") or {}
    return {region_key(t.get("name", "")): t for t in profile.get("targetRegions") or []}


def in_location(version: dict, location: str) -> bool:
    return region_key(location) in target_regions(version)


def shared_gallery(backend: Backend, name: str, *, community: bool) -> dict | None:
    """The gallery published under a community public name, or shared directly under its unique name."""
    for gallery in backend.store.of_type(GALLERY_TYPE):
        props = gallery.get("properties") or {}
        sharing = props.get("sharingProfile") or {}
        if community:
            names = (sharing.get("communityGalleryInfo") or {}).get("publicNames") or []
            if sharing.get("permissions") == "Community" and name.lower() in (n.lower() for n in names):
                return gallery
        elif sharing.get("permissions") == "Groups" and \
                ((props.get("identifier") or {}).get("uniqueName") or "").lower() == name.lower():
            return gallery
    return None


def shared_image(backend: Backend, name: str, image: str, *, community: bool) -> tuple[dict, str]:
    """A community or direct-shared gallery image by its public or unique name, with its unique id; 404 otherwise."""
    gallery = shared_gallery(backend, name, community=community)
    found = backend.find(f"{gallery['id']}/images/{image}") if gallery else None
    prefix = "CommunityGalleries" if community else "SharedGalleries"
    if found is None:
        raise ArmError(404, "ResourceNotFound",
                       f"The {prefix[:-9].lower()} gallery image '{name}/{image}' was not found.")
    return found, f"/{prefix}/{name}/Images/{image}"


def shared_versions(backend: Backend, location: str, name: str, image: str, *, community: bool) -> tuple[list[dict],
                                                                                                         str]:
    found, unique = shared_image(backend, name, image, community=community)
    # Location-scoped: only versions replicated to the location are listed there.
    return [v for v in versions_of(backend, found["id"]) if in_location(v, location)], unique


def shared_image_view(image: dict, location: str, unique_id: str, *, community: bool) -> dict:
    """A definition as the community/shared gallery GET shows it (CommunityGalleryImage_Get, SharedGalleryImage_Get)."""
    props = image.get("properties") or {}
    out: dict[str, Any] = {"properties": {k: copy.deepcopy(props[k]) for k in SHARED_IMAGE_KEYS if k in props},
                           "location": location, "name": image["name"]}
    if community:
        out["type"] = "Microsoft.Compute/locations/communityGalleryImage"
    out["identifier"] = {"uniqueId": unique_id}
    return out


def shared_version_view(version: dict, location: str, unique_id: str) -> dict:
    props = version.get("properties") or {}
    view = {k: copy.deepcopy(props[k]) for k in SHARED_VERSION_KEYS if k in props}
    profile = props.get("publishingProfile") or {}
    for key in ("publishedDate", "endOfLifeDate", "excludeFromLatest"):
        if key in profile:
            view.setdefault(key, profile[key])
    os_disk = (props.get("storageProfile") or {}).get("osDiskImage")
    if os_disk:
        view["storageProfile"] = {"osDiskImage": {"diskSizeGB": os_disk.get("sizeInGB", os_disk.get("diskSizeGB")),
                                                  "hostCaching": os_disk.get("hostCaching", "None")}}
    return {"properties": view, "location": location, "name": version["name"], "identifier": {"uniqueId": unique_id}}


def check_reference(backend: Backend, vmss: dict, sku: dict) -> dict | None:
    """A scale set's gallery, community, shared or managed image, checked as ARM checks a PUT:
    it exists, it is in (replicated to) the scale set's location, and its generation and
    architecture fit the size. Returns the definition's purchasePlan (a custom image built from a
    Marketplace image carries one), which the caller checks as for a Marketplace image."""
    ref = (((vmss.get("properties") or {}).get("virtualMachineProfile") or {}).get("storageProfile") or {}).get(
        "imageReference") or {}
    location = vmss["location"]
    image, version = _resolve(backend, ref, location)
    if image is None:
        return None
    props = image.get("properties") or {}
    # V1 and x64 are the spec's defaults for gallery image definitions and managed images.
    check_bootable(sku, vmss["sku"]["name"], props.get("hyperVGeneration") or "V1", props.get("architecture") or "x64",
                   "an image")
    return props.get("purchasePlan")


def _unavailable(ref_text: str, location: str) -> ArmError:
    # The code is what callers branch on; this wording is what users report, not a documented text.
    return ArmError(404, "GalleryImageNotFound",
                    f"The gallery image {ref_text} is not available in {location} region. Please contact image owner "
                    "to replicate to this region, or change your requested region.")


def _split(text: str) -> tuple[str, str, str, str | None] | None:
    """(kind, gallery, image, version) of a /CommunityGalleries/... or /SharedGalleries/... ID."""
    parts = [p for p in text.split("/") if p]
    if len(parts) not in (4, 6) or parts[2].lower() != "images" or (len(parts) == 6 and parts[4].lower() != "versions"):
        return None
    kind = {"communitygalleries": "community", "sharedgalleries": "shared"}.get(parts[0].lower())
    if kind is None:
        return None
    return kind, parts[1], parts[3], parts[5] if len(parts) == 6 else None


def _resolve(backend: Backend, ref: dict, location: str) -> tuple[dict | None, dict | None]:
    """(definition or managed image, version) a scale set's imageReference names; raises when missing."""
    text = ref.get("id") or ref.get("communityGalleryImageId") or ref.get("sharedGalleryImageId")
    if not text:
        return None, None
    if ref.get("id"):
        try:
            rid = parse_id(text)
        except ValueError:
            raise ArmError(400, "InvalidParameter",
                           f"The value of parameter imageReference.id is invalid: {text}") from None
        if rid.type.lower() == MANAGED_IMAGE_TYPE.lower():
            image = backend.find(text)
            if image is None:
                raise resource_not_found(parse_id(text))
            if normalize_location(image.get("location", "")) != normalize_location(location):
                raise _unavailable(text, location)
            return image, None
        if rid.type.lower() == VERSION_TYPE.lower():
            image_id, version = rid.parent, rid.name
        elif rid.type.lower() == IMAGE_TYPE.lower():
            image_id, version = text, None
        else:
            raise ArmError(400, "InvalidParameter", f"The value of parameter imageReference.id is invalid: {text}")
        image = backend.find(image_id)
        if image is None:
            raise resource_not_found(parse_id(image_id))
    else:
        split = _split(text)
        if split is None:
            raise ArmError(400, "InvalidParameter", f"The value of parameter imageReference is invalid: {text}")
        kind, gallery_name, image_name, version = split
        gallery = shared_gallery(backend, gallery_name, community=kind == "community")
        image = backend.find(f"{gallery['id']}/images/{image_name}") if gallery else None
        if image is None:
            raise _unavailable(text, location)
        if version and version.lower() == "latest":
            version = None
    candidates = versions_of(backend, image["id"])
    if version:
        chosen = [v for v in candidates if v["name"] == version]
    else:
        chosen = [v for v in candidates if not ((v.get("properties") or {}).get("publishingProfile") or {}).get(
            "excludeFromLatest")][-1:]
    if not chosen or not in_location(chosen[0], location):
        raise _unavailable(text, location)
    return image, chosen[0]
