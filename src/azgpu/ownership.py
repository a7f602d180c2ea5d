"""azgpu's ownership tags, written once, and the questions asked of them: is this resource (or group) azgpu's,
which cluster's, did azgpu create the group, which profile was a live scale set made with.

Every other module takes the tag names from here (tests/test_ownership.py fails on a module that writes one
again). The fake Azure does not: it plays Azure's part and reads no tag of azgpu's.
"""

from __future__ import annotations

from typing import Any

MANAGED_BY = "azgpu"  # the value of MANAGED_BY_TAG on everything azgpu creates
MANAGED_BY_TAG = "managed-by"
CLUSTER_TAG = "azgpu-cluster"
PROFILE_TAG = "azgpu-profile"
CREATED_TAG = "azgpu-created"  # on a resource group azgpu created (value "true"): destroy may delete it
NODE_TAG = "azgpu-slurm-node"  # on a Slurm binding Run Command: the node name the instance carries

# The names a user's --tag may not set: azgpu finds its resources by them.
RESERVED_TAGS = (MANAGED_BY_TAG, CLUSTER_TAG, PROFILE_TAG, CREATED_TAG)


def cluster_tags(cluster: str, profile: str) -> dict[str, str]:
    """The tags on every resource of a cluster."""
    return {MANAGED_BY_TAG: MANAGED_BY, CLUSTER_TAG: cluster, PROFILE_TAG: profile}


def created_group_tags(cluster: str) -> dict[str, str]:
    """The tags on a resource group azgpu creates for a cluster."""
    return {MANAGED_BY_TAG: MANAGED_BY, CLUSTER_TAG: cluster, CREATED_TAG: "true"}


def binding_tags(cluster: str, node: str) -> dict[str, str]:
    """The tags of the Run Command that records which Slurm node an instance carries."""
    return {NODE_TAG: node, CLUSTER_TAG: cluster, MANAGED_BY_TAG: MANAGED_BY}


def is_azgpu(tags: dict | None) -> bool:
    """Tagged as azgpu's (whichever cluster)."""
    return (tags or {}).get(MANAGED_BY_TAG) == MANAGED_BY


def is_ours(tags: dict | None, cluster: str) -> bool:
    """Tagged as azgpu's, for this cluster."""
    return is_azgpu(tags) and (tags or {}).get(CLUSTER_TAG) == cluster


def created_by_azgpu(tags: dict | None) -> bool:
    """A resource group azgpu created (so a destroy may delete it once it is empty)."""
    return is_azgpu(tags) and (tags or {}).get(CREATED_TAG) == "true"


def cluster_of(tags: dict | None) -> str | None:
    """The cluster a resource is tagged with (None: none)."""
    return (tags or {}).get(CLUSTER_TAG)


def profile_id_of(tags: dict | None) -> str | None:
    """The profile id a resource is tagged with (None: none)."""
    return (tags or {}).get(PROFILE_TAG)


def node_of(tags: dict | None) -> str | None:
    """The Slurm node name a binding Run Command is tagged with (None: none)."""
    return (tags or {}).get(NODE_TAG)


def live_profile(scale_set: Any) -> tuple[Any, Any]:
    """(profile, size) of a live scale set: its size in the profile it was made with (its PROFILE_TAG), else
    in the first profile that knows the size (a tag gone, edited, or naming a profile this azgpu lacks)."""
    from .errors import AzgpuError
    from .profiles import find_size, load_profile

    size = scale_set.sku.name
    profile_id = profile_id_of(getattr(scale_set, "tags", None))
    if profile_id:
        try:
            profile = load_profile(profile_id)
            return profile, profile.size(size)
        except AzgpuError:
            pass
    return find_size(size)
