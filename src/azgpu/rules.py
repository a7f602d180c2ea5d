"""Documented requirements as small named rules in one registry.

Every rule receives the frozen validation context and only yields Findings, each with a stable
code, a remedy and the source of the rule: what the plan will do (the scale-set split, OFED and
extensions, the eviction policy) is decided before the rules run (layout.py, drivers.py,
eviction.py), so no rule depends on another having run. The universal rules below run for every
request; the series rules run when a profile lists them in [[rules]] with its arguments and source
(profiles.SERIES_RULE_ARGS says which arguments each takes).
"""

from __future__ import annotations

import ipaddress
import math
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from msgspec import Struct, structs

from .errors import Finding
from .eviction import EVICTION_POLICIES
from .images import Image, catalog, ofed_display, ofed_key
from .profiles import SERIES_RULE_ARGS
from .sources import cite

if TYPE_CHECKING:
    from .drivers import Drivers
    from .layout import Layout
    from .profiles import Profile, Size
    from .request import Request

RDMA_RESERVED_DEFAULT = "172.16.0.0/16"


class Context(Struct, frozen=True):
    """What the rules check: the request and what it resolved to, with the decisions already taken."""

    request: Request
    profile: Profile
    size: Size
    image: Image | None
    command: str  # render | plan | validate | create
    layout: Layout
    drivers: Drivers
    eviction_policy: str | None  # spot only
    vnet: ipaddress.IPv4Network | None = None
    rule_source: tuple[str, ...] = ()  # the sources of the series rule being run


RuleFn = Callable[[Context, dict], Iterator[Finding]]

SERIES_RULES: dict[str, RuleFn] = {}


def series_rule(name: str):
    """Registers the check of a rule profiles may name; its arguments are in profiles.SERIES_RULE_ARGS."""
    if name not in SERIES_RULE_ARGS:
        raise KeyError(f"series rule {name!r} is not in profiles.SERIES_RULE_ARGS")

    def register(fn: RuleFn) -> RuleFn:
        SERIES_RULES[name] = fn
        return fn

    return register


# ---------------------------------------------------------------- universal rules (capabilities)


def hyperv_generation(ctx: Context) -> Iterator[Finding]:
    img, size = ctx.image, ctx.size
    if img is None or not img.known or not img.generations:
        return
    if not set(img.generations) & set(size.generations):
        gens = "/".join(g.replace("V", "Generation ") for g in size.generations)
        yield Finding(
            code="IMAGE_GENERATION",
            message=f"image '{img.name}' is Generation {'/'.join(g[1:] for g in img.generations)} "
            f"but {size.name} boots only {gens} images (Azure fails with 'cannot boot Hypervisor Generation 1')",
            remedy=f"use a Generation 2 image, e.g. --image {ctx.profile.default_image}",
            source=cite(size.facts["hyperv_generations"].source), field="image",
        )


def cpu_architecture(ctx: Context) -> Iterator[Finding]:
    img, size = ctx.image, ctx.size
    if img is None or not img.known or not img.architecture or img.architecture == size.arch:
        return
    yield Finding(
        code="IMAGE_ARCHITECTURE",
        message=f"image '{img.name}' is {img.architecture} but {size.name} has {size.arch} CPUs",
        remedy=f"use an {size.arch} image, e.g. --image {ctx.profile.default_image}",
        source=cite(size.facts["cpu_architecture"].source), field="image",
    )


def image_known(ctx: Context) -> Iterator[Finding]:
    img = ctx.image
    if img is None or img.image_id is not None:  # gallery and managed images: custom_image below
        return
    if not img.known:
        yield Finding(code="IMAGE_UNKNOWN",
                      message=f"image '{img.urn}' is not in azgpu's catalog: its generation, architecture and OFED "
                              "cannot be checked offline",
                      remedy="the deployer's preflight checks it live; or "
                             "choose a catalog image ('provision images list')",
                      source=cite(("D-findimage",)), severity="warning", field="image")
        return
    if not img.verified:
        yield Finding(code="IMAGE_UNVERIFIED",
                      message=f"image '{img.name}' ({img.urn}) is not confirmed by Microsoft's documentation",
                      remedy=f"check it exists: 'az vm image list --urn {img.urn} --all'",
                      source=f"profiles/images.toml, image {img.name} (its notes and sources)",
                      severity="warning", field="image")
    if img.legacy:
        yield Finding(code="IMAGE_LEGACY", message=f"image '{img.name}' is legacy: {img.legacy}",
                      remedy=f"prefer a current image such as {ctx.profile.default_image}", source=cite(img.source),
                      severity="warning", field="image")


