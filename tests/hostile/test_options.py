"""Hostile options (data/options.json): every option and --query is checked before a lock is taken, a
request is sent or a file is written. Each case runs twice: against the fake bound in-process (not one
request may reach it) and against --simulate with a state file (neither the file nor its lock may appear)."""

from __future__ import annotations

import os

import pytest
from corpus import assert_clean, error_code, ids, load

CASES = load("options.json")["cases"]
PLACES = {"{pipe}": "|".join(["a"] * 20000), "{brackets}": "[" * 3000 + "a" + "]" * 3000}


@pytest.fixture
def places(tmp_path):
    (tmp_path / "file").write_text("")
    (tmp_path / "dir").mkdir()
    found = {"{file}": str(tmp_path / "file"), "{dir}": str(tmp_path / "dir")}
    if hasattr(os, "mkfifo"):
        os.mkfifo(tmp_path / "fifo")
        found["{fifo}"] = str(tmp_path / "fifo")
    return found


def argv_of(case: dict, places: dict) -> list[str]:
    out = []
    for arg in case["argv"]:
        for name, value in {**PLACES, **places}.items():
            arg = arg.replace(name, value)
        if "{fifo}" in arg:
            pytest.skip("no FIFOs on this platform")
        out.append(arg)
    return out


@pytest.mark.parametrize("case", CASES, ids=ids(CASES))
def test_an_option_is_refused_before_azure_hears_of_it(cli, azure, places, case):
    rc, out, err = cli(*argv_of(case, places))
    assert_clean(rc, out, err)
    assert (rc, error_code(err)) == (case["expect"]["rc"], case["expect"]["code"]), err
    assert out == "" and azure.requests == []
    assert not os.path.exists(os.path.join(places["{dir}"], "sd"))  # a Slurm program's cache and lock


@pytest.mark.parametrize("case", CASES, ids=ids(CASES))
def test_an_option_is_refused_before_a_state_or_lock_is_written(run, tmp_path, places, case):
    state = tmp_path / "state" / "sim.json"
    argv = argv_of(case, places)
    latency = [] if "--simulate-latency" in argv else ["--simulate-latency", "0"]  # the case's own flag counts
    rc, out, err = run(*argv, "--simulate", *latency, "--simulate-state", state)
    assert_clean(rc, out, err)
    assert (rc, error_code(err)) == (case["expect"]["rc"], case["expect"]["code"]), err
    assert not state.exists() and not state.with_name("sim.json.lock").exists() and not state.parent.exists()
    assert not os.path.exists(os.path.join(places["{dir}"], "sd"))
