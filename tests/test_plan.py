"""What the plan (and so every rendered template) holds: security, network, login, OFED, tags."""

from __future__ import annotations

import base64
import json

import pytest

from azgpu import list_profiles, load_profile
from azgpu.render.arm import render_arm, render_arm_parameters, to_json
from azgpu.render.bicep import render_bicep, render_bicepparam

ALL_PROFILES = [p.id for p in list_profiles()]


def vm_profile(vmss) -> dict:
    return vmss.body["properties"]["virtualMachineProfile"]


def nic(vmss) -> dict:
    return vm_profile(vmss)["networkProfile"]["networkInterfaceConfigurations"][0]["properties"]


@pytest.mark.parametrize("profile", ALL_PROFILES)
def test_security_type_is_explicitly_standard_by_default(az, profile):
    for vmss in az.plan(profile=profile, nodes=18).scale_sets:
        assert vm_profile(vmss)["securityProfile"] == {"securityType": "Standard"}


def test_accelerated_networking_is_off_on_nd_v1(az):
    plan = az.plan(profile="nd", size="ND6")
    assert nic(plan.scale_sets[0])["enableAcceleratedNetworking"] is False
    assert az.only(plan.spec.findings, "ACCELERATED_NETWORKING_OFF").severity == "note"


def test_accelerated_networking_is_on_for_nd_a100_v4(az):
    plan = az.plan(profile="nd-a100-v4")
    assert nic(plan.scale_sets[0])["enableAcceleratedNetworking"] is True
    assert "ACCELERATED_NETWORKING_OFF" not in az.codes(plan.spec.findings)


def test_nsg_has_no_inbound_rule_by_default(az):
    nsg = az.plan(profile="nd-a100-v4").resource("nsg")
    assert nsg.body["properties"]["securityRules"] == []


def test_ssh_source_adds_exactly_one_inbound_ssh_rule(az):
    nsg = az.plan(profile="nd-a100-v4", ssh_source="203.0.113.7/32").resource("nsg")
    (rule,) = nsg.body["properties"]["securityRules"]
    props = rule["properties"]
    assert (props["direction"], props["access"], props["protocol"]) == ("Inbound", "Allow", "Tcp")
    assert (props["sourceAddressPrefix"], props["destinationPortRange"]) == ("203.0.113.7/32", "22")


def test_every_scale_set_uses_the_nsg(az):
    plan = az.plan(profile="nd-a100-v4", nodes=150)
    for vmss in plan.scale_sets:
        assert nic(vmss)["networkSecurityGroup"]["id"].key == "nsg"
        assert "nsg" in vmss.depends_on


def test_no_public_ip_unless_asked(az):
    ip_config = nic(az.plan(profile="nd-a100-v4").scale_sets[0])["ipConfigurations"][0]["properties"]
    assert "publicIPAddressConfiguration" not in ip_config


def test_public_ip_flag_adds_a_public_ip_configuration(az):
    plan = az.plan(profile="nd-a100-v4", public_ip=True, ssh_source="203.0.113.7/32")
    ip_config = nic(plan.scale_sets[0])["ipConfigurations"][0]["properties"]
    assert ip_config["publicIPAddressConfiguration"]["name"] == "public"


def test_password_login_is_disabled_and_the_key_is_a_parameter(az, ssh_key):
    plan = az.plan(profile="nd-a100-v4")
    linux = vm_profile(plan.scale_sets[0])["osProfile"]["linuxConfiguration"]
    assert linux["disablePasswordAuthentication"] is True
    (key,) = linux["ssh"]["publicKeys"]
    assert key["keyData"].name == "sshPublicKey"
    assert "adminPassword" not in vm_profile(plan.scale_sets[0])["osProfile"]


def test_key_text_is_only_in_the_parameter_files(az, ssh_key):
    plan = az.plan(profile="nd-a100-v4")
    key_body = ssh_key.split()[1]
    assert key_body not in to_json(render_arm(plan))
    assert key_body not in render_bicep(plan)
    assert render_arm_parameters(plan)["parameters"]["sshPublicKey"] == {"value": ssh_key}
    assert f"param sshPublicKey = '{ssh_key}'" in render_bicepparam(plan)