def linux_only(ctx: Context) -> Iterator[Finding]:
    """The plan writes linuxConfiguration with SSH keys only; a Windows image would be rejected by Azure."""
    img = ctx.image
    if img is not None and img.known and img.is_windows:
        yield Finding(code="WINDOWS_IMAGE_UNSUPPORTED",
                      message=f"image '{img.name}' is Windows, but azgpu creates "
                              "Linux nodes only (SSH keys, linuxConfiguration)",
                      remedy=f"use a Linux image, e.g. --image {ctx.profile.default_image}", field="image")


def retired(ctx: Context) -> Iterator[Finding]:
    date = ctx.size.retired
    if not date:
        return
    severity = "warning" if ctx.command == "render" else "error"
    yield Finding(code="SERIES_RETIRED",
                  message=f"{ctx.size.name} ({ctx.profile.series}) was "
                          f"retired on {date} and can no longer be provisioned",
                  remedy="choose a current series, e.g. --profile nd-a100-v4 "
                         "or --profile nd-h100-v5 ('provision profiles list')",
                  source=cite(ctx.size.facts["retired"].source), severity=severity, field="size")


def trusted_launch(ctx: Context) -> Iterator[Finding]:
    supported = ctx.size.cap("trusted_launch")
    if ctx.request.security_type != "TrustedLaunch":
        return
    if supported is False:
        yield Finding(code="TRUSTED_LAUNCH_UNSUPPORTED",
                      message=f"Trusted Launch is not supported on {ctx.size.name} ({ctx.profile.series})",
                      remedy="use --security-type Standard (azgpu's default for GPU sizes)",
                      source=cite(ctx.size.facts["trusted_launch"].source), field="security_type")
    elif supported == "unknown":
        yield Finding(code="TRUSTED_LAUNCH_UNDOCUMENTED",
                      message=f"Microsoft does not document Trusted Launch for {ctx.profile.series} by name; "
                      "the GPU driver extensions do not support Secure Boot",
                      remedy="azgpu sets secureBootEnabled=false; use --security-type Standard if the deployment fails",
                      source=cite(ctx.size.facts["trusted_launch"].source), severity="warning", field="security_type")


def accelerated_networking(ctx: Context) -> Iterator[Finding]:
    if not ctx.drivers.accelerated_networking:
        yield Finding(code="ACCELERATED_NETWORKING_OFF",
                      message=f"{ctx.size.name} does not support accelerated networking; the plan leaves it off",
                      remedy="", source=cite(ctx.size.facts["accelerated_networking"].source), severity="note",
                      field="size")


def data_disks(ctx: Context) -> Iterator[Finding]:
    n, limit = ctx.request.data_disks, ctx.size.max_data_disks
    if n < 0:
        yield Finding(code="INVALID_DATA_DISKS", message=f"--data-disks must be 0 or more, not {n}",
                      remedy="pass --data-disks 0 or more", field="data_disks")
    elif n > limit:
        yield Finding(code="DATA_DISKS_OVER_LIMIT",
                      message=f"{ctx.size.name} takes at most {limit} data disks, {n} requested",
                      remedy=f"pass --data-disks {limit} or fewer", source=cite(ctx.size.source), field="data_disks")
    size = ctx.request.data_disk_size_gb
    if n and not 4 <= size <= 32767:
        yield Finding(code="INVALID_DATA_DISK_SIZE", message=f"--data-disk-size-gb must be 4-32767, not {size}",
                      remedy="pass a size between 4 and 32767 GiB", source=cite(("D-managed-disks",)),
                      field="data_disk_size_gb")


