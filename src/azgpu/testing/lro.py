"""Long-running operations as ARM runs them, so the SDK's real ARMPolling drives them.

A PUT answers with an Azure-AsyncOperation status URL (polled for {"status": ...}); a DELETE with
a Location URL (202 while running, 204 when done). An operation finishes after `polls` polls, or
once `seconds` have passed on the clock. Start times are clock readings; with the default virtual
clock (which starts at the wall-clock time) or clock=time.time they are comparable across
processes, so `--no-wait` in one CLI process and `wait` in the next see the same operation.
"""

from __future__ import annotations

import math
from datetime import datetime, timezone
from typing import Callable

from .store import Store, key, parse_id, stable_uuid

MANAGEMENT = "https://management.azure.com"


def iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, timezone.utc).isoformat().replace("+00:00", "Z")


class Operations:
    def __init__(self, store: Store, *, polls: int, seconds: float | None, now: Callable[[], float],
                 finish: Callable[[dict], None]):
        self.store = store
        self.polls = max(1, polls)
        self.seconds = seconds
        self.now = now
        self.finish = finish  # applies a finished operation to the resources

    def start(self, kind: str, target: str, *, location: str, api_version: str, error: dict | None = None) -> dict:
        """Begin a 'put' or 'delete' of target (check running(target) before changing it)."""
        rid = parse_id(target)
        number = self.store.next_number()
        op = {
            "id": stable_uuid("operation", number),
            "kind": kind,
            "target": target,
            "provider": rid.namespace or "Microsoft.Resources",
            "location": location,
            "api_version": api_version,
            "subscription": rid.subscription,
            "started": self.now(),
            "polls": 0,
            "error": error,
            "status": "InProgress",
        }
        self.store.operations[op["id"]] = op
        return op

    def running(self, target: str) -> dict | None:
        """The operation still running on target, if any: ARM refuses another write meanwhile (409)."""
        ops = [op for op in self.pending() if key(op["target"]) == key(target)]
        return ops[-1] if ops else None

    def pending(self) -> list[dict]:
        return [op for op in self.store.operations.values() if op["status"] == "InProgress"]

    def _complete(self, op: dict) -> None:
        op["status"] = "Failed" if op["error"] else "Succeeded"
        op["ended"] = self.now()
        self.finish(op)

    def _due(self, op: dict) -> bool:
        if op.get("hang"):  # a Run Command whose node never answers (a fault, or no outbound path)
            return False
        if self.seconds is not None:
            return self.now() - op["started"] >= self.seconds
        return op["polls"] >= self.polls

    def settle(self) -> None:
        """Finish every operation whose time has come (duration mode only: polls need a poll)."""
        if self.seconds is None:
            return
        for op in self.pending():
            if self._due(op):
                self._complete(op)

    def poll(self, op: dict) -> dict:
        if op["status"] == "InProgress":
            op["polls"] += 1
            if self._due(op):
                self._complete(op)
        return op

    def touch(self, resource_id: str) -> None:
        """A GET of the resource itself counts as a poll, so `--no-wait` then `wait` by GET finishes."""
        for op in self.pending():
            if key(op["target"]) == key(resource_id):
                self.poll(op)

    # -- what goes on the wire ---------------------------------------------------------------
    def retry_after(self, op: dict) -> str:
        if self.seconds is None:
            return "1"
        remaining = self.seconds - (self.now() - op["started"])
        return str(min(10, max(1, math.ceil(remaining))))

    def url(self, op: dict, *, monitor: bool = False) -> str:
        base = f"{MANAGEMENT}/subscriptions/{op['subscription']}"
        if op["provider"] == "Microsoft.Resources":
            path = f"/operationresults/{op['id']}"
        else:
            leaf = "operations" if op["kind"] in ("put", "action") else "operationResults"
            path = f"/providers/{op['provider']}/locations/{op['location']}/{leaf}/{op['id']}"
        # An action's Location is its status URL with monitor=true, which answers with the result
        # (a Run Command's output) once done (azure-cli#32286).
        return f"{base}{path}?api-version={op['api_version']}" + ("&monitor=true" if monitor else "")

    def headers(self, op: dict) -> dict:
        if op["kind"] == "action":
            return {"Azure-AsyncOperation": self.url(op), "Location": self.url(op, monitor=True),
                    "Retry-After": self.retry_after(op)}
        header = "Azure-AsyncOperation" if op["kind"] == "put" else "Location"
        return {header: self.url(op), "Retry-After": self.retry_after(op)}

    def status_body(self, op: dict) -> dict:
        body = {"name": op["id"], "status": op["status"], "startTime": iso(op["started"])}
        if "ended" in op:
            body["endTime"] = iso(op["ended"])
        if op["status"] == "Failed":
            body["error"] = op["error"]
        if op["status"] == "Succeeded" and op.get("result") is not None:
            body["properties"] = {"output": op["result"]}
        return body
