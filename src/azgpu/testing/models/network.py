"""Microsoft.Network as ARM checks and changes it (the model behind routes/network.py): NSGs, virtual
networks and their subnets, public IPs and NAT gateways, with the references between them, the
in-use refusals of their deletes, and the read-only back-references ARM computes on a GET.
"""

from __future__ import annotations

import copy
import ipaddress

from ..errors import ArmError, invalid_reference, required_location
from ..messages import Request, Response
from ..store import same_id, stable_uuid
from . import instances

NSG_TYPE = "Microsoft.Network/networkSecurityGroups"
VNET_TYPE = "Microsoft.Network/virtualNetworks"
SUBNET_TYPE = "Microsoft.Network/virtualNetworks/subnets"
NAT_TYPE = "Microsoft.Network/natGateways"
PIP_TYPE = instances.PIP_TYPE
VMSS_TYPE = "Microsoft.Compute/virtualMachineScaleSets"
# Subnets of VNets created at this api-version or later are private unless the body says otherwise: Azure
# sets defaultOutboundAccess to false (Learn, "Default outbound access in Azure", private subnets by default).
PRIVATE_SUBNETS_FROM = "2025-07-01"


def _users(backend, match) -> list[str]:
    """Ids of the scale sets, NICs and subnets whose references satisfy match(reference_id)."""
    users = []
    for vmss in backend.store.of_type(VMSS_TYPE):
        for config in instances.nic_configs(vmss):
            nsg = (config.get("properties", {}).get("networkSecurityGroup") or {}).get("id")
            if match(nsg) or any(match(instances.subnet_ref(ipc)) for ipc in instances.ip_configs(config)):
                users.append(vmss["id"])
    for nic in backend.store.of_type(instances.NIC_TYPE):
        for ipc in nic["properties"]["ipConfigurations"]:
            if match(instances.subnet_ref(ipc)) or match((nic["properties"].get("networkSecurityGroup")
                                                          or {}).get("id")):
                users.append(ipc["id"])
    for vnet in backend.store.of_type(VNET_TYPE):
        for subnet in vnet["properties"].get("subnets") or []:
            if match((subnet.get("properties", {}).get("networkSecurityGroup") or {}).get("id")):
                users.append(subnet["id"])
    return list(dict.fromkeys(users))


def subnet_in_use(backend, subnet: dict) -> None:
    users = _users(backend, lambda ref: same_id(ref, subnet["id"]))
    if users:
        raise ArmError(400, "InUseSubnetCannotBeDeleted",
                       f"Subnet {subnet['name']} is in use by {', '.join(users)} and cannot be deleted. In order to "
                       "delete the subnet, delete all the resources within the subnet. See aka.ms/deletesubnet.")


def _subnets(backend) -> list[dict]:
    return [subnet for vnet in backend.store.of_type(VNET_TYPE) for subnet in vnet["properties"].get("subnets") or []]


def _ref(value) -> str | None:
    return (value or {}).get("id") if isinstance(value, dict) else None


def _subnets_on_nat(backend, nat_id: str) -> list[str]:
    return [s["id"] for s in _subnets(backend) if same_id(_ref(s.get("properties", {}).get("natGateway")), nat_id)]


def _nats_holding(backend, ip_id: str, but: str | None = None) -> list[str]:
    return [nat["id"] for nat in backend.store.of_type(NAT_TYPE) if not same_id(nat["id"], but)
            and any(same_id(_ref(ip), ip_id) for ip in nat["properties"].get("publicIpAddresses") or [])]


def _shown_subnet(backend, subnet: dict) -> dict:
    """A subnet as ARM answers it: with the read-only ipConfigurations of the NICs placed in it."""
    props = subnet.setdefault("properties", {})
    used = [{"id": ipc["id"]} for nic in backend.store.nics_in(subnet["id"])
            for ipc in nic["properties"]["ipConfigurations"] if same_id(instances.subnet_ref(ipc), subnet["id"])]
    known = {(ref.get("id") or "").lower() for ref in props.get("ipConfigurations") or []}
    merged = list(props.get("ipConfigurations") or []) + [u for u in used if u["id"].lower() not in known]
    if merged:
        props["ipConfigurations"] = merged
    return subnet


