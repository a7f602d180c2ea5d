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
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable
from unittest import mock
from urllib.parse import parse_qs, unquote, urlsplit

import requests
import responses
from azure.core.pipeline.transport import RequestsTransport
from filelock import Timeout

from . import images, quota, routes
from .backend import Backend
from .errors import ArmError, NotImplementedInFake, StateFileBusy, StateFileError
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
        with self._transaction():
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
               message: str | None = None, after: int = 0, times: int | None = 1, share: float | None = None) -> Fault:
        """Make matching requests fail; returns the Fault, whose .fired counts how often it did."""
        with self._lock:
            return self._faults.add(Fault(method=method, path=path, status=status, retry_after=retry_after, reset=reset,
                                          operation_error=operation_error, message=message, after=after, times=times,
                                          share=share))

    def set_sku(self, location: str, size: str, **overrides: Any) -> None:
        with self._transaction():
            self._skus.set(location, size, overrides)
            self.save()

    def set_quota(self, location: str, family_or_name: str, *, limit: int | None = None, usage: int | None = None) -> None:
        """Set a usage entry's limit and/or its usage outside the fake's own scale sets."""
        with self._transaction():
            quota.set_quota(self._store, self._skus, location, family_or_name, limit, usage)
            self.save()

    def add_image(self, location: str, publisher: str, offer: str, sku: str, version: str, *,
                  hyper_v_generation: str = "V2", architecture: str = "x64") -> None:
        with self._transaction():
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
