"""Every validation rule: a request that passes it and one that breaks it (code AND remedy)."""

from __future__ import annotations

import os

import pytest

from azgpu import images, naming
from azgpu.images import Image

# ------------------------------------------------------------------------------ images


def test_gen1_image_on_gen2_only_size_fails(az):
    f = az.only(az.errors(profile="nd-a100-v4", image="ubuntu-2204-gen1"), "IMAGE_GENERATION")
    assert "cannot boot Hypervisor Generation 1" in f.message
    assert f.remedy == "use a Generation 2 image, e.g. --image ubuntu-hpc-2204"
    assert f.source


def test_gen2_image_on_gen2_only_size_passes(az):
    assert "IMAGE_GENERATION" not in az.codes(az.findings(profile="nd-a100-v4", image="ubuntu-2204-gen2"))


def test_gen1_image_on_size_that_boots_gen1_passes(az):
    # ND v1 documents Generation 1 and 2 (render: the series is retired).
    assert "IMAGE_GENERATION" not in az.codes(az.findings("render", profile="nd", size="ND6", image="ubuntu-2204-gen1"))


def test_x64_image_on_arm64_size_fails(az):
    f = az.only(az.errors(profile="nd-gb300-v6", nodes=18, image="ubuntu-hpc-2204"), "IMAGE_ARCHITECTURE")
    assert "x64" in f.message and "Arm64" in f.message
    assert f.remedy == "use an Arm64 image, e.g. --image ubuntu-hpc-2404-gb"


def test_arm64_image_on_x64_size_fails(az):
    f = az.only(az.errors(profile="nd-a100-v4", image="ubuntu-2204-arm64"), "IMAGE_ARCHITECTURE")
    assert f.remedy == "use an x64 image, e.g. --image ubuntu-hpc-2204"


def test_arm64_image_on_arm64_size_passes(az):
    assert "IMAGE_ARCHITECTURE" not in az.codes(az.findings(profile="nd-gb300-v6", nodes=18))


def test_cuda13_image_on_v100_fails(az):
    f = az.only(az.errors(profile="ndv2", image="ubuntu-hpc-2204"), "IMAGE_CUDA_UNSUPPORTED")
    assert "CUDA 13" in f.message and "Volta" in f.message
    assert f.remedy == "use the V100 image: --image ubuntu-hpc-2204-v100"


def test_v100_image_on_v100_passes(az):
    spec = az.spec(profile="ndv2", image="ubuntu-hpc-2204-v100")
    assert "IMAGE_CUDA_UNSUPPORTED" not in az.codes(spec.findings)


def test_cuda_image_on_mi300x_fails(az):
    f = az.only(az.errors(profile="nd-mi300x-v5", image="ubuntu-hpc-2204"), "IMAGE_GPU_STACK")
    assert "CUDA" in f.message and "ROCM" in f.message
    assert f.remedy == "use --image ubuntu-hpc-2204-rocm"


def test_rocm_image_on_mi300x_passes(az):
    assert "IMAGE_GPU_STACK" not in az.codes(az.spec(profile="nd-mi300x-v5").findings)


def test_windows_image_is_refused_because_the_plan_writes_linux_configuration(az):
    # NG lists a Windows image, but the plan only knows linuxConfiguration + SSH keys.
    f = az.only(az.errors(profile="ng", image="windows-2022-gen2"), "WINDOWS_IMAGE_UNSUPPORTED")
    assert f.remedy == "use a Linux image, e.g. --image ubuntu-2404-gen2"


def test_non_hpc_image_is_not_recommended(az):
    f = az.only(az.spec(profile="nd-a100-v4", image="ubuntu-2204-gen2").findings, "IMAGE_NOT_RECOMMENDED")
    assert f.severity == "warning"
    assert f.remedy.startswith("use --image ubuntu-hpc-2204 (or one of ubuntu-hpc-2404")


def test_recommended_hpc_image_passes(az):
    assert "IMAGE_NOT_RECOMMENDED" not in az.codes(az.spec(profile="nd-a100-v4", image="ubuntu-hpc-2404").findings)


def test_unknown_urn_is_a_warning_not_an_error(az):
    urn = "Contoso:custom-offer:gpu-sku:1.2.3"
    spec = az.spec(profile="nd-a100-v4", image=urn)
    f = az.only(spec.findings, "IMAGE_UNKNOWN")
    assert f.severity == "warning"
    assert f.remedy == "the deployer's preflight checks it live; or choose a catalog image ('provision images list')"
    assert spec.image.reference() == {"publisher": "Contoso", "offer": "custom-offer", "sku": "gpu-sku",
                                      "version": "1.2.3"}


def test_catalog_urn_is_known(az):
    spec = az.spec(profile="nd-a100-v4", image="microsoft-dsvm:ubuntu-hpc:2204:latest")
    assert "IMAGE_UNKNOWN" not in az.codes(spec.findings)
    assert spec.image.name == "ubuntu-hpc-2204"


def test_unverified_image_warns(az):
    f = az.only(az.spec(profile="nd-gb300-v6", nodes=18).findings, "IMAGE_UNVERIFIED")
    assert f.severity == "warning"
    assert f.remedy == "check it exists: 'az vm image list --urn microsoft-dsvm:ubuntu-hpc:2404-gb:latest --all'"
    assert "\n" not in f.source and len(f.source) < 100  # a pointer, not ten lines of sources on every command


