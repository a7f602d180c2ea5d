"""Spec -> Plan: the resources in Azure's own REST/ARM shape, shared by every back end.

The ARM renderer prints these resources, the Bicep renderer prints the same objects, and the
deployer sends the same bodies (with expressions resolved), so what is reviewed is what is
deployed.
"""

from __future__ import annotations

import base64
from typing import Any

from msgspec import Struct, field

from .drivers import cloud_init_ofed
from .expr import Base64, Format, Param, ResourceGroupLocation, ResourceId, SubnetId, references
from .images import ofed_display
from .layout import resource_kinds
from .ownership import cluster_tags as ownership_tags
from .request import repr_without, shown_fields
from .resource_types import NAT_GATEWAY, NSG, PPG, PUBLIC_IP, VMSS, VNET, ResourceType
from .spec import Spec

# Azure's default TCP idle timeout for NAT gateway flows (4-120 minutes); raising it is "a last resort option"
# (D-nat-resource): long transfers keep their flows busy, and idle ones should use TCP keepalives.
NAT_IDLE_TIMEOUT_MINUTES = 4
# Basic public IPs were retired on September 30, 2025 (D-public-ip-basic): every public IP asks for Standard.
STANDARD_PUBLIC_IP_SKU = {"name": "Standard", "tier": "Regional"}


class Parameter(Struct, frozen=True):
    name: str
    type: str  # string | int | bool | array | object
    description: str
    default: Any = None
    value: Any = None  # what main.parameters.json sets; None leaves it to the user
    secure: bool = False

    # A secure parameter's value (customData: cloud-init that may hold secrets) is kept out of the plan's repr and
    # rich's pretty-printing of it, as Spec keeps out the same text.
    def __repr__(self) -> str:
        return repr_without(self, ("value",) if self.secure else ())

    def __rich_repr__(self):
        yield from shown_fields(self, ("value",) if self.secure else ())


class Resource(Struct):
    key: str  # symbolic name (Bicep) and the plan's handle for references
    kind: ResourceType  # its row: ARM type, api-version, label, how it is created, listed and deleted
    name: str
    body: dict[str, Any]  # location, tags, sku, zones, properties: exactly the REST PUT body

    @property
    def type(self) -> str:
        return self.kind.type

    @property
    def api_version(self) -> str:
        return self.kind.api_version

    @property
    def stage(self) -> str:
        """The deployer's progress label: nsg | vnet | ppg | nat-gateway | public-ip | scale-set."""
        return self.kind.stage

    @property
    def depends_on(self) -> list[str]:
        return sorted(references(self.body) - {self.key})


class Output(Struct):
    name: str
    type: str
    value: Any