def shown(backend, resource: dict) -> dict:
    """A copy of a network resource with the read-only back-references ARM computes: a VNet's subnets list
    their NICs' ip configurations, a NAT gateway its subnets (REST examples VirtualNetworks_Get and
    NatGateways_CreateOrUpdate, api 2026-03-01), a public IP the NAT gateway holding it (its natGateway
    property in the same API)."""
    out = copy.deepcopy(resource)
    kind = out.get("type", "").lower()
    if kind == VNET_TYPE.lower():
        for subnet in out["properties"].get("subnets") or []:
            _shown_subnet(backend, subnet)
    elif kind == SUBNET_TYPE.lower():
        _shown_subnet(backend, out)
    elif kind == NAT_TYPE.lower():
        subnets = _subnets_on_nat(backend, out["id"])
        if subnets:
            out["properties"]["subnets"] = [{"id": s} for s in subnets]
    elif kind == PIP_TYPE.lower():
        nats = _nats_holding(backend, out["id"])
        if nats:
            out["properties"]["natGateway"] = {"id": nats[0]}
    return out


def _show(backend, response: Response) -> Response:
    if isinstance(response.body, dict) and response.body.get("id"):
        response.body = shown(backend, response.body)
    return response


# -- network security groups ---------------------------------------------------------------------
def put_nsg(backend, req: Request, resource_id: str) -> Response:
    location = required_location(req.body)
    existed = backend.find(resource_id) is not None
    nsg = backend.new_resource(resource_id, req.body, location=location)
    nsg["properties"]["resourceGuid"] = stable_uuid(resource_id)
    for rule in nsg["properties"].setdefault("securityRules", []):
        rule["id"] = f"{resource_id}/securityRules/{rule['name']}"
        rule.setdefault("properties", {})["provisioningState"] = "Succeeded"
    return backend.accepted_put(req, nsg, existed, nsg["location"], state="Updating")


def check_nsg_unused(backend, nsg: dict) -> None:
    users = _users(backend, lambda ref: same_id(ref, nsg["id"]))
    if users:
        raise ArmError(400, "InUseNetworkSecurityGroupCannotBeDeleted",
                       f"Network security group {nsg['id']} cannot be deleted because it is in use by the following "
                       f"resources: {', '.join(users)}. In order to delete the Network security group, remove the "
                       "association with the resource(s).")


# -- virtual networks and subnets ----------------------------------------------------------------
def _check_subnet(backend, vnet: dict, subnet: dict) -> None:
    nsg = (subnet["properties"].get("networkSecurityGroup") or {}).get("id")
    if nsg and backend.find(nsg) is None:
        raise invalid_reference(nsg, subnet["id"])
    nat_id = _ref(subnet["properties"].get("natGateway"))
    if nat_id:
        nat = backend.find(nat_id)
        if nat is None or nat.get("location") != vnet.get("location"):
            raise invalid_reference(nat_id, subnet["id"])
    prefix = subnet["properties"].get("addressPrefix") or (subnet["properties"].get("addressPrefixes") or [None])[0]
    if prefix is None:
        raise ArmError(400, "InvalidRequestFormat", f"Subnet {subnet['name']} has no addressPrefix.")
    spaces = [ipaddress.ip_network(p, strict=False)
              for p in vnet["properties"].get("addressSpace", {}).get("addressPrefixes", [])]
    network = ipaddress.ip_network(prefix, strict=False)
    if not any(network.version == s.version and network.subnet_of(s) for s in spaces):
        raise ArmError(400, "NetcfgSubnetRangeOutsideVnet",
                       f"Subnet '{subnet['name']}' is not valid because its IP address range is outside the IP address "
                       f"range of virtual network '{vnet['name']}'.")


def new_subnet(vnet_id: str, body: dict, name: str | None = None) -> dict:
    subnet = {k: v for k, v in (body or {}).items() if k not in ("id", "type")}
    subnet["name"] = name or subnet.get("name")
    subnet["id"] = f"{vnet_id}/subnets/{subnet['name']}"
    subnet["type"] = SUBNET_TYPE
    subnet.setdefault("properties", {})["provisioningState"] = "Succeeded"
    return subnet