def test_image_that_is_neither_name_nor_urn_fails(az):
    f = az.only(az.errors(profile="nd-a100-v4", image="ubuntu-hpc-2205"), "INVALID_IMAGE")
    assert f.remedy.startswith("did you mean 'ubuntu-hpc-2204'?")


# ------------------------------------------------------------------------------ InfiniBand


IB_PROFILES = ["nd-a100-v4", "ndm-a100-v4", "nd-h100-v5", "nd-h200-v5", "nd-mi300x-v5", "ndv2"]
RACK_PROFILES = ["nd-gb200-v6", "nd-gb300-v6"]


@pytest.mark.parametrize("profile", IB_PROFILES)
def test_infiniband_scale_sets_are_uniform_with_one_placement_group(az, profile):
    plan = az.plan(profile=profile, nodes=36)
    assert plan.scale_sets
    for vmss in plan.scale_sets:
        assert vmss.body["properties"]["orchestrationMode"] == "Uniform"
        assert vmss.body["properties"]["singlePlacementGroup"] is True


@pytest.mark.parametrize("profile", RACK_PROFILES)
def test_vertical_connect_racks_span_placement_groups_as_microsoft_deploys_them(az, profile):
    # Azure/AgentBaker's GB300 end-to-end test: a single placement group, or highSpeedInterconnectPlacement,
    # is refused with 400 "Vertical Connect Feature is not available for this Virtual Machine Scale Set".
    plan = az.plan(profile=profile, nodes=36, ephemeral_os_disk=True)
    assert plan.scale_sets
    for vmss in plan.scale_sets:
        props = vmss.body["properties"]
        assert props["orchestrationMode"] == "Uniform"
        assert props["singlePlacementGroup"] is False
        assert props["platformFaultDomainCount"] == 1
        assert "highSpeedInterconnectPlacement" not in props
        os_disk = props["virtualMachineProfile"]["storageProfile"]["osDisk"]
        assert os_disk["diffDiskSettings"] == {"option": "Local", "placement": "CacheDisk"}
        assert vmss.body["sku"]["capacity"] % 18 == 0


def test_infiniband_size_of_retired_nd_is_uniform_with_one_placement_group(az):
    (vmss,) = az.plan(profile="nd", size="Standard_ND24rs").scale_sets
    assert vmss.body["properties"]["orchestrationMode"] == "Uniform"
    assert vmss.body["properties"]["singlePlacementGroup"] is True


def test_no_plan_ever_uses_flexible_orchestration(az):
    for profile in [*IB_PROFILES, "ng"]:
        for vmss in az.plan(profile=profile, nodes=36).scale_sets:
            assert vmss.body["properties"]["orchestrationMode"] != "Flexible"


def test_nodes_within_one_domain_make_one_scale_set(az):
    spec = az.spec(profile="nd-a100-v4", nodes=100)
    assert spec.scale_sets == (100,)
    assert "IB_DOMAIN_SPLIT" not in az.codes(spec.findings)


def test_nodes_beyond_the_domain_split_into_scale_sets_with_a_warning(az):
    spec = az.spec(profile="nd-a100-v4", nodes=250)
    assert spec.scale_sets == (100, 100, 50)
    f = az.only(spec.findings, "IB_DOMAIN_SPLIT")
    assert f.severity == "warning"
    assert "raise --max-ib-domain (up to 300)" in f.remedy
    plan = az.plan(profile="nd-a100-v4", nodes=250)
    assert [v.body["sku"]["capacity"] for v in plan.scale_sets] == [100, 100, 50]
    assert [v.name for v in plan.scale_sets] == ["demo-vmss000", "demo-vmss001", "demo-vmss002"]


def test_max_ib_domain_sets_the_split(az):
    spec = az.spec(profile="nd-h100-v5", nodes=120, max_ib_domain=50)
    assert spec.scale_sets == (50, 50, 20)
    assert "IB_DOMAIN_SPLIT" in az.codes(spec.findings)


def test_max_ib_domain_above_default_warns_raised(az):
    spec = az.spec(profile="nd-a100-v4", nodes=250, max_ib_domain=300)
    assert spec.scale_sets == (250,)
    f = az.only(spec.findings, "IB_DOMAIN_RAISED")
    assert f.severity == "warning"
    assert f.remedy == "ask Azure support to raise the single placement group limit for this subscription first"


def test_max_ib_domain_at_default_does_not_warn(az):
    assert "IB_DOMAIN_RAISED" not in az.codes(az.spec(profile="nd-a100-v4", max_ib_domain=100).findings)


@pytest.mark.parametrize("domain", [301, 0, -5])
def test_max_ib_domain_out_of_range_fails(az, domain):
    f = az.only(az.errors(profile="nd-a100-v4", max_ib_domain=domain), "INVALID_MAX_IB_DOMAIN")
    assert f.remedy == "pass --max-ib-domain 100 (the default) or up to 300 once Azure support raised the limit"


