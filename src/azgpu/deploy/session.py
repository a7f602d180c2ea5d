"""Credentials, subscription and SDK clients, resolved the Azure way.

Every wait of a session (azure-core's retry sleeps, its long-running-operation polls, azgpu's own
polling) goes through `Session.pause`: it ends at once when the session is cancelled (Ctrl-C), so no
worker thread sits out a 20-minute Retry-After. Time spent waiting on throttling is capped by the
session's throttling budget (`ThrottleBudget`), enforced in azure-core's own RetryPolicy.
"""

from __future__ import annotations

import os
import queue
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from ..errors import AzureError, InputError
from ..resource_types import QUOTA
from .pacing import Pacer

SUBSCRIPTION_ENV = "AZURE_SUBSCRIPTION_ID"
SUBSCRIPTION_ID_RE = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
# Bounded retries for throttling (429 honours Retry-After), 5xx and dropped connections.
RETRY = {"retry_total": 8, "retry_connect": 4, "retry_read": 4, "retry_status": 6, "retry_backoff_factor": 0.8,
         "retry_backoff_max": 60}
THROTTLE_BUDGET_ENV = "AZGPU_THROTTLE_BUDGET"
# Seconds a session may spend in all waiting for throttling to pass. Compute may ask for
# Retry-After: 1200 (Learn, "Troubleshooting API throttling errors"); within 10 minutes a run either
# gets through or says so, instead of hanging for 20 minutes per throttled call.
DEFAULT_THROTTLE_BUDGET = 600.0


class Interrupted(Exception):
    """Raised by a wait of a cancelled session (after Ctrl-C), in whatever thread waits."""


MAX_AZ_PROFILE = 16 * 1024 * 1024  # az's profile lists every subscription of every login: a few KB each


def cli_default_subscription() -> str | None:
    """The Azure CLI's default subscription, read from its profile file (no subprocess)."""
    from ..bounded import loads
    from ..bounded_read import read_bounded

    config = Path(os.environ.get("AZURE_CONFIG_DIR", Path.home() / ".azure")) / "azureProfile.json"
    try:  # another program's file: bounded, and of any shape (one azgpu cannot read selects nothing)
        raw = read_bounded(config, limit=MAX_AZ_PROFILE)
        data = loads(raw.decode("utf-8-sig"), max_bytes=MAX_AZ_PROFILE, what=str(config))
    except (OSError, ValueError):
        return None
    subscriptions = data.get("subscriptions") if isinstance(data, dict) else None
    for sub in subscriptions if isinstance(subscriptions, list) else []:
        if isinstance(sub, dict) and sub.get("isDefault") is True:
            return sub["id"] if isinstance(sub.get("id"), str) else None
    return None


def resolve_subscription(explicit: str | None) -> str:
    sub = explicit or os.environ.get(SUBSCRIPTION_ENV) or cli_default_subscription()
    if not sub:
        raise InputError("no Azure subscription selected", code="NO_SUBSCRIPTION",
                         remedy=f"pass --subscription with its ID ('az account list -o table' lists them), set "
                                f"{SUBSCRIPTION_ENV}, or run 'az login' (and 'az account set -s' with the ID)")
    where = "--subscription" if explicit else SUBSCRIPTION_ENV if os.environ.get(SUBSCRIPTION_ENV) else "az's default"
    return check_subscription_id(sub, where)


def check_subscription_id(sub: str, where: str = "--subscription") -> str:
    """A subscription ID is a GUID, in every mode (--simulate too): it goes into every request path, where
    a name or a '/' would address something else."""
    if not SUBSCRIPTION_ID_RE.fullmatch(sub):
        raise InputError(f"subscription {sub!r} (from {where}) is not a subscription ID", code="INVALID_SUBSCRIPTION",
                         remedy="pass the subscription's ID, a GUID: 'az account show --query id -o tsv'")
    return sub


def default_credential():
    from azure.identity import DefaultAzureCredential

    # Interactive browser login would hang a script or CI; az login is the interactive path.
    return DefaultAzureCredential(exclude_interactive_browser_credential=True)


