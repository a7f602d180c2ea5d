"""Preflight against the live subscription: SKU, capabilities, quota, image, --subnet-id. Reads only, all findings at
once."""

from __future__ import annotations

import ipaddress
from typing import Any

from ..errors import Finding
from ..images import PurchasePlan, ofed_display
from ..naming import location_name
from ..plan import documented_placement
from ..resource_types import NETWORK_API, VNET
from ..sources import cite
from ..spec import Spec
from . import preflight_custom
from .arm import SOURCE_SKUS, norm_family
from .interface import Preflight, QuotaLine
from .reservations import check_group

SOURCE_USAGE = "Azure usage API (az vm list-usage)"
SOURCE_IMAGES = "Azure marketplace images API (az vm image list --all)"
SOURCE_TERMS = "Azure Marketplace Ordering API (az vm image terms show)"
SOURCE_NETWORK = "Azure virtual networks API (az network vnet show)"
# Azure recommends temp (resource) disk or NVMe placement; cache disk placement belongs to older series
# (D-ephemeral). Of the two, the resource disk leaves a GPU node's NVMe disks whole for data: an ephemeral OS
# disk on NVMe takes whole NVMe disks.
EPHEMERAL_PLACEMENTS = ("ResourceDisk", "NvmeDisk", "CacheDisk")
RESERVED_PER_SUBNET = 5  # the first four addresses and the last one of every subnet (D-vnet-faq)


def _bool(value: str | None) -> bool | None:
    return None if value is None else value.strip().lower() == "true"


def offered_locations(compute: Any, size: str) -> dict[str, list[str]]:
    """Where the subscription can deploy `size`: location -> its zones (empty: regional), from one listing of
    the Resource SKUs API across locations, as 'az vm list-skus --size SIZE --all' reads it, less the locations
    a restriction closes to this subscription. Read only when the size is not offered where it was asked for."""
    from ..naming import location_name

    found: dict[str, list[str]] = {}
    for sku in compute.resource_skus.list():
        if (sku.name or "").lower() != size.lower() or sku.resource_type != "virtualMachines":
            continue
        closed = {location_name(loc) for r in sku.restrictions or []
                  if (getattr(getattr(r, "type", None), "value", getattr(r, "type", None)) or "") == "Location"
                  for loc in (getattr(getattr(r, "restriction_info", None), "locations", None) or r.values or [])}
        for info in sku.location_info or []:
            loc = location_name(info.location or "")
            if loc and loc not in closed:
                found[loc] = sorted(info.zones or [])
    return dict(sorted(found.items()))


def offered_remedy(compute: Any, size: str, *, zones: bool = False) -> str:
    """Where to go instead: the locations that offer the size to this subscription (with zones, when asked)."""
    offered = {loc: z for loc, z in offered_locations(compute, size).items() if z or not zones}
    if not offered:
        return (f"no location offers {size} {'with zones ' if zones else ''}to this subscription: ask Azure support "
                "for access, or choose another size")
    from ..output import listing

    what = "has zones" if zones else "is offered to this subscription"
    return f"choose a location where it {what}: {listing(offered, 8)} (e.g. -l {next(iter(offered))})"