def test_max_ib_domain_on_size_without_infiniband_warns(az):
    f = az.only(az.spec(profile="ng", max_ib_domain=50).findings, "IB_NOT_AVAILABLE")
    assert f.remedy == "drop --max-ib-domain"


# ------------------------------------------------------------------------------ OFED


def test_image_with_ofed_older_than_the_minimum_fails(az, monkeypatch):
    old = Image(name="ubuntu-hpc-old-ofed", urn="microsoft-dsvm:ubuntu-hpc:old-ofed:latest", os="Ubuntu 20.04",
                os_family="ubuntu", generations=("V2",), architecture="x64", hpc=True, ofed="mlnx:4.9-6.0.6.0",
                gpu_stack="cuda", cuda="11.4", source=("R-azhpc",))
    monkeypatch.setitem(images.catalog(), old.name, old)
    f = az.only(az.errors(profile="nd-a100-v4", image=old.name), "OFED_TOO_OLD")
    assert "MLNX_OFED 4.9-6.0.6.0" in f.message and "MLNX_OFED 5.1" in f.message
    assert f.remedy == "use a newer image, e.g. --image ubuntu-hpc-2204"


def test_image_with_current_ofed_passes(az):
    codes = az.codes(az.spec(profile="nd-a100-v4", image="centos-hpc-7-9").findings)  # MLNX_OFED 5.4 >= 5.1
    assert not codes & {"OFED_TOO_OLD", "OFED_TOO_NEW", "OFED_INSTALLED"}


def test_doca_image_is_too_new_for_connectx3_pro(az):
    # ND24rs (ConnectX-3 Pro) needs MLNX_OFED 4.9 LTS; ND v1 is retired, so use render.
    f = az.only(az.errors("render", profile="nd", size="ND24rs", image="ubuntu-hpc-2204"), "OFED_TOO_NEW")
    assert "DOCA-OFED 3.2.1" in f.message
    assert f.remedy == "use an image with MLNX_OFED 4.9 LTS (ConnectX-3 Pro) or a plain image and install it"


def test_plain_image_on_connectx3_pro_is_not_too_new(az):
    assert "OFED_TOO_NEW" not in az.codes(az.spec("render", profile="nd", size="ND24rs").findings)


def test_ofed_is_not_checked_on_sizes_without_infiniband(az):
    codes = az.codes(az.spec("render", profile="nd", size="ND6", image="ubuntu-hpc-2204").findings)
    assert not codes & {"OFED_TOO_NEW", "OFED_INSTALLED"}


# ------------------------------------------------------------------------------ network


@pytest.mark.parametrize("prefix", ["172.16.0.0/12", "172.16.5.0/24"])
def test_vnet_overlapping_the_rdma_range_fails(az, prefix):
    f = az.only(az.errors(profile="nd-a100-v4", vnet_address_prefix=prefix), "VNET_RDMA_OVERLAP")
    assert "172.16.0.0/16" in f.message
    assert f.remedy == "choose another range, e.g. --vnet-address-prefix 10.0.0.0/16"


def test_vnet_outside_the_rdma_range_passes(az):
    assert az.spec(profile="nd-a100-v4", vnet_address_prefix="10.0.0.0/16").vnet_prefix == "10.0.0.0/16"


def test_rdma_range_is_free_on_series_without_infiniband(az):
    assert "VNET_RDMA_OVERLAP" not in az.codes(az.findings(profile="ng", vnet_address_prefix="172.16.0.0/12"))


def test_subnet_too_small_for_the_nodes_fails(az):
    f = az.only(az.errors(profile="nd-a100-v4", nodes=12, vnet_address_prefix="10.0.0.0/28"), "SUBNET_TOO_SMALL")
    assert "11 node addresses" in f.message
    assert f.remedy == "pass a larger --vnet-address-prefix, e.g. 10.0.0.0/16"


def test_subnet_just_large_enough_passes(az):
    assert az.spec(profile="nd-a100-v4", nodes=11, vnet_address_prefix="10.0.0.0/28").nodes == 11


def test_public_ip_without_ssh_source_warns(az):
    f = az.only(az.spec(profile="nd-a100-v4", public_ip=True).findings, "PUBLIC_IP_WITHOUT_SSH_RULE")
    assert f.severity == "warning"
    assert f.remedy == "add --ssh-source with your address to reach the nodes, e.g. --ssh-source 203.0.113.7/32"


def test_public_ip_with_ssh_source_passes(az):
    spec = az.spec(profile="nd-a100-v4", public_ip=True, ssh_source="203.0.113.7/32")
    assert "PUBLIC_IP_WITHOUT_SSH_RULE" not in az.codes(spec.findings)


@pytest.mark.parametrize("source", ["0.0.0.0/0", "*", "Internet"])
def test_ssh_open_to_the_internet_warns(az, source):
    spec = az.spec(profile="nd-a100-v4", ssh_source=source)
    f = az.only(spec.findings, "SSH_OPEN_TO_INTERNET")
    assert f.severity == "warning"
    assert f.remedy == "narrow it to your address, e.g. --ssh-source 203.0.113.7/32"
    assert spec.ssh_source == "Internet"


def test_ssh_from_one_address_does_not_warn(az):
    spec = az.spec(profile="nd-a100-v4", ssh_source="203.0.113.7")
    assert "SSH_OPEN_TO_INTERNET" not in az.codes(spec.findings)
    assert spec.ssh_source == "203.0.113.7/32"