def throttle_budget_from_env() -> float:
    raw = os.environ.get(THROTTLE_BUDGET_ENV)
    if raw is None or raw.strip() == "":
        return DEFAULT_THROTTLE_BUDGET
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if value < 0:
        raise InputError(f"{THROTTLE_BUDGET_ENV}={raw!r} is not a number of seconds", code="INVALID_THROTTLE_BUDGET",
                         remedy=f"set {THROTTLE_BUDGET_ENV} to seconds >= 0, e.g. {DEFAULT_THROTTLE_BUDGET:g}")
    return value


def result_of(future, tick: float = 0.2):
    """future.result(), waited in short slices. The OS may hand Ctrl-C's SIGINT to any thread; Python
    runs the handler in the main thread only once that thread wakes, so a main thread blocked on a
    future without a timeout would hold Ctrl-C back until the operation ended (seen: 2 s)."""
    while True:
        try:
            return future.result(timeout=tick)
        except TimeoutError:
            if future.done():  # the work itself raised TimeoutError
                raise


def completed(futures, tick: float = 0.2):
    """concurrent.futures.as_completed, waited in short slices for the same reason as result_of. Each
    future reports itself once it is done, so a slice costs the same whether 10 or 10,000 are pending
    (a wait() on all of them each slice made a 10,000-node gate's main thread quadratic)."""
    futures = list(futures)
    done: queue.SimpleQueue = queue.SimpleQueue()
    for future in futures:
        future.add_done_callback(done.put)
    for _ in futures:
        yield take(done, tick)


def take(done: queue.SimpleQueue, tick: float):
    """The next future that is done, waited for in slices of `tick` seconds. (The fake's timeline
    replaces this, as it does real_wait, to know the thread waits.)"""
    while True:
        try:
            return done.get(timeout=tick)
        except queue.Empty:
            continue


def real_wait(event: threading.Event, seconds: float) -> bool:
    """Wait up to `seconds` for `event`; True when it was set. (Tests replace this to forbid real waits.)"""
    return event.wait(seconds)


class ThrottleBudget:
    """How long a session may still wait for throttling to pass, shared by all its threads.

    What is spent is the time during which some thread of the session waits out a throttling answer:
    waits of several threads at once count once. (Summed, 500 Run Command threads each waiting one
    minute's Retry-After spent a 600 s budget ten times over in one minute; a worker's ThrottledError then
    ended a 10,000-node check.) One thread's waits follow each other, so each of them counts whole. Without
    a clock (a session whose sleeps are virtual but whose clock is real cannot tell when waits overlap)
    every wait counts whole."""

    def __init__(self, seconds: float, clock: Callable[[], float] | None = None):
        self.seconds = seconds
        self.spent = 0.0
        self.clock = clock
        self._covered = float("-inf")  # the end of the latest throttling wait booked by any thread
        self._own = threading.local()  # the end of this thread's latest
        self._lock = threading.Lock()

    def take(self, delay: float, *, deadline: float | None = None) -> str | None:
        """Book `delay` seconds of waiting; the reason it may not be waited, or None when it may."""
        with self._lock:
            if self.clock is None:
                start, extra = 0.0, delay
            else:
                start = max(self.clock(), getattr(self._own, "end", float("-inf")))
                extra = max(0.0, start + delay - max(start, self._covered))
            end = start + delay
            if self.spent + extra > self.seconds:
                return (f"and Azure asks to wait {delay:g} s more, beyond the throttling budget of {self.seconds:g} s "
                        f"({self.seconds - self.spent:g} s left)")
            if deadline is not None and time.monotonic() + delay > deadline:
                return f"and Azure asks to wait {delay:g} s more, past --timeout"
            self.spent += extra
            if self.clock is not None:
                self._covered = max(self._covered, end)
                self._own.end = end
            return None


