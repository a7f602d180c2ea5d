"""The image catalog (profiles/images.toml): what azgpu knows offline about marketplace images."""

from __future__ import annotations

import re
from functools import cache

from msgspec import Struct, structs

from .errors import InputError, ProfileError
from .resource_types import GALLERY_IMAGE, MANAGED_IMAGE
from .shipped_data import data_dir, read_toml
from .sources import known_source

URN_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*:[A-Za-z0-9][A-Za-z0-9._-]*"
                    r":[A-Za-z0-9][A-Za-z0-9._-]*:[A-Za-z0-9][A-Za-z0-9._-]*$")
# Images that are not marketplace URNs, in the forms imageReference takes them (ImageReference, compute
# api 2026-04-01): `id` for a gallery image definition (latest version) or version and for a managed
# image; `communityGalleryImageId` and `sharedGalleryImageId` for community and direct-shared galleries.
_SEGMENT = r"[^/\s]+"
_ARM = (rf"^/subscriptions/(?P<subscription>{_SEGMENT})/resourceGroups/(?P<resource_group>{_SEGMENT})/providers/"
        rf"{re.escape(GALLERY_IMAGE.namespace)}/")
# Matched case-insensitively and compiled on first use (re's own cache): a marketplace image never needs them.
IMAGE_ID_FORMS: dict[str, str] = {
    "gallery": _ARM + rf"galleries/(?P<gallery>{_SEGMENT})/images/(?P<definition>{_SEGMENT})"
               rf"(?:/versions/(?P<version>{_SEGMENT}))?/?$",
    "managed": _ARM + rf"images/(?P<definition>{_SEGMENT})/?$",
    "community": rf"^/CommunityGalleries/(?P<gallery>{_SEGMENT})/Images/(?P<definition>{_SEGMENT})"
                 rf"(?:/Versions/(?P<version>{_SEGMENT}))?/?$",
    "shared": rf"^/SharedGalleries/(?P<gallery>{_SEGMENT})/Images/(?P<definition>{_SEGMENT})"
              rf"(?:/Versions/(?P<version>{_SEGMENT}))?/?$",
}
IMAGE_ID_EXAMPLES = {
    "gallery": GALLERY_IMAGE.example_id("GALLERY", "DEFINITION") + "[/versions/1.0.0]",
    "managed": MANAGED_IMAGE.example_id("NAME"),
    "community": "/CommunityGalleries/PUBLIC_NAME/Images/DEFINITION[/Versions/1.0.0]",
    "shared": "/SharedGalleries/UNIQUE_NAME/Images/DEFINITION[/Versions/1.0.0]",
}
IMAGE_KIND_LABELS = {"gallery": "Azure Compute Gallery image", "managed": "managed image",
                     "community": "community gallery image", "shared": "direct-shared gallery image"}
IMAGE_KEYS = {
    "name", "urn", "os", "os_family", "os_version", "generations", "architecture", "hpc", "ofed", "gpu_stack",
    "nvidia_driver", "cuda", "series", "legacy", "verified", "source", "notes", "plan", "imex",
}
PLAN_KEYS = ("publisher", "product", "name")


class PurchasePlan(Struct, frozen=True):
    """A marketplace image's purchase plan: the scale set must carry it, and its terms must be
    accepted once per subscription (Learn: cli-ps-findimage, "Check the purchase plan information")."""

    publisher: str
    product: str
    name: str

    def arm(self) -> dict:
        """The scale set's top-level `plan` (VirtualMachineScaleSet_Create_WithAMarketplaceImagePlan)."""
        return {"name": self.name, "publisher": self.publisher, "product": self.product}

    @classmethod
    def from_api(cls, plan) -> PurchasePlan | None:
        """From the image API's plan (a dict or an SDK model), or None without one."""
        if plan is None:
            return None
        get = plan.get if isinstance(plan, dict) else (lambda k: getattr(plan, k, None))
        values = [get(k) for k in PLAN_KEYS]
        return cls(*values) if all(values) else None


