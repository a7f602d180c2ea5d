"""What the deploy commands print: plain values in every output format, progress lines without a
terminal, a declined prompt that is not an error, the SDK's credential report only with --debug,
and -n/-g checked before any request."""

from __future__ import annotations

import io
import sys

import pytest
import yaml
from deploy_support import LOCATION, NAME, RG, VMSS, assert_cli_error, cluster_args, create_args, request

from azgpu.deploy import CreateOptions, create, lifecycle
from azgpu.errors import ValidationFailed
from azgpu.testing import DEFAULT_SUBSCRIPTION


@pytest.fixture
def cluster(azure, session):
    create(session, request(nodes=2))
    return azure


class Terminal(io.StringIO):
    """stdin as a terminal where the user types `answer`."""

    def isatty(self) -> bool:
        return True


# ------------------------------------------------------------------------------ SDK enums


@pytest.fixture
def enum_states(monkeypatch):
    """The listing as azure-mgmt-network's models give it: provisioning states as ProvisioningState
    enums (GET of an NSG returns ProvisioningState.SUCCEEDED), not strings."""
    from azure.mgmt.network.models import ProvisioningState

    real = lifecycle.list_group

    class WithEnum:  # the models turn an enum set on them back into text, so wrap them instead
        def __init__(self, item):
            self._item = item

        def __getattr__(self, name):
            return getattr(self._item, name)

        @property
        def provisioning_state(self):
            return ProvisioningState(self._item.provisioning_state)

    def listing(session, resource_group):
        items = real(session, resource_group)
        return None if items is None else [WithEnum(item) for item in items]

    monkeypatch.setattr(lifecycle, "list_group", listing)


def test_status_yaml_with_sdk_enums_prints_their_values(cluster, cli, enum_states):
    rc, out, err = cli("status", *cluster_args(), "-o", "yaml")
    assert rc == 0, err
    status = yaml.safe_load(out)
    assert {n["provisioning_state"] for n in status["network"]} == {"Succeeded"}


def test_status_table_with_sdk_enums_prints_their_values(cluster, cli, enum_states):
    rc, out, err = cli("status", *cluster_args(), "-o", "table")
    assert rc == 0, err
    assert "Succeeded" in out and "ProvisioningState" not in out


def test_python_results_hold_no_enums(cluster, session, enum_states):
    from enum import Enum

    def enums(value):
        if isinstance(value, Enum):
            return 1
        if isinstance(value, dict):
            return sum(enums(v) for v in value.values())
        if isinstance(value, list):
            return sum(enums(v) for v in value)
        return 0

    assert enums(lifecycle.status(session, NAME, RG)) == 0


# ------------------------------------------------------------------------------ output formats


def test_tsv_of_a_list_of_lists_is_one_line_per_item(cluster, cli):
    rc, out, err = cli("status", *cluster_args(), "-o", "tsv", "--query", "network[].[type, name]")
    assert rc == 0, err
    assert sorted(out.splitlines()) == ["Microsoft.Network/natGateways\tc1-natgw",
                                        "Microsoft.Network/networkSecurityGroups\tc1-nsg",
                                        "Microsoft.Network/publicIPAddresses\tc1-natgw-ip",
                                        "Microsoft.Network/virtualNetworks\tc1-vnet"]


def test_create_table_has_readable_headers_and_no_empty_rows(azure, cli):
    rc, out, err = cli(*create_args(), "-o", "table")
    assert rc == 0, err
    heads = [line.split("  ")[0] for line in out.splitlines()]
    assert {"GPUs", "vCPUs", "IB domain", "InfiniBand"} <= set(heads)
    assert not {"Gpus", "Vcpus", "Ib Domain"} & set(heads)
    # Findings and notes show only when there are some (a plan with a NAT gateway has a note on it).
    assert all(len(line.split(None, 1)) == 2
               for line in out.splitlines() if line.split("  ")[0] in ("Notes", "Findings"))


# ------------------------------------------------------------------------------ progress without a terminal


def test_create_without_a_terminal_prints_a_line_per_resource_event(azure, cli):
    rc, out, err = cli(*create_args(nodes=3), "-o", "none")
    assert rc == 0, err
    lines = err.splitlines()
    for name in ("c1-nsg", "c1-vnet", "c1-vmss000"):
        assert any(f"] {name} (" in line and line.endswith(("creating", "creating, 0/3 VMs")) for line in lines), err
    assert any("c1-vmss000 (scale-set): succeeded, 3/3 VMs" in line for line in lines), err
    assert out == ""


def test_create_progress_reports_a_failed_resource(azure, cli):
    azure.inject(method="PUT", path="virtualMachineScaleSets", operation_error="InternalExecutionError", times=None)
    rc, out, err = cli(*create_args(), "-o", "none")
    assert rc == 1
    assert any("c1-vmss000 (scale-set): failed" in line for line in err.splitlines()), err


def test_destroy_prints_a_line_per_resource_as_it_goes(cluster, cli):
    rc, out, err = cli("destroy", *cluster_args(), "--yes", "-o", "none")
    assert rc == 0, err
    assert "c1-vmss000: deleting" in err.splitlines() and "c1-vmss000: deleted" in err.splitlines()
    assert err.splitlines().index("c1-vmss000: deleted") < err.splitlines().index("c1-nsg: deleted")