def check_sku(pf: Preflight, spec: Spec, skus: list[Any], compute: Any = None,
              fallback_zones: list[str] = ()) -> bool:
    """The size's availability, restrictions, zone and capabilities here; False when it is not offered.

    fallback_zones (create --zones): each is checked as --zone is, so a restricted one is refused now rather
    than skipped (a regional scale set deployed while the zone asked for is restricted)."""
    size, req = spec.size, spec.request
    sku = next((s for s in skus if (s.name or "").lower() == size.name.lower() and s.resource_type
                == "virtualMachines"), None)
    if sku is None:
        pf.findings.append(Finding(code="SKU_NOT_OFFERED", message=f"{size.name} is not offered in {req.location}",
                                   remedy=offered_remedy(compute, size.name) if compute is not None else
                                   "choose another -l/--location",
                                   source=SOURCE_SKUS))
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
                pf.findings.append(Finding(code="SKU_RESTRICTED",
                                           message=f"{size.name} is restricted in zone "
                                                   f"{req.zone} of {req.location} ({reason})",
                                           remedy="choose another --zone, or no zone", source=SOURCE_SKUS))
            for zone in dict.fromkeys(z for z in fallback_zones if z in blocked):
                pf.findings.append(Finding(code="SKU_RESTRICTED",
                                           message=f"{size.name} is restricted in zone {zone} of {req.location} "
                                           f"({reason}): --zones {zone} cannot be tried",
                                           remedy=f"drop {zone} from --zones", source=SOURCE_SKUS))
        else:
            pf.findings.append(Finding(code="SKU_RESTRICTED",
                                       message=f"{size.name} is restricted in {req.location} "
                                               f"for this subscription ({reason})",
                                       remedy="choose another -l/--location, or ask "
                                              "Azure support for access to the size",
                                       source=SOURCE_SKUS))
    check_zones(pf, spec, [req.zone] if req.zone else [], flag="--zone", compute=compute)
    caps = {c.name: c.value for c in (sku.capabilities or [])}
    pf.capabilities = caps
    if sku.family:
        pf.family = sku.family
        documented = spec.size.cap("quota_family")
        if documented and norm_family(sku.family) != norm_family(str(documented)):
            # Quota is counted under the family Azure reports (facts sheet, section 4: the MI300X SKU
            # said "Standard NDisr MI300X v5 Family" where the known list says standardNDISv5MI300XFamily).
            pf.findings.append(Finding(code="SKU_DRIFT",
                                       message=f"{size.name}: the documentation says quota family {documented}, this "
                                                    f"subscription reports '{sku.family}'; azgpu trusts the live value",
                                       remedy="",
                                       source=SOURCE_SKUS, severity="warning"))
    _check_capabilities(pf, spec, caps)
    return True


def check_zones(pf: Preflight, spec: Spec, zones: list[str], *, flag: str, compute: Any = None) -> None:
    """Every zone asked for must be one the size has in the location. Many GPU sizes have none
    (locationInfo.zones empty): then any zone is refused here, not by Azure at the PUT."""
    size, loc = spec.size.name, spec.request.location
    for zone in dict.fromkeys(str(z) for z in zones):
        if zone in pf.zones:
            continue
        if pf.zones:
            pf.findings.append(Finding(code="ZONE_NOT_OFFERED",
                                       message=f"{size} has no zone {zone} in {loc} (zones: {', '.join(pf.zones)})",
                                       remedy=f"pass --zone {pf.zones[0]}, or no zone" if flag == "--zone" else
                                       f"pass --zones {' '.join(pf.zones)}, or no --zones", source=SOURCE_SKUS))
        else:
            pf.findings.append(Finding(code="ZONE_NOT_OFFERED",
                                       message=f"{size} has no availability zones in {loc}, so not zone {zone}",
                                       remedy=f"drop {flag} (the size is regional here), or "
                                       + (offered_remedy(compute, size, zones=True) if compute is not None else
                                          "choose a location where it has zones"), source=SOURCE_SKUS))


