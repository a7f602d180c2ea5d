"""FakeAzure: a stateful Azure Resource Manager behind `responses`, under the real Azure SDK.

The SDK clients build real requests and run their real serializers, retry policy and LRO
pollers; only the HTTP exchange is answered here. Every request is logged; any request the fake
does not implement raises NotImplementedInFake out of the SDK call, and nothing reaches the
network.

This class is the facade tests and `--simulate` use, as moto's mock_* are: it wires the parts and
keeps the public API. The HTTP side is transport.py, the state file persistence.py, the REST
surface routes/ and what ARM checks and changes the model modules; seeding.py and node_faults.py
hold what the add_* and fault methods store.
"""

from __future__ import annotations

import copy
import os
import threading
import time
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import requests

from . import images, node_faults, persistence, seeding
from .backend import Backend
from .faults import Fault, Faults
from .models import completion, impact_reporting, marketplace, quota, quota_requests, throttling
from .skus import DEFAULT_LOCATIONS, SkuCatalog, normalize_location
from .store import Store, parse_id
from .timeline import Timeline
from .transport import HOST, LoggedRequest, Transport, answer

__all__ = ["DEFAULT_SUBSCRIPTION", "HOST", "FakeAzure", "LoggedRequest"]

DEFAULT_SUBSCRIPTION = "00000000-0000-0000-0000-000000000000"


