"""FakeAzure: a stateful Azure Resource Manager behind `responses`, under the real Azure SDK.

The SDK clients build real requests and run their real serializers, retry policy and LRO
pollers; only the HTTP exchange is answered here. Every request is logged; any request the fake
does not implement raises NotImplementedInFake out of the SDK call, and nothing reaches the
network.
"""

from __future__ import annotations

import copy
import json
import os
import re
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable
from unittest import mock
from urllib.parse import parse_qs, unquote, urlsplit

import requests
import responses
from azure.core.pipeline.transport import RequestsTransport

from . import images, quota, routes
from .backend import Backend
from .errors import ArmError, NotImplementedInFake
from .faults import Fault, Faults
from .messages import Request, Response
from .skus import DEFAULT_LOCATIONS, SkuCatalog, normalize_location
from .store import Store, parse_id

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
                 locations: list[str] | tuple[str, ...] | None = None):
        self.subscription_id = subscription_id
        self.requests: list[LoggedRequest] = []
        self.sleeps: list[float] = []
        self.state_file = Path(state_file) if state_file else None
        self._clock = clock
        self._virtual_now = time.time()  # wall-clock start, so state-file timestamps compare across processes
        self._lock = threading.RLock()
        self._mock: responses.RequestsMock | None = None
        self._sleep_patch = None
        self._store = Store()
        extra = [normalize_location(loc) for loc in locations or ()]
        self._skus = SkuCatalog(self._store, tuple(dict.fromkeys([*DEFAULT_LOCATIONS, *extra])), seed_skus)
        self._faults = Faults()
        self._backend = Backend(subscription_id, self._store, self._skus, self._faults,
                                lro_polls=lro_polls, lro_seconds=lro_seconds, now=self.now)
        if self.state_file and self.state_file.exists():
            self._store.load(self.state_file)

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
        if self._clock is None:
            # The retry policy and the LRO poller both sleep through the transport.
            self._sleep_patch = mock.patch.object(RequestsTransport, "sleep", lambda transport, seconds: self.sleep(seconds))
            self._sleep_patch.start()

    def stop(self) -> None:
        if self._sleep_patch is not None:
            self._join_pollers()
            self._sleep_patch.stop()
            self._sleep_patch = None
        if self._mock is not None:
            self._mock.stop()
            self._mock.reset()
            self._mock = None
        self.save()

    @staticmethod
    def _join_pollers(timeout: float = 10) -> None:
        """Let SDK pollers still running in their threads (a begin_* never waited for) finish while
        the fake still answers: after stop() their next poll would go to the real Azure. With the
        virtual clock they finish at once; with a real clock the process ends them instead."""
        for thread in threading.enumerate():
            if thread.name.startswith("LROPoller(") and thread is not threading.current_thread():
                thread.join(timeout)

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
        with self._lock:
            url = urlsplit(prepared.url)
            path = unquote(url.path)
            query = {k: v[-1] for k, v in parse_qs(url.query, keep_blank_values=True).items()}
            body = _json_body(prepared.body)
            method = prepared.method.upper()

            def log(status: int | None) -> None:
                self.requests.append(LoggedRequest(method, path, query, query.get("api-version"), body, status))

            if (url.hostname or "").lower() != HOST:
                log(None)
                raise NotImplementedInFake(method, prepared.url, "only https://management.azure.com is faked")
            fault = self._faults.firing(method, path, operation=False)
            if fault is not None:
                log(None if fault.reset else fault.status)
                if fault.reset:
                    raise requests.exceptions.ConnectionError(f"azgpu.testing: injected connection reset on {method} {path}")
                return _wire(Response(fault.status, {"error": fault.error()}, fault.headers()), method)
            try:
                response = self._dispatch(Request(method, path, query, body))
            except NotImplementedInFake:
                log(None)
                raise
            log(response.status)
            if self._backend.dirty:
                self._backend.dirty = False
                self.save()
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
        with self._lock:
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
        with self._lock:
            found = self._backend.find(resource_id)
            return copy.deepcopy(found) if found is not None else None

    def add_resource(self, resource_id: str, body: dict) -> dict:
        """Store a resource as if it existed already (provisioning Succeeded; scale sets get instances)."""
        with self._lock:
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
               message: str | None = None, after: int = 0, times: int | None = 1, share: float | None = None) -> Fault:
        """Make matching requests fail; returns the Fault, whose .fired counts how often it did."""
        with self._lock:
            return self._faults.add(Fault(method=method, path=path, status=status, retry_after=retry_after, reset=reset,
                                          operation_error=operation_error, message=message, after=after, times=times,
                                          share=share))

    def set_sku(self, location: str, size: str, **overrides: Any) -> None:
        with self._lock:
            self._skus.set(location, size, overrides)
            self.save()

    def set_quota(self, location: str, family_or_name: str, *, limit: int | None = None, usage: int | None = None) -> None:
        """Set a usage entry's limit and/or its usage outside the fake's own scale sets."""
        with self._lock:
            quota.set_quota(self._store, self._skus, location, family_or_name, limit, usage)
            self.save()

    def add_image(self, location: str, publisher: str, offer: str, sku: str, version: str, *,
                  hyper_v_generation: str = "V2", architecture: str = "x64") -> None:
        with self._lock:
            self._store.images.append(images.added_image(location, publisher, offer, sku, version,
                                                         hyper_v_generation, architecture))
            self.save()

    def usage(self, location: str, family_or_name: str) -> int:
        """currentValue of one usage entry, matched like the Usage API's names (case and spaces ignored)."""
        wanted = quota.norm(family_or_name)
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

        with self._lock:
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
        with self._lock:
            self._store.pending_faults.append({"count": int(count), "fault": hardware.validate_fault(fault)})
            self.save()

    def degrade_fabric(self, scale_set: str, factor: float) -> None:
        """Make a scale set's InfiniBand fabric deliver `factor` (0..1) of its all-reduce bandwidth:
        the fault only a multi-node NCCL check sees."""
        if not 0 <= factor <= 1:
            raise ValueError("factor must be between 0 and 1")
        with self._lock:
            matches = [r for r in self._store.of_type("Microsoft.Compute/virtualMachineScaleSets")
                       if scale_set.lower() in (r["name"].lower(), r["id"].lower())]
            if not matches:
                raise KeyError(f"no scale set {scale_set!r}")
            for vmss in matches:
                self._store.fabric[vmss["id"].lower()] = factor
            self.save()

    def node(self, instance: str) -> dict:
        """The simulated hardware state of an instance (a deep copy)."""
        with self._lock:
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

    @classmethod
    def load(cls, state_file: str | os.PathLike, **kwargs: Any) -> "FakeAzure":
        """A FakeAzure continuing the state saved in state_file (and saving back to it)."""
        return cls(state_file=state_file, **kwargs)

    # -- persistence -----------------------------------------------------------------------------
    def save(self, path: str | os.PathLike | None = None) -> None:
        """Write the state to path, or to state_file; without either, do nothing."""
        target = path or self.state_file
        if target:
            with self._lock:
                self._store.save(target)

    def reset(self) -> None:
        """Forget every resource, operation, override, fault, logged request and sleep."""
        with self._lock:
            self._store.clear()
            self._faults.clear()
            self.requests.clear()
            self.sleeps.clear()
            self.save()


def _json_body(raw: Any) -> Any:
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
