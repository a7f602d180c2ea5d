"""`provision slurm config`: the slurm.conf fragment, gres.conf, topology.conf and the programs, in the
syntax of each Slurm version (the settings each version accepts, from Slurm's own docs and source:
azgpu/slurm/conf.py names them); tests/slurm/test_slurmctld.py has real slurmctlds read them."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
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


def _lines(run, cfile, *args) -> list[str]:
    rc, out, err = run("slurm", "config", "-f", cfile, *args)
    assert rc == 0, err
    return out.splitlines()


def test_fragment_has_cloud_nodes_per_domain_and_power_saving(run, tmp_path):
    cfile = cluster_file(tmp_path, nodes=150, profile="nd-a100-v4")  # two InfiniBand domains: 100 + 50
    lines = _lines(run, cfile, "--program-dir", "/etc/slurm/azgpu", "--suspend-time", "900", "--slurm-version", "22.05")
    assert [line.split()[0] for line in lines if line.startswith("NodeName=")] == [
        "NodeName=demo-d000-[0001-0100]", "NodeName=demo-d001-[0001-0050]"]
    node = next(line for line in lines if line.startswith("NodeName=demo-d001"))
    assert "Gres=gpu:8" in node and "Features=azgpu,nd-a100-v4," in node and node.endswith(",demo-vmss001")
    assert "PartitionName=demo-vmss000 Nodes=demo-d000-[0001-0100] Default=YES MaxTime=INFINITE State=UP" in lines
    assert "PartitionName=demo-vmss001 Nodes=demo-d001-[0001-0050] MaxTime=INFINITE State=UP" in lines
    for setting in ("ResumeProgram=/etc/slurm/azgpu/azgpu-demo-resume",
                    "SuspendProgram=/etc/slurm/azgpu/azgpu-demo-suspend",
                    "ResumeFailProgram=/etc/slurm/azgpu/azgpu-demo-resume-fail", "ResumeTimeout=1800",
                    "SuspendTime=900",
                    "SuspendTimeout=300"):
        assert setting in lines
    assert not any(line.startswith("HealthCheckProgram") for line in lines)


def test_node_lines_give_sockets_cores_and_threads_as_slurmd_reports_them(run, tmp_path):
    # AzNHC's check_hw_cpuinfo 2 96 96 for ND96isr_H100_v5 (the profile's cpu_topology): 2 x 48 cores, no SMT.
    lines = _lines(run, cluster_file(tmp_path), "--slurm-version", "24.11")
    node = next(line for line in lines if line.startswith("NodeName="))
    assert " CPUs=96 Boards=1 SocketsPerBoard=2 CoresPerSocket=48 ThreadsPerCore=1 " in node
    # A size no source describes gets its CPU count only, and says so.
    lines = _lines(run, cluster_file(tmp_path, name="gb", profile="nd-gb300-v6", nodes=18), "--slurm-version", "24.11")
    node = next(line for line in lines if line.startswith("NodeName="))
    assert " CPUs=128 RealMemory=" in node and "Sockets" not in node
    assert "# No source gives this size's sockets and cores: only the CPU count is written." in lines


@pytest.mark.parametrize("version, tree_width, no_addr_cache, private_data, parameters", [
    ("22.05.8", True, True, True, "enable_configless,cloud_reg_addrs"),
    ("23.02.7", True, True, False, "enable_configless,cloud_reg_addrs"),
    ("23.11.4", False, False, False, "enable_configless"),
    ("24.05.1", False, False, False, "enable_configless"),
    ("24.11.5", False, False, False, "enable_configless"),
    ("25.11.0", False, False, False, "enable_configless"),
])
def test_each_version_gets_only_what_it_accepts(run, tmp_path, version, tree_width, no_addr_cache, private_data,
                                                parameters):
    # elastic_computing.shtml of 22.05/23.02 (TreeWidth), RELEASE_NOTES of 23.02 (PrivateData=cloud no longer
    # needed) and 23.11 (NoAddrCache and cloud_reg_addrs removed; read_config.c logs an error for each).
    lines = _lines(run, cluster_file(tmp_path, nodes=150, profile="nd-a100-v4"), "--slurm-version", version)
    assert ("TreeWidth=150" in lines) is tree_width
    assert ("CommunicationParameters=NoAddrCache" in lines) is no_addr_cache
    assert ("PrivateData=cloud" in lines) is private_data
    assert f"#SlurmctldParameters={parameters}" in lines
    assert f"# Written for Slurm {version}: regenerate it for another version " \
           "('provision slurm config --slurm-version')." in lines
    # Nothing slurm.conf may already set is written as a setting: those are comments to merge.
    keys = [line.split("=", 1)[0] for line in lines if "=" in line and not line.startswith("#")]
    assert not {"SlurmctldParameters", "SwitchType", "Prolog", "Epilog", "TopologyPlugin", "GresTypes"} & set(keys)
    twice = [k for k in set(keys) if keys.count(k) > 1 and k not in ("NodeName", "PartitionName")]
    assert twice == [], "a key written twice makes slurmctld log 'specified more than once'"


def test_tree_width_covers_the_cloud_nodes_and_keeps_the_default(run, tmp_path):
    assert "TreeWidth=50" in _lines(run, cluster_file(tmp_path, nodes=8), "--slurm-version", "22.05")


@pytest.mark.parametrize("version", ["22.05", "23.11", "24.05", "25.11"])
def test_gb_racks_are_blocks_in_each_versions_syntax(run, tmp_path, version):
    cfile = cluster_file(tmp_path, nodes=36, profile="nd-gb300-v6")
    out = tmp_path / "o"
    rc, _, err = run("slurm", "config", "-f", cfile, "--out-dir", out, "--slurm-version", version, "--keep-racks")
    assert rc == 0, err
    topology = (out / "topology.conf").read_text().splitlines()
    fragment = (out / "azgpu.conf").read_text().splitlines()
    racks = [f"demo-d000-[{18 * i + 1:04d}-{18 * i + 18:04d}]" for i in range(2)]
    # --keep-racks: the fragment of every version keeps the rack partitions out of suspend (slurm.conf(5)).
    assert fragment.count("SuspendExcParts=demo-vmss000") == 1
    if version == "22.05":  # no topology/block before 23.11: a switch per rack under the domain's
        assert topology[-3:] == [f"SwitchName=demo-vmss000-rack000 Nodes={racks[0]}",
                                 f"SwitchName=demo-vmss000-rack001 Nodes={racks[1]}",
                                 "SwitchName=demo-vmss000 Switches=demo-vmss000-rack[000-001]"]
        assert '# "TopologyPlugin=topology/tree" for the topology.conf written beside it.' in fragment
        return
    assert '# "TopologyPlugin=topology/block" for the topology.conf written beside it.' in fragment
    assert [line for line in topology if line.startswith("BlockName=")] == [
        f"BlockName=demo-vmss000-rack000 Nodes={racks[0]}", f"BlockName=demo-vmss000-rack001 Nodes={racks[1]}"]
    # topology.conf(5): BlockLevels in 23.11, BlockSizes (the base block size) from 24.05.
    assert (topology[-1] == "BlockLevels=0-4") is (version == "23.11")
    assert (topology[-1] == "BlockSizes=18") is (version >= "24.05")
    nodes = [line for line in fragment if line.startswith("NodeName=")]
    if version == "25.11":  # the powered-down-node workaround: one NodeName line per block
        assert [(n.split()[0], n.split()[-1]) for n in nodes] == [
            (f"NodeName={racks[0]}", "Topology=default:demo-vmss000-rack000"),
            (f"NodeName={racks[1]}", "Topology=default:demo-vmss000-rack001")]
    else:
        assert len(nodes) == 1 and "Topology=" not in nodes[0]
    # IMEX: the job's prolog, never the switch plugin that removes the image's channels (azgpu/imex.py).
    assert "#SwitchType=switch/none" in fragment and "#PrologFlags=alloc" in fragment
    assert "#Prolog=/etc/slurm/prolog.d/*" in fragment
    assert not any("nvidia_imex" in line and not line.startswith("# never") for line in fragment)
    assert (out / "prolog.d-azgpu-imex").exists() and (out / "epilog.d-azgpu-imex").exists()


def test_out_dir_writes_programs_that_call_the_cli(run, tmp_path):
    cfile = cluster_file(tmp_path)
    state = tmp_path / "sim" / "s.json"
    rc, out, err = run("slurm", "config", "-f", cfile, "--out-dir", tmp_path / "o", "--state-dir", "/var/lib/x",
                       "--zones", "2", "3", "--simulate", "--simulate-state", state, "--slurm-version", "24.11",
                       "--conf-server", "ctl.example:6817", "--munge-key", tmp_path / "key")
    assert rc == 0, err
    assert json.loads(out)["files"] == sorted(["azgpu.conf", "gres.conf", "topology.conf", "azgpu-demo-resume",
                                               "azgpu-demo-suspend", "azgpu-demo-resume-fail"])
    resume = tmp_path / "o" / "azgpu-demo-resume"
    assert os.access(resume, os.X_OK)
    text = resume.read_text()
    assert f"-m azgpu.cli slurm resume -f {cfile} --state-dir /var/lib/x --log-file /var/log/slurm/azgpu-power.log" \
        in text
    assert "--zone 2 --zone 3" in text and f"--simulate-state {state.resolve()}" in text
    # Resume starts slurmd on each node it brings up: the controller, its version, the key's file.
    assert f"--conf-server ctl.example:6817 --slurm-version 24.11 --munge-key {tmp_path / 'key'}" in text
    # The program opens its log itself, never following a link: no shell redirection, which would follow one.
    assert text.rstrip().endswith('-- "$@"') and ">>" not in text
    fragment = (tmp_path / "o" / "azgpu.conf").read_text()
    assert "ResumeProgram=" + str((tmp_path / "o").resolve() / "azgpu-demo-resume") in fragment
    gres = (tmp_path / "o" / "gres.conf").read_text()
    assert "NodeName=demo-d000-[0001-0008] Name=gpu File=/dev/nvidia[0-7]" in gres
    assert "SwitchName=demo-vmss000 Nodes=demo-d000-[0001-0008]" in (tmp_path / "o" / "topology.conf").read_text()


def test_a_program_does_not_follow_a_link_planted_where_its_log_goes(run, tmp_path):
    # SlurmUser runs the programs: a link at the log's path must not make it append to what the link names.
    target = tmp_path / "elsewhere"
    target.write_text("untouched\n")
    log = tmp_path / "power.log"
    log.symlink_to(target)
    rc, _, err = run("slurm", "config", "-f", cluster_file(tmp_path), "--out-dir", tmp_path / "o", "--log-file", log,
                     "--state-dir", tmp_path / "map", "--slurm-version", "24.11", "--conf-server", "ctl",
                     "--simulate", "--simulate-state", tmp_path / "s.json")
    assert rc == 0, err
    done = subprocess.run([str(tmp_path / "o" / "azgpu-demo-resume"), "demo-d000-0001"], capture_output=True,
                          text=True, timeout=120, env={"PATH": os.environ["PATH"]})
    assert done.returncode == 2 and "[SLURM_LOG_FILE]" in done.stderr and "symbolic link" in done.stderr
    assert target.read_text() == "untouched\n" and not (tmp_path / "s.json").exists()


def test_the_version_comes_from_the_controller_or_the_flag(run, tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    slurmctld = bin_dir / "slurmctld"
    slurmctld.write_text("#!/bin/sh\necho slurm-wlm 23.02.7\n")
    slurmctld.chmod(0o755)
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.setattr("azgpu.cli.slurm.SBIN", str(bin_dir))
    assert "# Written for Slurm 23.02.7: regenerate it for another version " \
           "('provision slurm config --slurm-version')." in _lines(run, cluster_file(tmp_path))
    slurmctld.unlink()
    rc, _, err = run("slurm", "config", "-f", cluster_file(tmp_path))
    assert rc == 2 and "ERROR: [SLURM_VERSION_UNKNOWN]" in err and "--slurm-version" in err
    rc, _, err = run("slurm", "config", "-f", cluster_file(tmp_path), "--slurm-version", "latest")
    assert rc == 2 and "ERROR: [INVALID_SLURM_VERSION]" in err


def test_config_imports_no_azure_module(tmp_path):
    cfile = cluster_file(tmp_path)
    argv = [sys.executable, "-c", PROBE, "slurm", "config", "-f", str(cfile), "--slurm-version", "24.11"]
    done = subprocess.run(argv, capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stderr


def test_hostlists_round_trip():
    names = [f"demo-d000-{i:04d}" for i in (1, 2, 3, 7, 10)]
    assert compress(names) == "demo-d000-[0001-0003,0007,0010]"
    assert expand(compress(names)) == names
    assert expand("a[1-2]b,c[08-10]") == ["a1b", "a2b", "c08", "c09", "c10"]


def test_bad_hostlist_is_refused(run, tmp_path):
    rc, _, err = run("slurm", "suspend", "-f", cluster_file(tmp_path), "--simulate", "demo-d000-[0002-")
    assert rc == 2 and "ERROR: [INVALID_HOSTLIST]" in err


def test_health_check_reads_the_background_verdict(run, tmp_path):
    lines = _lines(run, cluster_file(tmp_path), "--health-check", "--slurm-version", "24.11")
    assert "HealthCheckProgram=/usr/local/sbin/azgpu-slurm-health-check" in lines
    assert "HealthCheckInterval=300" in lines and "HealthCheckNodeState=ANY" in lines
