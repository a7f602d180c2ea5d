"""Every Azure resource type azgpu names, one row per type: the only place an ARM type or its api-version is written.

The first section holds the types a plan deploys. The plan builds its resources from these rows,
the ARM and Bicep renderers print their type and api-version, and the deployer, what-if, `status`,
`destroy` and the health gate ask a row how to create, read or delete a resource, what Azure keeps
or refuses to change on it, and whether it has instances; nothing branches on a type string. A new
resource type (public IP, placement group ...) is one row here, a route module in the fake, and its
place in the plan. `teardown` orders deletion: a resource goes
before the ones it references (scale sets hold the NICs that use the subnet and the NSG; a subnet
holds its NAT gateway, which holds its public IP), so lower numbers are deleted first and equal
numbers in parallel.

The second section is the scale set's instances (listing, Run Command); the third the types azgpu
only references, reads or asks permissions on. The module imports no SDK: the offline plan and
renderers read it, and a row's methods take the session that holds the clients.
"""

from __future__ import annotations

import re
from typing import Any

from msgspec import Struct

# azure-mgmt-network's and azure-mgmt-compute's defaults: the template and the SDK send the same version.
NETWORK_API = "2026-03-01"
COMPUTE_API = "2026-04-01"
EXAMPLE_SCOPE = "/subscriptions/SUB/resourceGroups/RG"  # how a remedy spells a resource ID to fill in


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


class ArmType(Struct, frozen=True):
    """A type azgpu names: its ARM type and, where azgpu sends requests for it, the api-version."""

    type: str  # the ARM type, e.g. Microsoft.Network/virtualNetworks (a bare namespace for a provider)
    label: str  # how messages name it
    api_version: str = ""

    @property
    def namespace(self) -> str:
        return self.type.split("/", 1)[0]

    def action(self, operation: str) -> str:
        """An RBAC action on this type, e.g. action('assign/action')."""
        return f"{self.type}/{operation}"

    def provider_path(self, *names: str) -> str:
        """'/providers/<namespace>/<type>/<name>/<child type>/<name>...' for the given names (fewer names
        than type segments leave the path ending in a type, as a collection)."""
        _, *types = self.type.split("/")
        parts = [part for i, t in enumerate(types) for part in (t, *names[i:i + 1])]
        return "/".join(["/providers", self.namespace, *parts])

    def path_pattern(self, *names: str) -> str:
        """provider_path as a regular expression: the type's text escaped, `names` (patterns) where the names go."""
        _, *types = self.type.split("/")
        return "/".join(["/providers", re.escape(self.namespace),
                         *[p for t, n in zip(types, names, strict=False) for p in (re.escape(t), n)]])

    def example_id(self, *names: str) -> str:
        """A resource ID as a remedy shows it, with SUB and RG to fill in."""
        return EXAMPLE_SCOPE + self.provider_path(*names)


class ResourceType(ArmType, frozen=True, kw_only=True):
    """A type a plan deploys and azgpu creates, finds again by its tags, and deletes."""

    stage: str  # the deployer's progress label (create's resources[].stage, the progress lines)
    naming: str | None  # the Names attribute that names it; None: the user names it (--ppg NAME)
    client: str  # the Session attribute holding the SDK client: compute | network | resources
    operations: str  # the operations group on that client
    teardown: int
    create_method: str = "begin_create_or_update"
    delete_method: str = "begin_delete"
    long_running: bool = True  # create and delete answer with a poller
    # Top-level body keys Azure fixes when it creates the resource and that azgpu may leave as they are:
    # an existing resource keeps its own value (a PUT that changes them is refused), and what-if shows none.
    kept: tuple[str, ...] = ()
    # What Azure cannot change on an existing resource (a different value is refused up front), by name,
    # with where each sits in the REST body (the what-if's '!' lines).
    immutable: tuple[tuple[str, tuple[str, ...]], ...] = ()
    has_instances: bool = False  # a scale set: its body's sku.capacity counts VMs, listed by INSTANCES
    delete_instances_method: str | None = None  # scale sets: delete named instances (a poller)
    update_method: str | None = None  # a PATCH (scale sets: the capacity)

    @property
    def immutable_paths(self) -> dict[str, tuple[str, ...]]:
        return dict(self.immutable)

    def name_in(self, names: Any, *args: Any) -> str:
        """The name azgpu gives it, from the cluster's Names (a method for per-index names)."""
        if self.naming is None:
            raise KeyError(f"{self.type} is named by the user")
        value = getattr(names, self.naming)
        return value(*args) if callable(value) else value

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

    def begin_set_capacity(self, session, resource_group: str, name: str, size: str, capacity: int) -> Any:
        """PATCH the scale set's sku to `capacity` instances of `size` (VirtualMachineScaleSets_Update)."""
        if self.update_method is None:
            raise KeyError(f"{self.type} has no capacity to set")
        call = getattr(self._ops(session), self.update_method)
        return call(resource_group, name, {"sku": {"name": size, "capacity": capacity}})


