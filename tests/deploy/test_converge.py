"""Re-runs converge: after a partial failure a re-run finishes the job without duplicates or leaks;
a finished cluster is only read; what cannot be changed in place, or is not ours, is refused."""

from __future__ import annotations

import pytest
from deploy_support import (
    LOCATION,
    NAT,
    NIC,
    NSG,
    PIP,
    RG,
    VM,
    VMSS,
    VNET,
    arm_check,
    assert_cli_error,
    calls,
    create_args,
    names,
    request,
    writes,
)

from azgpu.deploy import create
from azgpu.deploy.azure_errors import CapacityError
from azgpu.errors import InputError

SPLIT = {"nodes": 6, "max_ib_domain": 2}  # three scale sets of two
SETS = ["c1-vmss000", "c1-vmss001", "c1-vmss002"]
A100_FAMILY = "standardNDASv4_A100Family"


@pytest.fixture
def half_done(azure, session):
    """The 2nd of 3 scale sets failed with AllocationFailed; returns the request index after it."""
    azure.inject(method="PUT", path="c1-vmss001$", operation_error="AllocationFailed")
    with pytest.raises(CapacityError):
        create(session, request(**SPLIT))
    return len(azure.requests)


def test_partial_failure_raises_and_leaves_the_failed_scale_set_failed(azure, half_done):
    states = {v["name"]: v["properties"]["provisioningState"] for v in azure.resources(type=VMSS)}
    assert states == {"c1-vmss000": "Succeeded", "c1-vmss001": "Failed", "c1-vmss002": "Succeeded"}


def test_rerun_after_partial_failure_converges(azure, session, half_done):
    result = create(session, request(**SPLIT)).as_dict()
    states = {v["name"]: v["properties"]["provisioningState"] for v in azure.resources(type=VMSS)}
    assert states == dict.fromkeys(SETS, "Succeeded")
    assert {r["name"]: r["state"] for r in result["resources"] if r["stage"] == "scale-set"} == \
           {"c1-vmss000": "exists", "c1-vmss001": "succeeded", "c1-vmss002": "exists"}


def test_rerun_resends_only_the_failed_scale_set(azure, session, half_done):
    create(session, request(**SPLIT))
    assert [r.path.rsplit("/", 1)[-1] for r in writes(azure, since=half_done)] == ["c1-vmss001"]


def test_rerun_leaves_no_duplicates_and_no_leaked_resources(azure, session, half_done):
    create(session, request(**SPLIT))
    assert names(azure, VMSS) == SETS
    assert (names(azure, NSG), names(azure, VNET)) == (["c1-nsg"], ["c1-vnet"])
    assert len(azure.resources(type=VM)) == len(azure.resources(type=NIC)) == 6
    assert {r["type"] for r in azure.resources(resource_group=RG)} == {VMSS, VM, NIC, NSG, VNET, NAT, PIP}
    assert azure.usage(LOCATION, A100_FAMILY) == 6 * 96  # the failed attempt holds no quota


def test_rerun_of_a_finished_cluster_only_reads(azure, session):
    create(session, request(**SPLIT))
    before = len(azure.requests)
    result = create(session, request(**SPLIT)).as_dict()
    # Reads, and Azure's template validation, which writes nothing.
    assert {r.method for r in azure.requests[before:] if not arm_check(r)} <= {"GET", "HEAD"}
    assert {r["state"] for r in result["resources"]} == {"exists"}


def test_rerun_of_a_finished_cluster_via_cli_sends_no_put(azure, cli):
    assert cli(*create_args())[0] == 0
    before = len(azure.requests)
    rc, out, err = cli(*create_args())
    assert rc == 0, err
    assert writes(azure, since=before) == []


CHANGES = {
    "size": ("ndm-a100-v4", (), "size"),
    "image": ("nd-a100-v4", ("--image", "ubuntu-hpc-2404"), "image"),
}


@pytest.mark.parametrize("profile, extra, what", CHANGES.values(), ids=CHANGES.keys())
def test_changing_what_azure_cannot_change_in_place_is_refused_before_any_write(azure, cli, profile, extra, what):
    assert cli(*create_args("nd-a100-v4"))[0] == 0
    before = len(azure.requests)
    rc, out, err = cli(*create_args(profile, *extra))
    assert_cli_error(rc, err, 2, "CHANGE_NOT_ALLOWED", "provision destroy -n c1 -g rg1")
    assert what in err
    assert writes(azure, since=before) == []


def _seed_foreign_nsg(azure, tags: dict) -> dict:
    sub = azure.subscription_id
    azure.add_resource(f"/subscriptions/{sub}/resourceGroups/{RG}", {"location": LOCATION})
    return azure.add_resource(f"/subscriptions/{sub}/resourceGroups/{RG}/providers/{NSG}/c1-nsg",
                              {"location": LOCATION, "tags": tags, "properties": {"securityRules": []}})


FOREIGN = {"untagged": {}, "other team": {"owner": "team-b"},
           "another cluster": {"managed-by": "azgpu", "azgpu-cluster": "c2", "azgpu-profile": "nd-a100-v4"}}


@pytest.mark.parametrize("tags", FOREIGN.values(), ids=FOREIGN.keys())
def test_same_named_resource_not_ours_is_refused_and_untouched(azure, session, tags):
    foreign = _seed_foreign_nsg(azure, tags)
    with pytest.raises(InputError) as info:
        create(session, request())
    assert info.value.code == "NAME_TAKEN" and "another -n/--name" in info.value.remedy
    assert writes(azure) == []
    assert azure.get(foreign["id"]) == foreign


def test_same_named_resource_not_ours_exits_2_on_the_cli(azure, cli):
    _seed_foreign_nsg(azure, {})
    rc, out, err = cli(*create_args())
    assert_cli_error(rc, err, 2, "NAME_TAKEN", "never modifies resources it did not create")
    assert calls(azure, "PUT") == []
