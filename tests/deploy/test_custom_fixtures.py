"""REST-spec example bodies (tests/fixtures/azure/compute, msi) replayed through azgpu's preflight under the real
SDK, and the fake's own answers compared with their shape."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from deploy_support import LOCATION, request

from azgpu.deploy import CreateOptions, create
from azgpu.errors import ValidationFailed

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "azure"


def body(name: str) -> dict:
    return json.loads((FIXTURES / name).read_text())["responses"]["200"]["body"]


def paths(node, prefix: str = "") -> set[str]:
    """Every key path of a JSON value, list items folded into []."""
    out: set[str] = set()
    if isinstance(node, dict):
        for key, value in node.items():
            out.add(prefix + key)
            out |= paths(value, f"{prefix}{key}.")
    elif isinstance(node, list):
        for item in node:
            out |= paths(item, prefix.rstrip(".") + "[].")
    return out


def _errors(session, **values) -> set[str]:
    with pytest.raises(ValidationFailed) as info:
        create(session, request(**values))
    return {f.code for f in info.value.errors}


def _linux_definition(azure, **kw) -> str:
    return azure.add_gallery_image("myResourceGroup", "myGalleryName", "myGalleryImageName", **kw)


# ------------------------------------------------------------------------- replays


def test_the_gallery_image_example_a_windows_generation_1_image_is_refused(azure, session):
    image_id = azure.add_gallery_image("myResourceGroup", "myGalleryName", "myGalleryImageName",
                                       body=body("compute/GalleryImage_Get.json"))
    azure.add_gallery_image_version(image_id, "1.0.0", regions=(LOCATION,))
    assert _errors(session, image=image_id) == {"WINDOWS_IMAGE_UNSUPPORTED", "IMAGE_GENERATION"}


def test_the_version_example_is_replicated_to_east_us_but_not_west_us_2(azure, session):
    image_id = _linux_definition(azure)
    azure.add_gallery_image_version(image_id, "1.0.0", body=body(
        "compute/GalleryImageVersion_Get_WithValidationProfileAndReplicationStatus.json"))
    assert create(session, request(image=image_id), CreateOptions(dry_run=True)).dry_run is True  # 'East US' is eastus
    azure.set_quota("westus2", "Standard NDASv4_A100 Family", limit=1000)
    codes = _errors(session, image=image_id + "/versions/1.0.0", location="westus2")
    assert codes == {"IMAGE_NOT_REPLICATED"}


def test_the_community_image_example_is_held_to_the_same_rules(azure, session):
    example = body("compute/CommunityGalleryImage_Get.json")
    azure.add_gallery_image("img-rg", "pubgallery", "myGalleryImageName", community_name="publicGalleryName",
                            body={"location": LOCATION, "properties": example["properties"]})
    assert _errors(session, image="/CommunityGalleries/publicGalleryName/Images/myGalleryImageName") >= {
        "WINDOWS_IMAGE_UNSUPPORTED", "IMAGE_GENERATION"}


def test_the_shared_version_example_soft_deleted_and_past_end_of_life_is_warned(azure, session):
    image_id = _linux_definition(azure, shared_name="galleryUniqueName")
    example = body("compute/SharedGalleryImageVersion_Get.json")
    azure.add_gallery_image_version(image_id, "myGalleryImageVersionName", body={"location": LOCATION, "properties": {
        **example["properties"], "publishingProfile": {"targetRegions": [{"name": LOCATION}]}}})
    result = create(session, request(image="/SharedGalleries/galleryUniqueName/Images/myGalleryImageName/Versions/"
                                           "myGalleryImageVersionName"), CreateOptions(dry_run=True)).as_dict()
    codes = {f["code"]: f["severity"] for f in result["preflight"]["findings"]}
    assert codes["IMAGE_VERSION_STATE"] == "warning" and codes["IMAGE_END_OF_LIFE"] == "warning"


def test_the_community_version_list_example_past_end_of_life_is_warned(azure, session):
    image_id = _linux_definition(azure, community_name="publicGalleryName")
    version = body("compute/CommunityGalleryImageVersion_List.json")["value"][0]
    azure.add_gallery_image_version(image_id, version["name"], body={"location": LOCATION, "properties": {
        **version["properties"], "publishingProfile": {"targetRegions": [{"name": LOCATION}]}}})
    result = create(session, request(image="/CommunityGalleries/publicGalleryName/Images/myGalleryImageName"),
                    CreateOptions(dry_run=True)).as_dict()
    assert "IMAGE_END_OF_LIFE" in {f["code"] for f in result["preflight"]["findings"]}


def test_the_managed_image_example_windows_in_west_us_is_refused(azure, session):
    example = body("compute/Image_ListByResourceGroup.json")["value"][0]
    image_id = azure.add_managed_image("myResourceGroup", "myImage", body=example)
    assert _errors(session, image=image_id) == {"IMAGE_NOT_REPLICATED", "WINDOWS_IMAGE_UNSUPPORTED", "IMAGE_GENERATION"}


def test_the_ppg_example_pinned_to_zone_1_in_westus_is_refused_and_its_intent_warned(azure, session):
    ppg_id = azure.add_proximity_placement_group("myResourceGroup", "myProximityPlacementGroup",
                                                 body=body("compute/ProximityPlacementGroup_Get.json"))
    with pytest.raises(ValidationFailed) as info:
        create(session, request(ppg=ppg_id))
    codes = {f.code: f.severity for f in info.value.findings}
    assert codes["PPG_WRONG_LOCATION"] == codes["PPG_ZONE_MISMATCH"] == "error"
    assert codes["PPG_INTENT_SIZE"] == "warning"


def test_the_identity_example_exists(azure, session):
    example = body("msi/IdentityGet.json")
    rid = azure.add_user_assigned_identity("rgName", "identityName", body=example)
    result = create(session, request(identity=[rid]), CreateOptions(dry_run=True)).as_dict()
    assert "IDENTITY_NOT_FOUND" not in {f["code"] for f in result["preflight"]["findings"]}


# ------------------------------------------------------------------------- the fake answers in the same shape


def _get(azure, session, path: str, api_version: str, query: str = "") -> dict:
    from azure.core.rest import HttpRequest

    response = session.compute._client.send_request(
        HttpRequest("GET", f"https://management.azure.com{path}?api-version={api_version}{query}"))
    assert response.status_code == 200, response.text()
    return response.json()


def test_a_gallery_image_answer_has_the_examples_shape(azure, session):
    image_id = _linux_definition(azure)
    fake = _get(azure, session, image_id, "2026-03-03")
    example = body("compute/GalleryImage_Get.json")
    assert paths(example) <= paths(fake)
    # architecture is in the spec (GalleryImageProperties), not in this example; type is on every ARM answer.
    assert paths(fake) - paths(example) <= {"type", "properties.architecture"}


def test_a_version_answer_has_the_examples_shape_and_replication_only_on_request(azure, session):
    image_id = _linux_definition(azure)
    version_id = azure.add_gallery_image_version(image_id, "1.0.0", regions=("westus", "eastus"))
    example = body("compute/GalleryImageVersion_Get_WithValidationProfileAndReplicationStatus.json")
    expanded = _get(azure, session, version_id, "2026-03-03", "&$expand=ReplicationStatus")
    plain = _get(azure, session, version_id, "2026-03-03")
    assert paths(expanded) - paths(example) <= {"type", "properties.publishingProfile.excludeFromLatest"}
    assert {p for p in paths(example) if p.startswith("properties.replicationStatus")} <= paths(expanded)
    assert not [p for p in paths(plain) if "replicationStatus" in p]


@pytest.mark.parametrize("fixture,prefix,name", [
    ("compute/CommunityGalleryImage_Get.json", "communityGalleries", "community_name"),
    ("compute/SharedGalleryImage_Get.json", "sharedGalleries", "shared_name"),
])
def test_community_and_shared_image_answers_have_the_examples_shape(azure, session, fixture, prefix, name):
    example = body(fixture)
    public = "publicGalleryName" if name == "community_name" else "galleryUniqueName"
    azure.add_gallery_image("img-rg", "g", "myGalleryImageName", **{name: public},
                            body={"location": LOCATION, "properties": example["properties"]})
    fake = _get(azure, session, f"/subscriptions/{azure.subscription_id}/providers/Microsoft.Compute/locations/"
                                f"{LOCATION}/{prefix}/{public}/images/myGalleryImageName", "2026-03-03")
    assert paths(fake) == paths(example)
    assert fake["identifier"] == example["identifier"]


def test_a_ppg_answer_has_the_examples_shape(azure, session):
    ppg_id = azure.add_proximity_placement_group("rg", "p", vm_sizes=["Standard_ND96asr_v4"], zones=["1"])
    fake = _get(azure, session, ppg_id, "2026-04-01")
    example = body("compute/ProximityPlacementGroup_Get.json")
    # The example lists VMs and availability sets; an empty group has none, so those paths are absent.
    assert paths(fake) <= paths(example)
    assert {"properties.intent.vmSizes", "zones", "properties.proximityPlacementGroupType"} <= paths(fake)


def test_an_identity_answer_has_the_examples_shape(azure, session):
    rid = azure.add_user_assigned_identity("rg", "reader")
    fake = session.resources.resources.get_by_id(rid, api_version="2024-11-30").as_dict()
    example = body("msi/IdentityGet.json")
    assert paths(example) - {"tags.key1", "tags.key2"} <= paths(fake)
    assert paths(fake) <= paths(example)
