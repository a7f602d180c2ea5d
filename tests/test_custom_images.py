"""Gallery, community, direct-shared and managed images offline: the ID's shape, the imageReference form
Azure takes, and what holds before preflight reads the image."""

from __future__ import annotations

import pytest

from azgpu.images import parse_image_id, resolve

SUB = "0b1f6471-1bf0-4dda-aec3-cb9272f09590"
GALLERY = f"/subscriptions/{SUB}/resourceGroups/img-rg/providers/Microsoft.Compute/galleries/hpc/images/ubuntu-gb"
MANAGED = f"/subscriptions/{SUB}/resourceGroups/img-rg/providers/Microsoft.Compute/images/golden"


def _vmss(plan):
    return next(r for r in plan.resources if r.stage == "scale-set")


def _image_reference(plan):
    return _vmss(plan).body["properties"]["virtualMachineProfile"]["storageProfile"]["imageReference"]


@pytest.mark.parametrize("text,kind,version", [
    (GALLERY, "gallery", None),
    (GALLERY + "/versions/1.2.3", "gallery", "1.2.3"),
    (GALLERY + "/versions/latest", "gallery", None),
    (MANAGED, "managed", None),
    ("/CommunityGalleries/hpc-4b3a/Images/ubuntu/Versions/2.0.0", "community", "2.0.0"),
    ("/communitygalleries/hpc-4b3a/images/ubuntu", "community", None),
    ("/SharedGalleries/SUB-HPC/Images/ubuntu/Versions/latest", "shared", None),
])
def test_image_id_forms_are_recognised(text, kind, version):
    parsed = parse_image_id(text)
    assert (parsed.kind, parsed.version) == (kind, version)


def test_a_gallery_definition_deploys_its_latest_version_through_the_id_without_a_version(az):
    # "to use 'latest' version of gallery image, just set .../images/{imageName} in the 'id' field" (ImageReference).
    assert _image_reference(az.plan(profile="nd-a100-v4", image=GALLERY + "/versions/latest")) == {"id": GALLERY}
    assert _image_reference(az.plan(profile="nd-a100-v4", image=GALLERY + "/versions/1.2.3")) == {
        "id": GALLERY + "/versions/1.2.3"}


def test_a_managed_image_is_referenced_by_its_id(az):
    assert _image_reference(az.plan(profile="nd-a100-v4", image=MANAGED)) == {"id": MANAGED}


def test_community_and_shared_images_use_their_own_reference_fields(az):
    community = _image_reference(az.plan(profile="nd-a100-v4", image="/CommunityGalleries/pub/Images/hpc"))
    shared = _image_reference(az.plan(profile="nd-a100-v4", image="/SharedGalleries/uniq/Images/hpc/Versions/3.0.1"))
    assert community == {"communityGalleryImageId": "/CommunityGalleries/pub/Images/hpc/Versions/latest"}
    assert shared == {"sharedGalleryImageId": "/SharedGalleries/uniq/Images/hpc/Versions/3.0.1"}


def test_an_id_of_another_resource_type_is_refused_with_the_forms(az):
    f = az.only(az.errors(profile="nd-a100-v4", image=f"/subscriptions/{SUB}/resourceGroups/r/providers/"
                                                       "Microsoft.Compute/disks/osdisk"), "INVALID_IMAGE_ID")
    assert "/CommunityGalleries/" in f.remedy and "galleries/GALLERY/images/DEFINITION" in f.remedy


def test_validation_says_what_waits_for_preflight(az):
    f = az.only(az.findings(profile="nd-a100-v4", image=GALLERY), "IMAGE_CHECKED_AT_PREFLIGHT")
    assert f.severity == "warning" and "replication to the location" in f.message
    assert "--dry-run" in f.remedy


def test_create_notes_the_preflight_check_instead_of_warning(az):
    f = az.only(az.findings("create", profile="nd-a100-v4", image=GALLERY, resource_group="rg"),
                "IMAGE_CHECKED_AT_PREFLIGHT")
    assert f.severity == "note"


def test_a_custom_image_is_not_reported_as_an_unknown_urn(az):
    assert "IMAGE_UNKNOWN" not in az.codes(az.findings(profile="nd-a100-v4", image=GALLERY))


def test_a_custom_image_gets_no_ofed_install(az):
    spec = az.spec(profile="nd-a100-v4", image=GALLERY)
    assert spec.install_ofed is None
    assert "customData" not in _vmss(az.plan(profile="nd-a100-v4", image=GALLERY)).body["properties"][
        "virtualMachineProfile"]["osProfile"]


def test_a_managed_image_cannot_serve_an_arm64_size(az):
    f = az.only(az.errors(profile="nd-gb300-v6", image=MANAGED, nodes=18), "IMAGE_ARCHITECTURE")
    assert "Azure Compute Gallery" in f.message and "gallery" in f.remedy


def test_a_managed_image_cannot_make_trusted_launch_vms(az):
    f = az.only(az.errors(profile="nd-h100-v5", image=MANAGED, security_type="TrustedLaunch"), "IMAGE_SECURITY_TYPE")
    assert "--security-type Standard" in f.remedy


def test_more_than_twenty_nodes_from_a_managed_image_are_warned(az):
    f = az.only(az.findings(profile="nd-a100-v4", image=MANAGED, nodes=21), "MANAGED_IMAGE_CONCURRENCY")
    assert f.severity == "warning" and "20 simultaneous deployments" in f.message
    assert "MANAGED_IMAGE_CONCURRENCY" not in az.codes(az.findings(profile="nd-a100-v4", image=MANAGED, nodes=20))


def test_summary_names_the_image_kind(az):
    assert az.plan(profile="nd-a100-v4", image=GALLERY).summary()["image_kind"] == "gallery"
    assert az.plan(profile="nd-a100-v4").summary()["image_kind"] == "marketplace"


def test_resolve_keeps_catalog_names_and_urns_working():
    assert resolve("ubuntu-hpc-2204").image_id is None
    assert resolve("microsoft-dsvm:ubuntu-hpc:2204:latest").kind == "marketplace"


def test_cli_render_accepts_a_gallery_image_id(run, ssh_key, tmp_path):
    rc, out, err = run("render", "--profile", "nd-a100-v4", "-n", "demo", "-l", "eastus", "--ssh-key", ssh_key,
                       "--image", GALLERY, "--out-dir", tmp_path, "-o", "none")
    assert rc == 0, err
    assert GALLERY in (tmp_path / "main.bicep").read_text()
    assert "IMAGE_CHECKED_AT_PREFLIGHT" in err
