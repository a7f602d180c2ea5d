"""The fake's HTTP side: `responses` answering every URL, a requests adapter that cannot leave the
process, and the walk from a prepared request to a route (faults first, then the route table).

The routes and models never see HTTP: they get a Request and give a Response (messages.py); what
goes on the wire, and what the request log records, is decided here only.

`responses` only stands in while it is started. Clients built on `Transport.session()` are held to
that even when threads outlive the fake: their adapter cannot open a connection at all, and stop()
waits for every request they have in flight before it uninstalls the mock.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from unittest import mock
from urllib.parse import parse_qs, unquote, urlsplit

import requests
import responses
from azure.core.pipeline.transport import RequestsTransport
from requests.adapters import HTTPAdapter

from . import retail_prices, routes
from .backend import Backend
from .errors import ArmError, NotImplementedInFake, OfflineError
from .faults import Faults
from .messages import Request, Response
from .models import throttling

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


class Transport:
    """Installs and removes the mock, admits requests of its sessions, and patches the SDK's sleeps
    onto the fake's virtual clock while it runs."""

    def __init__(self) -> None:
        self._mock: responses.RequestsMock | None = None
        self._patches: list = []
        self._accepting = False  # whether requests through session() may go on
        self._in_flight = 0
        self._flights = threading.Condition()

    def start(self, answer: Callable[[requests.PreparedRequest], tuple], sleep: Callable[[float], None] | None) -> None:
        """answer: the callback for every request; sleep: where the SDK's waits go (None: real time)."""
        self._mock = responses.RequestsMock(assert_all_requests_are_fired=False)
        for method in _METHODS:
            # Every URL on every host: what is not Azure Resource Manager fails loudly, never goes out.
            self._mock.add_callback(method, re.compile(r".*"), callback=answer, content_type=None)
        self._mock.start()
        with self._flights:
            self._accepting = True
        if sleep is not None:
            # The retry policy and the LRO poller both sleep through the transport; azgpu's sessions
            # wait through session.real_wait (interruptible): both advance the virtual clock instead.
            self._patches = [mock.patch.object(RequestsTransport, "sleep", lambda transport, seconds: sleep(seconds)),
                             mock.patch("azgpu.deploy.session.real_wait",
                                        lambda event, seconds: sleep(seconds) or event.is_set())]
            for patch in self._patches:
                patch.start()

    def stop(self, *, grace: float, pollers: float) -> None:
        # Pollers first (they may still need answers), then no new request is admitted, then the
        # ones in flight finish while the mock still answers them: none can fall through to a socket.
        join_pollers(pollers)
        with self._flights:
            self._accepting = False
            self._flights.wait_for(lambda: self._in_flight == 0, timeout=grace)
        for patch in self._patches:
            patch.stop()
        self._patches = []
        if self._mock is not None:
            self._mock.stop()
            self._mock.reset()
            self._mock = None

    def session(self) -> requests.Session:
        """A requests.Session for SDK clients (RequestsTransport(session=...)) that only the fake answers.

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

    def direct_session(self, answer: Callable[[Any], tuple]) -> requests.Session:
        """A stand-in for requests.Session that hands each request straight to the fake: no urllib3, no
        `responses`, no adapter (and so no socket either). For runs of thousands of nodes, where that layer
        cost more CPU than the SDK and the fake together; the SDK's pipeline, retries and pollers are the same."""
        return _DirectSession(self, answer)  # type: ignore[return-value]

    def admit(self, method: str, url: str) -> None:
        with self._flights:
            if not self._accepting:
                raise OfflineError(method, url, "the fake Azure is not running; nothing leaves the process")
            self._in_flight += 1

    def landed(self) -> None:
        with self._flights:
            self._in_flight -= 1
            self._flights.notify_all()


class _Prepared:
    __slots__ = ("method", "url", "body")

    def __init__(self, method: str, url: str, body: Any):
        self.method, self.url, self.body = method.upper(), url, body


class _Raw:
    enforce_content_length = True

    def close(self) -> None:
        pass


class _DirectSession:
    trust_env = False

    def __init__(self, transport: Transport, answer: Callable[[Any], tuple]):
        self._transport, self._answer = transport, answer

    def request(self, method: str, url: str, *, data: Any = None, **_: Any) -> requests.Response:
        self._transport.admit(method, url)
        try:
            status, headers, body = self._answer(_Prepared(method, url, data))
        finally:
            self._transport.landed()
        response = requests.Response()
        response.status_code, response.url, response.encoding = status, url, "utf-8"
        response.reason = "OK" if status < 400 else "Error"
        response.headers = requests.structures.CaseInsensitiveDict(headers)
        response._content, response._content_consumed = body.encode() if isinstance(body, str) else body, True
        response.raw = _Raw()
        return response

    def mount(self, *args: Any) -> None:
        pass

    def close(self) -> None:
        pass


def join_pollers(timeout: float = 10) -> None:
    """Let SDK pollers still running in their threads (a begin_* never waited for) finish while the
    fake still answers: after stop() their next poll would go to the real Azure. With the virtual
    clock they finish at once; with a real clock the process ends them instead."""
    for thread in threading.enumerate():
        if thread.name.startswith("LROPoller(") and thread is not threading.current_thread():
            thread.join(timeout)


