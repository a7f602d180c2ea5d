"""Azure's own preflight: Deployments - Validate before any write, ARM's what-if beside azgpu's.

The fake answers both in the shapes of the REST specification's examples (tests/fixtures/azure/
resources, deployments 2025-04-01); the replayed example's 400 goes through azgpu's error table.
"""

from __future__ import annotations

import json

import pytest
from deploy_support import RG, VMSS, arm_check, calls, create_args, request, writes
from test_azure_examples import SUB, example, live, serving, shape_differences  # noqa: F401 - live is a fixture

from azgpu.deploy import CreateOptions, create
from azgpu.deploy.arm_preflight import request as arm_request
from azgpu.deploy.arm_preflight import validate as arm_validate
from azgpu.deploy.arm_preflight import what_if as arm_what_if
from azgpu.deploy.azure_errors import AuthError, PolicyError, RequestError
from azgpu.deploy.deployer import Deployer
from azgpu.plan import build_plan
from azgpu.spec import validate

VALIDATE = "resources/PostDeploymentValidateOnResourceGroup"
WHATIF = "resources/PostDeploymentWhatIfOnResourceGroup"
SIZE = "Standard_ND96asr_v4"  # nd-a100-v4's size
ROUTE_TABLE = "Microsoft.Network/routeTables"


def deployer_for(session, **values) -> Deployer:
    return Deployer(session, build_plan(validate(request(**values), command="create")), RG)


def group(azure):
    azure.add_resource(f"/subscriptions/{azure.subscription_id}/resourceGroups/{RG}", {"location": "eastus"})


# -- the fake's answers have the examples' shapes ---------------------------------------------------

def test_fake_validate_answers_in_the_examples_shape(azure, session):
    group(azure)
    path, body = arm_request(deployer_for(session), group_exists=True, location="eastus")
    import requests

    answer = requests.post(f"https://management.azure.com{path}/validate", params={"api-version": "2025-04-01"},
                           json=body, timeout=5)
    assert answer.status_code == 200
    # The example validates a template link (templateLink, providers, dependencies, timing, diagnostics);
    # azgpu sends the template inline, for which ARM reports none of those.
    only_real = {"properties.templateLink", "properties.providers", "properties.dependencies", "properties.timestamp",
                 "properties.duration", "properties.diagnostics"}
    assert shape_differences(example(VALIDATE)["responses"]["200"]["body"], answer.json(), only_real=only_real) == []
    assert len(answer.json()["properties"]["validatedResources"]) == 5


def test_fake_validation_error_has_the_examples_shape(azure, session):
    group(azure)
    azure.reject_property(VMSS, "properties.overprovision")
    path, body = arm_request(deployer_for(session), group_exists=True, location="eastus")
    import requests

    answer = requests.post(f"https://management.azure.com{path}/validate", params={"api-version": "2025-04-01"},
                           json=body, timeout=5)
    assert answer.status_code == 400
    assert shape_differences(example(VALIDATE)["responses"]["400"]["body"], answer.json()) == []


def test_fake_what_if_answers_in_the_examples_shape(azure, session):
    create(session, request(nodes=2, tags={"team": "a"}))
    result = arm_what_if(session, deployer_for(session, nodes=3, tags={"team": "b"}), group_exists=True,
                         location="eastus")
    def tagged(payload):  # tag names are the user's: one stands for all
        return {**payload, "tags": {"tag": "value"}} if isinstance(payload, dict) and "tags" in payload else payload

    def value(delta):  # a property's values are any JSON: compare the entry's keys only
        return [{k: "value" if k in ("before", "after") else v for k, v in d.items()} for d in delta]

    def normal(changes):
        return {"status": "Succeeded", "properties": {"changes": [
            {k: tagged(v) if k in ("before", "after") else value(v) if k == "delta" else v for k, v in c.items()}
            for c in changes]}}

    wrapped = normal(result)
    # The fake's `before`/`after` carry whole resources (FullResourcePayloads), the example's a few keys.
    only_fake = {"properties.changes[].before.properties", "properties.changes[].after.properties",
                 "properties.changes[].before.sku", "properties.changes[].after.sku",
                 "properties.changes[].before.zones", "properties.changes[].after.zones",
                 "properties.changes[].delta[].before"}
    only_fake |= {"properties.changes[].before.tags"}
    real = normal(example(WHATIF)["responses"]["200"]["body"]["properties"]["changes"])
    differences = shape_differences(real, wrapped, only_fake=only_fake)
    assert differences == [], differences
    vmss = next(c for c in result if c["resourceId"].endswith("/c1-vmss000"))
    assert vmss["changeType"] == "Modify"
    assert {"path": "sku.capacity", "propertyChangeType": "Modify", "before": 2, "after": 3} in vmss["delta"]