# ------------------------------------------------------------------------------ security type


@pytest.mark.parametrize("profile", ["nd-a100-v4", "ndm-a100-v4"])
def test_trusted_launch_on_a100_fails(az, profile):
    f = az.only(az.errors(profile=profile, security_type="TrustedLaunch"), "TRUSTED_LAUNCH_UNSUPPORTED")
    assert f.remedy == "use --security-type Standard (azgpu's default for GPU sizes)"
    assert "Trusted launch" in f.source


@pytest.mark.parametrize("profile", ["nd-a100-v4", "ndm-a100-v4"])
def test_standard_security_on_a100_passes(az, profile):
    assert az.spec(profile=profile, security_type="standard").security_type == "Standard"


def test_trusted_launch_on_h100_warns_undocumented(az):
    spec = az.spec(profile="nd-h100-v5", security_type="TrustedLaunch")
    f = az.only(spec.findings, "TRUSTED_LAUNCH_UNDOCUMENTED")
    assert f.severity == "warning"
    assert f.remedy == "azgpu sets secureBootEnabled=false; use --security-type Standard if the deployment fails"
    (vmss,) = az.plan(profile="nd-h100-v5", security_type="TrustedLaunch").scale_sets
    security = vmss.body["properties"]["virtualMachineProfile"]["securityProfile"]
    assert security == {"securityType": "TrustedLaunch",
                        "uefiSettings": {"secureBootEnabled": False, "vTpmEnabled": True}}


def test_trusted_launch_on_documented_series_has_no_finding(az):
    spec = az.spec(profile="ndv2", security_type="TrustedLaunch")
    assert not az.codes(spec.findings) & {"TRUSTED_LAUNCH_UNSUPPORTED", "TRUSTED_LAUNCH_UNDOCUMENTED"}


def test_unknown_security_type_fails(az):
    f = az.only(az.errors(profile="nd-h100-v5", security_type="Confidential"), "INVALID_SECURITY_TYPE")
    assert f.remedy == "pass --security-type Standard"


# ------------------------------------------------------------------------------ retirement


@pytest.mark.parametrize("command", ["validate", "plan", "create"])
def test_retired_series_is_an_error_when_it_would_be_deployed(az, command):
    f = az.only(az.errors(command, profile="nd", resource_group="ml-rg"), "SERIES_RETIRED")
    assert "2023-09-06" in f.message
    assert f.remedy == ("choose a current series, e.g. --profile nd-a100-v4 or --profile nd-h100-v5 "
                        "('provision profiles list')")


def test_retired_series_only_warns_when_rendered(az):
    f = az.only(az.spec("render", profile="nd").findings, "SERIES_RETIRED")
    assert f.severity == "warning"


def test_current_series_is_not_retired(az):
    assert "SERIES_RETIRED" not in az.codes(az.spec(profile="ndv2").findings)


# ------------------------------------------------------------------------------ disks, spot


def test_too_many_data_disks_fail(az):
    f = az.only(az.errors(profile="nd-a100-v4", data_disks=33), "DATA_DISKS_OVER_LIMIT")
    assert f.remedy == "pass --data-disks 32 or fewer"


def test_data_disks_at_the_limit_pass(az):
    (vmss,) = az.plan(profile="nd-a100-v4", data_disks=32).scale_sets
    disks = vmss.body["properties"]["virtualMachineProfile"]["storageProfile"]["dataDisks"]
    assert [d["lun"] for d in disks] == list(range(32))


def test_spot_on_size_that_cannot_run_spot_fails(az):
    f = az.only(az.errors(profile="nd-mi300x-v5", spot=True), "SPOT_NOT_CAPABLE")
    assert f.remedy == "drop --spot"


def test_spot_on_spot_capable_size_passes(az):
    (vmss,) = az.plan(profile="nd-a100-v4", spot=True, max_price=0.5).scale_sets
    vm = vmss.body["properties"]["virtualMachineProfile"]
    assert (vm["priority"], vm["evictionPolicy"], vm["billingProfile"]) == ("Spot", "Delete", {"maxPrice": 0.5})


def test_max_price_without_spot_fails(az):
    f = az.only(az.errors(profile="nd-a100-v4", max_price=2), "MAX_PRICE_WITHOUT_SPOT")
    assert f.remedy == "add --spot, or drop --max-price"


@pytest.mark.parametrize("price", [0, -2, float("nan"), float("inf")])
def test_invalid_max_price_fails(az, price):
    f = az.only(az.errors(profile="nd-a100-v4", spot=True, max_price=price), "INVALID_MAX_PRICE")
    assert f.remedy == "pass --max-price -1 or a price in US dollars per hour"


def test_max_price_minus_one_means_on_demand_cap(az):
    (vmss,) = az.plan(profile="nd-a100-v4", spot=True, max_price=-1).scale_sets
    assert vmss.body["properties"]["virtualMachineProfile"]["billingProfile"] == {"maxPrice": -1}


