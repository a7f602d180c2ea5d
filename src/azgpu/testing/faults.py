"""Injected faults: throttling, server errors, dropped connections and failed operations.

Throttling answers the way Azure does. Compute's own limits: HTTP 429 with the unwrapped body
{"code": "OperationNotAllowed", "details": [{"code": "TooManyRequests", "target": POLICY, ...}]},
Retry-After and x-ms-ratelimit-remaining-resource (Learn, "Troubleshooting API throttling errors").
Azure Resource Manager's own limits: HTTP 429 SubscriptionRequestsThrottled with Retry-After and
x-ms-ratelimit-remaining-subscription-{reads,writes,deletes} (Learn, "Throttling Resource Manager
requests" and "Troubleshoot the SubscriptionRequestsThrottled error code (429)").
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime

_CODES = {
    429: "TooManyRequests",
    500: "InternalServerError",
    502: "BadGateway",
    503: "ServiceUnavailable",
    504: "GatewayTimeout",
    409: "Conflict",
    # ARM's codes for these statuses, so an injected 401/403 reads like the real answer.
    401: "InvalidAuthenticationToken",
    403: "AuthorizationFailed",
}

# Codes Azure answers on the PUT itself, before any long-running operation exists: the fake refuses
# to fail an operation with them (inject status= and code= instead), so tests meet them as Azure sends them.
SYNCHRONOUS = {"skunotavailable": 409, "operationnotallowed": 409, "quotaexceeded": 409, "resourcegroupnotfound": 404,
               "requestdisallowedbypolicy": 403}
THROTTLED_BY = ("compute", "arm")


@dataclass
class Fault:
    method: str | None = None
    path: str | None = None
    status: int | None = None
    retry_after: float | None = None
    reset: bool = False
    operation_error: str | None = None
    message: str | None = None
    after: int = 0
    times: int | None = 1
    share: float | None = None
    code: str | None = None  # the error code of a status= answer (default: the status's usual code)
    throttle: str | None = None  # a 429's shape: "compute" or "arm" (default: by the path's provider)
    body: dict | None = None  # answer with exactly this body (a real one replayed), and these headers:
    answer_headers: dict | None = None
    matched: int = 0  # matching calls seen so far
    fired: int = 0  # how many times the fault took effect
    _pattern: re.Pattern | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if sum(bool(x) for x in (self.status, self.reset, self.operation_error)) != 1:
            raise ValueError("inject exactly one of status=, reset=True or operation_error=")
        if self.share is not None and not 0 < self.share <= 1:
            raise ValueError("share must be a fraction in (0, 1]")
        if self.throttle is not None and (self.throttle not in THROTTLED_BY or self.status != 429):
            raise ValueError(f"throttle= is one of {THROTTLED_BY} and goes with status=429")
        if (self.code or self.body is not None) and not self.status:
            raise ValueError("code= and body= shape the answer of a status= fault")
        if self.operation_error and self.operation_error.lower() in SYNCHRONOUS:
            status = SYNCHRONOUS[self.operation_error.lower()]
            raise ValueError(f"Azure answers {self.operation_error} on the request itself, not in a failed operation: "
                             f"inject(status={status}, code={self.operation_error!r})")
        self._pattern = re.compile(self.path, re.IGNORECASE) if self.path else None

    def matches(self, method: str, path: str) -> bool:
        if self.method and self.method.upper() != method.upper():
            return False
        if self.operation_error and method.upper() not in ("PUT", "PATCH", "DELETE"):
            return False  # only calls that start an operation can fail one
        return not self._pattern or bool(self._pattern.search(path))

    def take(self) -> bool:
        """Count a matching call; True if the fault fires on it."""
        self.matched += 1
        n = self.matched - self.after
        if n <= 0 or (self.times is not None and self.fired >= self.times):
            return False
        # share=0.25 fires on calls 4, 8, 12 ...: the exact fraction, and the same on every run.
        if self.share is not None and math.floor(n * self.share) == math.floor((n - 1) * self.share):
            return False
        self.fired += 1
        return True

    @property
    def error_code(self) -> str:
        return self.operation_error or self.code or _CODES.get(self.status or 0, f"HttpStatus{self.status}")

    def error(self) -> dict:
        return {"code": self.error_code, "message": self.message or f"Injected fault: {self.error_code}."}

    def headers(self) -> dict:
        if self.retry_after is not None:
            return {"Retry-After": f"{self.retry_after:g}"}
        return {"Retry-After": "1"} if self.status == 429 else {}

    def answer(self, method: str, path: str, *, subscription: str, now: float) -> tuple[dict, dict]:
        """(body, headers) of this fault's error answer to `method path`."""
        if self.body is not None:
            return self.body, {**self.headers(), **(self.answer_headers or {})}
        if self.status != 429 or self.code:
            return {"error": self.error()}, self.headers()
        by = self.throttle or ("compute" if "/providers/microsoft.compute/" in path.lower() else "arm")
        wait = self.retry_after if self.retry_after is not None else 1
        if by == "compute":
            return compute_throttled(method, path, now=now, retry_after=wait, message=self.message)
        return arm_throttled(method, path, subscription=subscription, retry_after=wait, message=self.message)


