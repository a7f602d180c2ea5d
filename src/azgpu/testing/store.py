"""The fake's state: ARM resources keyed by id, pending operations, and what tests changed.

Everything here is plain JSON so a --simulate run can carry it from one CLI process to the next
(persistence.py writes and reads the file).
Seeded catalogs (SKUs, images, default quota) are not stored: they are rebuilt from the fake's
own data files in each process, and only the changes a test or user made are kept.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

STATE_VERSION = 1
_UUID_NAMESPACE = uuid.UUID("6f1d1a52-7c47-4f3e-9a43-6e7a5a1e0c11")


@dataclass(frozen=True)
class ResourceId:
    subscription: str
    resource_group: str | None
    namespace: str | None
    types: tuple[str, ...]
    names: tuple[str, ...]

    @property
    def type(self) -> str:
        """The ARM type string, e.g. Microsoft.Network/virtualNetworks/subnets."""
        if self.namespace is None:
            return "Microsoft.Resources/resourceGroups"
        return "/".join((self.namespace, *self.types))

    @property
    def name(self) -> str:
        return self.names[-1] if self.names else (self.resource_group or "")

    @property
    def parent(self) -> str | None:
        """The id of the parent resource (a VNet for a subnet), or None for a top-level one."""
        if len(self.types) < 2:
            return None
        parts = [f"/subscriptions/{self.subscription}/resourceGroups/{self.resource_group}/providers/{self.namespace}"]
        for t, n in zip(self.types[:-1], self.names[:-1], strict=False):
            parts.append(f"{t}/{n}")
        return "/".join(parts)


def parse_id(resource_id: str) -> ResourceId:
    parts = [p for p in resource_id.split("/") if p]
    if len(parts) < 2 or parts[0].lower() != "subscriptions":
        raise ValueError(f"not an ARM resource id: {resource_id!r}")
    sub = parts[1]
    if len(parts) == 2:
        return ResourceId(sub, None, None, (), ())
    if len(parts) < 4 or parts[2].lower() != "resourcegroups":
        raise ValueError(f"not a resource-group-scoped ARM id: {resource_id!r}")
    rg = parts[3]
    if len(parts) == 4:
        return ResourceId(sub, rg, None, (), ())
    if len(parts) < 8 or parts[4].lower() != "providers" or len(parts) % 2:
        raise ValueError(f"not an ARM resource id: {resource_id!r}")
    rest = parts[6:]
    return ResourceId(sub, rg, parts[5], tuple(rest[0::2]), tuple(rest[1::2]))


def key(resource_id: str) -> str:
    """ARM ids compare case-insensitively; the store is keyed by the lower-cased id."""
    return resource_id.rstrip("/").lower()


def same_id(a: str | None, b: str | None) -> bool:
    return a is not None and b is not None and key(a) == key(b)


def stable_uuid(*parts: object) -> str:
    """Deterministic GUIDs (vmId, resourceGuid, operation ids) so request logs compare across runs."""
    return str(uuid.uuid5(_UUID_NAMESPACE, "/".join(map(str, parts))))


class Store:
    def __init__(self) -> None:
        # Default quota limits of this fake (FakeAzure(quota_limits=...)): how the subscription was
        # set up, not state, so neither clear() nor the state file touches them.
        self.limits: dict[str, int] = {}
        self.clear()

    def clear(self) -> None:
        self.resources: dict[str, dict] = {}
        self._descendants: dict[str, dict[str, None]] = {}
        self._by_type: dict[str, dict[str, None]] = {}  # lower-cased type -> keys of its resources
        self._nic_subnets: dict[str, tuple[str, ...]] = {}  # NIC's key -> its ip configurations' subnets' keys
        self._in_subnet: dict[str, dict[str, None]] = {}  # subnet's key -> keys of the NICs placed in it
        self.operations: dict[str, dict] = {}
        self.sku_overrides: list[dict] = []  # [{"location", "size", "overrides"}], applied in order
        self.quota: dict[str, dict[str, dict]] = {}  # location -> quota name -> {"limit", "usage"}
        self.images: list[dict] = []  # images added by add_image, on top of the seeded catalog
        # Marketplace terms by "publisher/offer/plan" (lower case): {"accepted", "retrieveDatetime"}.
        self.agreements: dict[str, dict] = {}
        # location -> size (lower case) -> zone ("" for regional) -> VMs Azure can still allocate.
        self.capacity: dict[str, dict[str, dict[str, int]]] = {}
        # Lower-cased id -> {"created", "changed"} (ISO 8601): what a listing's $expand shows.
        self.times: dict[str, dict[str, str]] = {}
        self.counter = 0
        # Simulated node hardware by lower-cased VM id (testing/hardware.py), faults queued for the
        # next new instances, InfiniBand fabric factors by scale set, and the next instance id of each
        # scale set (Azure never reuses an instance id after a deletion).
        self.nodes: dict[str, dict] = {}
        self.pending_faults: list[dict] = []
        self.fabric: dict[str, float] = {}
        self.instance_ids: dict[str, int] = {}
        # Rack faults of vertical-connect sizes waiting for the next rack (testing/models/vertical_connect.py).
        self.racks: dict[str, int] = {}
        # Azure Impact Reporting (testing/models/impact_reporting.py): workload impacts by lower-cased name
        # ({"resource", "reported", "insights"}), resource providers' registration states by lower-cased
        # namespace (unlisted: Registered), the caller's permissions (None: Owner-like), categories a
        # test added to the listing, and the insight stages of new reports (None: the data file's).
        self.impacts: dict[str, dict] = {}
        self.providers: dict[str, str] = {}
        self.permissions: list[dict] | None = None
        self.impact_categories: list[str] = []
        self.impact_insights: list[dict] | None = None
        # ARM's own preflight (testing/models/deployments.py): Azure Policy assignments that deny sizes
        # ({"name", "display_name", "denied_sizes", "scope"}) and properties Azure rejects
        # ({"type", "path", "code", "message"}).
        self.policies: list[dict] = []
        self.rejections: list[dict] = []
        # Microsoft.Quota (testing/models/quota_requests.py): requests by upper-case id, and what the fake does
        # with new requests by location and normalised quota name ("approve" unless set).
        self.quota_requests: dict[str, dict] = {}
        self.quota_outcomes: dict[str, dict[str, str]] = {}
        # The UNIX socket of the simulated VMs' operating systems a test attached (testing/machines.py).
        self.machines: str | None = None

    # -- resources ---------------------------------------------------------------------------
    def get(self, resource_id: str) -> dict | None:
        return self.resources.get(key(resource_id))

    def put(self, resource: dict) -> dict:
        k = key(resource["id"])
        old = self.resources.get(k)
        if old is None:
            self._below(k, add=True)
        self.resources[k] = resource
        self._index(k, old, resource)
        return resource

    def delete(self, resource_id: str) -> dict | None:
        self.times.pop(key(resource_id), None)
        found = self.resources.pop(key(resource_id), None)
        if found is not None:
            self._below(key(resource_id), add=False)
            self._index(key(resource_id), found, None)
        return found

    # Which resources lie below which id, kept as resources come and go: a 10,000-node cluster's
    # Run Commands each look below their VM, which a scan of every resource made quadratic.
    def _below(self, k: str, *, add: bool) -> None:
        cut = k.find("/", 1)
        while cut != -1:
            prefix = k[:cut]
            if add:
                self._descendants.setdefault(prefix, {})[k] = None
            else:
                found = self._descendants.get(prefix)
                if found is not None:
                    found.pop(k, None)
                    if not found:
                        del self._descendants[prefix]
            cut = k.find("/", cut + 1)

    # Which resources are of which type, and which NICs are placed in which subnet, kept the same way: a
    # scale set's listing, a subnet's GET (its NICs' ip configurations) and a new scale set's free
    # addresses each scanned every resource, which made a 10,000-node cluster's reads quadratic. Both keep
    # the order a scan of `resources` gives (the order resources were first stored).
    def _index(self, k: str, old: dict | None, new: dict | None) -> None:
        was, now = _kind(old), _kind(new)
        if was != now:
            if old is not None:
                self._by_type[was].pop(k, None)
                if not self._by_type[was]:
                    del self._by_type[was]
            if new is not None:
                self._by_type.setdefault(now, {})[k] = None
        before, after = self._nic_subnets.get(k, ()), _subnets_of(new)
        if before == after:
            return
        for subnet in before:
            self._in_subnet[subnet].pop(k, None)
            if not self._in_subnet[subnet]:
                del self._in_subnet[subnet]
        for subnet in after:
            self._in_subnet.setdefault(subnet, {})[k] = None
        if after:
            self._nic_subnets[k] = after
        else:
            self._nic_subnets.pop(k, None)

    def _reindex(self) -> None:
        self._descendants: dict[str, dict[str, None]] = {}
        self._by_type, self._nic_subnets, self._in_subnet = {}, {}, {}
        for k, resource in self.resources.items():
            self._below(k, add=True)
            self._index(k, None, resource)

    def touch(self, resource_id: str, when: str) -> None:
        """Record a write of a resource at `when`: its first write is its creation."""
        entry = self.times.setdefault(key(resource_id), {"created": when})
        entry["changed"] = when

    def under(self, prefix_id: str) -> list[dict]:
        """Every stored resource whose id lies below prefix_id (not the prefix itself)."""
        return [self.resources[k] for k in self._descendants.get(key(prefix_id), ())]

    def of_type(self, type_: str) -> list[dict]:
        return [self.resources[k] for k in self._by_type.get(type_.lower(), ())]

    def nics_in(self, subnet_id: str) -> list[dict]:
        """The NICs with an ip configuration in the subnet, as they were stored (a NIC's ip configurations
        are written when its instance is made, never changed in place: Store.put indexes them)."""
        return [self.resources[k] for k in self._in_subnet.get(key(subnet_id), ())]

    def next_number(self) -> int:
        self.counter += 1
        return self.counter

    # -- persistence -------------------------------------------------------------------------
    def to_json(self) -> dict:
        return {
            "version": STATE_VERSION,
            "resources": self.resources,
            "operations": self.operations,
            "sku_overrides": self.sku_overrides,
            "quota": self.quota,
            "images": self.images,
            "agreements": self.agreements,
            "capacity": self.capacity,
            "times": self.times,
            "counter": self.counter,
            "nodes": self.nodes,
            "pending_faults": self.pending_faults,
            "fabric": self.fabric,
            "instance_ids": self.instance_ids,
            "racks": self.racks,
            "impacts": self.impacts,
            "providers": self.providers,
            "permissions": self.permissions,
            "impact_categories": self.impact_categories,
            "impact_insights": self.impact_insights,
            "policies": self.policies,
            "rejections": self.rejections,
            "quota_requests": self.quota_requests,
            "quota_outcomes": self.quota_outcomes,
            "machines": self.machines,
        }

    def load_json(self, data: dict) -> None:
        """Replace the state with a saved one; ValueError (saying what is wrong) when it is not one."""
        problem = shape_problem(data)
        if problem:
            raise ValueError(problem)
        self.clear()
        self.resources = data["resources"]
        self._reindex()
        self.operations = data["operations"]
        self.sku_overrides = data["sku_overrides"]
        self.quota = data["quota"]
        self.images = data["images"]
        self.agreements = data.get("agreements", {})  # absent from states saved before terms existed
        self.capacity = data.get("capacity", {})
        self.times = data.get("times", {})
        self.counter = data["counter"]
        self.nodes = data.get("nodes", {})
        self.pending_faults = data.get("pending_faults", [])
        self.fabric = data.get("fabric", {})
        self.instance_ids = data.get("instance_ids", {})
        self.racks = data.get("racks", {})
        self.impacts = data.get("impacts", {})
        self.providers = data.get("providers", {})
        self.permissions = data.get("permissions")
        self.impact_categories = data.get("impact_categories", [])
        self.impact_insights = data.get("impact_insights")
        self.policies = data.get("policies", [])
        self.rejections = data.get("rejections", [])
        self.quota_requests = data.get("quota_requests", {})
        self.quota_outcomes = data.get("quota_outcomes", {})
        self.machines = data.get("machines")


# How the fake stores a NIC's type (models/instances.py makes scale-set NICs); the one spelling of it.
NIC_TYPE = "Microsoft.Network/networkInterfaces"


def _kind(resource: dict | None) -> str | None:
    return None if resource is None else str(resource.get("type", "")).lower()


def _subnets_of(resource: dict | None) -> tuple[str, ...]:
    """The keys of the subnets a NIC's ip configurations are placed in; () for anything else."""
    if _kind(resource) != NIC_TYPE.lower():
        return ()
    found: dict[str, None] = {}
    for ipc in (resource.get("properties") or {}).get("ipConfigurations") or []:
        subnet = ((ipc.get("properties") or {}).get("subnet") or {}).get("id") if isinstance(ipc, dict) else None
        if isinstance(subnet, str) and subnet:
            found[key(subnet)] = None
    return tuple(found)