class Plan(Struct):
    spec: Spec
    parameters: list[Parameter]
    resources: list[Resource]
    outputs: list[Output]
    tags: dict[str, str]
    notes: list[str] = field(default_factory=list)

    def resource(self, key: str) -> Resource:
        return next(r for r in self.resources if r.key == key)

    @property
    def scale_sets(self) -> list[Resource]:
        return [r for r in self.resources if r.kind.has_instances]

    def waves(self) -> list[list[Resource]]:
        """Resources grouped so each wave depends only on earlier waves (deployed in parallel)."""
        done: set[str] = set()
        left = list(self.resources)
        out = []
        while left:
            wave = [r for r in left if set(r.depends_on) <= done]
            if not wave:
                raise RuntimeError("dependency cycle in plan")  # a bug in plan.py, never user input
            out.append(wave)
            done |= {r.key for r in wave}
            left = [r for r in left if r.key not in done]
        return out

    def outbound(self) -> dict[str, Any]:
        """How the nodes reach the internet: what a reviewer and `provision plan` show."""
        spec = self.spec
        if spec.nat_gateway:
            nat, ip = self.resource("natGateway"), self.resource("natPublicIp")
            return {"method": "nat-gateway", "nat_gateway": nat.name, "public_ip": ip.name,
                    "zones": nat.body.get("zones"), "default_outbound_access": False}
        if spec.subnet_id:
            return {"method": "existing-subnet", "subnet_id": spec.subnet_id}
        if spec.request.public_ip:
            return {"method": "node-public-ips", "default_outbound_access": False}
        return {"method": "none", "default_outbound_access": False}

    def summary(self) -> dict[str, Any]:
        spec = self.spec
        return {
            "cluster": spec.names.cluster,
            "profile": spec.profile.id,
            "series": spec.profile.series,
            "size": spec.size.name,
            "nodes": spec.nodes,
            "gpus": spec.nodes * spec.size.gpus,
            "vcpus": spec.nodes * spec.size.vcpus,
            "quota_family": spec.size.cap("quota_family"),
            "image": spec.image.urn,
            "image_plan": spec.image.plan.arm() if spec.image.plan else None,
            "image_kind": spec.image.kind,
            "location": spec.request.location,
            "resource_group": spec.request.resource_group,
            "infiniband": spec.size.infiniband,
            "ib_domain": spec.ib_domain if spec.size.infiniband else None,
            "scale_sets": [
                {"name": r.name, "capacity": r.body["sku"]["capacity"]} for r in self.scale_sets
            ],
            "outbound": self.outbound(),
            "resources": [{"type": r.type, "name": r.name, "depends_on": r.depends_on} for r in self.resources],
            "findings": [f.as_dict() for f in spec.findings],
            "notes": self.notes,
        }


def cluster_tags(spec: Spec) -> dict[str, str]:
    return {**spec.request.tags, **ownership_tags(spec.names.cluster, spec.profile.id)}


def _nsg(spec: Spec, tags: dict) -> Resource:
    rules = []
    if spec.ssh_source:
        rules.append({
            "name": "allow-ssh",
            "properties": {
                "priority": 1000,
                "direction": "Inbound",
                "access": "Allow",
                "protocol": "Tcp",
                "sourceAddressPrefix": spec.ssh_source,
                "sourcePortRange": "*",
                "destinationAddressPrefix": "*",
                "destinationPortRange": "22",
            },
        })
    body = {"location": Param("location"), "tags": tags, "properties": {"securityRules": rules}}
    return Resource("nsg", NSG, NSG.name_in(spec.names), body)


def _public_ip(spec: Spec, tags: dict) -> Resource:
    """The NAT gateway's Standard public IP: static, and in the NAT gateway's zone (D-nat-zones)."""
    body: dict[str, Any] = {"location": Param("location"), "tags": tags, "sku": dict(STANDARD_PUBLIC_IP_SKU)}
    if spec.request.zone:
        body["zones"] = [spec.request.zone]
    body["properties"] = {"publicIPAddressVersion": "IPv4", "publicIPAllocationMethod": "Static"}
    return Resource("natPublicIp", PUBLIC_IP, PUBLIC_IP.name_in(spec.names), body)


def _nat_gateway(spec: Spec, tags: dict, ip: Resource) -> Resource:
    """A Standard NAT gateway: zonal in --zone (where the nodes are), otherwise no zone (D-nat-zones)."""
    body: dict[str, Any] = {"location": Param("location"), "tags": tags, "sku": {"name": "Standard"}}
    if spec.request.zone:
        body["zones"] = [spec.request.zone]
    body["properties"] = {
        "idleTimeoutInMinutes": NAT_IDLE_TIMEOUT_MINUTES,
        "publicIpAddresses": [{"id": ResourceId(ip.key, ip.type, ip.name)}],
    }
    return Resource("natGateway", NAT_GATEWAY, NAT_GATEWAY.name_in(spec.names), body)


def _vnet(spec: Spec, tags: dict, nat: Resource | None) -> Resource:
    # Private by design, whatever the API version's default: the NAT gateway is the subnet's one way out
    # (without it, --no-outbound, there is none) and no VM gets a default outbound IP (D-default-outbound).
    subnet: dict[str, Any] = {"addressPrefix": spec.vnet_prefix, "defaultOutboundAccess": False}
    if nat is not None:
        subnet["natGateway"] = {"id": ResourceId(nat.key, nat.type, nat.name)}
    body = {
        "location": Param("location"),
        "tags": tags,
        "properties": {
            "addressSpace": {"addressPrefixes": [spec.vnet_prefix]},
            "subnets": [{"name": spec.names.subnet, "properties": subnet}],
        },
    }
    return Resource("vnet", VNET, VNET.name_in(spec.names), body)


