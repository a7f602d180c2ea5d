"""Microsoft.Network: NSGs, virtual networks with their subnets, NAT gateways, public IPs, and scale-set
NICs/public IPs (URL and body to models/network.py, which holds ARM's checks)."""

from __future__ import annotations

from ..errors import child_not_found
from ..models import instances, network
from ..models.network import NAT_TYPE, NSG_TYPE, PIP_TYPE, VNET_TYPE, shown
from . import NETWORK, VMSS, Response, page, route

# The REST api-version whose shapes these routes answer in (Network).
API_VERSION = "2026-03-01"
# Network's views of a Uniform scale set's NICs and public IPs exist at this version only.
VMSS_NETWORK_API = "2018-10-01"
NSG = NETWORK + r"/networkSecurityGroups/(?P<name>[^/]+)"
VNET = NETWORK + r"/virtualNetworks/(?P<vnet>[^/]+)"
NAT = NETWORK + r"/natGateways/(?P<name>[^/]+)"
PIP = NETWORK + r"/publicIPAddresses/(?P<name>[^/]+)"


def _ids(backend, rg: str, *types_and_names: str) -> str:
    return backend.rg_id(rg) + "/providers/" + "/".join(types_and_names)


# -- network security groups ---------------------------------------------------------------------
@route("PUT", NSG)
def put_nsg(backend, req, sub, rg, name):
    backend.require_rg(rg)
    return network.put_nsg(backend, req, _ids(backend, rg, NSG_TYPE, name))


@route("GET", NSG)
def get_nsg(backend, req, sub, rg, name):
    return Response(200, backend.get_for_read(_ids(backend, rg, NSG_TYPE, name)))


@route("DELETE", NSG)
def delete_nsg(backend, req, sub, rg, name):
    backend.require_rg(rg)
    nsg = backend.find(_ids(backend, rg, NSG_TYPE, name))
    if nsg is None:
        return Response(204)
    network.check_nsg_unused(backend, nsg)
    return backend.accepted_delete(req, nsg, nsg["location"])


@route("GET", NETWORK + r"/networkSecurityGroups")
def list_nsgs(backend, req, sub, rg):
    backend.require_rg(rg)
    return page(backend.in_group(rg, NSG_TYPE))


# -- virtual networks and subnets ----------------------------------------------------------------
@route("PUT", VNET)
def put_vnet(backend, req, sub, rg, vnet):
    backend.require_rg(rg)
    return network.put_vnet(backend, req, _ids(backend, rg, VNET_TYPE, vnet))


@route("GET", VNET)
def get_vnet(backend, req, sub, rg, vnet):
    return Response(200, shown(backend, backend.get_for_read(_ids(backend, rg, VNET_TYPE, vnet))))


@route("DELETE", VNET)
def delete_vnet(backend, req, sub, rg, vnet):
    backend.require_rg(rg)
    resource = backend.find(_ids(backend, rg, VNET_TYPE, vnet))
    if resource is None:
        return Response(204)
    for subnet in resource["properties"].get("subnets") or []:
        network.subnet_in_use(backend, subnet)
    return backend.accepted_delete(req, resource, resource["location"])


@route("GET", NETWORK + r"/virtualNetworks")
def list_vnets(backend, req, sub, rg):
    backend.require_rg(rg)
    return page([shown(backend, v) for v in backend.in_group(rg, VNET_TYPE)])


@route("PUT", VNET + r"/subnets/(?P<name>[^/]+)")
def put_subnet(backend, req, sub, rg, vnet, name):
    return network.put_subnet(backend, req, backend.require(_ids(backend, rg, VNET_TYPE, vnet)), name)


@route("GET", VNET + r"/subnets/(?P<name>[^/]+)")
def get_subnet(backend, req, sub, rg, vnet, name):
    parent = backend.require(_ids(backend, rg, VNET_TYPE, vnet))
    subnet_id = f"{parent['id']}/subnets/{name}"
    backend.ops.touch(subnet_id)
    subnet = backend.find(subnet_id)
    if subnet is None:
        raise child_not_found(subnet_id)
    return Response(200, shown(backend, subnet))


@route("DELETE", VNET + r"/subnets/(?P<name>[^/]+)")
def delete_subnet(backend, req, sub, rg, vnet, name):
    parent = backend.require(_ids(backend, rg, VNET_TYPE, vnet))
    subnet = backend.find(f"{parent['id']}/subnets/{name}")
    if subnet is None:
        return Response(204)
    network.subnet_in_use(backend, subnet)
    return backend.accepted_delete(req, subnet, parent["location"])