def shape_problem(data) -> str | None:
    """What makes `data` something other than a saved state of this version, or None."""
    if not isinstance(data, dict):
        return f"holds a JSON {type(data).__name__}, not a FakeAzure state"
    if data.get("version") != STATE_VERSION:
        return f"has version {data.get('version')!r}; this azgpu reads version {STATE_VERSION}"
    shapes = {"resources": dict, "operations": dict, "sku_overrides": list, "quota": dict, "images": list,
              "times": dict, "counter": int, "agreements": dict, "capacity": dict, "nodes": dict,
              "pending_faults": list, "fabric": dict, "instance_ids": dict, "impacts": dict, "providers": dict,
              "impact_categories": list, "racks": dict, "policies": list, "rejections": list,
              "quota_requests": dict, "quota_outcomes": dict}
    # Saved before these existed: absent is an empty one.
    optional = {"times", "agreements", "capacity", "nodes", "pending_faults", "fabric", "instance_ids", "impacts",
                "providers", "impact_categories", "racks", "policies", "rejections",
                "quota_requests", "quota_outcomes"}
    for name, kind in shapes.items():
        if name in optional and name not in data:
            continue
        if not isinstance(data.get(name), kind) or isinstance(data.get(name), bool):
            return f"has no valid '{name}' ({kind.__name__} expected)"
    if not isinstance(data.get("machines"), (str, type(None))):
        return "has no valid 'machines' (a socket path or null expected)"
    for rid, resource in data["resources"].items():
        if not (isinstance(resource, dict) and isinstance(resource.get("id"), str)
                and isinstance(resource.get("type"), str)
                and isinstance(resource.get("properties", {}), dict) and key(resource["id"]) == rid):
            return f"has a malformed resource under {rid[:120]!r}"
    for op in data["operations"].values():
        if not (isinstance(op, dict) and {"kind", "target", "status", "started", "polls"} <= set(op)):
            return "has a malformed operation"
    for location in data["quota"].values():
        if not (isinstance(location, dict) and all(isinstance(v, dict) for v in location.values())):
            return "has malformed quota"
    if not all(isinstance(x, dict) for x in data["images"] + data["sku_overrides"]):
        return "has malformed images or SKU overrides"
    for name, node in (data.get("nodes") or {}).items():
        problem = node_problem(node)
        if problem:
            return f"has a malformed node under {str(name)[:120]!r}: {problem}"
    return None


