"""Hostile Run Command results (data/run-command.json), mutated from the recorded Linux answer and the REST
spec's example: `check --from-output` never raises on any of them, each gets its exact answer, and the gate
reading such an answer from Azure (injected into the fake's Run Command) neither deletes nor reports."""

from __future__ import annotations

import json

import pytest
from corpus import FIXTURES, arm_check, assert_clean, error_code, ids, load, mutated, segments, writes

RUN_COMMAND = load("run-command.json")
CASES = RUN_COMMAND["cases"]
PASSED = load("verdicts.json")["base"]["passed"]
BASES = {"linux": json.loads((FIXTURES / "azure" / "run-command-linux-output.json").read_text()),
         "spec": json.loads((FIXTURES / "azure" / "vmss-vm-run-command-200.json").read_text())}
SIZE = "Standard_ND96isr_H100_v5"
CODES = {"passed": None, "inconclusive": "HEALTH_INCONCLUSIVE", "unreachable": "NODES_UNREACHABLE"}


def text_of(case: dict) -> str:
    if "text" in case:
        raw = segments(case["text"], {})
    else:
        raw = json.dumps(mutated(BASES[case["base"]], case, {}), ensure_ascii=False)
    return raw.replace("@passed@", json.dumps(PASSED)[1:-1])  # the verdict, inside a JSON string


@pytest.mark.parametrize("case", CASES, ids=ids(CASES))
def test_check_from_output_reads_any_run_command_json(run, tmp_path, case):
    path = tmp_path / "result.json"
    path.write_text(text_of(case), encoding="utf-8", errors="surrogatepass")
    rc, out, err = run("check", "--from-output", path, "--size", SIZE)
    assert_clean(rc, out, err)
    status = case["expect"]["status"]
    assert rc == (0 if status == "passed" else 1) and error_code(err) == CODES[status], err
    (node,) = json.loads(out)["nodes"]
    assert (node["status"], node["reason_code"]) == (status, case["expect"]["reason_code"])


# Azure's own answer to the POST (200 with the result, as the REST spec allows) in the shapes above that the
# SDK cannot read: the node is unreachable (run_command_failed), never a traceback, nothing deleted.
GATE = ["value a string", "value a number", "a status message that is an object", "value a list of numbers"]


@pytest.mark.parametrize("name", GATE)
def test_the_gate_reading_such_an_answer_from_azure_deletes_and_reports_nothing(cli, azure, name):
    case = next(c for c in CASES if c["id"] == name)
    create = ["create", "--profile", "nd-a100-v4", "-n", "c1", "-g", "rg", "-l", "eastus", "--nodes", "2",
              "--ssh-key", "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJOgAYClhajeh3m7rJp5Bf+XHzOywcIepjITM9B6OJMg t"]
    rc, out, err = cli(*create, "-o", "none")
    assert rc == 0, err
    azure.inject(method="POST", path=r"/virtualMachines/0/runCommand$", status=200, body=json.loads(text_of(case)),
                 times=None)
    since = len(azure.requests)
    rc, out, err = cli(*create, "--check", "--replace-unhealthy", "--report-to-azure", "--yes",
                       "--insight-timeout", "0")
    assert_clean(rc, out, err)
    assert rc == 1 and error_code(err) == "NODES_UNREACHABLE", err
    (node,) = [n for n in json.loads(out)["health"]["nodes"] if n["instance_id"] == "0"]
    assert node["status"] == "unreachable"
    assert [r for r in writes(azure, since, arm_check) if not r.path.lower().endswith("/runcommand")] == []