def test_ephemeral_os_disk_larger_than_the_resource_disk_fails(az):
    f = az.only(az.errors(profile="nd-h100-v5", ephemeral_os_disk=True, os_disk_size_gb=2000),
                "EPHEMERAL_OS_DISK_TOO_LARGE")
    assert "1024 GiB resource disk" in f.message
    assert f.remedy == "pass --os-disk-size-gb 1024 or less, or drop --ephemeral-os-disk"


def test_ephemeral_os_disk_that_fits_passes(az):
    (vmss,) = az.plan(profile="nd-h100-v5", ephemeral_os_disk=True, os_disk_size_gb=1000).scale_sets
    os_disk = vmss.body["properties"]["virtualMachineProfile"]["storageProfile"]["osDisk"]
    assert os_disk["diffDiskSettings"] == {"option": "Local", "placement": "ResourceDisk"}
    assert os_disk["diskSizeGB"] == 1000


@pytest.mark.parametrize("size", [10, 5000])
def test_os_disk_size_out_of_range_fails(az, size):
    f = az.only(az.errors(profile="nd-a100-v4", os_disk_size_gb=size), "INVALID_OS_DISK_SIZE")
    assert f.remedy == "pass a size between 30 and 4095 GiB"


# ------------------------------------------------------------------------------ racks, drivers


@pytest.mark.parametrize("profile", ["nd-gb200-v6", "nd-gb300-v6"])
@pytest.mark.parametrize("nodes", [18, 36])
def test_whole_nvl72_racks_pass(az, profile, nodes):
    assert "NODES_NOT_RACK_MULTIPLE" not in az.codes(az.spec(profile=profile, nodes=nodes).findings)


@pytest.mark.parametrize("profile", ["nd-gb200-v6", "nd-gb300-v6"])
def test_partial_nvl72_rack_is_refused_with_the_nearest_whole_racks(az, profile):
    # Azure: "Capacity must be a multiple of 18 for SKUs that support vertical connect".
    f = az.only(az.errors(profile=profile, nodes=20), "NODES_NOT_RACK_MULTIPLE")
    assert f.remedy == "use --nodes 18 or 36"
    assert "R-agentbaker-gb300" in f.source or "AgentBaker" in f.source
    assert az.only(az.errors(profile=profile, nodes=5), "NODES_NOT_RACK_MULTIPLE").remedy == "use --nodes 18"


@pytest.mark.parametrize("profile", RACK_PROFILES)
def test_gb_image_without_imex_warns_and_the_hpc_gb_image_ships_it(az, profile):
    f = az.only(az.spec(profile=profile, nodes=18, image="ubuntu-2404-arm64").findings, "IMAGE_NO_IMEX")
    assert f.severity == "warning" and "nvidia-imex" in f.message
    assert "IMAGE_NO_IMEX" not in az.codes(az.spec(profile=profile, nodes=18).findings)


def test_render_of_a_partial_rack_exits_2_naming_the_whole_rack_counts(run, tmp_path):
    rc, out, err = run("render", "--profile", "nd-gb300-v6", "--nodes", "20", "-n", "rack", "-l", "eastus",
                       "--out-dir", tmp_path)
    assert rc == 2
    assert "ERROR: [NODES_NOT_RACK_MULTIPLE]" in err and "--nodes 18 or 36" in err
    assert not list(tmp_path.iterdir())


def test_ng_needs_a_manual_gpu_driver(az):
    f = az.only(az.spec(profile="ng").findings, "GPU_DRIVER_MANUAL")
    assert f.severity == "warning"
    assert "AmdGpuDriverLinux does not support NGads V620" in f.message
    assert f.remedy == "install the GPU driver on the nodes after they start (see the source)"


def test_series_with_driver_in_the_image_has_no_manual_driver_warning(az):
    assert "GPU_DRIVER_MANUAL" not in az.codes(az.spec(profile="nd-a100-v4").findings)


def test_plain_image_on_ndv2_adds_the_nvidia_driver_extension(az):
    f = az.only(az.spec(profile="ndv2", image="ubuntu-2204-gen2").findings, "EXTENSION_ADDED")
    assert f.severity == "note"
    assert f.remedy == "or use an Azure HPC image, e.g. --image ubuntu-hpc-2204-v100"
    (vmss,) = az.plan(profile="ndv2", image="ubuntu-2204-gen2").scale_sets
    (ext,) = vmss.body["properties"]["virtualMachineProfile"]["extensionProfile"]["extensions"]
    assert ext["name"] == "NvidiaGpuDriverLinux"
    assert ext["properties"]["publisher"] == "Microsoft.HpcCompute"
    assert ext["properties"]["type"] == "NvidiaGpuDriverLinux"


def test_hpc_image_on_ndv2_adds_no_extension(az):
    assert "EXTENSION_ADDED" not in az.codes(az.spec(profile="ndv2").findings)
    (vmss,) = az.plan(profile="ndv2").scale_sets
    assert "extensionProfile" not in vmss.body["properties"]["virtualMachineProfile"]


# ------------------------------------------------------------------------------ names


@pytest.mark.parametrize("name", ["Demo", "train_01", "-x", "a", "x" * 51, "train01-"])
def test_invalid_cluster_name_fails(az, name):
    f = az.only(az.errors(profile="nd-a100-v4", name=name), "INVALID_NAME")
    assert f.remedy == "e.g. -n train01"
    assert "resource-name-rules" in f.source


