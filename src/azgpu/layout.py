"""How a cluster's nodes are laid out: InfiniBand domains, the scale-set split, and the resources
the plan creates for them. Decided once, before the rules check the request (rules.py reads it,
spec.py keeps it in the Spec, plan.py builds what it says).

InfiniBand spans one Uniform scale set with a single placement group and never crosses scale
sets, so a cluster larger than one domain is split into several scale sets (D-setupib, D-vmss-pg).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from msgspec import Struct

from .resource_types import NAT_GATEWAY, NSG, PPG, PUBLIC_IP, VMSS, VNET, ResourceType

if TYPE_CHECKING:
    from .profiles import Profile, Size
    from .request import Request


class Layout(Struct, frozen=True):
    """The scale sets a request becomes, with what the decision was made from (for the findings)."""

    ib_domain: int  # the most VMs one scale set holds
    scale_sets: tuple[int, ...]  # VMs per scale set, in order; () without a valid node count
    # InfiniBand sizes: the domain asked for (--max-ib-domain, else the default), Azure's default and
    # raised single-placement-group limits, and their sources. 0 and () on sizes without InfiniBand.
    requested_domain: int = 0
    default_domain: int = 0
    raised_domain: int = 0
    domain_source: tuple[str, ...] = ()
    # GB200/GB300: the rack size (VMs) with its sources, and the domain that would have cut racks
    # before it was rounded down to whole racks (None: it did not).
    rack: tuple[int, tuple[str, ...]] | None = None
    rack_cut: int | None = None


def rack_multiple(profile: Profile) -> tuple[int, tuple[str, ...]] | None:
    """The rack size (VMs) of a profile with the rack_multiple rule (Profile.rack_size), with the rule's sources."""
    for rule in profile.rules:
        if rule.name == "rack_multiple" and profile.rack_size:
            return profile.rack_size, rule.source
    return None


def decide_layout(request: Request, profile: Profile, size: Size) -> Layout:
    """Scale sets of at most one InfiniBand domain (or Azure's scale-set limit without InfiniBand),
    whole NVL72 racks each where the series has racks. An invalid --max-ib-domain falls back to the
    default (the infiniband rule reports it)."""
    nodes = request.nodes or 0
    requested = default = raised = 0
    source: tuple[str, ...] = ()
    if size.infiniband:
        default = int(profile.scale_set.get("max_per_ib_domain", 100))
        raised = int(profile.scale_set.get("max_per_ib_domain_raised", 300))
        source = profile.scale_set.get("source", ("D-setupib",))
        requested = default if request.max_ib_domain is None else request.max_ib_domain  # 0 is invalid, not 'default'
        domain = requested if 1 <= requested <= raised else default
    else:
        domain = int(profile.scale_set.get("max_per_scale_set", 1000))
    rack = rack_multiple(profile)
    rack_cut = None
    if size.infiniband and rack is not None and domain > rack[0] and domain % rack[0]:
        # A scale set (the InfiniBand domain) cut inside an NVL72 rack leaves racks partial.
        rack_cut, domain = domain, domain - domain % rack[0]
    scale_sets: tuple[int, ...] = ()
    if nodes > 0:
        full, rest = divmod(nodes, domain)
        scale_sets = (domain,) * full + ((rest,) if rest else ())
    return Layout(domain, scale_sets, requested, default, raised, source, rack, rack_cut)


def resource_kinds(*, existing_subnet: bool, nat_gateway: bool, new_ppg: bool,
                   scale_sets: int) -> tuple[ResourceType, ...]:
    """The type of each resource a plan creates, in its order: the validator counts them against ARM's
    limit and plan.build_plan builds them, so the two cannot disagree."""
    kinds = [NSG]
    if new_ppg:
        kinds.append(PPG)
    if not existing_subnet:
        kinds += [PUBLIC_IP, NAT_GATEWAY, VNET] if nat_gateway else [VNET]
    return (*kinds, *(VMSS,) * scale_sets)
