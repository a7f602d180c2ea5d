"""`provision slurm config`: the slurm.conf fragment, gres.conf, topology.conf, the programs, and
the HealthCheckProgram that cloud-init installs."""

from __future__ import annotations

import email
import json
import os
import subprocess
import sys

import pytest
import yaml

from slurm_support import cluster_file

from azgpu.hostlist import compress
from azgpu.slurm.names import expand

PROBE = """
import sys
from azgpu.cli import main
rc = main(sys.argv[1:])
loaded = sorted(m for m in sys.modules if m == "azure" or m.startswith("azure."))
assert not loaded, f"Azure SDK modules imported: {loaded}"
sys.exit(rc)
"""


def test_fragment_has_cloud_nodes_per_domain_and_power_saving(run, tmp_path):
    cfile = cluster_file(tmp_path, nodes=150, profile="nd-a100-v4")  # two InfiniBand domains: 100 + 50
    rc, out, err = run("slurm", "config", "-f", cfile, "--program-dir", "/etc/slurm/azgpu", "--suspend-time", "900")
    assert rc == 0, err
    lines = out.splitlines()
    assert [line.split()[0] for line in lines if line.startswith("NodeName=")] == [
        "NodeName=demo-d000-[0001-0100]", "NodeName=demo-d001-[0001-0050]"]
    node = next(line for line in lines if line.startswith("NodeName=demo-d001"))
    assert "State=CLOUD CPUs=96 " in node and "Gres=gpu:8" in node and "Features=azgpu,nd-a100-v4," in node
    assert node.endswith(",demo-vmss001")
    assert "PartitionName=demo-vmss000 Nodes=demo-d000-[0001-0100] Default=YES MaxTime=INFINITE State=UP" in lines
    assert "PartitionName=demo-vmss001 Nodes=demo-d001-[0001-0050] MaxTime=INFINITE State=UP" in lines
    for setting in ("ResumeProgram=/etc/slurm/azgpu/azgpu-demo-resume", "SuspendProgram=/etc/slurm/azgpu/azgpu-demo-suspend",
                    "ResumeFailProgram=/etc/slurm/azgpu/azgpu-demo-resume-fail", "ResumeTimeout=1800", "SuspendTime=900",
                    "CommunicationParameters=NoAddrCache", "PrivateData=cloud"):
        assert setting in lines
    assert not any(line.startswith("HealthCheckProgram") for line in lines)


def test_out_dir_writes_programs_that_call_the_cli(run, tmp_path):
    cfile = cluster_file(tmp_path)
    state = tmp_path / "sim" / "s.json"
    rc, out, err = run("slurm", "config", "-f", cfile, "--out-dir", tmp_path / "o", "--state-dir", "/var/lib/x",
                       "--zones", "2", "3", "--simulate", "--simulate-state", state)
    assert rc == 0, err
    assert json.loads(out)["files"] == sorted(["azgpu.conf", "gres.conf", "topology.conf", "azgpu-demo-resume",
                                               "azgpu-demo-suspend", "azgpu-demo-resume-fail"])
    resume = tmp_path / "o" / "azgpu-demo-resume"
    assert os.access(resume, os.X_OK)
    text = resume.read_text()
    assert f"-m azgpu.cli slurm resume -f {cfile} --state-dir /var/lib/x" in text
    assert "--zone 2 --zone 3" in text and f"--simulate-state {state.resolve()}" in text
    assert text.rstrip().endswith('-- "$@" 2>>/var/log/slurm/azgpu-power.log')
    assert "ResumeProgram=" + str((tmp_path / "o").resolve() / "azgpu-demo-resume") in (tmp_path / "o" / "azgpu.conf").read_text()
    gres = (tmp_path / "o" / "gres.conf").read_text()
    assert "NodeName=demo-d000-[0001-0008] Name=gpu File=/dev/nvidia[0-7]" in gres
    assert "SwitchName=demo-vmss000 Nodes=demo-d000-[0001-0008]" in (tmp_path / "o" / "topology.conf").read_text()


