"""Hostile binding records (tests/hostile/data/slurm-bindings.json): the node name a VM carries is kept in
Azure as the tags of its Run Command `azgpu-slurm-node` (deploy/nodes.py, the REST spec's
VirtualMachineScaleSetVMRunCommand_CreateOrUpdate.json body with azgpu's tags). Anyone with write access to
the VM can rewrite them: a tag that is not a name azgpu gives to this cluster's domain binds nothing, no
traceback follows, and the VM it sits on is neither given to another name nor deleted for it."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
from test_power import azure, session, slurm  # noqa: F401 - the power programs' fixtures

from azgpu import resource_types as rt

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "hostile"))
from corpus import assert_clean, error_code, ids, load

CASES = load("slurm-bindings.json")["cases"]


@pytest.mark.parametrize("case", CASES, ids=ids(CASES))
def test_a_binding_record_gets_its_exact_reading(slurm, session, case):  # noqa: F811
    assert slurm("resume", "demo-d000-[0001-0002]")[0] == 0
    before = slurm.vms()
    assert before == {"0": "demo-000-000000", "1": "demo-000-000001"}
    shutil.rmtree(slurm.state_dir)  # the cache is gone: Azure's record is all there is
    tags = case["tags"]
    rt.INSTANCE_RUN_COMMAND.begin_put(session, "demo-rg", "demo-vmss000", "0", "azgpu-slurm-node", {
        "location": "eastus", "tags": tags, "properties": {"source": {"script": "exit 0"}}}).result()
    slurm.scontrol.shows("powering-up-with-addresses.txt")  # slurmctld holds 10.0.0.4-7 for demo-d000-0001-0004
    rc, out, err = slurm(*case["argv"])
    assert_clean(rc, out, err)
    expect = case["expect"]
    assert (rc, error_code(err)) == (expect["rc"], expect.get("code")), err
    assert json.loads(out)["removed"] == expect["removed"]
    assert "0" in slurm.vms() and slurm.vms()["0"] == before["0"], slurm.text()  # never deleted for its record
    assert slurm.bindings().get("0") == expect["instance_0_carries"], slurm.text()
