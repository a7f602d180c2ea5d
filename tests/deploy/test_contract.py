"""The deploy verbs' contract (#30): each options object checks itself once, at the verb's door (the CLI
shows the same findings without a second check); the gate takes the cluster create already holds, so
one create attempt lists the resource group once; no function in deploy/ takes more than 7 parameters."""

from __future__ import annotations

import ast
import dataclasses
import json
from pathlib import Path

import pytest
from deploy_support import RG, create_args, request

from azgpu.deploy import CheckOptions, CreateOptions, GateOptions, ReportOptions, create
from azgpu.deploy.interface import CertifyOptions, LiveCluster

DEPLOY = Path(__file__).resolve().parents[2] / "src" / "azgpu" / "deploy"
MAX_PARAMETERS = 7


@pytest.fixture
def checks(monkeypatch):
    """How many times each options class ran its own check."""
    counted: dict[str, int] = {}
    for cls in (CheckOptions, GateOptions, ReportOptions, CertifyOptions):
        # A default options object (GateOptions.node = CheckOptions()) is one object for every GateOptions:
        # a test before this one may have had it checked already, and its cached findings would hide the check.
        for f in dataclasses.fields(cls):
            if isinstance(f.default, (CheckOptions, GateOptions, ReportOptions, CertifyOptions)):
                monkeypatch.delitem(f.default.__dict__, "_checked", raising=False)
        original = cls._check

        def spy(self, original=original, name=cls.__name__):
            counted[name] = counted.get(name, 0) + 1
            return original(self)

        monkeypatch.setattr(cls, "_check", spy)
    return counted


def group_listings(azure) -> int:
    """Resources - List By Resource Group of the cluster's group (what arm.list_group sends)."""
    return sum(1 for r in azure.requests
               if r.method == "GET" and r.path.lower().endswith(f"/resourcegroups/{RG.lower()}/resources"))


def test_one_options_check_per_create(azure, session, checks):
    azure.unhealthy_next(1, gpus=7)
    result = create(session, request("nd-a100-v4", nodes=3),
                    CreateOptions(gate=GateOptions(replace_unhealthy=True)))
    assert result.healthy and result.health.replaced
    assert checks == {"GateOptions": 1, "CheckOptions": 1}


def test_the_cli_shows_the_findings_create_checks_once(sim, checks):
    rc, out, err = sim(*create_args("nd-a100-v4", nodes=3), "--check", "--replace-unhealthy")
    assert rc == 0, err
    assert checks == {"GateOptions": 1, "CheckOptions": 1}


def test_bad_options_are_refused_at_the_door_with_every_finding(azure, session):
    from azgpu.errors import ValidationFailed

    options = CreateOptions(gate=GateOptions(check=True, max_rounds=0, node=CheckOptions(parallel=0)))
    with pytest.raises(ValidationFailed) as info:
        create(session, request("nd-a100-v4"), options)
    assert [f.code for f in info.value.findings] == ["INVALID_PARALLEL", "INVALID_MAX_ROUNDS"]
    assert not [r for r in azure.requests if r.method in ("PUT", "POST", "DELETE")]


def test_the_options_of_a_gate_that_does_not_run_are_not_judged():
    assert CreateOptions(gate=GateOptions(max_rounds=0)).findings() == []
    assert [f.code for f in ReportOptions(insight_timeout=-1).findings()] == ["INVALID_INSIGHT_TIMEOUT"]


def test_create_check_replace_unhealthy_lists_the_group_once(azure, session):
    """The gate takes the LiveCluster create built from its own plan: no second listing to find the
    cluster, none per replacement round."""
    azure.unhealthy_next(1, gpus=7)
    result = create(session, request("nd-a100-v4", nodes=3),
                    CreateOptions(gate=GateOptions(replace_unhealthy=True)))
    assert len(result.health.rounds) == 2  # a replacement round ran
    assert group_listings(azure) == 1


def test_create_check_replace_unhealthy_lists_the_group_once_from_the_cli(sim, azure_requests):
    rc, out, err = sim(*create_args("nd-a100-v4", nodes=3), "--check", "--replace-unhealthy")
    assert rc == 0, err
    assert json.loads(out)["health"]["healthy"]
    assert azure_requests() == 1


