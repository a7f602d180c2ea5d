"""Resource SKUs (Microsoft.Compute/skus) seeded from azgpu's own profiles, as ARM returns them."""

from __future__ import annotations

import copy
import tomllib
from dataclasses import dataclass
from functools import cache

DEFAULT_LOCATIONS = (
    "eastus", "eastus2", "westus2", "westus3", "southcentralus",
    "northeurope", "westeurope", "swedencentral", "japaneast", "australiaeast",
)
ZONES = ["1", "2", "3"]


@dataclass(frozen=True)
class SizeSpec:
    """What a SKU entry needs from a size; profiles provide most, GENERAL_SIZES the rest."""

    name: str
    family: str
    vcpus: int
    memory_gib: float
    gpus: int = 0
    max_data_disks: int = 8
    max_nics: int = 2
    generations: tuple[str, ...] = ("V1", "V2")
    arch: str = "x64"
    rdma: bool = False
    accelerated_networking: bool = True
    premium_io: bool = True
    ephemeral_os_disk: bool = False
    spot: bool = True
    trusted_launch_disabled: bool = False
    temp_disk_gib: float = 0
    retired: str = ""


# Small general-purpose sizes, for jump boxes and for users' own scripts.
GENERAL_SIZES = (
    SizeSpec("Standard_D2s_v5", "standardDSv5Family", 2, 8, max_data_disks=4, max_nics=2),
    SizeSpec("Standard_D4s_v5", "standardDSv5Family", 4, 16, max_data_disks=8, max_nics=2),
)


def normalize_location(location: str) -> str:
    return location.replace(" ", "").lower()


def _spec_from_size(size) -> SizeSpec:
    return SizeSpec(
        name=size.name,
        family=size.cap("quota_family"),
        vcpus=int(size.vcpus),
        memory_gib=float(size.memory_gib),
        gpus=int(size.gpus),
        max_data_disks=int(size.max_data_disks),
        max_nics=int(size.max_nics),
        generations=tuple(size.generations),
        arch=size.arch,
        rdma=size.infiniband,
        accelerated_networking=size.cap("accelerated_networking") is True,
        premium_io=size.cap("premium_storage") is True,
        ephemeral_os_disk=size.cap("ephemeral_os_disk") is True,
        # Most GPU sizes are spot-capable; only a documented "no" says otherwise.
        spot=size.cap("spot") is not False,
        trusted_launch_disabled=size.cap("trusted_launch") is False,
        temp_disk_gib=float(size.temp_disk_gib),
        retired=size.retired,
    )


def _profiles() -> list:
    """Every profile that loads. A broken profile (or a failing rule check) must not take the fake
    down with it: then each file is parsed on its own and the ones that parse are used."""
    from azgpu import profiles

    try:
        return profiles.list_profiles()
    except Exception:  # noqa: BLE001 - fall back to parsing each file on its own, without rule checks
        pass
    loaded = []
    for profile_id in profiles.profile_ids():
        path = profiles.profiles_dir() / f"{profile_id}.toml"
        try:
            with path.open("rb") as fh:
                loaded.append(profiles.parse_profile(tomllib.load(fh), str(path)))
        except Exception:  # noqa: BLE001
            continue
    return loaded


@cache
def seed_specs() -> tuple[SizeSpec, ...]:
    specs: dict[str, SizeSpec] = {}
    for profile in _profiles():
        for size in profile.sizes:
            try:
                specs.setdefault(size.name.lower(), _spec_from_size(size))
            except Exception:  # noqa: BLE001 - a half-written size is skipped, not fatal
                continue
    for spec in GENERAL_SIZES:
        specs.setdefault(spec.name.lower(), spec)
    return tuple(specs.values())


def _flag(value: bool) -> str:
    return "True" if value else "False"


def location_restriction(location: str, reason: str = "NotAvailableForSubscription") -> dict:
    return {
        "type": "Location",
        "values": [location],
        "restrictionInfo": {"locations": [location]},
        "reasonCode": reason,
    }


