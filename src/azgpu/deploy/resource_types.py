"""Which SDK client and calls serve each ARM resource type azgpu manages: one row per type.

The deployer, `status`, `destroy` and the capacity fallback ask this table how to create, read,
delete or list a resource; nothing else branches on the type. A new resource type (NAT gateway,
public IP, placement group ...) is one row here, a route module in the fake, and its place in the
plan. `teardown` orders deletion: a resource goes before the ones it references (scale sets hold
the NICs that use the subnet and the NSG; a subnet holds its NAT gateway, which holds its public
IP), so lower numbers are deleted first and equal numbers in parallel.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


class Done:
    """What a synchronous create or delete returns, shaped like the SDK's LROPoller."""

    def __init__(self, value: Any = None):
        self._value = value

    def done(self) -> bool:
        return True

    def wait(self, timeout: float | None = None) -> None:
        return None

    def result(self, timeout: float | None = None) -> Any:
        return self._value


@dataclass(frozen=True)
class ResourceType:
    type: str  # the ARM type, e.g. Microsoft.Network/virtualNetworks
    label: str  # how messages name it
    client: str  # the Session attribute holding the SDK client: compute | network | resources
    operations: str  # the operations group on that client
    teardown: int
    create_method: str = "begin_create_or_update"
    delete_method: str = "begin_delete"
    list_method: str = "list"
    long_running: bool = True  # create and delete answer with a poller
    # Top-level body keys Azure fixes when it creates the resource and that azgpu may leave as they are:
    # an existing resource keeps its own value (a PUT that changes them is refused), and what-if shows none.
    kept: tuple[str, ...] = ()
    delete_instances_method: str | None = None  # scale sets: delete named instances (a poller)

    def _ops(self, session) -> Any:
        return getattr(getattr(session, self.client), self.operations)

    def get(self, session, resource_group: str, name: str, **kwargs: Any) -> Any:
        return self._ops(session).get(resource_group, name, **kwargs)

    def begin_create(self, session, resource_group: str, name: str, body: dict, **kwargs: Any) -> Any:
        """A poller (or Done) for the PUT; kwargs go to the SDK (api_version, polling ...)."""
        call = getattr(self._ops(session), self.create_method)
        if self.long_running:
            return call(resource_group, name, body, **kwargs)
        kwargs.pop("polling", None)
        return Done(call(resource_group, name, body, **kwargs))

    def begin_delete(self, session, resource_group: str, name: str) -> Any:
        call = getattr(self._ops(session), self.delete_method)
        return call(resource_group, name) if self.long_running else Done(call(resource_group, name))

    def begin_delete_instances(self, session, resource_group: str, name: str, instance_ids: list[str]) -> Any:
        """Delete these instances (and lower the capacity by as many): VirtualMachineScaleSets_DeleteInstances."""
        if self.delete_instances_method is None:
            raise KeyError(f"{self.type} has no instances to delete")
        call = getattr(self._ops(session), self.delete_instances_method)
        return call(resource_group, name, {"instanceIds": list(instance_ids)})

    def list(self, session, resource_group: str) -> list[Any]:
        return list(getattr(self._ops(session), self.list_method)(resource_group))


VMSS = ResourceType("Microsoft.Compute/virtualMachineScaleSets", "scale set", "compute", "virtual_machine_scale_sets",
                    teardown=0, delete_instances_method="begin_delete_instances")
NSG = ResourceType("Microsoft.Network/networkSecurityGroups", "network security group", "network",
                   "network_security_groups", teardown=1)
VNET = ResourceType("Microsoft.Network/virtualNetworks", "virtual network", "network", "virtual_networks", teardown=1)
# Azure refuses to delete a NAT gateway a subnet still uses, and a public IP a NAT gateway still holds.
# Their zones are fixed at creation (D-nat-zones); a NAT gateway serves VMs of every zone, so after a zone
# fallback the one already made stays where it is rather than being refused or re-created.
NAT_GATEWAY = ResourceType("Microsoft.Network/natGateways", "NAT gateway", "network", "nat_gateways", teardown=2,
                           kept=("zones",))
PUBLIC_IP = ResourceType("Microsoft.Network/publicIPAddresses", "public IP address", "network", "public_ip_addresses",
                         teardown=3, kept=("zones",))

# Synchronous: create_or_update and delete answer at once (ProximityPlacementGroups, compute api 2026-04-01).
PPG = ResourceType("Microsoft.Compute/proximityPlacementGroups", "proximity placement group", "compute",
                   "proximity_placement_groups", teardown=1, create_method="create_or_update", delete_method="delete",
                   list_method="list_by_resource_group", long_running=False)

TYPES: dict[str, ResourceType] = {t.type.lower(): t for t in (VMSS, NSG, VNET, NAT_GATEWAY, PUBLIC_IP, PPG)}


def of(type_: str) -> ResourceType:
    """The row for an ARM type (case-insensitive, as ARM compares types)."""
    try:
        return TYPES[type_.lower()]
    except KeyError:
        raise KeyError(f"azgpu manages no resource type {type_!r}: add a row to deploy/resource_types.py") from None


def managed(type_: str | None) -> bool:
    return (type_ or "").lower() in TYPES


def teardown_waves(items: list[Any]) -> list[list[Any]]:
    """Listed resources (with .type) grouped by teardown order: each wave can go in parallel."""
    waves: dict[int, list[Any]] = {}
    for item in items:
        waves.setdefault(of(item.type).teardown, []).append(item)
    return [waves[k] for k in sorted(waves)]
