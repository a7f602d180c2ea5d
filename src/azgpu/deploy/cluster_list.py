"""`provision list`: every azgpu cluster in the subscription (or one resource group).

One listing finds them all: Resources - List (GET /subscriptions/{id}/resources, paged, with
`$expand=createdTime,changedTime,provisioningState`), unfiltered, because a listing filtered by tag
returns the resources without their tags (Resources - List, api 2024-11-01) and the tags are what
tells clusters apart; the filtering happens here. The total of nodes is each scale set's
sku.capacity from that listing; how many run needs the instances' power states, one instance
listing per scale set (per InfiniBand domain), in parallel. So a cluster costs one request per
scale set on top of the one listing.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any

from .. import resource_types
from ..errors import NotFoundError
from ..ownership import cluster_of, is_azgpu, profile_id_of
from ..profiles import load_profile
from ..resource_types import INSTANCES
from .arm import EXPAND, list_group, to_azure_error
from .lifecycle import _power_state

MAX_PARALLEL = 16


def _group_of(resource_id: str) -> str:
    parts = (resource_id or "").split("/")
    lowered = [p.lower() for p in parts]
    return parts[lowered.index("resourcegroups") + 1] if "resourcegroups" in lowered else ""


def _listing(session, resource_group: str | None) -> list[Any]:
    if resource_group:
        listed = list_group(session, resource_group)
        if listed is None:
            raise NotFoundError(f"resource group '{resource_group}' does not exist", code="RESOURCE_GROUP_NOT_FOUND",
                                remedy="check -g/--resource-group and --subscription, or leave -g out to list the "
                                       "whole subscription")
        return listed
    try:
        return list(session.resources.resources.list(expand=EXPAND))
    except Exception as exc:
        raise to_azure_error(exc, f"resources of subscription {session.subscription_id}") from None


def _running(session, resource_group: str, scale_set: str) -> int:
    vms = INSTANCES.list(session, resource_group, scale_set, instance_view=True)
    return sum(1 for vm in vms if _power_state(vm) == "running")


def _infiniband(profile_id: str, size: str) -> bool | None:
    try:
        return load_profile(profile_id).size(size).infiniband
    except Exception:  # a profile this version does not know: say nothing
        return None


def _iso(value: Any) -> str | None:
    if isinstance(value, datetime):
        return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return str(value) if value else None


def list_clusters(session, resource_group: str | None = None) -> list[dict[str, Any]]:
    """One row per cluster: name, resource group, location, profile, size, nodes running / total,
    InfiniBand domains, created time, provisioning state. Sorted by resource group and name."""
    clusters: dict[tuple[str, str], list[Any]] = {}
    for item in _listing(session, resource_group):
        tags = item.tags or {}
        cluster = cluster_of(tags) if is_azgpu(tags) else None
        if not cluster or not resource_types.managed(item.type):
            continue
        clusters.setdefault((_group_of(item.id).lower(), cluster), []).append(item)

    scale_sets = [(key, item) for key, items in clusters.items() for item in items
                  if item.type.lower() == resource_types.VMSS.type.lower()]
    running: dict[str, int | None] = {}

    def read(item: Any) -> None:
        try:
            running[item.id] = _running(session, _group_of(item.id), item.name)
        except Exception as exc:
            raise to_azure_error(exc, f"instances of {item.name}") from None

    if scale_sets:
        with ThreadPoolExecutor(max_workers=min(MAX_PARALLEL, len(scale_sets))) as pool:
            for job in [pool.submit(read, item) for _, item in scale_sets]:
                job.result()

    rows = []
    for (_, name), items in sorted(clusters.items()):
        sets = sorted((i for i in items if i.type.lower() == resource_types.VMSS.type.lower()), key=lambda i: i.name)
        tags = (sets[0] if sets else items[0]).tags or {}
        sizes = sorted({i.sku.name for i in sets if i.sku and i.sku.name})
        profile = profile_id_of(tags)
        ib = [s for s in sets if s.sku and _infiniband(profile or "", s.sku.name) is not False]
        states = sorted({(i.provisioning_state or "Succeeded") for i in items})
        created = [c for c in (_iso(getattr(i, "created_time", None)) for i in items) if c]
        rows.append({
            "name": name,
            "resource_group": _group_of(items[0].id),
            "location": (sets[0] if sets else items[0]).location,
            "profile": profile,
            "size": ", ".join(sizes) or None,
            "running": sum(running.get(s.id) or 0 for s in sets),
            "total": sum((s.sku.capacity or 0) if s.sku else 0 for s in sets),
            "ib_domains": len(ib),
            "created": min(created) if created else None,
            "state": states[0] if len(states) == 1 else ", ".join(states),
        })
    return rows