def _check_capabilities(pf: Preflight, spec: Spec, caps: dict[str, str]) -> None:
    size, req, img = spec.size, spec.request, spec.image

    def drift(name: str, documented: Any, live: Any) -> None:
        pf.findings.append(Finding(code="SKU_DRIFT",
                                   message=f"{size.name}: the documentation says "
                                                f"{name}={documented}, this subscription "
                                                f"reports {live}; azgpu trusts the live value", remedy="",
                                   source=SOURCE_SKUS, severity="warning"))

    gens = caps.get("HyperVGenerations")
    if gens is not None:
        live = tuple(g.strip() for g in gens.split(",") if g.strip())
        if set(live) != set(size.generations):
            drift("HyperVGenerations", ",".join(size.generations), gens)
        if img.known and img.generations and not set(img.generations) & set(live):
            pf.findings.append(Finding(code="IMAGE_GENERATION",
                                       message=f"image '{img.name}' is Generation "
                                                           f"{'/'.join(g[1:] for g in img.generations)}; "
                                                           f"{size.name} boots {gens} here",
                                       remedy="use a Generation 2 image", source=SOURCE_SKUS))
    arch = caps.get("CpuArchitectureType")
    if arch is not None:
        if arch.lower() != size.arch.lower():
            drift("CpuArchitectureType", size.arch, arch)
        if img.known and img.architecture and img.architecture.lower() != arch.lower():
            pf.findings.append(Finding(code="IMAGE_ARCHITECTURE",
                                       message=f"image '{img.name}' is {img.architecture}; {size.name} is {arch} here",
                                       remedy=f"use an {arch} image", source=SOURCE_SKUS))
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
    # A missing capability is never drift (the loop above skips it): GB300's SKU metadata has no GPUs entry
    # at all (R-agentbaker-gb300), which the profile records as sku_reports_gpus = false.
    if caps.get("MaxDataDiskCount") is not None and req.data_disks > int(caps["MaxDataDiskCount"]):
        pf.findings.append(Finding(code="DATA_DISKS_OVER_LIMIT",
                                   message=f"{size.name} takes {caps['MaxDataDiskCount']} data disks here, "
                                                            f"{req.data_disks} requested",
                                   remedy=f"pass --data-disks {caps['MaxDataDiskCount']} or fewer", source=SOURCE_SKUS))
    eph = _bool(caps.get("EphemeralOSDiskSupported"))
    if eph is not None and eph != bool(size.cap("ephemeral_os_disk")):
        drift("EphemeralOSDiskSupported", size.cap("ephemeral_os_disk"), caps["EphemeralOSDiskSupported"])
    if req.ephemeral_os_disk and eph is False:
        pf.findings.append(Finding(code="EPHEMERAL_OS_DISK_UNSUPPORTED",
                                   message=f"{size.name} reports no ephemeral OS disk support here",
                                   remedy="drop --ephemeral-os-disk", source=SOURCE_SKUS))
    _check_ephemeral_placement(pf, spec, caps, drift, eph)
    spot = _bool(caps.get("LowPriorityCapable"))
    if req.spot and spot is False:
        pf.findings.append(Finding(code="SPOT_NOT_CAPABLE", message=f"{size.name} is not spot-capable here",
                                   remedy="drop --spot", source=SOURCE_SKUS))
    if spec.security_type == "TrustedLaunch" and _bool(caps.get("TrustedLaunchDisabled")):
        pf.findings.append(Finding(code="TRUSTED_LAUNCH_UNSUPPORTED",
                                   message=f"{size.name} reports TrustedLaunchDisabled here",
                                   remedy="use --security-type Standard", source=SOURCE_SKUS))


def _check_ephemeral_placement(pf: Preflight, spec: Spec, caps: dict[str, str], drift, supported: bool | None) -> None:
    """Where the ephemeral OS disk goes, from the live SupportedEphemeralOSDiskPlacements capability."""
    live = caps.get("SupportedEphemeralOSDiskPlacements")
    if live is None:
        return
    offered = {p.strip().lower(): p.strip() for p in live.split(",") if p.strip()}
    documented = documented_placement(spec.size, spec.profile)
    if offered and spec.size.cap("ephemeral_os_disk") and documented.lower() not in offered:
        drift("SupportedEphemeralOSDiskPlacements", f"{documented} (implied by the documented local disks)", live)
    if not spec.request.ephemeral_os_disk or supported is False:
        return
    # A vertical-connect size takes only the placement Microsoft deploys it with (NvmeDisk: NotSupported there).
    order = (documented,) if spec.profile.vertical_connect else EPHEMERAL_PLACEMENTS
    choice = next((p for p in order if p.lower() in offered), None)
    if choice is None:
        pf.findings.append(Finding(code="EPHEMERAL_OS_DISK_UNSUPPORTED",
                                   message=f"{spec.size.name} reports no ephemeral OS disk placement here "
                                   f"(SupportedEphemeralOSDiskPlacements: {live or 'none'})",
                                   remedy="drop --ephemeral-os-disk", source=SOURCE_SKUS))
    elif choice != (spec.ephemeral_placement or documented):
        pf.overrides["ephemeral_placement"] = choice


