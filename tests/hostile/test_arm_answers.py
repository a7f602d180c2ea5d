"""Hostile answers of Azure Resource Manager (data/arm.json): Deployments - Validate and What If mutated from
the REST spec's examples, and Retry-After values that are not numbers, negative, not finite or huge.
Each gets its exact answer (exit status, error code), no traceback, nothing that drives a terminal, never
a wait longer than azgpu's bound, and nothing written to Azure before the answer was read."""

from __future__ import annotations

import json

import pytest
from corpus import FIXTURES, arm_check, assert_clean, error_code, ids, load, mutated, writes

ARM = load("arm.json")
CASES = ARM["cases"]
BASES = {"validate": json.loads((FIXTURES / "azure" / "resources" / "PostDeploymentValidateOnResourceGroup.json")
                                .read_text())["responses"]["200"]["body"],
         "whatIf": json.loads((FIXTURES / "azure" / "resources" / "PostDeploymentWhatIfOnResourceGroup.json")
                              .read_text())["responses"]["200"]["body"]}
KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJOgAYClhajeh3m7rJp5Bf+XHzOywcIepjITM9B6OJMg t"
CREATE = ["create", "--profile", "nd-a100-v4", "-n", "c1", "-g", "rg", "-l", "eastus", "--nodes", "1", "--ssh-key", KEY]
OPERATION = "/subscriptions/00000000-0000-0000-0000-000000000000/providers/Microsoft.Resources/operationStatuses/op1"


def body_of(case: dict, base: dict):
    if "body" in case:
        return case["body"]["replace"]
    return mutated(base, case)


def headers_of(case: dict) -> dict:
    return {k: ("https://management.azure.com" + OPERATION if v == "@operation" else v)
            for k, v in (case.get("headers") or {}).items()}


def inject(azure, case: dict) -> None:
    check = case["check"]
    if check == "throttle":  # the first read of create: the resource group's listing
        azure.inject(method="GET", path=r"/resourceGroups/rg/resources$", status=case["status"],
                     body=case["body"]["replace"], headers=headers_of(case), times=case.get("times", 1))
        return
    base = BASES[check]
    azure.inject(method="POST", path=rf"/{check}$", status=case.get("status", 200), body=body_of(case, base),
                 headers=headers_of(case))
    then = case.get("then")
    if then:
        azure.inject(method="GET", path=OPERATION + "$", status=then["status"],
                     body=base if then["body"] == "@base" else then["body"], times=then["times"],
                     headers=headers_of(then))


@pytest.mark.parametrize("case", CASES, ids=ids(CASES))
def test_an_azure_answer_gets_its_exact_answer(cli, azure, case):
    inject(azure, case)
    argv = [*CREATE, "--what-if", "-o", "json"] if case["check"] == "whatIf" else [*CREATE, "-o", "json"]
    rc, out, err = cli(*argv)
    assert_clean(rc, out, err)
    expect = case["expect"]
    assert (rc, error_code(err)) == (expect["rc"], expect["code"]), err
    if expect["rc"]:  # refused on Azure's answer: nothing was written to Azure
        assert writes(azure, 0, arm_check) == []
    if "max_sleep" in expect:
        assert max(azure.sleeps, default=0) <= expect["max_sleep"], azure.sleeps
    if case["check"] == "whatIf" and not expect["rc"]:
        json.loads(out)  # the escaped text is still the JSON value


@pytest.mark.parametrize("case", [c for c in CASES if c["check"] == "whatIf" and not c["expect"]["rc"]],
                         ids=lambda c: c["id"])
def test_what_if_text_from_azure_reaches_the_terminal_escaped(cli, azure, case):
    inject(azure, case)
    rc, out, err = cli(*CREATE, "--what-if", "-o", "table")
    assert rc == 0, err
    assert_clean(rc, out, err)
    assert "\\x1b" in out or "\\u202e" in out or "\\x9b" in out
