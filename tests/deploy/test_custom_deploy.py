"""Custom clusters against the fake Azure under the real SDK: gallery, community, shared and managed images
read in preflight, replication, identities, proximity placement groups and --custom-data on the wire."""

from __future__ import annotations

import base64
import email

import pytest
from deploy_support import LOCATION, NAME, RG, SSH_KEY, VMSS, assert_cli_error, calls, create_args, request, writes

from azgpu.deploy import CreateOptions, create
from azgpu.errors import ValidationFailed
from azgpu.testing import FakeAzure

PPG_TYPE = "Microsoft.Compute/proximityPlacementGroups"


def _codes(findings) -> set[str]:
    return {f.code if hasattr(f, "code") else f["code"] for f in findings}


def _gallery(azure, *, generation="V2", arch="x64", regions=(LOCATION,), state="Completed", **image):
    image_id = azure.add_gallery_image("img-rg", "hpcgallery", "ubuntu-hpc", hyper_v_generation=generation,
                                       architecture=arch, **image)
    azure.add_gallery_image_version(image_id, "1.0.0", regions=regions, replication_state=state)
    return image_id


def _preflight_errors(session, **values) -> list:
    with pytest.raises(ValidationFailed) as info:
        create(session, request(**values))
    return info.value.errors


def _vmss_body(azure) -> dict:
    return next(r for r in azure.resources(type=VMSS, resource_group=RG))


# ------------------------------------------------------------------------- gallery images in preflight


def test_a_generation_1_gallery_version_is_refused_like_a_generation_1_marketplace_image(azure, session):
    image_id = _gallery(azure, generation="V1")
    gallery = _preflight_errors(session, image=image_id + "/versions/1.0.0")
    assert _codes(gallery) == {"IMAGE_GENERATION"}
    with pytest.raises(ValidationFailed) as marketplace:
        create(session, request(image="ubuntu-2204-gen1"))
    assert {f.code for f in marketplace.value.errors} == {"IMAGE_GENERATION"}
    assert not writes(azure)


def test_cli_refuses_a_generation_1_gallery_image_with_exit_2_and_nothing_written(azure, cli):
    image_id = _gallery(azure, generation="V1")
    rc, _, err = cli(*create_args("nd-a100-v4", "--image", image_id))
    assert_cli_error(rc, err, 2, "IMAGE_GENERATION", "Generation 2")
    assert not writes(azure)


def test_a_version_not_replicated_to_the_location_is_refused_before_any_write(azure, session):
    image_id = _gallery(azure, regions=("westus2", "westus3"))
    f = next(iter(_preflight_errors(session, image=image_id)))
    assert f.code == "IMAGE_NOT_REPLICATED" and "westus2, westus3" in f.message and f"name={LOCATION}" in f.remedy
    # The version named whole, as az sig takes it (no '...' left to fill in).
    sub = image_id.split("/")[2]
    assert (f"'az sig image-version update -g img-rg -r hpcgallery -i ubuntu-hpc -e 1.0.0 --subscription {sub} --add "
            f"publishingProfile.targetRegions name={LOCATION}'") in f.remedy, f.remedy
    assert not writes(azure)


def test_a_version_still_replicating_is_refused(azure, session):
    image_id = _gallery(azure, state="Replicating")
    (f,) = _preflight_errors(session, image=image_id)
    assert f.code == "IMAGE_REPLICATION_INCOMPLETE" and "'az sig image-version show -g img-rg -r hpcgallery -i " \
        "ubuntu-hpc -e 1.0.0 --subscription " in f.remedy, f.remedy


def test_latest_is_the_highest_version_not_excluded_from_latest(azure, session):
    image_id = azure.add_gallery_image("img-rg", "g", "hpc")
    azure.add_gallery_image_version(image_id, "1.2.0", regions=(LOCATION,))
    azure.add_gallery_image_version(image_id, "1.10.0", regions=("westus2",))
    azure.add_gallery_image_version(image_id, "1.11.0", regions=(LOCATION,), exclude_from_latest=True)
    f = next(iter(_preflight_errors(session, image=image_id)))
    assert f.code == "IMAGE_NOT_REPLICATED" and "version 1.10.0" in f.message  # 1.10 > 1.2, and 1.11 is excluded