@pytest.fixture
def azure_requests(monkeypatch):
    """Calls of arm.list_group, wherever azgpu's modules took it from (every module that holds it by name)."""
    import importlib
    import pkgutil
    import sys

    import azgpu
    from azgpu.deploy import arm

    for info in pkgutil.walk_packages(azgpu.__path__, "azgpu."):
        if not info.name.startswith("azgpu.testing") and not info.name.endswith("__main__"):
            importlib.import_module(info.name)
    count = [0]
    original = arm.list_group

    def spy(*args, **kwargs):
        count[0] += 1
        return original(*args, **kwargs)

    holders = [m for name, m in list(sys.modules.items())
               if name.startswith("azgpu") and getattr(m, "list_group", None) is original]
    assert {"azgpu.deploy.arm", "azgpu.deploy.cluster_create", "azgpu.deploy.quota_requests"} <= {
        m.__name__ for m in holders}
    for module in holders:
        monkeypatch.setattr(module, "list_group", spy)
    return lambda: count[0]


def test_the_live_cluster_of_a_plan_is_the_plan_s():
    import azgpu

    plan = azgpu.build_plan(azgpu.validate(request("nd-a100-v4", nodes=3)))
    live = LiveCluster.of_plan(plan)
    assert (live.name, live.resource_group, live.nodes) == ("c1", RG, 3)
    assert live.scale_sets == tuple(r.name for r in plan.scale_sets) and live.profile is plan.spec.profile


def _parameters(node: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    args = node.args
    names = [a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)]
    if names[:1] in (["self"], ["cls"]):
        names = names[1:]
    return names + ([args.vararg.arg] if args.vararg else []) + ([args.kwarg.arg] if args.kwarg else [])


def test_no_function_in_deploy_takes_more_than_seven_parameters():
    """Options travel as one object (GateOptions, GateHooks, LiveCluster), not field by field."""
    wide = [f"{path.name}:{node.lineno} {node.name} ({len(_parameters(node))})"
            for path in sorted(DEPLOY.glob("*.py"))
            for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and len(_parameters(node)) > MAX_PARAMETERS]
    assert not wide, wide


def test_the_parameter_count_sees_keyword_only_parameters():
    (node,) = ast.parse("def f(self, a, b, *, c, d, e, f, g, h): pass").body
    assert len(_parameters(node)) == 8


@pytest.mark.parametrize(("options", "code"), [
    (ReportOptions(insight_timeout="5"), "INVALID_INSIGHT_TIMEOUT"),
    (ReportOptions(insight_timeout=None), "INVALID_INSIGHT_TIMEOUT"),
    (GateOptions(spare_racks=-1), "INVALID_SPARE_RACKS"),
    (GateOptions(spare_racks="2"), "INVALID_SPARE_RACKS"),
    (CheckOptions(parallel=None), "INVALID_PARALLEL"),
    (CheckOptions(node_timeout=None), "INVALID_NODE_TIMEOUT"),
    (CheckOptions(node_timeout=10**400), "INVALID_NODE_TIMEOUT"),
    (CheckOptions(node_timeout=float("nan")), "INVALID_NODE_TIMEOUT"),
    (CertifyOptions(level="bogus"), "INVALID_CERTIFY_LEVEL"),
    (CertifyOptions(level=["standard"]), "INVALID_CERTIFY_LEVEL"),
])
def test_options_built_in_python_with_values_of_any_type_are_findings_not_tracebacks(options, code):
    """Options are a public API: a value of the wrong type is one coded finding, as the CLI's are."""
    assert [f.code for f in options.findings()] == [code]


def test_create_refuses_a_spare_rack_count_of_the_wrong_type_at_the_door(azure, session):
    from azgpu.errors import InputError

    with pytest.raises(InputError) as info:
        create(session, request("nd-gb300-v6", nodes=18), CreateOptions(gate=GateOptions(spare_racks="1")))
    assert info.value.code == "INVALID_SPARE_RACKS"
    assert not [r for r in azure.requests if r.method in ("PUT", "POST", "DELETE")]


def test_create_refuses_certify_options_at_its_door_before_anything_is_deployed(azure, session):
    """create --certify's options were first judged by certify, after the whole cluster was deployed."""
    from azgpu.errors import InputError

    with pytest.raises(InputError) as info:
        create(session, request("nd-a100-v4", nodes=2), CreateOptions(certify=CertifyOptions(level=["standard"])))
    assert info.value.code == "INVALID_CERTIFY_LEVEL" and azure.resources() == []
