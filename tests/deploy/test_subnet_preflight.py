"""--subnet-id before any write: the subnet exists, lies in the cluster's location, has room for the nodes,
and has a way to the internet (or azgpu says what will not work without one). No NAT gateway is made in a
network azgpu does not own."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from deploy_support import LOCATION, NAT, NSG, PIP, RG, VMSS, assert_cli_error, create_args, request, writes

from azgpu.deploy import create
from azgpu.errors import ValidationFailed

NET_RG = "net-rg"
EXAMPLE = Path(__file__).resolve().parents[1] / "fixtures" / "azure" / "network" / "VirtualNetworkGet.json"
VNET_TYPE = "Microsoft.Network/virtualNetworks"


def net_id(azure, *parts: str, sub: str | None = None) -> str:
    return f"/subscriptions/{sub or azure.subscription_id}/resourceGroups/{NET_RG}/providers/" + "/".join(parts)


def seed_network(azure, *, prefix="10.1.0.0/24", location=LOCATION, nat=False, default_outbound=False,
                 route_table: bool = False) -> str:
    """A hub network someone else owns; returns its subnet's ID."""
    azure.add_resource(f"/subscriptions/{azure.subscription_id}/resourceGroups/{NET_RG}", {"location": location})
    props: dict = {"addressPrefix": prefix}
    if default_outbound is not None:
        props["defaultOutboundAccess"] = default_outbound
    if nat:
        azure.add_resource(net_id(azure, PIP, "hub-ip"), {"location": location, "sku": {"name": "Standard"},
                                                          "properties": {"publicIPAllocationMethod": "Static"}})
        azure.add_resource(net_id(azure, NAT, "hub-nat"), {"location": location, "sku": {"name": "Standard"},
                                                           "properties": {"publicIpAddresses": [
                                                               {"id": net_id(azure, PIP, "hub-ip")}]}})
        props["natGateway"] = {"id": net_id(azure, NAT, "hub-nat")}
    if route_table:
        props["routeTable"] = {"id": net_id(azure, "Microsoft.Network/routeTables", "to-firewall")}
    azure.add_resource(net_id(azure, VNET_TYPE, "hub"), {"location": location, "properties": {
        "addressSpace": {"addressPrefixes": ["10.1.0.0/16"]}, "subnets": [{"name": "gpu", "properties": props}]}})
    return net_id(azure, VNET_TYPE, "hub", "subnets", "gpu")


def refused(azure, session, **values) -> list:
    before = len(azure.requests)
    with pytest.raises(ValidationFailed) as info:
        create(session, request(**values))
    assert writes(azure, since=before) == [], "the preflight must stop before any write"
    return info.value.errors


def only(findings, code):
    found = [f for f in findings if f.code == code]
    assert len(found) == 1, [(f.code, f.message) for f in findings]
    return found[0]


def preflight_findings(result: dict) -> dict[str, dict]:
    return {f["code"]: f for f in result["preflight"]["findings"]}


# ------------------------------------------------------------------------------ exists


def test_a_missing_virtual_network_is_refused_before_the_nsg_is_created(azure, session):
    subnet = net_id(azure, VNET_TYPE, "absent", "subnets", "gpu")
    f = only(refused(azure, session, subnet_id=subnet), "SUBNET_NOT_FOUND")
    assert "virtual network 'absent'" in f.message and "does not exist" in f.message
    assert "az network vnet subnet list" in f.remedy and "drop --subnet-id" in f.remedy
    assert azure.resources(type=NSG) == []


def test_a_missing_subnet_names_the_ones_that_exist(azure, session):
    seed_network(azure)
    f = only(refused(azure, session, subnet_id=net_id(azure, VNET_TYPE, "hub", "subnets", "absent")),
             "SUBNET_NOT_FOUND")
    assert "its subnets: gpu" in f.message


def test_a_subnet_in_a_subscription_this_identity_cannot_see_is_not_found(azure, session):
    other = "11111111-1111-1111-1111-111111111111"
    f = only(refused(azure, session, subnet_id=net_id(azure, VNET_TYPE, "hub", "subnets", "gpu", sub=other)),
             "SUBNET_NOT_FOUND")
    assert "virtual network 'hub'" in f.message


def test_a_subnet_the_identity_may_not_read_says_which_role_is_missing(azure, session):
    subnet = seed_network(azure)
    azure.inject(method="GET", path="virtualNetworks/hub", status=403)
    f = only(refused(azure, session, subnet_id=subnet), "SUBNET_NOT_ACCESSIBLE")
    assert "Network Contributor" in f.remedy


def test_the_missing_subnet_on_the_cli_is_one_error_line_with_a_remedy(azure, cli):
    subnet = net_id(azure, VNET_TYPE, "absent", "subnets", "gpu")
    rc, out, err = cli(*create_args(), "--subnet-id", subnet)
    assert_cli_error(rc, err, 2, "SUBNET_NOT_FOUND", "drop --subnet-id")
    assert writes(azure) == []


# ------------------------------------------------------------------------------ location and room


def test_a_subnet_in_another_location_is_refused(azure, session):
    subnet = seed_network(azure, location="westus2")
    f = only(refused(azure, session, subnet_id=subnet), "SUBNET_WRONG_LOCATION")
    assert "is in westus2, the cluster in eastus" in f.message
    assert f.remedy == "pass -l westus2, or a subnet of a virtual network in eastus"


def test_a_subnet_without_room_for_the_nodes_is_refused(azure, session):
    subnet = seed_network(azure, prefix="10.1.0.0/29")  # 8 - 5 reserved = 3 addresses
    f = only(refused(azure, session, subnet_id=subnet, nodes=4), "SUBNET_TOO_SMALL")
    assert "has 3 free addresses (3 usable after the 5 Azure reserves per subnet, 0 in use)" in f.message
    assert "needs 4 more" in f.message
    assert f.remedy == "use a larger subnet, fewer --nodes, or free addresses in it"


