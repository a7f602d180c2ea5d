"""Preflight against the live subscription: SKU, capabilities, quota, image. Reads only, all findings at once."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..errors import Finding
from ..validate import Spec

SOURCE_SKUS = "Azure Resource SKUs API (az vm list-skus --all)"
SOURCE_USAGE = "Azure usage API (az vm list-usage)"
SOURCE_IMAGES = "Azure marketplace images API (az vm image list --all)"


def norm_family(name: str) -> str:
    """Quota family names come with stray spaces and mixed case (facts sheet, section 4)."""
    return name.replace(" ", "").lower()


@dataclass
class QuotaLine:
    name: str
    usage: int
    limit: int
    needed: int

    @property
    def ok(self) -> bool:
        return self.usage + self.needed <= self.limit

    def as_dict(self) -> dict[str, Any]:
        out = {"quota": self.name, "usage": self.usage, "limit": self.limit, "needed": self.needed}
        if not self.ok:
            out["request_limit"] = self.usage + self.needed
        return out


@dataclass
class Preflight:
    findings: list[Finding] = field(default_factory=list)
    quota: list[QuotaLine] = field(default_factory=list)
    capabilities: dict[str, str] = field(default_factory=dict)
    zones: list[str] = field(default_factory=list)
    # Live values that override documented ones for what the request needs.
    overrides: dict[str, Any] = field(default_factory=dict)

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.is_error]

    def as_dict(self) -> dict[str, Any]:
        return {
            "findings": [f.as_dict() for f in self.findings],
            "quota": [q.as_dict() for q in self.quota],
            "zones": self.zones,
        }


def _err(code, message, remedy, source, severity="error"):
    return Finding(code, message, remedy, source, severity)


def _bool(value: str | None) -> bool | None:
    return None if value is None else value.strip().lower() == "true"


def check_sku(pf: Preflight, spec: Spec, skus: list[Any]) -> bool:
    """The size's availability, restrictions, zone and capabilities here; False when it is not offered."""
    size, req = spec.size, spec.request
    sku = next((s for s in skus if (s.name or "").lower() == size.name.lower() and s.resource_type == "virtualMachines"), None)
    if sku is None:
        pf.findings.append(_err("SKU_NOT_OFFERED", f"{size.name} is not offered in {req.location}",
                                "choose another -l/--location ('az vm list-skus --size " + size.name + " --all')",
                                SOURCE_SKUS))
        return False
    for info in sku.location_info or []:
        pf.zones = sorted(info.zones or [])
    for r in sku.restrictions or []:
        # The SDK gives enums; their str() is 'ResourceSkuRestrictionsReasonCode.X', not Azure's text.
        reason = getattr(getattr(r, "reason_code", None), "value", getattr(r, "reason_code", None)) or ""
        kind = getattr(getattr(r, "type", None), "value", getattr(r, "type", None)) or ""
        if kind == "Zone":
            blocked = set(getattr(getattr(r, "restriction_info", None), "zones", None) or [])
            if req.zone and req.zone in blocked:
                pf.findings.append(_err("SKU_RESTRICTED", f"{size.name} is restricted in zone {req.zone} of {req.location} ({reason})",
                                        "choose another --zone, or no zone", SOURCE_SKUS))
        else:
            pf.findings.append(_err("SKU_RESTRICTED", f"{size.name} is restricted in {req.location} for this subscription ({reason})",
                                    "choose another -l/--location, or ask Azure support for access to the size", SOURCE_SKUS))
    check_zones(pf, spec, [req.zone] if req.zone else [], flag="--zone")
    caps = {c.name: c.value for c in (sku.capabilities or [])}
    pf.capabilities = caps
    _check_capabilities(pf, spec, caps)
    return True


def check_zones(pf: Preflight, spec: Spec, zones: list[str], *, flag: str) -> None:
    """Every zone asked for must be one the size has in the location. Many GPU sizes have none
    (locationInfo.zones empty): then any zone is refused here, not by Azure at the PUT."""
    size, loc = spec.size.name, spec.request.location
    for zone in dict.fromkeys(str(z) for z in zones):
        if zone in pf.zones:
            continue
        if pf.zones:
            pf.findings.append(_err("ZONE_NOT_OFFERED", f"{size} has no zone {zone} in {loc} (zones: {', '.join(pf.zones)})",
                                    f"pass --zone {pf.zones[0]}, or no zone" if flag == "--zone" else
                                    f"pass --zones {' '.join(pf.zones)}, or no --zones", SOURCE_SKUS))
        else:
            pf.findings.append(_err("ZONE_NOT_OFFERED", f"{size} has no availability zones in {loc}, so not zone {zone}",
                                    f"drop {flag} (the size is regional here), or choose a location where it has zones "
                                    f"('az vm list-skus -l LOCATION --size {size} --zone')", SOURCE_SKUS))


