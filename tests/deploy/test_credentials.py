"""Subscription and credential resolution through the CLI's real session path (no --simulate)."""

from __future__ import annotations

import json

import pytest
from azure.core.exceptions import ClientAuthenticationError
from deploy_support import VMSS, assert_cli_error, cluster_args, create_args

from azgpu.deploy import session as session_module
from azgpu.testing import DEFAULT_SUBSCRIPTION, FakeCredential


class BrokenCredential:
    def get_token(self, *scopes, **kwargs):
        raise ClientAuthenticationError("DefaultAzureCredential failed to retrieve "
                                        "a token from the included credentials.\nAttempted credentials: "
                                        "EnvironmentCredential ...")

    def get_token_info(self, *scopes, options=None):
        return self.get_token(*scopes)


@pytest.fixture
def no_subscription(tmp_path, monkeypatch):
    """No --subscription, no AZURE_SUBSCRIPTION_ID, an empty Azure CLI config directory."""
    monkeypatch.delenv("AZURE_SUBSCRIPTION_ID", raising=False)
    empty = tmp_path / "azure-config"
    empty.mkdir()
    monkeypatch.setenv("AZURE_CONFIG_DIR", str(empty))
    return empty


@pytest.fixture
def credential(monkeypatch):
    """What DefaultAzureCredential would return; tests swap it."""
    holder = {"credential": FakeCredential()}
    monkeypatch.setattr(session_module, "default_credential", lambda: holder["credential"])
    return holder


@pytest.mark.parametrize("argv", [create_args(), ["status", *cluster_args()]], ids=["create", "status"])
def test_missing_subscription_exits_2_with_the_remedy(azure, run, no_subscription, credential, argv):
    rc, out, err = run(*argv)
    assert_cli_error(rc, err, 2, "NO_SUBSCRIPTION",
                     "pass --subscription with its ID ('az account list -o table' lists them), "
                     "set AZURE_SUBSCRIPTION_ID")
    assert azure.requests == []


def test_subscription_comes_from_the_environment(azure, run, no_subscription, credential, monkeypatch):
    monkeypatch.setenv("AZURE_SUBSCRIPTION_ID", DEFAULT_SUBSCRIPTION)
    rc, out, err = run("status", *cluster_args())
    assert rc == 3, err  # reached (fake) Azure with that subscription: the cluster does not exist
    assert azure.requests and all(DEFAULT_SUBSCRIPTION in r.path for r in azure.requests)


def test_subscription_comes_from_the_az_cli_default(azure, run, no_subscription, credential):
    profile = {"subscriptions": [{"id": "11111111-1111-1111-1111-111111111111", "isDefault": False},
                                 {"id": DEFAULT_SUBSCRIPTION, "isDefault": True}]}
    (no_subscription / "azureProfile.json").write_text(json.dumps(profile), encoding="utf-8-sig")  # az writes a BOM
    rc, out, err = run("status", *cluster_args())
    assert rc == 3, err
    assert all(DEFAULT_SUBSCRIPTION in r.path for r in azure.requests)


@pytest.mark.parametrize("profile", ["[1]", '{"subscriptions": {"id": 1}}', '{"subscriptions": [1, null]}',
                                     '{"subscriptions": [{"isDefault": true, "id": ["x"]}]}',
                                     "[" * 100000 + "]" * 100000, '{"subscriptions": [' + '{"id": "x"},' * 10 + "]"])
def test_an_az_profile_azgpu_cannot_read_selects_no_subscription(azure, run, no_subscription, credential, profile):
    """az's azureProfile.json is another program's file: one of another shape is no default (it raised
    AttributeError, or RecursionError for one nested deep), and the user is told what to pass."""
    (no_subscription / "azureProfile.json").write_text(profile, encoding="utf-8-sig")
    rc, out, err = run("status", *cluster_args())
    assert_cli_error(rc, err, 2, "NO_SUBSCRIPTION", "pass --subscription with its ID")
    assert azure.requests == []


def test_credential_that_cannot_get_a_token_exits_1_without_traceback(azure, run, credential):
    credential["credential"] = BrokenCredential()
    rc, out, err = run(*create_args(), "--subscription", DEFAULT_SUBSCRIPTION)
    assert_cli_error(rc, err, 1, "AUTHENTICATION_FAILED", "az login")
    assert "DefaultAzureCredential failed to retrieve a token" in err
    assert azure.requests == []


def test_credential_failure_on_status_too(azure, run, credential):
    credential["credential"] = BrokenCredential()
    rc, out, err = run("status", *cluster_args(), "--subscription", DEFAULT_SUBSCRIPTION)
    assert_cli_error(rc, err, 1, "AUTHENTICATION_FAILED", "AZURE_CLIENT_ID")


def test_real_session_path_deploys_against_the_fake(azure, run, credential):
    rc, out, err = run(*create_args(), "--subscription", DEFAULT_SUBSCRIPTION)
    assert rc == 0, err
    assert len(azure.resources(type=VMSS)) == 1
    assert credential["credential"].scopes[0] == ("https://management.azure.com/.default",)
