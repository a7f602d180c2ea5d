"""What the preflight concludes from the image API's answer (plan, deprecation, security type), the
marketplace terms of a purchase plan, and the quota family Azure reports."""

from __future__ import annotations

import json

import pytest
from deploy_support import LOCATION, VMSS, assert_cli_error, calls, create_args, request, writes

from azgpu.deploy import CreateOptions, create
from azgpu.errors import ValidationFailed
from azgpu.spec import validate

ALMA = "almalinux-hpc-8-10"
ALMA_URN = "almalinux:almalinux-hpc:8_10-hpc-gen2:latest"
PLAN = {"name": "8_10-hpc-gen2", "publisher": "almalinux", "product": "almalinux-hpc"}


def preflight_failure(azure, session, **values) -> list:
    with pytest.raises(ValidationFailed) as info:
        create(session, request(**values))
    assert writes(azure) == [], "the preflight must stop before any write"
    return info.value.errors


def finding(result: dict, code: str) -> dict:
    (found,) = [f for f in result["preflight"]["findings"] if f["code"] == code]
    return found


def vmss_plans(azure) -> list:
    return [v.get("plan") for v in azure.resources(type=VMSS)]


# -- marketplace terms ---------------------------------------------------------------------------

def test_unaccepted_terms_stop_the_preflight_with_the_az_remedy(azure, session):
    (f,) = preflight_failure(azure, session, image=ALMA)
    assert f.code == "MARKETPLACE_TERMS_NOT_ACCEPTED"
    assert f"az vm image terms accept --urn {ALMA_URN}" in f.remedy


def test_cli_unaccepted_terms_exit_2_one_line_nothing_written(azure, cli):
    rc, out, err = cli(*create_args("nd-a100-v4", "--image", ALMA))
    assert_cli_error(rc, err, 2, "MARKETPLACE_TERMS_NOT_ACCEPTED", f"az vm image terms accept --urn {ALMA_URN}")
    assert out == "" and writes(azure) == []


def test_plan_image_with_accepted_terms_deploys_with_its_plan(azure, session):
    azure.accept_terms("almalinux", "almalinux-hpc", "8_10-hpc-gen2")
    result = create(session, request(image=ALMA)).as_dict()
    assert result["image_plan"] == PLAN
    assert vmss_plans(azure) == [PLAN]


def test_simulated_cli_deploys_the_alma_linux_hpc_image_after_accepting_its_terms(sim, state_file):
    rc, out, err = sim(*create_args("nd-a100-v4", "--image", ALMA, "--accept-terms"))
    assert rc == 0, err
    assert json.loads(out)["terms_accepted"] == PLAN
    state = json.loads(state_file.read_text())
    assert state["agreements"]["almalinux/almalinux-hpc/8_10-hpc-gen2"]["accepted"] is True
    assert [r["plan"] for r in state["resources"].values() if r["type"] == VMSS] == [PLAN]


def test_accept_terms_writes_the_agreement_before_any_resource(azure, session):
    create(session, request(image=ALMA), CreateOptions(accept_terms=True))
    first = writes(azure)[0]
    assert (first.method, first.path.endswith("/agreements/current")) == ("PUT", True)
    assert first.body["properties"]["accepted"] is True


def test_accept_terms_with_dry_run_writes_nothing(azure, session):
    result = create(session, request(image=ALMA), CreateOptions(accept_terms=True, dry_run=True)).as_dict()
    assert finding(result, "MARKETPLACE_TERMS_ACCEPTING")["severity"] == "note"
    assert writes(azure) == [] and not azure.terms_accepted("almalinux", "almalinux-hpc", "8_10-hpc-gen2")


def test_accepted_terms_are_not_accepted_again(azure, session):
    azure.accept_terms("almalinux", "almalinux-hpc", "8_10-hpc-gen2")
    create(session, request(image=ALMA), CreateOptions(accept_terms=True))
    assert not calls(azure, "PUT", path="agreements")


def test_image_without_plan_asks_nothing_of_the_marketplace(azure, session):
    create(session, request())
    assert not calls(azure, path="MarketplaceOrdering")


# -- the live plan wins --------------------------------------------------------------------------

def test_live_plan_that_differs_from_the_catalog_is_reported_and_deployed(azure, session):
    live = {"publisher": "almalinux", "product": "almalinux-hpc", "name": "8_10-hpc-gen2-v2"}
    azure.add_image(LOCATION, "almalinux", "almalinux-hpc", "8_10-hpc-gen2", "9.0.0", plan=live)
    azure.accept_terms("almalinux", "almalinux-hpc", "8_10-hpc-gen2-v2")
    result = create(session, request(image=ALMA)).as_dict()
    f = finding(result, "IMAGE_PLAN_DIFFERS")
    assert f["severity"] == "warning" and "8_10-hpc-gen2-v2" in f["message"]
    assert vmss_plans(azure) == [{"name": "8_10-hpc-gen2-v2", "publisher": "almalinux", "product": "almalinux-hpc"}]


