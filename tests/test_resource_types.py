"""The resource-type table is the one place an ARM type or its api-version is written, and the one
thing code asks about a resource's kind.

Guards (read from the source with `ast`, so comments and docstrings may still name types):
no string literal holding 'Microsoft.' outside azgpu/resource_types.py and the fake (azgpu.testing
keeps its own constants, as a fake must not share the product's); no branch on a resource's
`stage` string; no second copy of a row's api-version; no SDK operations group for scale sets or
their instances reached around the table.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from azgpu import resource_types as rt

SRC = Path(__file__).resolve().parents[1] / "src" / "azgpu"
TABLE = SRC / "resource_types.py"


def _sources() -> list[tuple[Path, ast.Module]]:
    out = []
    for path in sorted(SRC.rglob("*.py")):
        if path == TABLE or "testing" in path.relative_to(SRC).parts:
            continue
        out.append((path, ast.parse(path.read_text(), str(path))))
    return out


def _docstrings(tree: ast.Module) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
        # cli.SUMMARY: each command's first help sentence, a copy of its docstring's (tests/test_cli_help.py).
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "SUMMARY" for t in node.targets):
            out |= {id(n) for n in ast.walk(node.value) if isinstance(n, ast.Constant)}
    return out


def _strings(tree: ast.Module) -> list[ast.Constant]:
    """Every string constant that is not a docstring: plain literals and the literal parts of f-strings."""
    docs = _docstrings(tree)
    return [n for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs]


def _where(path: Path, node: ast.AST) -> str:
    return f"{path.relative_to(SRC.parent)}:{node.lineno}"


def test_no_arm_type_is_written_outside_the_table():
    # Also as a regular expression spells it ('Microsoft\\.Network'): ArmType.path_pattern writes those.
    found = [f"{_where(path, n)}: {n.value[:80]!r}" for path, tree in _sources() for n in _strings(tree)
             if "Microsoft." in n.value or "Microsoft\\." in n.value]
    assert found == [], "write ARM types in azgpu/resource_types.py and read them from its rows:\n" + "\n".join(found)


def test_nothing_branches_on_a_stage_string():
    found = []
    for path, tree in _sources():
        for node in ast.walk(tree):
            if isinstance(node, ast.Compare):
                sides = [node.left, *node.comparators]
                if any(isinstance(s, ast.Attribute) and s.attr == "stage" for s in sides):
                    found.append(_where(path, node))
        if "stage ==" in path.read_text() or "stage !=" in path.read_text():
            found.append(f"{path.relative_to(SRC.parent)}: text 'stage =='")
    assert found == [], "ask the resource's row (r.kind.has_instances ...), not its stage label: " + ", ".join(found)


def test_no_second_copy_of_a_rows_api_version():
    versions = {t.api_version for t in [*rt.TYPES.values(), *rt.REFERENCED] if t.api_version}
    found = [f"{_where(path, n)}: {n.value!r}" for path, tree in _sources() for n in _strings(tree)
             if n.value in versions]
    assert found == [], "read the api-version from the type's row:\n" + "\n".join(found)


def test_scale_sets_and_their_instances_are_reached_through_their_rows():
    groups = {rt.VMSS.operations, rt.INSTANCES.operations}
    found = [_where(path, n) for path, tree in _sources() for n in ast.walk(tree)
             if isinstance(n, ast.Attribute) and n.attr in groups]
    assert found == [], "list instances, run commands and change capacity through rt.INSTANCES / rt.VMSS: " + \
        ", ".join(found)


def test_the_table_imports_nothing_that_talks_to_azure():
    tree = ast.parse(TABLE.read_text())
    imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert imported <= {"__future__", "msgspec", "re", "typing"}


@pytest.mark.parametrize("row", list(rt.TYPES.values()), ids=lambda r: r.stage)
def test_every_deployed_type_has_a_complete_row(row):
    assert row.type.count("/") == 1 and row.api_version and row.label and row.stage
    assert rt.of(row.type.upper()) is row and rt.managed(row.type.lower())
    assert isinstance(row.teardown, int)
    if row.has_instances:
        assert row.delete_instances_method and row.update_method and row.immutable
    for key, paths in row.immutable:
        assert key and paths and all(isinstance(p, str) for p in paths)


def test_referenced_types_are_not_managed():
    # A type azgpu only reads or references is never listed as a cluster's or deleted by destroy.
    for row in rt.REFERENCED:
        assert not rt.managed(row.type), row.type
    assert rt.INSTANCES.type.startswith(rt.VMSS.type + "/")
    with pytest.raises(KeyError, match="add a row"):
        rt.of(rt.CAPACITY_RESERVATION_GROUP.type)


def test_resource_ids_and_actions_come_from_the_row():
    assert rt.SUBNET.example_id("VNET", "SUBNET") == (
        "/subscriptions/SUB/resourceGroups/RG/providers/Microsoft.Network/virtualNetworks/VNET/subnets/SUBNET")
    assert rt.GALLERY_IMAGE.provider_path("g", "d") == "/providers/Microsoft.Compute/galleries/g/images/d"
    assert rt.PERMISSIONS.provider_path() == "/providers/Microsoft.Authorization/permissions"
    assert rt.SUBNET.path_pattern("(?P<v>[^/]+)", "[^/]+") == (
        r"/providers/Microsoft\.Network/virtualNetworks/(?P<v>[^/]+)/subnets/[^/]+")
    assert rt.DEPLOYMENT.action("validate/action") == "Microsoft.Resources/deployments/validate/action"
    assert rt.WORKLOAD_IMPACT.namespace == rt.IMPACT.type == "Microsoft.Impact"


def test_a_plan_resource_carries_its_row_and_keeps_its_stage_label(az):
    plan = az.plan(profile="nd-a100-v4", nodes=3, ppg="p1")
    stages = {r.key: r.stage for r in plan.resources}
    assert stages == {"nsg": "nsg", "ppg": "ppg", "natPublicIp": "public-ip", "natGateway": "nat-gateway",
                      "vnet": "vnet", "vmss000": "scale-set"}
    for r in plan.resources:
        assert rt.of(r.type) is r.kind and r.api_version == r.kind.api_version
    assert [r.key for r in plan.scale_sets] == ["vmss000"]
    assert plan.resource("nsg").name == rt.NSG.name_in(plan.spec.names)
    assert plan.resource("vmss000").name == rt.VMSS.name_in(plan.spec.names, 0)


@pytest.mark.parametrize("values", [dict(), dict(outbound=False), dict(ppg="p1", nodes=5),
                                    dict(subnet_id="/subscriptions/s/resourceGroups/g"
                                         + rt.SUBNET.provider_path("vnet1", "s1"))],
                         ids=["nat-gateway", "no-outbound", "new-ppg", "existing-subnet"])
def test_the_plan_declares_what_resource_kinds_counts(az, values):
    from azgpu.layout import resource_kinds

    plan = az.plan(profile="nd-a100-v4", **values)
    spec = plan.spec
    kinds = resource_kinds(existing_subnet=bool(spec.subnet_id), nat_gateway=spec.nat_gateway,
                           new_ppg=bool(spec.ppg_name), scale_sets=len(spec.scale_sets))
    assert tuple(r.kind for r in plan.resources) == kinds
