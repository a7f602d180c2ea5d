"""Microsoft.Network: NSGs, virtual networks with their subnets, and scale-set NICs/public IPs."""

from __future__ import annotations

import ipaddress

from .. import instances
from ..errors import ArmError, child_not_found, invalid_reference
from ..store import same_id, stable_uuid
from . import NETWORK, VMSS, Response, page, route

NSG_TYPE = "Microsoft.Network/networkSecurityGroups"
VNET_TYPE = "Microsoft.Network/virtualNetworks"
VMSS_TYPE = "Microsoft.Compute/virtualMachineScaleSets"
NSG = NETWORK + r"/networkSecurityGroups/(?P<name>[^/]+)"
VNET = NETWORK + r"/virtualNetworks/(?P<vnet>[^/]+)"


def _ids(backend, rg: str, *types_and_names: str) -> str:
    return backend.rg_id(rg) + "/providers/" + "/".join(types_and_names)


def _location(backend, req) -> str:
    if not (req.body or {}).get("location"):
        raise ArmError(400, "LocationRequired", "The location property is required for this definition.")
    return req.body["location"]


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
            if match(instances.subnet_ref(ipc)) or match((nic["properties"].get("networkSecurityGroup") or {}).get("id")):
                users.append(ipc["id"])
    for vnet in backend.store.of_type(VNET_TYPE):
        for subnet in vnet["properties"].get("subnets") or []:
            if match((subnet.get("properties", {}).get("networkSecurityGroup") or {}).get("id")):
                users.append(subnet["id"])
    return list(dict.fromkeys(users))


def _subnet_in_use(backend, subnet: dict) -> None:
    users = _users(backend, lambda ref: same_id(ref, subnet["id"]))
    if users:
        raise ArmError(400, "InUseSubnetCannotBeDeleted",
                       f"Subnet {subnet['name']} is in use by {', '.join(users)} and cannot be deleted. In order to "
                       "delete the subnet, delete all the resources within the subnet. See aka.ms/deletesubnet.")


# -- network security groups ---------------------------------------------------------------------
@route("PUT", NSG)
def put_nsg(backend, req, sub, rg, name):
    backend.require_rg(rg)
    resource_id = _ids(backend, rg, "Microsoft.Network/networkSecurityGroups", name)
    location = _location(backend, req)
    existed = backend.find(resource_id) is not None
    nsg = backend.new_resource(resource_id, req.body, location=location)
    nsg["properties"]["resourceGuid"] = stable_uuid(resource_id)
    for rule in nsg["properties"].setdefault("securityRules", []):
        rule["id"] = f"{resource_id}/securityRules/{rule['name']}"
        rule.setdefault("properties", {})["provisioningState"] = "Succeeded"
    return backend.accepted_put(req, nsg, existed, nsg["location"], state="Updating")


@route("GET", NSG)
def get_nsg(backend, req, sub, rg, name):
    return Response(200, backend.get_for_read(_ids(backend, rg, "Microsoft.Network/networkSecurityGroups", name)))


@route("DELETE", NSG)
def delete_nsg(backend, req, sub, rg, name):
    backend.require_rg(rg)
    nsg = backend.find(_ids(backend, rg, "Microsoft.Network/networkSecurityGroups", name))
    if nsg is None:
        return Response(204)
    users = _users(backend, lambda ref: same_id(ref, nsg["id"]))
    if users:
        raise ArmError(400, "InUseNetworkSecurityGroupCannotBeDeleted",
                       f"Network security group {nsg['id']} cannot be deleted because it is in use by the following "
                       f"resources: {', '.join(users)}. In order to delete the Network security group, remove the "
                       "association with the resource(s).")
    return backend.accepted_delete(req, nsg, nsg["location"])


@route("GET", NETWORK + r"/networkSecurityGroups")
def list_nsgs(backend, req, sub, rg):
    backend.require_rg(rg)
    return page(backend.in_group(rg, NSG_TYPE))


# -- virtual networks and subnets ----------------------------------------------------------------
def _check_subnet(backend, vnet: dict, subnet: dict) -> None:
    nsg = (subnet["properties"].get("networkSecurityGroup") or {}).get("id")
    if nsg and backend.find(nsg) is None:
        raise invalid_reference(nsg, subnet["id"])
    prefix = subnet["properties"].get("addressPrefix") or (subnet["properties"].get("addressPrefixes") or [None])[0]
    if prefix is None:
        raise ArmError(400, "InvalidRequestFormat", f"Subnet {subnet['name']} has no addressPrefix.")
    spaces = [ipaddress.ip_network(p, strict=False) for p in vnet["properties"].get("addressSpace", {}).get("addressPrefixes", [])]
    network = ipaddress.ip_network(prefix, strict=False)
    if not any(network.version == s.version and network.subnet_of(s) for s in spaces):
        raise ArmError(400, "NetcfgSubnetRangeOutsideVnet",
                       f"Subnet '{subnet['name']}' is not valid because its IP address range is outside the IP address "
                       f"range of virtual network '{vnet['name']}'.")


def _subnet(vnet_id: str, body: dict, name: str | None = None) -> dict:
    subnet = {k: v for k, v in (body or {}).items() if k not in ("id", "type")}
    subnet["name"] = name or subnet.get("name")
    subnet["id"] = f"{vnet_id}/subnets/{subnet['name']}"
    subnet["type"] = "Microsoft.Network/virtualNetworks/subnets"
    subnet.setdefault("properties", {})["provisioningState"] = "Succeeded"
    return subnet


