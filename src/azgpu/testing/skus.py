"""Resource SKUs (Microsoft.Compute/skus) as ARM returns them, from the fake's own data.

The entries come from `data/resource_skus.json`: recordings of the real Resource SKUs API where
one exists, entries written in the API's shape from Microsoft's size pages where none does (each
marked so in the file's provenance), and a simulated subscription saying where each size is
offered, in which zones and with which restrictions. Nothing here reads azgpu's profiles: a fake
built from the product's own beliefs could only agree with them.
"""

from __future__ import annotations

import copy
import json
from functools import cache
from importlib import resources

DEFAULT_LOCATIONS = (
    "eastus", "eastus2", "westus2", "westus3", "westcentralus", "southcentralus",
    "northeurope", "westeurope", "swedencentral", "japaneast", "australiaeast",
)
DATA_FILE = "resource_skus.json"


def normalize_location(location: str) -> str:
    return location.replace(" ", "").lower()


@cache
def catalog_data() -> dict:
    """The parsed data file (provenance, offers, skus); callers copy what they change."""
    return json.loads(resources.files(__package__).joinpath("data", DATA_FILE).read_text(encoding="utf-8"))


@cache
def _entries() -> dict[str, dict]:
    return {sku["name"].lower(): sku for sku in catalog_data()["skus"]}


def provenance(size: str) -> dict | None:
    """Where the entry of `size` comes from: {"kind": "recorded" | "written", "source", "notes"}."""
    return next((v for k, v in catalog_data()["provenance"].items() if k.lower() == size.lower()), None)


def full_restriction(restriction: dict, location: str) -> dict:
    """A short restriction ({"type": "Zone", "zones": ["1"]}) in the shape Azure lists it.

    The shape follows a recorded restriction (Standard_A0 in westcentralus, karpenter-provider-azure
    pkg/fake/zz_generated.sku.westcentralus.go): type, values [location], restrictionInfo with
    locations and zones (empty for a Location restriction), reasonCode.
    """
    out = copy.deepcopy(restriction)
    out.setdefault("type", "Location")
    out.setdefault("reasonCode", "NotAvailableForSubscription")
    out.setdefault("values", [location])
    info = out.setdefault("restrictionInfo", {"locations": [location]})
    info["zones"] = [str(z) for z in out.pop("zones", info.get("zones", []))]
    return out


def _offer(size: str, location: str) -> dict | None:
    """{"zones", "restrictions"} for a size in a location of the simulated subscription, None when not offered."""
    offers = next((v for k, v in catalog_data()["offers"].items() if k.lower() == size.lower()), None)
    if offers is None:
        return None
    by_location = offers.get("locations") or {}
    if location in by_location:
        return by_location[location]
    return offers.get("default")


def sku_in(size: str, location: str) -> dict | None:
    """The catalog entry of `size` as the API lists it for `location`, or None when not offered there."""
    entry = _entries().get(size.lower())
    offer = _offer(size, location) if entry else None
    if offer is None:
        return None
    sku = copy.deepcopy(entry)
    sku["locations"] = [location]
    info = {"location": location, "zones": [str(z) for z in offer.get("zones", [])]}
    recorded = next((i for i in entry.get("locationInfo", ()) if i.get("location") == location), None)
    if recorded is not None and "zoneDetails" in recorded:
        info["zoneDetails"] = copy.deepcopy(recorded["zoneDetails"])
    sku["locationInfo"] = [info]
    sku["restrictions"] = [full_restriction(r, location) for r in offer.get("restrictions", [])]
    return sku


def _capability_value(value) -> str:
    if isinstance(value, bool):
        return "True" if value else "False"
    return str(value)


def apply_overrides(sku: dict, location: str, overrides: dict) -> dict:
    """set_sku's keywords: restrictions, zones, family, capabilities={...}, or any capability by name
    (a value of None removes the capability, as Azure leaves some out)."""
    for name, value in overrides.items():
        if name == "restrictions":
            sku["restrictions"] = [full_restriction(r, location) for r in value]
        elif name == "zones":
            sku["locationInfo"] = [{"location": location, "zones": [str(z) for z in value]}]
        elif name in ("family", "tier", "size"):
            sku[name] = value
        elif name == "capabilities":
            apply_overrides(sku, location, value)
        else:
            caps = [c for c in sku["capabilities"] if c["name"].lower() != name.lower()]
            if value is not None:
                caps.append({"name": name, "value": _capability_value(value)})
            sku["capabilities"] = caps
    return sku


def capability(sku: dict, name: str, default: str | None = None) -> str | None:
    for cap in sku.get("capabilities", ()):
        if cap["name"].lower() == name.lower():
            return cap["value"]
    return default


def is_gpu(sku: dict) -> bool:
    """A GPU size: the GPUs capability when Azure reports it, else the N in the size name.

    Azure leaves GPUs out for some GPU sizes (GB200/GB300, facts sheet section 4); every N-series
    size is a GPU size ("N" is the GPU family letter in Azure's size naming, D-naming).
    """
    gpus = capability(sku, "GPUs")
    if gpus is not None:
        return int(gpus) > 0
    return sku.get("name", "").lower().startswith("standard_n")


