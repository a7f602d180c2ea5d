"""Marketplace images (publisher:offer:sku:version) the fake knows, per location."""

from __future__ import annotations

import tomllib
from functools import cache

from .skus import normalize_location

SEED_VERSION = "2025.11.01"

# (urn, Hyper-V generation, architecture): the Azure HPC images of facts §6.1 and common bases,
# so deploys work before (or without) profiles/images.toml.
SEED_IMAGES = (
    ("microsoft-dsvm:ubuntu-hpc:1804", "V2", "x64"),
    ("microsoft-dsvm:ubuntu-hpc:2004", "V2", "x64"),
    ("microsoft-dsvm:ubuntu-hpc:2204", "V2", "x64"),
    ("microsoft-dsvm:ubuntu-hpc:2204-v100", "V2", "x64"),
    ("microsoft-dsvm:ubuntu-hpc:2204-rocm", "V2", "x64"),
    ("microsoft-dsvm:ubuntu-hpc:2404", "V2", "x64"),
    ("microsoft-dsvm:ubuntu-hpc:2404-rocm", "V2", "x64"),
    ("microsoft-dsvm:ubuntu-hpc:2404-gb", "V2", "Arm64"),
    ("OpenLogic:CentOS-HPC:7_9", "V1", "x64"),
    ("OpenLogic:CentOS-HPC:7_9-gen2", "V2", "x64"),
    ("almalinux:almalinux-hpc:8_10-hpc", "V1", "x64"),
    ("almalinux:almalinux-hpc:8_10-hpc-gen2", "V2", "x64"),
    ("almalinux:almalinux-hpc:8_10-hpc-v100-gen2", "V2", "x64"),
    ("almalinux:almalinux-hpc:9-hpc-gen2", "V2", "x64"),
    ("azure-hpc:azurelinux-hpc:3", "V2", "x64"),
    ("azure-hpc:azurelinux-hpc:3-v100", "V2", "x64"),
    ("Canonical:0001-com-ubuntu-server-jammy:22_04-lts", "V1", "x64"),
    ("Canonical:0001-com-ubuntu-server-jammy:22_04-lts-gen2", "V2", "x64"),
    ("Canonical:ubuntu-24_04-lts:server", "V2", "x64"),
    ("Canonical:ubuntu-24_04-lts:server-arm64", "V2", "Arm64"),
    ("almalinux:almalinux-x86_64:8-gen2", "V2", "x64"),
    ("almalinux:almalinux-x86_64:9-gen2", "V2", "x64"),
    ("RedHat:RHEL:8-lvm-gen2", "V2", "x64"),
    ("RedHat:RHEL:9-lvm-gen2", "V2", "x64"),
)


def _image(publisher: str, offer: str, sku: str, version: str, generation: str, arch: str, location: str = "*",
           generations: list[str] | None = None) -> dict:
    # hyperVGeneration is what the image API shows; generations is what it can boot as (a catalog
    # entry may list both).
    return {"location": location, "publisher": publisher, "offer": offer, "sku": sku, "version": version,
            "hyperVGeneration": generation, "generations": generations or [generation], "architecture": arch}


def _from_images_toml() -> list[dict]:
    from azgpu.profiles import profiles_dir

    path = profiles_dir() / "images.toml"
    if not path.is_file():
        return []
    with path.open("rb") as fh:
        data = tomllib.load(fh)
    out = []
    for table in data.get("image", []):
        parts = str(table.get("urn", "")).split(":")
        if len(parts) != 4:
            continue
        publisher, offer, sku, version = parts
        generations = table.get("generations") or ["V2"]
        generation = "V2" if "V2" in generations else generations[0]
        out.append(_image(publisher, offer, sku, SEED_VERSION if version == "latest" else version,
                          generation, table.get("architecture", "x64"), generations=list(generations)))
    return out


@cache
def seed_images() -> tuple[dict, ...]:
    images = [_image(*urn.split(":"), SEED_VERSION, gen, arch) for urn, gen, arch in SEED_IMAGES]
    try:
        images += _from_images_toml()
    except Exception:  # noqa: BLE001 - images.toml is being written by others; a broken one must not stop the fake
        pass
    return tuple(images)


def added_image(location: str, publisher: str, offer: str, sku: str, version: str, generation: str, arch: str) -> dict:
    return _image(publisher, offer, sku, version, generation, arch, normalize_location(location))


def versions(added: list[dict], location: str, publisher: str, offer: str, sku: str) -> list[dict]:
    """Matching image versions, sorted by version; marketplace names compare case-insensitively."""
    location = normalize_location(location)
    want = (publisher.lower(), offer.lower(), sku.lower())
    found: dict[str, dict] = {}
    for image in (*seed_images(), *added):
        if image["location"] not in ("*", location):
            continue
        if (image["publisher"].lower(), image["offer"].lower(), image["sku"].lower()) == want:
            found[image["version"]] = image
    return [found[v] for v in sorted(found, key=_version_key)]


def _version_key(version: str) -> tuple:
    return tuple(int(p) if p.isdigit() else 0 for p in version.split("."))


def find(added: list[dict], location: str, publisher: str, offer: str, sku: str, version: str) -> dict | None:
    matches = versions(added, location, publisher, offer, sku)
    if version.lower() == "latest":
        return matches[-1] if matches else None
    return next((m for m in matches if m["version"] == version), None)