def test_valid_cluster_name_passes(az):
    assert az.spec(profile="nd-a100-v4", name="train-01").names.cluster == "train-01"


@pytest.mark.parametrize("group", ["rg.", "my rg", "x" * 91, "rg/1"])
def test_invalid_resource_group_fails(az, group):
    f = az.only(az.errors(profile="nd-a100-v4", resource_group=group), "INVALID_RESOURCE_GROUP")
    assert f.remedy == "e.g. -g ml-rg"


def test_valid_resource_group_passes(az):
    assert az.spec(profile="nd-a100-v4", resource_group="ML_rg.(prod)-1").request.resource_group == "ML_rg.(prod)-1"


def test_derived_name_breaking_azure_rules_fails(az, monkeypatch):
    # No valid cluster name breaks a derived name today; shrink the scale-set limit to reach the check.
    short = naming.NameRule("virtual machine scale set", 1, 8, naming.RULES["vmss"].pattern, "at most 8 characters")
    monkeypatch.setitem(naming.RULES, "vmss", short)
    f = az.only(az.errors(profile="nd-a100-v4", name="train01"), "INVALID_DERIVED_NAME")
    assert "train01-vmss000" in f.message
    assert f.remedy == "choose a shorter -n/--name"


def test_reserved_admin_username_fails(az):
    f = az.only(az.errors(profile="nd-a100-v4", admin_username="admin"), "INVALID_ADMIN_USERNAME")
    assert f.remedy == "e.g. --admin-username azureuser"


def test_reserved_tag_fails(az):
    f = az.only(az.errors(profile="nd-a100-v4", tags={"managed-by": "me"}), "RESERVED_TAG")
    assert f.remedy == "choose another tag name"


# ------------------------------------------------------------------------------ template size


def test_too_many_scale_sets_for_one_template_fail(az):
    f = az.only(az.errors(profile="nd-a100-v4", nodes=800, max_ib_domain=1), "TEMPLATE_TOO_LARGE")
    assert "800 scale sets" in f.message
    assert f.remedy == "use fewer --nodes or a larger --max-ib-domain, or split into several clusters"


def test_template_at_the_resource_limit_passes(az):
    # NSG + VNet + NAT gateway + its public IP + 796 scale sets = 800
    spec = az.spec(profile="nd-a100-v4", nodes=796, max_ib_domain=1)
    assert len(spec.scale_sets) == 796


def test_the_nat_gateway_and_its_public_ip_count_towards_the_template_limit(az):
    assert "TEMPLATE_TOO_LARGE" in az.codes(az.errors(profile="nd-a100-v4", nodes=797, max_ib_domain=1))


def test_without_outbound_two_more_scale_sets_fit_the_template(az):
    spec = az.spec(profile="nd-a100-v4", nodes=798, max_ib_domain=1, outbound=False)  # NSG + VNet + 798
    assert len(spec.scale_sets) == 798


# ------------------------------------------------------------------------------ the remaining checks


def test_ephemeral_os_disk_on_size_without_support_fails(az, profile_copy):
    # Every profiled size supports ephemeral OS disks today; take the capability away in a copy.
    path = profile_copy / "nd-h100-v5.toml"
    old = 'ephemeral_os_disk = { value = true, source = "D-h100" }'
    assert old in path.read_text()
    path.write_text(path.read_text().replace(old, old.replace("true", "false")))
    f = az.only(az.errors(profile="nd-h100-v5", ephemeral_os_disk=True), "EPHEMERAL_OS_DISK_UNSUPPORTED")
    assert f.remedy == "drop --ephemeral-os-disk"


def test_ephemeral_os_disk_on_size_with_support_passes(az):
    assert "EPHEMERAL_OS_DISK_UNSUPPORTED" not in az.codes(az.spec(profile="nd-h100-v5",
                                                                   ephemeral_os_disk=True).findings)


def test_legacy_image_warns(az):
    f = az.only(az.spec(profile="nd-a100-v4", image="ubuntu-hpc-2004").findings, "IMAGE_LEGACY")
    assert f.severity == "warning"
    assert f.remedy == "prefer a current image such as ubuntu-hpc-2204"


def test_current_image_is_not_legacy(az):
    assert "IMAGE_LEGACY" not in az.codes(az.spec(profile="nd-a100-v4").findings)


def test_negative_data_disks_fail(az):
    f = az.only(az.errors(profile="nd-a100-v4", data_disks=-1), "INVALID_DATA_DISKS")
    assert f.remedy == "pass --data-disks 0 or more"


@pytest.mark.parametrize("size", [2, 40000])
def test_data_disk_size_out_of_range_fails(az, size):
    f = az.only(az.errors(profile="nd-a100-v4", data_disks=1, data_disk_size_gb=size), "INVALID_DATA_DISK_SIZE")
    assert f.remedy == "pass a size between 4 and 32767 GiB"


def test_data_disk_size_is_ignored_without_data_disks(az):
    assert "INVALID_DATA_DISK_SIZE" not in az.codes(az.findings(profile="nd-a100-v4", data_disk_size_gb=2))