# What every node state holds (hardware.new_node writes it; Run Command's sandbox and the faults read it).
_NODE_FIELDS = {"size": str, "vm_id": str, "computer": str, "vm_name": str, "physical_host": str, "hpc_image": bool,
                "admin_user": str, "gpus": list, "ib": list, "xids": list, "nvidia_smi": str, "nvlink": str,
                "run_command": str, "faults": list, "files": dict}
_GPU_FIELDS = {"bus": str, "serial": str, "present": bool}
_PORT_FIELDS = {"dev": str, "state": str, "phys": str, "rate": int, "width": int}


def node_problem(node) -> str | None:
    """What makes a saved node state one the fake cannot run a check on, or None."""
    if not isinstance(node, dict):
        return f"a JSON {type(node).__name__}, not an object"
    for key_, kind in _NODE_FIELDS.items():
        if not isinstance(node.get(key_), kind) or (kind is not bool and isinstance(node.get(key_), bool)):
            return f"no valid '{key_}' ({kind.__name__} expected)"
    for items, fields, what in ((node["gpus"], _GPU_FIELDS, "GPU"), (node["ib"], _PORT_FIELDS, "port")):
        for item in items:
            if not isinstance(item, dict) or any(not isinstance(item.get(k), t) for k, t in fields.items()):
                return f"a malformed {what}"
    if not all(isinstance(x, int) and not isinstance(x, bool) for x in node["xids"]):
        return "a malformed Xid"
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in node["files"].items()):
        return "malformed files"
    for optional in ("fabric", "rack"):
        if optional in node and not isinstance(node[optional], dict):
            return f"a malformed '{optional}'"
    if "forged" in node and not isinstance(node["forged"], str):
        return "a malformed 'forged' output"
    return None