def documented_placement(size, profile=None) -> str:
    """Where an ephemeral OS disk goes: where Microsoft places it on a vertical-connect size (CacheDisk on
    GB300, R-agentbaker-gb300: its NVMe temp disks refuse both ResourceDisk and NvmeDisk), else by the
    documented local storage: the resource (temp) disk, or NVMe on sizes without one. Preflight replaces
    it with what the size reports live."""
    vertical = getattr(profile, "vertical_connect", None)
    if vertical:
        return vertical["ephemeral_placement"]
    return "ResourceDisk" if size.temp_disk_gib else "NvmeDisk"


def _storage_profile(spec: Spec) -> dict:
    req, size = spec.request, spec.size
    premium = size.cap("premium_storage")
    os_disk: dict[str, Any] = {"createOption": "FromImage"}
    if req.ephemeral_os_disk:
        placement = spec.ephemeral_placement or documented_placement(size, spec.profile)
        os_disk |= {"caching": "ReadOnly", "diffDiskSettings": {"option": "Local", "placement": placement},
                    "managedDisk": {"storageAccountType": "Standard_LRS"}}
    else:
        os_disk |= {"caching": "ReadWrite",
                    "managedDisk": {"storageAccountType": "Premium_LRS" if premium else "Standard_LRS"}}
    if req.os_disk_size_gb:
        os_disk["diskSizeGB"] = req.os_disk_size_gb
    profile: dict[str, Any] = {"imageReference": spec.image.reference(), "osDisk": os_disk}
    if req.data_disks:
        profile["dataDisks"] = [
            {
                "lun": lun,
                "createOption": "Empty",
                "diskSizeGB": req.data_disk_size_gb,
                "caching": "None",
                "managedDisk": {"storageAccountType": "Premium_LRS" if premium else "Standard_LRS"},
            }
            for lun in range(req.data_disks)
        ]
    return profile


