"""Every VM size a profile offers has a hardware model in the fake (azgpu.testing.hardware.MODELS): a GPU size
without one is an error at lookup, never a node simulated without GPUs whose every check passes."""

from __future__ import annotations

import pytest
from msgspec import structs

from azgpu.profiles import Profile, list_profiles
from azgpu.testing import hardware


def sizes_without_hardware(profiles: list[Profile]) -> list[str]:
    missing = []
    for profile in profiles:
        for size in profile.sizes:
            try:
                found = hardware.model(size.name)
            except hardware.NoHardwareModel:
                missing.append(f"{profile.id}: {size.name}")
                continue
            if found.gpus != size.gpus:
                missing.append(f"{profile.id}: {size.name} has {size.gpus} GPUs, its hardware model {found.gpus}")
    return missing


def test_every_profile_size_has_a_hardware_model():
    profiles = list_profiles()
    assert sum(len(p.sizes) for p in profiles) >= len(profiles) > 5
    assert sizes_without_hardware(profiles) == []


def test_a_new_size_without_a_hardware_model_fails_the_check():
    profiles = list_profiles()
    first = profiles[0]
    new = structs.replace(first.sizes[0], name="Standard_ND96isr_X100_v9", aliases=())
    grown = [structs.replace(first, sizes=(*first.sizes, new)), *profiles[1:]]
    assert sizes_without_hardware(grown) == [f"{first.id}: Standard_ND96isr_X100_v9"]


def test_a_gpu_size_without_a_row_is_an_error_at_lookup():
    with pytest.raises(hardware.NoHardwareModel, match="no hardware model for the GPU size Standard_ND96isr_X100_v9"):
        hardware.model("Standard_ND96isr_X100_v9")
    # a size of no GPU (a login or head node) has no hardware to model
    assert hardware.model("Standard_D4s_v5") == hardware.NO_GPU


def test_a_scale_set_of_a_gpu_size_the_fake_cannot_model_is_refused_loudly():
    node_state = {"sku": {"name": "Standard_ND96isr_X100_v9"}, "properties": {}}
    vm = {"id": "/subscriptions/s/resourceGroups/g/providers/Microsoft.Compute/virtualMachineScaleSets/x/"
                "virtualMachines/0", "name": "x_0", "location": "eastus",
          "properties": {"vmId": "0", "osProfile": {"computerName": "x000000"}}}

    class Store:
        nodes: dict = {}

        def next_number(self):
            return 1

    with pytest.raises(hardware.NoHardwareModel):
        hardware.new_node(Store(), vm, node_state)