def test_the_latest_version_replicated_here_deploys(azure, session):
    image_id = azure.add_gallery_image("img-rg", "g", "hpc")
    azure.add_gallery_image_version(image_id, "1.2.0", regions=(LOCATION,))
    result = create(session, request(image=image_id)).as_dict()
    assert result["image_kind"] == "gallery"
    profile = _vmss_body(azure)["properties"]["virtualMachineProfile"]
    assert profile["storageProfile"]["imageReference"] == {"id": image_id}


def test_a_gallery_image_that_does_not_exist_is_not_found(azure, session):
    missing = (f"/subscriptions/{azure.subscription_id}/resourceGroups/img-rg/providers/Microsoft.Compute/galleries/g"
               "/images/none")
    azure.add_gallery_image("img-rg", "g", "other")
    assert _codes(_preflight_errors(session, image=missing)) == {"IMAGE_NOT_FOUND"}


@pytest.mark.parametrize("image,code", [
    (dict(os_type="Windows"), "WINDOWS_IMAGE_UNSUPPORTED"),
    (dict(os_state="Specialized"), "IMAGE_SPECIALIZED"),
    (dict(arch="Arm64"), "IMAGE_ARCHITECTURE"),
    (dict(security_type="TrustedLaunch"), "IMAGE_SECURITY_TYPE"),
])
def test_the_definition_is_held_to_the_catalog_rules(azure, session, image, code):
    assert _codes(_preflight_errors(session, image=_gallery(azure, **image))) == {code}


def test_trusted_launch_needs_a_trusted_launch_capable_definition(azure, session):
    image_id = _gallery(azure, security_type="Standard")
    f = next(iter(_preflight_errors(session, profile="nd-h100-v5", image=image_id, security_type="TrustedLaunch")))
    assert f.code == "IMAGE_SECURITY_TYPE" and "TrustedLaunchSupported" in f.message
    supported = azure.add_gallery_image("img-rg", "g", "tl", security_type="TrustedLaunchSupported")
    azure.add_gallery_image_version(supported, "1.0.0", regions=(LOCATION,))
    result = create(session, request(profile="nd-h100-v5", image=supported, security_type="TrustedLaunch"),
                    CreateOptions(dry_run=True)).as_dict()
    assert "IMAGE_SECURITY_TYPE" not in _codes(result["preflight"]["findings"])


def test_too_few_replicas_for_the_cluster_is_a_warning(azure, session):
    image_id = _gallery(azure)
    azure.set_quota(LOCATION, "Standard NDASv4_A100 Family", limit=20000)
    azure.set_quota(LOCATION, "cores", limit=20000)
    result = create(session, request(image=image_id, nodes=120), CreateOptions(dry_run=True)).as_dict()
    f = next(f for f in result["preflight"]["findings"] if f["code"] == "GALLERY_REPLICAS_LOW")
    assert f["severity"] == "warning" and "3 for 120 nodes" in f["message"]
    # The replica count of this region's entry in the version's target regions (the first and only one here).
    assert "-e 1.0.0 --subscription" in f["remedy"] and \
        "--set publishingProfile.targetRegions[0].regionalReplicaCount=3'" in f["remedy"], f["remedy"]