class FakeAzure:
    def __init__(self, subscription_id: str = DEFAULT_SUBSCRIPTION, *, lro_polls: int = 1,
                 lro_seconds: float | None = None, clock: Callable[[], float] | None = None,
                 state_file: str | os.PathLike | None = None, seed_skus: bool = True,
                 locations: list[str] | tuple[str, ...] | None = None, quota_limits: dict[str, int] | None = None,
                 throttle: str | None = None, timeline: bool = False):
        """quota_limits: default limits of this subscription's usages, by usage name ("cores",
        "lowPriorityCores", ...) or "gpuFamily" / "family" for every GPU / other vCPU family.

        throttle="azure": requests take tokens from Azure's documented buckets (Compute's policies per
        region, Resource Manager's per subscription, Network's) and are answered 429 when one is empty,
        with Azure's headers (models/throttling.py). Off by default."""
        if throttle not in (None, "azure"):
            raise ValueError(f"throttle is None or 'azure', not {throttle!r}")
        self.subscription_id = subscription_id
        self.requests: list[LoggedRequest] = []
        self.sleeps: list[float] = []
        self.state_file = Path(state_file) if state_file else None
        self._clock = clock
        self._virtual_now = time.time()  # wall-clock start, so state-file timestamps compare across processes
        if timeline and clock is not None:
            raise ValueError("timeline=True keeps its own clock: pass no clock=")
        self._timeline = Timeline(self._virtual_now) if timeline else None
        self._lock = threading.RLock()
        self._transport = Transport()
        self._store = Store()
        self._store.limits = dict(quota_limits or {})
        extra = [normalize_location(loc) for loc in locations or ()]
        self._skus = SkuCatalog(self._store, tuple(dict.fromkeys([*DEFAULT_LOCATIONS, *extra])), seed_skus)
        self._faults = Faults()
        self._backend = Backend(subscription_id, self._store, self._skus, self._faults,
                                lro_polls=lro_polls, lro_seconds=lro_seconds, now=self.now,
                                on_finish=completion.finish)
        if throttle == "azure":
            self._backend.throttle = throttling.Throttle(subscription_id)
        self._state = persistence.StateFile(self.state_file) if self.state_file else None
        with self._transaction():
            pass

    # -- context ---------------------------------------------------------------------------------
    def __enter__(self) -> FakeAzure:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        self._transport.start(self._answer, self.sleep if self._clock is None else None)
        if self._timeline is not None:
            self._timeline.install()
        from .. import pricing

        pricing.fake_started(self)  # its prices stay out of the user's price cache

    def stop(self, *, grace: float = 5.0) -> None:
        if self._timeline is not None:
            self._timeline.uninstall()
        self._transport.stop(grace=grace, pollers=10 if self._clock is None else 1)
        from .. import pricing

        pricing.fake_stopped(self)

    def requests_session(self) -> requests.Session:
        """A requests.Session for SDK clients (RequestsTransport(session=...)) that only this fake answers.

        Its adapter admits a request only while the fake is started and counts it until answered;
        it cannot open a connection, so a request made after stop() fails with OfflineError
        instead of reaching the network.
        """
        if self._timeline is not None:
            return self._transport.direct_session(self._answer)
        return self._transport.session()

    def _answer(self, prepared: requests.PreparedRequest) -> tuple[int, dict, str]:
        if self._timeline is not None:
            self._timeline.touch()
        with self._transaction():
            return answer(prepared, backend=self._backend, faults=self._faults, log=self.requests, now=self.now)

    # -- time ------------------------------------------------------------------------------------
    def now(self) -> float:
        if self._timeline is not None:
            return self._timeline.now()
        return self._clock() if self._clock else self._virtual_now

    def sleep(self, seconds: float) -> None:
        """What the SDK's sleeps do inside the fake: record them and advance the virtual clock (with
        timeline=True: wait on the shared timeline until every thread waits)."""
        if self._timeline is not None:
            self.sleeps.append(seconds)
            self._timeline.sleep(seconds)
            return
        with self._lock:  # pollers sleep in their own threads
            self.sleeps.append(seconds)
            self._virtual_now += seconds

    @property
    def timeline(self) -> Timeline | None:
        """The shared virtual time of timeline=True (its .stalls say whether it was ever guessed)."""
        return self._timeline

    # -- inspecting state ------------------------------------------------------------------------
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

    def usages(self, location: str) -> list[dict]:
        """The location's usage entries as the Usage API lists them (name, currentValue, limit)."""
        with self._transaction():
            return copy.deepcopy(quota.usages(self._store, self._skus, location))

    def usage(self, location: str, family_or_name: str) -> int:
        """currentValue of one usage entry, matched like the Usage API's names (case and spaces ignored)."""
        wanted = quota.norm(family_or_name)
        with self._transaction():
            for entry in quota.usages(self._store, self._skus, location):
                if wanted in (quota.norm(entry["name"]["value"]), quota.norm(entry["name"]["localizedValue"])):
                    return entry["currentValue"]
        raise KeyError(f"no usage entry {family_or_name!r} in {location}")

    def capacity_limits(self) -> dict[str, dict[str, dict[str, int]]]:
        """set_capacity's limits: location -> size -> zone ("" for the whole location) -> max VMs."""
        with self._transaction():
            return copy.deepcopy(self._store.capacity)

    def sku_overrides(self) -> list[dict]:
        """set_sku's changes, in the order they apply: [{"location", "size", "overrides"}]."""
        with self._transaction():
            return copy.deepcopy(self._store.sku_overrides)

    def terms_accepted(self, publisher: str, offer: str, plan: str) -> bool:
        with self._transaction():
            return marketplace.accepted(self._store, publisher, offer, plan)

    def throttled(self) -> dict[str, int]:
        """The 429s the fake's throttling answered, by policy (Compute) or bucket ("reads", "writes" ...)."""
        with self._lock:
            throttle = self._backend.throttle
            return dict(throttle.refused) if throttle is not None else {}

    def impacts(self) -> list[dict]:
        """The workload impacts filed in this subscription, as GET answers them (deep copies)."""
        with self._transaction():
            return [copy.deepcopy(r["resource"]) for r in self._store.impacts.values()]

    # -- seeding resources (seeding.py) ----------------------------------------------------------
    def add_resource(self, resource_id: str, body: dict) -> dict:
        """Store a resource as if it existed already (provisioning Succeeded; scale sets get instances).

        A resource group too: add_resource(f"/subscriptions/{azure.subscription_id}/resourceGroups/rg",
        {"location": "eastus"}).
        """
        with self._change():
            return seeding.add_resource(self._backend, resource_id, body)

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
        with self._change():
            return seeding.gallery_image(
                self._backend, resource_group, gallery, image, location=location, hyper_v_generation=hyper_v_generation,
                architecture=architecture, os_type=os_type, os_state=os_state, security_type=security_type,
                publisher=publisher, offer=offer, sku=sku, community_name=community_name, shared_name=shared_name,
                body=body, purchase_plan=purchase_plan)

    def add_gallery_image_version(self, image_id: str, version: str, *,
                                  regions: tuple[str, ...] | list[str] = ("eastus",),
                                  replication_state: str | dict[str, str] = "Completed",
                                  exclude_from_latest: bool = False,
                                  replica_count: int = 1, shallow: bool = False, body: dict | None = None) -> str:
        """A version of a gallery image definition, replicated to `regions` (replication_state: one state for
        all, or per region, e.g. {"westus": "Replicating"}); returns its ID."""
        with self._change():
            return seeding.gallery_image_version(
                self._backend, image_id, version, regions=regions, replication_state=replication_state,
                exclude_from_latest=exclude_from_latest, replica_count=replica_count, shallow=shallow, body=body)

    def add_managed_image(self, resource_group: str, name: str, *, location: str = "eastus",
                          hyper_v_generation: str = "V2", os_type: str = "Linux", os_state: str = "Generalized",
                          body: dict | None = None) -> str:
        """A managed image (Microsoft.Compute/images); returns its ID."""
        with self._change():
            return seeding.managed_image(self._backend, resource_group, name, location=location,
                                         hyper_v_generation=hyper_v_generation, os_type=os_type, os_state=os_state,
                                         body=body)

    def add_proximity_placement_group(self, resource_group: str, name: str, *, location: str = "eastus",
                                      zones: list[str] | None = None, vm_sizes: list[str] | None = None,
                                      body: dict | None = None) -> str:
        """An existing proximity placement group (not azgpu's: no tags), with an intent when vm_sizes is given."""
        with self._change():
            return seeding.proximity_placement_group(self._backend, resource_group, name, location=location,
                                                     zones=zones, vm_sizes=vm_sizes, body=body)

    def add_user_assigned_identity(self, resource_group: str, name: str, *, location: str = "eastus",
                                   body: dict | None = None) -> str:
        """A user-assigned managed identity; returns its ID."""
        with self._change():
            return seeding.user_assigned_identity(self._backend, resource_group, name, location=location, body=body)

    def add_image(self, location: str, publisher: str, offer: str, sku: str, version: str, *,
                  hyper_v_generation: str = "V2", architecture: str = "x64", plan: dict | None = None,
                  features: list[dict] | None = None, deprecation: dict | None = None) -> None:
        """Offer a marketplace image version in a location (beside the fake's own catalog).

        plan: {"publisher", "product", "name"} makes it a marketplace image with a purchase plan
        (its terms start unaccepted; see accept_terms). features: [{"name", "value"}], e.g.
        SecurityType. deprecation: imageDeprecationStatus, e.g. {"imageState": "Deprecated",
        "scheduledDeprecationTime": "2025-01-01T00:00:00+00:00"}.
        """
        props = images.properties(hyper_v_generation, architecture, plan=plan, features=features,
                                  deprecation=deprecation)
        with self._change():
            self._store.images.append(images.added_image(location, publisher, offer, sku, version, props))

    # -- the subscription's settings: SKUs, quota, capacity, terms, policy -----------------------
    def set_sku(self, location: str, size: str, **overrides: Any) -> None:
        with self._change():
            self._skus.set(location, size, overrides)

    def set_quota(self, location: str, family_or_name: str, *, limit: int | None = None,
                  usage: int | None = None) -> None:
        """Set a usage entry's limit and/or its usage outside the fake's own scale sets."""
        with self._change():
            quota.set_quota(self._store, self._skus, location, family_or_name, limit, usage)

    def set_quota_outcome(self, location: str, family_or_name: str, outcome: str) -> None:
        """What Microsoft.Quota does with the next increase requests for a usage: "approve" (the
        default), "escalate" (Failed with ContactSupport, as for a GPU family sent to support) or
        "invalid" (the request ends Invalid: one Azure could not accept as asked)."""
        with self._change():
            quota_requests.set_outcome(self._store, location, family_or_name, outcome)

    def set_capacity(self, location: str, size: str, max_vms: int | None, *, zone: str | None = None) -> None:
        """At most max_vms VMs of `size` in the location (or in one zone of it), across all scale sets;
        a scale set that would go beyond fails with AllocationFailed (ZonalAllocationFailed in a
        zone). max_vms=None lifts the limit."""
        with self._change():
            seeding.set_capacity(self._backend, location, size, max_vms, zone)

    def accept_terms(self, publisher: str, offer: str, plan: str, *, accepted: bool = True) -> None:
        """Accept (or, with accepted=False, revoke) a purchase plan's marketplace terms for the
        subscription, as `az vm image terms accept --publisher P --offer O --plan PLAN` does.

        offer is the plan's product (the image's offer); plan is the plan's name.
        """
        with self._change():
            marketplace.set_accepted(self._store, publisher, offer, plan, accepted, self.now())

    def add_policy_assignment(self, name: str, *, denied_sizes: list[str], display_name: str | None = None,
                              resource_group: str | None = None) -> str:
        """An Azure Policy assignment (Deny effect) that refuses scale sets of these sizes, at the
        subscription or one resource group: template validation and the scale set's PUT answer
        RequestDisallowedByPolicy naming it. Returns the assignment's id."""
        with self._change():
            scope = f"/subscriptions/{self.subscription_id}" + (f"/resourceGroups/{resource_group}" if resource_group
                                                                else "")
            self._store.policies.append({"name": name, "display_name": display_name or name,
                                         "denied_sizes": list(denied_sizes), "scope": scope})
            return f"{scope}/providers/Microsoft.Authorization/policyAssignments/{name}"

    def reject_property(self, resource_type: str, path: str, *, code: str = "InvalidParameter",
                        message: str = "The property '{path}' of resource '{name}' is not valid in this region or "
                                       "api-version.") -> None:
        """Template validation refuses any resource of this type whose body has `path` (dotted, e.g.
        properties.virtualMachineProfile.securityProfile), with ARM's error code and this message."""
        with self._change():
            self._store.rejections.append({"type": resource_type, "path": path, "code": code, "message": message})

    # -- Azure Impact Reporting (Guest Health Reporting) -----------------------------------------
    def set_provider(self, namespace: str, state: str = "Registered") -> None:
        """A resource provider's registration state as Providers - Get reports it (Registered,
        NotRegistered, Registering, Unregistered). Modelled for Microsoft.Impact: while it is not
        Registered, its calls answer 409 MissingSubscriptionRegistration."""
        if namespace.lower() != impact_reporting.NAMESPACE.lower():
            raise ValueError(f"the fake models the registration of {impact_reporting.NAMESPACE} only")
        with self._change():
            self._store.providers[namespace.lower()] = state

    def set_permissions(self, actions: list[str] | None = None, not_actions: list[str] = ()) -> None:
        """The caller's permissions (Microsoft.Authorization/permissions) at every scope: one permission
        with these actions and notActions; actions=None restores the default ("*", Owner-like). Writes
        to Microsoft.Impact that they do not allow answer 403 AuthorizationFailed."""
        with self._change():
            self._store.permissions = None if actions is None else [
                {"actions": list(actions), "notActions": list(not_actions), "dataActions": [], "notDataActions": []}]

    def set_impact_categories(self, names: list[str]) -> None:
        """Impact categories the ImpactCategories listing shows beside the REST-spec example's."""
        with self._change():
            self._store.impact_categories = list(names)

    def set_impact_insights(self, stages: list[dict] | None) -> None:
        """The insights new workload impacts get: [{"statusCode", "terminalInsight", "after"}], "after"
        in steps of the operation time (60 virtual seconds without one); [] for none ever; None for the
        default sequence (AcknowledgedUnhealthy, then the terminal NodeRemovedFromService)."""
        with self._change():
            self._store.impact_insights = None if stages is None else [dict(s) for s in stages]

    # -- faults: requests (faults.py) and node hardware (node_faults.py) -------------------------
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

    def make_unhealthy(self, instance: str, **fault: Any) -> dict:
        """Break an existing instance: gpus=7, ib_down=True|'mlx5_ib3', ib_rate=100 (ib_port=...),
        xid=79, nvidia_smi_hang=True, nvlink_down=True, run_command='timeout'|'no_verdict'.

        instance: the VM's resource id, 'SCALESET/INSTANCE_ID', or its computer name. Returns the
        node state. Replacement instances land on new simulated hosts and come up healthy.
        """
        with self._change():
            return copy.deepcopy(node_faults.make_unhealthy(self._backend, instance, fault))

    def unhealthy_next(self, count: int = 1, **fault: Any) -> None:
        """The next `count` instances created (in any scale set) whose size can take this fault come up with it;
        one whose size cannot (a GB-only fault on an H100) comes up without it and leaves it queued."""
        with self._change():
            node_faults.unhealthy_next(self._backend, count, fault)

    def fabric_incomplete(self, instance: str, state: str = "In Progress", status: str = "N/A") -> dict:
        """A node of a GB200/GB300 rack whose NVLink fabric did not complete (nvidia-smi -q's Fabric State
        and Status); instance as for make_unhealthy. Returns the node state."""
        with self._change():
            return node_faults.fabric_incomplete(self._backend, instance, state, status)

    def forge_output(self, instance: str, stdout: str | None) -> None:
        """A compromised node: its check prints `stdout` (anything at all) instead of the script's verdict, and
        Run Command returns it as Azure returns a script's output (None: the real script again)."""
        with self._change():
            node_faults.forge_output(self._backend, instance, stdout)

    def swap_fabric(self, first: str, second: str) -> None:
        """Two compromised nodes of rack sizes that report each other's NVLink fabric (ClusterUUID and
        CliqueId in nvidia-smi -q); Azure keeps reporting each in the rack it placed it in."""
        with self._change():
            node_faults.swap_fabric(self._backend, first, second)

    def short_rack_next(self, count: int = 1) -> None:
        """The next `count` racks filled are one node short: their first VM is reported in the rack's
        interconnect subgroup, but its GPUs join an NVLink domain of their own."""
        with self._change():
            node_faults.short_rack_next(self._backend, count)

    def degrade_fabric(self, scale_set: str, factor: float) -> None:
        """Make a scale set's InfiniBand fabric deliver `factor` (0..1) of its all-reduce bandwidth:
        the fault only a multi-node NCCL check sees."""
        with self._change():
            node_faults.degrade_fabric(self._backend, scale_set, factor)

    def attach_machines(self, address: str | None) -> None:
        """The simulated VMs' operating systems: a UNIX socket answering testing/machines.py's requests
        (managed Run Commands run there; a deleted VM's machine stops). None detaches them. Saved with
        the state, so every process using the same state file reaches them."""
        with self._change():
            self._store.machines = str(address) if address else None

    def node(self, instance: str) -> dict:
        """The simulated hardware state of an instance (a deep copy)."""
        with self._transaction():
            return copy.deepcopy(node_faults.node(self._backend, instance))

    def _vm_id(self, instance: str) -> str:
        return node_faults.vm_id(self._backend, instance)

    # -- persistence (persistence.py) -------------------------------------------------------------
    @classmethod
    def load(cls, state_file: str | os.PathLike, **kwargs: Any) -> FakeAzure:
        """A FakeAzure continuing the state saved in state_file (and saving back to it)."""
        return cls(state_file=state_file, **kwargs)

    def save(self, path: str | os.PathLike | None = None) -> None:
        """Write the state to path, or to state_file; without either, do nothing."""
        if path is not None and (self.state_file is None or Path(path) != self.state_file):
            with self._lock:
                persistence.save(self._store, path)
            return
        if self.state_file:
            with self._transaction():
                self._backend.dirty = True

    @contextmanager
    def _transaction(self):
        """One change (or read) of the state, serialised with this fake's threads and, through the
        state file's lock, with every other process using the same file (persistence.StateFile)."""
        with self._lock:
            if self._state is None:
                yield
                self._backend.dirty = False
                return
            with self._state.locked(self._store):
                yield
                if self._backend.dirty:
                    self._backend.dirty = False
                    self._state.write(self._store)

    @contextmanager
    def _change(self):
        """A transaction that changes the state: it is saved when the body succeeds."""
        with self._transaction():
            yield
            self._backend.dirty = True

    def reset(self) -> None:
        """Forget every resource, operation, override, fault, logged request and sleep."""
        with self._change():
            self._store.clear()
            self._faults.clear()
            self.requests.clear()
            self.sleeps.clear()
