"""azgpu's own pace: a session keeps its requests under Azure's throttling buckets instead of running
into them, so a gate of thousands of nodes draws few 429s and no node waits out a Retry-After that
azgpu's own burst caused.

What Azure says is left comes back on every answer, and that is what the pace follows:
- Resource Manager: x-ms-ratelimit-remaining-subscription-{reads,writes,deletes}, per subscription and
  principal; its buckets' sizes and refill rates are Learn's (ARM_BUCKET, ARM_REFILL), so a session
  starts from a full bucket until an answer says otherwise, and once one runs low the requests of that
  kind go at its refill rate, a little under it.
- Compute: x-ms-ratelimit-remaining-resource, "<RP>/<policy>;<count>" for each policy the request
  counts against. Learn names no rate per policy name, so a policy that runs low is probed, one request
  at a time; its 429 says when it refills (Retry-After), and since Compute's buckets refill once a
  minute (Learn, "Compute throttling limits") later refills are waited for, not probed.
Which policies a request counts against is learnt from the answers to the requests of its shape
(the path without names). A 429 holds every request of its bucket until its Retry-After.

Pacing waits are not throttling waits: they happen before a request is sent, go through the session's
clock (Session.pause, so tests and the simulated timeline drive them) and are not charged to the
throttling budget. A Run Command's deadline counts from when Azure accepted it (run_command.py).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

# Resource Manager's token buckets since 2024 (Learn, "Understand how Azure Resource Manager throttles
# requests", "Regional throttling and token bucket algorithm"): per subscription and principal,
# reads 250 refilled 25 a second, writes and deletes 200 refilled 10 a second.
ARM_REFILL = {"reads": 25.0, "writes": 10.0, "deletes": 10.0}
ARM_BUCKET = {"reads": 250, "writes": 200, "deletes": 200}  # what a session may assume before an answer says
HEADROOM = 0.98  # paced turns come at this share of a refill rate
RESERVE = 3  # tokens left to the rest of the subscription's clients before pacing starts
COMPUTE_PERIOD = 60.0  # Compute's buckets refill every minute (Learn, "Compute throttling limits")
_REMAINING = re.compile(r"\s*([^;,\s]+)/([^;,\s]+);\s*(\d+)\s*")
MAX_HOLD = 120.0  # a Retry-After beyond this is the retry policy's (and the throttling budget's) to judge


def arm_kind(method: str) -> str:
    return {"GET": "reads", "HEAD": "reads", "DELETE": "deletes"}.get(method.upper(), "writes")


def shape(method: str, url: str) -> str:
    """A request without its names: the operation it is, e.g. POST .../virtualmachinescalesets/*/
    virtualmachines/*/runcommand. Compute counts requests of one shape against the same policies."""
    parts = [p for p in urlsplit(url).path.lower().split("/") if p]
    out, i = [method.upper()], 0
    while i < len(parts):
        word = parts[i]
        if word == "providers" and i + 1 < len(parts):
            out += [word, parts[i + 1]]
            i += 2
        elif i + 1 < len(parts):
            out += [word, "*"]
            i += 2
        else:
            out.append(word)
            i += 1
    return "/".join(out)


def remaining(headers) -> dict[str, tuple[int, int]]:
    """x-ms-ratelimit-remaining-resource by policy ("Microsoft.Compute/PutVM"): (smallest, largest)
    count. A policy's resource bucket and the subscription's carry the same name (Learn's example:
    "DeleteVMScaleSet;107" and "DeleteVMScaleSet;587"); the larger is taken for the subscription's,
    which every request of the policy draws on, the smaller for the one resource's."""
    out: dict[str, tuple[int, int]] = {}
    for value in _header_values(headers, "x-ms-ratelimit-remaining-resource"):
        for entry in value.split(","):
            m = _REMAINING.fullmatch(entry)
            if m:
                name, count = f"{m.group(1)}/{m.group(2)}", int(m.group(3))
                low, high = out.get(name, (count, count))
                out[name] = (min(low, count), max(high, count))
    return out


def _header_values(headers, name: str) -> list[str]:
    if headers is None:
        return []
    getter = getattr(headers, "get_all", None)  # a multi-valued header, where the transport keeps them
    if callable(getter):
        values = getter(name)
        if values:
            return [str(v) for v in values]
    value = headers.get(name)
    return [str(value)] if value is not None else []


@dataclass
class _Bucket:
    """What azgpu knows of one of Azure's buckets: the tokens the last answers said were left, and the
    requests sent since that have no answer yet (counted as taken, whether Azure charged them yet or not)."""

    refill: float | None = None  # tokens a second, where Learn gives it (Resource Manager's)
    capacity: float = 0.0
    tokens: float | None = None  # None: nothing known yet
    synced_at: float = 0.0
    in_flight: int = 0
    next_slot: float = 0.0  # the next paced turn (Resource Manager's)
    held_until: float = 0.0  # after a 429: nothing goes before its Retry-After
    probe: bool = False  # Compute's, run low: one request in flight until an answer says more
    refilled_at: float | None = None  # a moment Compute refilled it (learnt from a 429's Retry-After)

    def left(self, now: float) -> float:
        tokens = self.tokens or 0.0
        if self.refill is not None:
            # The bucket gains its tokens once a second, at a moment azgpu does not know: only whole
            # seconds since the count are sure to have brought them.
            tokens = min(self.capacity, tokens + int(now - self.synced_at) * self.refill)
        return tokens - self.in_flight

    def sync(self, count: int, now: float) -> None:
        """An answer's count. Answers of one moment may come back in another order than Azure charged
        them: within it the smallest count holds; a later one may show a refill."""
        if self.tokens is None or now > self.synced_at:
            self.tokens = float(count)
        else:
            self.tokens = min(self.tokens, float(count))
        self.synced_at = now