def sku_json(spec: SizeSpec, location: str) -> dict:
    caps = [
        ("MaxResourceVolumeMB", str(int(spec.temp_disk_gib * 1024))),
        ("vCPUs", str(spec.vcpus)),
        ("HyperVGenerations", ",".join(spec.generations)),
        ("MemoryGB", f"{spec.memory_gib:g}"),
        ("MaxDataDiskCount", str(spec.max_data_disks)),
        ("CpuArchitectureType", spec.arch),
        ("LowPriorityCapable", _flag(spec.spot)),
        ("PremiumIO", _flag(spec.premium_io)),
        ("VMDeploymentTypes", "IaaS"),
        ("vCPUsAvailable", str(spec.vcpus)),
        ("GPUs", str(spec.gpus)) if spec.gpus else None,
        ("EphemeralOSDiskSupported", _flag(spec.ephemeral_os_disk)),
        ("AcceleratedNetworkingEnabled", _flag(spec.accelerated_networking)),
        ("RdmaEnabled", _flag(spec.rdma)),
        ("MaxNetworkInterfaces", str(spec.max_nics)),
        ("TrustedLaunchDisabled", "True") if spec.trusted_launch_disabled else None,
    ]
    return {
        "resourceType": "virtualMachines",
        "name": spec.name,
        "tier": "Standard",
        "size": spec.name.removeprefix("Standard_"),
        "family": spec.family,
        "locations": [location],
        "locationInfo": [{"location": location, "zones": list(ZONES), "zoneDetails": []}],
        "capabilities": [{"name": n, "value": v} for n, v in filter(None, caps)],
        "restrictions": [location_restriction(location)] if spec.retired else [],
    }


def _capability_value(value) -> str:
    return _flag(value) if isinstance(value, bool) else str(value)


def apply_overrides(sku: dict, location: str, overrides: dict) -> dict:
    """set_sku's keywords: restrictions, zones, family, capabilities={...}, or any capability by name."""
    for name, value in overrides.items():
        if name == "restrictions":
            sku["restrictions"] = [_full_restriction(r, location) for r in value]
        elif name == "zones":
            sku["locationInfo"] = [{"location": location, "zones": [str(z) for z in value], "zoneDetails": []}]
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


def _full_restriction(restriction: dict, location: str) -> dict:
    """Complete a short restriction ({"type": "Zone", "zones": ["1"]}) to ARM's full shape."""
    out = copy.deepcopy(restriction)
    out.setdefault("type", "Location")
    out.setdefault("reasonCode", "NotAvailableForSubscription")
    out.setdefault("values", [location])
    info = out.setdefault("restrictionInfo", {"locations": [location]})
    if "zones" in out:
        info["zones"] = [str(z) for z in out.pop("zones")]
    return out


def capability(sku: dict, name: str, default: str | None = None) -> str | None:
    for cap in sku.get("capabilities", ()):
        if cap["name"].lower() == name.lower():
            return cap["value"]
    return default


class SkuCatalog:
    """The SKUs of each location: the seed, with the store's overrides replayed on top."""

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
        return {spec.name.lower(): sku_json(spec, location) for spec in seed_specs()}

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

    def _new_sku(self, size: str, location: str) -> dict:
        spec = next((s for s in seed_specs() if s.name.lower() == size.lower()), None)
        if spec is None:
            spec = SizeSpec(size, f"standard{size.removeprefix('Standard_')}Family", vcpus=2, memory_gib=8)
        return sku_json(spec, location)

    def all_locations(self) -> list[str]:
        extra = [e["location"] for e in self.overrides if e["location"] not in self.locations]
        return list(dict.fromkeys([*self.locations, *extra]))

    def find(self, location: str, size: str) -> dict | None:
        return next((s for s in self.in_location(location) if s["name"].lower() == size.lower()), None)

    def set(self, location: str, size: str, overrides: dict) -> None:
        self.overrides.append({"location": normalize_location(location), "size": size, "overrides": overrides})
