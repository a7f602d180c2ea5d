"""Helpers for the fake Azure's tests: the real SDK clients, a ready network, scale-set bodies.

A module of its own (not conftest) so test files can import it by a name no other conftest uses.
"""

from __future__ import annotations

from dataclasses import dataclass

from azure.mgmt.compute import ComputeManagementClient
from azure.mgmt.network import NetworkManagementClient
from azure.mgmt.resource.resources import ResourceManagementClient

from azgpu.testing import FakeAzure, FakeCredential

LOCATION = "eastus"
RG = "rg-test"
ND_A100 = "Standard_ND96asr_v4"
HPC_IMAGE = {"publisher": "microsoft-dsvm", "offer": "ubuntu-hpc", "sku": "2204", "version": "latest"}


@dataclass
class Clients:
    resource: ResourceManagementClient
    network: NetworkManagementClient
    compute: ComputeManagementClient


def make_clients(azure: FakeAzure) -> Clients:
    cred = FakeCredential()
    sub = azure.subscription_id
    return Clients(
        ResourceManagementClient(cred, sub, polling_interval=0),
        NetworkManagementClient(cred, sub, polling_interval=0),
        ComputeManagementClient(cred, sub, polling_interval=0),
    )


def build_network(c: Clients, *, prefix: str = "10.0.0.0/24") -> dict:
    """Resource group, NSG and a VNet with one subnet; returns their ids."""
    c.resource.resource_groups.create_or_update(RG, {"location": LOCATION})
    nsg = c.network.network_security_groups.begin_create_or_update(RG, "nsg", {"location": LOCATION}).result()
    vnet = c.network.virtual_networks.begin_create_or_update(RG, "vnet", {
        "location": LOCATION,
        "properties": {
            "addressSpace": {"addressPrefixes": ["10.0.0.0/16"]},
            "subnets": [{"name": "compute",
                         "properties": {"addressPrefix": prefix, "networkSecurityGroup": {"id": nsg.id}}}],
        },
    }).result()
    return {"nsg": nsg.id, "vnet": vnet.id, "subnet": vnet.subnets[0].id}


def vmss_body(subnet_id: str, *, size: str = ND_A100, capacity: int = 3, image: dict | None = None,
              nsg_id: str | None = None, public_ip: bool = False, spot: bool = False, zones=None,
              orchestration: str = "Uniform", single_placement_group: bool = True) -> dict:
    """A scale-set body in ARM's REST shape, as azgpu's plan produces it."""
    ip_config = {"name": "ipconfig", "properties": {"primary": True, "subnet": {"id": subnet_id}}}
    if public_ip:
        ip_config["properties"]["publicIPAddressConfiguration"] = {"name": "pip",
                                                                   "properties": {"idleTimeoutInMinutes": 15}}
    nic = {"name": "nic",
           "properties": {"primary": True, "enableAcceleratedNetworking": True, "ipConfigurations": [ip_config]}}
    if nsg_id:
        nic["properties"]["networkSecurityGroup"] = {"id": nsg_id}
    profile = {
        "osProfile": {"computerNamePrefix": "node", "adminUsername": "azureuser",
                      "linuxConfiguration": {"disablePasswordAuthentication": True}},
        "storageProfile": {"imageReference": image or HPC_IMAGE, "osDisk": {"createOption": "FromImage"}},
        "networkProfile": {"networkInterfaceConfigurations": [nic]},
    }
    if spot:
        profile.update(priority="Spot", evictionPolicy="Delete")
    body = {
        "location": LOCATION,
        "tags": {"managed-by": "azgpu", "azgpu-cluster": "c1"},
        "sku": {"name": size, "tier": "Standard", "capacity": capacity},
        "properties": {
            "orchestrationMode": orchestration,
            "singlePlacementGroup": single_placement_group,
            "upgradePolicy": {"mode": "Manual"},
            "virtualMachineProfile": profile,
        },
    }
    if zones:
        body["zones"] = zones
    return body


def create_vmss(c: Clients, network: dict, name: str = "vmss", **kw):
    return c.compute.virtual_machine_scale_sets.begin_create_or_update(RG, name,
                                                                       vmss_body(network["subnet"], **kw)).result()
