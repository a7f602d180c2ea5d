"""Outbound access: a new VNet's nodes leave through a NAT gateway with a Standard public IP, created,
found again, converged and destroyed like every other azgpu resource; --no-outbound leaves it out."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from deploy_support import (
    LOCATION,
    NAME,
    NAT,
    NIC,
    NSG,
    PIP,
    RG,
    VMSS,
    VNET,
    assert_cli_error,
    calls,
    cluster_args,
    create_args,
    names,
    ours,
    request,
    writes,
)

import azgpu
from azgpu.deploy import CreateOptions, create
from azgpu.deploy.lifecycle import destroy
from azgpu.errors import AzureError, InputError
from azgpu.profiles import load_profile
from azgpu.testing import FakeAzure

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
CLUSTER_FILES = sorted(p.name for p in EXAMPLES.glob("*.toml"))
SSH_KEY_FILE = EXAMPLES / "demo_key.pub"


def subnet_of(azure) -> dict:
    (vnet,) = azure.resources(type=VNET, resource_group=RG)
    (subnet,) = vnet["properties"]["subnets"]
    return subnet


def top_level(azure, type_: str, rg: str = RG) -> list[dict]:
    """Resources of a type right in the group: not a scale set's per-instance public IPs."""
    return [r for r in azure.resources(type=type_, resource_group=rg) if "/virtualMachineScaleSets/" not in r["id"]]


def example_request(name: str) -> azgpu.Request:
    path = EXAMPLES / name
    values = {**azgpu.read_cluster_file(str(path)), "ssh-key": str(SSH_KEY_FILE)}
    return azgpu.build_request(values, origin=str(path))


def make_room(azure, req: azgpu.Request) -> None:
    """Quota for the example's whole cluster (some examples are larger than the simulated default)."""
    profile = load_profile(req.profile)
    size = profile.size(req.size or profile.default_size)
    vcpus = (req.nodes or 1) * size.vcpus
    for quota in (size.cap("quota_family"), "cores"):
        azure.set_quota(req.location, quota, limit=vcpus)


# ------------------------------------------------------------------------------ every example


@pytest.mark.parametrize("name", CLUSTER_FILES)
def test_every_example_gets_outbound_through_a_nat_gateway_and_destroy_removes_it(sim, state_file, name):
    """`provision create -f EXAMPLE --simulate`, then `provision destroy`: the simulated cloud in between."""
    req = example_request(name)
    profile = load_profile(req.profile)
    args = ("-f", EXAMPLES / name, "--ssh-key", SSH_KEY_FILE)
    if profile.size(req.size or profile.default_size).retired:
        # ND v1 is retired: create refuses it before anything is written (its example says so).
        rc, out, err = sim("create", *args)
        assert_cli_error(rc, err, 2, "SERIES_RETIRED", "")
        assert FakeAzure(state_file=state_file).resources() == []
        return
    make_room(FakeAzure(state_file=state_file), req)
    rc, out, err = sim("create", *args)
    assert rc == 0, err
    assert json.loads(out)["outbound"]["method"] == "nat-gateway"
    azure, rg, cluster = FakeAzure(state_file=state_file), req.resource_group, req.name
    (nat,) = azure.resources(type=NAT, resource_group=rg)
    (ip,) = top_level(azure, PIP, rg)
    (vnet,) = azure.resources(type=VNET, resource_group=rg)
    (subnet,) = vnet["properties"]["subnets"]
    assert subnet["properties"]["natGateway"]["id"] == nat["id"]
    assert subnet["properties"]["defaultOutboundAccess"] is False
    assert nat["properties"]["publicIpAddresses"] == [{"id": ip["id"]}]
    assert ip["properties"]["ipAddress"] and ip["sku"] == {"name": "Standard", "tier": "Regional"}
    nics = azure.resources(type=NIC, resource_group=rg)
    assert len(nics) == req.nodes and all(c["properties"]["subnet"]["id"] == subnet["id"]
                                          for n in nics for c in n["properties"]["ipConfigurations"])
    assert all(ours(r, cluster) for r in (nat, ip))

    rc, out, err = sim("destroy", "-n", cluster, "-g", rg, "--yes")
    assert rc == 0, err
    azure = FakeAzure(state_file=state_file)
    assert azure.resources(type=NAT) == azure.resources(type=PIP) == azure.resources(type=VNET) == []


# ------------------------------------------------------------------------------ the plan on the wire


def test_nat_gateway_and_public_ip_are_tagged_and_named_after_the_cluster(azure, session):
    create(session, request())
    assert (names(azure, NAT), names(azure, PIP)) == (["c1-natgw"], ["c1-natgw-ip"])
    for resource in azure.resources(type=NAT) + azure.resources(type=PIP):
        assert resource["tags"]["azgpu-profile"] == "nd-a100-v4" and ours(resource)


def test_public_ip_then_nat_gateway_then_vnet_then_scale_sets(azure, session):
    create(session, request())
    puts = [r.path.rsplit("/", 2)[-2] for r in calls(azure, "PUT") if "/providers/" in r.path]
    assert puts.index("publicIPAddresses") < puts.index("natGateways") < puts.index("virtualNetworks") \
        < puts.index("virtualMachineScaleSets")