def budgeted_retry_policy(budget: ThrottleBudget, deadline: Callable[[], float | None], **settings: Any):
    """azure-core's RetryPolicy, but a throttled retry waits only while the budget (and --timeout) allow.

    The policy is azure-core's own: the retry counts, Retry-After and backoff stay its behaviour;
    only the decision to sit out a throttling wait is added, where azure-core makes it (`sleep`).
    """
    from azure.core.pipeline.policies import RetryPolicy

    from ..bounded import retry_after_of
    from .azure_errors import throttled

    class BudgetedRetryPolicy(RetryPolicy):
        def get_retry_after(self, response):  # azure-core's hook: Retry-After bounded (bounded.py)
            return retry_after_of(response.http_response.headers)

        def sleep(self, settings, transport, response=None):  # azure-core's hook
            if response is not None and response.http_response.status_code == 429:
                delay = self.get_retry_after(response) or self.get_backoff_time(settings)
                reason = budget.take(delay, deadline=deadline())
                if reason is not None:
                    request = response.http_request
                    raise throttled(response.http_response, operation=f"{request.method} {_short(request.url)}",
                                    waited=budget.spent, reason=reason)
            super().sleep(settings, transport, response)

    return BudgetedRetryPolicy(**settings)


def _short(url: str) -> str:
    """A request URL without host, subscription and query: what a message can name."""
    path = url.split("?", 1)[0].split("://", 1)[-1]
    path = path.split("/", 1)[1] if "/" in path else path
    if "/resourceGroups/" in path or "/resourcegroups/" in path.lower():
        start = path.lower().index("/resourcegroups/")
        path = path[start + 1:]
    return path


def session_transport(session: Session, requests_session: Any = None):
    """azure-core's requests transport whose sleeps are the session's interruptible pauses, and whose
    requests each wait for their turn under Azure's throttling buckets (session.pacer, pacing.py)."""
    from azure.core.pipeline.transport import RequestsTransport

    class SessionTransport(RequestsTransport):
        def sleep(self, duration: float) -> None:
            session.pause(duration)

        def send(self, request, **kwargs):  # every request of every client, with the ARM token
            from .resource_manager import BASE, arm_url, invalid_answer

            # The SDK's pollers follow whatever Azure-AsyncOperation or Location an answer names, and the
            # session's bearer token goes with it: only Resource Manager itself is ever asked
            # (resource_manager.arm_url).
            if not arm_url(request.url):
                raise invalid_answer(f"{request.method} {_short(str(request.url))}",
                                     f"points azgpu to {ascii(str(request.url)[:100])}, which is not {BASE}")
            taken = session.pacer.before(request.method, request.url)  # may wait for the request's turn
            response = None
            try:
                response = super().send(request, **kwargs)
            finally:
                session.pacer.after(request.method, request.url, getattr(response, "status_code", 0),
                                    getattr(response, "headers", None), taken)
            return response

    if requests_session is None:
        return SessionTransport()
    return SessionTransport(session=requests_session, session_owner=False)


