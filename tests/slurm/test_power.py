"""`provision slurm resume|suspend|resume-fail` against the simulated subscription, with an
scontrol that records its calls: what reaches slurmctld, what changes in Azure."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from slurm_support import cluster_file, fake_scontrol, instances, nodes, provision, status


@pytest.fixture
def env(tmp_path):
    state = tmp_path / "sim.json"
    scontrol, calls = fake_scontrol(tmp_path)
    cfile = cluster_file(tmp_path, nodes=8)
    log = tmp_path / "power.log"
    args = ["-f", str(cfile), "--state-dir", str(tmp_path / "map"), "--log-file", str(log), "--scontrol", str(scontrol),
            "--simulate", "--simulate-state", str(state), "--simulate-latency", "0"]
    return {"state": state, "calls": calls, "args": args, "log": log, "dir": tmp_path}


def _calls(env) -> list[str]:
    return env["calls"].read_text().splitlines() if env["calls"].exists() else []


def test_resume_gives_addresses_of_checked_nodes_and_converges(run, env):
    rc, out, err = run("slurm", "resume", *env["args"], "demo-d000-[0001-0004]")
    assert rc == 0, err
    assert json.loads(out) == {"resumed": [f"demo-d000-000{i}" for i in range(1, 5)], "failed": []}
    vms = nodes(env["state"])
    updates = _calls(env)
    assert len(updates) == 4
    for line in updates:
        fields = dict(f.split("=", 1) for f in line.split()[1:])
        assert vms[fields["nodehostname"]] == fields["nodeaddr"]
    assert "health check of 4 node(s) of demo-vmss000" in env["log"].read_text()
    # The same names again (slurmctld restarted): nothing created, the addresses given again.
    rc, out, err = run("slurm", "resume", *env["args"], "demo-d000-[0003-0004]")
    assert rc == 0, err
    assert len(instances(env["state"])) == 4
    assert _calls(env)[4:] == updates[2:]


def test_suspend_deletes_exactly_the_named_nodes(run, env):
    assert run("slurm", "resume", *env["args"], "demo-d000-[0001-0004]")[0] == 0
    before = {n["hostname"] for n in _mapping(env).values()}
    rc, out, err = run("slurm", "suspend", *env["args"], "demo-d000-[0002,0004,0007]")
    assert rc == 0, err
    result = json.loads(out)
    assert result == {"removed": ["demo-d000-0002", "demo-d000-0004"], "without_vm": ["demo-d000-0007"]}
    left = set(nodes(env["state"]))
    assert left == before - {"demo-000-000001", "demo-000-000003"}
    assert sorted(_mapping(env)) == ["demo-d000-0001", "demo-d000-0003"]


def _mapping(env) -> dict:
    return json.loads((env["dir"] / "map" / "demo.json").read_text())["nodes"]


def test_unknown_names_are_refused_before_anything_runs(run, env):
    rc, out, err = run("slurm", "resume", *env["args"], "demo-d000-[0008-0009]")
    assert rc == 2
    assert "ERROR: [UNKNOWN_SLURM_NODE] 1 node name(s) are not CLOUD nodes of this cluster: demo-d000-0009" in err
    assert not env["state"].exists() or not instances_or_none(env)
    assert _calls(env) == []


def instances_or_none(env):
    done = provision("status", "-n", "demo", "-g", "demo-rg", "--simulate", "--simulate-state", str(env["state"]))
    return done.returncode == 0


def test_failing_node_is_replaced_before_its_name_gets_an_address(run, env):
    sim = ["--simulate-state", str(env["state"])]
    assert run("simulate", "fault", "--next", "1", "--gpus", "7", *sim)[0] == 0
    rc, out, err = run("slurm", "resume", *env["args"], "demo-d000-[0001-0002]")
    assert rc == 0, err
    text = env["log"].read_text()
    assert "demo-000-000000 (instance 0) did not pass" in text
    assert "deleting 1 failing instance(s) of demo-vmss000: 0" in text
    hosts = {dict(f.split("=", 1) for f in line.split()[1:])["nodehostname"] for line in _calls(env)}
    assert "demo-000-000000" not in hosts and len(hosts) == 2
    assert sorted(i["instance_id"] for i in instances(env["state"])) == ["1", "2"]


def test_capacity_error_moves_to_the_next_zone(run, env):
    sim = ["--simulate-state", str(env["state"])]
    assert run("simulate", "capacity", "set", "-l", "eastus", "--size", "Standard_ND96isr_H100_v5", "--zone", "2",
               "--max-vms", "2", *sim)[0] == 0
    cluster_file(env["dir"], nodes=8, extra='zone = "2"\n')  # the cluster file asks for zone 2
    rc, out, err = run("slurm", "resume", *env["args"], "--zone", "3", "demo-d000-[0001-0004]")
    text = env["log"].read_text()
    assert rc == 0, text
    assert "trying eastus zone 3" in text
    assert [s for s in status(env["state"])["scale_sets"]][0]["capacity"] == 4
    assert len(_calls(env)) == 4


def test_quota_ends_on_the_resume_fail_path_with_the_remedy(run, env):
    sim = ["--simulate-state", str(env["state"])]
    assert run("simulate", "quota", "set", "-l", "eastus", "--name", "standardNDSH100v5Family", "--limit", "96",
               *sim)[0] == 0
    rc, out, err = run("slurm", "resume", *env["args"], "demo-d000-[0001-0004]")
    assert rc == 1
    assert json.loads(out)["failed"] == [f"demo-d000-000{i}" for i in range(1, 5)]
    text = env["log"].read_text()
    error = next(line for line in text.splitlines() if "ERROR [" in line)
    assert "QUOTA" in error and "remedy:" in error
    assert "resume demo-d000-[0001-0004]: setting DOWN" in text
    down = _calls(env)
    assert len(down) == 1 and down[0].startswith("update nodename=demo-d000-[0001-0004] state=DOWN reason=azgpu QUOTA")
    assert not instances_or_none(env) or instances(env["state"]) == []


def test_two_concurrent_resumes_of_one_domain_create_the_nodes_once(env):
    argv = [sys.executable, "-m", "azgpu.cli", "slurm", "resume", *env["args"][:-1], "1"]
    procs = [subprocess.Popen([*argv, "demo-d000-[0001-0004]"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for _ in range(2)]
    results = [p.communicate(timeout=180) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [r[1] for r in results]
    text = env["log"].read_text()
    assert text.count("growing demo-vmss000") == 1
    assert text.count("already up on") == 4
    assert len(instances(env["state"])) == 4
    assert [s["capacity"] for s in status(env["state"])["scale_sets"]] == [4]


def test_resume_fail_sets_down_and_removes_the_vms(run, env):
    assert run("slurm", "resume", *env["args"], "demo-d000-[0001-0002]")[0] == 0
    rc, out, err = run("slurm", "resume-fail", *env["args"], "demo-d000-0002")
    assert rc == 0, err
    assert _calls(env)[-1] == ("update nodename=demo-d000-0002 state=DOWN "
                               "reason=azgpu did not register with slurmctld within ResumeTimeout")
    assert json.loads(out)["removed"] == ["demo-d000-0002"]
    assert len(instances(env["state"])) == 1


def test_rack_scale_sizes_grow_by_whole_racks(run, tmp_path):
    scontrol, calls = fake_scontrol(tmp_path)
    cfile = cluster_file(tmp_path, nodes=18, profile="nd-gb200-v6", extra='image = "ubuntu-hpc-2404-gb"\n')
    args = ["-f", str(cfile), "--state-dir", str(tmp_path / "map"), "--scontrol", str(scontrol), "--simulate",
            "--simulate-state", str(tmp_path / "s.json"), "--simulate-latency", "0"]
    rc, out, err = run("slurm", "resume", *args, "demo-d000-[0001-0002]")
    assert rc == 0, err
    assert "growing demo-vmss000 from 0 to 18 instance(s)" in err
    assert len(calls.read_text().splitlines()) == 2
    # The rest of the rack is there already: the next names take its nodes without growing.
    rc, out, err = run("slurm", "resume", *args, "demo-d000-0003")
    assert rc == 0, err
    assert "growing" not in err and len(instances(tmp_path / "s.json")) == 18


def test_nodes_a_new_vm_would_not_fix_are_reported_not_replaced(run, env):
    cluster_file(env["dir"], nodes=8, extra="outbound = false\n")  # Run Command cannot answer without outbound
    rc, out, err = run("slurm", "resume", *env["args"], "demo-d000-[0001-0002]")
    assert rc == 1
    text = env["log"].read_text()
    assert "growing demo-vmss000" in text and text.count("growing") == 1 and "deleting" not in text
    assert "left for inspection in demo-vmss000: instance(s) 0, 1" in text
    assert _calls(env) == ["update nodename=demo-d000-[0001-0002] state=DOWN reason=azgpu NODES_UNREACHABLE: 2 new "
                           "node(s) of demo-vmss000 could not be checked (see the log)"]
    assert len(instances(env["state"])) == 2