def test_an_arm64_gallery_image_deploys_on_gb300_in_simulation(sim, state_file):
    fake = FakeAzure.load(state_file)
    fake.set_quota("westus3", "standardNDISRGB300V6Family", limit=5000)
    fake.set_quota("westus3", "cores", limit=5000)
    image_id = fake.add_gallery_image("img-rg", "hpcgallery", "ubuntu-gb", architecture="Arm64")
    fake.add_gallery_image_version(image_id, "2.0.0", regions=("westus3",))
    rc, out, err = sim("create", "--profile", "nd-gb300-v6", "-n", NAME, "-g", RG, "-l", "westus3", "--nodes", 18,
                       "--ssh-key", SSH_KEY, "--image", image_id, "-o", "json")
    assert rc == 0, err
    vmss = next(r for r in FakeAzure.load(state_file).resources(type=VMSS, resource_group=RG))
    assert vmss["properties"]["virtualMachineProfile"]["storageProfile"]["imageReference"] == {"id": image_id}
    assert vmss["sku"] == {"name": "Standard_ND128isr_GB300_v6", "tier": "Standard", "capacity": 18}


def test_an_x64_gallery_image_is_refused_on_gb300(azure, session):
    azure.set_quota("westus3", "standardNDISRGB300V6Family", limit=5000)
    azure.set_quota("westus3", "cores", limit=5000)
    f = next(iter(_preflight_errors(session, profile="nd-gb300-v6", nodes=18, location="westus3",
                                    image=_gallery(azure, regions=("westus3",)))))
    assert f.code == "IMAGE_ARCHITECTURE" and "Arm64" in f.message


# ------------------------------------------------------------------------- community, shared, managed


def test_a_community_gallery_image_deploys_through_its_public_name(azure, session):
    _gallery(azure, community_name="hpc-pub-1234")
    create(session, request(image="/CommunityGalleries/hpc-pub-1234/Images/ubuntu-hpc"))
    assert _vmss_body(azure)["properties"]["virtualMachineProfile"]["storageProfile"]["imageReference"] == {
        "communityGalleryImageId": "/CommunityGalleries/hpc-pub-1234/Images/ubuntu-hpc/Versions/latest"}


def test_a_community_version_not_in_the_location_is_refused(azure, session):
    _gallery(azure, community_name="hpc-pub-1234", regions=("westus2",))
    f = next(iter(_preflight_errors(session,
                                    image="/CommunityGalleries/hpc-pub-1234/Images/ubuntu-hpc/Versions/1.0.0")))
    assert f.code == "IMAGE_NOT_REPLICATED" and LOCATION in f.message
    assert not writes(azure)


def test_a_direct_shared_gallery_image_deploys(azure, session):
    _gallery(azure, shared_name="SHARED-HPC")
    create(session, request(image="/SharedGalleries/SHARED-HPC/Images/ubuntu-hpc/Versions/1.0.0"))
    assert _vmss_body(azure)["properties"]["virtualMachineProfile"]["storageProfile"]["imageReference"] == {
        "sharedGalleryImageId": "/SharedGalleries/SHARED-HPC/Images/ubuntu-hpc/Versions/1.0.0"}


def test_a_managed_image_in_another_region_is_refused(azure, session):
    image_id = azure.add_managed_image("img-rg", "golden", location="westus2")
    f = next(iter(_preflight_errors(session, image=image_id)))
    assert f.code == "IMAGE_NOT_REPLICATED" and "westus2" in f.message


def test_a_managed_image_in_the_region_deploys(azure, session):
    image_id = azure.add_managed_image("img-rg", "golden", location=LOCATION)
    create(session, request(image=image_id))
    profile = _vmss_body(azure)["properties"]["virtualMachineProfile"]
    assert profile["storageProfile"]["imageReference"] == {"id": image_id}


def test_a_generation_1_managed_image_is_refused(azure, session):
    image_id = azure.add_managed_image("img-rg", "golden", hyper_v_generation="V1")
    assert _codes(_preflight_errors(session, image=image_id)) == {"IMAGE_GENERATION"}


# ------------------------------------------------------------------------- identity