def test_wait_prints_each_scale_set_state_change(azure, cli):
    rc, _, err = cli(*create_args(), "--no-wait", "-o", "none")
    assert rc == 0, err
    rc, _, err = cli("wait", *cluster_args(), "-o", "none")
    assert rc == 0, err
    assert "c1-vmss000: Succeeded" in err.splitlines()


# ------------------------------------------------------------------------------ the destroy prompt


def test_declining_destroy_is_a_cancellation_not_an_error(cluster, cli, monkeypatch):
    monkeypatch.setattr(sys, "stdin", Terminal("n\n"))
    rc, out, err = cli("destroy", *cluster_args())
    assert rc == 0, err
    assert "declined at the prompt: nothing changed" in err
    assert "ERROR" not in err and out == ""
    assert len(cluster.resources(type=VMSS)) == 1


def test_the_destroy_prompt_says_whether_the_resource_group_goes(cluster, cli, monkeypatch):
    monkeypatch.setattr(sys, "stdin", Terminal("n\n"))
    rc, _, err = cli("destroy", *cluster_args())
    assert rc == 0, err
    # create made the group for this cluster: destroy deletes it once the cluster is gone, and says so first.
    assert "Then the resource group 'rg1' itself is deleted: azgpu created it for this cluster." in err
    cluster.add_resource(f"/subscriptions/{cluster.subscription_id}/resourceGroups/rg1/providers/"
                         "Microsoft.Storage/storageAccounts/keepme", {"location": "eastus"})
    monkeypatch.setattr(sys, "stdin", Terminal("n\n"))
    rc, _, err = cli("destroy", *cluster_args())
    assert "The resource group 'rg1' is kept: it also holds 1 other resource(s) (keepme)." in err


def test_confirming_destroy_deletes(cluster, cli, monkeypatch):
    monkeypatch.setattr(sys, "stdin", Terminal("y\n"))
    rc, out, err = cli("destroy", *cluster_args())
    assert rc == 0, err
    assert cluster.resources(type=VMSS) == []


# ------------------------------------------------------------------------------ credentials


# DefaultAzureCredential's failure as the SDK reports it: its report logged at WARNING through
# Python's last-resort handler, then the error. Run in a process of its own: under pytest, a logging
# handler on the root logger would swallow the report either way.
FAILING_CREDENTIAL = """
import logging, sys
from azure.core.exceptions import ClientAuthenticationError
from azgpu.deploy import session
REPORT = ("DefaultAzureCredential failed to retrieve a token from the included credentials.\\n"
          "Attempted credentials:\\n\\tEnvironmentCredential: EnvironmentCredential authentication unavailable.")
class Credential:
    def get_token(self, *scopes, **kwargs):
        logging.getLogger("azure.identity._credentials.chained").warning(REPORT)
        raise ClientAuthenticationError(REPORT)
session.default_credential = Credential
from azgpu.cli import main
sys.exit(main(sys.argv[1:]))
"""


def run_failing_credential(tmp_path, *extra):
    import subprocess

    return subprocess.run([sys.executable, "-c", FAILING_CREDENTIAL, "status", *cluster_args(), "--subscription",
                           DEFAULT_SUBSCRIPTION, *extra], capture_output=True, text=True, cwd=tmp_path)


def test_without_credentials_only_azgpus_error_is_printed(tmp_path):
    done = run_failing_credential(tmp_path)
    assert_cli_error(done.returncode, done.stderr, 1, "AUTHENTICATION_FAILED", "az login")
    assert len(done.stderr.splitlines()) == 2, done.stderr


def test_debug_shows_the_sdks_credential_report(tmp_path):
    done = run_failing_credential(tmp_path, "--debug")
    assert "Attempted credentials:" in done.stderr and "Traceback" in done.stderr


# ------------------------------------------------------------------------------ names checked first


@pytest.mark.parametrize("command", ["status", "outputs", "wait", "destroy"])
def test_a_group_with_a_slash_is_refused_before_any_request(azure, cli, command):
    extra = ["--yes"] if command == "destroy" else []
    rc, out, err = cli(command, "-n", NAME, "-g", f"{RG}/providers/Microsoft.Compute", *extra)
    assert_cli_error(rc, err, 2, "INVALID_RESOURCE_GROUP", "check -g/--resource-group")
    assert azure.requests == []


def test_create_from_python_refuses_bad_zones_before_any_request(azure, session):
    with pytest.raises(ValidationFailed) as info:
        create(session, request(), CreateOptions(zones=["1", "7"], fallback_locations=["mars"]))
    assert [f.code for f in info.value.errors] == ["INVALID_ZONES", "INVALID_FALLBACK_LOCATIONS"]
    assert azure.requests == []


def test_fallback_locations_that_are_valid_pass(azure, session):
    azure.add_resource(f"/subscriptions/{azure.subscription_id}/resourceGroups/{RG}", {"location": LOCATION})
    result = create(session, request(), CreateOptions(zones=["2"], fallback_locations=["westus2"])).as_dict()
    assert result["nodes"] == 2
