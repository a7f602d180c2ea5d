"""The Python API: `import azgpu` is enough to go from a request to both templates."""

from __future__ import annotations

import inspect

import pytest

import azgpu

API = ["list_profiles", "load_profile", "build_request", "validate", "build_plan", "render_arm", "render_bicep"]


@pytest.mark.parametrize("name", API)
def test_api_function_is_exported(name):
    assert callable(getattr(azgpu, name))
    assert name in azgpu.__all__


@pytest.mark.parametrize("name", API)
def test_optional_arguments_are_keyword_only(name):
    for param in inspect.signature(getattr(azgpu, name)).parameters.values():
        if param.default is inspect.Parameter.empty or param.kind is inspect.Parameter.VAR_KEYWORD:
            continue
        # build_request(mapping, /, **values) takes a cluster-file mapping positionally, like dict(mapping, **kw).
        if (name, param.name, param.kind) == ("build_request", "mapping", inspect.Parameter.POSITIONAL_ONLY):
            continue
        assert param.kind is inspect.Parameter.KEYWORD_ONLY, f"{name}({param.name}=...) must be keyword-only"


def test_validate_takes_the_command_by_keyword_only(ssh_key):
    request = azgpu.build_request(profile="nd", name="demo", ssh_key=ssh_key)
    with pytest.raises(TypeError):
        azgpu.validate(request, "render")  # the point is that this is refused
    assert azgpu.validate(request, command="render").command == "render"


def test_end_to_end(ssh_key):
    assert "nd-a100-v4" in [p.id for p in azgpu.list_profiles()]
    assert azgpu.load_profile("nd-a100-v4").series == "ND A100 v4"
    request = azgpu.build_request(profile="nd-a100-v4", name="train01", nodes=16, location="eastus", ssh_key=ssh_key)
    spec = azgpu.validate(request)
    plan = azgpu.build_plan(spec)
    template = azgpu.render_arm(plan)
    bicep = azgpu.render_bicep(plan)
    assert isinstance(template, dict) and isinstance(bicep, str)
    (vmss,) = [r for r in template["resources"] if r["type"] == "Microsoft.Compute/virtualMachineScaleSets"]
    assert (vmss["name"], vmss["sku"]["capacity"]) == ("train01-vmss000", 16)
    assert "resource vmss000 'Microsoft.Compute/virtualMachineScaleSets@" in bicep


def test_validation_failure_carries_every_finding(ssh_key):
    request = azgpu.build_request(profile="nd-a100-v4", name="Bad_Name", nodes=0, ssh_key=ssh_key)
    with pytest.raises(azgpu.ValidationFailed) as info:
        azgpu.validate(request)
    assert {f.code for f in info.value.errors} == {"INVALID_NAME", "INVALID_NODES"}
    assert all(f.remedy for f in info.value.errors)


def test_bad_values_from_python_become_findings_not_exceptions():
    request = azgpu.build_request(profile="nd-a100-v4", name="demo", nodes="many")
    assert [f.code for f in request.input_findings] == ["INVALID_NODES"]