def check_subnet(pf: Preflight, spec: Spec, vnet: Any | None, nodes_needed: int) -> None:
    """--subnet-id before any write: it exists, lies in the cluster's location, has room for the nodes and,
    if not, says what will not work without a way to the internet."""
    req = spec.request
    parts = req.subnet_id.strip("/").split("/")
    vnet_name, subnet_name = parts[7], parts[9]
    where = f"subnet '{subnet_name}' of virtual network '{vnet_name}' (resource group {parts[3]})"
    subnet = next((s for s in (vnet.subnets or []) if (s.name or "").lower() == subnet_name.lower()),
                  None) if vnet else None
    if subnet is None:
        known = ", ".join(s.name for s in (vnet.subnets or [])) if vnet else ""
        pf.findings.append(Finding(code="SUBNET_NOT_FOUND",
                                   message=f"{where} does not exist" + (f" (its subnets: {known})" if known else ""),
                                   remedy=f"pass the ID of an existing subnet ('az network vnet subnet list -g "
                                   f"{parts[3]} --vnet-name {vnet_name} --query [].id'), or drop --subnet-id to let "
                                   "azgpu create the network",
                                   source=SOURCE_NETWORK))
        return
    location = location_name(vnet.location)
    if location != location_name(req.location):
        pf.findings.append(Finding(code="SUBNET_WRONG_LOCATION",
                                   message=f"{where} is in {location}, the cluster in "
                                   f"{req.location}: a scale set's NICs must be "
                                   "in a virtual network of its own location",
                                   remedy=f"pass -l {location}, or a subnet of a virtual network in {req.location}",
                                   source=SOURCE_NETWORK))
    prefixes = [subnet.address_prefix] if subnet.address_prefix else list(subnet.address_prefixes or [])
    networks = [n for n in (ipaddress.ip_network(p, strict=False) for p in prefixes) if n.version == 4]
    capacity = sum(max(0, n.num_addresses - RESERVED_PER_SUBNET) for n in networks)
    used = len(subnet.ip_configurations or [])
    free = max(0, capacity - used)
    info: dict[str, Any] = {"id": subnet.id or req.subnet_id, "location": location,
                            "address_prefixes": [str(n) for n in networks], "free_addresses": free,
                            "nodes_needed": nodes_needed}
    if nodes_needed > free:
        pf.findings.append(Finding(code="SUBNET_TOO_SMALL",
                                   message=f"{where} ({', '.join(map(str, networks)) or 'no IPv4 prefix'}) "
                                   f"has {free} free addresses ({capacity} usable after the {RESERVED_PER_SUBNET} "
                                   f"Azure reserves per subnet, {used} in use); the cluster needs {nodes_needed} more",
                                   remedy="use a larger subnet, fewer --nodes, or free addresses in it",
                                   source=f"{SOURCE_NETWORK}; {cite(('D-vnet-faq',))}"))
    nat = getattr(subnet.nat_gateway, "id", None)
    default_outbound = subnet.default_outbound_access
    route_table = getattr(subnet.route_table, "id", None)
    info["outbound"] = {"nat_gateway": nat, "default_outbound_access": default_outbound, "route_table": route_table}
    pf.subnet = info
    if nat or req.public_ip:
        return
    if default_outbound is not False:  # unset (older API versions) or true: Azure's implicit default outbound IP
        pf.findings.append(Finding(code="SUBNET_DEFAULT_OUTBOUND",
                                   message=f"{where} has no NAT gateway: the nodes "
                                   "reach the internet through Azure's default outbound access, which Microsoft is "
                                   "retiring and does not recommend",
                                   remedy="associate a NAT gateway with the subnet for a stable, explicit way out",
                                   source=cite(("D-default-outbound",)), severity="note"))
        return
    lost = []
    if spec.install_ofed:
        lost.append(f"cloud-init's download of {ofed_display(spec.install_ofed)}")
    lost += [f"the {e.type} extension's driver download" for e in spec.extensions]
    lost += ["Run Command results, so node health checks cannot report", "package mirrors and container registries"]
    via = f" unless its route table {route_table.rsplit('/', 1)[-1]} sends internet traffic through a firewall" \
        if route_table else ""
    pf.findings.append(Finding(code="SUBNET_NO_OUTBOUND",
                               message=f"{where} is private (defaultOutboundAccess "
                               "false) and has no NAT gateway: the nodes have no "
                               f"way to the internet{via}; this will not work: " + "; ".join(lost),
                               remedy="associate a NAT gateway with the subnet ('az network vnet subnet update -g "
                               f"{parts[3]} --vnet-name {parts[7]} -n {parts[9]} --nat-gateway' with the gateway's "
                               "name or ID), or use a subnet that has one",
                               source=cite(("D-default-outbound", "D-rc-linux")), severity="warning"))


