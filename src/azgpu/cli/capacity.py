"""quota request / quota status, capacity: quota and capacity before anything is created.

The Azure SDK loads only inside the commands; `provision simulate quota outcome` shapes how the
simulated Microsoft.Quota answers.
"""

from __future__ import annotations

import math
import re
import sys

import click

from ..errors import Finding, InputError, ValidationFailed
from ..naming import location_name
from ..output import terminal_text
from ..resource_types import CAPACITY_RESERVATION_GROUP, QUOTA
from . import options
from .options import (
    ListOption,
    azure_options,
    common,
    emit,
    log,
    make_request,
    print_findings,
    request_options,
    validated_with,
)

# A quota request's id as Microsoft.Quota names it (a GUID in the REST spec's examples): it goes into the path.
REQUEST_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9-]{0,127}")
MAX_QUOTA_TIMEOUT = 86400.0  # a day: Microsoft.Quota settles a request in minutes, or hands it to support


def _timeout_findings(timeout: float) -> list[Finding]:
    """quota request --timeout: finite seconds from 0 (read the state once) to a day."""
    if isinstance(timeout, (int, float)) and math.isfinite(timeout) and 0 <= timeout <= MAX_QUOTA_TIMEOUT:
        return []
    return [Finding(code="INVALID_TIMEOUT", message=f"--timeout must be 0 to {MAX_QUOTA_TIMEOUT:g} seconds, not "
                    f"{timeout:g}", remedy="pass e.g. --timeout 600, or 0 to read each request's state once",
                    field="timeout")]


def _need_location(request) -> None:
    if not request.location:
        raise InputError("no location given", code="MISSING_LOCATION", remedy="pass -l/--location, e.g. -l eastus")


def _shortfall_text(short) -> str:
    lines = [f"  {s.location}: {s.quota} usage {s.usage} + needed {s.needed} > limit {s.limit}: "
             f"request {s.new_limit}" for s in short]
    return f"Quota increase requests to file ({QUOTA.namespace}):\n" + "\n".join(lines)


def asker(yes: bool):
    """confirm(shortfalls): --yes, or a yes at a terminal; without a terminal, refuse (exit 2)."""
    def ask(short) -> bool:
        click.echo(terminal_text(_shortfall_text(short), lines=True), err=True)
        if yes:
            return True
        if not sys.stdin.isatty():
            raise InputError("filing a quota request needs confirmation and there is no terminal to ask",
                             code="CONFIRMATION_REQUIRED", remedy="add --yes to file the requests without asking")
        return options.confirm("File these requests?")

    return ask