# ---------------------------------------------------------------------------------------- deployed by a plan

VMSS = ResourceType(
    type="Microsoft.Compute/virtualMachineScaleSets", api_version=COMPUTE_API, label="scale set", stage="scale-set",
    naming="vmss", client="compute", operations="virtual_machine_scale_sets", teardown=0, has_instances=True,
    delete_instances_method="begin_delete_instances", update_method="begin_update",
    immutable=(
        ("size", ("sku.name",)),
        ("image", tuple(f"properties.virtualMachineProfile.storageProfile.imageReference.{k}"
                        for k in ("publisher", "offer", "sku"))),
        ("orchestrationMode", ("properties.orchestrationMode",)),
        ("singlePlacementGroup", ("properties.singlePlacementGroup",)),
        ("zones", ("zones",)),
    ))
NSG = ResourceType(
    type="Microsoft.Network/networkSecurityGroups", api_version=NETWORK_API, label="network security group",
    stage="nsg", naming="nsg", client="network", operations="network_security_groups", teardown=1)
VNET = ResourceType(
    type="Microsoft.Network/virtualNetworks", api_version=NETWORK_API, label="virtual network", stage="vnet",
    naming="vnet", client="network", operations="virtual_networks", teardown=1)
# Azure refuses to delete a NAT gateway a subnet still uses, and a public IP a NAT gateway still holds.
# Their zones are fixed at creation (D-nat-zones); a NAT gateway serves VMs of every zone, so after a zone
# fallback the one already made stays where it is rather than being refused or re-created.
NAT_GATEWAY = ResourceType(
    type="Microsoft.Network/natGateways", api_version=NETWORK_API, label="NAT gateway", stage="nat-gateway",
    naming="nat_gateway", client="network", operations="nat_gateways", teardown=2, kept=("zones",))
PUBLIC_IP = ResourceType(
    type="Microsoft.Network/publicIPAddresses", api_version=NETWORK_API, label="public IP address",
    stage="public-ip", naming="nat_public_ip", client="network", operations="public_ip_addresses", teardown=3,
    kept=("zones",))
# Synchronous: create_or_update and delete answer at once (ProximityPlacementGroups, compute api 2026-04-01).
PPG = ResourceType(
    type="Microsoft.Compute/proximityPlacementGroups", api_version=COMPUTE_API, label="proximity placement group",
    stage="ppg", naming=None, client="compute", operations="proximity_placement_groups", teardown=1,
    create_method="create_or_update", delete_method="delete", long_running=False)

TYPES: dict[str, ResourceType] = {t.type.lower(): t for t in (VMSS, NSG, VNET, NAT_GATEWAY, PUBLIC_IP, PPG)}


def of(type_: str) -> ResourceType:
    """The row for an ARM type (case-insensitive, as ARM compares types)."""
    try:
        return TYPES[type_.lower()]
    except KeyError:
        raise KeyError(f"azgpu manages no resource type {type_!r}: add a row to resource_types.py") from None


def managed(type_: str | None) -> bool:
    return (type_ or "").lower() in TYPES


def is_type(type_: str | None, row: ArmType) -> bool:
    """Whether a listed resource's type is this row's (ARM compares types case-insensitively)."""
    return (type_ or "").lower() == row.type.lower()


def teardown_waves(items: list[Any]) -> list[list[Any]]:
    """Listed resources (with .type) grouped by teardown order: each wave can go in parallel."""
    waves: dict[int, list[Any]] = {}
    for item in items:
        waves.setdefault(of(item.type).teardown, []).append(item)
    return [waves[k] for k in sorted(waves)]


# ---------------------------------------------------------------------------------------- a scale set's instances


class InstanceType(ArmType, frozen=True, kw_only=True):
    """A scale set's VMs: created, counted and deleted through the scale set's row; listed and run
    commands on here."""

    client: str
    operations: str

    def _ops(self, session) -> Any:
        return getattr(getattr(session, self.client), self.operations)

    def list(self, session, resource_group: str, scale_set: str, *, instance_view: bool = False) -> list[Any]:
        """The scale set's instances (VirtualMachineScaleSetVMs_List), with power state when instance_view."""
        ops = self._ops(session)
        if instance_view:
            return list(ops.list(resource_group, scale_set, expand="instanceView"))
        return list(ops.list(resource_group, scale_set))

    def begin_run_command(self, session, resource_group: str, scale_set: str, instance_id: str, body: dict | bytes,
                          **kwargs: Any) -> Any:
        """VirtualMachineScaleSetVMs_RunCommand on one instance; kwargs go to the SDK (polling ...)."""
        return self._ops(session).begin_run_command(resource_group, scale_set, instance_id, body, **kwargs)


