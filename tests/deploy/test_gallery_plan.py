"""Custom images built from a Marketplace image (a gallery, community or shared image definition with
a purchasePlan; Learn: "Supply Azure Marketplace purchase plan information when creating images"):
the scale set carries the plan, the terms are checked and --accept-terms accepts them, as for a
Marketplace URN."""

from __future__ import annotations

import pytest
from deploy_support import LOCATION, RG, VMSS, arm_check, assert_cli_error, create_args, request, writes

from azgpu.deploy import CreateOptions, create
from azgpu.errors import ValidationFailed

# AlmaLinux HPC's plan (az vm image show --urn almalinux:almalinux-hpc:8_10-hpc-gen2:latest --query plan).
PLAN = {"name": "8_10-hpc-gen2", "publisher": "almalinux", "product": "almalinux-hpc"}


def gallery_with_plan(azure, **extra) -> str:
    image_id = azure.add_gallery_image("img-rg", "hpcgallery", "alma-hpc", purchase_plan=PLAN, **extra)
    azure.add_gallery_image_version(image_id, "1.0.0", regions=(LOCATION,))
    return image_id


def test_unaccepted_terms_stop_the_preflight_with_the_terms_accept_remedy(azure, session):
    image_id = gallery_with_plan(azure)
    with pytest.raises(ValidationFailed) as caught:
        create(session, request(image=image_id))
    (err,) = [f for f in caught.value.errors if f.code == "MARKETPLACE_TERMS_NOT_ACCEPTED"]
    assert "plan 8_10-hpc-gen2" in err.message and "built from a Marketplace image" in err.message
    assert err.remedy.startswith("'az vm image terms accept --publisher almalinux --offer almalinux-hpc "
                                 "--plan 8_10-hpc-gen2'")  # quoted: the CLI tells a command from its prose
    assert writes(azure) == []


def test_cli_shows_the_remedy_and_writes_nothing(azure, cli):
    image_id = gallery_with_plan(azure)
    rc, out, err = cli(*create_args("nd-a100-v4", "--image", image_id))
    assert_cli_error(rc, err, 2, "MARKETPLACE_TERMS_NOT_ACCEPTED", "az vm image terms accept --publisher almalinux")
    assert writes(azure) == []


def test_accepted_terms_deploy_with_the_plan_in_the_scale_set_and_the_template(azure, session):
    image_id = gallery_with_plan(azure)
    azure.accept_terms("almalinux", "almalinux-hpc", "8_10-hpc-gen2")
    result = create(session, request(image=image_id)).as_dict()
    assert "IMAGE_PLAN" in {f["code"] for f in result["preflight"]["findings"]}
    (vmss,) = azure.resources(type=VMSS, resource_group=RG)
    assert vmss["plan"] == PLAN
    (validated,) = [r for r in azure.requests if arm_check(r)]  # the template Azure validated carries it too
    inner = validated.body["properties"]["template"]["resources"][1]["properties"]["template"]
    (template_vmss,) = [r for r in inner["resources"] if r["type"] == VMSS]
    assert template_vmss["plan"] == PLAN


def test_accept_terms_accepts_them_first_then_deploys(azure, session):
    image_id = gallery_with_plan(azure)
    result = create(session, request(image=image_id), CreateOptions(accept_terms=True)).as_dict()
    assert azure.terms_accepted("almalinux", "almalinux-hpc", "8_10-hpc-gen2")
    assert result["terms_accepted"] == PLAN
    assert azure.resources(type=VMSS, resource_group=RG)[0]["plan"] == PLAN


def test_a_community_image_with_a_plan_carries_it(azure, session):
    image_id = gallery_with_plan(azure, community_name="alma-community")
    azure.accept_terms("almalinux", "almalinux-hpc", "8_10-hpc-gen2")
    create(session, request(image="/CommunityGalleries/alma-community/Images/alma-hpc"))
    assert azure.resources(type=VMSS, resource_group=RG)[0]["plan"] == PLAN
    assert image_id


def test_the_fake_refuses_a_scale_set_of_such_an_image_without_the_plan(azure, session):
    image_id = gallery_with_plan(azure)
    azure.accept_terms("almalinux", "almalinux-hpc", "8_10-hpc-gen2")
    azure.add_resource(f"/subscriptions/{azure.subscription_id}/resourceGroups/{RG}", {"location": LOCATION})
    from azure.core.exceptions import HttpResponseError

    from azgpu.deploy.deployer import Deployer
    from azgpu.plan import build_plan
    from azgpu.spec import validate

    plan = build_plan(validate(request(image=image_id), command="create"))  # no preflight: no plan in the body
    deployer = Deployer(session, plan, RG)
    for r in plan.resources[:-1]:
        deployer.begin_put(r).result()
    with pytest.raises(HttpResponseError) as caught:
        deployer.begin_put(plan.resources[-1]).result()
    assert "requires Plan information" in str(caught.value)
