"""What `provision slurm config` writes into slurm.conf and the programs is checked first: a value that
would add a line to the fragment, break it, or name another file when slurmctld runs the programs
from its own directory is refused, with every finding at once, and nothing is written."""

from __future__ import annotations

import pytest
from slurm_support import KEY, cluster_file


def test_a_program_dir_with_a_newline_adds_no_line(run, tmp_path):
    rc, out, err = run("slurm", "config", "-f", cluster_file(tmp_path), "--program-dir", "/etc/slurm\nSlurmUser=root",
                       "--out-dir", tmp_path / "out")
    assert rc == 2 and "[SLURM_INVALID_PATH] --program-dir" in err
    assert "SlurmUser=root" not in out and not (tmp_path / "out").exists()


def test_a_program_dir_with_a_space_or_a_hash_is_refused(run, tmp_path):
    for bad in ("/etc/my slurm", "/etc/slurm#x"):
        rc, out, err = run("slurm", "config", "-f", cluster_file(tmp_path), "--program-dir", bad)
        assert rc == 2 and "[SLURM_INVALID_PATH]" in err and out == ""


def test_relative_paths_the_programs_use_are_refused_with_the_absolute_form(run, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rc, out, err = run("slurm", "config", "-f", cluster_file(tmp_path), "--state-dir", "map", "--log-file", "p.log",
                       "--program-dir", "bin")
    assert rc == 2
    for flag, name in (("--state-dir", "map"), ("--log-file", "p.log"), ("--program-dir", "bin")):
        assert f"[SLURM_RELATIVE_PATH] {flag} {name} is not an absolute path" in err
        assert f"remedy: pass {flag} {tmp_path / name}" in err


def test_a_relative_ssh_key_in_the_cluster_file_is_refused_with_its_absolute_form(run, tmp_path, monkeypatch):
    (tmp_path / "keys").mkdir()
    (tmp_path / "keys" / "id.pub").write_text(KEY.read_text())
    monkeypatch.chdir(tmp_path)  # where the key is found now, but not from slurmctld's directory
    cfile = tmp_path / "demo.toml"
    cfile.write_text('profile = "nd-h100-v5"\nnodes = 4\nname = "demo"\nlocation = "eastus"\n'
                     'resource-group = "demo-rg"\nssh-key = "keys/id.pub"\n')
    rc, out, err = run("slurm", "config", "-f", cfile)
    assert rc == 2 and "[SLURM_RELATIVE_PATH] ssh-key = 'keys/id.pub'" in err
    assert f'remedy: set ssh-key = "{tmp_path / "keys" / "id.pub"}"' in err


def test_zones_locations_and_subscription_are_checked_before_anything_is_written(run, tmp_path):
    rc, out, err = run("slurm", "config", "-f", cluster_file(tmp_path), "--zones", "4", "--fallback-locations",
                       "mars", "--subscription", "../../x", "--out-dir", tmp_path / "out")
    assert rc == 2
    assert "[INVALID_ZONES]" in err and "[INVALID_FALLBACK_LOCATIONS]" in err and "[INVALID_SUBSCRIPTION]" in err
    assert not (tmp_path / "out").exists()


def test_a_missing_resource_group_names_the_cluster_files_key(run, tmp_path):
    cfile = tmp_path / "demo.toml"
    cfile.write_text(f'profile = "nd-h100-v5"\nnodes = 4\nname = "demo"\nlocation = "eastus"\nssh-key = "{KEY}"\n')
    rc, out, err = run("slurm", "config", "-f", cfile)
    assert rc == 2
    assert f"[MISSING_RESOURCE_GROUP] the cluster file {cfile} has no 'resource-group'" in err
    assert f'remedy: set resource-group = "ml-rg" in {cfile}' in err and "-g/" not in err and "pass -g" not in err


def test_keep_racks_keeps_rack_partitions_out_of_suspend(run, tmp_path):
    rc, out, err = run("slurm", "config", "-f", cluster_file(tmp_path, nodes=36, profile="nd-gb300-v6"),
                       "--keep-racks")
    assert rc == 0, err
    assert "SuspendExcParts=demo-vmss000" in out.splitlines()
    rc, out, err = run("slurm", "config", "-f", cluster_file(tmp_path), "--keep-racks")
    assert rc == 2 and "[SLURM_NO_RACKS]" in err


def test_the_programs_check_their_zones_before_anything_runs(run, tmp_path):
    rc, out, err = run("slurm", "resume", "-f", cluster_file(tmp_path), "--state-dir", tmp_path / "map",
                       "--zone", "9", "--simulate", "--simulate-state", tmp_path / "s.json", "demo-d000-0001")
    assert rc == 2 and "[INVALID_ZONES]" in err
    assert not (tmp_path / "s.json").exists()


@pytest.mark.parametrize("version", ["24.11\nPrologSlurmctld=/tmp/x", "24.11 PrologSlurmctld=/tmp/x", "99.99",
                                     "19.05.8", "2024.11"])
def test_a_slurm_version_is_one_release_azgpu_knows_and_never_reaches_the_files_otherwise(run, tmp_path, version):
    """The version goes into the fragment's and topology.conf's comments: a line break there would be a
    slurm.conf line of the user's choosing; a release azgpu has no slurm.conf(5) for has unknown keys."""
    out = tmp_path / "out"
    rc, _, err = run("slurm", "config", "-f", cluster_file(tmp_path), "--out-dir", out, "--slurm-version", version)
    assert rc == 2 and "ERROR: [INVALID_SLURM_VERSION]" in err
    assert not out.exists()


@pytest.mark.parametrize("option", ["--resume-timeout", "--suspend-timeout", "--health-check-interval"])
def test_settings_slurm_reads_as_16_bit_numbers_stay_below_its_infinite(run, tmp_path, option):
    """ResumeTimeout, SuspendTimeout and HealthCheckInterval are S_P_UINT16 (src/common/read_config.c); a value
    above 65535 is a configuration error (src/common/parse_value.c), 65534 and 65535 are NO_VAL16 and INFINITE16."""
    out = tmp_path / "out"
    rc, _, err = run("slurm", "config", "-f", cluster_file(tmp_path), "--out-dir", out, "--slurm-version", "24.11",
                     option, "65534")
    assert rc == 2 and "ERROR: [USAGE]" in err and option in err
    assert not out.exists()
