"""Plan -> Azure: resource group, then each dependency wave in parallel, converging on re-runs.

Bodies on the wire are the plan's resources with expressions resolved: the same objects the ARM
and Bicep renderers print. Resources are found again by name and azgpu's tags, so a re-run after
any failure or Ctrl-C picks up where the last one stopped.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import wait as wait_for
from dataclasses import dataclass, field
from typing import Any

from .. import resource_types
from ..changes import PropertyChange, compare
from ..errors import AzureError, InputError
from ..expr import walk
from ..ownership import created_group_tags, is_ours
from ..plan import Plan, Resource
from ..resource_types import VMSS
from .arm import TERMINAL, is_not_found, list_group, rest_shape, to_azure_error, until_settled, wait_first_polling
from .azure_errors import IN_PROGRESS_REMEDY, OperationInProgressError
from .interface import Event
from .session import Interrupted, result_of

# After Ctrl-C, how long the workers get to finish what they are doing (every wait of theirs ends at
# once; a request in flight gets to complete, so a simulation's fake stays installed until it has).
INTERRUPT_GRACE = 2.0
# How often a resource is PUT again after Azure refused it because another operation was running.
IN_PROGRESS_ATTEMPTS = 3


@dataclass
class Resolver:
    subscription_id: str
    resource_group: str
    parameters: dict[str, Any]

    def parameter(self, name: str) -> Any:
        return self.parameters[name]

    def resource_id(self, type_: str, *names: str) -> str:
        provider, *types = type_.split("/")
        path = "/".join(f"{t}/{n}" for t, n in zip(types, names, strict=True))
        return f"/subscriptions/{self.subscription_id}/resourceGroups/{self.resource_group}/providers/{provider}/{path}"


def resolved_body(resource: Resource, resolver: Resolver) -> dict[str, Any]:
    """The REST body for a plan resource: what the ARM template declares, expressions evaluated."""
    return walk(resource.body, lambda e: e.resolve(resolver))


def plan_parameters(plan: Plan) -> dict[str, Any]:
    return {p.name: p.value for p in plan.parameters}


def _immutable(body: dict) -> dict[str, Any]:
    props = body.get("properties", {})
    storage = props.get("virtualMachineProfile", {}).get("storageProfile", {})
    image = storage.get("imageReference", {})
    return {
        "size": (body.get("sku") or {}).get("name", "").lower(),
        "image": ":".join(str(image.get(k, "")).lower() for k in ("publisher", "offer", "sku")),
        "orchestrationMode": props.get("orchestrationMode") or "Uniform",
        "singlePlacementGroup": props.get("singlePlacementGroup"),
        "zones": sorted(body.get("zones") or []),
    }


@dataclass
class Deployer:
    session: Any
    plan: Plan
    resource_group: str
    on_event: Callable[[Event], None] = lambda e: None
    timeout: float | None = None
    max_workers: int | None = None  # None: one per resource of the widest wave, so a whole wave goes at once
    events: dict[str, Event] = field(default_factory=dict)
    stop: threading.Event = field(default_factory=threading.Event)
    # What existing() found Azure cannot do (not ours, immutable change), by plan key, when not strict.
    refused: dict[str, InputError] = field(default_factory=dict)
    # Scale-in the caller allowed: scale set name -> instance ids to delete before its PUT.
    removals: dict[str, list[str]] = field(default_factory=dict)
    # Resource key -> the live values of its type's `kept` keys (existing() reads them; body() sends them).
    kept: dict[str, dict[str, Any]] = field(default_factory=dict)
    # VNet key -> the live subnets azgpu did not create (a user added them): every PUT of the VNet
    # carries them, since a PUT without a subnet deletes it (existing() reads them).
    foreign_subnets: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    # VNet key -> address prefixes a user added to the VNet's space (for their subnets), kept the same way.
    foreign_prefixes: dict[str, list[str]] = field(default_factory=dict)
    # NSG key -> security rules a user added (a PUT of the NSG replaces its rules), kept the same way.
    foreign_rules: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    def __post_init__(self):
        self.resolver = Resolver(self.session.subscription_id, self.resource_group, plan_parameters(self.plan))
        self.cluster = self.plan.spec.names.cluster
        self._deadline = time.monotonic() + self.timeout if self.timeout else None
        for r in self.plan.resources:
            total = r.body["sku"]["capacity"] if r.kind.has_instances else 1
            self.events[r.key] = Event(r.key, r.name, r.kind.stage, "pending", total=total,
                                       has_instances=r.kind.has_instances)

    # -- helpers

    def body(self, r: Resource) -> dict[str, Any]:
        """The planned REST body, with what Azure fixed at creation kept as the live resource has it."""
        body = resolved_body(r, self.resolver)
        for key, value in self.kept.get(r.key, {}).items():
            if value in (None, [], ""):
                body.pop(key, None)
            else:
                body[key] = value
        if self.foreign_subnets.get(r.key):
            props = body.setdefault("properties", {})
            props["subnets"] = [*(props.get("subnets") or []), *self.foreign_subnets[r.key]]
        if self.foreign_rules.get(r.key):
            props = body.setdefault("properties", {})
            props["securityRules"] = [*(props.get("securityRules") or []), *self.foreign_rules[r.key]]
        if self.foreign_prefixes.get(r.key):
            space = body.setdefault("properties", {}).setdefault("addressSpace", {})
            space["addressPrefixes"] = [*(space.get("addressPrefixes") or []), *self.foreign_prefixes[r.key]]
        return body

    @property
    def kept_notices(self) -> list[str]:
        """What a re-run keeps that azgpu did not create, one line each."""
        names = {r.key: f"{r.kind.label} '{r.name}'" for r in self.plan.resources}
        out = [f"{names[key]} keeps subnet(s) {', '.join(s['name'] for s in subnets)} that azgpu did not create"
               for key, subnets in self.foreign_subnets.items() if subnets]
        out += [f"{names[key]} keeps address prefix(es) {', '.join(prefixes)} that azgpu did not add"
                for key, prefixes in self.foreign_prefixes.items() if prefixes]
        out += [f"{names[key]} keeps rule(s) {', '.join(x['name'] for x in rules)} that azgpu did not create"
                for key, rules in self.foreign_rules.items() if rules]
        return out

    def _emit(self, key: str, **changes) -> None:
        event = self.events[key]
        for k, v in changes.items():
            setattr(event, k, v)
        self.on_event(event)

    def _remaining(self) -> float | None:
        if self._deadline is None:
            return None
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise AzureError(f"timed out after {self.timeout:g} s; Azure keeps working on what was started",
                             code="TIMEOUT", remedy="run 'provision wait' (or 'provision create' again) to follow it")
        return left

    # -- steps

    def ensure_resource_group(self, location: str, *, exists: bool | None = None) -> bool:
        """Create the resource group when missing, tagged as created by azgpu; True when created.

        exists: already known (from list_group), so no extra request asks again.
        """
        rg = self.session.resources.resource_groups
        try:
            if exists if exists is not None else rg.check_existence(self.resource_group):
                return False
            rg.create_or_update(self.resource_group, {
                "location": location,
                "tags": created_group_tags(self.cluster),
            })
        except Exception as exc:
            raise to_azure_error(exc, f"resource group {self.resource_group}") from None
        return True

    def existing(self, listed: list[Any] | None, *, strict: bool = True) -> dict[str, Any]:
        """Existing plan resources by key; refuses foreign ones and changes Azure cannot apply in place.

        One listing of the resource group finds them (one read, not one per planned resource); only
        the ones that exist are read in full, to compare them with the plan. strict=False (what-if)
        collects the refusals in self.refused instead of raising the first.
        """
        wanted = {(r.type.lower(), r.name.lower()): r for r in self.plan.resources}
        found: dict[str, Any] = {}
        for item in listed or []:
            r = wanted.get(((item.type or "").lower(), (item.name or "").lower()))
            if r is None:
                continue
            if not is_ours(item.tags, self.cluster):
                taken = InputError(
                    f"{r.type.rsplit('/', 1)[-1]} '{r.name}' already "
                    f"exists in {self.resource_group} and was not created by azgpu for cluster '{self.cluster}'",
                    code="NAME_TAKEN",
                    remedy="choose another -n/--name or -g/--resource-group; "
                           "azgpu never modifies resources it did not create")
                if strict:
                    raise taken
                self.refused[r.key] = taken
                continue
            try:
                current = r.kind.get(self.session, self.resource_group, r.name, api_version=r.api_version)
            except Exception as exc:
                if is_not_found(exc):  # deleted since the listing
                    continue
                raise to_azure_error(exc, r.name) from None
            if r.kind.immutable:
                problem = self._immutable_problem(r, current)
                if problem is not None:
                    if strict:
                        raise problem
                    self.refused[r.key] = problem
            if kept := r.kind.kept:
                live = rest_shape(current)
                self.kept[r.key] = {k: live.get(k) for k in kept}
            if r.kind is resource_types.VNET:
                live = rest_shape(current)
                self.foreign_subnets[r.key] = foreign_subnets(r, live)
                planned = ((r.body.get("properties") or {}).get("addressSpace") or {}).get("addressPrefixes") or []
                have = ((live.get("properties") or {}).get("addressSpace") or {}).get("addressPrefixes") or []
                self.foreign_prefixes[r.key] = [p for p in have if p not in planned]
            if r.kind is resource_types.NSG:
                self.foreign_rules[r.key] = foreign_children(r, rest_shape(current), "securityRules")
            found[r.key] = current
        return found

    def immutable_changes(self, r: Resource, current: Any) -> list[str]:
        """The keys of the type's immutable paths whose planned value differs from the live one."""
        # SDK models serialize back to the REST shape, the same shape as the plan's bodies.
        want, have = _immutable(self.body(r)), _immutable(rest_shape(current))
        return [k for k in want if have[k] not in (None, "", []) and want[k] != have[k]]

    def _immutable_problem(self, r: Resource, current: Any) -> InputError | None:
        diffs = self.immutable_changes(r, current)
        if not diffs:
            return None
        want, have = _immutable(self.body(r)), _immutable(rest_shape(current))
        details = ", ".join(f"{k} {have[k]!r} -> {want[k]!r}" for k in diffs)
        return InputError(f"scale set '{r.name}' exists with a different {details}; Azure cannot change that in place",
                          code="CHANGE_NOT_ALLOWED",
                          remedy=f"run 'provision destroy -n {self.cluster} -g {self.resource_group}' first, "
                                 "or use another -n/--name")

    def delta(self, r: Resource, current: Any) -> list[PropertyChange]:
        """What a PUT of the plan's body changes on the live resource (the what-if's property lines)."""
        out = compare(self.body(r), rest_shape(current))
        if r.kind.immutable:
            paths = r.kind.immutable_paths
            refused = {p for k in self.immutable_changes(r, current) for p in paths[k]}
            for change in out:
                change.refused = change.path in refused
        return out

    def _converged(self, r: Resource, current: Any | None) -> bool:
        """Succeeded, and a PUT of the plan's body would change nothing (capacity, tags, rules ...)."""
        if current is None:
            return False
        if not r.kind.long_running:
            # Created synchronously, so existing means done (a proximity placement group has no provisioningState);
            # PUTting it again would try to change its intent while VMs use it.
            return True
        state = (getattr(current, "provisioning_state", "") or "").lower()
        if state != "succeeded":
            return False
        return not self.delta(r, current)

    def _scale_in(self, r: Resource, current: Any) -> Any:
        """Delete the instances the caller chose (and allowed) before the scale set's PUT, so exactly
        those go, not the ones Azure's scale-in policy would pick; returns the scale set re-read."""
        ids = self.removals.get(r.name)
        if not ids or current is None:
            return current
        self._emit(r.key, state="scaling in", started=time.monotonic())
        self._wait(r.kind.begin_delete_instances(self.session, self.resource_group, r.name, ids), r)
        return r.kind.get(self.session, self.resource_group, r.name, api_version=r.api_version)

    def begin_put(self, r: Resource, *, wait: bool = True):
        # Without waiting, no poller thread is left polling behind the caller's back.
        kw: dict[str, Any] = {"api_version": r.api_version}
        if not wait:
            kw["polling"] = False
        elif r.kind.long_running:
            # The first status check waits for Retry-After, and no GET of the resource follows the
            # Succeeded status: the deployer only needs to know the PUT succeeded (two requests fewer
            # per resource than azure-core's default).
            kw["polling"] = wait_first_polling(self.session.polling_interval, final_get=False)
        return r.kind.begin_create(self.session, self.resource_group, r.name, self.body(r), **kw)

    def _put(self, r: Resource, current: Any | None, wait: bool) -> None:
        try:
            current = self._scale_in(r, current)
        except AzureError as exc:
            self._emit(r.key, state="failed", error=exc.message, finished=time.monotonic())
            raise
        except Exception as exc:
            err = to_azure_error(exc, r.name)
            self._emit(r.key, state="failed", error=err.message, finished=time.monotonic())
            raise err from None
        if current is not None and self._converged(r, current):
            self._emit(r.key, state="exists", done=self.events[r.key].total)
            return
        self._emit(r.key, state="creating", started=time.monotonic())
        try:
            left_running = self._converge(r, current, wait)
        except AzureError as exc:
            self._emit(r.key, state="failed", error=exc.message, finished=time.monotonic())
            raise
        except Interrupted:
            raise
        except Exception as exc:
            err = to_azure_error(exc, r.name)
            self._emit(r.key, state="failed", error=err.message, finished=time.monotonic())
            raise err from None
        if left_running:
            self._emit(r.key, state="accepted")
            return
        self._emit(r.key, state="succeeded", done=self.events[r.key].total, finished=time.monotonic())

    def _converge(self, r: Resource, current: Any | None, wait: bool) -> bool:
        """PUT r, or follow the operation already running on it; True when left running (--no-wait)."""
        for _ in range(IN_PROGRESS_ATTEMPTS):
            state = (getattr(current, "provisioning_state", "") or "").lower() if current is not None else ""
            if state and state not in TERMINAL:
                # Still being created by an earlier, interrupted run: follow it instead of racing it.
                if not wait:
                    return True
                current = self._follow(r)
                if self._converged(r, current):
                    return False
            try:
                poller = self.begin_put(r, wait=wait)
            except Exception as exc:  # to_azure_error re-raises anything not from Azure
                err = to_azure_error(exc, r.name)
                if not isinstance(err, OperationInProgressError):
                    raise err from None
                # Azure refused the PUT (409) because an operation on the resource is still running
                # (a listing that lagged, or another client): follow that one, then PUT if still needed.
                if not wait:
                    return True
                current = self._follow(r)
                if self._converged(r, current):
                    return False
                continue
            if not wait:
                return True
            self._wait(poller, r)
            return False
        raise AzureError(f"{r.name}: Azure kept refusing the PUT while other operations were running on it",
                         code="OPERATION_IN_PROGRESS", remedy=IN_PROGRESS_REMEDY)

    def _wait(self, poller, r: Resource) -> None:
        """Wait in short slices so Ctrl-C and the timeout are noticed while Azure works."""
        while not poller.done():
            if self.stop.is_set() or self.session.cancelled.is_set():
                raise Interrupted()
            left = self._remaining()
            poller.wait(timeout=min(0.2, left) if left is not None else 0.2)
        poller.result()  # raises the operation's error, if it failed

    def _follow(self, r: Resource, interval: float = 5.0) -> Any | None:
        """Poll a resource another operation is working on until it reaches a terminal state; the
        resource as it then is, or None when that operation deleted it."""
        def between() -> None:
            if self.stop.is_set():
                raise Interrupted()
            self._remaining()

        current = until_settled(self.session, r.kind, self.resource_group, r.name, interval=interval,
                                api_version=r.api_version, between=between)
        if current is not None and (current.provisioning_state or "").lower() in ("failed", "canceled"):
            raise AzureError(f"{r.name} ended {current.provisioning_state}", code="PROVISIONING_FAILED",
                             remedy="run 'provision create' again to retry it")
        return current

    def deploy(self, *, wait: bool = True, listed: list[Any] | None = None, fresh_group: bool = False,
               current: dict[str, Any] | None = None, doomed: list[str] = ()) -> dict[str, Event]:
        """Create or converge every resource; the scale sets of a wave go in parallel.

        listed: the group's resources as list_group gave them (listed here when not given);
        fresh_group: the group was just created, so there is nothing to find in it;
        current: existing() already read them; doomed: this cluster's scale sets that are no longer
        in the plan, deleted first (the caller allowed it, as it allowed self.removals).
        """
        if fresh_group:
            listed = []
        if current is None:
            current = self.existing(list_group(self.session, self.resource_group) if listed is None else listed)
        if doomed:
            self._delete_scale_sets(list(doomed))
        waves = self.plan.waves()
        # A fixed pool of 16 made a cluster of more than 16 scale sets (1,600 nodes) take a wave's time
        # once per 16 of them; each worker only waits on Azure.
        pool = ThreadPoolExecutor(max_workers=self.max_workers or max(len(w) for w in waves))
        started: list = []
        previous_deadline, self.session.deadline = self.session.deadline, self._deadline
        try:
            for i, wave in enumerate(waves):
                last = i == len(waves) - 1
                # Later waves reference earlier ones, so only the last wave may be left running.
                futures = [pool.submit(self._put, r, current.get(r.key), wait or not last) for r in wave]
                started += futures
                errors = []
                for f in futures:
                    try:
                        result_of(f)
                    except AzureError as exc:
                        errors.append(exc)
                if errors:
                    raise errors[0]
        except KeyboardInterrupt:
            # Every wait of the workers ends now; Azure finishes what it accepted, a re-run follows it.
            self.stop.set()
            self.session.cancel()
            raise
        finally:
            self.session.deadline = previous_deadline
            pool.shutdown(wait=False, cancel_futures=True)
            if self.stop.is_set():
                # Only the futures that ran: one cancelled before it started is never 'done' to
                # concurrent.futures.wait, which would then sit out the whole grace (seen: 2 s).
                wait_for([f for f in started if not f.cancelled()], timeout=INTERRUPT_GRACE)
        return self.events

    def _delete_scale_sets(self, names: list[str]) -> None:
        vmss = VMSS
        for name in names:
            self.events[f"delete:{name}"] = Event(f"delete:{name}", name, vmss.stage, "deleting",
                                                  started=time.monotonic(), has_instances=vmss.has_instances)
            self.on_event(self.events[f"delete:{name}"])
        try:
            pollers = [(name, vmss.begin_delete(self.session, self.resource_group, name)) for name in names]
            for name, poller in pollers:
                poller.result()
                self._emit(f"delete:{name}", state="deleted", finished=time.monotonic())
        except Exception as exc:
            raise to_azure_error(exc, "deleting scale sets no longer in the plan") from None


# Subnet properties Azure computes or links from elsewhere: left out of a PUT that keeps a subnet.
SUBNET_READ_ONLY = frozenset({"provisioningState", "ipConfigurations", "ipConfigurationProfiles", "purpose",
                              "resourceNavigationLinks", "serviceAssociationLinks", "privateEndpoints"})


def foreign_children(r: Resource, live: dict[str, Any], key: str) -> list[dict[str, Any]]:
    """The live resource's inline children under properties.<key> (a VNet's subnets, an NSG's security
    rules) that the plan does not have, as a PUT must carry them to keep them."""
    planned = {(s.get("name") or "").lower() for s in (r.body.get("properties") or {}).get(key) or []}
    out = []
    for child in (live.get("properties") or {}).get(key) or []:
        if (child.get("name") or "").lower() in planned:
            continue
        props = {k: v for k, v in (child.get("properties") or {}).items() if k not in SUBNET_READ_ONLY}
        out.append({"name": child["name"], "properties": props})
    return out


def foreign_subnets(r: Resource, live: dict[str, Any]) -> list[dict[str, Any]]:
    return foreign_children(r, live, "subnets")