def test_arm_template_takes_the_key_as_a_parameter(az):
    template = render_arm(az.plan(profile="nd-a100-v4"))
    assert template["parameters"]["sshPublicKey"]["type"] == "string"
    vmss = template["resources"][-1]
    key = vmss["properties"]["virtualMachineProfile"]["osProfile"]["linuxConfiguration"]["ssh"]["publicKeys"][0]
    assert key == {"path": "[format('/home/{0}/.ssh/authorized_keys', parameters('adminUsername'))]",
                   "keyData": "[parameters('sshPublicKey')]"}


def test_without_a_key_the_parameter_is_left_to_fill(az):
    plan = az.plan(profile="nd-a100-v4", ssh_key=None)
    assert "sshPublicKey" not in render_arm_parameters(plan)["parameters"]
    assert az.only(plan.spec.findings, "SSH_KEY_NOT_SET").severity == "warning"


def cloud_config(vmss) -> str:
    return base64.b64decode(vm_profile(vmss)["osProfile"]["customData"]).decode()


def test_plain_image_on_ndv2_installs_the_pinned_ofed_through_cloud_init(az):
    plan = az.plan(profile="ndv2", image="ubuntu-2204-gen2")
    f = az.only(plan.spec.findings, "OFED_INSTALLED")
    assert f.severity == "warning"
    assert f.remedy == "or use an Azure HPC image with OFED preinstalled, e.g. --image ubuntu-hpc-2204-v100"
    config = cloud_config(plan.scale_sets[0])
    assert config.startswith("#cloud-config\nruncmd:\n")
    # The seed's pin for InfiniBand on ND40rs_v2.
    assert load_profile("ndv2").ofed["pinned"] == "mlnx:4.7-1.0.0.1"
    assert "# MLNX_OFED 4.7-1.0.0.1 (profile pin)" in config
    assert "MLNX_OFED-4.7-1.0.0.1/" in config and "mlnxofedinstall" in config


def test_plain_image_on_nd_a100_v4_installs_the_pinned_doca(az):
    config = cloud_config(az.plan(profile="nd-a100-v4", image="ubuntu-2204-gen2").scale_sets[0])
    assert "# DOCA-OFED 3.2.1 from NVIDIA's repository (profile pin)" in config


def test_plain_image_on_nd24rs_installs_mlnx_ofed_4_9(az):
    config = cloud_config(az.plan(profile="nd", size="ND24rs").scale_sets[0])
    assert "# MLNX_OFED 4.9-6.0.6.0 (profile pin)" in config
    assert "mlnxofedinstall" in config


def test_hpc_image_gets_no_cloud_init(az):
    assert "customData" not in vm_profile(az.plan(profile="ndv2").scale_sets[0])["osProfile"]


def test_every_resource_is_tagged(az):
    plan = az.plan(profile="nd-a100-v4", nodes=150, tags={"team": "ml"})
    for resource in plan.resources:
        assert resource.body["tags"] == {"team": "ml", "managed-by": "azgpu", "azgpu-cluster": "demo",
                                         "azgpu-profile": "nd-a100-v4"}


def test_names_are_deterministic(az):
    first = [(r.type, r.name) for r in az.plan(profile="nd-a100-v4", nodes=150).resources]
    second = [(r.type, r.name) for r in az.plan(profile="nd-a100-v4", nodes=150).resources]
    assert first == second == [
        ("Microsoft.Network/networkSecurityGroups", "demo-nsg"),
        ("Microsoft.Network/publicIPAddresses", "demo-natgw-ip"),
        ("Microsoft.Network/natGateways", "demo-natgw"),
        ("Microsoft.Network/virtualNetworks", "demo-vnet"),
        ("Microsoft.Compute/virtualMachineScaleSets", "demo-vmss000"),
        ("Microsoft.Compute/virtualMachineScaleSets", "demo-vmss001"),
    ]


def test_existing_subnet_replaces_the_new_vnet(az):
    subnet = "/subscriptions/0000/resourceGroups/net-rg/providers/Microsoft.Network/virtualNetworks/hub/subnets/gpu"
    plan = az.plan(profile="nd-a100-v4", subnet_id=subnet)
    assert [r.key for r in plan.resources] == ["nsg", "vmss000"]
    assert nic(plan.scale_sets[0])["ipConfigurations"][0]["properties"]["subnet"] == {"id": subnet}