def _compute_policy(method: str, path: str) -> str:
    """The Compute throttling policy a request counts against. HighCostGet and DeleteVMScaleSet are
    the names Learn shows; the others follow the policy categories of "Compute throttling limits"."""
    scale_set = "/virtualmachinescalesets/" in path.lower()
    if method == "GET":
        named = len([p for p in path.split("/") if p]) % 2 == 0  # .../TYPE/NAME, not a collection
        return "LowCostGet" if named and not path.lower().endswith("/instanceview") else "HighCostGet"
    if method == "DELETE":
        return "DeleteVMScaleSet" if scale_set else "DeleteVM"
    if method == "PUT":
        return "PutVMScaleSet" if scale_set else "PutVM"
    return "UpdateVMScaleSet" if scale_set else "UpdateVM"


def _iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat()


def compute_throttled(method: str, path: str, *, now: float, retry_after: float,
                      message: str | None = None) -> tuple[dict, dict]:
    """Compute's throttling answer, in the shape of Learn's example: no {"error": ...} envelope, the
    policy in details[].target, the measurement as JSON in details[].message."""
    policy = _compute_policy(method.upper(), path)
    measured = {"operationGroup": policy, "startTime": _iso(now), "endTime": _iso(now + retry_after),
                "allowedRequestCount": 12, "measuredRequestCount": 13}
    body = {
        "code": "OperationNotAllowed",
        "message": message or "The server rejected the request because too many requests have been received for "
                              "this subscription.",
        "details": [{"code": "TooManyRequests", "target": policy, "message": json.dumps(measured)}],
    }
    return body, {"Retry-After": f"{retry_after:g}",
                  "x-ms-ratelimit-remaining-resource": f"Microsoft.Compute/{policy};0"}


def _operation_template(method: str, path: str) -> str:
    """ARM's name for an operation: the path without names, e.g. GET/SUBSCRIPTIONS/RESOURCEGROUPS/
    PROVIDERS/MICROSOFT.NETWORK/PUBLICIPADDRESSES (Learn, SubscriptionRequestsThrottled)."""
    parts, out, i = [p for p in path.split("/") if p], [method.upper()], 0
    while i < len(parts):
        word = parts[i].upper()
        out.append(word)
        if word == "PROVIDERS" and i + 1 < len(parts):
            out.append(parts[i + 1].upper())
            i += 1
        i += 2 if word != "PROVIDERS" else 1
    return "/".join(out)


def arm_throttled(method: str, path: str, *, subscription: str, retry_after: float,
                  message: str | None = None) -> tuple[dict, dict]:
    """Azure Resource Manager's own throttling answer for the subscription's reads, writes or deletes."""
    kind = {"GET": "reads", "HEAD": "reads", "DELETE": "deletes"}.get(method.upper(), "writes")
    text = message or (f"Number of requests for subscription '{subscription}' and operation "
                       f"'{_operation_template(method, path)}' exceeded the backend storage limit. Please try again "
                       f"after '{retry_after:g}' seconds.")
    body = {"error": {"code": "SubscriptionRequestsThrottled", "message": text}}
    return body, {"Retry-After": f"{retry_after:g}", f"x-ms-ratelimit-remaining-subscription-{kind}": "0"}


class Faults:
    def __init__(self) -> None:
        self.faults: list[Fault] = []

    def add(self, fault: Fault) -> Fault:
        self.faults.append(fault)
        return fault

    def clear(self) -> None:
        self.faults.clear()

    def firing(self, method: str, path: str, *, operation: bool) -> Fault | None:
        """The first fault of the kind asked for (answer faults, or operation faults) that fires."""
        for fault in self.faults:
            if bool(fault.operation_error) == operation and fault.matches(method, path) and fault.take():
                return fault
        return None
