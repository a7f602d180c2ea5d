"""Microsoft.Compute catalogs: resource SKUs and marketplace images (models/catalog.py), and usages (quota)."""

from __future__ import annotations

import re

from ..errors import NotImplementedInFake
from ..models import catalog, quota
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
        return page(catalog.skus(backend))
    match = _LOCATION_FILTER.fullmatch(text)
    if not match:
        raise NotImplementedInFake(req.method, req.path, f"$filter {text!r}")
    return page(catalog.skus(backend, match.group(1)))


@route("GET", LOCATION + r"/usages")
def list_usages(backend, req, sub, location):
    return page(quota.usages(backend.store, backend.skus, location))


@route("GET", IMAGE_SKU)
def list_image_versions(backend, req, sub, location, publisher, offer, sku):
    top = req.query.get("$top")
    found = catalog.image_versions(backend, sub, location, publisher, offer, sku,
                                   descending="desc" in (req.query.get("$orderby") or "").lower(),
                                   top=int(top) if top else None)
    return Response(200, found)  # this API answers a bare JSON array, not a {"value": [...]} page


@route("GET", IMAGE_SKU + r"/(?P<version>[^/]+)")
def get_image_version(backend, req, sub, location, publisher, offer, sku, version):
    return Response(200, catalog.image_version(backend, sub, location, publisher, offer, sku, version))
