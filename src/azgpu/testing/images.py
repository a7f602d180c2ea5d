"""Marketplace images (publisher:offer:sku:version) the fake knows, per location, from its own data.

`data/marketplace_images.json` holds the Azure HPC images and common bases with their versions and
properties in VirtualMachineImage's shape (plan, osDiskImage, features, hyperVGeneration,
architecture, imageDeprecationStatus ...); `FakeAzure.add_image` adds more in the store. Nothing
here reads azgpu's image catalog (profiles/images.toml).
"""

from __future__ import annotations

import copy
import json
from functools import cache
from importlib import resources

from .skus import normalize_location

DATA_FILE = "marketplace_images.json"
ACTIVE = {"imageState": "Active"}


def properties(hyper_v_generation: str = "V2", architecture: str = "x64", *, plan: dict | None = None,
               features: list[dict] | None = None, deprecation: dict | None = None,
               operating_system: str = "Linux") -> dict:
    """An image's properties in the API's shape (VirtualMachineImageProperties)."""
    out = {
        "hyperVGeneration": hyper_v_generation,
        "architecture": architecture,
        "osDiskImage": {"operatingSystem": operating_system, "sizeInGb": 30},
        "dataDiskImages": [],
        "automaticOSUpgradeProperties": {"automaticOSUpgradeSupported": False},
        "disallowed": {"vmDiskType": "Unmanaged"},
        "features": copy.deepcopy(features) if features is not None else [],
        "imageDeprecationStatus": copy.deepcopy(deprecation) if deprecation else dict(ACTIVE),
    }
    if plan:
        out["plan"] = {k: plan[k] for k in ("publisher", "name", "product")}
    return out


@cache
def seed_images() -> tuple[dict, ...]:
    """One entry per version: {"location": "*", publisher, offer, sku, version, "properties"}."""
    data = json.loads(resources.files(__package__).joinpath("data", DATA_FILE).read_text(encoding="utf-8"))
    return tuple({"location": "*", "publisher": image["publisher"], "offer": image["offer"], "sku": image["sku"],
                  "version": version, "properties": image["properties"]}
                 for image in data["images"] for version in image["versions"])


def added_image(location: str, publisher: str, offer: str, sku: str, version: str, props: dict) -> dict:
    return {"location": normalize_location(location), "publisher": publisher, "offer": offer, "sku": sku,
            "version": version, "properties": props}


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


def plan_of(image: dict) -> dict | None:
    return image["properties"].get("plan")