def register(cli: click.Group) -> None:
    @cli.group("quota")
    def quota():
        """vCPU quota increases through the Microsoft.Quota API, from the preflight's own arithmetic."""

    @quota.command("request")
    @request_options
    @azure_options
    @click.option("--fallback-locations", cls=ListOption,
                  help="Also request what each of these locations lacks (as create would try them).")
    @click.option("-y", "--yes", is_flag=True, help="File without asking (automation).")
    @click.option("--timeout", type=float, default=0.0, show_default=True,
                  help="Follow each request this many seconds until it is final (0: read its state once).")
    @click.option("--capacity-reservation-group", default=None, metavar="ID",
                  help="The cluster deploys into this group: the VMs it holds need no more quota (as create counts).")
    @click.option("--accept-reservation-infiniband-risk", is_flag=True, default=None,
                  help="As create: an InfiniBand size in --capacity-reservation-group.")
    @common
    def request_cmd(obj, subscription, simulate, simulate_latency, simulate_state, fallback_locations, yes, timeout,
                    **values):
        """File the quota increases the cluster needs (family, regional total or spot; per location).

        Shows each request's id and state; 'provision quota status' follows them. A request Azure does not
        approve automatically (GPU families often go to a support case) ends with its id and Learn's
        remedy, exit 1. Nothing is written but the requests, and nothing without a yes (--yes).
        """
        from ..deploy.quota_requests import request_increases
        from ..spec import check_fallbacks

        request = make_request(values)
        if request.name is None and request.resource_group is None:
            # The name only picks the cluster whose scale sets in -g already hold part of the quota (a re-run asks
            # for what it adds); without -g nothing is held and a request is per subscription and location, so
            # -n would be a word to make up: any valid name stands in (it reaches neither Azure nor the output).
            request = request.with_changes(name="quota")
        _need_location(request)
        validated_with(request, "quota", [f for f in check_fallbacks((), fallback_locations) if f.is_error]
                       + _timeout_findings(timeout))
        with options.session_for(subscription, simulate, simulate_latency, simulate_state) as session:
            try:
                result = request_increases(session, request, fallback_locations=list(fallback_locations),
                                           confirm=asker(yes), timeout=timeout, on_notice=log)
            except Exception as exc:
                if getattr(exc, "result", None) is not None:
                    emit(exc.result, obj)
                raise
        if not result["shortfall"]:
            log("no quota increase needed: every quota has room for the cluster")
        elif result.get("declined"):
            log("nothing filed")
        emit(result, obj)

    @quota.command("status")
    @click.option("-l", "--location", required=True, help="Azure region of the request, e.g. eastus.")
    @click.option("--id", "request_id", default=None, help="The request's id (from 'provision quota request'); "
                                                            "without it, every request of the location.")
    @azure_options
    @common
    def status_cmd(obj, location, request_id, subscription, simulate, simulate_latency, simulate_state):
        """The state of quota requests: Accepted, InProgress, Succeeded, Failed (exit 1 for a failed --id)."""
        from ..deploy import quota_requests as qr
        from ..spec import location_findings

        # Both go into the request's path: checked before anything is sent.
        bad = location_findings(location) + options.number_findings(latency=simulate_latency)
        if request_id is not None and not REQUEST_ID.fullmatch(request_id):
            bad.append(Finding(code="INVALID_QUOTA_REQUEST_ID",
                               message=f"--id {request_id!r} is not a quota request id",
                               remedy="pass the id 'provision quota request' printed (letters, digits and '-')",
                               field="request_id"))
        if bad:
            raise ValidationFailed(bad)
        with options.session_for(subscription, simulate, simulate_latency, simulate_state) as session:
            if request_id is None:
                emit([r.as_dict() for r in qr.listed(session, location)], obj)
                return
            found = qr.read(session, location, request_id)
        emit(found.as_dict(), obj)
        if qr.not_approved(found.state):
            raise qr.escalation_error([found])

    @cli.command("capacity")
    @click.option("--profile", default=None, help="Profile whose default size is checked.")
    @click.option("--size", default=None, help="VM size (instead of the profile's default).")
    @click.option("--nodes", type=click.IntRange(min=1), required=True, help="Nodes the cluster needs.")
    @click.option("-l", "--location", required=True, help="Azure region, e.g. eastus.")
    @click.option("--zones", cls=ListOption, help="Zones to check in the location: --zones 1 2 3.")
    @click.option("--fallback-locations", cls=ListOption, help="More locations to check: --fallback-locations westus3.")
    @click.option("--spot", is_flag=True, help="For spot VMs (the regional spot quota).")
    @click.option("--capacity-reservation-group", default=None, metavar="ID",
                  help="Also check this capacity reservation group's room for the size.")
    @azure_options
    @common
    def capacity_cmd(obj, profile, size, nodes, location, zones, fallback_locations, spot, capacity_reservation_group,
                     subscription, simulate, simulate_latency, simulate_state):
        """One report before anything is created: SKU restrictions per location and zone, quota headroom
        (family, regional, spot) and reservation headroom, each line with its remedy. Reads only.

        Exit 0 when every check of -l passes, 1 when one is short or blocked (the table says what to do); the
        --fallback-locations are reported apart and do not change the exit status.
        """
        from ..capacity import parse_group_id
        from ..deploy.capacity_report import OK, capacity_for
        from ..errors import AzureError
        from ..spec import check_fallbacks, location_findings

        vm = _size_of(profile, size)
        # A location Azure does not have is bad input, not a capacity that is "blocked".
        bad = location_findings(location) + check_fallbacks((), fallback_locations) + \
            options.number_findings(latency=simulate_latency)
        if bad:
            raise ValidationFailed(bad)
        if capacity_reservation_group and parse_group_id(capacity_reservation_group) is None:
            raise InputError(f"--capacity-reservation-group '{capacity_reservation_group}' is not a capacity "
                             "reservation group resource ID", code="INVALID_CAPACITY_RESERVATION_GROUP",
                             remedy=f"pass {CAPACITY_RESERVATION_GROUP.example_id('NAME')}")
        locations = list(dict.fromkeys(location_name(x) for x in [location, *fallback_locations]))
        with options.session_for(subscription, simulate, simulate_latency, simulate_state) as session:
            result = capacity_for(session, vm=vm, nodes=nodes, locations=locations,
                                  zones=[str(z) for z in zones], spot=spot, group_id=capacity_reservation_group)
        emit(result, obj, table=lambda r: r["checks"])
        apart = [f"{f['location']}: {f['verdict']}" for f in result["fallbacks"] if f["verdict"] != OK]
        if apart:
            log(f"fallback location(s) not ready, which create would try only on a capacity error: {', '.join(apart)}")
        if result["verdict"] != OK:
            raise AzureError(f"capacity report: {result['location']} is {result['verdict']} (see the lines that are "
                             "not ok)", code="CAPACITY_NOT_READY",
                             remedy="follow each line's remedy, then run the report again")

    _register_reserve(cli)
    _register_simulate(cli)


