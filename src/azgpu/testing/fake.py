"""FakeAzure: a stateful Azure Resource Manager behind `responses`, under the real Azure SDK.

The SDK clients build real requests and run their real serializers, retry policy and LRO
pollers; only the HTTP exchange is answered here. Every request is logged; any request the fake
does not implement raises NotImplementedInFake out of the SDK call, and nothing reaches the
network.

`responses` only stands in while it is started. Clients built on `requests_session()` are held to
that even when threads outlive the fake: their adapter cannot open a connection at all, and stop()
waits for every request they have in flight before it uninstalls the mock.
"""

from __future__ import annotations

import copy
import json
import os
import re
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable
from unittest import mock
from urllib.parse import parse_qs, unquote, urlsplit

import requests
import responses
from azure.core.pipeline.transport import RequestsTransport
from requests.adapters import HTTPAdapter
from filelock import Timeout

from . import galleries, images, marketplace, quota, retail_prices, routes
from .backend import Backend
from .errors import ArmError, NotImplementedInFake, OfflineError, StateFileBusy, StateFileError
from .faults import Fault, Faults
from .messages import Request, Response
from .skus import DEFAULT_LOCATIONS, SkuCatalog, normalize_location
from .lro import iso as lro_iso
from .store import Store, parse_id, stable_uuid

DEFAULT_SUBSCRIPTION = "00000000-0000-0000-0000-000000000000"
HOST = "management.azure.com"
_SUBSCRIPTION = re.compile(r"/subscriptions/([^/]+)", re.IGNORECASE)
_METHODS = ("GET", "PUT", "POST", "PATCH", "DELETE", "HEAD", "OPTIONS")


@dataclass(frozen=True)
class LoggedRequest:
    method: str
    path: str
    query: dict
    api_version: str | None
    body: Any
    status: int | None  # None when no answer was given (dropped connection, not implemented)