@route("GET", VNET + r"/subnets")
def list_subnets(backend, req, sub, rg, vnet):
    parent = backend.require(_ids(backend, rg, VNET_TYPE, vnet))
    return page([shown(backend, s) for s in parent["properties"].get("subnets") or []])


# -- public IP addresses -----------------------------------------------------------------------------
@route("PUT", PIP)
def put_public_ip(backend, req, sub, rg, name):
    backend.require_rg(rg)
    return network.put_public_ip(backend, req, _ids(backend, rg, PIP_TYPE, name), name)


@route("GET", PIP)
def get_public_ip(backend, req, sub, rg, name):
    return Response(200, shown(backend, backend.get_for_read(_ids(backend, rg, PIP_TYPE, name))))


@route("DELETE", PIP)
def delete_public_ip(backend, req, sub, rg, name):
    backend.require_rg(rg)
    ip = backend.find(_ids(backend, rg, PIP_TYPE, name))
    if ip is None:
        return Response(204)
    network.check_public_ip_unheld(backend, ip)
    return backend.accepted_delete(req, ip, ip["location"])


@route("GET", NETWORK + r"/publicIPAddresses")
def list_public_ips(backend, req, sub, rg):
    backend.require_rg(rg)
    return page([shown(backend, ip) for ip in backend.in_group(rg, PIP_TYPE)])


# -- NAT gateways ------------------------------------------------------------------------------------
@route("PUT", NAT)
def put_nat_gateway(backend, req, sub, rg, name):
    backend.require_rg(rg)
    return network.put_nat_gateway(backend, req, _ids(backend, rg, NAT_TYPE, name))


@route("GET", NAT)
def get_nat_gateway(backend, req, sub, rg, name):
    return Response(200, shown(backend, backend.get_for_read(_ids(backend, rg, NAT_TYPE, name))))


@route("DELETE", NAT)
def delete_nat_gateway(backend, req, sub, rg, name):
    backend.require_rg(rg)
    nat = backend.find(_ids(backend, rg, NAT_TYPE, name))
    if nat is None:
        return Response(204)
    network.check_nat_detached(backend, nat)
    return backend.accepted_delete(req, nat, nat["location"])


@route("GET", NETWORK + r"/natGateways")
def list_nat_gateways(backend, req, sub, rg):
    backend.require_rg(rg)
    return page([shown(backend, nat) for nat in backend.in_group(rg, NAT_TYPE)])


# -- scale-set NICs and public IPs (Microsoft.Network operations on Microsoft.Compute paths) --------
def _vmss(backend, rg: str, vmss: str) -> dict:
    return backend.require(_ids(backend, rg, network.VMSS_TYPE, vmss))


@route("GET", VMSS + r"/networkInterfaces", api_version=VMSS_NETWORK_API)
def list_vmss_nics(backend, req, sub, rg, vmss):
    return page(instances.nics(backend, _vmss(backend, rg, vmss)["id"]))


@route("GET", VMSS + r"/virtualMachines/(?P<instance>[^/]+)/networkInterfaces", api_version=VMSS_NETWORK_API)
def list_vm_nics(backend, req, sub, rg, vmss, instance):
    return page(instances.nics(backend, f"{_vmss(backend, rg, vmss)['id']}/virtualMachines/{instance}"))


@route("GET", VMSS + r"/virtualMachines/(?P<instance>[^/]+)/networkInterfaces/(?P<nic>[^/]+)",
       api_version=VMSS_NETWORK_API)
def get_vm_nic(backend, req, sub, rg, vmss, instance, nic):
    nic_id = f"{_vmss(backend, rg, vmss)['id']}/virtualMachines/{instance}/networkInterfaces/{nic}"
    found = backend.find(nic_id)
    if found is None:
        raise child_not_found(nic_id)
    return Response(200, found)


@route("GET", VMSS + r"/publicIPAddresses", api_version=VMSS_NETWORK_API)
def list_vmss_public_ips(backend, req, sub, rg, vmss):
    scale_set = _vmss(backend, rg, vmss)
    return page([r for r in backend.store.under(scale_set["id"]) if r["type"] == instances.PIP_TYPE])