class Image(Struct, frozen=True):
    name: str
    urn: str
    os: str = ""
    os_family: str = ""
    os_version: str = ""
    generations: tuple[str, ...] = ()
    architecture: str = ""
    hpc: bool = False
    ofed: str = ""
    gpu_stack: str = ""
    nvidia_driver: str = ""
    cuda: str = ""
    # Ships NVIDIA IMEX (nvidia-imex service and IMEX channel 0), which multi-node NVLink on GB200/GB300 needs.
    imex: bool = False
    series: tuple[str, ...] = ()
    legacy: str = ""
    verified: bool = True
    source: tuple[str, ...] = ()
    notes: str = ""
    plan: PurchasePlan | None = None  # marketplace purchase plan, for images that carry one
    known: bool = True  # False for a URN the catalog does not hold
    # Set for gallery, community, direct-shared and managed images, whose properties are read live.
    image_id: ImageId | None = None

    @property
    def kind(self) -> str:
        return self.image_id.kind if self.image_id else "marketplace"

    @property
    def publisher(self) -> str:
        return self.urn.split(":")[0]

    @property
    def offer(self) -> str:
        return self.urn.split(":")[1]

    @property
    def sku(self) -> str:
        return self.urn.split(":")[2]

    @property
    def version(self) -> str:
        return self.urn.split(":")[3]

    @property
    def is_windows(self) -> bool:
        return self.os_family == "windows"

    def reference(self) -> dict:
        """ARM imageReference."""
        if self.image_id is not None:
            return self.image_id.reference()
        return {"publisher": self.publisher, "offer": self.offer, "sku": self.sku, "version": self.version}


class ImageId(Struct, frozen=True):
    """A gallery, community, direct-shared or managed image ID, split into its parts.

    version None means the latest version ("latest" is accepted and means the same); a managed
    image has no gallery and keeps its name in `definition`.
    """

    kind: str  # gallery | managed | community | shared
    text: str  # as the user wrote it
    definition: str
    subscription: str = ""
    resource_group: str = ""
    gallery: str = ""
    version: str | None = None

    @property
    def label(self) -> str:
        return IMAGE_KIND_LABELS[self.kind]

    @property
    def definition_id(self) -> str:
        """The image definition (or managed image) without a version."""
        if self.kind == "gallery":
            return (f"/subscriptions/{self.subscription}/resourceGroups/{self.resource_group}"
                    f"{GALLERY_IMAGE.provider_path(self.gallery, self.definition)}")
        if self.kind == "managed":
            return self.text.rstrip("/")
        prefix = "CommunityGalleries" if self.kind == "community" else "SharedGalleries"
        return f"/{prefix}/{self.gallery}/Images/{self.definition}"

    def reference(self) -> dict:
        if self.kind in ("gallery", "managed"):
            # A definition's ID deploys its latest version (Learn: Store and share images in an Azure
            # Compute Gallery); "versions/latest" is written that way.
            version = f"/versions/{self.version}" if self.kind == "gallery" and self.version else ""
            return {"id": self.definition_id + version}
        version = f"/Versions/{self.version or 'latest'}"
        key = "communityGalleryImageId" if self.kind == "community" else "sharedGalleryImageId"
        return {key: self.definition_id + version}


def parse_image_id(text: str) -> ImageId | None:
    """The ImageId of a gallery/community/shared/managed image ID, or None for anything else."""
    for kind, pattern in IMAGE_ID_FORMS.items():
        match = re.match(pattern, text.strip(), re.I)
        if match:
            parts = match.groupdict()
            version = parts.get("version")
            if version and version.lower() == "latest":
                version = None
            return ImageId(kind=kind, text=text.strip(), definition=parts["definition"],
                           subscription=parts.get("subscription") or "",
                           resource_group=parts.get("resource_group") or "",
                           gallery=parts.get("gallery") or "", version=version)
    return None


def _key(urn: str) -> str:
    """publisher:offer:sku, case-insensitively: the version does not change what an image is."""
    return ":".join(urn.lower().split(":")[:3])