def test_zone_places_the_nat_gateway_and_its_public_ip_in_it(azure, session):
    create(session, request(zone="2"))
    (nat,), (ip,) = azure.resources(type=NAT), azure.resources(type=PIP)
    assert nat["zones"] == ip["zones"] == ["2"]


def test_without_zone_nat_gateway_and_public_ip_are_not_zonal(azure, session):
    create(session, request())
    (nat,), (ip,) = azure.resources(type=NAT), azure.resources(type=PIP)
    assert "zones" not in nat and "zones" not in ip


def test_no_outbound_creates_a_private_subnet_without_nat_gateway(azure, session):
    result = create(session, request(outbound=False)).as_dict()
    assert result["outbound"] == {"method": "none", "default_outbound_access": False}
    assert azure.resources(type=NAT) == azure.resources(type=PIP) == []
    assert subnet_of(azure)["properties"] == {"addressPrefix": "10.0.0.0/16", "defaultOutboundAccess": False,
                                              "provisioningState": "Succeeded"}


def test_no_outbound_warns_what_will_not_work_on_the_cli(azure, cli):
    rc, out, err = cli(*create_args(), "--no-outbound", "--image", "ubuntu-2204-gen2")
    assert rc == 0, err
    line = next(x for x in err.splitlines() if "[OUTBOUND_DISABLED]" in x)
    assert line.startswith("WARNING: ")
    assert "DOCA-OFED" in line and "Run Command results" in line
    assert azure.resources(type=NAT) == []


def test_outbound_false_in_a_cluster_file_turns_it_off(azure, cli, tmp_path):
    path = tmp_path / "cluster.toml"
    path.write_text(f'profile = "nd-a100-v4"\nname = "{NAME}"\nresource-group = "{RG}"\nlocation = "{LOCATION}"\n'
                    f'nodes = 2\noutbound = false\nssh-key = "{SSH_KEY_FILE}"\n')
    rc, out, err = cli("create", "-f", path)
    assert rc == 0, err
    assert json.loads(out)["outbound"]["method"] == "none"
    assert azure.resources(type=NAT) == []


def test_public_ip_per_node_asks_azure_for_the_standard_sku(azure, session):
    create(session, request(public_ip=True, ssh_source="203.0.113.7/32"))
    (vmss,) = azure.resources(type=VMSS)
    nic = vmss["properties"]["virtualMachineProfile"]["networkProfile"]["networkInterfaceConfigurations"][0]
    config = nic["properties"]["ipConfigurations"][0]["properties"]["publicIPAddressConfiguration"]
    assert config["sku"] == {"name": "Standard", "tier": "Regional"}
    ips = list(session.network.public_ip_addresses.list_virtual_machine_scale_set_public_ip_addresses(RG, vmss["name"]))
    assert len(ips) == 2 and {(ip.sku.name, ip.sku.tier) for ip in ips} == {("Standard", "Regional")}


# ------------------------------------------------------------------------------ re-runs and foreign resources


def test_rerun_writes_nothing_once_converged(azure, session):
    create(session, request())
    before = len(azure.requests)
    create(session, request())
    assert writes(azure, since=before) == []


def test_rerun_after_a_failed_nat_gateway_converges(azure, session):
    azure.inject(method="PUT", path="natGateways", operation_error="InternalServerError")
    with pytest.raises(AzureError):
        create(session, request())
    assert azure.resources(type=VMSS) == []  # nothing that needs the network was started
    create(session, request())
    (nat,) = azure.resources(type=NAT)
    assert nat["properties"]["provisioningState"] == "Succeeded"
    assert subnet_of(azure)["properties"]["natGateway"]["id"] == nat["id"]


def test_a_rerun_after_a_zone_fallback_leaves_the_nat_gateways_zone_alone(azure, session):
    # A re-run converges on what Azure holds: the NAT gateway's zone is fixed at creation, so the plan's
    # zone 2 is neither sent (Azure would refuse it) nor shown as a change.
    from azgpu.deploy.whatif import what_if

    azure.inject(method="PUT", path="virtualMachineScaleSets", operation_error="ZonalAllocationFailed")
    create(session, request(zone="1"), CreateOptions(zones=["1", "2"]))
    since = len(azure.requests)
    changes = {c.name: c.symbol for c in what_if(session, request(zone="2")).changes}
    assert changes[f"{NAME}-natgw"] == changes[f"{NAME}-natgw-ip"] == "="
    create(session, request(zone="2"))
    assert not calls(azure, "PUT", "PATCH", "DELETE", since=since)
    (nat,) = azure.resources(type=NAT)
    assert nat["zones"] == ["1"]


def test_a_vnet_from_before_outbound_gets_its_nat_gateway_on_a_rerun(azure, session):
    create(session, request(outbound=False))
    before = len(azure.requests)
    create(session, request())
    assert [r.path.rsplit("/", 1)[-1] for r in calls(azure, "PUT", since=before, path="virtualNetworks")] == ["c1-vnet"]
    (nat,) = azure.resources(type=NAT)
    assert subnet_of(azure)["properties"]["natGateway"]["id"] == nat["id"]