def put_vnet(backend, req: Request, resource_id: str) -> Response:
    location = required_location(req.body)
    old = backend.find(resource_id)
    resource = backend.new_resource(resource_id, req.body, location=location)
    resource["properties"]["resourceGuid"] = stable_uuid(resource_id)
    resource["properties"]["subnets"] = [new_subnet(resource_id, s) for s in resource["properties"].get("subnets")
                                         or []]
    for subnet in resource["properties"]["subnets"]:
        _check_subnet(backend, resource, subnet)
        if old is None and req.api_version >= PRIVATE_SUBNETS_FROM:
            subnet["properties"].setdefault("defaultOutboundAccess", False)
    kept = {s["name"].lower() for s in resource["properties"]["subnets"]}
    for subnet in (old or {}).get("properties", {}).get("subnets") or []:
        if subnet["name"].lower() not in kept:  # a PUT without a subnet deletes it
            subnet_in_use(backend, subnet)
    return _show(backend, backend.accepted_put(req, resource, old is not None, resource["location"], state="Updating"))


def put_subnet(backend, req: Request, vnet: dict, name: str) -> Response:
    subnet = new_subnet(vnet["id"], req.body, name)
    _check_subnet(backend, vnet, subnet)
    existed = backend.find(subnet["id"]) is not None
    return _show(backend, backend.accepted_put(req, subnet, existed, vnet["location"], state="Updating"))


# -- public IP addresses -----------------------------------------------------------------------------
def _sku_name(resource: dict, default: str) -> str:
    return (resource.get("sku") or {}).get("name") or default


def put_public_ip(backend, req: Request, resource_id: str, name: str) -> Response:
    location = required_location(req.body)
    old = backend.find(resource_id)
    ip = backend.new_resource(resource_id, req.body, location=location)
    # Without a sku the REST example of defaults answers Basic (PublicIpAddressCreateDefaults, api 2026-03-01),
    # and Basic public IPs were retired on September 30, 2025: Azure now refuses to create them, as observed
    # since ("Cannot create more than 0 IPv4 Basic SKU public IP addresses ...").
    sku = ip.setdefault("sku", {"name": "Basic"})
    if sku.get("name", "Basic").lower() == "basic" and (old is None or _sku_name(old, "Basic").lower() != "basic"):
        raise ArmError(400, "IPv4BasicSkuPublicIpCountLimitReached",
                       "Cannot create more than 0 IPv4 Basic SKU public "
                       "IP addresses for this subscription in this region.")
    if sku["name"].lower() != "basic":
        sku.setdefault("tier", "Regional")
    props = ip["properties"]
    method = props.setdefault("publicIPAllocationMethod", "Dynamic" if sku["name"].lower() == "basic" else "Static")
    if sku["name"].lower() != "basic" and method.lower() != "static":
        raise ArmError(400, "StandardSkuPublicIPAddressesMustBeStatic",
                       f"Standard sku publicIp {name} must have AllocationMethod set to Static.")
    props.setdefault("publicIPAddressVersion", "IPv4")
    props.setdefault("idleTimeoutInMinutes", 4)
    for read_only in ("ipConfiguration", "natGateway", "resourceGuid", "provisioningState"):
        props.pop(read_only, None)
    props["resourceGuid"] = stable_uuid(resource_id)
    if method.lower() == "static":  # a static address is allocated with the resource and kept across updates
        kept = (old or {}).get("properties", {}).get("ipAddress")
        props["ipAddress"] = kept or instances._public_ip(backend.store.next_number())
    return _show(backend, backend.accepted_put(req, ip, old is not None, ip["location"], state="Updating"))


def check_public_ip_unheld(backend, ip: dict) -> None:
    holders = _nats_holding(backend, ip["id"])
    if holders:
        # As Azure answers it (hashicorp/terraform-provider-azurerm#6052, a public IP on a NAT gateway).
        raise ArmError(400, "PublicIPAddressCannotBeDeleted",
                       f"Public IP address {ip['id']} can not be deleted since it is still allocated to resource "
                       f"{holders[0]}. In order to delete the public IP, "
                       "disassociate/detach the Public IP address from the resource.  To learn how to do this, see "
                       "aka.ms/deletepublicip.")