@cache
def catalog() -> dict[str, Image]:
    raw = read_toml(data_dir("profiles") / "images.toml")
    out: dict[str, Image] = {}
    for i, entry in enumerate(raw.get("image", [])):
        where = f"images.toml [[image]] #{i + 1}"
        unknown = set(entry) - IMAGE_KEYS
        if unknown:
            raise ProfileError(f"{where}: unknown key(s) {sorted(unknown)}")
        for key in ("name", "urn", "generations", "architecture", "source"):
            if key not in entry:
                raise ProfileError(f"{where}: missing key '{key}'")
        if not URN_RE.fullmatch(entry["urn"]):
            raise ProfileError(f"{where}: 'urn' {entry['urn']!r} is not publisher:offer:sku:version")
        fields = dict(entry)
        for key in ("generations", "series"):
            fields[key] = tuple(fields.get(key, ()))
        if "plan" in fields:
            plan = fields["plan"]
            if (not isinstance(plan, dict) or set(plan) != set(PLAN_KEYS)
                    or not all(isinstance(v, str) and v for v in plan.values())):
                raise ProfileError(f"{where}: 'plan' must be a table with publisher, product and name")
            fields["plan"] = PurchasePlan(**plan)
        src = fields["source"]
        fields["source"] = (src,) if isinstance(src, str) else tuple(src)
        unknown = [k for k in fields["source"] if not known_source(k)]
        if unknown:
            raise ProfileError(f"{where}: unknown source(s) {unknown}: add them to profiles/sources.toml")
        image = Image(**fields)
        if image.name in out:
            raise ProfileError(f"{where}: duplicate image name {image.name!r}")
        out[image.name] = image
    return out


@cache
def _by_urn() -> dict[str, Image]:
    return {_key(img.urn): img for img in catalog().values()}


def resolve(ref: str) -> Image:
    """A catalog name or a URN. A URN the catalog does not know comes back with known=False."""
    ref = ref.strip()
    if ref.lower() in catalog():
        return catalog()[ref.lower()]
    if ref.startswith("/"):
        image_id = parse_image_id(ref)
        if image_id is None:
            forms = "; ".join(IMAGE_ID_EXAMPLES.values())
            raise InputError(f"image '{ref}' is not an image ID azgpu knows", code="INVALID_IMAGE_ID",
                             remedy=f"pass one of these forms: {forms}")
        return Image(name=ref, urn=ref, known=False, verified=False, image_id=image_id)
    if URN_RE.fullmatch(ref):
        found = _by_urn().get(_key(ref))
        if found:
            if found.version.lower() != ref.split(":")[3].lower():
                return structs.replace(found, urn=ref)
            return found
        return Image(name=ref, urn=ref, known=False, verified=False)
    import difflib

    near = difflib.get_close_matches(ref.lower(), list(catalog()), n=1, cutoff=0.5)
    hint = f"did you mean '{near[0]}'? " if near else ""
    raise InputError(
        f"image '{ref}' is neither a catalog name, a URN (publisher:offer:sku:version) nor an image ID",
        code="INVALID_IMAGE",
        remedy=f"{hint}use a catalog name ('provision images list'), a full URN such as "
               f"microsoft-dsvm:ubuntu-hpc:2204:latest, or a gallery image ID such as {IMAGE_ID_EXAMPLES['gallery']}",
    )


def ofed_key(version: str) -> tuple:
    """Order MLNX_OFED and DOCA-OFED versions on one line.

    NVIDIA replaced MLNX_OFED (4.x, 5.x, then 23.xx/24.xx) with DOCA-OFED (2.7 onward) in 2024, so
    every DOCA release is newer than every MLNX_OFED release even though its number is smaller.
    """
    kind, _, number = version.partition(":")
    if kind not in ("mlnx", "doca") or not number:
        raise ValueError(f"OFED version {version!r} must be 'mlnx:<version>' or 'doca:<version>'")
    parts = tuple(int(p) if p.isdigit() else 0 for p in re.split(r"[.-]", number))
    return (1 if kind == "doca" else 0, parts)


def ofed_display(version: str) -> str:
    kind, _, number = version.partition(":")
    return f"{'DOCA-OFED' if kind == 'doca' else 'MLNX_OFED'} {number}"