def read_subnet_network(session, subnet_id: str) -> tuple[Any | None, Finding | None]:
    """The virtual network holding --subnet-id's subnet (its location and subnets in one read), or why not."""
    parts = subnet_id.strip("/").split("/")
    subscription, group, vnet_name = parts[1], parts[3], parts[7]
    try:
        # At azgpu's api-version, not the SDK's default: an older one leaves out defaultOutboundAccess and
        # the natGateway fields this check reads (and the lowest allowed SDK speaks an older one).
        return session.network_for(subscription).virtual_networks.get(group, vnet_name, api_version=NETWORK_API), None
    except Exception as exc:
        status = getattr(exc, "status_code", None)
        if status == 404:  # a missing subscription, group or virtual network
            return None, None
        if status == 403:
            return None, Finding(code="SUBNET_NOT_ACCESSIBLE",
                                 message="this identity may not read virtual network "
                                         f"'{vnet_name}' in subscription {subscription}",
                                 remedy=f"ask for Network Contributor (or a role with {VNET.action('read')} and "
                                 "subnets/join/action) on it, or use another --subnet-id", source=SOURCE_NETWORK)
        raise


def check_quota(pf: Preflight, spec: Spec, usages: list[Any], vcpus_needed: int) -> None:
    family = pf.family or spec.size.cap("quota_family")
    by_name = {norm_family(u.name.value): u for u in usages if getattr(u, "name", None) is not None}
    # Spot VMs count against the regional spot vCPU quota only; the standard quotas (Total Regional
    # vCPUs, then the family's) apply to pay-as-you-go VMs (Learn, "Increase spot vCPU family quotas").
    # Quotas are named as the usage API names them (name.value: the family, cores, lowPriorityCores), the
    # names 'provision quota request' files and 'provision simulate quota' takes; never the localized ones.
    wanted = ["lowPriorityCores"] if spec.request.spot else [family, "cores"]
    for key in wanted:
        usage = by_name.get(norm_family(key))
        if usage is None:
            pf.findings.append(Finding(code="QUOTA_UNKNOWN",
                                       message=f"no quota entry '{key}' in {spec.request.location}",
                                       remedy="check 'az vm list-usage -l " + str(spec.request.location) + "'",
                                       source=SOURCE_USAGE, severity="warning"))
            continue
        line = QuotaLine(usage.name.value or key, int(usage.current_value), int(usage.limit), vcpus_needed,
                         usage.name.value or key)
        pf.quota.append(line)
        if not line.ok:
            pf.findings.append(Finding(
                code="QUOTA_INSUFFICIENT",
                message=f"vCPU quota {line.name} in {spec.request.location}: usage {line.usage} + needed {line.needed} "
                f"exceeds the limit {line.limit}",
                remedy=f"request an increase to {line.usage + line.needed} "
                "('provision quota request' with the same options, or create --request-quota; portal: Usage + quotas), "
                "or use fewer --nodes",
                source=SOURCE_USAGE))