def spot(ctx: Context) -> Iterator[Finding]:
    req = ctx.request
    if req.max_price is not None and not req.spot:
        yield Finding(code="MAX_PRICE_WITHOUT_SPOT", message="--max-price applies only to spot capacity",
                      remedy="add --spot, or drop --max-price", source=cite(("D-spot",)), field="max_price")
    if req.max_price is not None and (not math.isfinite(req.max_price) or req.max_price != -1 and req.max_price <= 0):
        yield Finding(code="INVALID_MAX_PRICE",
                      message=f"--max-price must be -1 (up to the on-demand price) or above 0, not {req.max_price}",
                      remedy="pass --max-price -1 or a price in US dollars per hour", source=cite(("D-spot",)),
                      field="max_price")
    if req.spot and ctx.size.cap("spot") is False:
        yield Finding(code="SPOT_NOT_CAPABLE", message=f"{ctx.size.name} cannot run as spot (low-priority) capacity",
                      remedy="drop --spot", source=cite(ctx.size.facts["spot"].source), field="spot")


def ephemeral_os_disk(ctx: Context) -> Iterator[Finding]:
    req = ctx.request
    if not req.ephemeral_os_disk:
        return
    if not ctx.size.cap("ephemeral_os_disk"):
        yield Finding(code="EPHEMERAL_OS_DISK_UNSUPPORTED",
                      message=f"{ctx.size.name} does not support ephemeral OS disks",
                      remedy="drop --ephemeral-os-disk", source=cite(ctx.size.facts["ephemeral_os_disk"].source),
                      field="ephemeral_os_disk")
    elif (req.os_disk_size_gb and ctx.size.temp_disk_gib and req.os_disk_size_gb > ctx.size.temp_disk_gib
          and not ctx.profile.vertical_connect):  # there the disk goes on CacheDisk, not the temp disks
        yield Finding(code="EPHEMERAL_OS_DISK_TOO_LARGE",
                      message=f"an ephemeral OS disk of {req.os_disk_size_gb} GiB does not fit {ctx.size.name}'s "
                              f"{ctx.size.temp_disk_gib:g} GiB resource disk",
                      remedy=f"pass --os-disk-size-gb {int(ctx.size.temp_disk_gib)} "
                             "or less, or drop --ephemeral-os-disk",
                      source=cite(("D-ephemeral", *ctx.size.source)), field="os_disk_size_gb")


def imex(ctx: Context) -> Iterator[Finding]:
    """GB200/GB300: multi-node NVLink needs NVIDIA IMEX on every node (R-azhpc-imex)."""
    img = ctx.image
    if not ctx.profile.vertical_connect or img is None or not img.known or img.imex:
        return
    yield Finding(code="IMAGE_NO_IMEX",
                  message=f"image '{img.name}' does not ship NVIDIA IMEX: GPUs of different VMs of an NVL72 rack "
                  "cannot share memory over NVLink without the nvidia-imex service and its channel",
                  remedy=f"use --image {ctx.profile.default_image}, or install nvidia-imex on the nodes",
                  source=cite(("R-azhpc-imex",)),
                  severity="warning", field="image")


def os_disk_size(ctx: Context) -> Iterator[Finding]:
    size = ctx.request.os_disk_size_gb
    if size is not None and not 30 <= size <= 4095:
        yield Finding(code="INVALID_OS_DISK_SIZE", message=f"--os-disk-size-gb must be 30-4095, not {size}",
                      remedy="pass a size between 30 and 4095 GiB", source=cite(("D-managed-disks",)),
                      field="os_disk_size_gb")