@pytest.mark.parametrize("type_, name", [(NAT, "c1-natgw"), (PIP, "c1-natgw-ip")])
def test_a_foreign_resource_with_our_name_is_refused(azure, session, type_, name):
    azure.add_resource(f"/subscriptions/{azure.subscription_id}/resourceGroups/{RG}", {"location": LOCATION})
    body = {"location": LOCATION, "sku": {"name": "Standard"}, "properties": {}}
    azure.add_resource(f"/subscriptions/{azure.subscription_id}/resourceGroups/{RG}/providers/{type_}/{name}", body)
    before = len(azure.requests)
    with pytest.raises(InputError) as info:
        create(session, request())
    assert info.value.code == "NAME_TAKEN" and name in info.value.message
    assert writes(azure, since=before) == []


# ------------------------------------------------------------------------------ destroy and status


def test_destroy_deletes_the_vnet_then_the_nat_gateway_then_its_public_ip(azure, session):
    create(session, request())
    before = len(azure.requests)
    destroy(session, NAME, RG)
    order = [r.path.rsplit("/", 2)[-2] for r in calls(azure, "DELETE", since=before) if "/providers/" in r.path]
    assert order.index("virtualMachineScaleSets") < order.index("virtualNetworks") < order.index("natGateways") \
        < order.index("publicIPAddresses")
    assert azure.resources(type=NAT) == azure.resources(type=PIP) == []


def test_destroy_leaves_a_foreign_nat_gateway_alone(azure, session):
    create(session, request())
    ip = azure.add_resource(f"/subscriptions/{azure.subscription_id}/resourceGroups/{RG}/providers/{PIP}/shared-ip",
                            {"location": LOCATION, "sku": {"name": "Standard"}, "properties": {}})
    destroy(session, NAME, RG)
    assert azure.get(ip["id"]) == ip


def test_status_shows_the_nat_gateway_and_the_address_traffic_leaves_from(azure, cli, session):
    create(session, request())
    rc, out, err = cli("status", *cluster_args())
    assert rc == 0, err
    (ip,) = azure.resources(type=PIP)
    assert json.loads(out)["outbound"] == {"method": "nat-gateway", "nat_gateway": "c1-natgw",
                                           "public_ips": [{"name": "c1-natgw-ip",
                                                           "ip_address": ip["properties"]["ipAddress"]}]}


def test_status_without_nat_gateway_shows_no_outbound(azure, cli, session):
    create(session, request(outbound=False))
    rc, out, err = cli("status", *cluster_args())
    assert rc == 0, err
    assert json.loads(out)["outbound"] is None


def test_plan_output_names_the_nat_gateway_and_its_public_ip(run):
    rc, out, err = run("plan", "--profile", "nd-h100-v5", "-n", "t1", "-l", LOCATION, "--zone", "3")
    assert rc == 0, err
    summary = json.loads(out)
    assert summary["outbound"] == {"method": "nat-gateway", "nat_gateway": "t1-natgw", "public_ip": "t1-natgw-ip",
                                   "zones": ["3"], "default_outbound_access": False}
    assert {r["type"] for r in summary["resources"]} >= {NAT, PIP}


def test_nsg_is_not_touched_by_outbound(azure, session):
    create(session, request(outbound=False))
    create(session, request())
    (nsg,) = azure.resources(type=NSG)
    assert nsg["properties"]["securityRules"] == []  # no rule opened for the NAT gateway: it is outbound only


def test_cli_error_for_a_bad_outbound_value_in_a_cluster_file(cli, tmp_path, azure):
    path = tmp_path / "cluster.toml"
    path.write_text('profile = "nd-a100-v4"\noutbound = "maybe"\n')
    rc, out, err = cli("create", "-f", path, "-n", NAME, "-g", RG, "-l", LOCATION, "--ssh-key", SSH_KEY_FILE)
    assert_cli_error(rc, err, 2, "INVALID_OUTBOUND", "true or false")
    assert azure.requests == []


def test_a_zone_fallback_keeps_the_nat_gateway_in_the_zone_azure_made_it(azure, session):
    # Zones cannot change after a NAT gateway is made, and a zonal one serves VMs of any zone in its
    # subnets (Learn, NAT gateway and availability zones): the next zone's scale set uses it as it is.
    azure.inject(method="PUT", path="virtualMachineScaleSets", operation_error="ZonalAllocationFailed")
    create(session, request(zone="1"), CreateOptions(zones=["1", "2"]))
    (nat,), (vmss,) = azure.resources(type=NAT), azure.resources(type=VMSS)
    assert (nat["zones"], vmss["zones"]) == (["1"], ["2"])
    assert [r.path for r in calls(azure, "PUT", path="natGateways")] == [nat["id"]]
    assert subnet_of(azure)["properties"]["natGateway"]["id"] == nat["id"]