def _prop(detail: Any, name: str) -> Any:
    """A VirtualMachineImage property: under .properties (the REST shape), or flattened (older SDKs)."""
    props = getattr(detail, "properties", None)
    value = getattr(props, name, None) if props is not None else None
    return value if value is not None else getattr(detail, name, None)


def _text(value: Any) -> str:
    """An SDK enum or a string as Azure wrote it."""
    value = getattr(value, "value", value)
    return "" if value is None else str(value)


def _get(obj: Any, name: str, key: str) -> Any:
    return obj.get(key) if isinstance(obj, dict) else getattr(obj, name, None)


def check_image(pf: Preflight, spec: Spec, versions: list[Any], image_detail: Any | None) -> None:
    img, size = spec.image, spec.size
    if not versions:
        pf.findings.append(Finding(code="IMAGE_NOT_FOUND",
                                   message=f"image {img.urn} does not exist in {spec.request.location}",
                                   remedy="pick an image from 'az vm image list -l "
                                   f"{spec.request.location} --all' or --image {spec.profile.default_image}",
                                   source=SOURCE_IMAGES))
        return
    if image_detail is None:
        return
    gen = _text(_prop(image_detail, "hyper_v_generation"))
    bootable = pf.capabilities.get("HyperVGenerations", ",".join(size.generations))
    if gen and gen not in bootable:
        pf.findings.append(Finding(code="IMAGE_GENERATION",
                                   message=f"image {img.urn} is Hyper-V generation {gen}; {size.name} boots "
                                                       f"{bootable}", remedy="use a Generation 2 image",
                                   source=SOURCE_IMAGES))
    arch = _text(_prop(image_detail, "architecture"))
    if arch and arch.lower() != size.arch.lower():
        pf.findings.append(Finding(code="IMAGE_ARCHITECTURE",
                                   message=f"image {img.urn} is {arch}; {size.name} is {size.arch}",
                                   remedy=f"use an {size.arch} image", source=SOURCE_IMAGES))
    _check_deprecation(pf, spec, image_detail)
    _check_security_type(pf, spec, image_detail)
    _check_plan(pf, spec, image_detail)


def _check_deprecation(pf: Preflight, spec: Spec, detail: Any) -> None:
    """imageDeprecationStatus: Deprecated blocks, ScheduledForDeprecation warns (VirtualMachineImage, 2026-04-01)."""
    status = _prop(detail, "image_deprecation_status")
    state = _text(_get(status, "image_state", "imageState")) if status is not None else ""
    if state.lower() not in ("deprecated", "scheduledfordeprecation"):
        return
    when = _get(status, "scheduled_deprecation_time", "scheduledDeprecationTime")
    when = when.date().isoformat() if hasattr(when, "date") else (str(when)[:10] if when else "")
    option = _get(status, "alternative_option", "alternativeOption")
    kind = _text(_get(option, "type", "type")) if option is not None else ""
    value = _text(_get(option, "value", "value")) if option is not None else ""
    alternative = (f"the publisher names {kind.lower()} '{value}' as its alternative; "
                   if value and kind.lower() != "none" else "")
    remedy = f"{alternative}pick a current image: 'provision images list --profile {spec.profile.id}'"
    version = _text(getattr(detail, "name", "")) or spec.image.version
    if state.lower() == "deprecated":
        pf.findings.append(Finding(code="IMAGE_DEPRECATED",
                                   message=f"image {spec.image.urn} (version {version}) is deprecated"
                                                       + (f" since {when}" if when else ""), remedy=remedy,
                                   source=SOURCE_IMAGES))
    else:
        pf.findings.append(Finding(code="IMAGE_DEPRECATION_SCHEDULED",
                                   message=f"image {spec.image.urn} (version {version}) is scheduled "
                                                                  "for deprecation" + (f" on {when}" if when else ""),
                                   remedy=remedy, source=SOURCE_IMAGES, severity="warning"))


