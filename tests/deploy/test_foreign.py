"""What the user added stays: subnets and address prefixes added to azgpu's VNet survive a re-run
and a destroy (which leaves the VNet and says why); a group azgpu created goes with the last azgpu
cluster in it, in either order of destroying them."""

from __future__ import annotations

import pytest
from deploy_support import NAT, PIP, RG, RG_TYPE, VMSS, VNET, request

from azgpu.deploy import CreateOptions, create
from azgpu.deploy.arm import rest_shape
from azgpu.deploy.lifecycle import destroy


def add_user_subnet(session, prefix: str = "10.1.0.0/24") -> None:
    """As 'az network vnet update --add addressSpace.addressPrefixes' then 'az network vnet subnet create'."""
    vnet = session.network.virtual_networks.get(RG, "c1-vnet")
    vnet.address_space.address_prefixes.append("10.1.0.0/16")
    session.network.virtual_networks.begin_create_or_update(RG, "c1-vnet", vnet).result()
    session.network.subnets.begin_create_or_update(RG, "c1-vnet", "user-subnet",
                                                   {"properties": {"addressPrefix": prefix}}).result()


def subnets(azure) -> list[str]:
    (vnet,) = azure.resources(type=VNET, resource_group=RG)
    return sorted(s["name"] for s in vnet["properties"]["subnets"])


def test_a_rerun_keeps_a_hand_added_subnet_and_says_so(azure, session):
    create(session, request(nodes=2))
    add_user_subnet(session)
    notices = []
    result = create(session, request(nodes=3), CreateOptions(on_notice=notices.append)).as_dict()
    assert subnets(azure) == ["compute", "user-subnet"]
    (vnet,) = azure.resources(type=VNET, resource_group=RG)
    assert vnet["properties"]["addressSpace"]["addressPrefixes"] == ["10.0.0.0/16", "10.1.0.0/16"]
    assert "virtual network 'c1-vnet' keeps subnet(s) user-subnet that azgpu did not create" in notices
    assert result["kept"] == notices
    assert azure.resources(type=VMSS)[0]["sku"]["capacity"] == 3


def test_a_vnet_put_after_a_hand_added_subnet_carries_it(azure, session):
    create(session, request(nodes=2))
    add_user_subnet(session)
    before = len(azure.requests)
    create(session, request(nodes=2, tags={"team": "x"}))  # a tag change PUTs the VNet again
    (put,) = [r for r in azure.requests[before:] if r.method == "PUT" and r.path.endswith("/virtualNetworks/c1-vnet")]
    assert [s["name"] for s in put.body["properties"]["subnets"]] == ["compute", "user-subnet"]
    assert subnets(azure) == ["compute", "user-subnet"]


def test_destroy_leaves_a_vnet_holding_a_hand_added_subnet_and_says_why(azure, session):
    create(session, request(nodes=2))
    add_user_subnet(session)
    result = destroy(session, "c1", RG)
    assert result["kept"] == [{"type": VNET, "name": "c1-vnet",
                               "reason": "it holds subnet(s) user-subnet that azgpu did not create: azgpu leaves it"}]
    assert subnets(azure) == ["user-subnet"]  # azgpu's own subnet went, so its NAT gateway could
    assert azure.resources(type=NAT) == [] and azure.resources(type=PIP) == [] and azure.resources(type=VMSS) == []
    assert result["resource_group_deleted"] is False
    assert result["resource_group_kept"] == "it still holds c1-vnet, which this destroy leaves (see kept)"


def test_destroy_leaves_azgpus_subnet_and_nat_gateway_while_a_foreign_nic_uses_the_subnet(azure, session):
    create(session, request(nodes=1))
    subnet_id = f"/subscriptions/{azure.subscription_id}/resourceGroups/{RG}/providers/{VNET}/c1-vnet/subnets/compute"
    # A NIC of the user's own VM in azgpu's subnet (seeded: the fake has no NIC PUT).
    nic = (f"/subscriptions/{azure.subscription_id}/resourceGroups/{RG}/providers/Microsoft.Network/networkInterfaces"
           "/user-nic")
    azure.add_resource(nic, {"location": "eastus", "properties": {"ipConfigurations": [
        {"name": "ipc", "id": f"{nic}/ipConfigurations/ipc", "properties": {"subnet": {"id": subnet_id}}}]}})
    result = destroy(session, "c1", RG)
    kept = {k["name"]: k["reason"] for k in result["kept"]}
    assert "network interfaces azgpu did not create in subnet(s) compute" in kept["c1-vnet"]
    assert set(kept) == {"c1-vnet", "c1-natgw", "c1-natgw-ip"}
    assert azure.resources(type=VMSS) == []


@pytest.mark.parametrize("order", [("c1", "c2"), ("c2", "c1")])
def test_two_clusters_sharing_a_group_leave_no_empty_group_in_either_order(azure, session, order):
    create(session, request(name="c1", nodes=1))
    create(session, request(name="c2", nodes=1, vnet_address_prefix="10.2.0.0/16"))
    first = destroy(session, order[0], RG)
    assert first["resource_group_deleted"] is False
    assert first["resource_group_kept"] == f"it still holds azgpu cluster(s) {order[1]}"
    second = destroy(session, order[1], RG)
    assert second["resource_group_deleted"] is True
    assert azure.resources(type=RG_TYPE) == [] or all(g["name"] != RG for g in azure.resources(type=RG_TYPE))


def test_a_rerun_keeps_a_hand_added_nsg_rule(azure, session):
    create(session, request(nodes=2))
    rule = {"properties": {"priority": 2000, "direction": "Inbound", "access": "Allow", "protocol": "Tcp",
                           "sourceAddressPrefix": "10.20.0.0/16", "sourcePortRange": "*",
                           "destinationAddressPrefix": "*", "destinationPortRange": "8888"}}
    nsg = rest_shape(session.network.network_security_groups.get(RG, "c1-nsg"))
    body = {"location": "eastus", "tags": nsg.get("tags"), "properties": {
        "securityRules": [*[{"name": r["name"], "properties": r["properties"]}
                            for r in nsg["properties"]["securityRules"]],
                          {"name": "jupyter-from-vpn", **rule}]}}
    session.network.network_security_groups.begin_create_or_update(RG, "c1-nsg", body).result()
    notices = []
    # a tag change PUTs the NSG
    create(session, request(nodes=2, tags={"team": "x"}), CreateOptions(on_notice=notices.append))
    (live,) = azure.resources(type="Microsoft.Network/networkSecurityGroups", resource_group=RG)
    assert "jupyter-from-vpn" in [r["name"] for r in live["properties"]["securityRules"]]
    assert live["tags"]["team"] == "x"
    assert "network security group 'c1-nsg' keeps rule(s) jupyter-from-vpn that azgpu did not create" in notices
