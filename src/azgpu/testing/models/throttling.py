"""Azure's request throttling, as Microsoft documents it: token buckets per policy, scope and region.

Off unless asked (FakeAzure(throttle="azure"), `--simulate-throttle`). Every number below is Learn's,
with its page beside it; where Learn names no policy for a request azgpu sends, the choice is marked
"not listed" and says what it follows.

[compute] Learn, "Compute throttling limits" (MicrosoftDocs/azure-compute-docs,
    articles/virtual-machines/compute-throttling-limits.md @ 1a043fb3, ms.date 05/27/2024): per region,
    per minute; a bucket starts full when the resource is created, each request takes one token, the
    bucket gains "Bucket Refill Rate" tokens every minute up to its "Maximum Bucket capacity", and a
    request finding it empty is throttled (its table: 12 tokens, 4 a minute, requests 0, 8, 0, 13, 5, 0 a
    minute -> 1 throttled in the 4th and in the 5th minute). "Users can successfully invoke API calls,
    1 min after getting throttled."
[arm] Learn, "Understand how Azure Resource Manager throttles requests", "Regional throttling and token
    bucket algorithm" (subscriptions migrated from 2024): per subscription, per service principal and per
    operation type, subscription reads 250 tokens refilled 25 a second, deletes 200 / 10, writes 200 / 10,
    the same for a tenant; "Each second, 25 tokens become available until the bucket reaches its maximum
    capacity of 250 tokens"; and a global limit per subscription of 15 times the per-principal one.
[network] Learn, the same page, "Network throttling" (MicrosoftDocs/azure-docs,
    articles/azure-resource-manager/management/request-limits-and-throttling.md @ 03dc0074, and the
    current page): Microsoft.Network takes 1,000 writes or deletes and 10,000 reads per 5 minutes.
[headers] Learn, "Troubleshooting API throttling errors" (MicrosoftDocs/SupportArticles-docs,
    support/azure/virtual-machines/windows/troubleshooting-throttling-errors.md @ 0a1f3ea5): Compute
    answers every request with x-ms-ratelimit-remaining-resource "<source RP>/<policy or bucket>;<count>",
    one per policy the request is subject to (a resource's and the subscription's bucket carry the same
    policy name: "DeleteVMScaleSet;107" and "DeleteVMScaleSet;587"), and a throttled request with 429,
    Retry-After and the body of faults.compute_throttled. Resource Manager answers reads with
    x-ms-ratelimit-remaining-subscription-reads, writes with -writes (and deletes with -deletes), tenant
    requests with x-ms-ratelimit-remaining-tenant-*, and throttles with 429 SubscriptionRequestsThrottled
    and Retry-After ([arm], "Error code").

Policy names in the header: Learn shows HighCostGet and DeleteVMScaleSet; Azure's own answers recorded in
the SDKs' tests show PutVM, LowCostGet, GetOperation, GetVMScaleSet and HighCostGetVMScaleSet (with the
3Min/30Min suffixes of the model before 2024). The others are named the same way after Learn's policy
categories.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from datetime import UTC, datetime

MINUTE, SECOND = 60.0, 1.0
PRINCIPAL = "00000000-0000-0000-0000-00000000fa6e"  # the fake's one caller (FakeCredential)


@dataclass(frozen=True)
class Limit:
    capacity: int  # Maximum bucket capacity: the bucket starts full
    refill: int  # tokens added every `period` seconds
    period: float


@dataclass(frozen=True)
class Policy:
    name: str  # as x-ms-ratelimit-remaining-resource names it
    resource: Limit | None  # per resource (None: "Only subscription level policies are applicable")
    subscription: Limit


def _per_minute(refill: int, capacity: int) -> Limit:
    return Limit(capacity, refill, MINUTE)


# [compute], "Throttling limits for Virtual Machines": resource level, then subscription level.
PUT_VM = Policy("PutVM", _per_minute(4, 12), _per_minute(500, 1500))
UPDATE_VM = Policy("UpdateVM", _per_minute(4, 12), _per_minute(500, 1500))  # Run Command, extensions, start ...
DELETE_VM = Policy("DeleteVM", _per_minute(4, 12), _per_minute(500, 1500))
LOW_COST_GET_VM = Policy("LowCostGet", _per_minute(12, 36), _per_minute(8000, 24000))
HIGH_COST_GET_VM = Policy("HighCostGet", None, _per_minute(300, 900))
GET_OPERATION = Policy("GetOperation", _per_minute(15, 45), _per_minute(5000, 15000))
# [compute], "Throttling limits for Virtual Machine Scale Sets".
PUT_VMSS = Policy("PutVMScaleSet", _per_minute(4, 12), _per_minute(125, 375))
UPDATE_VMSS = Policy("UpdateVMScaleSet", _per_minute(4, 12), _per_minute(500, 1500))
DELETE_VMSS = Policy("DeleteVMScaleSet", _per_minute(4, 12), _per_minute(175, 525))
GET_VMSS = Policy("GetVMScaleSet", _per_minute(12, 36), _per_minute(800, 2400))
HIGH_COST_GET_VMSS = Policy("HighCostGetVMScaleSet", _per_minute(10, 30), _per_minute(360, 1080))
# [compute], "Throttling limits for Virtual Machine Scale Set Virtual Machines".
UPDATE_VMSS_VM = Policy("UpdateVMScaleSetVM", _per_minute(4, 12), _per_minute(500, 1500))
DELETE_VMSS_VM = Policy("DeleteVMScaleSetVM", _per_minute(4, 12), _per_minute(500, 1500))
GET_VMSS_VM = Policy("GetVMScaleSetVM", _per_minute(12, 36), _per_minute(2000, 6000))

COMPUTE_POLICIES = (PUT_VM, UPDATE_VM, DELETE_VM, LOW_COST_GET_VM, HIGH_COST_GET_VM, GET_OPERATION, PUT_VMSS,
                    UPDATE_VMSS, DELETE_VMSS, GET_VMSS, HIGH_COST_GET_VMSS, UPDATE_VMSS_VM, DELETE_VMSS_VM,
                    GET_VMSS_VM)

# [arm]: per subscription and principal, per operation type, per second; the tenant's the same.
ARM_LIMITS = {"reads": Limit(250, 25, SECOND), "writes": Limit(200, 10, SECOND), "deletes": Limit(200, 10, SECOND)}
ARM_GLOBAL_FACTOR = 15  # the subscription's global limit, across its principals
# [network]: per subscription (and region of the resource), per 5 minutes.
NETWORK_LIMITS = {"reads": Limit(10000, 10000, 5 * MINUTE), "writes": Limit(1000, 1000, 5 * MINUTE)}


class Bucket:
    """A token bucket as [compute] describes it: full at creation, `refill` tokens more at the end of
    every `period` after that (never above capacity), one token per request, none left: throttled."""

    def __init__(self, limit: Limit, created: float):
        self.limit = limit
        self.created = created
        self.tokens = limit.capacity
        self.periods = 0  # refills applied so far
        self.measured = 0  # requests seen in the current period, throttled ones too (for the 429 body)

    def _refill(self, now: float) -> None:
        periods = int((now - self.created) // self.limit.period) if now > self.created else 0
        if periods > self.periods:
            self.tokens = min(self.limit.capacity, self.tokens + (periods - self.periods) * self.limit.refill)
            self.periods = periods
            self.measured = 0

    def available(self, now: float) -> int:
        self._refill(now)
        return self.tokens

    def take(self, now: float) -> None:
        self._refill(now)
        self.tokens -= 1

    def retry_after(self, now: float) -> int:
        """Whole seconds until the next refill (Retry-After is seconds: RFC 9110)."""
        next_refill = self.created + (self.periods + 1) * self.limit.period
        return max(1, math.ceil(next_refill - now - 1e-9))

    def window(self, now: float) -> tuple[float, float]:
        start = self.created + self.periods * self.limit.period
        return start, start + self.limit.period


@dataclass
class Charge:
    """What one request draws on: (bucket key, limit, policy or kind) for each bucket."""
    provider: str  # "compute", "network" or "" (only Resource Manager's buckets)
    policy: str | None
    buckets: list[tuple[tuple, Limit, str]]


_VMSS = r"/virtualmachinescalesets/(?P<vmss>[^/]+)"
_VM = r"/virtualmachines/(?P<vm>[^/]+)"
_COMPUTE = re.compile(r"^/subscriptions/[^/]+(/resourcegroups/[^/]+)?/providers/microsoft\.compute(?P<rest>/.*)?$")
_NETWORK = re.compile(r"^/subscriptions/[^/]+(/resourcegroups/[^/]+)?/providers/microsoft\.network(?P<rest>/.*)?$")
_LOCATION = re.compile(r"/locations/([^/]+)/")
# Actions [compute] lists under Delete (the others under Update): a scale set's VM's PowerOff and Deallocate
# (its SimulateEviction is an Update); a VM's Deallocate and Simulate Eviction (its Power Off is an Update).
_DELETE_ACTIONS_VMSS_VM = {"deallocate", "poweroff"}
_DELETE_ACTIONS_VM = {"deallocate", "simulateeviction"}


def _compute_policy(method: str, rest: str) -> tuple[Policy, str] | None:
    """The Compute policy of a request below /providers/Microsoft.Compute, and the resource (lower-cased
    path) whose own bucket it also draws on; None for what no policy of [compute] covers (resource
    SKUs, usages, images, galleries ...: only Resource Manager's buckets apply)."""
    low = rest.lower()
    if re.fullmatch(r"/locations/[^/]+/operations/[^/]+", low):
        return GET_OPERATION, low
    m = re.fullmatch(_VMSS + r"(?P<tail>(/.*)?)", low)
    if m:
        vmss, tail = "vmss:" + m["vmss"], m["tail"]
        # An instance, its actions and its own resources: [compute] lists a scale-set VM's Run Commands
        # (Create Or Update, Update; Delete; Get) and extensions under the instance's Update, Delete and Get.
        vm = re.fullmatch(_VM + r"(?P<action>(/.*)?)", tail)
        if vm:
            instance, action = f"{vmss}/{vm['vm']}", vm["action"].lstrip("/")
            if method in ("GET", "HEAD"):
                return GET_VMSS_VM, instance
            if method == "DELETE" or action in _DELETE_ACTIONS_VMSS_VM:
                return DELETE_VMSS_VM, instance
            # Not listed: the action Run Command of a scale-set VM (POST .../runCommand). [compute] lists
            # the action Run Command of a VM under Update VM and the scale-set VMs' Run Commands under
            # Update scale set VMs; it is taken as the latter (4 a minute per instance, 500 per subscription).
            return UPDATE_VMSS_VM, instance
        if tail == "/virtualmachines" and method == "GET":
            # Not listed: listing a scale set's VMs; taken as the scale sets' list calls (High Cost Get,
            # only the subscription's bucket), the costlier reading.
            return HIGH_COST_GET_VMSS, ""
        if tail == "/instanceview" and method == "GET":
            return HIGH_COST_GET_VMSS, vmss
        if tail == "" and method in ("GET", "HEAD"):
            return GET_VMSS, vmss
        if tail == "" and method == "DELETE":
            return DELETE_VMSS, vmss
        if tail == "" and method in ("PUT", "PATCH"):
            return UPDATE_VMSS, vmss  # a PUT of a new scale set is PutVMScaleSet: see charge()
        if tail == "/delete" and method == "POST":
            # Not listed: deleting instances of a scale set (VirtualMachineScaleSets_DeleteInstances);
            # taken as Delete scale set VMs, what it does to each instance.
            return DELETE_VMSS_VM, vmss
        if method == "POST" and tail.lstrip("/") in ("deallocate", "poweroff"):
            return DELETE_VMSS, vmss
        if method == "POST":
            return UPDATE_VMSS, vmss  # start, restart, reimage, redeploy ...
        return None
    if re.fullmatch(r"/virtualmachinescalesets", low) or low.endswith("/virtualmachinescalesets"):
        return (HIGH_COST_GET_VMSS, "") if method == "GET" else None
    m = re.fullmatch(_VM + r"(?P<tail>(/.*)?)", low)
    if m:
        vm, tail = "vm:" + m["vm"], m["tail"]
        if method in ("GET", "HEAD"):
            return LOW_COST_GET_VM, vm  # the VM, its instance view, its extensions' and Run Commands' Get
        if (method == "DELETE" and not tail) or tail.lstrip("/") in _DELETE_ACTIONS_VM:
            return DELETE_VM, vm
        # Update VM lists the VM's Run Commands' and extensions' Create Or Update, Update and Delete too.
        return (PUT_VM if method == "PUT" and not tail else UPDATE_VM), vm  # PUT of an existing one: charge()
    if low.endswith("/virtualmachines") and method == "GET":
        return HIGH_COST_GET_VM, ""
    # Not listed: capacity reservation groups and their reservations (reserve, release, preflight's
    # reads), SKUs, usages, images: [compute] names no policy for them, so only Resource Manager's
    # buckets count them (as writes, deletes or reads like any other request).
    return None


def arm_kind(method: str) -> str:
    return {"GET": "reads", "HEAD": "reads", "DELETE": "deletes"}.get(method.upper(), "writes")


class Throttle:
    """Every bucket of one simulated subscription (its one principal: the fake's credential)."""

    def __init__(self, subscription: str):
        self.subscription = subscription.lower()
        self.buckets: dict[tuple, Bucket] = {}
        self.refused: dict[str, int] = {}  # 429s answered, by policy or bucket

    def _bucket(self, key: tuple, limit: Limit, now: float) -> Bucket:
        bucket = self.buckets.get(key)
        if bucket is None:
            bucket = self.buckets[key] = Bucket(limit, now)
        return bucket

    def charge(self, method: str, path: str, *, region: str, exists: bool, target: str | None = None) -> Charge:
        """The buckets a request draws on: Resource Manager's, then its resource provider's. exists: the
        resource of a PUT exists already; target: the resource an operation status URL is about."""
        method, low = method.upper(), path.lower()
        kind = arm_kind(method)
        sub = re.match(r"^/subscriptions/([^/]+)", low)
        scope = ("subscription", sub.group(1)) if sub else ("tenant", "")
        arm = ARM_LIMITS[kind] if kind in ARM_LIMITS else ARM_LIMITS["writes"]
        buckets = [(("arm", *scope, kind), arm, kind)]
        if sub:
            wide = Limit(arm.capacity * ARM_GLOBAL_FACTOR, arm.refill * ARM_GLOBAL_FACTOR, arm.period)
            buckets.append((("arm-global", *scope, kind), wide, f"global {kind}"))
        compute = _COMPUTE.match(low)
        if compute:
            found = _compute_policy(method, compute["rest"] or "")
            if found is None:
                return Charge("", None, buckets)
            policy, resource = found
            if policy is GET_OPERATION and target:
                resource = target.lower()
            if policy is UPDATE_VMSS and method == "PUT" and not exists:
                policy = PUT_VMSS  # Put (Create new scale set); a PUT of an existing one is Update
            if policy is PUT_VM and exists:
                policy = UPDATE_VM  # Put VM is "Create new VMs"; an existing VM's is Update VM
            if policy.resource is not None and resource:
                buckets.append((("compute", region, policy.name, resource), policy.resource, policy.name))
            buckets.append((("compute", region, policy.name), policy.subscription, policy.name))
            return Charge("compute", policy.name, buckets)
        if _NETWORK.match(low):
            net = "reads" if kind == "reads" else "writes"  # "write / delete (PUT)"
            buckets.append((("network", region, net), NETWORK_LIMITS[net], f"network {net}"))
            return Charge("network", None, buckets)
        return Charge("", None, buckets)

    def admit(self, method: str, path: str, *, now: float, region: str, exists: bool = False,
              target: str | None = None) -> tuple[int, dict, dict] | dict:
        """Take the request's tokens: the headers of its answer, or the whole 429 answer (status, body,
        headers) when a bucket is empty. Resource Manager takes its tokens before it routes the
        request to the resource provider; a throttled request takes none of the bucket that refused it."""
        charge = self.charge(method, path, region=region, exists=exists, target=target)
        kind = arm_kind(method)
        arm_buckets = [(k, lim, label) for k, lim, label in charge.buckets if k[0].startswith("arm")]
        provider = [(k, lim, label) for k, lim, label in charge.buckets if not k[0].startswith("arm")]
        for key, limit, label in arm_buckets:
            bucket = self._bucket(key, limit, now)
            if bucket.available(now) <= 0:
                bucket.measured += 1
                self.refused[label] = self.refused.get(label, 0) + 1
                return self._arm_throttled(method, path, kind, bucket, now)
        for key, _limit, _ in arm_buckets:
            self.buckets[key].take(now)
        for key, limit, label in provider:
            bucket = self._bucket(key, limit, now)
            if bucket.available(now) <= 0:
                bucket.measured += 1
                self.refused[label] = self.refused.get(label, 0) + 1
                if charge.provider == "compute":
                    return self._compute_throttled(charge, key, bucket, now)
                return self._network_throttled(label, bucket, now)
        for key, _limit, _ in provider:
            self.buckets[key].take(now)
            self.buckets[key].measured += 1
        return self._headers(charge, kind, scope_tenant=charge.buckets[0][0][1] == "tenant")

    def _headers(self, charge: Charge, kind: str, *, scope_tenant: bool) -> dict:
        first = self.buckets[charge.buckets[0][0]]
        out = {f"x-ms-ratelimit-remaining-{'tenant' if scope_tenant else 'subscription'}-{kind}": str(first.tokens)}
        if charge.provider == "compute":
            counts = [f"Microsoft.Compute/{label};{self.buckets[key].tokens}" for key, _, label in charge.buckets
                      if key[0] == "compute"]
            # One header per policy [headers]; sent as one comma-separated value, which HTTP makes the same.
            out["x-ms-ratelimit-remaining-resource"] = ",".join(counts)
        return out

    def _arm_throttled(self, method: str, path: str, kind: str, bucket: Bucket, now: float) -> tuple[int, dict, dict]:
        # The token bucket's answer as Azure sends it (a 2025 answer quoted in velero-io/velero#9171).
        wait = bucket.retry_after(now)
        message = (f"Number of '{kind[:-1]}' requests for subscription '{self.subscription}' actor '{PRINCIPAL}' "
                   f"exceeded. Please try again after '{wait}' seconds after additional tokens are available. "
                   "Refer to https://aka.ms/arm-throttling for additional information.")
        body = {"error": {"code": "SubscriptionRequestsThrottled", "message": message}}
        return 429, body, {"Retry-After": str(wait), f"x-ms-ratelimit-remaining-subscription-{kind}": "0"}

    def _compute_throttled(self, charge: Charge, key: tuple, bucket: Bucket, now: float) -> tuple[int, dict, dict]:
        wait = bucket.retry_after(now)
        start, end = bucket.window(now)
        measured = {"operationGroup": charge.policy, "startTime": _iso(start), "endTime": _iso(end),
                    "allowedRequestCount": bucket.limit.capacity if bucket.periods == 0 else bucket.limit.refill,
                    "measuredRequestCount": bucket.measured}
        body = {"code": "OperationNotAllowed",
                "message": "The server rejected the request because too many requests have been received for this "
                           "subscription.",
                "details": [{"code": "TooManyRequests", "target": charge.policy, "message": json.dumps(measured)}]}
        counts = [f"Microsoft.Compute/{label};{self.buckets[k].tokens if k in self.buckets else lim.capacity}"
                  for k, lim, label in charge.buckets if k[0] == "compute"]
        return 429, body, {"Retry-After": str(wait), "x-ms-ratelimit-remaining-resource": ",".join(counts)}

    @staticmethod
    def _network_throttled(label: str, bucket: Bucket, now: float) -> tuple[int, dict, dict]:
        # Not documented: the body Microsoft.Network throttles with. ARM's error shape, code TooManyRequests.
        wait = bucket.retry_after(now)
        return 429, {"error": {"code": "TooManyRequests", "message": f"Too many {label} requests; retry after "
                                                                      f"{wait} seconds."}}, {"Retry-After": str(wait)}


def _iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat()


_OPERATION = re.compile(r"/providers/[^/]+/locations/[^/]+/operations/([^/]+)$", re.IGNORECASE)


def admit(backend, req) -> tuple[int, dict, dict] | dict:
    """A request against the subscription's buckets (backend.throttle): the headers its answer carries,
    or the 429 answer. The region of a Compute or Network request is its resource's (or resource
    group's, or the location in its path), as both providers throttle per region."""
    throttle: Throttle = backend.throttle
    path = req.path.rstrip("/")
    target, region = None, None
    op = _OPERATION.search(path)
    if op:
        found = backend.store.operations.get(op.group(1))
        target = found["target"] if found else None
    located = _LOCATION.search(path + "/")
    if located:
        region = located.group(1)
    resource = _resource_of(backend, target or path)
    if region is None:
        region = (resource or {}).get("location") or _body_location(req.body) or "global"
    exists = req.method.upper() == "PUT" and backend.find(path) is not None
    return throttle.admit(req.method, path, now=backend.now(), region=str(region).lower().replace(" ", ""),
                          exists=exists, target=target)


def _resource_of(backend, path: str) -> dict | None:
    """The stored resource a path is about, or its nearest stored parent (a scale set for its VMs'
    actions), or its resource group."""
    parts = [p for p in path.split("/") if p]
    while len(parts) >= 4:
        found = backend.find("/" + "/".join(parts))
        if found is not None and found.get("location"):
            return found
        parts = parts[:-1]
    return None


def _body_location(body) -> str | None:
    return body.get("location") if isinstance(body, dict) and isinstance(body.get("location"), str) else None