def _check_security_type(pf: Preflight, spec: Spec, detail: Any) -> None:
    """The image's SecurityType feature (e.g. TrustedLaunchSupported) against the requested security type."""
    if spec.security_type != "TrustedLaunch":
        return
    for feature in _prop(detail, "features") or []:
        name, value = _text(_get(feature, "name", "name")), _text(_get(feature, "value", "value"))
        if name.lower() == "securitytype" and "trustedlaunch" not in value.lower():
            pf.findings.append(Finding(code="IMAGE_SECURITY_TYPE",
                                       message=f"image {spec.image.urn} supports security type {value}, not "
                                                              "TrustedLaunch",
                                       remedy="use --security-type Standard, or an image "
                                       "whose SecurityType feature includes TrustedLaunch", source=SOURCE_IMAGES))


def _check_plan(pf: Preflight, spec: Spec, detail: Any) -> None:
    """The image's purchase plan as the image API reports it; the live plan is the one deployed."""
    live = PurchasePlan.from_api(_prop(detail, "plan"))
    pf.plan = live
    if live == spec.image.plan:
        return
    pf.overrides["plan"] = live
    if not spec.image.known:  # a URN azgpu's catalog does not hold: nothing to differ from
        pf.findings.append(Finding(code="IMAGE_PLAN",
                                   message=f"image {spec.image.urn} carries purchase plan {live.name} (product "
                                                 f"{live.product}, publisher {live.publisher}); azgpu deploys it",
                                   remedy="", source=SOURCE_IMAGES, severity="note"))
        return
    said = (f"plan {spec.image.plan.name} (product {spec.image.plan.product}, publisher {spec.image.plan.publisher})"
            if spec.image.plan else "no purchase plan")
    found = f"plan {live.name} (product {live.product}, publisher {live.publisher})" if live else "no purchase plan"
    pf.findings.append(Finding(code="IMAGE_PLAN_DIFFERS",
                               message=f"image {spec.image.urn}: azgpu's image catalog says {said}, Azure "
                                                     f"reports {found}; azgpu deploys Azure's", remedy="",
                               source=SOURCE_IMAGES, severity="warning"))


def check_terms(pf: Preflight, spec: Spec, terms: Any, *, accept_terms: bool = False) -> None:
    """A purchase plan's marketplace terms must be accepted once per subscription before any deployment."""
    plan = pf.plan
    if plan is None or bool(getattr(terms, "accepted", False)):
        return
    if spec.image.image_id is not None:  # a custom image: the terms are the plan's, named by the plan
        what = f"image {spec.image.image_id.text} (built from a Marketplace image)"
        accept = f"az vm image terms accept --publisher {plan.publisher} --offer {plan.product} --plan {plan.name}"
        show = f"az vm image terms show --publisher {plan.publisher} --offer {plan.product} --plan {plan.name}"
    else:
        what = f"image {spec.image.urn}"
        accept = f"az vm image terms accept --urn {spec.image.urn}"
        show = f"az vm image terms show --urn {spec.image.urn}"
    if accept_terms:
        pf.accept_terms = plan
        pf.findings.append(Finding(code="MARKETPLACE_TERMS_ACCEPTING", message=f"the marketplace terms of {what} (plan "
                                                                  f"{plan.name}) are accepted "
                                                                  "for this subscription before "
                                                                  "the deployment (--accept-terms)",
                                   remedy=f"read them first: '{show}'", source=SOURCE_TERMS, severity="note"))
        return
    pf.findings.append(Finding(
        code="MARKETPLACE_TERMS_NOT_ACCEPTED",
        message=f"the marketplace terms of {what} (publisher {plan.publisher}, product {plan.product}, plan "
        f"{plan.name}) are not accepted for this subscription: Azure refuses the deployment",
        remedy=f"'{accept}' (once per subscription), or add --accept-terms", source=SOURCE_TERMS))