INSTANCES = InstanceType(type=VMSS.type + "/virtualMachines", api_version=COMPUTE_API, label="scale set instance",
                         client="compute", operations="virtual_machine_scale_set_vms")


class InstanceChildType(ArmType, frozen=True, kw_only=True):
    """A resource kept on one scale-set instance, which goes with it: read, written and deleted here."""

    client: str
    operations: str

    def _ops(self, session) -> Any:
        return getattr(getattr(session, self.client), self.operations)

    def get(self, session, resource_group: str, scale_set: str, instance_id: str, name: str,
            expand: str | None = None) -> Any:
        """expand="instanceView" on a Run Command: its execution state, exit code, the tails of output and error."""
        kwargs = {"expand": expand} if expand else {}
        return self._ops(session).get(resource_group, scale_set, instance_id, name, **kwargs)

    def begin_put(self, session, resource_group: str, scale_set: str, instance_id: str, name: str, body: dict,
                  **kwargs: Any) -> Any:
        return self._ops(session).begin_create_or_update(resource_group, scale_set, instance_id, name, body, **kwargs)

    def begin_delete(self, session, resource_group: str, scale_set: str, instance_id: str, name: str,
                     **kwargs: Any) -> Any:
        return self._ops(session).begin_delete(resource_group, scale_set, instance_id, name, **kwargs)


# A managed Run Command kept on an instance (VirtualMachineScaleSetVMRunCommands): where Azure holds which
# Slurm node name a VM carries (azgpu.deploy.nodes; uniform scale-set instances keep no tags of their own),
# and how a node's bootstrap runs in the VM with a protected munge key (azgpu.slurm.bootstrap).
INSTANCE_RUN_COMMAND = InstanceChildType(type=INSTANCES.type + "/runCommands", api_version=COMPUTE_API,
                                         label="instance run command", client="compute",
                                         operations="virtual_machine_scale_set_vm_run_commands")


# ---------------------------------------------------------------------------------------- referenced or read only

SUBNET = ArmType(VNET.type + "/subnets", "subnet", NETWORK_API)
RESOURCE_GROUP = ArmType("Microsoft.Resources/resourceGroups", "resource group", "2024-11-01")
DEPLOYMENT = ArmType("Microsoft.Resources/deployments", "deployment", "2025-04-01")  # validate, whatIf
USER_ASSIGNED_IDENTITY = ArmType("Microsoft.ManagedIdentity/userAssignedIdentities", "user-assigned identity",
                                 "2024-11-30")  # UserAssignedIdentities_Get
CAPACITY_RESERVATION_GROUP = ArmType("Microsoft.Compute/capacityReservationGroups", "capacity reservation group",
                                     COMPUTE_API)
GALLERY_IMAGE = ArmType("Microsoft.Compute/galleries/images", "gallery image definition")
MANAGED_IMAGE = ArmType("Microsoft.Compute/images", "managed image")
COMPUTE_LOCATION = ArmType("Microsoft.Compute/locations", "compute location")  # the scope of compute quotas
# Learn ("Use Resource Manager authentication API to access subscriptions") reads the caller's permissions
# at {scope}/providers/Microsoft.Authorization/permissions; the authorization spec's newest stable version
# of Permission (actions, notActions) is 2022-04-01.
PERMISSIONS = ArmType("Microsoft.Authorization/permissions", "permissions", "2022-04-01")
IMPACT = ArmType("Microsoft.Impact", "Guest Health Reporting resource provider")
WORKLOAD_IMPACT = ArmType(IMPACT.type + "/workloadImpacts", "workload impact")
# The version whose examples azgpu's quota bodies follow, whichever azure-mgmt-quota is installed (2.x
# speaks 2025-03-01 by default, 3.x 2025-09-01; Quota_Update and QuotaRequestStatus_Get are the same in both).
QUOTA = ArmType("Microsoft.Quota", "quota resource provider", "2025-09-01")

REFERENCED: tuple[ArmType, ...] = (INSTANCES, INSTANCE_RUN_COMMAND, SUBNET, RESOURCE_GROUP, DEPLOYMENT,
                                   USER_ASSIGNED_IDENTITY, CAPACITY_RESERVATION_GROUP, GALLERY_IMAGE, MANAGED_IMAGE,
                                   COMPUTE_LOCATION, PERMISSIONS, IMPACT, WORKLOAD_IMPACT, QUOTA)