def infiniband(ctx: Context) -> Iterator[Finding]:
    """InfiniBand spans one Uniform scale set with a single placement group: what the split (layout.py) means."""
    req, size, lay = ctx.request, ctx.size, ctx.layout
    nodes = req.nodes or 0
    if size.infiniband:
        domain, default, raised, src = lay.requested_domain, lay.default_domain, lay.raised_domain, lay.domain_source
        if not 1 <= domain <= raised:
            yield Finding(code="INVALID_MAX_IB_DOMAIN", message=f"--max-ib-domain must be 1-{raised}, not {domain}",
                          remedy=f"pass --max-ib-domain {default} (the default) or "
                                 f"up to {raised} once Azure support raised the limit",
                          source=cite(src), field="max_ib_domain")
        elif domain > default:
            yield Finding(code="IB_DOMAIN_RAISED",
                          message=f"--max-ib-domain {domain} exceeds Azure's default of {default} VMs per "
                                  "single-placement-group scale set",
                          remedy="ask Azure support to raise the single placement "
                                 "group limit for this subscription first",
                          source=cite(src), severity="warning", field="max_ib_domain")
    elif req.max_ib_domain is not None:
        yield Finding(code="IB_NOT_AVAILABLE", message=f"{size.name} has no InfiniBand; --max-ib-domain is ignored",
                      remedy="drop --max-ib-domain", source=cite(size.facts["infiniband"].source), severity="warning",
                      field="max_ib_domain")
    if lay.rack_cut is not None and lay.rack is not None:
        rack, aligned = lay.rack, lay.ib_domain
        if req.max_ib_domain is not None or nodes > aligned:
            yield Finding(code="IB_DOMAIN_RACK_ALIGNED",
                          message=f"InfiniBand domains of {lay.rack_cut} VMs would cut NVL72 racks ({rack[0]} VMs "
                          f"each): the plan splits the cluster into scale sets of at most {aligned} VMs, whole racks",
                          remedy=f"pass --max-ib-domain as a multiple of {rack[0]} to choose another size",
                          source=cite(rack[1]), severity="warning" if req.max_ib_domain is not None else "note",
                          field="max_ib_domain")
    if nodes <= 0:
        return
    if size.infiniband and len(lay.scale_sets) > 1:
        domain, raised = lay.ib_domain, lay.raised_domain
        yield Finding(code="IB_DOMAIN_SPLIT",
                      message=f"{nodes} nodes exceed one InfiniBand domain of {domain}: the plan creates "
                      f"{len(lay.scale_sets)} scale sets ({_counts(lay.scale_sets)}); "
                      "InfiniBand does not span scale sets",
                      remedy="schedule tightly coupled jobs within one scale set (the outputs group nodes per domain)"
                      + ("" if domain >= raised else
                         f", or raise --max-ib-domain (up to {raised}) after Azure support raised the limit"),
                      source=cite(("D-setupib", "D-vmss-pg")), severity="warning", field="nodes")


def _counts(sizes) -> str:
    """Scale-set sizes as '100 x 100 + 1 x 50': readable at 10,000 nodes too."""
    groups: dict[int, int] = {}
    for n in sizes:
        groups[n] = groups.get(n, 0) + 1
    return " + ".join(f"{count} x {size} VMs" for size, count in groups.items())


def ofed(ctx: Context) -> Iterator[Finding]:
    spec = ctx.profile.ofed
    img = ctx.image
    if not ctx.size.infiniband or not spec or img is None or not img.known:
        return
    src = spec["source"]
    if not img.ofed:
        if img.is_windows:
            return
        pinned = ctx.drivers.install_ofed
        yield Finding(code="OFED_INSTALLED",
                      message=f"image '{img.name}' has no OFED driver; the plan "
                      f"installs {ofed_display(pinned)} through cloud-init so InfiniBand works on {ctx.size.name}",
                      remedy=_ofed_remedy(ctx),
                      source=cite(src), severity="warning", field="image")
        return
    have = ofed_key(img.ofed)
    if "minimum" in spec and have < ofed_key(spec["minimum"]):
        yield Finding(code="OFED_TOO_OLD",
                      message=f"image '{img.name}' ships {ofed_display(img.ofed)}, older than the "
                      f"{ofed_display(spec['minimum'])} {ctx.size.name} needs",
                      remedy=f"use a newer image, e.g. --image {ctx.profile.default_image}", source=cite(src),
                      field="image")
    if "maximum" in spec and have > ofed_key(spec["maximum"]):
        yield Finding(code="OFED_TOO_NEW",
                      message=f"image '{img.name}' ships {ofed_display(img.ofed)}, newer than the "
                      f"{ofed_display(spec['maximum'])} {ctx.size.name}'s adapter supports",
                      remedy="use an image with MLNX_OFED 4.9 LTS (ConnectX-3 Pro) or a plain image and install it",
                      source=cite(src), field="image")