def test_config_imports_no_azure_module(tmp_path):
    cfile = cluster_file(tmp_path)
    done = subprocess.run([sys.executable, "-c", PROBE, "slurm", "config", "-f", str(cfile)], capture_output=True,
                          text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stderr


def test_hostlists_round_trip():
    names = [f"demo-d000-{i:04d}" for i in (1, 2, 3, 7, 10)]
    assert compress(names) == "demo-d000-[0001-0003,0007,0010]"
    assert expand(compress(names)) == names
    assert expand("a[1-2]b,c[08-10]") == ["a1b", "a2b", "c08", "c09", "c10"]


def test_bad_hostlist_is_refused(run, tmp_path):
    rc, _, err = run("slurm", "suspend", "-f", cluster_file(tmp_path), "--simulate", "demo-d000-[0002-")
    assert rc == 2 and "ERROR: [INVALID_HOSTLIST]" in err


def test_health_check_program_is_installed_by_cloud_init(run, tmp_path):
    cfile = cluster_file(tmp_path)
    rc, out, err = run("slurm", "config", "-f", cfile, "--health-check")
    assert rc == 0, err
    assert "HealthCheckProgram=/usr/local/sbin/azgpu-slurm-health-check" in out
    assert "HealthCheckNodeState=IDLE" in out
    from azgpu.cli.slurm import _spec

    _, spec = _spec(str(cfile), True)
    message = email.message_from_string(spec.custom_data)
    parts = [p.get_payload(decode=True).decode() for p in message.walk() if not p.is_multipart()]
    config = yaml.safe_load(next(p for p in parts if p.startswith("#cloud-config") and "write_files" in p))
    files = {f["path"]: f for f in config["write_files"]}
    script = files["/usr/local/lib/azgpu/node-check.sh"]["content"]
    assert "AZGPU_EXPECT_GPUS=8" in script and "AZGPU_EXPECT_IB_PORTS=8" in script
    assert files["/usr/local/sbin/azgpu-slurm-health-check"]["permissions"] == "0755"
    # The same script the health gate's --print-script gives for this size, with the program's timeout.
    from azgpu.slurm.health_check import CHECK_TIMEOUT

    rc, printed, err = run("check", "--print-script", "--size", spec.size.name, "--node-timeout", CHECK_TIMEOUT)
    assert rc == 0, err
    assert script == printed
    assert f"timeout {CHECK_TIMEOUT} " in files["/usr/local/sbin/azgpu-slurm-health-check"]["content"]
    assert f"AZGPU_AZNHC_TIMEOUT={CHECK_TIMEOUT - 180}" in script, "AzNHC's watchdog ends before the program's"


@pytest.mark.parametrize("verdict, drained", [
    ('{"azgpu_health":1,"ok":true,"failures":[],"more":0}', None),
    ('{"azgpu_health":1,"ok":false,"failures":[{"check":"gpu-count","message":"7 of 8 GPUs"}],"more":1}',
     "azgpu gpu-count: 7 of 8 GPUs (+1 more)"),
    ("garbage; rm -rf /", "azgpu health check: no verdict (timed out or crashed)"),
])
def test_health_check_program_drains_with_the_failing_check(tmp_path, verdict, drained):
    from azgpu.slurm.health_check import NODE_SCRIPT_PATH, program

    check = tmp_path / "check.sh"
    check.write_text(f"#!/bin/sh\necho noise\necho '{verdict}'\n")
    check.chmod(0o755)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "calls"
    (bin_dir / "scontrol").write_text(f"#!/bin/sh\nprintf '%s\\n' \"$@\" >> {calls}\n")
    (bin_dir / "scontrol").chmod(0o755)
    prog = tmp_path / "prog"
    prog.write_text(program().replace(NODE_SCRIPT_PATH, str(check)))
    prog.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "SLURMD_NODENAME": "demo-d000-0003"}
    done = subprocess.run([str(prog)], env=env, capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    if drained is None:
        assert not calls.exists()
    else:
        assert calls.read_text().splitlines() == ["update", "nodename=demo-d000-0003", "state=DRAIN",
                                                  f"reason={drained}"]