def test_the_examples_validation_error_is_mapped_through_the_error_table(live):  # noqa: F811 - the fixture imported above
    class Plain:  # what validate() needs of a deployer
        session, resource_group, cluster = live, "my-resource-group", "c1"
        plan = type("P", (), {"resources": []})()

    path = (r"/subscriptions/[^/]+/resourceGroups/my-resource-group/providers/Microsoft\.Resources/deployments/[^/]+"
            r"/validate")
    with serving("POST", path, example(VALIDATE)["responses"]["400"]["body"], status=400):
        with pytest.raises(RequestError) as caught:
            arm_validate(live, Plain(), group_exists=True, location="eastus")
    assert caught.value.azure_code == "AccountNameInvalid"
    assert "a is not a valid storage account name" in caught.value.message
    assert caught.value.message.startswith("Azure's template validation: AccountNameInvalid")


# -- create and --dry-run stop before any write ------------------------------------------------------

def test_a_policy_that_denies_the_size_stops_create_before_any_write(azure, cli):
    assignment = azure.add_policy_assignment("deny-nd", denied_sizes=[SIZE],
                                             display_name="Allowed virtual machine size SKUs")
    rc, out, err = cli(*create_args(), "-o", "json")
    assert rc != 0
    assert "ERROR: [DISALLOWED_BY_POLICY]" in err
    assert "Allowed virtual machine size SKUs" in err and assignment in err
    assert "az policy assignment show" in err  # the remedy
    assert writes(azure) == [] and azure.resources(type=VMSS) == []
    assert [r.path.rsplit("/", 1)[-1] for r in calls(azure, "POST") if arm_check(r)] == ["validate"]


def test_a_property_azure_rejects_stops_create_and_names_the_resource(azure, session):
    azure.reject_property(VMSS, "properties.overprovision",
                          message="The property '{path}' is not allowed on resource '{name}' with this api-version.")
    with pytest.raises(RequestError) as caught:
        create(session, request())
    assert caught.value.code == "INVALID_PARAMETER"
    assert "resource 'c1-vmss000'" in caught.value.message and "overprovision" in caught.value.message
    assert caught.value.remedy
    assert writes(azure) == []


def test_dry_run_asks_azure_too_and_reports_it(azure, session):
    result = create(session, request(), CreateOptions(dry_run=True)).as_dict()
    assert result["azure_validation"] == {"scope": "subscription", "validated_resources": 6}
    azure.add_policy_assignment("deny-nd", denied_sizes=[SIZE])
    with pytest.raises(PolicyError):
        create(session, request(), CreateOptions(dry_run=True))
    assert writes(azure) == []


def test_an_existing_group_is_validated_at_its_own_scope(azure, session):
    create(session, request())
    before = len(azure.requests)
    result = create(session, request(nodes=3)).as_dict()
    assert result["azure_validation"] == {"scope": "resource group", "validated_resources": 5}
    posted = [r.path for r in azure.requests[before:] if arm_check(r)]
    assert posted == [f"/subscriptions/{SUB}/resourceGroups/{RG}/providers/Microsoft.Resources/deployments/azgpu-c1"
                      "/validate"]


def test_a_caller_without_the_validate_action_is_told_what_to_do(azure, session):
    azure.set_permissions(["*"], not_actions=["Microsoft.Resources/deployments/validate/action"])
    with pytest.raises(AuthError) as caught:
        create(session, request())
    assert caught.value.code == "ARM_VALIDATE_NOT_AUTHORIZED"
    assert "Microsoft.Resources/deployments/validate/action" in caught.value.message
    assert "--no-arm-validate" in caught.value.remedy
    assert writes(azure) == []
    create(session, request(), CreateOptions(arm_validate=False))  # the documented way around it
    assert len(azure.resources(type=VMSS)) == 1


def test_without_arm_validation_the_policy_still_refuses_the_scale_sets_put(azure, cli):
    azure.add_policy_assignment("deny-nd", denied_sizes=[SIZE], display_name="No ND")
    rc, out, err = cli(*create_args(), "--no-arm-validate", "-o", "none")
    assert rc != 0 and "ERROR: [DISALLOWED_BY_POLICY]" in err and "No ND" in err
    assert not any(arm_check(r) for r in azure.requests)