def test_a_missing_user_assigned_identity_is_refused_before_any_write(azure, session):
    rid = f"/subscriptions/{azure.subscription_id}/resourceGroups/id-rg/providers/Microsoft.ManagedIdentity/" \
          "userAssignedIdentities/reader"
    f = next(iter(_preflight_errors(session, identity=[rid])))
    assert f.code == "IDENTITY_NOT_FOUND" and "az identity create" in f.remedy
    assert not writes(azure)


def test_the_identities_reach_the_scale_set(azure, session):
    rid = azure.add_user_assigned_identity("id-rg", "reader")
    create(session, request(identity=[rid], assign_identity=True))
    assert _vmss_body(azure)["identity"] == {"type": "SystemAssigned, UserAssigned",
                                             "userAssignedIdentities": {rid: {}}}


def test_the_fake_refuses_a_scale_set_with_a_missing_identity_as_azure_does(azure, session):
    from azure.core.exceptions import HttpResponseError

    from azgpu.deploy.deployer import Deployer
    from azgpu.plan import build_plan
    from azgpu.spec import validate

    rid = f"/subscriptions/{azure.subscription_id}/resourceGroups/id-rg/providers/Microsoft.ManagedIdentity/" \
          "userAssignedIdentities/gone"
    plan = build_plan(validate(request(identity=[rid]), command="create"))
    deployer = Deployer(session, plan, RG)
    deployer.ensure_resource_group(LOCATION)
    for r in plan.resources[:-1]:
        deployer.begin_put(r).result()
    with pytest.raises(HttpResponseError) as info:
        deployer.begin_put(plan.scale_sets[0]).result()
    assert info.value.error.code == "FailedIdentityOperation" and "was not found" in info.value.error.message


# ------------------------------------------------------------------------- proximity placement groups


def test_a_ppg_is_created_first_and_the_scale_sets_join_it(azure, session):
    create(session, request(ppg="c1-ppg", nodes=2))
    ppg = azure.get(f"/subscriptions/{azure.subscription_id}/resourceGroups/{RG}/providers/{PPG_TYPE}/c1-ppg")
    assert ppg["properties"]["intent"] == {"vmSizes": ["Standard_ND96asr_v4"]} and ppg["tags"]["azgpu-cluster"] == NAME
    assert _vmss_body(azure)["properties"]["proximityPlacementGroup"] == {"id": ppg["id"]}
    ppg_put = [i for i, r in enumerate(azure.requests) if r.method == "PUT" and "proximityPlacementGroups" in r.path]
    vmss_put = [i for i, r in enumerate(azure.requests) if r.method == "PUT" and "virtualMachineScaleSets" in r.path]
    assert ppg_put and ppg_put[0] < vmss_put[0]


def test_a_rerun_converges_without_putting_the_ppg_again(azure, session):
    create(session, request(ppg="c1-ppg"))
    since = len(azure.requests)
    create(session, request(ppg="c1-ppg"))
    assert not [r for r in writes(azure, since) if "proximityPlacementGroups" in r.path]


def test_destroy_removes_the_ppg_after_the_scale_sets(azure, cli):
    rc, _, err = cli(*create_args("nd-a100-v4", "--ppg", "c1-ppg"))
    assert rc == 0, err
    since = len(azure.requests)
    rc, out, err = cli("destroy", "-n", NAME, "-g", RG, "--yes")
    assert rc == 0, err
    deletes = [r.path for r in calls(azure, "DELETE", since=since)]
    assert any("proximityPlacementGroups/c1-ppg" in p for p in deletes)
    first_vmss = next(i for i, p in enumerate(deletes) if "virtualMachineScaleSets" in p)
    assert first_vmss < next(i for i, p in enumerate(deletes) if "proximityPlacementGroups" in p)
    assert not azure.resources(type=PPG_TYPE)


def test_an_existing_ppg_that_is_missing_is_refused(azure, session):
    ppg_id = f"/subscriptions/{azure.subscription_id}/resourceGroups/{RG}/providers/{PPG_TYPE}/storage-ppg"
    azure.add_user_assigned_identity(RG, "make-the-group")  # the resource group exists
    f = next(iter(_preflight_errors(session, ppg=ppg_id)))
    assert f.code == "PPG_NOT_FOUND" and "e.g. --ppg c1-ppg" in f.remedy  # a name, filled in
    assert not writes(azure)