def _size_of(profile: str | None, size: str | None):
    return _profile_and_size(profile, size)[1]


def _profile_and_size(profile: str | None, size: str | None):
    from ..profiles import find_size, load_profile

    if size:
        return find_size(size)
    if profile:
        p = load_profile(profile)
        return p, p.size(p.default_size)
    raise InputError("no size given", code="MISSING_ARGUMENT",
                     remedy="pass --profile or --size, e.g. --profile nd-a100-v4 or --size Standard_ND96asr_v4")


def _group_names(resource_group: str) -> list[Finding]:
    """-g of reserve and release, checked as create checks it before it goes into a request URL."""
    from .. import naming

    problem = naming.check("resource_group", resource_group)
    return [Finding(code="INVALID_RESOURCE_GROUP", message=problem, remedy="check -g/--resource-group",
                    field="resource_group")] if problem else []


def _reserve_cost(vm, location: str, count: int, currency: str, schedule, simulated: bool) -> tuple[dict, str, str]:
    """The reservation's price as azgpu's pricing gives it, and how it bills: a Targeted one per hour until it is
    deleted (D-crg); a Block one for its whole window, committed once allocated, since it cannot be deleted before
    its end (S-rest-crg)."""
    from ..pricing import estimate

    cost = estimate(vm.name, location, count, currency=currency, simulated=simulated).as_dict()
    cost.pop("scale_sets", None)
    hourly = f"{cost['hourly']} {cost['currency']}/hour" if cost.get("hourly") is not None else "an unknown price"
    if schedule is None:
        return (cost, "pay-as-you-go rate for every reserved VM, used or not, until deleted",
                f"at {hourly}, billed until deleted")
    hours = schedule.days * 24
    if cost.get("hourly") is not None:
        cost["window"] = {"start": schedule.start.isoformat(), "end": schedule.end.isoformat(), "days": schedule.days,
                          "hours": hours, "total": round(cost["hourly"] * hours, 2)}
        total = f"{cost['window']['total']} {cost['currency']}"
    else:
        total = "an unknown price"
    billing = (f"the whole window, {schedule.days} day(s) x 24 h at the pay-as-you-go rate of every reserved VM: "
               "once allocated a Block reservation cannot be deleted before its end, so the window is paid whether "
               "used or not")
    return cost, billing, f"for {schedule.start} to {schedule.end} ({schedule.days} days) at {hourly}: {total} in all"


