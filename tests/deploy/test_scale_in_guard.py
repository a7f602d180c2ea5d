"""The scale-in guard: a re-run of create that would delete GPU nodes names them and goes on only
with --allow-scale-in or a yes at a terminal; without either it exits 2 and deletes nothing. What
goes is exactly what the what-if listed."""

from __future__ import annotations

import io
import json
import sys

import pytest
from deploy_support import LOCATION, VM, VMSS, arm_check, assert_cli_error, calls, create_args, request, writes

from azgpu.deploy import CreateOptions, create
from azgpu.deploy.whatif import ScaleInRefused


def instances(azure, scale_set: str = "c1-vmss000") -> list[str]:
    return sorted(vm["name"] for vm in azure.resources(type=VM) if vm["id"].split("/")[-3] == scale_set)


@pytest.fixture
def four(azure, session):
    create(session, request(nodes=4))
    return azure


class Terminal(io.StringIO):
    """stdin of a terminal, answering the prompt with the text given."""

    def isatty(self) -> bool:
        return True


def test_shrink_without_the_flag_and_without_a_terminal_is_refused(four, cli):
    before = len(four.requests)
    rc, out, err = cli(*create_args(nodes=2))
    assert_cli_error(rc, err, 2, "SCALE_IN_REFUSED", "--allow-scale-in")
    assert "c1-vmss000_3, c1-vmss000_2" in err and "c1-vmss000: 4 -> 2" in err
    assert writes(four, since=before) == []
    assert instances(four) == ["c1-vmss000_0", "c1-vmss000_1", "c1-vmss000_2", "c1-vmss000_3"]


def test_the_flag_deletes_exactly_the_instances_the_what_if_named(four, cli):
    rc, out, err = cli(*create_args(nodes=2), "--what-if", "-o", "json")
    named = json.loads(out)["instances_to_delete"]
    rc, out, err = cli(*create_args(nodes=2), "--allow-scale-in")
    assert rc == 0, err
    assert sorted(set(f"c1-vmss000_{i}" for i in range(4)) - set(instances(four))) == sorted(named)
    (post,) = [r for r in calls(four, "POST") if not arm_check(r)]  # Azure's template checks write nothing
    assert post.path.endswith("/virtualMachineScaleSets/c1-vmss000/delete")
    assert sorted(post.body["instanceIds"]) == ["2", "3"]
    assert four.resources(type=VMSS)[0]["sku"]["capacity"] == 2


def test_after_an_allowed_shrink_a_rerun_changes_nothing(four, cli):
    assert cli(*create_args(nodes=2), "--allow-scale-in")[0] == 0
    result = json.loads(cli(*create_args(nodes=2), "--what-if", "-o", "json")[1])
    assert result["summary"] == {"no_change": 5}  # NSG, public IP, NAT gateway, VNet, scale set


def test_interactive_yes_deletes_them(four, cli, monkeypatch):
    monkeypatch.setattr(sys, "stdin", Terminal("y\n"))
    rc, out, err = cli(*create_args(nodes=3))
    assert rc == 0, err
    assert "- instance 3: c1-vmss000_3" in err and "Delete these instances and go on?" in err
    assert instances(four) == ["c1-vmss000_0", "c1-vmss000_1", "c1-vmss000_2"]


def test_interactive_no_deletes_nothing_and_exits_0(four, cli, monkeypatch):
    monkeypatch.setattr(sys, "stdin", Terminal("n\n"))
    before = len(four.requests)
    rc, out, err = cli(*create_args(nodes=3))
    # A no is the user's decision, as at destroy's prompt: exit 0, nothing changed, no error.
    assert rc == 0 and "Traceback" not in err and "ERROR" not in err
    assert "was declined at the prompt" in err and "nothing changed" in err
    assert writes(four, since=before) == [] and len(instances(four)) == 4


def test_yes_answers_the_scale_in_prompt_without_a_terminal(four, cli):
    rc, out, err = cli(*create_args(nodes=3), "--yes")
    assert rc == 0, err
    # The instances are still listed before they go, and the answer is shown.
    assert "- instance 3: c1-vmss000_3" in err and "Delete these instances and go on? yes (--yes)" in err
    assert instances(four) == ["c1-vmss000_0", "c1-vmss000_1", "c1-vmss000_2"]


def test_a_scale_set_no_longer_planned_is_guarded_too(azure, session, cli):
    create(session, request(nodes=4, max_ib_domain=2))
    rc, out, err = cli(*create_args("nd-a100-v4", "--max-ib-domain", "2", nodes=2))
    assert_cli_error(rc, err, 2, "SCALE_IN_REFUSED", "--allow-scale-in")
    assert "c1-vmss001: 2 -> 0" in err
    assert sorted(v["name"] for v in azure.resources(type=VMSS)) == ["c1-vmss000", "c1-vmss001"]


def test_with_the_flag_a_scale_set_no_longer_planned_is_deleted(azure, session, cli):
    create(session, request(nodes=4, max_ib_domain=2))
    rc, out, err = cli(*create_args("nd-a100-v4", "--max-ib-domain", "2", nodes=2), "--allow-scale-in")
    assert rc == 0, err
    assert [v["name"] for v in azure.resources(type=VMSS)] == ["c1-vmss000"]
    assert len(azure.resources(type=VM)) == 2


def test_growth_needs_no_flag(four, cli):
    rc, out, err = cli(*create_args(nodes=5))
    assert rc == 0, err
    assert len(instances(four)) == 5


def test_python_api_raises_scale_in_refused_and_takes_allow_scale_in(four, session):
    with pytest.raises(ScaleInRefused) as info:
        create(session, request(nodes=1))
    assert info.value.code == "SCALE_IN_REFUSED" and "--allow-scale-in" in info.value.remedy
    create(session, request(nodes=1), CreateOptions(allow_scale_in=True))
    assert instances(four) == ["c1-vmss000_0"]


def test_python_api_confirm_callback_sees_the_report(four, session):
    seen = []
    create(session, request(nodes=3), CreateOptions(confirm=lambda text: seen.append(text) or True))
    assert "- instance 3: c1-vmss000_3" in seen[0]
    assert len(instances(four)) == 3


def test_a_capacity_fallback_never_moves_an_existing_cluster(four, session):
    # Growing in zone 1 fails for capacity; moving to zone 2 would re-create the scale set and
    # lose the four nodes it has, so create stops instead.
    from azgpu.deploy.azure_errors import CapacityError

    notices = []
    four.inject(method="PUT", path="virtualMachineScaleSets", operation_error="AllocationFailed")
    with pytest.raises(CapacityError):
        create(session, request(nodes=6), CreateOptions(fallback_locations=["westus2"], on_notice=notices.append))
    assert "deletes the 4 node(s)" in notices[0]
    assert calls(four, "DELETE") == []
    assert {v["location"] for v in four.resources(type=VMSS)} == {LOCATION}
