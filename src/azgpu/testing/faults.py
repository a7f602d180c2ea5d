"""Injected faults: throttling, server errors, dropped connections and failed operations."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

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
    matched: int = 0  # matching calls seen so far
    fired: int = 0  # how many times the fault took effect
    _pattern: re.Pattern | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if sum(bool(x) for x in (self.status, self.reset, self.operation_error)) != 1:
            raise ValueError("inject exactly one of status=, reset=True or operation_error=")
        if self.share is not None and not 0 < self.share <= 1:
            raise ValueError("share must be a fraction in (0, 1]")
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
    def code(self) -> str:
        return self.operation_error or _CODES.get(self.status or 0, f"HttpStatus{self.status}")

    def error(self) -> dict:
        return {"code": self.code, "message": self.message or f"Injected fault: {self.code}."}

    def headers(self) -> dict:
        if self.retry_after is not None:
            return {"Retry-After": f"{self.retry_after:g}"}
        return {"Retry-After": "1"} if self.status == 429 else {}


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