class FakeAzure:
    def __init__(self, subscription_id: str = DEFAULT_SUBSCRIPTION, *, lro_polls: int = 1,
                 lro_seconds: float | None = None, clock: Callable[[], float] | None = None,
                 state_file: str | os.PathLike | None = None, seed_skus: bool = True,
                 locations: list[str] | tuple[str, ...] | None = None, quota_limits: dict[str, int] | None = None):
        """quota_limits: default limits of this subscription's usages, by usage name ("cores",
        "lowPriorityCores", ...) or "gpuFamily" / "family" for every GPU / other vCPU family."""
        self.subscription_id = subscription_id
        self.requests: list[LoggedRequest] = []
        self.sleeps: list[float] = []
        self.state_file = Path(state_file) if state_file else None
        self._clock = clock
        self._virtual_now = time.time()  # wall-clock start, so state-file timestamps compare across processes
        self._lock = threading.RLock()
        self._mock: responses.RequestsMock | None = None
        self._sleep_patch = None
        self._wait_patch = None
        self._accepting = False  # whether requests through requests_session() may go on
        self._in_flight = 0
        self._flights = threading.Condition()
        self._store = Store()
        self._store.limits = dict(quota_limits or {})
        extra = [normalize_location(loc) for loc in locations or ()]
        self._skus = SkuCatalog(self._store, tuple(dict.fromkeys([*DEFAULT_LOCATIONS, *extra])), seed_skus)
        self._faults = Faults()
        self._backend = Backend(subscription_id, self._store, self._skus, self._faults,
                                lro_polls=lro_polls, lro_seconds=lro_seconds, now=self.now)
        self._file_lock = _state_lock(self.state_file) if self.state_file else None
        self._synced: tuple | None = None  # the state file as last read or written here (_signature)
        if self.state_file:
            if "\0" in str(self.state_file):
                raise StateFileError(self.state_file, "is not a valid path", "pass the path of a file")
            if self.state_file.exists() and not (self.state_file.is_file() or self.state_file.is_dir()):
                # A device or FIFO: reading it would never end (/dev/zero) or never start (a FIFO).
                raise StateFileError(self.state_file, "is not a regular file",
                                     "pass the path of a file: --simulate-state DIR/simulate.json")
            try:
                self.state_file.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StateFileError(self.state_file, f"cannot be created: {exc.strerror}",
                                     "pass a --simulate-state FILE in a directory you can write") from None
        with self._transaction():
            pass

    # -- context ---------------------------------------------------------------------------------
    def __enter__(self) -> "FakeAzure":
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        self._mock = responses.RequestsMock(assert_all_requests_are_fired=False)
        for method in _METHODS:
            # Every URL on every host: what is not Azure Resource Manager fails loudly, never goes out.
            self._mock.add_callback(method, re.compile(r".*"), callback=self._answer, content_type=None)
        self._mock.start()
        from .. import pricing

        pricing.fake_started(self)  # its prices stay out of the user's price cache
        with self._flights:
            self._accepting = True
        if self._clock is None:
            # The retry policy and the LRO poller both sleep through the transport; azgpu's sessions
            # wait through session.real_wait (interruptible): both advance the virtual clock instead.
            self._sleep_patch = mock.patch.object(RequestsTransport, "sleep", lambda transport, seconds: self.sleep(seconds))
            self._sleep_patch.start()
            self._wait_patch = mock.patch("azgpu.deploy.session.real_wait",
                                          lambda event, seconds: self.sleep(seconds) or event.is_set())
            self._wait_patch.start()

    def stop(self, *, grace: float = 5.0) -> None:
        # Pollers first (they may still need answers), then no new request is admitted, then the
        # ones in flight finish while the mock still answers them: none can fall through to a socket.
        self._join_pollers(10 if self._clock is None else 1)
        with self._flights:
            self._accepting = False
            self._flights.wait_for(lambda: self._in_flight == 0, timeout=grace)
        if self._sleep_patch is not None:
            self._sleep_patch.stop()
            self._wait_patch.stop()
            self._sleep_patch = self._wait_patch = None
        if self._mock is not None:
            self._mock.stop()
            self._mock.reset()
            self._mock = None
        from .. import pricing

        pricing.fake_stopped(self)

    @staticmethod
    def _join_pollers(timeout: float = 10) -> None:
        """Let SDK pollers still running in their threads (a begin_* never waited for) finish while
        the fake still answers: after stop() their next poll would go to the real Azure. With the
        virtual clock they finish at once; with a real clock the process ends them instead."""
        for thread in threading.enumerate():
            if thread.name.startswith("LROPoller(") and thread is not threading.current_thread():
                thread.join(timeout)

    # -- a transport that cannot leave the process -------------------------------------------------
    def requests_session(self) -> requests.Session:
        """A requests.Session for SDK clients (RequestsTransport(session=...)) that only this fake answers.

        Its adapter admits a request only while the fake is started and counts it until answered;
        it cannot open a connection, so a request made after stop() fails with OfflineError
        instead of reaching the network.
        """
        session = requests.Session()
        session.trust_env = False  # no proxies or netrc from the environment: nothing is meant to leave
        adapter = _OfflineAdapter(self)
        session.mount("https://", adapter)
        session.mount("http://", adapter)
        return session

    def _admit(self, method: str, url: str) -> None:
        with self._flights:
            if not self._accepting:
                raise OfflineError(method, url, "the fake Azure is not running; nothing leaves the process")
            self._in_flight += 1

    def _landed(self) -> None:
        with self._flights:
            self._in_flight -= 1
            self._flights.notify_all()

    # -- time ------------------------------------------------------------------------------------
    def now(self) -> float:
        return self._clock() if self._clock else self._virtual_now

    def sleep(self, seconds: float) -> None:
        """What the SDK's sleeps do inside the fake: record them and advance the virtual clock."""
        with self._lock:  # pollers sleep in their own threads
            self.sleeps.append(seconds)
            self._virtual_now += seconds

    # -- the HTTP side ---------------------------------------------------------------------------
    def _answer(self, prepared: requests.PreparedRequest):
        with self._transaction():
            url = urlsplit(prepared.url)
            path = unquote(url.path)
            query = {k: v[-1] for k, v in parse_qs(url.query, keep_blank_values=True).items()}
            body = _json_body(prepared.body)
            method = prepared.method.upper()

            def log(status: int | None) -> None:
                self.requests.append(LoggedRequest(method, path, query, query.get("api-version"), body, status))

            host = (url.hostname or "").lower()
            if host not in (HOST, retail_prices.HOST):
                log(None)
                raise NotImplementedInFake(method, prepared.url,
                                           "only https://management.azure.com and https://prices.azure.com are faked")
            fault = self._faults.firing(method, path, operation=False)
            if fault is not None:
                log(None if fault.reset else fault.status)
                if fault.reset:
                    raise requests.exceptions.ConnectionError(f"azgpu.testing: injected connection reset on {method} {path}")
                body, headers = fault.answer(method, path, subscription=self.subscription_id, now=self.now())
                return _wire(Response(fault.status, body, headers), method)
            try:
                if host == retail_prices.HOST:
                    response = retail_prices.answer(method, path, query, prepared.url)
                else:
                    response = self._dispatch(Request(method, path, query, body))
            except NotImplementedInFake:
                log(None)
                raise
            log(response.status)
            return _wire(response, method)

    def _dispatch(self, req: Request) -> Response:
        try:
            sub = _SUBSCRIPTION.match(req.path)
            if sub and sub.group(1).lower() != self.subscription_id.lower():
                raise ArmError(404, "SubscriptionNotFound", f"The subscription '{sub.group(1)}' could not be found.")
            self._backend.ops.settle()
            found = routes.find(req.method, req.path)
            if found is None:
                raise NotImplementedInFake(req.method, req.path)
            handler, params = found
            return handler(self._backend, req, **params)
        except ArmError as err:
            return Response(err.status, err.body(), err.headers)

    # -- inspecting and seeding state ------------------------------------------------------------
    def resources(self, type: str | None = None, resource_group: str | None = None) -> list[dict]:
        """Stored resources as deep copies: resource groups, scale-set instances and NICs included.

        With resource_group, the resources inside that group (not the group itself).
        """
        with self._transaction():
            out = []
            for resource in self._store.resources.values():
                if type and resource.get("type", "").lower() != type.lower():
                    continue
                if resource_group:
                    rid = parse_id(resource["id"])
                    if rid.namespace is None or rid.resource_group.lower() != resource_group.lower():
                        continue
                out.append(copy.deepcopy(resource))
            return out

    def get(self, resource_id: str) -> dict | None:
        with self._transaction():
            found = self._backend.find(resource_id)
            return copy.deepcopy(found) if found is not None else None

    def add_resource(self, resource_id: str, body: dict) -> dict:
        """Store a resource as if it existed already (provisioning Succeeded; scale sets get instances).

        A resource group too: add_resource(f"/subscriptions/{azure.subscription_id}/resourceGroups/rg",
        {"location": "eastus"}).
        """
        with self._transaction():
            resource = self._backend.new_resource(resource_id, body)
            resource["properties"].setdefault("provisioningState", "Succeeded")
            if resource["type"] == "Microsoft.Network/virtualNetworks":
                resource["properties"]["subnets"] = [
                    {**s, "id": f"{resource_id}/subnets/{s['name']}", "type": "Microsoft.Network/virtualNetworks/subnets"}
                    for s in resource["properties"].get("subnets") or []]
            self._backend.put_child(resource)
            if resource["type"].lower() == "microsoft.compute/virtualmachinescalesets":
                from . import instances

                instances.reconcile(self._backend, resource)
            self.save()
            return copy.deepcopy(resource)

    def inject(self, *, method: str | None = None, path: str | None = None, status: int | None = None,
               retry_after: float | None = None, reset: bool = False, operation_error: str | None = None,
               message: str | None = None, after: int = 0, times: int | None = 1, share: float | None = None,
               code: str | None = None, throttle: str | None = None, body: dict | None = None,
               headers: dict | None = None) -> Fault:
        """Make matching requests fail; returns the Fault, whose .fired counts how often it did.

        status=: answer with that HTTP status and ARM's error body (`code=` sets its error code, e.g.
        status=409, code="SkuNotAvailable"). A 429 is shaped like Compute's throttling answer on
        Microsoft.Compute paths and like Resource Manager's elsewhere; throttle="compute"|"arm" picks.
        body= (with headers=): answer exactly that, e.g. a real error body kept as a test fixture.
        operation_error=: the PUT/DELETE is accepted and its long-running operation fails with that code.
        """
        with self._lock:
            return self._faults.add(Fault(method=method, path=path, status=status, retry_after=retry_after, reset=reset,
                                          operation_error=operation_error, message=message, after=after, times=times,
                                          share=share, code=code, throttle=throttle, body=body,
                                          answer_headers=headers))

    def set_sku(self, location: str, size: str, **overrides: Any) -> None:
        with self._transaction():
            self._skus.set(location, size, overrides)
            self.save()

    def set_quota(self, location: str, family_or_name: str, *, limit: int | None = None, usage: int | None = None) -> None:
        """Set a usage entry's limit and/or its usage outside the fake's own scale sets."""
        with self._transaction():
            quota.set_quota(self._store, self._skus, location, family_or_name, limit, usage)
            self.save()

    def set_quota_outcome(self, location: str, family_or_name: str, outcome: str) -> None:
        """What Microsoft.Quota does with the next increase requests for a usage: "approve" (the
        default) or "escalate" (Failed with ContactSupport, as for a GPU family sent to support)."""
        from . import quota_requests

        with self._transaction():
            quota_requests.set_outcome(self._store, location, family_or_name, outcome)
            self.save()

    def set_capacity(self, location: str, size: str, max_vms: int | None, *, zone: str | None = None) -> None:
        """At most max_vms VMs of `size` in the location (or in one zone of it), across all scale sets;
        a scale set that would go beyond fails with AllocationFailed (ZonalAllocationFailed in a
        zone). max_vms=None lifts the limit."""
        with self._transaction():
            limits = self._store.capacity.setdefault(normalize_location(location), {}).setdefault(size.lower(), {})
            if max_vms is None:
                limits.pop(str(zone or ""), None)
                if not limits:
                    del self._store.capacity[normalize_location(location)][size.lower()]
            else:
                limits[str(zone or "")] = int(max_vms)
            self.save()

    def add_image(self, location: str, publisher: str, offer: str, sku: str, version: str, *,
                  hyper_v_generation: str = "V2", architecture: str = "x64", plan: dict | None = None,
                  features: list[dict] | None = None, deprecation: dict | None = None) -> None:
        """Offer a marketplace image version in a location (beside the fake's own catalog).

        plan: {"publisher", "product", "name"} makes it a marketplace image with a purchase plan
        (its terms start unaccepted; see accept_terms). features: [{"name", "value"}], e.g.
        SecurityType. deprecation: imageDeprecationStatus, e.g. {"imageState": "Deprecated",
        "scheduledDeprecationTime": "2025-01-01T00:00:00+00:00"}.
        """
        props = images.properties(hyper_v_generation, architecture, plan=plan, features=features, deprecation=deprecation)
        with self._transaction():
            self._store.images.append(images.added_image(location, publisher, offer, sku, version, props))
            self.save()

    def accept_terms(self, publisher: str, offer: str, plan: str, *, accepted: bool = True) -> None:
        """Accept (or, with accepted=False, revoke) a purchase plan's marketplace terms for the
        subscription, as `az vm image terms accept --publisher P --offer O --plan PLAN` does.

        offer is the plan's product (the image's offer); plan is the plan's name.
        """
        with self._transaction():
            marketplace.set_accepted(self._store, publisher, offer, plan, accepted, self.now())
            self.save()

    def terms_accepted(self, publisher: str, offer: str, plan: str) -> bool:
        with self._transaction():
            return marketplace.accepted(self._store, publisher, offer, plan)

    # -- custom images, identities (what a cluster references but azgpu does not create) ----------
    def _seed(self, resource_id: str, body: dict, *, provisioned: bool = True) -> dict:
        """Store a resource as existing (provisioning Succeeded where the type reports a provisioning state),
        making its resource group if missing."""
        rid = parse_id(resource_id)
        group_id = self._backend.rg_id(rid.resource_group)
        if self._store.get(group_id) is None:
            self._store.put({"id": group_id, "name": rid.resource_group, "type": "Microsoft.Resources/resourceGroups",
                             "location": normalize_location(body.get("location") or "eastus"), "tags": {},
                             "properties": {"provisioningState": "Succeeded"}})
        resource = self._backend.new_resource(resource_id, body)
        if provisioned:
            resource["properties"].setdefault("provisioningState", "Succeeded")
        self._backend.put_child(resource)
        self.save()
        return copy.deepcopy(resource)

    def add_gallery_image(self, resource_group: str, gallery: str, image: str, *, location: str = "eastus",
                          hyper_v_generation: str = "V2", architecture: str = "x64", os_type: str = "Linux",
                          os_state: str = "Generalized", security_type: str | None = None, publisher: str = "contoso",
                          offer: str | None = None, sku: str | None = None, community_name: str | None = None,
                          shared_name: str | None = None, body: dict | None = None,
                          purchase_plan: dict | None = None) -> str:
        """An Azure Compute Gallery image definition (the gallery is made when missing); returns its ID.

        purchase_plan ({"name", "publisher", "product"}): the definition is of an image built from a
        Marketplace image with that plan; scale sets of it need the plan and accepted terms.

        community_name publishes the gallery to the community under that public name; shared_name shares
        it directly (Groups) under that unique name. body replaces the generated REST body, e.g. with a
        REST-spec example's."""
        with self._transaction():
            gallery_id = f"{self._backend.rg_id(resource_group)}/providers/{galleries.GALLERY_TYPE}/{gallery}"
            sharing: dict = {"permissions": "Private"}
            if community_name:
                sharing = {"permissions": "Community", "communityGalleryInfo": {"publicNames": [community_name]}}
            elif shared_name:
                sharing = {"permissions": "Groups"}
            if self._store.get(gallery_id) is None or community_name or shared_name:
                unique = shared_name or f"{self.subscription_id}-{gallery.upper()}"
                self._seed(gallery_id, {"location": location, "properties": {
                    "identifier": {"uniqueName": unique}, "sharingProfile": sharing}})
            image_body = body if body is not None else galleries.definition_body(
                location=location, os_type=os_type, os_state=os_state, hyper_v_generation=hyper_v_generation,
                architecture=architecture, security_type=security_type, publisher=publisher, offer=offer or gallery,
                sku=sku or image, purchase_plan=purchase_plan)
            return self._seed(f"{gallery_id}/images/{image}", image_body)["id"]

    def add_gallery_image_version(self, image_id: str, version: str, *, regions: tuple[str, ...] | list[str] = ("eastus",),
                                  replication_state: str | dict[str, str] = "Completed", exclude_from_latest: bool = False,
                                  replica_count: int = 1, shallow: bool = False, body: dict | None = None) -> str:
        """A version of a gallery image definition, replicated to `regions` (replication_state: one state for
        all, or per region, e.g. {"westus": "Replicating"}); returns its ID."""
        with self._transaction():
            image = self._store.get(image_id)
            if image is None:
                raise KeyError(f"no gallery image {image_id!r}: add it with add_gallery_image first")
            states = replication_state if isinstance(replication_state, dict) else {r: replication_state for r in regions}
            version_body = body if body is not None else galleries.version_body(
                location=image.get("location", regions[0] if regions else "eastus"), regions=list(regions),
                replication={galleries.region_key(k): v for k, v in states.items()}, exclude_from_latest=exclude_from_latest,
                replica_count=replica_count, shallow=shallow, published=lro_iso(self.now()))
            return self._seed(f"{image['id']}/versions/{version}", version_body)["id"]

    def add_managed_image(self, resource_group: str, name: str, *, location: str = "eastus",
                          hyper_v_generation: str = "V2", os_type: str = "Linux", os_state: str = "Generalized",
                          body: dict | None = None) -> str:
        """A managed image (Microsoft.Compute/images); returns its ID."""
        with self._transaction():
            image_body = body if body is not None else {"location": location, "properties": {
                "storageProfile": {"osDisk": {"osType": os_type, "osState": os_state, "storageAccountType": "Premium_LRS"},
                                   "dataDisks": []},
                "hyperVGeneration": hyper_v_generation}}
            return self._seed(f"{self._backend.rg_id(resource_group)}/providers/{galleries.MANAGED_IMAGE_TYPE}/{name}",
                              image_body)["id"]

    def add_proximity_placement_group(self, resource_group: str, name: str, *, location: str = "eastus",
                                      zones: list[str] | None = None, vm_sizes: list[str] | None = None,
                                      body: dict | None = None) -> str:
        """An existing proximity placement group (not azgpu's: no tags), with an intent when vm_sizes is given."""
        with self._transaction():
            ppg_body = body if body is not None else {"location": location, "properties": {
                "proximityPlacementGroupType": "Standard", **({"intent": {"vmSizes": list(vm_sizes)}} if vm_sizes else {})}}
            if zones and body is None:
                ppg_body["zones"] = list(zones)
            # ProximityPlacementGroup has no provisioningState (compute api 2026-04-01).
            return self._seed(f"{self._backend.rg_id(resource_group)}/providers/Microsoft.Compute/proximityPlacementGroups/"
                              f"{name}", ppg_body, provisioned=False)["id"]

    def add_user_assigned_identity(self, resource_group: str, name: str, *, location: str = "eastus",
                                   body: dict | None = None) -> str:
        """A user-assigned managed identity; returns its ID."""
        with self._transaction():
            resource_id = f"{self._backend.rg_id(resource_group)}/providers/{galleries.IDENTITY_TYPE}/{name}"
            identity_body = body if body is not None else {"location": location, "tags": {}, "properties": {
                "tenantId": stable_uuid("tenant", self.subscription_id), "principalId": stable_uuid("principal", resource_id),
                "clientId": stable_uuid("client", resource_id), "isolationScope": "None"}}
            return self._seed(resource_id, identity_body, provisioned=False)["id"]

    def usages(self, location: str) -> list[dict]:
        """The location's usage entries as the Usage API lists them (name, currentValue, limit)."""
        with self._transaction():
            return copy.deepcopy(quota.usages(self._store, self._skus, location))

    def capacity_limits(self) -> dict[str, dict[str, dict[str, int]]]:
        """set_capacity's limits: location -> size -> zone ("" for the whole location) -> max VMs."""
        with self._transaction():
            return copy.deepcopy(self._store.capacity)

    def sku_overrides(self) -> list[dict]:
        """set_sku's changes, in the order they apply: [{"location", "size", "overrides"}]."""
        with self._transaction():
            return copy.deepcopy(self._store.sku_overrides)

    def usage(self, location: str, family_or_name: str) -> int:
        """currentValue of one usage entry, matched like the Usage API's names (case and spaces ignored)."""
        wanted = quota.norm(family_or_name)
        with self._transaction():
            for entry in quota.usages(self._store, self._skus, location):
                if wanted in (quota.norm(entry["name"]["value"]), quota.norm(entry["name"]["localizedValue"])):
                    return entry["currentValue"]
        raise KeyError(f"no usage entry {family_or_name!r} in {location}")

    # -- simulated node hardware (the health gate) -------------------------------------------
    def make_unhealthy(self, instance: str, **fault: Any) -> dict:
        """Break an existing instance: gpus=7, ib_down=True|'mlx5_ib3', ib_rate=100 (ib_port=...),
        xid=79, nvidia_smi_hang=True, nvlink_down=True, run_command='timeout'|'no_verdict'.

        instance: the VM's resource id, 'SCALESET/INSTANCE_ID', or its computer name. Returns the
        node state. Replacement instances land on new simulated hosts and come up healthy.
        """
        from . import hardware

        with self._transaction():
            fault = hardware.validate_fault(fault)
            vm_id = self._vm_id(instance)
            node = self._store.nodes.get(vm_id.lower())
            if node is None:
                from .vm_actions import node_of

                vm = self._backend.find(vm_id)
                node = node_of(self._backend, vm, self._backend.find(parse_id(vm_id).parent))
            hardware.apply_fault(node, **fault)
            self.save()
            return copy.deepcopy(node)

    def unhealthy_next(self, count: int = 1, **fault: Any) -> None:
        """The next `count` instances created (in any scale set) come up with this fault."""
        from . import hardware

        if count < 1:
            raise ValueError("count must be at least 1")
        with self._transaction():
            self._store.pending_faults.append({"count": int(count), "fault": hardware.validate_fault(fault)})
            self.save()

    # -- racks of vertical-connect sizes (testing/vertical_connect.py) --------------------------
    def fabric_incomplete(self, instance: str, state: str = "In Progress", status: str = "N/A") -> dict:
        """A node of a GB200/GB300 rack whose NVLink fabric did not complete (nvidia-smi -q's Fabric State
        and Status); instance as for make_unhealthy. Returns the node state."""
        from . import vertical_connect

        with self._transaction():
            node = self._store.nodes[self._vm_id(instance).lower()]
            vertical_connect.break_fabric(node, state, status)
            self.save()
            return node

    def short_rack_next(self, count: int = 1) -> None:
        """The next `count` racks filled are one node short: their first VM is reported in the rack's
        interconnect subgroup, but its GPUs join an NVLink domain of their own."""
        if count < 1:
            raise ValueError("count must be at least 1")
        with self._transaction():
            self._store.racks["short_next"] = self._store.racks.get("short_next", 0) + int(count)
            self.save()

    def degrade_fabric(self, scale_set: str, factor: float) -> None:
        """Make a scale set's InfiniBand fabric deliver `factor` (0..1) of its all-reduce bandwidth:
        the fault only a multi-node NCCL check sees."""
        if not 0 <= factor <= 1:
            raise ValueError("factor must be between 0 and 1")
        with self._transaction():
            matches = [r for r in self._store.of_type("Microsoft.Compute/virtualMachineScaleSets")
                       if scale_set.lower() in (r["name"].lower(), r["id"].lower())]
            if not matches:
                raise KeyError(f"no scale set {scale_set!r}")
            for vmss in matches:
                self._store.fabric[vmss["id"].lower()] = factor
            self.save()

    def node(self, instance: str) -> dict:
        """The simulated hardware state of an instance (a deep copy)."""
        with self._transaction():
            found = self._store.nodes.get(self._vm_id(instance).lower())
            if found is None:
                raise KeyError(f"no simulated node for {instance!r}")
            return copy.deepcopy(found)

    def _vm_id(self, instance: str) -> str:
        vm_type = "Microsoft.Compute/virtualMachineScaleSets/virtualMachines"
        vms = self._store.of_type(vm_type)
        if instance.startswith("/subscriptions/"):
            found = [vm for vm in vms if vm["id"].lower() == instance.lower()]
        elif "/" in instance:
            vmss, _, number = instance.partition("/")
            found = [vm for vm in vms if parse_id(vm["id"]).names[0].lower() == vmss.lower()
                     and vm["instanceId"] == number]
        else:
            found = [vm for vm in vms if vm["properties"]["osProfile"]["computerName"].lower() == instance.lower()
                     or vm["name"].lower() == instance.lower()]
        if len(found) != 1:
            raise KeyError(f"no single scale-set instance {instance!r} ({len(found)} match)")
        return found[0]["id"]

    # -- Azure Impact Reporting (Guest Health Reporting) ---------------------------------------
    def set_provider(self, namespace: str, state: str = "Registered") -> None:
        """A resource provider's registration state as Providers - Get reports it (Registered,
        NotRegistered, Registering, Unregistered). Modelled for Microsoft.Impact: while it is not
        Registered, its calls answer 409 MissingSubscriptionRegistration."""
        from . import impact_reporting

        if namespace.lower() != impact_reporting.NAMESPACE.lower():
            raise ValueError(f"the fake models the registration of {impact_reporting.NAMESPACE} only")
        with self._transaction():
            self._store.providers[namespace.lower()] = state
            self.save()

    def set_permissions(self, actions: list[str] | None = None, not_actions: list[str] = ()) -> None:
        """The caller's permissions (Microsoft.Authorization/permissions) at every scope: one permission
        with these actions and notActions; actions=None restores the default ("*", Owner-like). Writes
        to Microsoft.Impact that they do not allow answer 403 AuthorizationFailed."""
        with self._transaction():
            self._store.permissions = None if actions is None else [
                {"actions": list(actions), "notActions": list(not_actions), "dataActions": [], "notDataActions": []}]
            self.save()

    # -- ARM's own preflight (Deployments - Validate / What If, testing/deployments.py) ----------
    def add_policy_assignment(self, name: str, *, denied_sizes: list[str], display_name: str | None = None,
                              resource_group: str | None = None) -> str:
        """An Azure Policy assignment (Deny effect) that refuses scale sets of these sizes, at the
        subscription or one resource group: template validation and the scale set's PUT answer
        RequestDisallowedByPolicy naming it. Returns the assignment's id."""
        with self._transaction():
            scope = f"/subscriptions/{self.subscription_id}" + (f"/resourceGroups/{resource_group}" if resource_group else "")
            self._store.policies.append({"name": name, "display_name": display_name or name,
                                         "denied_sizes": list(denied_sizes), "scope": scope})
            self.save()
            return f"{scope}/providers/Microsoft.Authorization/policyAssignments/{name}"

    def reject_property(self, resource_type: str, path: str, *, code: str = "InvalidParameter",
                        message: str = "The property '{path}' of resource '{name}' is not valid in this region or "
                                       "api-version.") -> None:
        """Template validation refuses any resource of this type whose body has `path` (dotted, e.g.
        properties.virtualMachineProfile.securityProfile), with ARM's error code and this message."""
        with self._transaction():
            self._store.rejections.append({"type": resource_type, "path": path, "code": code, "message": message})
            self.save()

    def set_impact_categories(self, names: list[str]) -> None:
        """Impact categories the ImpactCategories listing shows beside the REST-spec example's."""
        with self._transaction():
            self._store.impact_categories = list(names)
            self.save()

    def set_impact_insights(self, stages: list[dict] | None) -> None:
        """The insights new workload impacts get: [{"statusCode", "terminalInsight", "after"}], "after"
        in steps of the operation time (60 virtual seconds without one); [] for none ever; None for the
        default sequence (AcknowledgedUnhealthy, then the terminal NodeRemovedFromService)."""
        with self._transaction():
            self._store.impact_insights = None if stages is None else [dict(s) for s in stages]
            self.save()

    def impacts(self) -> list[dict]:
        """The workload impacts filed in this subscription, as GET answers them (deep copies)."""
        with self._transaction():
            return [copy.deepcopy(r["resource"]) for r in self._store.impacts.values()]

    @classmethod
    def load(cls, state_file: str | os.PathLike, **kwargs: Any) -> "FakeAzure":
        """A FakeAzure continuing the state saved in state_file (and saving back to it)."""
        return cls(state_file=state_file, **kwargs)

    # -- persistence -----------------------------------------------------------------------------
    def save(self, path: str | os.PathLike | None = None) -> None:
        """Write the state to path, or to state_file; without either, do nothing."""
        if path is not None and (self.state_file is None or Path(path) != self.state_file):
            with self._lock:
                self._store.save(path)
            return
        if self.state_file:
            with self._transaction():
                self._backend.dirty = True

    # -- the state file, shared by processes -----------------------------------------------------
    @contextmanager
    def _transaction(self):
        """One change (or read) of the state, serialised with every other process using the same
        state file: under the file's lock, read the file again if another process wrote it since,
        then write it back when something changed. Two `provision --simulate` commands at once thus
        both keep their resources; a process that held the lock too long makes the other fail clearly."""
        with self._lock:
            if self._file_lock is None:
                yield
                if self._backend.dirty:
                    self._backend.dirty = False
                return
            try:
                self._file_lock.acquire()
            except Timeout:
                raise StateFileBusy(self.state_file, LOCK_TIMEOUT) from None
            except OSError as exc:
                raise StateFileError(self.state_file, f"cannot be locked: {exc.strerror}",
                                     "pass a --simulate-state FILE in a directory you can write") from None
            try:
                current = _signature(self.state_file)
                if current != self._synced:
                    if current is None:
                        self._store.clear()  # deleted: an empty cloud, as a fresh file would be
                    else:
                        self._store.load(self.state_file)
                    self._synced = current
                yield
                if self._backend.dirty:
                    self._backend.dirty = False
                    self._store.save(self.state_file)
                    self._synced = _signature(self.state_file)
            finally:
                self._file_lock.release()

    def reset(self) -> None:
        """Forget every resource, operation, override, fault, logged request and sleep."""
        with self._transaction():
            self._store.clear()
            self._faults.clear()
            self.requests.clear()
            self.sleeps.clear()
            self.save()


