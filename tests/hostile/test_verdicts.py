"""Hostile node verdicts (data/verdicts.json): what a broken or compromised node prints where azgpu's
verdict line goes. Each is judged as the gate judges it (the node's status and reason code, exactly),
through `provision check --from-output` (exit status and error code, no traceback, nothing printed that
drives a terminal), and a sample of them through the gate itself on the fake (a node that prints them):
nothing deleted, nothing reported."""

from __future__ import annotations

import json

import pytest
from corpus import arm_check, assert_clean, error_code, ids, load, mutated, segments, writes

from azgpu.health import judge

VERDICTS = load("verdicts.json")
CASES = VERDICTS["cases"]
SIZE = "Standard_ND96isr_H100_v5"
CODES = {"passed": None, "failed": "UNHEALTHY_NODES", "inconclusive": "HEALTH_INCONCLUSIVE",
         "unreachable": "NODES_UNREACHABLE"}


def stdout_of(case: dict) -> str:
    if "stdout" in case:
        return segments(case["stdout"], VERDICTS["base"])
    doc = mutated(json.loads(VERDICTS["base"][case["base"]]), case)
    return json.dumps(doc, separators=(",", ":"), ensure_ascii=False) + "\n"


@pytest.mark.parametrize("case", CASES, ids=ids(CASES))
def test_a_hostile_verdict_gets_its_exact_answer(case):
    result = judge(stdout_of(case), SIZE, name="node")
    assert (result.status, result.reason_code) == (case["expect"]["status"], case["expect"]["reason_code"])
    for field, value in (case.get("also") or {}).items():
        assert getattr(result, field) == value, field
    json.dumps(result.as_dict())  # what -o json prints
    assert result.summary().isprintable()


@pytest.mark.parametrize("case", CASES, ids=ids(CASES))
def test_check_from_output_answers_it_with_an_exit_status_and_a_code(run, tmp_path, case):
    path = tmp_path / "out.txt"
    path.write_text(stdout_of(case), encoding="utf-8", errors="surrogateescape")
    rc, out, err = run("check", "--from-output", path, "--size", SIZE)
    assert_clean(rc, out, err)
    status = case["expect"]["status"]
    assert rc == (0 if status == "passed" else 1), err
    assert error_code(err) == CODES[status], err
    (node,) = json.loads(out)["nodes"]
    assert (node["status"], node["reason_code"]) == (status, case["expect"]["reason_code"])


# Through Run Command a line longer than its 4 KB tail comes back cut at its start: no verdict at all.
CUT = {"status": "unreachable", "reason_code": "no_verdict"}
GATE = {"1,500 nested arrays (RecursionError before)": None, "NaN": None, "message with an escape sequence": None,
        "a verdict line of 20,000 characters": CUT, "the script reported an error": None, "version 2": None,
        "an unknown key in host": None, "1,500 nested objects": CUT}


@pytest.mark.parametrize("name", GATE)
def test_a_node_printing_it_through_the_gate_is_neither_deleted_nor_reported(cli, azure, name):
    case = next(c for c in CASES if c["id"] == name)
    case = {**case, "expect": GATE[name] or case["expect"]}
    create = ["create", "--profile", "nd-a100-v4", "-n", "c1", "-g", "rg", "-l", "eastus", "--nodes", "2",
              "--ssh-key", "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJOgAYClhajeh3m7rJp5Bf+XHzOywcIepjITM9B6OJMg t"]
    rc, out, err = cli(*create, "-o", "none")
    assert rc == 0, err
    azure.forge_output("c1-vmss000/0", stdout_of(case))
    since = len(azure.requests)
    rc, out, err = cli(*create, "--check", "--replace-unhealthy", "--report-to-azure", "--yes",
                       "--insight-timeout", "0")
    assert_clean(rc, out, err)
    assert rc == 1 and error_code(err) == CODES[case["expect"]["status"]], err
    (node,) = [n for n in json.loads(out)["health"]["nodes"] if n["instance_id"] == "0"]
    assert (node["status"], node["reason_code"]) == (case["expect"]["status"], case["expect"]["reason_code"])
    # Only the Run Commands were written: nothing deleted, scaled or reported.
    assert [r for r in writes(azure, since, arm_check) if not r.path.lower().endswith("/runcommand")] == []
