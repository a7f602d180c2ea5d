"""Microsoft.Compute galleries (private, community, direct-shared), managed images: the GETs a preflight reads."""

from __future__ import annotations

from ..errors import ArmError
from ..models import galleries
from ..skus import normalize_location
from . import COMPUTE, SUB, Response, page, route

# The REST api-version whose shapes these routes answer in (Compute galleries, the ComputeGallery spec);
# managed images follow Compute's own.
API_VERSION = "2026-03-03"

GALLERY_IMAGE = COMPUTE + r"/galleries/(?P<gallery>[^/]+)/images/(?P<image>[^/]+)"
LOCATION = SUB + r"/providers/Microsoft\.Compute/locations/(?P<location>[^/]+)"
COMMUNITY = LOCATION + r"/communityGalleries/(?P<name>[^/]+)/images/(?P<image>[^/]+)"
SHARED = LOCATION + r"/sharedGalleries/(?P<name>[^/]+)/images/(?P<image>[^/]+)"


def _image(backend, rg: str, gallery: str, image: str) -> dict:
    return backend.require(f"{backend.rg_id(rg)}/providers/{galleries.GALLERY_TYPE}/{gallery}/images/{image}")


@route("GET", COMPUTE + r"/galleries/(?P<gallery>[^/]+)")
def get_gallery(backend, req, sub, rg, gallery):
    return Response(200, backend.require(f"{backend.rg_id(rg)}/providers/{galleries.GALLERY_TYPE}/{gallery}"))


@route("GET", GALLERY_IMAGE)
def get_gallery_image(backend, req, sub, rg, gallery, image):
    return Response(200, _image(backend, rg, gallery, image))


@route("GET", GALLERY_IMAGE + r"/versions")
def list_gallery_image_versions(backend, req, sub, rg, gallery, image):
    found = _image(backend, rg, gallery, image)
    return page([galleries.without_replication(v) for v in galleries.versions_of(backend, found["id"])])


@route("GET", GALLERY_IMAGE + r"/versions/(?P<version>[^/]+)")
def get_gallery_image_version(backend, req, sub, rg, gallery, image, version):
    found = _image(backend, rg, gallery, image)
    match = backend.require(f"{found['id']}/versions/{version}")
    # replicationStatus only with $expand=ReplicationStatus (GalleryImageVersions_Get).
    expand = {e.strip().lower() for e in (req.query.get("$expand") or "").split(",")}
    return Response(200, match if "replicationstatus" in expand else galleries.without_replication(match))


def _register(pattern: str, community: bool) -> None:
    @route("GET", pattern)
    def get_image(backend, req, sub, location, name, image):
        found, unique = galleries.shared_image(backend, name, image, community=community)
        return Response(200,
                        galleries.shared_image_view(found, normalize_location(location), unique, community=community))

    @route("GET", pattern + r"/versions")
    def list_versions(backend, req, sub, location, name, image):
        found, unique = galleries.shared_versions(backend, location, name, image, community=community)
        loc = normalize_location(location)
        return page([galleries.shared_version_view(v, loc, f"{unique}/Versions/{v['name']}") for v in found])

    @route("GET", pattern + r"/versions/(?P<version>[^/]+)")
    def get_version(backend, req, sub, location, name, image, version):
        found, unique = galleries.shared_versions(backend, location, name, image, community=community)
        match = next((v for v in found if v["name"] == version), None)
        if match is None:
            raise ArmError(404, "ResourceNotFound", f"The gallery image version '{unique}/Versions/{version}' was not "
                                                    f"found in {location}.")
        return Response(200, galleries.shared_version_view(match, normalize_location(location),
                                                           f"{unique}/Versions/{version}"))


_register(COMMUNITY, True)
_register(SHARED, False)


@route("GET", COMPUTE + r"/images/(?P<name>[^/]+)", api_version="2026-04-01")
def get_managed_image(backend, req, sub, rg, name):
    return Response(200, backend.require(f"{backend.rg_id(rg)}/providers/{galleries.MANAGED_IMAGE_TYPE}/{name}"))
