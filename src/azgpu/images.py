"""The image catalog (profiles/images.toml): what azgpu knows offline about marketplace images."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache

from .errors import InputError, ProfileError
from .sources import known_source
from .resources import data_dir, read_toml

URN_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*:[A-Za-z0-9][A-Za-z0-9._-]*:[A-Za-z0-9][A-Za-z0-9._-]*:[A-Za-z0-9][A-Za-z0-9._-]*$")
IMAGE_KEYS = {
    "name", "urn", "os", "os_family", "os_version", "generations", "architecture", "hpc", "ofed", "gpu_stack",
    "nvidia_driver", "cuda", "series", "legacy", "verified", "source", "notes",
}


@dataclass(frozen=True)
class Image:
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
    series: tuple[str, ...] = ()
    legacy: str = ""
    verified: bool = True
    source: tuple[str, ...] = ()
    notes: str = ""
    known: bool = True  # False for a URN the catalog does not hold

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
        return {"publisher": self.publisher, "offer": self.offer, "sku": self.sku, "version": self.version}


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
    if URN_RE.fullmatch(ref):
        found = _by_urn().get(_key(ref))
        if found:
            if found.version.lower() != ref.split(":")[3].lower():
                return Image(**{**found.__dict__, "urn": ref})
            return found
        return Image(name=ref, urn=ref, known=False, verified=False)
    import difflib

    near = difflib.get_close_matches(ref.lower(), list(catalog()), n=1, cutoff=0.5)
    hint = f"did you mean '{near[0]}'? " if near else ""
    raise InputError(
        f"image '{ref}' is neither a catalog name nor a URN (publisher:offer:sku:version)",
        code="INVALID_IMAGE",
        remedy=f"{hint}use a catalog name ('provision images list') or a full URN such as microsoft-dsvm:ubuntu-hpc:2204:latest",
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