class _OfflineAdapter(HTTPAdapter):
    """requests' adapter for a Transport: `responses` answers through it while the fake runs; it can
    never open a connection of its own."""

    def __init__(self, transport: Transport):
        super().__init__(max_retries=0)
        self._transport = transport

    def send(self, request, *args, **kwargs):
        self._transport.admit(request.method, request.url)
        try:
            return super().send(request, *args, **kwargs)  # responses' mock while the fake runs
        finally:
            self._transport.landed()

    def _refuse(self, *args, **kwargs):
        target = args[0] if args else kwargs.get("url", "")
        raise OfflineError("CONNECT", str(getattr(target, "url", target)),
                           "a FakeAzure transport never opens a connection")

    get_connection = _refuse
    get_connection_with_tls_context = _refuse


def answer(prepared: requests.PreparedRequest, *, backend: Backend, faults: Faults,
           log: list[LoggedRequest], now: Callable[[], float]) -> tuple[int, dict, str]:
    """One request on the wire: logged, refused off Azure's hosts, failed by an injected fault, or
    answered by a route (ARM) or the Retail Prices recording."""
    url = urlsplit(prepared.url)
    path = unquote(url.path)
    query = {k: v[-1] for k, v in parse_qs(url.query, keep_blank_values=True).items()}
    body = _json_body(prepared.body)
    method = prepared.method.upper()

    def logged(status: int | None) -> None:
        log.append(LoggedRequest(method, path, query, query.get("api-version"), body, status))

    host = (url.hostname or "").lower()
    if host not in (HOST, retail_prices.HOST):
        logged(None)
        raise NotImplementedInFake(method, prepared.url,
                                   "only https://management.azure.com and https://prices.azure.com are faked")
    fault = faults.firing(method, path, operation=False)
    if fault is not None:
        logged(None if fault.reset else fault.status)
        if fault.reset:
            raise requests.exceptions.ConnectionError(f"azgpu.testing: injected connection reset on {method} {path}")
        fault_body, headers = fault.answer(method, path, subscription=backend.subscription_id, now=now())
        return _wire(Response(fault.status, fault_body, headers), method)
    try:
        if host == retail_prices.HOST:
            response = retail_prices.answer(method, path, query, prepared.url)
        else:
            # The route gets containers of its own: what it changes in place (the stored subnet is the PUT's
            # body) never shows in the log, which keeps what was sent.
            response = dispatch(backend, Request(method, path, query, _fresh(body)))
    except NotImplementedInFake:
        logged(None)
        raise
    logged(response.status)
    return _wire(response, method)


def dispatch(backend: Backend, req: Request) -> Response:
    """An ARM request to its route; an ArmError raised by a route or model becomes ARM's error answer.
    With Azure's throttling on (backend.throttle), the request first takes its tokens, or is answered 429."""
    limits: dict = {}
    try:
        sub = _SUBSCRIPTION.match(req.path)
        if sub and sub.group(1).lower() != backend.subscription_id.lower():
            raise ArmError(404, "SubscriptionNotFound", f"The subscription '{sub.group(1)}' could not be found.")
        backend.ops.settle()
        found = routes.find(req.method, req.path)
        if found is None:
            raise NotImplementedInFake(req.method, req.path)
        if backend.throttle is not None:
            admitted = throttling.admit(backend, req)
            if isinstance(admitted, tuple):
                return Response(*admitted)
            limits = admitted
        handler, params = found
        response = handler(backend, req, **params)
    except ArmError as err:
        response = Response(err.status, err.body(), err.headers)
    if limits:
        response.headers = {**response.headers, **limits}
    return response


# A large body sent again and again (the node check's script, 48 KB in every node's Run Command) is parsed
# once: at 10,000 nodes parsing it per request cost 5 s of CPU, and the request log kept 10,000 copies of its
# strings. Each request still gets containers of its own (strings cannot change), so no route or log entry
# sees another's body change.
_PARSE_ONCE_FROM = 4096  # bytes
_PARSED: dict[Any, Any] = {}
_CONTAINERS = frozenset((dict, list))


def _json_body(raw: Any) -> Any:
    if hasattr(raw, "read"):  # a body the SDK was given as a stream (older azure-core hands it on as is)
        raw = raw.read()
    if raw in (None, b"", ""):
        return None
    big = isinstance(raw, (bytes, str)) and len(raw) >= _PARSE_ONCE_FROM
    parsed = _PARSED.get(raw) if big else None  # one read: the cache is every fake's, cleared at any moment
    if parsed is not None:
        return _fresh(parsed)
    try:
        value = json.loads(raw)
    except (TypeError, ValueError):
        return raw if isinstance(raw, str) else raw.decode("utf-8", "replace")
    if not big:
        return value
    if len(_PARSED) >= 16:
        _PARSED.clear()
    _PARSED[raw] = value
    return _fresh(value)


def _fresh(value: Any) -> Any:
    """A copy of parsed JSON with new containers and the same (immutable) scalars."""
    if isinstance(value, dict):
        return {k: _fresh(v) for k, v in value.items()}
    if isinstance(value, list):
        if _CONTAINERS.isdisjoint(map(type, value)):  # json.loads makes exact dicts and lists; checked in C
            return list(value)
        return [_fresh(v) for v in value]
    return value


def _wire(response: Response, method: str) -> tuple[int, dict, str]:
    headers = dict(response.headers)
    if response.body is None or method == "HEAD":
        return response.status, headers, ""
    headers["Content-Type"] = "application/json; charset=utf-8"
    return response.status, headers, json.dumps(response.body)