# -- --what-if: ARM's own change list beside azgpu's ---------------------------------------------------

def test_a_route_table_added_outside_azgpu_shows_in_arms_what_if(azure, session, cli):
    create(session, request(nodes=2))
    rt = azure.add_resource(f"/subscriptions/{SUB}/resourceGroups/{RG}/providers/{ROUTE_TABLE}/rt-user",
                            {"location": "eastus", "properties": {"routes": []}})
    subnet = session.network.subnets.get(RG, "c1-vnet", "compute")
    subnet.route_table = {"id": rt["id"]}
    session.network.subnets.begin_create_or_update(RG, "c1-vnet", "compute", subnet).result()

    before = len(azure.requests)
    rc, out, err = cli(*create_args(nodes=2), "--what-if", "-o", "json")
    assert rc == 0, err
    assert writes(azure, since=before) == []
    result = json.loads(out)
    ours = {c["name"]: c["symbol"] for c in result["changes"]}
    assert ours["c1-vnet"] == "="  # azgpu compares only what it sets
    arm = {c["resource_id"].rsplit("/", 1)[-1]: c for c in result["azure_what_if"]}
    assert arm["c1-vnet"]["symbol"] == "~"
    assert [d["path"] for d in arm["c1-vnet"]["delta"]] == ["properties.subnets[0].properties.routeTable"]
    assert arm["c1-vnet"]["delta"][0]["change"] == "Delete"
    assert arm["rt-user"]["change_type"] == "Ignore" and arm["rt-user"]["symbol"] == "*"

    rc, text, err = cli(*create_args(nodes=2), "--what-if")
    assert "Azure Resource Manager's own what-if of the same template" in text
    assert "  ~ Microsoft.Network/virtualNetworks/c1-vnet [" in text
    assert "    - properties.subnets[0].properties.routeTable: {\"id\": " in text
    assert "  * Microsoft.Network/routeTables/rt-user" in text


def test_what_if_shows_property_deltas_in_arms_vocabulary(azure, session, cli):
    create(session, request(nodes=2, tags={"team": "a"}))
    rc, text, err = cli(*create_args("nd-a100-v4", "--tag", "team=b", nodes=3), "--what-if")
    assert rc == 0, err
    arm = text.split("Azure Resource Manager's own what-if")[1]
    assert "  ~ Microsoft.Compute/virtualMachineScaleSets/c1-vmss000 [" in arm
    assert "    ~ sku.capacity: 2 => 3" in arm and '    ~ tags.team: "a" => "b"' in arm
    assert "Azure's resource changes:" in arm


def test_a_new_cluster_is_all_create_at_subscription_scope(azure, cli):
    rc, out, err = cli(*create_args(), "--what-if", "-o", "json")
    assert rc == 0, err
    kinds = {c["resource_id"].rsplit("/", 1)[-1]: c["change_type"] for c in json.loads(out)["azure_what_if"]}
    assert kinds == {RG: "Create", "c1-nsg": "Create", "c1-natgw-ip": "Create", "c1-natgw": "Create",
                     "c1-vnet": "Create", "c1-vmss000": "Create"}
    assert writes(azure) == []


def test_arms_deltas_never_print_custom_data():
    from azgpu.changes import arm_lines

    change = {"resourceId": "/subscriptions/s/resourceGroups/g/providers/Microsoft.Compute/virtualMachineScaleSets/v",
              "changeType": "Modify", "delta": [{"path": "properties.virtualMachineProfile.osProfile.customData",
                                                 "propertyChangeType": "Modify", "before": "c2VjcmV0",
                                                 "after": "bmV3"}]}
    text = "\n".join(arm_lines([change]))
    assert "c2VjcmV0" not in text and "bmV3" not in text and "(write-only, not shown)" in text


def test_no_arm_validate_leaves_arms_what_if_out(azure, session, cli):
    rc, out, err = cli(*create_args(), "--what-if", "--no-arm-validate", "-o", "json")
    assert rc == 0, err
    result = json.loads(out)
    assert "azure_what_if" not in result and result["azure_what_if_skipped"] == "skipped (--no-arm-validate)"
    assert not any(arm_check(r) for r in azure.requests)
