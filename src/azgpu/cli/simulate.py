"""`provision simulate ...`: shape the simulated subscription that --simulate runs against.

The same knobs as azgpu.testing.FakeAzure in Python (set_quota, set_sku, set_capacity, reset), on
the state file --simulate uses (--simulate-state or AZGPU_SIMULATE_STATE to move it). Other
families of commands may add subcommands to the `simulate` group (see `group`).
"""

from __future__ import annotations

import sys

import click

from ..errors import InputError
from ..resource_types import RESOURCE_GROUP
from .options import common, confirm, emit

STATE_OPTION = click.option("--simulate-state", "state", default=None,
                            help="File holding the simulated cloud (default: user state dir).")


def _azure(state):
    from ..deploy.simulate import simulated_azure

    return simulated_azure(state)


def _location(location: str) -> str:
    from ..naming import location_name

    return location_name(location)


def group(cli: click.Group) -> click.Group:
    """The `simulate` group (made here once), for any module that adds a subcommand to it."""
    found = cli.commands.get("simulate")
    if isinstance(found, click.Group):
        return found

    @cli.group("simulate")
    def simulate():
        """Shape the simulated subscription behind --simulate: quota, SKU restrictions, capacity."""

    return simulate


def register(cli: click.Group) -> None:
    simulate = group(cli)

    @simulate.group("quota")
    def quota():
        """vCPU quota as the Usage API reports it (az vm list-usage)."""

    @quota.command("list")
    @click.option("-l", "--location", required=True, help="Azure region, e.g. eastus.")
    @STATE_OPTION
    @common
    def quota_list(obj, location, state):
        """The simulated usages of a location: name, usage, limit."""
        emit([{"name": u["name"]["value"], "localized_name": u["name"]["localizedValue"], "usage": u["currentValue"],
               "limit": u["limit"]} for u in _azure(state).usages(_location(location))], obj)

    @quota.command("set")
    @click.option("-l", "--location", required=True, help="Azure region, e.g. eastus.")
    @click.option("--name", "name", required=True,
                  help="Usage name or its localized name, e.g. 'Standard NDASv4_A100 Family', cores, lowPriorityCores.")
    @click.option("--limit", type=click.IntRange(min=0), default=None, help="New limit (vCPUs).")
    @click.option("--usage", type=click.IntRange(min=0), default=None,
                  help="vCPUs in use outside the simulated scale sets.")
    @STATE_OPTION
    @common
    def quota_set(obj, location, name, limit, usage, state):
        """Set a usage entry's limit and/or usage, as FakeAzure.set_quota does."""
        if limit is None and usage is None:
            raise InputError("nothing to set", code="MISSING_ARGUMENT",
                             remedy="pass --limit and/or --usage, e.g. --limit 192")
        azure = _azure(state)
        loc = _location(location)
        entry = _usage(azure, loc, name)
        if entry is None:
            raise InputError(f"no usage '{name}' in {loc}", code="UNKNOWN_QUOTA",
                             remedy=f"pick a name from 'provision simulate quota list -l {loc}'")
        azure.set_quota(loc, entry["name"]["value"], limit=limit, usage=usage)
        entry = _usage(azure, loc, entry["name"]["value"])
        emit({"location": loc, "name": entry["name"]["value"], "usage": entry["currentValue"], "limit": entry["limit"]},
             obj)

    @simulate.group("sku")
    def sku():
        """Resource SKU restrictions, as the Resource SKUs API reports them (az vm list-skus)."""

    @sku.command("restrict")
    @click.option("-l", "--location", required=True, help="Azure region, e.g. eastus.")
    @click.option("--size", required=True, help="VM size, e.g. Standard_ND96asr_v4.")
    @click.option("--zone", default=None, help="Restrict one zone only (a Zone restriction).")
    @click.option("--reason", type=click.Choice(["NotAvailableForSubscription", "QuotaId"]),
                  default="NotAvailableForSubscription", show_default=True, help="The restriction's reasonCode.")
    @STATE_OPTION
    @common
    def sku_restrict(obj, location, size, zone, reason, state):
        """Restrict a size in a location (or one of its zones) for this subscription."""
        restriction = {"type": "Zone", "zones": [zone], "reasonCode": reason} if zone else \
            {"type": "Location", "reasonCode": reason}
        loc = _location(location)
        _azure(state).set_sku(loc, _size(size), restrictions=[restriction])
        emit({"location": loc, "size": _size(size), "restricted": f"zone {zone}" if zone else "location",
              "reason": reason}, obj)

    @sku.command("unrestrict")
    @click.option("-l", "--location", required=True, help="Azure region, e.g. eastus.")
    @click.option("--size", required=True, help="VM size, e.g. Standard_ND96asr_v4.")
    @STATE_OPTION
    @common
    def sku_unrestrict(obj, location, size, state):
        """Lift every restriction of a size in a location."""
        loc = _location(location)
        _azure(state).set_sku(loc, _size(size), restrictions=[])
        emit({"location": loc, "size": _size(size), "restricted": None}, obj)

    @simulate.group("capacity")
    def capacity():
        """How many VMs of a size Azure can still place; beyond it scale sets fail with AllocationFailed."""

    @capacity.command("set")
    @click.option("-l", "--location", required=True, help="Azure region, e.g. eastus.")
    @click.option("--size", required=True, help="VM size, e.g. Standard_ND96asr_v4.")
    @click.option("--zone", default=None, help="Only this zone (ZonalAllocationFailed beyond it).")
    @click.option("--max-vms", type=click.IntRange(min=0), default=None,
                  help="Most VMs of the size in the location (or zone), all scale sets together.")
    @click.option("--unlimited", is_flag=True, help="Lift the limit.")
    @STATE_OPTION
    @common
    def capacity_set(obj, location, size, zone, max_vms, unlimited, state):
        """Limit the simulated capacity of a size, as FakeAzure.set_capacity does."""
        if (max_vms is None) == (not unlimited):
            raise InputError("pass either --max-vms N or --unlimited", code="MISSING_ARGUMENT",
                             remedy="e.g. --max-vms 0 to make every new scale "
                                    "set of the size fail with AllocationFailed")
        loc = _location(location)
        _azure(state).set_capacity(loc, _size(size), None if unlimited else max_vms, zone=zone)
        emit({"location": loc, "size": _size(size), "zone": zone, "max_vms": None if unlimited else max_vms}, obj)

    @simulate.command("show")
    @STATE_OPTION
    @common
    def show(obj, state):
        """What the simulated subscription holds and what was changed in it."""
        from ..deploy.simulate import SIMULATED_QUOTA, state_file

        azure = _azure(state)
        groups = azure.resources(type=RESOURCE_GROUP.type)
        emit({"state_file": str(state_file(state)),
              "resource_groups": sorted(g["name"] for g in groups),
              "resources": len([r for r in azure.resources() if r["type"] != RESOURCE_GROUP.type]),
              "default_quota": SIMULATED_QUOTA,
              "sku_changes": azure.sku_overrides(),
              "capacity_limits": azure.capacity_limits()}, obj)

    @simulate.group("policy")
    def policy():
        """Azure Policy assignments with a Deny effect, as template validation and every PUT meet them."""

    @policy.command("deny-size")
    @click.argument("name")
    @click.option("--size", "sizes", multiple=True, required=True, help="A VM size to deny (repeat for more).")
    @click.option("--display-name", default=None, help="The assignment's display name (default: NAME).")
    @click.option("-g", "--resource-group", default=None, help="Assign it to this resource group only.")
    @STATE_OPTION
    @common
    def policy_deny_size(obj, name, sizes, display_name, resource_group, state):
        """Deny scale sets of these sizes (like 'Allowed virtual machine size SKUs' without them)."""
        assignment = _azure(state).add_policy_assignment(name, denied_sizes=list(sizes), display_name=display_name,
                                                         resource_group=resource_group)
        emit({"policy_assignment": assignment, "denied_sizes": list(sizes)}, obj)

    @simulate.command("reset")
    @click.option("-y", "--yes", is_flag=True, help="Do not ask for confirmation.")
    @STATE_OPTION
    @common
    def reset(obj, yes, state):
        """Forget every simulated resource, quota, restriction and capacity change."""
        from ..deploy.simulate import state_file

        if not yes and not sys.stdin.isatty():
            raise InputError("reset needs confirmation and there is no terminal to ask", code="CONFIRMATION_REQUIRED",
                             remedy="add --yes to reset without asking")
        if not yes and not confirm(f"Forget everything in {state_file(state)}?"):
            from .options import DECLINED, log

            log(DECLINED)
            return
        _azure(state).reset()
        emit({"state_file": str(state_file(state)), "reset": True}, obj)


def _norm(name: str) -> str:
    return name.replace(" ", "").lower()


def _usage(azure, location: str, name: str) -> dict | None:
    """The usage entry named by its value or localized name ("... vCPUs" optional), case and spaces ignored."""
    wanted = _norm(name)
    for u in azure.usages(location):
        label = u["name"]["localizedValue"]
        if wanted in (_norm(u["name"]["value"]), _norm(label), _norm(label.removesuffix(" vCPUs"))):
            return u
    return None


def _size(size: str) -> str:
    """A size as given, or its alias (ND96asr_v4, NG8 ...) resolved the way requests resolve it."""
    from ..profiles import find_size

    try:
        return find_size(size)[1].name
    except InputError:
        return size if size.lower().startswith(("standard_", "basic_")) else f"Standard_{size}"
