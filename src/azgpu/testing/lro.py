"""Long-running operations as ARM runs them, so the SDK's real ARMPolling drives them.

A PUT answers with an Azure-AsyncOperation status URL (polled for {"status": ...}); a DELETE with
a Location URL (202 while running, 204 when done). An operation finishes after `polls` polls, or
once `seconds` have passed on the clock. Start times are clock readings; with the default virtual
clock (which starts at the wall-clock time) or clock=time.time they are comparable across
processes, so `--no-wait` in one CLI process and `wait` in the next see the same operation.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Callable
from datetime import UTC, datetime

from .store import Store, key, parse_id, stable_uuid

MANAGEMENT = "https://management.azure.com"


def iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat().replace("+00:00", "Z")


class Operations:
    def __init__(self, store: Store, *, polls: int, seconds: float | dict[str, float] | None,
                 now: Callable[[], float], finish: Callable[[dict], None]):
        """seconds: how long every operation takes, or per operation as {"<resource type>:<kind>" or
        "<resource type>" or "*:<kind>": seconds, "*": seconds for the rest} (kinds: put, delete,
        deleteInstances, action, whatIf); None: operations end after `polls` polls instead."""
        self.store = store
        self.polls = max(1, polls)
        self.seconds = seconds
        self.now = now
        self.finish = finish  # applies a finished operation to the resources
        self._indexed: dict | None = None
        self._order = itertools.count()

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
        self._index()
        self._add(op)
        return op

    # -- the operations still running, indexed: a 10,000-node gate keeps thousands running at once,
    # and every request settles them. Rebuilt whenever the store's operations were replaced (a
    # --simulate state file read again).
    def _index(self) -> None:
        if self._indexed is self.store.operations:
            return
        self._indexed = self.store.operations
        self._by_target: dict[str, dict[str, dict]] = {}
        self._due_heap: list = []
        for op in self.store.operations.values():
            if op["status"] == "InProgress":
                self._add(op)

    def _add(self, op: dict) -> None:
        self._by_target.setdefault(key(op["target"]), {})[op["id"]] = op
        if isinstance(self.seconds, (int, float)) or isinstance(self.seconds, dict):
            heapq.heappush(self._due_heap, (op["started"] + self.duration(op), next(self._order), op["id"]))

    def _drop(self, op: dict) -> None:
        ops = self._by_target.get(key(op["target"]))
        if ops is not None:
            ops.pop(op["id"], None)
            if not ops:
                del self._by_target[key(op["target"])]

    def running_on(self, target: str) -> list[dict]:
        """The operations still running on target, oldest first."""
        self._index()
        return [op for op in self._by_target.get(key(target), {}).values() if op["status"] == "InProgress"]

    def running(self, target: str) -> dict | None:
        """The operation still running on target, if any: ARM refuses another write meanwhile (409)."""
        ops = self.running_on(target)
        return ops[-1] if ops else None

    def pending(self) -> list[dict]:
        self._index()
        return [op for ops in self._by_target.values() for op in ops.values() if op["status"] == "InProgress"]

    def _complete(self, op: dict) -> None:
        op["status"] = "Failed" if op["error"] else "Succeeded"
        op["ended"] = self.now()
        self._drop(op)
        self.finish(op)

    def duration(self, op: dict) -> float:
        if not isinstance(self.seconds, dict):
            return float(self.seconds or 0)
        rtype = parse_id(op["target"]).type.lower()
        for name in (f"{rtype}:{op['kind']}".lower(), rtype, f"*:{op['kind']}".lower(), "*"):
            if name in self.seconds:
                return float(self.seconds[name])
        return 0.0

    def _due(self, op: dict) -> bool:
        if op.get("hang"):  # a Run Command whose node never answers (a fault, or no outbound path)
            return False
        if self.seconds is not None:
            return self.now() - op["started"] >= self.duration(op)
        return op["polls"] >= self.polls

    def settle(self) -> None:
        """Finish every operation whose time has come (duration mode only: polls need a poll)."""
        if self.seconds is None:
            return
        self._index()
        now = self.now()
        while self._due_heap and self._due_heap[0][0] <= now:
            _, _, op_id = heapq.heappop(self._due_heap)
            op = self.store.operations.get(op_id)
            if op is not None and op["status"] == "InProgress" and self._due(op):
                self._complete(op)

    def poll(self, op: dict) -> dict:
        if op["status"] == "InProgress":
            op["polls"] += 1
            if self._due(op):
                self._complete(op)
        return op

    def touch(self, resource_id: str) -> None:
        """A GET of the resource itself counts as a poll, so `--no-wait` then `wait` by GET finishes."""
        for op in self.running_on(resource_id):
            self.poll(op)

    # -- what goes on the wire ---------------------------------------------------------------
    def retry_after(self, op: dict) -> str:
        if self.seconds is None:
            return "1"
        remaining = self.duration(op) - (self.now() - op["started"])
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
