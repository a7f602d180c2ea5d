"""The fake's behaviour behind the routes: find, store, start and finish operations on resources.

Subnets live inside their virtual network and scale-set extensions inside their scale set, as ARM
returns them; `find` reaches both by id so reference checks treat them like any resource.
"""

from __future__ import annotations

import copy
from collections.abc import Callable

from . import machines
from .errors import operation_in_progress, resource_group_not_found, resource_not_found
from .faults import Faults
from .lro import Operations, iso
from .messages import Request, Response
from .skus import SkuCatalog, normalize_location
from .store import Store, key, parse_id

VM_TYPE = "Microsoft.Compute/virtualMachineScaleSets/virtualMachines"
INLINE_CHILDREN = {
    ("microsoft.network/virtualnetworks", "subnets"): ("properties", "subnets"),
    ("microsoft.compute/virtualmachinescalesets", "extensions"):
        ("properties", "virtualMachineProfile", "extensionProfile", "extensions"),
}


class Backend:
    def __init__(self, subscription_id: str, store: Store, skus: SkuCatalog, faults: Faults, *,
                 lro_polls: int, lro_seconds: float | None, now: Callable[[], float],
                 on_finish: Callable[[Backend, dict], None]):
        """on_finish: what a finished operation does to its resource. The models pass it in, so this
        module, which they all build on, imports none of them."""
        self.subscription_id = subscription_id
        self.store = store
        self.skus = skus
        self.faults = faults
        self.now = now
        self._on_finish = on_finish
        self.ops = Operations(store, polls=lro_polls, seconds=lro_seconds, now=now, finish=self.finish)
        self.dirty = False  # set by anything that changes the store, so only changes are saved
        self.run_command_futures: dict = {}  # operation id -> a node script running beside the fake
        self.node_runs: dict = {}  # a node state's key -> its first run (vm_actions reuses it for the same state)
        self.throttle = None  # Azure's token buckets (models/throttling.Throttle) when the fake throttles

    # -- lookups ---------------------------------------------------------------------------------
    def rg_id(self, rg: str) -> str:
        return f"/subscriptions/{self.subscription_id}/resourceGroups/{rg}"

    def require_rg(self, rg: str) -> dict:
        group = self.store.get(self.rg_id(rg))
        if group is None:
            raise resource_group_not_found(rg)
        return group

    def _inline_list(self, parent: dict, child_type: str, create: bool = False) -> list | None:
        path = INLINE_CHILDREN.get((parent["type"].lower(), child_type.lower()))
        if path is None:
            return None
        node = parent
        for step in path:
            if step not in node or node[step] is None:
                if not create:
                    return None
                node[step] = [] if step == path[-1] else {}
            node = node[step]
        return node

    def find(self, resource_id: str | None) -> dict | None:
        """A stored resource, or a subnet/extension inside its parent; None when missing."""
        if not resource_id:
            return None
        found = self.store.get(resource_id)
        if found is not None:
            return found
        try:
            rid = parse_id(resource_id)
        except ValueError:
            return None
        parent = self.find(rid.parent) if rid.parent else None
        children = self._inline_list(parent, rid.types[-1]) if parent else None
        return next((c for c in children or () if c.get("name", "").lower() == rid.name.lower()), None)

    def require(self, resource_id: str) -> dict:
        found = self.find(resource_id)
        if found is None:
            rid = parse_id(resource_id)
            self.require_rg(rid.resource_group)
            raise resource_not_found(rid)
        return found

    def get_for_read(self, resource_id: str) -> dict:
        """GET of a resource: counts as a poll of its pending operation, then answers it."""
        rid = parse_id(resource_id)
        self.require_rg(rid.resource_group)
        self.ops.touch(resource_id)
        return self.require(resource_id)

    def top_level(self, rg: str | None = None) -> list[dict]:
        """Tracked resources as ARM lists them: no resource groups, no child resources."""
        out = []
        for resource in self.store.resources.values():
            rid = parse_id(resource["id"])
            if len(rid.types) == 1 and (rg is None or rid.resource_group.lower() == rg.lower()):
                out.append(resource)
        return out

    def in_group(self, rg: str, type_: str) -> list[dict]:
        return [r for r in self.top_level(rg) if r["type"].lower() == type_.lower()]

    # -- writes ----------------------------------------------------------------------------------
    def put_child(self, resource: dict) -> None:
        rid = parse_id(resource["id"])
        parent = self.find(rid.parent) if rid.parent else None
        children = self._inline_list(parent, rid.types[-1], create=True) if parent else None
        if children is None:
            self.store.put(resource)
            self.store.touch(resource["id"], iso(self.now()))
        else:
            children[:] = [c for c in children if c.get("name", "").lower() != rid.name.lower()] + [resource]
        self.dirty = True

    def remove(self, resource_id: str) -> None:
        """Delete a resource with everything below it (a scale set's instances and NICs)."""
        rid = parse_id(resource_id)
        parent = self.find(rid.parent) if rid.parent else None
        children = self._inline_list(parent, rid.types[-1]) if parent else None
        if children is not None:
            children[:] = [c for c in children if c.get("name", "").lower() != rid.name.lower()]
        removed = [self.store.delete(resource_id)]
        self.store.nodes.pop(key(resource_id), None)
        for below in self.store.under(resource_id):
            removed.append(self.store.delete(below["id"]))
            self.store.nodes.pop(key(below["id"]), None)
        self.dirty = True
        vms = [r["id"] for r in removed if r and r.get("type", "").lower() == VM_TYPE.lower()]
        if vms and self.store.machines:  # a deleted VM's OS stops with it (testing/machines.py)
            machines.gone(self.store.machines, vms)

    def new_resource(self, resource_id: str, body: dict, *, location: str | None = None) -> dict:
        """A PUT body as ARM stores it: the request's fields with id, name and type from the path."""
        rid = parse_id(resource_id)
        resource = copy.deepcopy(body) if isinstance(body, dict) else {}
        resource.pop("id", None)
        resource = {"id": resource_id, "name": rid.name, "type": rid.type, **resource}
        if location or resource.get("location"):
            resource["location"] = normalize_location(location or resource["location"])
        resource.setdefault("properties", {})
        return resource

    # -- operations ------------------------------------------------------------------------------
    def begin(self, req: Request, kind: str, resource: dict, location: str, error: dict | None = None) -> dict:
        """Start an operation; it fails with an injected fault's error, or with `error` (capacity)."""
        fault = self.faults.firing(req.method, req.path, operation=True)
        self.dirty = True
        return self.ops.start(kind, resource["id"], location=location, api_version=req.api_version,
                              error=fault.error() if fault else error)

    def refuse_while_running(self, req: Request, resource: dict) -> dict | None:
        """ARM's 409 for a write while an operation on the resource still runs. A DELETE repeated
        while the delete runs is answered with that same operation (DELETE is idempotent)."""
        op = self.ops.running(resource["id"])
        if op is None:
            return None
        if req.method.upper() == "DELETE" and op["kind"] == "delete":
            return op
        raise operation_in_progress(op, req.method, resource, self.ops.url(op))

    def accepted_put(self, req: Request, resource: dict, existed: bool, location: str, state: str | None = None,
                     error: dict | None = None) -> Response:
        """Store a PUT's resource as Creating/Updating and answer 201/200 with the status URL."""
        self.refuse_while_running(req, resource)
        resource["properties"]["provisioningState"] = state or ("Updating" if existed else "Creating")
        self.put_child(resource)
        op = self.begin(req, "put", resource, location, error)
        return Response(200 if existed else 201, resource, self.ops.headers(op))

    def accepted_delete(self, req: Request, resource: dict, location: str) -> Response:
        running = self.refuse_while_running(req, resource)
        if running is not None:
            return Response(202, None, self.ops.headers(running))
        resource = self.find(resource["id"]) or resource
        resource.setdefault("properties", {})["provisioningState"] = "Deleting"
        op = self.begin(req, "delete", resource, location)
        return Response(202, None, self.ops.headers(op))

    def finish(self, op: dict) -> None:
        """Apply a finished operation to its resource (the models' completion hook: models/completion.py)."""
        self.dirty = True
        self._on_finish(self, op)