def _scale_set(spec: Spec, index: int, capacity: int, tags: dict, nsg: Resource, subnet: Any,
               ppg: Any = None) -> Resource:
    req = spec.request
    name = VMSS.name_in(spec.names, index)
    os_profile: dict[str, Any] = {
        "computerNamePrefix": spec.names.computer_name_prefix(index),
        "adminUsername": Param("adminUsername"),
        "linuxConfiguration": {
            "disablePasswordAuthentication": True,
            "ssh": {"publicKeys": [{
                "path": Format("/home/{0}/.ssh/authorized_keys", (Param("adminUsername"),)),
                "keyData": Param("sshPublicKey"),
            }]},
        },
    }
    if spec.custom_data is not None:
        # With --custom-data the whole cloud-init is a secure parameter: never written into the template.
        os_profile["customData"] = Base64(Param("customData"))
    elif spec.install_ofed:
        os_profile["customData"] = base64.b64encode(cloud_init_ofed(spec.install_ofed).encode()).decode()
    ip_config: dict[str, Any] = {"primary": True, "subnet": {"id": subnet}}
    if req.public_ip:
        # The SKU explicitly: Basic public IPs are retired (D-public-ip-basic), and a scale set without a load
        # balancer takes its instance IPs' SKU from this section (D-vmss-networking).
        ip_config["publicIPAddressConfiguration"] = {"name": "public", "sku": dict(STANDARD_PUBLIC_IP_SKU),
                                                     "properties": {"idleTimeoutInMinutes": 15}}
    nic = {
        "name": f"{name}-nic",
        "properties": {
            "primary": True,
            "enableAcceleratedNetworking": spec.accelerated_networking,
            "networkSecurityGroup": {"id": ResourceId(nsg.key, nsg.type, nsg.name)},
            "ipConfigurations": [{"name": "ipconfig1", "properties": ip_config}],
        },
    }
    security: dict[str, Any] = {"securityType": spec.security_type}
    if spec.security_type == "TrustedLaunch":
        # The GPU driver extensions do not support Secure Boot (facts sheet, section 2).
        security["uefiSettings"] = {"secureBootEnabled": False, "vTpmEnabled": True}
    vm_profile: dict[str, Any] = {
        "osProfile": os_profile,
        "storageProfile": _storage_profile(spec),
        "networkProfile": {"networkInterfaceConfigurations": [nic]},
        "securityProfile": security,
    }
    # Managed storage: "If storageUri is not specified while enabling boot diagnostics, managed storage will
    # be used" (BootDiagnostics, compute api 2026-04-01), so no storage account is created.
    vm_profile["diagnosticsProfile"] = {"bootDiagnostics": {"enabled": spec.boot_diagnostics}}
    if req.spot:
        vm_profile |= {"priority": "Spot", "evictionPolicy": spec.eviction_policy or "Delete",
                       "billingProfile": {"maxPrice": req.max_price if req.max_price is not None else -1}}
    if req.capacity_reservation_group:
        vm_profile["capacityReservation"] = {"capacityReservationGroup": {"id": req.capacity_reservation_group}}
    if spec.extensions:
        vm_profile["extensionProfile"] = {"extensions": [
            {"name": e.name, "properties": {
                "publisher": e.publisher, "type": e.type, "typeHandlerVersion": e.type_handler_version,
                "autoUpgradeMinorVersion": True, "settings": e.settings,
            }} for e in spec.extensions
        ]}
    body: dict[str, Any] = {
        "location": Param("location"),
        "tags": tags,
        "sku": {"name": spec.size.name, "tier": "Standard", "capacity": capacity},
    }
    if req.zone:
        body["zones"] = [req.zone]
    if spec.image.plan:
        # A marketplace image with a purchase plan is refused without the plan (VMMarketplaceInvalidInput).
        body["plan"] = spec.image.plan.arm()
    if spec.identity:
        body["identity"] = spec.identity
    vertical = spec.profile.vertical_connect
    body["properties"] = {
        # InfiniBand works only inside one Uniform scale set with a single placement group; a vertical-connect
        # (NVL72) rack spans placement groups, and Azure refuses it in a single one (R-agentbaker-gb300).
        "orchestrationMode": "Uniform",
        # ... except in a capacity reservation group, which Learn allows only with singlePlacementGroup
        # false (D-crg-vmss); validate says so as CAPACITY_RESERVATION_PLACEMENT_GROUP.
        "singlePlacementGroup": (vertical["single_placement_group"] if vertical
                                 else spec.size.infiniband and not req.capacity_reservation_group),
        # Overprovisioned GPU VMs count against quota and would join the InfiniBand partition.
        "overprovision": False,
        "upgradePolicy": {"mode": "Manual"},
        "virtualMachineProfile": vm_profile,
    }
    if vertical:
        # As Microsoft's GB300 rack is deployed; highSpeedInterconnectPlacement stays unset (Azure answers 400).
        body["properties"]["platformFaultDomainCount"] = vertical["platform_fault_domain_count"]
    elif req.capacity_reservation_group:
        # In a reservation group "The fault domain count for a Virtual Machine Scale Set is limited to 3, enforced
        # at deployment" (D-crg), and a regional Uniform scale set that leaves it out gets 5 (D-vmss-fd). 1 is max
        # spreading (D-vmss-fd), the value of Learn's own template for a scale set in a group (D-crg-vmss), and the
        # only one Learn's GPU series allow there ("Virtual Machine Scale Sets with a fault domain availability
        # construct is not supported", D-crg).
        body["properties"]["platformFaultDomainCount"] = 1
    if ppg is not None:
        body["properties"]["proximityPlacementGroup"] = {"id": ppg}
    return Resource(f"vmss{index:03d}", VMSS, name, body)