def _check_capabilities(pf: Preflight, spec: Spec, caps: dict[str, str]) -> None:
    size, req, img = spec.size, spec.request, spec.image

    def drift(name: str, documented: Any, live: Any) -> None:
        pf.findings.append(_err("SKU_DRIFT", f"{size.name}: the documentation says {name}={documented}, this subscription "
                                             f"reports {live}; azgpu trusts the live value", "", SOURCE_SKUS, "warning"))

    gens = caps.get("HyperVGenerations")
    if gens is not None:
        live = tuple(g.strip() for g in gens.split(",") if g.strip())
        if set(live) != set(size.generations):
            drift("HyperVGenerations", ",".join(size.generations), gens)
        if img.known and img.generations and not set(img.generations) & set(live):
            pf.findings.append(_err("IMAGE_GENERATION", f"image '{img.name}' is Generation {'/'.join(g[1:] for g in img.generations)}; "
                                                        f"{size.name} boots {gens} here", "use a Generation 2 image", SOURCE_SKUS))
    arch = caps.get("CpuArchitectureType")
    if arch is not None:
        if arch.lower() != size.arch.lower():
            drift("CpuArchitectureType", size.arch, arch)
        if img.known and img.architecture and img.architecture.lower() != arch.lower():
            pf.findings.append(_err("IMAGE_ARCHITECTURE", f"image '{img.name}' is {img.architecture}; {size.name} is {arch} here",
                                    f"use an {arch} image", SOURCE_SKUS))
    rdma = _bool(caps.get("RdmaEnabled"))
    if rdma is not None and rdma != size.infiniband:
        drift("RdmaEnabled", size.infiniband, caps["RdmaEnabled"])
    an = _bool(caps.get("AcceleratedNetworkingEnabled"))
    if an is not None and an != bool(size.cap("accelerated_networking")):
        drift("AcceleratedNetworkingEnabled", size.cap("accelerated_networking"), caps["AcceleratedNetworkingEnabled"])
        pf.overrides["accelerated_networking"] = an
    for name, documented in (("vCPUs", size.vcpus), ("GPUs", size.gpus), ("MaxDataDiskCount", size.max_data_disks)):
        if caps.get(name) is not None and str(caps[name]) != str(documented):
            drift(name, documented, caps[name])
    if caps.get("MaxDataDiskCount") is not None and req.data_disks > int(caps["MaxDataDiskCount"]):
        pf.findings.append(_err("DATA_DISKS_OVER_LIMIT", f"{size.name} takes {caps['MaxDataDiskCount']} data disks here, "
                                                         f"{req.data_disks} requested",
                                f"pass --data-disks {caps['MaxDataDiskCount']} or fewer", SOURCE_SKUS))
    eph = _bool(caps.get("EphemeralOSDiskSupported"))
    if eph is not None and eph != bool(size.cap("ephemeral_os_disk")):
        drift("EphemeralOSDiskSupported", size.cap("ephemeral_os_disk"), caps["EphemeralOSDiskSupported"])
    if req.ephemeral_os_disk and eph is False:
        pf.findings.append(_err("EPHEMERAL_OS_DISK_UNSUPPORTED", f"{size.name} reports no ephemeral OS disk support here",
                                "drop --ephemeral-os-disk", SOURCE_SKUS))
    spot = _bool(caps.get("LowPriorityCapable"))
    if req.spot and spot is False:
        pf.findings.append(_err("SPOT_NOT_CAPABLE", f"{size.name} is not spot-capable here", "drop --spot", SOURCE_SKUS))
    if spec.security_type == "TrustedLaunch" and _bool(caps.get("TrustedLaunchDisabled")):
        pf.findings.append(_err("TRUSTED_LAUNCH_UNSUPPORTED", f"{size.name} reports TrustedLaunchDisabled here",
                                "use --security-type Standard", SOURCE_SKUS))