@pytest.mark.parametrize("zone", ["4", "eastus-1", "0"])
def test_invalid_zone_fails(az, zone):
    f = az.only(az.errors(profile="nd-a100-v4", zone=zone), "INVALID_ZONE")
    assert f.remedy == "pass --zone 1, or omit it"


def test_zone_goes_into_every_scale_set(az):
    for vmss in az.plan(profile="nd-a100-v4", nodes=150, zone="2").scale_sets:
        assert vmss.body["zones"] == ["2"]


def test_malformed_subnet_id_fails(az):
    f = az.only(az.errors(profile="nd-a100-v4", subnet_id="/subscriptions/x/subnets/y"), "INVALID_SUBNET_ID")
    assert f.remedy.startswith("pass /subscriptions/SUB/resourceGroups/RG/providers/Microsoft.Network/")


def test_subnet_id_and_vnet_prefix_conflict(az):
    subnet = "/subscriptions/0/resourceGroups/rg/providers/Microsoft.Network/virtualNetworks/v/subnets/s"
    f = az.only(az.errors(profile="nd-a100-v4", subnet_id=subnet, vnet_address_prefix="10.1.0.0/16"),
                "CONFLICTING_NETWORK")
    assert f.remedy == "pass --subnet-id to use an existing subnet, or --vnet-address-prefix for a new network"


@pytest.mark.parametrize("tags, remedy", [({"a/b": "x"}, "rename the tag"), ({"k": "v" * 257}, "shorten the value"),
                                          ({"k" * 513: "v"}, "shorten the tag name")])
def test_tags_breaking_azure_rules_fail(az, tags, remedy):
    f = az.only(az.errors(profile="nd-a100-v4", tags=tags), "INVALID_TAG")
    assert f.remedy == remedy


def test_more_than_fifty_tags_with_azgpus_three_fail(az):
    f = az.only(az.errors(profile="nd-a100-v4", tags={f"t{i}": "v" for i in range(48)}), "TOO_MANY_TAGS")
    assert f.remedy == "pass fewer tags"
    assert "at most 47" in f.message


def test_tag_without_equals_sign_fails(az):
    f = az.only(az.errors(profile="nd-a100-v4", tags=["team"]), "INVALID_TAG")
    assert f.remedy == "write tags as --tag team=ml"


def test_forty_seven_tags_fit(az):
    # Azure's 50 per resource, less the three azgpu puts on every resource.
    assert len(az.spec(profile="nd-a100-v4", tags={f"t{i}": "v" for i in range(47)}).request.tags) == 47


def test_create_needs_location_resource_group_and_key(az):
    errors = az.errors("create", profile="nd-a100-v4", location=None, ssh_key=None)
    by_code = {f.code: f for f in errors}
    assert set(by_code) == {"MISSING_LOCATION", "MISSING_RESOURCE_GROUP", "MISSING_SSH_KEY"}
    assert by_code["MISSING_LOCATION"].remedy == "pass -l/--location, e.g. -l eastus"
    assert by_code["MISSING_RESOURCE_GROUP"].remedy == "pass -g/--resource-group, e.g. -g ml-rg"
    # What the README's quick start made (--generate-ssh-keys: ~/.ssh/id_rsa), or how to make it.
    assert by_code["MISSING_SSH_KEY"].remedy.startswith("pass --ssh-key with your public key file (e.g. --ssh-key "
                                                        "~/.ssh/id_rsa.pub), or --generate-ssh-keys")


def test_create_with_everything_given_passes(az):
    assert az.spec("create", profile="nd-a100-v4", resource_group="ml-rg").command == "create"


def test_render_needs_no_location_resource_group_or_key(az):
    spec = az.spec("render", profile="nd-a100-v4", location=None, ssh_key=None)
    assert az.codes(spec.findings) == {"SSH_KEY_NOT_SET"}


def test_missing_name_fails(az):
    f = az.only(az.errors(profile="nd-a100-v4", name=None), "MISSING_NAME")
    assert f.remedy == "pass -n/--name, e.g. -n train01"


def test_missing_profile_and_size_fails(az):
    f = az.only(az.errors(), "MISSING_PROFILE")
    assert f.remedy == "pass --profile or --size, e.g. --profile nd-a100-v4 ('provision profiles list')"


def test_default_key_is_read_from_home(az, ssh_key, tmp_path, monkeypatch):
    (tmp_path / ".ssh").mkdir()
    (tmp_path / ".ssh" / "id_ed25519.pub").write_text(ssh_key + "\n")
    monkeypatch.setenv("HOME", str(tmp_path))
    request = __import__("azgpu").build_request(profile="nd-a100-v4", name="demo")
    assert request.ssh_key == ssh_key


def test_key_path_that_is_a_directory_fails(az, tmp_path):
    f = az.only(az.errors(profile="nd-a100-v4", ssh_key=str(tmp_path)), "SSH_KEY_UNREADABLE")
    assert f.remedy == "pass the path of a .pub file, e.g. --ssh-key ~/.ssh/id_ed25519.pub"


def test_unreadable_key_file_fails(az, tmp_path):
    key = tmp_path / "id.pub"
    key.write_text("ssh-ed25519 AAAA")
    key.chmod(0)
    if os.access(key, os.R_OK):
        pytest.skip("running as a user who reads any file (root)")
    f = az.only(az.errors(profile="nd-a100-v4", ssh_key=str(key)), "SSH_KEY_UNREADABLE")
    assert f.remedy == "check the path and its permissions"


