"""Managed identity, proximity placement groups, boot diagnostics, spot eviction and whole NVL72 racks, offline."""

from __future__ import annotations

import pytest

UAI = "/subscriptions/s/resourceGroups/id-rg/providers/Microsoft.ManagedIdentity/userAssignedIdentities/reader"
UAI2 = "/subscriptions/s/resourceGroups/id-rg/providers/Microsoft.ManagedIdentity/userAssignedIdentities/puller"
PPG_ID = "/subscriptions/s/resourceGroups/storage-rg/providers/Microsoft.Compute/proximityPlacementGroups/lustre-ppg"


def _vmss(plan, index: int = 0):
    return [r for r in plan.resources if r.stage == "scale-set"][index]


def _vm_profile(plan):
    return _vmss(plan).body["properties"]["virtualMachineProfile"]


# ----------------------------------------------------------------------------- identity


def test_assign_identity_gives_the_scale_sets_a_system_assigned_identity(az):
    plan = az.plan(profile="nd-a100-v4", nodes=150, assign_identity=True)
    assert all(r.body["identity"] == {"type": "SystemAssigned"} for r in plan.scale_sets)


def test_identity_ids_become_user_assigned_identities(az):
    identity = _vmss(az.plan(profile="nd-a100-v4", identity=[UAI, UAI2])).body["identity"]
    assert identity == {"type": "UserAssigned", "userAssignedIdentities": {UAI: {}, UAI2: {}}}


def test_both_kinds_together(az):
    assert _vmss(az.plan(profile="nd-a100-v4", assign_identity=True, identity=UAI)).body["identity"]["type"] == \
        "SystemAssigned, UserAssigned"


def test_no_identity_by_default(az):
    assert "identity" not in _vmss(az.plan(profile="nd-a100-v4")).body


def test_an_identity_that_is_not_a_user_assigned_identity_id_is_refused(az):
    f = az.only(az.errors(profile="nd-a100-v4", identity=["/subscriptions/s/resourceGroups/r/providers/"
                                                          "Microsoft.Storage/storageAccounts/x"]), "INVALID_IDENTITY")
    assert "'az identity list --query [].id' lists them" in f.remedy


def test_cli_identity_is_repeatable(run, ssh_key, tmp_path):
    rc, _, err = run("render", "--profile", "nd-a100-v4", "-n", "demo", "-l", "eastus", "--ssh-key", ssh_key,
                     "--identity", UAI, "--identity", UAI2, "--assign-identity", "--out-dir", tmp_path, "-o", "none")
    assert rc == 0, err
    text = (tmp_path / "main.bicep").read_text()
    assert UAI in text and UAI2 in text and "'SystemAssigned, UserAssigned'" in text


# ----------------------------------------------------------------------------- proximity placement group


def test_a_ppg_name_creates_a_group_with_the_size_as_intent(az):
    plan = az.plan(profile="nd-h100-v5", ppg="train-ppg", zone="2")
    ppg = plan.resource("ppg")
    assert (ppg.type, ppg.name) == ("Microsoft.Compute/proximityPlacementGroups", "train-ppg")
    assert ppg.body["properties"] == {"proximityPlacementGroupType": "Standard",
                                      "intent": {"vmSizes": ["Standard_ND96isr_H100_v5"]}}
    assert "zones" not in ppg.body  # the scale sets' zone decides; a group's zone could never change
    assert ppg.body["tags"]["managed-by"] == "azgpu"


def test_scale_sets_join_the_created_group_and_depend_on_it(az):
    plan = az.plan(profile="nd-h100-v5", nodes=150, ppg="train-ppg")
    for vmss in plan.scale_sets:
        assert "ppg" in vmss.depends_on
        assert vmss.body["properties"]["proximityPlacementGroup"]["id"].name == "train-ppg"
    waves = [{r.key for r in wave} for wave in plan.waves()]
    assert "ppg" in waves[0] and {r.key for r in plan.scale_sets} <= waves[-1]


def test_a_ppg_id_joins_the_existing_group_and_creates_none(az):
    plan = az.plan(profile="nd-h100-v5", ppg=PPG_ID)
    assert not [r for r in plan.resources if r.type.endswith("proximityPlacementGroups")]
    assert _vmss(plan).body["properties"]["proximityPlacementGroup"] == {"id": PPG_ID}


@pytest.mark.parametrize("value", ["-bad-name", "x" * 81,
                                   "/subscriptions/s/resourceGroups/r/providers/Microsoft.Compute/availabilitySets/a"])
def test_a_bad_ppg_is_refused(az, value):
    f = az.only(az.errors(profile="nd-h100-v5", ppg=value), "INVALID_PPG")
    assert f.remedy


def test_no_ppg_by_default(az):
    assert "proximityPlacementGroup" not in _vmss(az.plan(profile="nd-h100-v5")).body["properties"]


# ----------------------------------------------------------------------------- boot diagnostics


def test_boot_diagnostics_are_on_with_managed_storage_by_default(az):
    # Managed storage: enabled without storageUri (BootDiagnostics, compute api 2026-04-01).
    assert _vm_profile(az.plan(profile="nd-a100-v4"))["diagnosticsProfile"] == {"bootDiagnostics": {"enabled": True}}


def test_boot_diagnostics_can_be_turned_off(az):
    plan = az.plan(profile="nd-a100-v4", boot_diagnostics=False)
    assert _vm_profile(plan)["diagnosticsProfile"] == {"bootDiagnostics": {"enabled": False}}
    assert any("boot diagnostics off" in n for n in plan.notes)