@dataclass
class Session:
    subscription_id: str
    credential: Any
    polling_interval: float | None = None
    client_kwargs: dict[str, Any] = field(default_factory=dict)
    # How this session waits. None: real time, cut short by cancel(); the fake passes its virtual clock.
    sleep: Callable[[float], None] | None = field(default=None, repr=False)
    # Seconds this session may spend waiting on throttling in all (None: AZGPU_THROTTLE_BUDGET or 600).
    throttle_budget: float | None = None
    # Makes every client's requests.Session (simulation: one that can never open a socket).
    requests_session: Callable[[], Any] | None = field(default=None, repr=False)
    # --simulate: prices come from the simulated Azure, not from a cache of real answers.
    simulated: bool = False
    # What deadlines are measured against (the health gate's per-node timeout); the fake's virtual
    # clock in tests, so a node that never answers times out without anyone waiting for real.
    clock: Callable[[], float] = field(default=time.monotonic, repr=False)

    def __post_init__(self):
        self.cancelled = threading.Event()
        self.pacer = Pacer(self.clock, self.pause)  # the session's own pace under Azure's buckets
        self.throttling = ThrottleBudget(throttle_budget_from_env() if self.throttle_budget is None
                                         else self.throttle_budget, self._budget_clock())
        self.deadline: float | None = None  # time.monotonic() of --timeout, while an operation has one

    # -- waiting -------------------------------------------------------------------------------
    def cancel(self) -> None:
        """Stop every wait of this session now (in every thread): they raise Interrupted."""
        self.cancelled.set()

    def pause(self, seconds: float) -> None:
        """Wait `seconds` the session's way; raises Interrupted once the session is cancelled."""
        if self.cancelled.is_set():
            raise Interrupted()
        if self.sleep is not None:
            self.sleep(seconds)
        elif seconds > 0 and real_wait(self.cancelled, seconds):
            raise Interrupted()
        if self.cancelled.is_set():
            raise Interrupted()

    def set_throttle_budget(self, seconds: float) -> None:
        self.throttle_budget = seconds
        self.throttling = ThrottleBudget(seconds, self._budget_clock())

    def _budget_clock(self) -> Callable[[], float] | None:
        """The clock the throttling budget can tell overlapping waits by: none where sleeps are virtual but
        the clock is real (its waits then count whole)."""
        return self.clock if self.sleep is None or self.clock is not time.monotonic else None

    # -- clients -------------------------------------------------------------------------------
    def _kwargs(self) -> dict[str, Any]:
        kw = {**RETRY, **self.client_kwargs}
        if self.polling_interval is not None:
            kw["polling_interval"] = self.polling_interval
        if "retry_policy" not in kw:
            settings = {k: v for k, v in kw.items() if k.startswith("retry_")}
            kw["retry_policy"] = budgeted_retry_policy(self.throttling, lambda: self.deadline, **settings)
        if "transport" not in kw:
            kw["transport"] = session_transport(self, self.requests_session() if self.requests_session else None)
        return kw

    @cached_property
    def compute(self):
        from azure.mgmt.compute import ComputeManagementClient

        return ComputeManagementClient(self.credential, self.subscription_id, **self._kwargs())

    def compute_for(self, subscription_id: str | None):
        """The compute client of another subscription (a gallery, image or placement group shared from
        there), or this session's own; kept per subscription."""
        if not subscription_id or subscription_id.lower() == self.subscription_id.lower():
            return self.compute
        clients = self.__dict__.setdefault("_compute_by_subscription", {})
        if subscription_id.lower() not in clients:
            from azure.mgmt.compute import ComputeManagementClient

            clients[subscription_id.lower()] = ComputeManagementClient(self.credential, subscription_id,
                                                                       **self._kwargs())
        return clients[subscription_id.lower()]

    @cached_property
    def network(self):
        from azure.mgmt.network import NetworkManagementClient

        return NetworkManagementClient(self.credential, self.subscription_id, **self._kwargs())

    def network_for(self, subscription_id: str):
        """A network client for the subscription of a resource azgpu only reads (a --subnet-id elsewhere)."""
        if subscription_id.lower() == self.subscription_id.lower():
            return self.network
        from azure.mgmt.network import NetworkManagementClient

        return NetworkManagementClient(self.credential, subscription_id, **self._kwargs())

    @cached_property
    def resources(self):
        from azure.mgmt.resource.resources import ResourceManagementClient

        return ResourceManagementClient(self.credential, self.subscription_id, **self._kwargs())

    @cached_property
    def marketplace(self):
        # Marketplace terms of image purchase plans (az vm image terms); see deploy/marketplace.py.
        from azure.mgmt.marketplaceordering import MarketplaceOrderingAgreements

        return MarketplaceOrderingAgreements(self.credential, self.subscription_id, **self._kwargs())

    @cached_property
    def quota(self):
        # Microsoft.Quota (quota increase requests and their status); see deploy/quota_requests.py.
        from azure.mgmt.quota import QuotaMgmtClient


        return QuotaMgmtClient(self.credential, self.subscription_id, api_version=QUOTA.api_version, **self._kwargs())

    def check_credential(self) -> None:
        """Fail early and clearly when no credential works, before any other call."""
        from azure.core.exceptions import ClientAuthenticationError

        try:
            self.credential.get_token("https://management.azure.com/.default")
        except ClientAuthenticationError as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise AzureError(f"no Azure credential worked: {first}", code="AUTHENTICATION_FAILED",
                             remedy="run 'az login', or set AZURE_CLIENT_ID, AZURE_TENANT_ID and AZURE_CLIENT_SECRET "
                                    "(or use a managed identity)") from None