def test_plan_of_an_image_unknown_to_the_catalog_is_taken_from_azure(azure, session):
    plan = {"publisher": "contoso", "product": "hpc", "name": "paid"}
    azure.add_image(LOCATION, "contoso", "hpc", "paid", "1.0.0", plan=plan)
    azure.accept_terms("contoso", "hpc", "paid")
    create(session, request(image="contoso:hpc:paid:latest"))
    assert vmss_plans(azure) == [{"name": "paid", "publisher": "contoso", "product": "hpc"}]


# -- deprecation and security type ---------------------------------------------------------------

def test_deprecated_image_is_an_error_naming_the_alternative(azure, session):
    azure.add_image(LOCATION, "contoso", "hpc", "old", "1.0.0",
                    deprecation={"imageState": "Deprecated", "scheduledDeprecationTime": "2024-06-30T00:00:00+00:00",
                                 "alternativeOption": {"type": "Offer", "value": "hpc-next"}})
    (f,) = preflight_failure(azure, session, image="contoso:hpc:old:latest")
    assert (f.code, "since 2024-06-30" in f.message, "'hpc-next'" in f.remedy) == ("IMAGE_DEPRECATED", True, True)


def test_deprecated_catalog_image_from_the_fakes_data(azure, session):
    codes = {f.code for f in preflight_failure(azure, session, image="centos-hpc-7-9")}
    assert "IMAGE_DEPRECATED" in codes


def test_image_scheduled_for_deprecation_warns_and_deploys(azure, session):
    result = create(session, request(image="ubuntu-hpc-2004")).as_dict()
    f = finding(result, "IMAGE_DEPRECATION_SCHEDULED")
    assert f["severity"] == "warning" and "2026-12-31" in f["message"]
    assert azure.resources(type=VMSS)


def test_trusted_launch_on_an_image_without_it_is_an_error(azure, session):
    azure.add_image(LOCATION, "contoso", "cvm", "1", "1.0.0",
                    features=[{"name": "SecurityType", "value": "ConfidentialVmSupported"}])
    (f,) = preflight_failure(azure, session, profile="nd-h100-v5", image="contoso:cvm:1:latest",
                             security_type="TrustedLaunch")
    assert f.code == "IMAGE_SECURITY_TYPE" and "--security-type Standard" in f.remedy


def test_trusted_launch_on_an_image_that_supports_it_passes(azure, session):
    azure.add_image(LOCATION, "contoso", "tl", "1", "1.0.0",
                    features=[{"name": "SecurityType", "value": "TrustedLaunchSupported"}])
    result = create(session, request(profile="nd-h100-v5", image="contoso:tl:1:latest",
                                     security_type="TrustedLaunch")).as_dict()
    assert "IMAGE_SECURITY_TYPE" not in {f["code"] for f in result["preflight"]["findings"]}


# -- the quota family Azure reports --------------------------------------------------------------

def test_quota_is_counted_under_the_family_the_sku_api_reports(azure, session):
    # The fake's MI300X entry is the recorded one: "Standard NDisr MI300X v5 Family", not the profile's
    # standardNDISv5MI300XFamily.
    result = create(session, request("nd-mi300x-v5")).as_dict()
    findings = result["preflight"]["findings"]
    assert "QUOTA_UNKNOWN" not in {f["code"] for f in findings}
    assert result["preflight"]["quota"][0]["quota"] == "Standard NDisr MI300X v5 Family"  # the usage name
    assert [f["severity"] for f in findings if f["code"] == "SKU_DRIFT"
            and "quota family" in f["message"]] == ["warning"]


def test_family_shortfall_under_the_live_family_stops_the_preflight(azure, session):
    azure.set_quota(LOCATION, "Standard NDisr MI300X v5 Family", limit=10)
    codes = [f.code for f in preflight_failure(azure, session, profile="nd-mi300x-v5")]
    assert codes == ["QUOTA_INSUFFICIENT"]


# -- what Azure answers when the preflight is bypassed (a template deployed as is, terms revoked) ----

def _deploy_without_preflight(session, spec):
    from azgpu.deploy.deployer import Deployer
    from azgpu.errors import AzureError
    from azgpu.plan import build_plan

    deployer = Deployer(session, build_plan(spec), "rg1")
    deployer.ensure_resource_group(LOCATION)
    with pytest.raises(AzureError) as info:
        deployer.deploy()
    return info.value


def test_scale_set_without_the_images_plan_maps_to_marketplace_plan_missing(azure, session):
    from msgspec import structs

    azure.accept_terms("almalinux", "almalinux-hpc", "8_10-hpc-gen2")
    spec = validate(request(image=ALMA), command="create")
    err = _deploy_without_preflight(session,
                                    structs.replace(spec, image=structs.replace(spec.image, plan=None)))
    assert (err.code, err.azure_code) == ("MARKETPLACE_PLAN_MISSING", "VMMarketplaceInvalidInput")


def test_unaccepted_terms_at_deploy_time_map_to_the_terms_remedy(azure, session):
    spec = validate(request(image=ALMA), command="create")
    err = _deploy_without_preflight(session, spec)
    assert (err.code, err.azure_code) == ("MARKETPLACE_TERMS_NOT_ACCEPTED", "MarketplacePurchaseEligibilityFailed")
    assert "'az vm image terms accept' with its --urn" in err.remedy
