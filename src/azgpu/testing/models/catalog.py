"""The fake's Compute catalogs as the APIs list them: resource SKUs (skus.py's catalog, with the overrides a
test set) and marketplace image versions (images.py) - the model behind routes/catalog.py. The catalogs'
data is the fake's own (data/: recordings of the real APIs and entries written from Microsoft's docs),
never azgpu's profiles.
"""

from __future__ import annotations

import copy

from .. import images
from ..errors import ArmError
from ..skus import normalize_location


def skus(backend, location: str | None = None) -> list[dict]:
    """Resource SKUs - List: every location's, or one location's ($filter=location eq '...')."""
    if location is None:
        return [s for loc in backend.skus.all_locations() for s in backend.skus.in_location(loc)]
    return backend.skus.in_location(location)


def _image_id(sub: str, location: str, image: dict) -> str:
    return (f"/Subscriptions/{sub}/Providers/Microsoft.Compute/Locations/{location}/Publishers/{image['publisher']}"
            f"/ArtifactTypes/VMImage/Offers/{image['offer']}/Skus/{image['sku']}/Versions/{image['version']}")


def is_not_found() -> ArmError:
    return ArmError(404, "NotFound", "Artifact: VMImage was not found.")


def image_versions(backend, sub: str, location: str, publisher: str, offer: str, sku: str, *,
                   descending: bool = False, top: int | None = None) -> list[dict]:
    """Virtual Machine Images - List: the versions of an image, oldest first unless descending."""
    location = normalize_location(location)
    found = images.versions(backend.store.images, location, publisher, offer, sku)
    if not found:
        raise is_not_found()
    if descending:
        found.reverse()
    if top is not None:
        found = found[:top]
    return [{"name": i["version"], "location": location, "id": _image_id(sub, location, i)} for i in found]


def image_version(backend, sub: str, location: str, publisher: str, offer: str, sku: str, version: str) -> dict:
    """Virtual Machine Images - Get, as the API answers it (VirtualMachineImage_Get_MaximumSet_Gen.json,
    2026-04-01): the purchase plan, features and deprecation status sit inside properties."""
    location = normalize_location(location)
    image = images.find(backend.store.images, location, publisher, offer, sku, version)
    if image is None:
        raise is_not_found()
    return {"name": image["version"], "location": location, "id": _image_id(sub, location, image),
            "properties": copy.deepcopy(image["properties"])}