def _ofed_remedy(ctx: Context) -> str:
    with_ofed = [n for n in current_images((ctx.profile.default_image, *ctx.profile.recommended_images))
                 if catalog()[n].ofed]
    if with_ofed:
        return f"or use an Azure HPC image with OFED preinstalled, e.g. --image {with_ofed[0]}"
    return "nothing to do: no Azure HPC image serves this series, so installing at boot is the documented way"


def gpu_extensions(ctx: Context) -> Iterator[Finding]:
    img = ctx.image
    for ext in ctx.drivers.extensions:  # none without an image
        yield Finding(code="EXTENSION_ADDED",
                      message=f"image '{img.name}' is not an Azure HPC image: the plan adds the {ext.type} "
                              f"{ext.type_handler_version} extension",
                      remedy=f"or use an Azure HPC image, e.g. --image {ctx.profile.default_image}",
                      source=cite(ext.source), severity="note", field="image")


def outbound(ctx: Context) -> Iterator[Finding]:
    """--no-outbound: the new VNet's subnet is private (no default outbound access) and gets no NAT gateway,
    so whatever the nodes would fetch from the internet fails; say what, before anything is created."""
    req = ctx.request
    if req.outbound or req.subnet_id or req.public_ip:  # per-node Standard public IPs are an explicit way out
        return
    lost: list[str] = []
    sources: list[str] = ["D-default-outbound"]
    if ctx.drivers.install_ofed:
        lost.append(f"cloud-init's download of {ofed_display(ctx.drivers.install_ofed)}")
        sources += ctx.profile.ofed["source"]
    for ext in ctx.drivers.extensions:
        lost.append(f"the {ext.type} extension's driver download")  # the extensions need internet access
        sources += ext.source
    # Action Run Command needs outbound 443, or "the scripts might run successfully but not return the results".
    lost += ["Run Command results, so node health checks cannot report", "package mirrors and container registries"]
    yield Finding(code="OUTBOUND_DISABLED",
                  message="--no-outbound: the nodes get no way to the internet "
                  "(private subnet, no NAT gateway); this will not work: " + "; ".join(lost),
                  remedy="drop --no-outbound to give the subnet a NAT gateway, or provide an outbound path yourself "
                  "(a firewall route, or --subnet-id of a subnet that has one)",
                  source=cite(tuple(dict.fromkeys((*sources, "D-rc-linux")))), severity="warning", field="outbound")


# ------------------------------------------------------------------------ series rules (profiles)


@series_rule("hpc_image")
def _hpc_image(ctx: Context, args: dict) -> Iterator[Finding]:
    img = ctx.image
    if img is None or not img.known:
        return
    if img.name not in ctx.profile.recommended_images:
        # A remedy recommends current images only: a supported but legacy one (CentOS 7.9, Ubuntu 18.04)
        # passes this rule when asked for, and is never suggested.
        others = [n for n in current_images(ctx.profile.recommended_images) if n != ctx.profile.default_image]
        yield Finding(code="IMAGE_NOT_RECOMMENDED",
                      message=f"image '{img.name}' is not an Azure HPC image "
                      f"supported for {ctx.profile.series}: drivers, NCCL and Fabric Manager may be missing",
                      remedy=f"use --image {ctx.profile.default_image}"
                      + (f" (or one of {', '.join(others)})" if others else ""),
                      source=cite(ctx.rule_source), severity="warning", field="image")


def current_images(names) -> list[str]:
    """The names of catalog images that are not legacy, in the order given."""
    return [n for n in names if (i := catalog().get(n)) is not None and not i.legacy]


@series_rule("rdma_address_space")
def _rdma(ctx: Context, args: dict) -> Iterator[Finding]:
    reserved = ipaddress.ip_network(args.get("reserved", RDMA_RESERVED_DEFAULT))
    if ctx.vnet is not None and ctx.vnet.overlaps(reserved):
        yield Finding(code="VNET_RDMA_OVERLAP",
                      message=f"address space {ctx.vnet} overlaps {reserved}, "
                              "which the InfiniBand RDMA network reserves",
                      remedy="choose another range, e.g. --vnet-address-prefix 10.0.0.0/16",
                      source=cite(ctx.rule_source), field="vnet_address_prefix")