def _register_reserve(cli: click.Group) -> None:
    @cli.command("reserve")
    @click.option("-g", "--resource-group", required=True, help="Resource group of the reservation group.")
    @click.option("--group", required=True,
                  help="Capacity reservation group: created when absent, kept when azgpu made it.")
    @click.option("--name", default=None,
                  help="Reservation name [the one of the size and zone in the group, else the size's name, -zN].")
    @click.option("-l", "--location", required=True, help="Azure region, e.g. eastus.")
    @click.option("--profile", default=None, help="Reserve the profile's default size.")
    @click.option("--size", default=None, help="VM size to reserve, e.g. Standard_ND96isr_H100_v5.")
    @click.option("--count", type=int, required=True, help="VMs to reserve (Block: 1, 2, 4, 8, 16, 32 or 64).")
    @click.option("--zone", default=None, help="Reserve in this availability zone (the scale sets must use it too).")
    @click.option("--type", "reservation_type", default="Targeted", show_default=True,
                  help="Targeted, or Block where the size's SupportedCapacityReservationTypes lists it.")
    @click.option("--start", default=None, metavar="YYYY-MM-DD|+N",
                  help="Block: the first day (UTC), today (before 11:30 UTC) or within 56 days; +N: N days from today.")
    @click.option("--days", type=int, default=None, help="Block: a window of 1 to 14 whole days.")
    @click.option("--weeks", type=int, default=None, help="Block: a window of 3 to 26 whole weeks.")
    @click.option("--allow-unowned", is_flag=True,
                  help="Add to a group, or change a reservation, that azgpu did not create.")
    @click.option("--dry-run", is_flag=True, help="Check and price the reservation; create nothing.")
    @click.option("--currency", default="USD", show_default=True, help="Currency of the price shown.")
    @click.option("-y", "--yes", is_flag=True, help="Create without asking (a reservation bills whether used or not).")
    @azure_options
    @common
    def reserve_cmd(obj, resource_group, group, name, location, profile, size, count, zone, reservation_type, start,
                    days, weeks, allow_unowned, dry_run, currency, yes, subscription, simulate, simulate_latency,
                    simulate_state):
        """Reserve GPU capacity: a capacity reservation group and one reservation in it, checked first.

        Targeted: billed at the pay-as-you-go rate from creation until deleted, used or not. Block (--start
        with --days or --weeks): the whole window, and it cannot be deleted once allocated before its end. The
        price is shown and a yes asked for (--yes for automation). Use it with 'provision create
        --capacity-reservation-group ID'; 'provision release' deletes what azgpu created. An existing reservation
        of the size and zone is changed, never below the VMs it holds, and only if azgpu created it (or
        --allow-unowned).
        """
        from ..capacity import reserve_findings, schedule_findings
        from ..pricing import check_currency

        check_currency(currency)
        prof, vm = _profile_and_size(profile, size)
        rack = prof.rack_size
        bad = reserve_findings(reservation_type=reservation_type, count=count, name=name, group=group, start=start,
                               days=days, weeks=weeks, size=vm.name, rack=rack)
        if zone is not None and zone not in ("1", "2", "3"):
            bad.append(Finding(code="INVALID_ZONE", message=f"--zone must be 1, 2 or 3, not {zone!r}",
                               remedy="pass --zone 1, or omit it", field="zone"))
        from ..spec import location_findings

        # -l goes into the reservation group's body and the SKU listing's filter: a region Azure has, checked
        # before any request or state file (a typo was read as "not offered" after a session started).
        bad += _group_names(resource_group) + location_findings(location)
        if any(f.is_error for f in bad):
            raise ValidationFailed(bad)
        print_findings(bad, verbose=obj["verbose"])
        schedule = schedule_findings(reservation_type, start=start, days=days, weeks=weeks)[0]
        from ..deploy import reservations

        with options.session_for(subscription, simulate, simulate_latency, simulate_state) as session:
            asked = reservations.ReservePlan(resource_group=resource_group, group=group, name=name or "",
                                             location=location, size=vm.name, count=count, zone=zone,
                                             reservation_type=reservation_type, schedule=schedule)
            plan = reservations.reserve_check(session, asked, allow_unowned=allow_unowned)
            if plan.errors:
                raise ValidationFailed(plan.findings)
            print_findings(plan.findings, verbose=obj["verbose"])
            cost, billing, priced = _reserve_cost(vm, location, count, currency, schedule,
                                                  bool(getattr(session, "simulated", False)))
            planned = {**plan.as_dict(), "cost": cost, "billing": billing}
            if dry_run:
                emit({**planned, "dry_run": True}, obj)
                return
            if plan.unchanged:
                log(f"reservation '{plan.name}' already holds {count} {vm.name}: nothing to change")
            elif not yes:
                what = (f"Send again reservation {plan.name} ({plan.existing.state}) for {count} {vm.name}"
                        if plan.existing and plan.existing.failed else
                        f"Change reservation {plan.name} from {plan.existing.reserved} to {count} {vm.name}"
                        if plan.existing else f"Reserve {count} {vm.name} in {location}")
                if not sys.stdin.isatty():
                    raise InputError("a reservation bills from its creation and there is no terminal to ask",
                                     code="CONFIRMATION_REQUIRED", remedy="add --yes to reserve without asking")
                if not options.confirm(f"{what} {priced}?"):
                    log("nothing reserved")
                    return
            result = reservations.create_reservation(session, plan)
        emit({**planned, **result}, obj)

    @cli.command("release")
    @click.option("-g", "--resource-group", required=True, help="Resource group of the reservation group.")
    @click.option("--group", required=True, help="The capacity reservation group azgpu created.")
    @click.option("-y", "--yes", is_flag=True, help="Delete without asking.")
    @azure_options
    @common
    def release_cmd(obj, resource_group, group, yes, subscription, simulate, simulate_latency, simulate_state):
        """Delete the reservations azgpu created in a group (tagged managed-by: azgpu), and the group when azgpu
        created it and nothing else is left; what is left is named. A Block reservation is refused before its end."""
        from ..capacity import reserve_findings
        from ..deploy import reservations

        # -g and --group go into request URLs: checked first (a '/' would address another resource).
        bad = _group_names(resource_group) + [f for f in reserve_findings(reservation_type="Targeted", count=1,
                                                                          name=None, group=group) if f.is_error]
        if bad:
            raise ValidationFailed(bad)
        if not yes and not sys.stdin.isatty():
            raise InputError("release needs confirmation and there is no terminal to ask", code="CONFIRMATION_REQUIRED",
                             remedy="add --yes to delete without asking")

        def ask(names) -> bool:
            return yes or options.confirm(f"Delete {', '.join(names) or 'nothing'} (group {group})?")

        with options.session_for(subscription, simulate, simulate_latency, simulate_state) as session:
            result = reservations.delete_reservations(session, resource_group, group, confirm=ask)
        for left in result.get("left", []):
            log(f"left: {left.get('reservation') or 'group ' + left.get('group', '')} ({left['why']})")
        emit(result, obj)