def test_cli_no_boot_diagnostics(run, ssh_key, tmp_path):
    rc, _, err = run("render", "--profile", "nd-a100-v4", "-n", "demo", "-l", "eastus", "--ssh-key", ssh_key,
                     "--no-boot-diagnostics", "--out-dir", tmp_path, "-o", "none")
    assert rc == 0, err
    assert '"enabled": false' in (tmp_path / "main.json").read_text()


# ----------------------------------------------------------------------------- spot


def test_spot_evicts_with_delete_by_default(az):
    assert _vm_profile(az.plan(profile="nd-h100-v5", spot=True))["evictionPolicy"] == "Delete"


def test_deallocate_is_written_and_warned(az):
    assert _vm_profile(az.plan(profile="nd-h100-v5", spot=True, eviction_policy="deallocate"))["evictionPolicy"] == \
        "Deallocate"
    f = az.only(az.findings(profile="nd-h100-v5", spot=True, eviction_policy="Deallocate"), "SPOT_DEALLOCATE")
    assert f.severity == "warning" and "billed" in f.message and "--eviction-policy Delete" in f.remedy


def test_an_unknown_eviction_policy_is_refused(az):
    f = az.only(az.errors(profile="nd-h100-v5", spot=True, eviction_policy="Stop"), "INVALID_EVICTION_POLICY")
    assert "Delete" in f.remedy


def test_an_eviction_policy_without_spot_is_refused(az):
    f = az.only(az.errors(profile="nd-h100-v5", eviction_policy="Delete"), "EVICTION_POLICY_WITHOUT_SPOT")
    assert "--spot" in f.remedy


def test_spot_on_an_infiniband_cluster_is_warned(az):
    f = az.only(az.findings(profile="nd-h100-v5", spot=True, nodes=4), "SPOT_INFINIBAND")
    assert "breaks a multi-node job" in f.message and f.severity == "warning"
    assert "SPOT_INFINIBAND" not in az.codes(az.findings(profile="nd-h100-v5", spot=True, nodes=1))
    assert "SPOT_INFINIBAND" not in az.codes(az.findings(profile="ng", spot=True, nodes=4))


def test_spot_beyond_one_placement_group_is_warned(az):
    f = az.only(az.findings(profile="nd-h100-v5", spot=True, nodes=150), "SPOT_MULTIPLE_PLACEMENT_GROUPS")
    assert "2 placement groups" in f.message
    assert "SPOT_MULTIPLE_PLACEMENT_GROUPS" not in az.codes(az.findings(profile="nd-h100-v5", spot=True, nodes=100))
    assert "SPOT_MULTIPLE_PLACEMENT_GROUPS" in az.codes(az.findings(profile="ng", spot=True, nodes=101))


# ----------------------------------------------------------------------------- whole NVL72 racks


@pytest.mark.parametrize("profile,nodes,sets", [
    ("nd-gb300-v6", 180, (90, 90)),
    ("nd-gb300-v6", 108, (90, 18)),
    ("nd-gb200-v6", 90, (90,)),
    ("nd-gb200-v6", 126, (90, 36)),
    ("nd-h100-v5", 150, (100, 50)),  # no racks: Azure's 100 stays
])
def test_infiniband_domains_cut_at_whole_racks(az, profile, nodes, sets):
    assert az.spec(profile=profile, nodes=nodes).scale_sets == sets


def test_a_raised_domain_of_300_becomes_288_on_rack_scale_sizes(az):
    assert az.spec(profile="nd-gb200-v6", nodes=576, max_ib_domain=300).scale_sets == (288, 288)


def test_the_rack_alignment_is_a_note_by_default(az):
    f = az.only(az.findings(profile="nd-gb300-v6", nodes=180), "IB_DOMAIN_RACK_ALIGNED")
    assert f.severity == "note" and "90 VMs, whole racks" in f.message


def test_a_max_ib_domain_across_racks_is_rounded_down_and_warned(az):
    spec = az.spec(profile="nd-gb300-v6", nodes=72, max_ib_domain=40)
    assert spec.scale_sets == (36, 36)
    f = az.only(spec.findings, "IB_DOMAIN_RACK_ALIGNED")
    assert f.severity == "warning" and "multiple of 18" in f.remedy


def test_a_cluster_within_one_aligned_domain_gets_no_rack_note(az):
    assert "IB_DOMAIN_RACK_ALIGNED" not in az.codes(az.findings(profile="nd-gb300-v6", nodes=72))


def test_a_domain_smaller_than_a_rack_is_left_alone(az):
    assert az.spec(profile="nd-gb300-v6", nodes=18, max_ib_domain=9).scale_sets == (9, 9)


# ----------------------------------------------------------------------------- what the profiles explain


def test_every_deployable_profile_explains_placement_groups_with_sources():
    from azgpu.profiles import list_profiles

    for profile in list_profiles():
        if profile.id == "nd":  # retired: nothing to place
            continue
        assert profile.placement and "constrains capacity" in profile.placement["ppg"], profile.id
        assert "D-ppg" in profile.placement["source"], profile.id


def test_the_rack_scale_profiles_say_what_azure_exposes_about_nvlink_domains():
    from azgpu.profiles import load_profile

    for profile_id in ("nd-gb200-v6", "nd-gb300-v6"):
        racks = load_profile(profile_id).placement["racks"]
        assert "interconnectSubgroupId" in racks and "multiples of 18" in racks


def test_profiles_show_prints_the_placement_notes(run):
    rc, out, err = run("profiles", "show", "nd-gb300-v6", "--query", "placement.source")
    assert rc == 0, err
    assert "co-location" in out and "ComputeRP.json" in out
