"""The what-if's property diff and report (azgpu.changes): only what the plan sets is compared, as
`az deployment group what-if` prints it."""

from __future__ import annotations

import json
from pathlib import Path

from azgpu.changes import InstanceChange, PropertyChange, ResourceChange, WhatIf, compare, diff, format_what_if

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "azure"
VMSS = "Microsoft.Compute/virtualMachineScaleSets"


def example() -> tuple[dict, dict]:
    """The REST spec's scale-set create example: the request body and the body Azure answers."""
    data = json.loads((FIXTURES / "vmss-create-ssh.json").read_text())
    return data["parameters"]["parameters"], data["responses"]["200"]["body"]


def paths(delta: list[PropertyChange]) -> set[str]:
    return {d.path for d in delta}


def test_what_azure_adds_to_an_answer_is_no_change():
    sent, answered = example()
    # The example's answer shows another image and subnet than its request: only those differ;
    # uniqueId, provisioningState, secrets, dnsSettings, privateIPAddressVersion ... do not show.
    image = "properties.virtualMachineProfile.storageProfile.imageReference"
    subnet = ("properties.virtualMachineProfile.networkProfile.networkInterfaceConfigurations[0].properties"
              ".ipConfigurations[0].properties.subnet.id")
    assert paths(diff(sent, answered)) == {f"{image}.sku", f"{image}.publisher", f"{image}.offer", subnet}


def test_a_changed_value_is_one_modify_with_before_and_after():
    _, answered = example()
    wanted = json.loads(json.dumps(answered))
    wanted["sku"]["capacity"] = 5
    assert [(d.path, d.change, d.before, d.after) for d in diff(wanted, answered)] == [("sku.capacity", "Modify", 3, 5)]


def test_a_property_azure_does_not_have_is_a_create():
    assert [(d.path, d.change, d.after) for d in diff({"properties": {"scaleInPolicy": {"rules": ["NewestVM"]}}},
                                                      {"properties": {}})] == \
           [("properties.scaleInPolicy", "Create", {"rules": ["NewestVM"]})]


def test_write_only_properties_missing_from_an_answer_are_no_change():
    sent = {"properties": {"osProfile": {"customData": "I2Nsb3VkLWNvbmZpZw==", "adminPassword": "x"}}}
    assert diff(sent, {"properties": {"osProfile": {}}}) == []


def test_ids_and_locations_compare_as_arm_compares_them():
    assert diff({"id": "/subscriptions/A/resourceGroups/RG"}, {"id": "/subscriptions/a/resourcegroups/rg"}) == []
    assert diff({"location": "East US"}, {"location": "eastus"}) == []
    assert paths(diff({"name": "A"}, {"name": "a"})) == {"name"}


def test_lists_of_another_length_change_as_a_whole():
    delta = diff({"addressPrefixes": ["10.0.0.0/16", "10.1.0.0/16"]}, {"addressPrefixes": ["10.0.0.0/16"]})
    assert [(d.path, d.before, d.after) for d in delta] == [
        ("addressPrefixes", ["10.0.0.0/16"], ["10.0.0.0/16", "10.1.0.0/16"])]


def test_tags_azure_has_beyond_the_plan_show_only_when_a_put_goes_out():
    live = {"tags": {"team": "a", "owner": "ops"}, "sku": {"capacity": 2}}
    assert compare({"tags": {"team": "a"}, "sku": {"capacity": 2}}, live) == []
    delta = compare({"tags": {"team": "a"}, "sku": {"capacity": 3}}, live)
    assert [(d.path, d.change, d.before) for d in delta] == [("sku.capacity", "Modify", 2),
                                                             ("tags.owner", "Delete", "ops")]


def what_if(*changes: ResourceChange) -> WhatIf:
    return WhatIf("c1", "rg1", "/subscriptions/s/resourceGroups/rg1", list(changes))


def test_report_prints_az_symbols_property_paths_and_the_summary():
    text = format_what_if(what_if(
        ResourceChange("NoChange", "Microsoft.Network/networkSecurityGroups", "c1-nsg", "id1", "2026-03-01"),
        ResourceChange("Modify", VMSS, "c1-vmss000", "id2", "2026-04-01",
                       [PropertyChange("tags.team", "Modify", "a", "b")]),
    ))
    assert "  = Microsoft.Network/networkSecurityGroups/c1-nsg [2026-03-01]\n" in text
    assert "  ~ Microsoft.Compute/virtualMachineScaleSets/c1-vmss000 [2026-04-01]\n" in text
    assert '    ~ tags.team: "a" => "b"\n' in text
    assert "Scope: /subscriptions/s/resourceGroups/rg1" in text
    assert "Resource changes: 1 to modify, 1 no change." in text
    assert "  ~ Modify\n  = Nochange\n" in text and "Delete" not in text


def test_report_names_every_instance_a_change_deletes():
    shrink = ResourceChange("Modify", VMSS, "c1-vmss000", "id", delta=[PropertyChange("sku.capacity", "Modify", 4, 2)],
                            instances=[InstanceChange("Delete", "3", "c1-vmss000_3", "c1-000-000003", "Succeeded"),
                                       InstanceChange("Delete", "2", "c1-vmss000_2")],
                            capacity=(4, 2))
    text = format_what_if(what_if(shrink))
    assert "    - instance 3: c1-vmss000_3 (c1-000-000003, Succeeded)\n" in text
    assert "    - instance 2: c1-vmss000_2\n" in text
    assert "Instances to delete: 2 GPU node(s): c1-vmss000_3, c1-vmss000_2." in text
    assert what_if(shrink).as_dict()["instances_to_delete"] == ["c1-vmss000_3", "c1-vmss000_2"]


def test_report_marks_a_refused_change_with_a_symbol_arm_does_not_use():
    refused = ResourceChange("Refused", VMSS, "c1-vmss000", "id", reason="Azure cannot change that in place",
                             delta=[PropertyChange("sku.name", "Modify", "Standard_A", "Standard_B", refused=True)])
    text = format_what_if(what_if(refused))
    assert "  # Microsoft.Compute/virtualMachineScaleSets/c1-vmss000\n" in text
    assert '    # sku.name: "Standard_A" => "Standard_B"\n' in text
    assert "Resource changes: 1 refused." in text


def test_report_colours_only_when_asked():
    change = ResourceChange("Delete", VMSS, "old", "id")
    assert "\x1b[" not in format_what_if(what_if(change))
    assert "\x1b[31m  - " in format_what_if(what_if(change), color=True)