@series_rule("cuda_max")
def _cuda_max(ctx: Context, args: dict) -> Iterator[Finding]:
    img = ctx.image
    if img is None or not img.cuda:
        return
    major = int(img.cuda.split(".")[0])
    if major > args["max_major"]:
        yield Finding(code="IMAGE_CUDA_UNSUPPORTED",
                      message=f"image '{img.name}' ships CUDA {img.cuda}, which no longer supports the "
                      f"{ctx.size.gpu_model} (CUDA 13 dropped Volta); "
                      f"{ctx.size.name} needs CUDA {args['max_major']} or older",
                      remedy=f"use the V100 image: --image {ctx.profile.default_image}", source=cite(ctx.rule_source),
                      field="image")


@series_rule("rack_multiple")
def _rack(ctx: Context, args: dict) -> Iterator[Finding]:
    # The loader gives every profile with this rule a rack size (profiles._check_rack_rule).
    nodes, k = ctx.request.nodes or 0, ctx.profile.rack_size
    if nodes > 0 and nodes % k:
        lower, upper = nodes - nodes % k, nodes + k - nodes % k
        remedy = f"use --nodes {lower} or {upper}" if lower else f"use --nodes {upper}"
        # Azure refuses the scale set: "Capacity must be a multiple of 18 for SKUs that support vertical connect".
        yield Finding(code="NODES_NOT_RACK_MULTIPLE",
                      message=f"{nodes} nodes is not a whole number of NVL72 racks: Azure only creates "
                              f"{ctx.size.name} scale sets "
                      f"in multiples of {k} VMs", remedy=remedy,
                      source=cite((*ctx.rule_source, *ctx.profile.rack_source)), field="nodes")


@series_rule("gpu_vendor")
def _gpu_vendor(ctx: Context, args: dict) -> Iterator[Finding]:
    img = ctx.image
    if img is None or not img.known or not img.gpu_stack:
        return
    want = "rocm" if args["vendor"] == "amd" else "cuda"
    if img.gpu_stack != want:
        yield Finding(code="IMAGE_GPU_STACK",
                      message=f"image '{img.name}' carries the {img.gpu_stack.upper()} stack but {ctx.size.name} has "
                      f"{ctx.size.gpu_model} GPUs that need {want.upper()}",
                      remedy=f"use --image {ctx.profile.default_image}", source=cite(ctx.rule_source), field="image")


@series_rule("manual_driver")
def _manual_driver(ctx: Context, args: dict) -> Iterator[Finding]:
    yield Finding(code="GPU_DRIVER_MANUAL", message=args["message"],
                  remedy="install the GPU driver on the nodes after they start (see the source)",
                  source=cite(ctx.rule_source), severity="warning", field="image")


def custom_image(ctx: Context) -> Iterator[Finding]:
    """Gallery, community, direct-shared and managed images: what holds offline, and what waits for preflight."""
    img, req = ctx.image, ctx.request
    if img is None or img.image_id is None:
        return
    ref = img.image_id
    severity = "note" if ctx.command == "create" else "warning"
    yield Finding(code="IMAGE_CHECKED_AT_PREFLIGHT",
                  message=f"{ref.label} '{ref.text}': its Hyper-V generation, architecture, OS type and state"
                  + (", security type and replication to the location" if ref.kind != "managed" else " and location")
                  + " are read from Azure before anything is created; "
                  "azgpu assumes it carries the GPU driver and OFED, as images built from the Azure HPC images do",
                  remedy="run 'provision create --dry-run' to check it against the subscription",
                  source=cite(("D-sig",)), severity=severity, field="image")
    if ref.kind != "managed":
        return
    if ctx.size.arch == "Arm64":
        yield Finding(code="IMAGE_ARCHITECTURE",
                      message=f"{ctx.size.name} has Arm64 CPUs, and managed images "
                      "cannot be Arm64 (ARM64 images exist only in an Azure Compute Gallery)",
                      remedy="publish the image to a gallery as an Arm64 image definition and pass its ID",
                      source=cite(("D-managed-image",)), field="image")
    if req.security_type == "TrustedLaunch":
        yield Finding(code="IMAGE_SECURITY_TYPE",
                      message="Trusted Launch VMs cannot be created from a managed image (only from an "
                      "Azure Compute Gallery image)",
                      remedy="use --security-type Standard, or a gallery image with SecurityType "
                      "TrustedLaunchSupported", source=cite(("D-managed-image", "D-tl-portal")), field="security_type")
    if (req.nodes or 0) > MANAGED_IMAGE_CONCURRENCY:
        yield Finding(code="MANAGED_IMAGE_CONCURRENCY",
                      message=f"{req.nodes} nodes from one managed image: a managed image supports "
                      f"{MANAGED_IMAGE_CONCURRENCY} simultaneous deployments, more may time out in provisioning",
                      remedy="use an Azure Compute Gallery image version (one replica per 50 VMs) for large clusters",
                      source=cite(("D-managed-image",)), severity="warning", field="image")