# -- NAT gateways ------------------------------------------------------------------------------------
def _zones(resource: dict) -> set[str]:
    return {str(z) for z in resource.get("zones") or []}


def _check_nat_ip(nat: dict, ip: dict) -> None:
    """The rules Learn documents for a NAT gateway's public IPs (troubleshoot-nat, nat-availability-zones).
    Learn names no error code for them, so the codes below are this fake's own."""
    nat_sku, ip_sku = _sku_name(nat, "Standard").lower(), _sku_name(ip, "Basic").lower()
    if ip_sku == "basic" or (nat_sku == "standardv2") != (ip_sku == "standardv2"):
        raise ArmError(400, "NatGatewayPublicIpSkuNotSupported",
                       f"Public IP address {ip['id']} has SKU {_sku_name(ip, 'Basic')}; NAT gateway {nat['id']} of SKU "
                       f"{_sku_name(nat, 'Standard')} takes only "
                       f"{'StandardV2' if nat_sku == 'standardv2' else 'Standard'} SKU public IP addresses.")
    nat_zones, ip_zones = _zones(nat), _zones(ip)
    # A zonal Standard NAT gateway takes public IPs of its own zone or zone-redundant ones, never no-zone ones
    # or another zone's; a no-zone NAT gateway takes any.
    if nat_zones and not (ip_zones == nat_zones or len(ip_zones) > 1 and nat_zones <= ip_zones):
        raise ArmError(400, "NatGatewayPublicIpZoneMismatch",
                       f"NAT gateway {nat['id']} is in zone {', '.join(sorted(nat_zones))} but public IP address "
                       f"{ip['id']} is "
                       f"{'in zone ' + ', '.join(sorted(ip_zones)) if ip_zones else 'not zonal'}; a zonal NAT gateway "
                       "needs public IP addresses of its zone or zone-redundant ones.")


def put_nat_gateway(backend, req: Request, resource_id: str) -> Response:
    location = required_location(req.body)
    old = backend.find(resource_id)
    nat = backend.new_resource(resource_id, req.body, location=location)
    nat.setdefault("sku", {"name": "Standard"})
    props = nat["properties"]
    props.setdefault("idleTimeoutInMinutes", 4)
    for read_only in ("subnets", "resourceGuid", "provisioningState"):
        props.pop(read_only, None)
    if old is not None and _zones(old) != _zones(nat):
        raise ArmError(400, "NatGatewayZonesCannotBeChanged",  # this fake's own code; Learn: zones can't be changed
                       f"The zones of NAT gateway {resource_id} cannot be changed after it is created.")
    for ref in props.get("publicIpAddresses") or []:
        ip = backend.find(_ref(ref))
        if ip is None or ip.get("location") != nat["location"]:
            raise invalid_reference(_ref(ref), resource_id)
        _check_nat_ip(nat, ip)
        others = _nats_holding(backend, ip["id"], but=resource_id)
        if others:
            # As Azure answers it (gardener/gardener-extension-provider-azure#757).
            raise ArmError(400, "PublicIPAddressInUse",
                           f"Resource {resource_id} is referencing public IP address {ip['id']} that is already "
                           f"allocated to resource {others[0]}.")
    props["resourceGuid"] = stable_uuid(resource_id)
    return _show(backend, backend.accepted_put(req, nat, old is not None, nat["location"], state="Updating"))


def check_nat_detached(backend, nat: dict) -> None:
    subnets = _subnets_on_nat(backend, nat["id"])
    if subnets:
        # As Azure answers it (Azure-Samples/Copilot-Studio-with-Azure-AI-Search#62, 2025-05); Learn: "NAT gateway
        # must be detached from all subnets within a virtual network before the resource can be removed".
        raise ArmError(400, "CannotDeleteNatGatewayAssociatedToSubnet",
                       f"NAT Gateway {nat['id']} is still configured on {len(subnets)} subnets. Remove NAT Gateway "
                       "from all referenced subnets and then delete NAT Gateway.")