def latest_version(versions: list[Any]) -> str:
    def key(v):
        return tuple(int(p) if p.isdigit() else 0 for p in v.name.split("."))

    return max(versions, key=key).name


def run_preflight(session, spec: Spec, *, vcpus_needed: int, nodes_needed: int | None = None,
                  accept_terms: bool = False, fallback_zones: list[str] = ()) -> Preflight:
    """Every live check before any write; the caller raises on errors.

    nodes_needed: the nodes this run adds (for --subnet-id's free addresses); all of them when not given.
    accept_terms: unaccepted marketplace terms are left for create to accept instead of an error.
    fallback_zones: the --zones candidates to try on capacity errors, checked now like --zone.
    """
    pf = Preflight()
    loc = spec.request.location
    if spec.subnet_id:
        vnet, problem = read_subnet_network(session, spec.subnet_id)
        if problem:
            pf.findings.append(problem)
        else:
            check_subnet(pf, spec, vnet, spec.nodes if nodes_needed is None else nodes_needed)
    skus = list(session.compute.resource_skus.list(filter=f"location eq '{loc}'"))
    fallbacks = [z for z in fallback_zones if z != spec.request.zone]
    if check_sku(pf, spec, skus, session.compute, fallback_zones=fallbacks):  # offered here: its zones are known
        check_zones(pf, spec, fallbacks, flag="--zones", compute=session.compute)
    vcpus = int(pf.capabilities.get("vCPUs", spec.size.vcpus))
    needed = vcpus_needed if vcpus == spec.size.vcpus else vcpus_needed // spec.size.vcpus * vcpus
    if spec.request.capacity_reservation_group:
        nodes = spec.nodes if nodes_needed is None else nodes_needed
        # Learn: "Because the reservation itself requires a quota, the quota checks are omitted for VM deployment
        # up to the reserved quantity" (D-crg): the reserved nodes are already in the usage, as the reservation.
        covered = check_group(pf, session, spec, nodes)
        needed -= needed // nodes * covered if nodes else 0
    usages = list(session.compute.usage.list(loc))
    check_quota(pf, spec, usages, needed)
    preflight_custom.check_identities(pf, session, spec)
    preflight_custom.check_ppg(pf, session, spec)
    if spec.image.image_id is not None:  # gallery, community, shared or managed image: read from its own API
        preflight_custom.check_custom_image(pf, session, spec)
        if pf.plan is not None:  # built from a Marketplace image: the same terms as the Marketplace image's
            from .marketplace import terms

            check_terms(pf, spec, terms(session, pf.plan), accept_terms=accept_terms)
        return pf
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
            pf.findings.append(Finding(code="IMAGE_NOT_FOUND",
                                       message=f"image version {img.urn} does not exist in {loc}",
                                       remedy="use version 'latest' or one 'az vm image list --all' shows",
                                       source=SOURCE_IMAGES))
        else:
            detail = session.compute.virtual_machine_images.get(loc, img.publisher, img.offer, img.sku, version)
    check_image(pf, spec, versions, detail)
    if pf.plan is not None:
        from .marketplace import terms

        check_terms(pf, spec, terms(session, pf.plan), accept_terms=accept_terms)
    return pf
