"""NAT gateways, public IPs and private subnets through the real NetworkManagementClient.

Where Azure publishes the body (REST-spec examples under tests/fixtures/azure/network), the fake's answer
is compared with it; the rules come from Microsoft Learn (NAT gateway troubleshooting and availability
zones, default outbound access) and the error codes from what Azure answered in public issues.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from azure.core.exceptions import HttpResponseError, ResourceNotFoundError
from fake_azure_support import LOCATION, RG, create_vmss

from azgpu.deploy.arm import rest_shape  # the REST shape on every SDK generation

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "azure" / "network"
STANDARD = {"name": "Standard", "tier": "Regional"}
PIP_TYPE = "Microsoft.Network/publicIPAddresses"
NAT_TYPE = "Microsoft.Network/natGateways"


def example(name: str) -> dict:
    return json.loads((FIXTURES / f"{name}.json").read_text())


def rid(azure, type_: str, name: str) -> str:
    return f"/subscriptions/{azure.subscription_id}/resourceGroups/{RG}/providers/{type_}/{name}"


@pytest.fixture
def group(clients):
    clients.resource.resource_groups.create_or_update(RG, {"location": LOCATION})


def make_ip(clients, name: str = "ip", *, zones=None, sku=STANDARD, **props):
    body = {"location": LOCATION, "properties": {"publicIPAllocationMethod": "Static", **props}}
    if sku is not None:
        body["sku"] = sku
    if zones is not None:
        body["zones"] = zones
    return clients.network.public_ip_addresses.begin_create_or_update(RG, name, body).result()


def make_nat(clients, name: str = "nat", ips=("ip",), *, zones=None, sku="Standard"):
    sub = clients.network._config.subscription_id
    body = {"location": LOCATION, "sku": {"name": sku}, "properties": {"publicIpAddresses": [
        {"id": f"/subscriptions/{sub}/resourceGroups/{RG}/providers/{PIP_TYPE}/{ip}"} for ip in ips]}}
    if zones is not None:
        body["zones"] = zones
    return clients.network.nat_gateways.begin_create_or_update(RG, name, body).result()


def make_vnet(clients, name: str = "vnet", *, nat_id: str | None = None, api_version: str | None = None, **subnet):
    props = {"addressPrefix": "10.0.0.0/24", **subnet}
    if nat_id:
        props["natGateway"] = {"id": nat_id}
    body = {"location": LOCATION, "properties": {"addressSpace": {"addressPrefixes": ["10.0.0.0/16"]},
                                                 "subnets": [{"name": "compute", "properties": props}]}}
    kw = {"api_version": api_version} if api_version else {}
    return clients.network.virtual_networks.begin_create_or_update(RG, name, body, **kw).result()


def refused(call) -> HttpResponseError:
    with pytest.raises(HttpResponseError) as err:
        call()
    assert err.value.status_code == 400
    return err.value


# ------------------------------------------------------------------------------ public IP addresses


def test_standard_static_public_ip_gets_an_address_and_its_read_only_fields(group, clients):
    ip = make_ip(clients)
    assert ip.provisioning_state == "Succeeded"
    assert ip.ip_address and ip.resource_guid
    assert (ip.sku.name, ip.sku.tier, ip.public_ip_address_version, ip.idle_timeout_in_minutes) == (
        "Standard", "Regional", "IPv4", 4)


def test_public_ip_keeps_its_address_when_updated(group, clients):
    first = make_ip(clients).ip_address
    assert make_ip(clients, idleTimeoutInMinutes=10).ip_address == first


def test_public_ip_answer_has_the_shape_of_the_rest_example(group, clients):
    sample = example("PublicIpAddressCreateCustomizedValues")
    body = dict(sample["parameters"]["parameters"], zones=sample["parameters"]["zones"])
    created = rest_shape(clients.network.public_ip_addresses.begin_create_or_update(RG, "test-ip", body).result())
    published = sample["responses"]["201"]["body"]
    # ipConfiguration and ddosSettings describe a NIC and a DDoS plan the example's subscription had.
    assert set(published) <= set(created)
    assert set(published["properties"]) - {"ipConfiguration", "ddosSettings"} <= set(created["properties"])
    assert (created["sku"], created["zones"]) == (published["sku"], published["zones"])


def test_public_ip_without_a_sku_is_basic_and_refused_since_basic_retired(group, clients):
    sample = example("PublicIpAddressCreateDefaults")
    assert sample["responses"]["201"]["body"]["sku"] == {"name": "Basic"}  # what a body without sku gets
    err = refused(lambda: clients.network.public_ip_addresses.begin_create_or_update(
        RG, "test-ip", sample["parameters"]["parameters"]))
    assert err.error.code == "IPv4BasicSkuPublicIpCountLimitReached"


def test_explicit_basic_public_ip_is_refused(group, clients):
    err = refused(lambda: make_ip(clients, sku={"name": "Basic"}))
    assert err.error.code == "IPv4BasicSkuPublicIpCountLimitReached"


def test_standard_public_ip_must_be_static(group, clients):
    err = refused(lambda: make_ip(clients, publicIPAllocationMethod="Dynamic"))
    assert err.error.code == "StandardSkuPublicIPAddressesMustBeStatic"


def test_public_ips_list_by_group_without_scale_set_instance_ips(group, clients, network):
    make_ip(clients)
    create_vmss(clients, network, public_ip=True, capacity=2)
    assert [ip.name for ip in clients.network.public_ip_addresses.list(RG)] == ["ip"]


def test_deleting_a_public_ip_succeeds_and_a_missing_one_too(group, clients):
    make_ip(clients)
    clients.network.public_ip_addresses.begin_delete(RG, "ip").result()
    with pytest.raises(ResourceNotFoundError):
        clients.network.public_ip_addresses.get(RG, "ip")
    clients.network.public_ip_addresses.begin_delete(RG, "ip").result()


def test_public_ip_delete_answers_as_the_rest_example_does(group, clients, azure):
    make_ip(clients)
    before = len(azure.requests)
    clients.network.public_ip_addresses.begin_delete(RG, "ip").result()
    first = next(r for r in azure.requests[before:] if r.method == "DELETE")
    assert str(first.status) in example("PublicIpAddressDelete")["responses"]


# ------------------------------------------------------------------------------ NAT gateways


def test_nat_gateway_answer_has_the_shape_of_the_rest_example(group, clients, azure):
    make_ip(clients, "PublicIpAddress1")
    sample = example("NatGatewayCreateOrUpdate")
    body = json.loads(json.dumps(sample["parameters"]["parameters"]).replace(
        "00000000-0000-0000-0000-000000000000", azure.subscription_id).replace("/resourceGroups/rg1/",
                                                                               f"/resourceGroups/{RG}/"))
    del body["properties"]["publicIpPrefixes"]  # azgpu uses no prefix, and the fake has none
    body["location"] = LOCATION  # beside its public IP, as ARM requires
    nat = clients.network.nat_gateways.begin_create_or_update(RG, "test-natGateway", body).result()
    make_vnet(clients, "test-vnet", nat_id=nat.id)
    answer = rest_shape(clients.network.nat_gateways.get(RG, "test-natGateway"))
    published = sample["responses"]["201"]["body"]
    assert set(published) <= set(answer)
    assert set(published["properties"]) - {"publicIpPrefixes"} <= set(answer["properties"])
    assert answer["properties"]["subnets"] == [{"id": rid(azure, "Microsoft.Network/virtualNetworks", "test-vnet")
                                                + "/subnets/compute"}]


def test_nat_gateway_defaults_and_back_reference_on_its_public_ip(group, clients):
    make_ip(clients)
    nat = make_nat(clients)
    assert (nat.sku.name, nat.idle_timeout_in_minutes, nat.provisioning_state) == ("Standard", 4, "Succeeded")
    assert nat.resource_guid and not nat.subnets
    assert clients.network.public_ip_addresses.get(RG, "ip").nat_gateway.id == nat.id


def test_nat_gateway_with_a_missing_public_ip_is_an_invalid_reference(group, clients):
    err = refused(lambda: make_nat(clients, ips=("absent",)))
    assert err.error.code == "InvalidResourceReference"


@pytest.mark.parametrize("ip_zones, nat_zones", [(["1"], ["1"]), (["1", "2", "3"], ["2"]), (None, None), (["3"], None)])
def test_zone_combinations_learn_allows(group, clients, ip_zones, nat_zones):
    make_ip(clients, zones=ip_zones)
    assert make_nat(clients, zones=nat_zones).provisioning_state == "Succeeded"


@pytest.mark.parametrize("ip_zones", [["2"], None])
def test_zonal_nat_gateway_refuses_a_public_ip_of_another_zone_or_none(group, clients, ip_zones):
    make_ip(clients, zones=ip_zones)
    err = refused(lambda: make_nat(clients, zones=["1"]))
    assert err.error.code == "NatGatewayPublicIpZoneMismatch"


def test_nat_gateway_refuses_a_basic_public_ip(group, clients, azure):
    # Basic public IPs can no longer be created; one that predates the retirement is seeded.
    azure.add_resource(rid(azure, PIP_TYPE, "old"), {"location": LOCATION, "sku": {"name": "Basic"},
                                                     "properties": {"publicIPAllocationMethod": "Dynamic"}})
    err = refused(lambda: make_nat(clients, ips=("old",)))
    assert err.error.code == "NatGatewayPublicIpSkuNotSupported"


def test_standard_v2_nat_gateway_refuses_a_standard_public_ip(group, clients):
    make_ip(clients)
    err = refused(lambda: make_nat(clients, sku="StandardV2"))
    assert err.error.code == "NatGatewayPublicIpSkuNotSupported"


def test_a_public_ip_serves_one_nat_gateway(group, clients):
    make_ip(clients)
    make_nat(clients, "first")
    err = refused(lambda: make_nat(clients, "second"))
    assert err.error.code == "PublicIPAddressInUse"


def test_nat_gateway_zones_cannot_change(group, clients):
    make_ip(clients, zones=["1", "2", "3"])
    make_nat(clients, zones=["1"])
    err = refused(lambda: make_nat(clients, zones=["2"]))
    assert err.error.code == "NatGatewayZonesCannotBeChanged"


def test_nat_gateways_list_by_group(group, clients):
    make_ip(clients)
    make_nat(clients)
    assert [n.name for n in clients.network.nat_gateways.list(RG)] == ["nat"]


def test_nat_gateway_used_by_a_subnet_cannot_be_deleted(group, clients):
    make_ip(clients)
    nat = make_nat(clients)
    make_vnet(clients, nat_id=nat.id)
    err = refused(lambda: clients.network.nat_gateways.begin_delete(RG, "nat"))
    assert err.error.code == "CannotDeleteNatGatewayAssociatedToSubnet"
    assert "still configured on 1 subnets" in err.error.message


def test_public_ip_held_by_a_nat_gateway_cannot_be_deleted(group, clients):
    make_ip(clients)
    make_nat(clients)
    err = refused(lambda: clients.network.public_ip_addresses.begin_delete(RG, "ip"))
    assert err.error.code == "PublicIPAddressCannotBeDeleted"
    assert "natGateways/nat" in err.error.message


def test_teardown_in_reference_order_succeeds(group, clients, azure):
    make_ip(clients)
    nat = make_nat(clients)
    make_vnet(clients, nat_id=nat.id)
    before = len(azure.requests)
    clients.network.virtual_networks.begin_delete(RG, "vnet").result()
    clients.network.nat_gateways.begin_delete(RG, "nat").result()
    clients.network.public_ip_addresses.begin_delete(RG, "ip").result()
    first_delete = next(r for r in azure.requests[before:] if r.method == "DELETE" and NAT_TYPE in r.path)
    assert str(first_delete.status) in example("NatGatewayDelete")["responses"]
    assert azure.resources(resource_group=RG) == []


# ------------------------------------------------------------------------------ subnets


def test_subnet_naming_a_missing_nat_gateway_is_an_invalid_reference(group, clients, azure):
    err = refused(lambda: make_vnet(clients, nat_id=rid(azure, NAT_TYPE, "absent")))
    assert err.error.code == "InvalidResourceReference"


def test_subnet_returns_its_nat_gateway_and_default_outbound_access(group, clients):
    make_ip(clients)
    nat = make_nat(clients)
    make_vnet(clients, nat_id=nat.id, defaultOutboundAccess=False)
    subnet = clients.network.subnets.get(RG, "vnet", "compute")
    assert (subnet.nat_gateway.id, subnet.default_outbound_access) == (nat.id, False)


def test_new_vnet_subnets_are_private_from_api_2025_07_01(group, clients):
    # Named, not the SDK's default api-version: the lowest allowed SDK speaks an older one.
    assert make_vnet(clients, api_version="2025-07-01").subnets[0].default_outbound_access is False


def test_new_vnet_subnets_keep_default_outbound_before_api_2025_07_01(group, clients):
    assert make_vnet(clients, api_version="2024-05-01").subnets[0].default_outbound_access is None


def test_an_explicit_default_outbound_access_is_kept(group, clients):
    assert make_vnet(clients, defaultOutboundAccess=True).subnets[0].default_outbound_access is True


def test_private_subnet_answer_has_the_shape_of_the_rest_example(group, clients):
    make_vnet(clients, "vnetname")
    sample = example("SubnetCreateWithSharingScope")
    body = {"properties": {**sample["parameters"]["subnetParameters"]["properties"], "addressPrefix": "10.0.1.0/24",
                           "defaultOutboundAccess": False}}
    subnet = rest_shape(clients.network.subnets.begin_create_or_update(RG, "vnetname", "subnet1", body).result())
    published = sample["responses"]["201"]["body"]
    assert set(published) <= set(subnet)
    assert set(published["properties"]) - {"sharingScope"} <= set(subnet["properties"])
    assert subnet["properties"]["defaultOutboundAccess"] is False


def test_subnet_lists_the_ip_configurations_of_its_nics(clients, network):
    create_vmss(clients, network, capacity=3)
    subnet = clients.network.subnets.get(RG, "vnet", "compute")
    assert len(subnet.ip_configurations) == 3
    assert all("/virtualMachines/" in c.id and "/ipConfigurations/" in c.id for c in subnet.ip_configurations)
    vnet = clients.network.virtual_networks.get(RG, "vnet")
    assert len(vnet.subnets[0].ip_configurations) == 3


def test_scale_set_instance_public_ips_carry_the_requested_sku(clients, network, azure):
    body_sku = {"name": "Standard", "tier": "Regional"}
    from fake_azure_support import vmss_body

    body = vmss_body(network["subnet"], capacity=1, public_ip=True)
    config = body["properties"]["virtualMachineProfile"]["networkProfile"]["networkInterfaceConfigurations"][0]
    config["properties"]["ipConfigurations"][0]["properties"]["publicIPAddressConfiguration"]["sku"] = body_sku
    clients.compute.virtual_machine_scale_sets.begin_create_or_update(RG, "vmss", body).result()
    (ip,) = list(clients.network.public_ip_addresses.list_virtual_machine_scale_set_public_ip_addresses(RG, "vmss"))
    assert (ip.sku.name, ip.sku.tier) == ("Standard", "Regional")