@route("PUT", VNET)
def put_vnet(backend, req, sub, rg, vnet):
    backend.require_rg(rg)
    resource_id = _ids(backend, rg, "Microsoft.Network/virtualNetworks", vnet)
    location = _location(backend, req)
    old = backend.find(resource_id)
    resource = backend.new_resource(resource_id, req.body, location=location)
    resource["properties"]["resourceGuid"] = stable_uuid(resource_id)
    resource["properties"]["subnets"] = [_subnet(resource_id, s) for s in resource["properties"].get("subnets") or []]
    for subnet in resource["properties"]["subnets"]:
        _check_subnet(backend, resource, subnet)
    kept = {s["name"].lower() for s in resource["properties"]["subnets"]}
    for subnet in (old or {}).get("properties", {}).get("subnets") or []:
        if subnet["name"].lower() not in kept:  # a PUT without a subnet deletes it
            _subnet_in_use(backend, subnet)
    return backend.accepted_put(req, resource, old is not None, resource["location"], state="Updating")


@route("GET", VNET)
def get_vnet(backend, req, sub, rg, vnet):
    return Response(200, backend.get_for_read(_ids(backend, rg, "Microsoft.Network/virtualNetworks", vnet)))


@route("DELETE", VNET)
def delete_vnet(backend, req, sub, rg, vnet):
    backend.require_rg(rg)
    resource = backend.find(_ids(backend, rg, "Microsoft.Network/virtualNetworks", vnet))
    if resource is None:
        return Response(204)
    for subnet in resource["properties"].get("subnets") or []:
        _subnet_in_use(backend, subnet)
    return backend.accepted_delete(req, resource, resource["location"])


@route("GET", NETWORK + r"/virtualNetworks")
def list_vnets(backend, req, sub, rg):
    backend.require_rg(rg)
    return page(backend.in_group(rg, VNET_TYPE))


@route("PUT", VNET + r"/subnets/(?P<name>[^/]+)")
def put_subnet(backend, req, sub, rg, vnet, name):
    parent = backend.require(_ids(backend, rg, "Microsoft.Network/virtualNetworks", vnet))
    subnet = _subnet(parent["id"], req.body, name)
    _check_subnet(backend, parent, subnet)
    existed = backend.find(subnet["id"]) is not None
    return backend.accepted_put(req, subnet, existed, parent["location"], state="Updating")


@route("GET", VNET + r"/subnets/(?P<name>[^/]+)")
def get_subnet(backend, req, sub, rg, vnet, name):
    parent = backend.require(_ids(backend, rg, "Microsoft.Network/virtualNetworks", vnet))
    subnet_id = f"{parent['id']}/subnets/{name}"
    backend.ops.touch(subnet_id)
    subnet = backend.find(subnet_id)
    if subnet is None:
        raise child_not_found(subnet_id)
    return Response(200, subnet)


@route("DELETE", VNET + r"/subnets/(?P<name>[^/]+)")
def delete_subnet(backend, req, sub, rg, vnet, name):
    parent = backend.require(_ids(backend, rg, "Microsoft.Network/virtualNetworks", vnet))
    subnet = backend.find(f"{parent['id']}/subnets/{name}")
    if subnet is None:
        return Response(204)
    _subnet_in_use(backend, subnet)
    return backend.accepted_delete(req, subnet, parent["location"])


@route("GET", VNET + r"/subnets")
def list_subnets(backend, req, sub, rg, vnet):
    parent = backend.require(_ids(backend, rg, "Microsoft.Network/virtualNetworks", vnet))
    return page(parent["properties"].get("subnets") or [])


# -- scale-set NICs and public IPs (Microsoft.Network operations on Microsoft.Compute paths) --------
def _vmss(backend, rg: str, vmss: str) -> dict:
    return backend.require(_ids(backend, rg, "Microsoft.Compute/virtualMachineScaleSets", vmss))


@route("GET", VMSS + r"/networkInterfaces")
def list_vmss_nics(backend, req, sub, rg, vmss):
    return page(instances.nics(backend, _vmss(backend, rg, vmss)["id"]))


@route("GET", VMSS + r"/virtualMachines/(?P<instance>[^/]+)/networkInterfaces")
def list_vm_nics(backend, req, sub, rg, vmss, instance):
    return page(instances.nics(backend, f"{_vmss(backend, rg, vmss)['id']}/virtualMachines/{instance}"))


@route("GET", VMSS + r"/virtualMachines/(?P<instance>[^/]+)/networkInterfaces/(?P<nic>[^/]+)")
def get_vm_nic(backend, req, sub, rg, vmss, instance, nic):
    nic_id = f"{_vmss(backend, rg, vmss)['id']}/virtualMachines/{instance}/networkInterfaces/{nic}"
    found = backend.find(nic_id)
    if found is None:
        raise child_not_found(nic_id)
    return Response(200, found)


@route("GET", VMSS + r"/publicIPAddresses")
def list_vmss_public_ips(backend, req, sub, rg, vmss):
    scale_set = _vmss(backend, rg, vmss)
    return page([r for r in backend.store.under(scale_set["id"]) if r["type"] == instances.PIP_TYPE])
