"""Microsoft.Compute catalogs: resource SKUs, usages (quota) and marketplace images."""

from __future__ import annotations

import copy
import re

from .. import images
from ..errors import ArmError, NotImplementedInFake
from ..models import quota
from ..skus import normalize_location
from . import SUB, Response, page, route

# The REST api-version whose shapes these routes answer in (Compute); resource SKUs have their own.
API_VERSION = "2026-04-01"

LOCATION = SUB + r"/providers/Microsoft\.Compute/locations/(?P<location>[^/]+)"
IMAGE_SKU = (LOCATION + r"/publishers/(?P<publisher>[^/]+)/artifacttypes/vmimage/offers/(?P<offer>[^/]+)"
             r"/skus/(?P<sku>[^/]+)/versions")
_LOCATION_FILTER = re.compile(r"location\s+eq\s+'([^']*)'", re.IGNORECASE)


@route("GET", SUB + r"/providers/Microsoft\.Compute/skus", api_version="2021-07-01")
def list_skus(backend, req, sub):
    text = (req.query.get("$filter") or "").strip()
    if not text:
        return page([s for loc in backend.skus.all_locations() for s in backend.skus.in_location(loc)])
    match = _LOCATION_FILTER.fullmatch(text)
    if not match:
        raise NotImplementedInFake(req.method, req.path, f"$filter {text!r}")
    return page(backend.skus.in_location(match.group(1)))


@route("GET", LOCATION + r"/usages")
def list_usages(backend, req, sub, location):
    return page(quota.usages(backend.store, backend.skus, location))


def _image_id(sub: str, location: str, image: dict) -> str:
    return (f"/Subscriptions/{sub}/Providers/Microsoft.Compute/Locations/{location}/Publishers/{image['publisher']}"
            f"/ArtifactTypes/VMImage/Offers/{image['offer']}/Skus/{image['sku']}/Versions/{image['version']}")


def is_not_found() -> ArmError:
    return ArmError(404, "NotFound", "Artifact: VMImage was not found.")


@route("GET", IMAGE_SKU)
def list_image_versions(backend, req, sub, location, publisher, offer, sku):
    location = normalize_location(location)
    found = images.versions(backend.store.images, location, publisher, offer, sku)
    if not found:
        raise is_not_found()
    if "desc" in (req.query.get("$orderby") or "").lower():
        found.reverse()
    if req.query.get("$top"):
        found = found[: int(req.query["$top"])]
    # This API answers a bare JSON array, not a {"value": [...]} page.
    return Response(200,
                    [{"name": i["version"], "location": location, "id": _image_id(sub, location, i)} for i in found])


@route("GET", IMAGE_SKU + r"/(?P<version>[^/]+)")
def get_image_version(backend, req, sub, location, publisher, offer, sku, version):
    location = normalize_location(location)
    image = images.find(backend.store.images, location, publisher, offer, sku, version)
    if image is None:
        raise is_not_found()
    # VirtualMachineImage as the API answers it (VirtualMachineImage_Get_MaximumSet_Gen.json, 2026-04-01):
    # the purchase plan, features and deprecation status sit inside properties.
    return Response(200, {
        "name": image["version"],
        "location": location,
        "id": _image_id(sub, location, image),
        "properties": copy.deepcopy(image["properties"]),
    })