def _ppg(spec: Spec, tags: dict) -> Resource:
    """A proximity placement group for --ppg NAME. Its intent names the size, so Azure picks a datacenter
    that has it (intent needs api 2021-11-01+); no zone: a zone may only come with an intent and cannot
    change afterwards, and the scale sets' zone already decides it (Learn: Proximity placement groups)."""
    body = {
        "location": Param("location"),
        "tags": tags,
        "properties": {"proximityPlacementGroupType": "Standard", "intent": {"vmSizes": [spec.size.name]}},
    }
    return Resource("ppg", PPG, spec.ppg_name, body)


def build_plan(spec: Spec) -> Plan:
    tags = cluster_tags(spec)
    req = spec.request
    kinds = resource_kinds(existing_subnet=bool(spec.subnet_id), nat_gateway=spec.nat_gateway,
                           new_ppg=bool(spec.ppg_name), scale_sets=len(spec.scale_sets))
    nsg = _nsg(spec, tags)
    resources = [nsg]
    ppg: Any = spec.ppg_id
    if PPG in kinds:
        placement = _ppg(spec, tags)
        resources.append(placement)
        ppg = ResourceId(placement.key, placement.type, placement.name)
    if VNET in kinds:
        nat = None
        if NAT_GATEWAY in kinds:
            ip = _public_ip(spec, tags)
            nat = _nat_gateway(spec, tags, ip)
            resources += [ip, nat]
        vnet = _vnet(spec, tags, nat)
        resources.append(vnet)
        subnet: Any = SubnetId(vnet.key, vnet.name, spec.names.subnet)
    else:
        subnet = spec.subnet_id
    for i, capacity in enumerate(spec.scale_sets):
        resources.append(_scale_set(spec, i, capacity, tags, nsg, subnet, ppg))

    parameters = [
        Parameter("location", "string", "Azure region of every resource", default=ResourceGroupLocation(),
                  value=req.location),
        Parameter("adminUsername", "string", "Linux administrator user (SSH key login only)",
                  default=req.admin_username, value=req.admin_username),
        Parameter("sshPublicKey", "string", "OpenSSH public key for the administrator (password login is disabled)",
                  value=req.ssh_key),
    ]
    if spec.custom_data is not None:
        merged = " merged after azgpu's own (MIME multipart)" if spec.install_ofed else ""
        parameters.append(Parameter(
            "customData", "string", f"cloud-init of every node: --custom-data{merged}; secure, it may hold secrets",
            value=spec.custom_data, secure=True))
    outputs = [
        Output("scaleSets", "array", [r.name for r in resources if r.kind.has_instances]),
        Output("networkSecurityGroupId", "string", ResourceId(nsg.key, nsg.type, nsg.name)),
        Output("subnetId", "string", subnet),
    ]
    notes = []
    if spec.nat_gateway:
        notes.append(f"the nodes reach the internet through NAT gateway {spec.names.nat_gateway} and its Standard "
                     f"public IP {spec.names.nat_public_ip}; the subnet has no default outbound access")
    if spec.install_ofed:
        notes.append(f"cloud-init installs {ofed_display(spec.install_ofed)} (image has no OFED)")
    for ext in spec.extensions:
        notes.append(f"extension {ext.type} {ext.type_handler_version} installs the GPU driver (non-HPC image)")
    if spec.custom_data is not None:
        notes.append("cloud-init: --custom-data" + (" merged after azgpu's OFED install (MIME multipart)"
                                                    if spec.install_ofed else "")
                     + ", in the secure parameter customData")
    if spec.identity:
        notes.append(f"managed identity on the scale sets: {spec.identity['type']}")
    if spec.ppg_name or spec.ppg_id:
        notes.append(f"proximity placement group {spec.ppg_name or spec.ppg_id}"
                     + (" (created)" if spec.ppg_name else " (existing)"))
    if not spec.boot_diagnostics:
        notes.append("boot diagnostics off (--no-boot-diagnostics): no "
                     "serial log or console for a node that does not boot")
    return Plan(spec, parameters, resources, outputs, tags, notes)
