"""azgpu.deploy's verbs with typed options and results: create(session, request, CreateOptions) returns
a CreateResult whose .as_dict() is what `provision create` prints; an unhealthy cluster is a result,
not an exception; Guest Health Reporting is built inside create from ReportOptions."""

from __future__ import annotations

import dataclasses
import importlib

import pytest
from deploy_support import NAME, RG, VM, calls, request

import azgpu.deploy
from azgpu.deploy import CreateOptions, CreateResult, GateOptions, ReportOptions, create
from azgpu.errors import ValidationFailed
from azgpu.health.outcome import UnhealthyNodes


def ids(azure):
    return sorted(int(vm["instanceId"]) for vm in azure.resources(type=VM))


def test_every_verb_resolves_to_its_function_whatever_was_imported_before():
    # A submodule named like a verb would replace the verb on the package once imported: none is.
    for module, _ in azgpu.deploy.VERBS.values():
        importlib.import_module(f"azgpu.deploy.{module}")
    for verb in ("create", "what_if", "status", "wait", "destroy", "outputs", "check", "report", "list"):
        assert verb in azgpu.deploy.__all__
        function = getattr(azgpu.deploy, verb)
        assert callable(function) and not isinstance(function, type(azgpu.deploy)), verb
    assert azgpu.deploy.create is create
    with pytest.raises(AttributeError):
        azgpu.deploy.crate  # noqa: B018 - a misspelt verb is an AttributeError, not a module


def test_options_are_frozen():
    options = CreateOptions(gate=GateOptions(replace_unhealthy=True))
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.dry_run = True  # type: ignore[misc]
    assert options.gate.enabled and not GateOptions().enabled and GateOptions(spare_racks=1).enabled


def test_the_result_as_dict_is_the_dict_create_gave(azure, session):
    result = create(session, request("nd-a100-v4", nodes=2))
    assert isinstance(result, CreateResult) and result.healthy and result.health is None
    assert [e.state for e in result.resources] and all(e.state == "succeeded" for e in result.resources)
    # A re-run converges: a third run's dict and the second's are the same document.
    again = create(session, request("nd-a100-v4", nodes=2))
    assert create(session, request("nd-a100-v4", nodes=2)).as_dict() == again.as_dict()
    assert list(again.as_dict())[:3] == ["cluster", "profile", "series"]
    assert again.as_dict()["preflight"] == again.preflight.as_dict()


def test_an_unhealthy_cluster_is_a_result_with_the_error_it_ends_with(azure, session):
    azure.unhealthy_next(1, xid=79)
    result = create(session, request("nd-a100-v4", nodes=3), CreateOptions(gate=GateOptions(check=True)))
    assert not result.healthy and result.health.report.failed
    error = result.unhealthy_error()
    assert isinstance(error, UnhealthyNodes) and error.code == "UNHEALTHY_NODES"
    assert error.result == result.as_dict() and error.result["health"]["failed"] == 1
    assert ids(azure) == [0, 1, 2]  # nothing was replaced: only --replace-unhealthy replaces


def test_reporting_is_built_from_report_options_and_its_entries_come_with_the_result(azure, session):
    azure.unhealthy_next(1, gpus=7)
    seen = []
    result = create(session, request("nd-a100-v4", nodes=3), CreateOptions(
        gate=GateOptions(replace_unhealthy=True), report=ReportOptions(report_to_azure=True, insight_timeout=0),
        before_delete=lambda nodes: seen.extend(n.instance_id for n in nodes)))
    assert result.healthy
    assert [(e["node"], e["state"]) for e in result.reports] == [(result.health.replaced[0]["computer_name"], "filed")]
    assert seen == ["0"]  # the caller's hook runs too, after the report
    assert result.as_dict()["guest_health_reports"] == result.reports
    assert len(azure.impacts()) == 1


def test_reporting_that_cannot_happen_stops_create_before_anything_is_written(azure, session):
    azure.set_provider("Microsoft.Impact", "NotRegistered")
    with pytest.raises(ValidationFailed) as info:
        create(session, request("nd-a100-v4", nodes=2), CreateOptions(
            gate=GateOptions(replace_unhealthy=True), report=ReportOptions(report_to_azure=True)))
    assert [f.code for f in info.value.findings] == ["GHR_NOT_ONBOARDED"]
    assert not calls(azure, "PUT", "POST", "PATCH", "DELETE")


def test_a_dry_run_reports_nothing_and_checks_no_reporting(azure, session):
    result = create(session, request("nd-a100-v4", nodes=2), CreateOptions(
        dry_run=True, report=ReportOptions(report_to_azure=True)))
    assert result.reports is None and result.as_dict()["what_if"] and "guest_health_reports" not in result.as_dict()
    assert not calls(azure, path="Microsoft.Impact")


def test_report_verb_checks_and_files_without_deleting(azure, session):
    create(session, request("nd-a100-v4", nodes=3))
    azure.make_unhealthy("c1-vmss000/1", gpus=7)
    done = azgpu.deploy.report(session, NAME, RG, ReportOptions(insight_timeout=0))
    assert (done.as_dict()["failed"], done.as_dict()["reports_filed"]) == (1, 1)
    assert [e["state"] for e in done.entries] == ["filed"] and ids(azure) == [0, 1, 2]


def test_a_validated_spec_is_not_validated_again(azure, session, monkeypatch):
    """The CLI hands create the Spec whose findings it showed: create validates only a fallback's."""
    from azgpu.deploy import cluster_create

    spec = azgpu.validate(request("nd-a100-v4", nodes=2), command="create")
    seen = []
    monkeypatch.setattr(cluster_create, "validate", lambda req, **kw: seen.append(req) or azgpu.validate(req, **kw))
    from_spec = create(session, spec)
    assert seen == [] and from_spec.healthy
    again = create(session, spec.request)
    assert len(seen) == 1 and again.as_dict()["scale_sets"] == from_spec.as_dict()["scale_sets"]