def test_scale_sets_are_deployed_after_network(az):
    waves = az.plan(profile="nd-a100-v4", nodes=150).waves()
    assert [[r.key for r in wave] for wave in waves] == [
        ["nsg", "natPublicIp"], ["natGateway"], ["vnet"], ["vmss000", "vmss001"]]


def test_arm_json_is_valid_json_with_dependencies(az):
    template = json.loads(to_json(render_arm(az.plan(profile="nd-a100-v4"))))
    vmss = template["resources"][4]
    assert vmss["dependsOn"] == ["[resourceId('Microsoft.Network/networkSecurityGroups', 'demo-nsg')]",
                                 "[resourceId('Microsoft.Network/virtualNetworks', 'demo-vnet')]"]


def test_arm_escapes_literal_strings_that_look_like_expressions(az):
    template = render_arm(az.plan(profile="nd-a100-v4", tags={"note": "[not an expression]"}))
    assert template["resources"][0]["tags"]["note"] == "[[not an expression]"


def test_bicep_writes_a_decimal_max_price_with_json(az):
    text = render_bicep(az.plan(profile="nd-a100-v4", spot=True, max_price=0.25))
    assert "maxPrice: json('0.25')" in text


def test_bicep_writes_a_whole_max_price_as_an_integer(az):
    text = render_bicep(az.plan(profile="nd-a100-v4", spot=True, max_price=-1.0))
    assert "maxPrice: -1\n" in text


# -- marketplace purchase plans -------------------------------------------------------------------

def test_scale_set_of_a_plan_image_carries_the_plan_at_top_level(az):
    vmss = az.plan(profile="nd-a100-v4", image="almalinux-hpc-8-10").scale_sets[0]
    assert vmss.body["plan"] == {"name": "8_10-hpc-gen2", "publisher": "almalinux", "product": "almalinux-hpc"}


def test_scale_set_of_an_image_without_plan_has_no_plan(az):
    assert "plan" not in az.plan(profile="nd-a100-v4", image="ubuntu-hpc-2204").scale_sets[0].body


def test_rendered_templates_include_the_plan(az):
    plan = az.plan(profile="nd-a100-v4", image="almalinux-hpc-8-10")
    vmss = next(r for r in render_arm(plan)["resources"] if r["type"].endswith("virtualMachineScaleSets"))
    assert vmss["plan"]["name"] == "8_10-hpc-gen2"
    assert "plan: {" in render_bicep(plan) and "product: 'almalinux-hpc'" in render_bicep(plan)


# ------------------------------------------------------------------------------ outbound access


def test_new_vnet_gets_a_standard_nat_gateway_with_a_static_standard_public_ip(az):
    plan = az.plan(profile="nd-a100-v4")
    ip, nat = plan.resource("natPublicIp"), plan.resource("natGateway")
    assert (ip.type, ip.api_version, nat.type, nat.api_version) == (
        "Microsoft.Network/publicIPAddresses", "2026-03-01", "Microsoft.Network/natGateways", "2026-03-01")
    assert ip.body["sku"] == {"name": "Standard", "tier": "Regional"}
    assert ip.body["properties"] == {"publicIPAddressVersion": "IPv4", "publicIPAllocationMethod": "Static"}
    assert nat.body["sku"] == {"name": "Standard"}
    assert nat.body["properties"]["idleTimeoutInMinutes"] == 4
    assert nat.depends_on == ["natPublicIp"]
    assert render_arm(plan)["resources"][2]["properties"]["publicIpAddresses"] == [
        {"id": "[resourceId('Microsoft.Network/publicIPAddresses', 'demo-natgw-ip')]"}]


def test_the_subnet_is_private_and_leaves_through_the_nat_gateway(az):
    plan = az.plan(profile="nd-a100-v4")
    subnet = plan.resource("vnet").body["properties"]["subnets"][0]["properties"]
    assert subnet["defaultOutboundAccess"] is False
    assert "natGateway.id" in render_bicep(plan)
    assert plan.resource("vnet").depends_on == ["natGateway"]