# ------------------------------------------------------------------------------ coverage of the codes


def test_every_finding_code_in_the_validator_has_a_test():
    import re
    from pathlib import Path

    src = Path(__file__).resolve().parents[1] / "src" / "azgpu"
    code_re = re.compile(r'(?:_f\(|_err\(|Finding\(|code=)\s*"([A-Z][A-Z0-9_]+)"')
    codes = set()
    for name in ("rules.py", "spec.py", "request.py"):
        codes |= set(code_re.findall((src / name).read_text()))
    assert len(codes) > 50
    tests = "".join(p.read_text() for p in Path(__file__).parent.glob("test_*.py"))
    untested = sorted(c for c in codes if f'"{c}"' not in tests and f"[{c}]" not in tests)
    assert not untested, f"finding codes without a test: {untested}"


def test_ofed_install_points_to_an_hpc_image_with_ofed_when_the_series_has_one(az):
    f = az.only(az.spec(profile="nd-a100-v4", image="ubuntu-2204-gen2").findings, "OFED_INSTALLED")
    assert f.remedy == "or use an Azure HPC image with OFED preinstalled, e.g. --image ubuntu-hpc-2204"


def test_ofed_install_on_a_series_without_hpc_image_says_there_is_nothing_to_do(az):
    # ND24rs (ConnectX-3 Pro) has no Azure HPC image: its default image carries no OFED.
    f = az.only(az.spec("render", profile="nd", size="ND24rs").findings, "OFED_INSTALLED")
    assert f.remedy.startswith("nothing to do: no Azure HPC image serves this series")


def test_a_single_recommended_image_is_not_listed_twice(az):
    f = az.only(az.spec(profile="nd-gb300-v6", nodes=18, image="ubuntu-2404-arm64").findings, "IMAGE_NOT_RECOMMENDED")
    assert f.remedy == "use --image ubuntu-hpc-2404-gb"


# ------------------------------------------------------------------------------ outbound access


def test_no_outbound_warns_what_will_not_work(az):
    f = az.only(az.spec(profile="nd-a100-v4", outbound=False).findings, "OUTBOUND_DISABLED")
    assert f.severity == "warning" and f.field == "outbound"
    assert "Run Command results" in f.message and "package mirrors" in f.message
    assert "cloud-init" not in f.message  # the HPC image brings OFED: nothing to download
    assert f.remedy.startswith("drop --no-outbound")


def test_no_outbound_names_the_ofed_download_cloud_init_needs(az):
    f = az.only(az.spec(profile="nd-a100-v4", outbound=False, image="ubuntu-2204-gen2").findings, "OUTBOUND_DISABLED")
    assert "cloud-init's download of DOCA-OFED 3.2.1" in f.message


def test_no_outbound_names_the_driver_extension_download(az):
    spec = az.spec(profile="ndv2", outbound=False, image="ubuntu-2204-gen2")
    assert spec.extensions
    f = az.only(spec.findings, "OUTBOUND_DISABLED")
    assert f"the {spec.extensions[0].type} extension's driver download" in f.message


def test_no_outbound_with_per_node_public_ips_does_not_warn(az):
    findings = az.spec(profile="ng", outbound=False, public_ip=True, ssh_source="203.0.113.7/32").findings
    assert "OUTBOUND_DISABLED" not in az.codes(findings)


def test_outbound_by_default_does_not_warn(az):
    assert "OUTBOUND_DISABLED" not in az.codes(az.spec(profile="nd-a100-v4").findings)


def test_no_outbound_with_subnet_id_is_a_note_that_it_changes_nothing(az):
    subnet = "/subscriptions/0000/resourceGroups/net-rg/providers/Microsoft.Network/virtualNetworks/hub/subnets/gpu"
    findings = az.spec(profile="nd-a100-v4", outbound=False, subnet_id=subnet).findings
    f = az.only(findings, "OUTBOUND_NOT_MANAGED")
    assert f.severity == "note" and f.remedy.startswith("drop --no-outbound")
    assert "OUTBOUND_DISABLED" not in az.codes(findings)


def test_nat_gateway_and_public_ip_names_follow_azures_rules():
    from azgpu import naming

    assert naming.check("nat_gateway",
                        "a" * 81) == "NAT gateway name '" + "a" * 81 + "' has 81 characters; Azure allows 1-80"
    assert "not allowed" in naming.check("public_ip", "ip.")
    assert naming.check("public_ip", naming.Names("a" * 50).nat_public_ip) is None


def test_the_ib_split_remedy_offers_a_raise_only_below_the_limit(az, ssh_key):
    default = az.only(az.findings(profile="nd-h100-v5", nodes=250), "IB_DOMAIN_SPLIT")
    assert "raise --max-ib-domain (up to 300)" in default.remedy
    at_limit = az.only(az.findings(profile="nd-h100-v5", nodes=700, max_ib_domain=300), "IB_DOMAIN_SPLIT")
    assert "--max-ib-domain" not in at_limit.remedy and "one scale set" in at_limit.remedy