def check_quota(pf: Preflight, spec: Spec, usages: list[Any], vcpus_needed: int) -> None:
    family = spec.size.cap("quota_family")
    by_name = {norm_family(u.name.value): u for u in usages if getattr(u, "name", None) is not None}
    # Spot VMs count against the regional spot vCPU quota only; the standard quotas (Total Regional
    # vCPUs, then the family's) apply to pay-as-you-go VMs (Learn, "Increase spot vCPU family quotas").
    if spec.request.spot:
        wanted = [("lowPriorityCores", "Total Regional Low-priority vCPUs")]
    else:
        wanted = [(family, f"{family} vCPUs"), ("cores", "Total Regional vCPUs")]
    for key, label in wanted:
        usage = by_name.get(norm_family(key))
        if usage is None:
            pf.findings.append(_err("QUOTA_UNKNOWN", f"no quota entry '{label}' in {spec.request.location}",
                                    "check 'az vm list-usage -l " + str(spec.request.location) + "'", SOURCE_USAGE, "warning"))
            continue
        line = QuotaLine(usage.name.localized_value or label, int(usage.current_value), int(usage.limit), vcpus_needed)
        pf.quota.append(line)
        if not line.ok:
            pf.findings.append(_err(
                "QUOTA_INSUFFICIENT",
                f"{line.name} in {spec.request.location}: usage {line.usage} + needed {line.needed} exceeds the limit {line.limit}",
                f"request an increase to {line.usage + line.needed} (portal: Usage + quotas, or 'az quota update'), "
                "or use fewer --nodes",
                SOURCE_USAGE))


def check_image(pf: Preflight, spec: Spec, versions: list[Any], image_detail: Any | None) -> None:
    img, size = spec.image, spec.size
    if not versions:
        pf.findings.append(_err("IMAGE_NOT_FOUND", f"image {img.urn} does not exist in {spec.request.location}",
                                f"pick an image from 'az vm image list -l {spec.request.location} --all' or --image "
                                f"{spec.profile.default_image}", SOURCE_IMAGES))
        return
    if image_detail is None:
        return
    gen = getattr(image_detail, "hyper_v_generation", None)
    gen = getattr(gen, "value", gen)
    bootable = pf.capabilities.get("HyperVGenerations", ",".join(size.generations))
    if gen and str(gen) not in bootable:
        pf.findings.append(_err("IMAGE_GENERATION", f"image {img.urn} is Hyper-V generation {gen}; {size.name} boots "
                                                    f"{bootable}", "use a Generation 2 image", SOURCE_IMAGES))
    arch = getattr(image_detail, "architecture", None)
    arch = getattr(arch, "value", arch)
    if arch and arch.lower() != size.arch.lower():
        pf.findings.append(_err("IMAGE_ARCHITECTURE", f"image {img.urn} is {arch}; {size.name} is {size.arch}",
                                f"use an {size.arch} image", SOURCE_IMAGES))


def latest_version(versions: list[Any]) -> str:
    def key(v):
        return tuple(int(p) if p.isdigit() else 0 for p in v.name.split("."))

    return max(versions, key=key).name


def run_preflight(session, spec: Spec, *, vcpus_needed: int, fallback_zones: list[str] = ()) -> Preflight:
    """Every live check before any write; the caller raises on errors.

    fallback_zones: the --zones candidates to try on capacity errors, checked now like --zone.
    """
    pf = Preflight()
    loc = spec.request.location
    skus = list(session.compute.resource_skus.list(filter=f"location eq '{loc}'"))
    if check_sku(pf, spec, skus):  # the size is offered here: its zones are known
        check_zones(pf, spec, [z for z in fallback_zones if z != spec.request.zone], flag="--zones")
    vcpus = int(pf.capabilities.get("vCPUs", spec.size.vcpus))
    usages = list(session.compute.usage.list(loc))
    needed = vcpus_needed if vcpus == spec.size.vcpus else vcpus_needed // spec.size.vcpus * vcpus
    check_quota(pf, spec, usages, needed)
    img = spec.image
    try:
        versions = list(session.compute.virtual_machine_images.list(loc, img.publisher, img.offer, img.sku))
    except Exception as exc:
        if getattr(exc, "status_code", None) != 404:  # Azure answers 404 for a publisher/offer/SKU it lacks
            raise
        versions = []
    detail = None
    if versions:
        version = latest_version(versions) if img.version.lower() == "latest" else img.version
        if img.version.lower() != "latest" and version not in {v.name for v in versions}:
            pf.findings.append(_err("IMAGE_NOT_FOUND", f"image version {img.urn} does not exist in {loc}",
                                    "use version 'latest' or one 'az vm image list --all' shows", SOURCE_IMAGES))
        else:
            detail = session.compute.virtual_machine_images.get(loc, img.publisher, img.offer, img.sku, version)
    check_image(pf, spec, versions, detail)
    return pf
