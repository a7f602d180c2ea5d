"""A user-assigned identity the caller may not assign is refused in the preflight, with the role to grant
(Managed Identity Operator), before anything is written; the caller's permissions on the identity are
read from the permissions API (Permissions - List For Resource)."""

from __future__ import annotations

import pytest
from deploy_support import VMSS, assert_cli_error, create_args, request, writes

from azgpu.deploy import create
from azgpu.errors import ValidationFailed

ASSIGN = "Microsoft.ManagedIdentity/userAssignedIdentities/assign/action"
# The built-in Managed Identity Operator role's actions (Learn, "Azure built-in roles: Identity").
OPERATOR = ["Microsoft.ManagedIdentity/userAssignedIdentities/*/read",
            "Microsoft.ManagedIdentity/userAssignedIdentities/*/assign/action", "Microsoft.Authorization/*/read",
            "Microsoft.Insights/alertRules/*", "Microsoft.Resources/subscriptions/resourceGroups/read",
            "Microsoft.Resources/deployments/*", "Microsoft.Support/*"]
CONTRIBUTOR_LIKE = ["*"]


def test_an_identity_the_caller_may_not_assign_is_refused_with_the_role_to_grant(azure, session):
    rid = azure.add_user_assigned_identity("id-rg", "trainer")
    azure.set_permissions(CONTRIBUTOR_LIKE,
                          not_actions=["Microsoft.ManagedIdentity/userAssignedIdentities/*/assign/action"])
    with pytest.raises(ValidationFailed) as caught:
        create(session, request(identity=[rid]))
    (err,) = [f for f in caught.value.errors if f.code == "IDENTITY_NOT_ASSIGNABLE"]
    assert ASSIGN in err.message and rid in err.message
    assert "Managed Identity Operator" in err.remedy and f"--scope {rid}" in err.remedy
    assert writes(azure) == []
    asked = [r.path for r in azure.requests if r.path.endswith("/providers/Microsoft.Authorization/permissions")]
    assert asked == [f"{rid}/providers/Microsoft.Authorization/permissions"]


def test_the_cli_exits_2_and_names_the_role(azure, cli):
    rid = azure.add_user_assigned_identity("id-rg", "trainer")
    azure.set_permissions(["Microsoft.Compute/*", "Microsoft.Network/*", "Microsoft.Resources/*"])
    rc, out, err = cli(*create_args(), "--identity", rid)
    assert_cli_error(rc, err, 2, "IDENTITY_NOT_ASSIGNABLE", "Managed Identity Operator")


@pytest.mark.parametrize("actions", [CONTRIBUTOR_LIKE, ["Microsoft.Compute/*", "Microsoft.Network/*",
                                                         "Microsoft.Resources/*", *OPERATOR]])
def test_an_operator_of_the_identity_deploys(azure, session, actions):
    rid = azure.add_user_assigned_identity("id-rg", "trainer")
    azure.set_permissions(actions)
    create(session, request(identity=[rid]))
    assert azure.resources(type=VMSS)[0]["identity"]["userAssignedIdentities"] == {rid: {}}


def test_the_fake_refuses_the_scale_set_put_as_azure_does_and_the_table_names_the_role(azure, session):
    from azgpu.deploy.arm import to_azure_error
    from azgpu.deploy.azure_errors import AuthError
    from azgpu.deploy.deployer import Deployer
    from azgpu.plan import build_plan
    from azgpu.spec import validate

    rid = azure.add_user_assigned_identity("id-rg", "trainer")
    azure.add_resource(f"/subscriptions/{azure.subscription_id}/resourceGroups/rg1", {"location": "eastus"})
    azure.set_permissions(CONTRIBUTOR_LIKE,
                          not_actions=["Microsoft.ManagedIdentity/userAssignedIdentities/*/assign/action"])
    plan = build_plan(validate(request(identity=[rid]), command="create"))  # no preflight
    deployer = Deployer(session, plan, "rg1")
    for r in plan.resources[:-1]:
        deployer.begin_put(r).result()
    with pytest.raises(Exception) as caught:
        deployer.begin_put(plan.resources[-1]).result()
    err = to_azure_error(caught.value, "c1-vmss000")
    assert isinstance(err, AuthError) and err.code == "NOT_AUTHORIZED_LINKED"
    assert ASSIGN in err.message and "Managed Identity Operator" in err.remedy