class Pacer:
    """One session's pace (every thread of it): before() before a request goes, after() with its answer."""

    def __init__(self, clock: Callable[[], float], pause: Callable[[float], None]):
        self.clock = clock
        self.pause = pause
        self._lock = threading.Lock()
        self._buckets: dict[str, _Bucket] = {}
        self._policies: dict[str, tuple[str, ...]] = {}  # request shape -> Compute policies it counts against
        self.waited = 0.0  # seconds requests waited for their turn, all threads together
        self.throttled: dict[str, int] = {}  # 429s answered to this session, by bucket

    def _bucket(self, name: str) -> _Bucket:
        bucket = self._buckets.get(name)
        if bucket is None:
            kind = name.split(":", 1)[1] if name.startswith("arm:") else ""
            bucket = self._buckets[name] = _Bucket(refill=ARM_REFILL.get(kind), synced_at=self.clock())
            if kind in ARM_BUCKET:
                bucket.tokens = bucket.capacity = float(ARM_BUCKET[kind])
        return bucket

    # -- before a request -----------------------------------------------------------------------
    def before(self, method: str, url: str) -> tuple[str, ...]:
        """Wait for the request's turn in every bucket it draws on; the buckets it was counted in."""
        names = (f"arm:{arm_kind(method)}", *self._policies.get(shape(method, url), ()))
        taken: list[str] = []
        try:
            for name in names:
                self._turn(name)
                taken.append(name)
        except BaseException:
            self.after(method, url, 0, None, tuple(taken))  # interrupted while waiting: nothing was sent
            raise
        return tuple(taken)

    def _turn(self, name: str) -> None:
        waited_until = float("-inf")  # a pause is served even where the clock does not show it
        while True:
            with self._lock:
                b = self._bucket(name)
                wait, booked = self._wait(b, max(self.clock(), waited_until))
                if wait <= 0 or booked:
                    b.in_flight += 1
            if wait > 0:
                self.waited += wait
                waited_until = max(self.clock(), waited_until) + wait
                self.pause(wait)
            if wait <= 0 or booked:
                return

    def _wait(self, b: _Bucket, now: float) -> tuple[float, bool]:
        """(seconds until a request may draw on b, whether that turn is booked for it)."""
        if now < b.held_until:
            return b.held_until - now, False
        if b.tokens is None:
            return 0.0, False
        if b.refill is not None:  # Resource Manager's: a known rate and size, so paced turns
            if b.left(now) > RESERVE:
                return 0.0, False
            # Turns at the refill rate, from when the bucket surely refilled once after it ran low.
            slot = max(now, b.next_slot, b.synced_at + 1.0)
            b.next_slot = slot + 1 / (b.refill * HEADROOM)
            return slot - now, True
        if b.left(now) > RESERVE:  # Compute's: what the last answers said is left
            return 0.0, False
        if b.refilled_at is not None:
            last = b.refilled_at + COMPUTE_PERIOD * ((now - b.refilled_at) // COMPUTE_PERIOD)
            if b.synced_at >= last:  # nothing more until the next refill
                return last + COMPUTE_PERIOD - now, False
        if b.probe:
            return 1.0, False  # one request finds out; look again when its answer may be in
        b.probe = True
        return 0.0, False

    # -- after its answer -----------------------------------------------------------------------
    def after(self, method: str, url: str, status: int, headers, taken: tuple[str, ...]) -> None:
        """Learn from an answer: what is left of each bucket, and a 429's Retry-After."""
        now = self.clock()
        with self._lock:
            for name in taken:
                b = self._bucket(name)
                b.in_flight = max(0, b.in_flight - 1)
                b.probe = False
            if not status:
                return  # no answer: nothing learnt
            kind = f"arm:{arm_kind(method)}"
            count = _int(headers.get(f"x-ms-ratelimit-remaining-subscription-{kind[4:]}") if headers else None)
            if count is not None:
                self._bucket(kind).sync(count, now)
            policies = remaining(headers)
            if policies:
                self._policies[shape(method, url)] = tuple(sorted(policies))
                for policy, (_, left) in policies.items():
                    b = self._bucket(policy)
                    if b.held_until and now >= b.held_until and left > RESERVE:
                        b.refilled_at, b.held_until = b.held_until, 0.0  # the refill the 429 announced
                    b.sync(left, now)
            if status == 429:
                wait = _retry_after(headers)
                # Compute's 429 says which policy is empty; one with only a resource's bucket empty holds
                # that resource alone (the retry waits for it). Anything else is taken as Resource Manager's.
                empty = [p for p, (_, high) in policies.items() if high == 0]
                if not policies:
                    empty = [kind]
                for name in [p for p, (low, _) in policies.items() if low == 0] or empty:
                    self.throttled[name] = self.throttled.get(name, 0) + 1
                for name in empty:
                    b = self._bucket(name)
                    if wait:
                        b.held_until = max(b.held_until, now + min(wait, MAX_HOLD))
                    b.tokens, b.synced_at = 0.0, now


def _int(value) -> int | None:
    try:
        return int(str(value).strip())
    except (TypeError, ValueError):
        return None


def _retry_after(headers) -> float | None:
    value = headers.get("Retry-After") if headers else None
    try:
        seconds = float(str(value).strip())
    except (TypeError, ValueError):
        return None
    return seconds if 0 <= seconds < 86400 else None