def test_an_existing_ppg_in_another_zone_or_location_is_refused(azure, session):
    ppg_id = azure.add_proximity_placement_group("storage-rg", "storage-ppg", location="westus2", zones=["1"])
    assert _codes(_preflight_errors(session, ppg=ppg_id, zone="2")) == {"PPG_WRONG_LOCATION", "PPG_ZONE_MISMATCH"}


def test_an_existing_ppg_with_another_size_in_its_intent_is_warned(azure, session):
    ppg_id = azure.add_proximity_placement_group("storage-rg", "storage-ppg", vm_sizes=["Standard_L80s_v3"])
    result = create(session, request(ppg=ppg_id), CreateOptions(dry_run=True)).as_dict()
    f = next(f for f in result["preflight"]["findings"] if f["code"] == "PPG_INTENT_SIZE")
    assert f["severity"] == "warning" and "Standard_L80s_v3" in f["message"]


def test_an_existing_ppg_joins_the_scale_sets(azure, session):
    ppg_id = azure.add_proximity_placement_group("storage-rg", "storage-ppg", location=LOCATION)
    create(session, request(ppg=ppg_id))
    assert _vmss_body(azure)["properties"]["proximityPlacementGroup"] == {"id": ppg_id}
    assert not [r for r in writes(azure) if "proximityPlacementGroups" in r.path]


# ------------------------------------------------------------------------- custom data, boot diagnostics, spot


CLOUD_CONFIG = "#cloud-config\nruncmd:\n  - [touch, /var/tmp/joined]\n"


def test_custom_data_deploys_in_simulation_merged_with_the_ofed_install(sim, state_file, tmp_path):
    path = tmp_path / "init.yaml"
    path.write_text(CLOUD_CONFIG)
    rc, out, err = sim(*create_args("nd-a100-v4", "--image", "ubuntu-2204-gen2", "--custom-data", path)[0:], "-o",
                       "json")
    assert rc == 0, err
    vmss = next(r for r in FakeAzure.load(state_file).resources(type=VMSS, resource_group=RG))
    sent = base64.b64decode(vmss["properties"]["virtualMachineProfile"]["osProfile"]["customData"]).decode()
    parts = [p.get_payload(decode=True).decode() for p in email.message_from_string(sent).walk()
             if not p.is_multipart()]
    assert "doca-ofed" in parts[0] and parts[1] == CLOUD_CONFIG
    assert "/var/tmp/joined" not in out  # the result printed on stdout does not carry it


def test_custom_data_on_the_wire_is_the_rendered_parameter_base64_encoded(azure, session):
    from azgpu import build_plan, render_arm_parameters, validate

    create(session, request(image="ubuntu-2204-gen2", custom_data=CLOUD_CONFIG))
    put = next(r for r in calls(azure, "PUT") if "virtualMachineScaleSets" in r.path)
    rendered = render_arm_parameters(build_plan(validate(request(image="ubuntu-2204-gen2", custom_data=CLOUD_CONFIG),
                                                         command="create")))["parameters"]["customData"]["value"]
    custom_data = put.body["properties"]["virtualMachineProfile"]["osProfile"]["customData"]
    assert base64.b64decode(custom_data).decode() == rendered


def test_boot_diagnostics_and_the_eviction_policy_reach_the_wire(azure, session):
    create(session, request(spot=True, eviction_policy="Deallocate", boot_diagnostics=False))
    profile = _vmss_body(azure)["properties"]["virtualMachineProfile"]
    assert profile["evictionPolicy"] == "Deallocate" and profile["priority"] == "Spot"
    assert profile["diagnosticsProfile"] == {"bootDiagnostics": {"enabled": False}}