def test_addresses_other_nics_use_are_not_free(azure, session):
    subnet = seed_network(azure, prefix="10.1.0.0/28")  # 11 usable
    create(session, request(name="other", subnet_id=subnet, nodes=8))  # someone else's 8 NICs
    f = only(refused(azure, session, subnet_id=subnet, nodes=4), "SUBNET_TOO_SMALL")
    assert "has 3 free addresses (11 usable after the 5 Azure reserves per subnet, 8 in use)" in f.message


def test_a_subnet_exactly_big_enough_passes_and_a_rerun_needs_no_more_room(azure, session):
    subnet = seed_network(azure, prefix="10.1.0.0/29")
    create(session, request(subnet_id=subnet, nodes=3))
    result = create(session, request(subnet_id=subnet, nodes=3)).as_dict()  # its own 3 NICs are no longer "needed"
    assert result["preflight"]["subnet"]["nodes_needed"] == 0


def test_the_preflight_reports_what_the_subnet_offers(azure, session):
    subnet = seed_network(azure, nat=True)
    result = create(session, request(subnet_id=subnet, nodes=2)).as_dict()
    assert result["preflight"]["subnet"] == {
        "id": subnet, "location": LOCATION, "address_prefixes": ["10.1.0.0/24"], "free_addresses": 251,
        "nodes_needed": 2, "outbound": {"nat_gateway": net_id(azure, NAT, "hub-nat"), "default_outbound_access": False,
                                        "route_table": None}}


# ------------------------------------------------------------------------------ outbound


def test_a_subnet_with_a_nat_gateway_passes_without_an_outbound_finding(azure, session):
    result = create(session, request(subnet_id=seed_network(azure, nat=True))).as_dict()
    assert not {"SUBNET_NO_OUTBOUND", "SUBNET_DEFAULT_OUTBOUND"} & set(preflight_findings(result))


def test_a_private_subnet_without_nat_gateway_warns_what_will_not_work(azure, session):
    result = create(session, request(subnet_id=seed_network(azure), image="ubuntu-2204-gen2")).as_dict()
    f = preflight_findings(result)["SUBNET_NO_OUTBOUND"]
    assert f["severity"] == "warning"
    assert "private (defaultOutboundAccess false) and has no NAT gateway" in f["message"]
    assert "DOCA-OFED 3.2.1" in f["message"] and "Run Command results" in f["message"]
    assert "'az network vnet subnet update -g net-rg --vnet-name hub -n gpu --nat-gateway'" in f["remedy"]
    assert azure.resources(type=VMSS)  # a warning: the cluster is still created


def test_a_route_table_is_named_as_the_possible_way_out(azure, session):
    result = create(session, request(subnet_id=seed_network(azure, route_table=True))).as_dict()
    assert "unless its route table to-firewall sends internet traffic through a firewall" in \
        preflight_findings(result)["SUBNET_NO_OUTBOUND"]["message"]


def test_node_public_ips_are_a_way_out(azure, session):
    result = create(session, request(subnet_id=seed_network(azure), public_ip=True,
                                     ssh_source="203.0.113.7/32")).as_dict()
    assert "SUBNET_NO_OUTBOUND" not in preflight_findings(result)


def test_default_outbound_access_is_a_note_about_its_retirement(azure, session):
    result = create(session, request(subnet_id=seed_network(azure, default_outbound=None))).as_dict()
    f = preflight_findings(result)["SUBNET_DEFAULT_OUTBOUND"]
    assert f["severity"] == "note" and "default outbound access" in f["message"]


def test_no_nat_gateway_is_created_in_a_network_azgpu_does_not_own(azure, session):
    create(session, request(subnet_id=seed_network(azure)))
    assert [n["name"] for n in azure.resources(type=NAT)] == []
    assert [ip["name"] for ip in azure.resources(type=PIP) if "/virtualMachineScaleSets/" not in ip["id"]] == []
    assert azure.resources(type=VNET_TYPE, resource_group=RG) == []


def test_the_warning_is_printed_on_the_cli(azure, cli):
    rc, out, err = cli(*create_args(), "--subnet-id", seed_network(azure))
    assert rc == 0, err
    assert any(line.startswith("WARNING: [SUBNET_NO_OUTBOUND] ") for line in err.splitlines()), err


# ------------------------------------------------------------------------------ a real Azure body


def test_the_rest_examples_virtual_network_replays_through_the_preflight(azure, session):
    """VirtualNetworks_Get (api 2026-03-01): subnet1 10.0.1.0/24 in westus with one ip configuration in use
    and no defaultOutboundAccess (an older subnet): 256 - 5 - 1 = 250 free, default outbound access."""
    published = json.loads(EXAMPLE.read_text())["responses"]["200"]["body"]
    body = json.loads(json.dumps(published).replace("00000000-0000-0000-0000-000000000000", azure.subscription_id))
    azure.add_resource(f"/subscriptions/{azure.subscription_id}/resourceGroups/rg1", {"location": "westus"})
    azure.add_resource(body["id"], body)
    azure.set_sku("westus", "Standard_ND96asr_v4")  # the fake seeds SKUs in its default locations only
    azure.add_image("westus", "microsoft-dsvm", "ubuntu-hpc", "2204", "22.04.2025010101")
    result = create(session, request(subnet_id=body["properties"]["subnets"][0]["id"], location="westus")).as_dict()
    assert result["preflight"]["subnet"]["free_addresses"] == 250
    assert result["preflight"]["subnet"]["outbound"]["default_outbound_access"] is None
    assert "SUBNET_DEFAULT_OUTBOUND" in preflight_findings(result)