def test_zone_makes_the_nat_gateway_and_its_public_ip_zonal_in_it(az):
    plan = az.plan(profile="nd-a100-v4", zone="3")
    assert plan.resource("natGateway").body["zones"] == plan.resource("natPublicIp").body["zones"] == ["3"]


def test_without_zone_the_nat_gateway_and_its_public_ip_have_no_zones(az):
    plan = az.plan(profile="nd-a100-v4")
    assert "zones" not in plan.resource("natGateway").body and "zones" not in plan.resource("natPublicIp").body


def test_no_outbound_keeps_the_subnet_private_without_a_nat_gateway(az):
    plan = az.plan(profile="nd-a100-v4", outbound=False)
    assert [r.key for r in plan.resources] == ["nsg", "vnet", "vmss000"]
    assert plan.resource("vnet").body["properties"]["subnets"][0]["properties"] == {
        "addressPrefix": "10.0.0.0/16", "defaultOutboundAccess": False}
    assert plan.summary()["outbound"] == {"method": "none", "default_outbound_access": False}


def test_summary_describes_each_way_out(az):
    subnet = "/subscriptions/0000/resourceGroups/net-rg/providers/Microsoft.Network/virtualNetworks/hub/subnets/gpu"
    assert az.plan(profile="ng").summary()["outbound"]["method"] == "nat-gateway"
    assert az.plan(profile="ng", subnet_id=subnet).summary()["outbound"] == {
        "method": "existing-subnet", "subnet_id": subnet}
    assert az.plan(profile="ng", outbound=False, public_ip=True).summary()["outbound"]["method"] == "node-public-ips"


def test_the_plan_notes_how_the_nodes_reach_the_internet(az):
    assert any("NAT gateway demo-natgw" in n for n in az.plan(profile="nd-a100-v4").notes)
    assert not any("NAT gateway" in n for n in az.plan(profile="nd-a100-v4", outbound=False).notes)


def test_per_node_public_ips_ask_for_the_standard_sku(az):
    plan = az.plan(profile="ng", public_ip=True, ssh_source="203.0.113.7/32")
    config = nic(plan.scale_sets[0])["ipConfigurations"][0]["properties"]["publicIPAddressConfiguration"]
    assert config["sku"] == {"name": "Standard", "tier": "Regional"}


def test_ephemeral_placement_follows_the_spec_when_preflight_chose_one(az):
    from msgspec import structs

    from azgpu.plan import build_plan

    spec = az.spec("render", profile="nd-h100-v5", ephemeral_os_disk=True)
    documented = build_plan(spec).scale_sets[0].body["properties"]["virtualMachineProfile"]["storageProfile"]
    live = build_plan(structs.replace(spec, ephemeral_placement="NvmeDisk")).scale_sets[0].body
    assert documented["osDisk"]["diffDiskSettings"]["placement"] == "ResourceDisk"
    assert live["properties"]["virtualMachineProfile"]["storageProfile"]["osDisk"]["diffDiskSettings"] == {
        "option": "Local", "placement": "NvmeDisk"}


def test_teardown_goes_scale_sets_then_network_then_nat_gateway_then_its_public_ip():
    from azgpu import resource_types as rt

    order = [rt.of(t).teardown
             for t in ("Microsoft.Compute/virtualMachineScaleSets", "Microsoft.Network/virtualNetworks",
                       "Microsoft.Network/natGateways", "Microsoft.Network/publicIPAddresses")]
    assert order == sorted(order) and len(set(order)) == 4
    assert rt.of("microsoft.network/natgateways") is rt.NAT_GATEWAY


def test_plan_without_a_key_only_notes_what_create_will_need(az, run):
    assert az.only(az.findings("plan", profile="nd-a100-v4", ssh_key=None), "SSH_KEY_NOT_SET").severity == "note"
    rc, _, err = run("plan", "--profile", "nd-a100-v4", "-n", "c1", "-l", "eastus", "-o", "none")
    assert rc == 0 and "SSH_KEY_NOT_SET" not in err and "main.parameters.json" not in err