class _OfflineAdapter(HTTPAdapter):
    """requests' adapter for a FakeAzure: `responses` answers through it while the fake runs; it can
    never open a connection of its own."""

    def __init__(self, fake: FakeAzure):
        super().__init__(max_retries=0)
        self._fake = fake

    def send(self, request, *args, **kwargs):
        self._fake._admit(request.method, request.url)
        try:
            return super().send(request, *args, **kwargs)  # responses' mock while the fake runs
        finally:
            self._fake._landed()

    def _refuse(self, *args, **kwargs):
        target = args[0] if args else kwargs.get("url", "")
        raise OfflineError("CONNECT", str(getattr(target, "url", target)),
                           "a FakeAzure transport never opens a connection")

    get_connection = _refuse
    get_connection_with_tls_context = _refuse


# A request holds the lock for milliseconds; a wait this long means the other process is stuck.
LOCK_TIMEOUT = 60.0


def _state_lock(path: Path):
    """An inter-process lock beside the state file (filelock: fcntl on POSIX, msvcrt on Windows)."""
    from filelock import FileLock

    # thread_local=False: the fake's own RLock already serialises its threads; the file lock orders processes.
    return FileLock(f"{path}.lock", timeout=LOCK_TIMEOUT, thread_local=False)


def _signature(path: Path) -> tuple | None:
    """What identifies one written version of the file (each save renames a new file into place)."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise StateFileError(path, f"cannot be read: {exc.strerror}") from None
    return info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns


def _json_body(raw: Any) -> Any:
    if hasattr(raw, "read"):  # a body the SDK was given as a stream (older azure-core hands it on as is)
        raw = raw.read()
    if raw in (None, b"", ""):
        return None
    try:
        return json.loads(raw)
    except (TypeError, ValueError):
        return raw if isinstance(raw, str) else raw.decode("utf-8", "replace")


def _wire(response: Response, method: str) -> tuple[int, dict, str]:
    headers = dict(response.headers)
    if response.body is None or method == "HEAD":
        return response.status, headers, ""
    headers["Content-Type"] = "application/json; charset=utf-8"
    return response.status, headers, json.dumps(response.body)