def _new_sku(size: str, location: str) -> dict:
    """A size set_sku names that the catalog lacks: the smallest entry the API could list."""
    return {
        "resourceType": "virtualMachines", "name": size, "tier": "Standard", "size": size.removeprefix("Standard_"),
        "family": f"standard{size.removeprefix('Standard_')}Family", "locations": [location],
        "locationInfo": [{"location": location, "zones": []}],
        "capabilities": [{"name": "vCPUs", "value": "2"}, {"name": "MemoryGB", "value": "8"},
                         {"name": "HyperVGenerations", "value": "V1,V2"},
                         {"name": "CpuArchitectureType", "value": "x64"}],
        "restrictions": [],
    }


@cache
def _seeded(location: str) -> dict[str, dict]:
    """The data file's SKUs in a location (the fake's own catalog, never changed: copies are handed out)."""
    found = (sku_in(sku["name"], location) for sku in catalog_data()["skus"])
    return {sku["name"].lower(): sku for sku in found if sku is not None}


class SkuCatalog:
    """The SKUs of each location: the data file's, with the store's overrides replayed on top."""

    def __init__(self, store, locations: tuple[str, ...], seed: bool):
        self.store = store  # overrides live in the store, so set_sku persists with the state file
        self.locations = locations
        self.seed = seed

    @property
    def overrides(self) -> list[dict]:
        return self.store.sku_overrides

    def _base(self, location: str) -> dict[str, dict]:
        if not self.seed or location not in self.locations:
            return {}
        return {name: copy.deepcopy(sku) for name, sku in _seeded(location).items()}

    def in_location(self, location: str) -> list[dict]:
        location = normalize_location(location)
        skus = self._base(location)
        for entry in self.overrides:
            if entry["location"] != location:
                continue
            name = entry["size"].lower()
            if name not in skus:
                skus[name] = self._new_sku(entry["size"], location)
            apply_overrides(skus[name], location, entry["overrides"])
        return list(skus.values())

    @staticmethod
    def _new_sku(size: str, location: str) -> dict:
        """A size set_sku offers where the simulated subscription does not: the catalog's entry when it
        has one (unrestricted, no zones, until the overrides say more), else a minimal one."""
        entry = _entries().get(size.lower())
        if entry is None:
            return _new_sku(size, location)
        sku = copy.deepcopy(entry)
        sku.update(locations=[location], locationInfo=[{"location": location, "zones": []}], restrictions=[])
        return sku

    def read_only(self, location: str) -> list[dict]:
        """in_location() for a caller that only reads: without overrides in the location, the seeded entries
        themselves, not copies (quota's usages read every size's family at each scale set's PUT, twice: the
        copies of the whole catalog were about 6 % of a 5,000-node create's CPU). Never change what it returns."""
        location = normalize_location(location)
        if any(e["location"] == location for e in self.overrides):
            return self.in_location(location)
        return list(_seeded(location).values()) if self.seed and location in self.locations else []

    def all_locations(self) -> list[str]:
        extra = [e["location"] for e in self.overrides if e["location"] not in self.locations]
        return list(dict.fromkeys([*self.locations, *extra]))

    def find(self, location: str, size: str) -> dict | None:
        location = normalize_location(location)
        if not any(e["location"] == location and e["size"].lower() == size.lower() for e in self.overrides):
            # No override for it: the seeded entry, without building the location's whole catalog (a
            # scale set's PUT looks its size up; 100 of them rebuilt it 100 times).
            seeded = _seeded(location).get(size.lower()) if self.seed and location in self.locations else None
            return copy.deepcopy(seeded) if seeded is not None else None
        return next((s for s in self.in_location(location) if s["name"].lower() == size.lower()), None)

    def set(self, location: str, size: str, overrides: dict) -> None:
        self.overrides.append({"location": normalize_location(location), "size": size, "overrides": overrides})


def check_bootable(sku: dict, size: str, generation: str, architecture: str, image: str) -> None:
    """ARM's 400 when the size cannot boot an image of this Hyper-V generation or CPU architecture
    (marketplace, gallery and managed images alike)."""
    from .errors import ArmError

    generations = [g.strip() for g in (capability(sku, "HyperVGenerations") or "V1").split(",")]
    if generation not in generations:
        number = generation[1:]
        raise ArmError(400, "BadRequest",
                       f"The selected VM size '{size}' cannot boot Hypervisor Generation '{number}'. If this was a "
                       "Create operation please check that the Hypervisor Generation of the Image matches the "
                       f"Hypervisor Generation of the selected VM Size. If this was an Update operation please "
                       f"select a Hypervisor Generation '{number}' VM Size. For more information, see "
                       "https://aka.ms/azuregen2vm")
    arch = capability(sku, "CpuArchitectureType") or "x64"
    if architecture.lower() != arch.lower():
        # Azure's exact wording for this case is not documented; the code is what callers should use.
        raise ArmError(400, "BadRequest",
                       f"The selected VM size '{size}' has CPU architecture '{arch}' and cannot boot "
                                          f"{image} of architecture '{architecture}'.")