MANAGED_IMAGE_CONCURRENCY = 20
PLACEMENT_GROUP_VMS = 100  # the default and usual size of a scale set's placement group (D-vmss-pg)


def spot_eviction(ctx: Context) -> Iterator[Finding]:
    """--eviction-policy, and what spot capacity means for an InfiniBand cluster."""
    req, size = ctx.request, ctx.size
    if req.eviction_policy is not None:
        policy = EVICTION_POLICIES.get(req.eviction_policy.strip().lower())
        if policy is None:
            yield Finding(code="INVALID_EVICTION_POLICY",
                          message=f"--eviction-policy must be Delete or Deallocate, not '{req.eviction_policy}'",
                          remedy="pass --eviction-policy Delete (azgpu's default) or Deallocate",
                          source=cite(("D-vmss-spot",)), field="eviction_policy")
        elif not req.spot:
            yield Finding(code="EVICTION_POLICY_WITHOUT_SPOT",
                          message="--eviction-policy applies only to spot capacity",
                          remedy="add --spot, or drop --eviction-policy", source=cite(("D-vmss-spot",)),
                          field="eviction_policy")
    if not req.spot:
        return
    if ctx.eviction_policy == "Deallocate":
        yield Finding(code="SPOT_DEALLOCATE",
                      message="evicted nodes stay deallocated: their disks are "
                      "still billed, they count against the scale set's quota, "
                      "and Azure does not guarantee they can be started again",
                      remedy="use --eviction-policy Delete and scale the set out again after an eviction",
                      source=cite(("D-vmss-spot",)),
                      severity="warning", field="eviction_policy")
    nodes = req.nodes or 0
    if size.infiniband and nodes > 1:
        yield Finding(code="SPOT_INFINIBAND",
                      message=f"spot capacity for {nodes} InfiniBand nodes: Azure "
                      "can evict any node at any time (30 seconds' notice through Scheduled Events), and one evicted "
                      "node breaks a multi-node job across the domain",
                      remedy="checkpoint often and restart jobs on eviction, or drop --spot for tightly coupled jobs",
                      source=cite(("D-vmss-spot", "D-setupib")), severity="warning", field="spot")
    groups = len(ctx.layout.scale_sets) if size.infiniband else -(-nodes // PLACEMENT_GROUP_VMS)
    if groups > 1:
        yield Finding(code="SPOT_MULTIPLE_PLACEMENT_GROUPS",
                      message=f"a spot cluster of {nodes} nodes spans {groups} "
                      "placement groups: spot VMs have no SLA and capacity is found per placement group, so parts of "
                      "the cluster can be missing or evicted while others run",
                      remedy="size spot clusters to one placement group "
                             "(--nodes 100 or fewer per cluster), or drop --spot",
                      source=cite(("D-vmss-spot", "D-vmss-pg")), severity="warning", field="spot")


UNIVERSAL: tuple[Callable[[Context], Iterator[Finding]], ...] = (
    retired, hyperv_generation, cpu_architecture, image_known, linux_only, trusted_launch, accelerated_networking,
    os_disk_size, data_disks, spot, ephemeral_os_disk, infiniband, ofed, gpu_extensions, custom_image, spot_eviction,
    outbound, imex,
)


def run(ctx: Context) -> list[Finding]:
    findings: list[Finding] = []
    for check in UNIVERSAL:
        findings.extend(check(ctx))
    for rule in ctx.profile.rules:
        findings.extend(SERIES_RULES[rule.name](structs.replace(ctx, rule_source=rule.source), rule.args))
    return findings