def _register_simulate(cli: click.Group) -> None:
    """`provision simulate quota outcome` and `simulate sku capability`, beside the simulate group's own."""
    cli.load("simulate")
    sim_quota = cli.commands["simulate"].commands["quota"]
    sim_sku = cli.commands["simulate"].commands["sku"]

    @sim_sku.command("capability")
    @click.option("-l", "--location", required=True, help="Azure region, e.g. eastus.")
    @click.option("--size", required=True, help="VM size, e.g. Standard_ND96isr_H100_v5.")
    @click.option("--name", "name", required=True,
                  help="Capability name, e.g. CapacityReservationSupported, SupportedCapacityReservationTypes.")
    @click.option("--value", required=True,
                  help="Its value as the Resource SKUs API writes it, e.g. True, Targeted,Block.")
    @click.option("--simulate-state", "state", default=None, help="File holding the simulated cloud.")
    @common
    def capability(obj, location, size, name, value, state):
        """Set one Resource SKU capability of a size in a location."""
        from ..deploy.simulate import simulated_azure
        from .simulate import _size

        loc = location_name(location)
        simulated_azure(state).set_sku(loc, _size(size), **{name: value})
        emit({"location": loc, "size": _size(size), "capability": name, "value": value}, obj)

    @sim_quota.command("outcome")
    @click.option("-l", "--location", required=True, help="Azure region, e.g. eastus.")
    @click.option("--name", "name", required=True, help="Usage name, e.g. standardNDASv4_A100Family, cores.")
    @click.option("--outcome", type=click.Choice(["approve", "escalate", "invalid"]), required=True,
                  help="approve: the request succeeds and the limit rises (a family's raises the regional total by "
                       "as much); escalate: it ends Failed with ContactSupport, as GPU families often do; invalid: it "
                       "ends Invalid.")
    @click.option("--simulate-state", "state", default=None, help="File holding the simulated cloud.")
    @common
    def outcome(obj, location, name, outcome, state):
        """What the simulated Microsoft.Quota does with the next increase requests for a usage."""
        from ..deploy.simulate import simulated_azure

        azure = simulated_azure(state)
        loc = location_name(location)
        azure.set_quota_outcome(loc, name, outcome)
        emit({"location": loc, "name": name, "outcome": outcome}, obj)


def quota_before_create(session, request, *, fallback_locations, yes: bool) -> None:
    """create --request-quota: file what the preflight finds short, then let create go on only when every
    request succeeded (a pending one stops here with its id; a failed one with Learn's remedy, exit 1)."""
    from ..deploy.quota_requests import PENDING, request_increases
    from ..errors import AzureError

    result = request_increases(session, request, fallback_locations=list(fallback_locations), confirm=asker(yes),
                               on_notice=log)
    pending = [r for r in result["requests"] if r["state"] in PENDING]
    if pending:
        ids = ", ".join(f"{r['id']} ({r['quota']} in {r['location']}: {r['state']})" for r in pending)
        raise AzureError(f"quota requests not final yet: {ids}", code="QUOTA_REQUEST_PENDING",
                         remedy=f"follow them with 'provision quota status -l {pending[0]['location']} "
                                f"--id {pending[0]['id']}', then run create again")
