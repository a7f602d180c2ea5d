"""Malformed input of every kind: exit 2, one `ERROR: [CODE] message` line and a remedy line,
no traceback, nothing written. All findings are reported at once; --debug shows the traceback."""

from __future__ import annotations

import subprocess
import sys

import pytest

from azgpu.errors import ValidationFailed

GOOD = ["--profile", "nd-a100-v4", "-n", "demo", "-l", "eastus"]


def render_args(tmp_path, ssh_key, *extra):
    """render with a valid base request; later flags override earlier ones."""
    return ["render", *GOOD, "--ssh-key", ssh_key, "--out-dir", tmp_path / "out", *extra]


def assert_one_error(rc, out, err, code, remedy_part):
    assert rc == 2, err
    assert "Traceback" not in err
    assert out == ""
    errors = [line for line in err.splitlines() if line.startswith("ERROR: ")]
    assert errors and len(errors) == 1, err
    assert errors[0].startswith(f"ERROR: [{code}] "), err
    lines = err.splitlines()
    remedy = lines[lines.index(errors[0]) + 1]
    assert remedy.startswith("  remedy: "), err
    assert remedy_part in remedy, remedy


CASES = {
    "unknown profile": (["--profile", "nd-a100v4"], "UNKNOWN_PROFILE", "did you mean 'nd-a100-v4'?"),
    "unknown size": (["--size", "ND96asr_v5"], "UNKNOWN_SIZE", "did you mean 'Standard_ND96asr_v4'?"),
    "nodes 0": (["--nodes", "0"], "INVALID_NODES", "pass --nodes 1 or more"),
    "nodes -1": (["--nodes", "-1"], "INVALID_NODES", "pass --nodes 1 or more"),
    "nodes abc": (["--nodes", "abc"], "INVALID_NODES", "pass a whole number, e.g. --nodes 4"),
    "nodes 10**9": (["--nodes", str(10**9)], "INVALID_NODES", "check the number"),
    "cidr with host bits": (["--vnet-address-prefix", "10.0.0.1/16"], "INVALID_CIDR", "e.g. 10.0.0.0/16"),
    "cidr garbage": (["--vnet-address-prefix", "ten.zero/8"], "INVALID_CIDR", "pass a network in CIDR form"),
    "ssh source": (["--ssh-source", "my-laptop"], "INVALID_SSH_SOURCE", "--ssh-source 203.0.113.7/32"),
    "ssh key text": (["--ssh-key", "ssh-rsa not!base64"], "INVALID_SSH_KEY", "--ssh-key ~/.ssh/id_ed25519.pub"),
    "location with space": (["-l", "East US"], "INVALID_LOCATION", "did you mean 'eastus'?"),
    "location unknown": (["-l", "mars"], "INVALID_LOCATION", "az account list-locations"),
    "output format": (["-o", "xml"], "USAGE", "provision render --help"),
    "template format": (["--format", "pdf"], "USAGE", "provision render --help"),
    "query": (["--query", "[["], "INVALID_QUERY", "jmespath.org"),
    "unknown option": (["--node", "4"], "USAGE", "provision render --help"),
}


@pytest.mark.parametrize("extra, code, remedy", CASES.values(), ids=CASES.keys())
def test_malformed_flag_exits_2_with_one_error_and_writes_nothing(run, tmp_path, ssh_key, extra, code, remedy):
    rc, out, err = run(*render_args(tmp_path, ssh_key, *extra))
    assert_one_error(rc, out, err, code, remedy)
    assert not (tmp_path / "out").exists()


def test_unknown_profile_message_names_it(run, tmp_path, ssh_key):
    _, _, err = run(*render_args(tmp_path, ssh_key, "--profile", "nd-a100v4"))
    assert "ERROR: [UNKNOWN_PROFILE] unknown profile 'nd-a100v4'" in err


def test_unknown_size_without_profile_suggests_the_nearest(run, tmp_path, ssh_key):
    rc, out, err = run("render", "--size", "ND40rs_v3", "-n", "demo", "--ssh-key", ssh_key, "--out-dir",
                       tmp_path / "out")
    assert_one_error(rc, out, err, "UNKNOWN_SIZE", "did you mean 'ND40rs_v2'?")


def test_location_without_suggestion_for_nonsense(run, tmp_path, ssh_key):
    _, _, err = run(*render_args(tmp_path, ssh_key, "-l", "mars"))
    assert "did you mean" not in err


def test_missing_key_file(run, tmp_path):
    rc, out, err = run(*render_args(tmp_path, str(tmp_path / "nope.pub")))
    assert_one_error(rc, out, err, "SSH_KEY_NOT_FOUND", "ssh-keygen -t ed25519")
    assert not (tmp_path / "out").exists()


def test_private_key_file_is_refused(run, tmp_path):
    key = tmp_path / "id_ed25519"
    key.write_text("-----BEGIN OPENSSH PRIVATE KEY-----\nabc\n-----END OPENSSH PRIVATE KEY-----\n")
    rc, out, err = run(*render_args(tmp_path, str(key)))
    assert_one_error(rc, out, err, "SSH_KEY_PRIVATE", f"--ssh-key {key}.pub")


def test_key_file_is_read(run, tmp_path, ssh_key_file, ssh_key):
    rc, _, err = run(*render_args(tmp_path, ssh_key_file))
    assert rc == 0, err
    assert ssh_key in (tmp_path / "out" / "main.parameters.json").read_text()


# ------------------------------------------------------------------------------ cluster files


def cluster_file_case(tmp_path, ssh_key, path):
    return ["render", "-f", path, "-n", "demo", "--ssh-key", ssh_key, "--out-dir", tmp_path / "out"]


def test_missing_cluster_file(run, tmp_path, ssh_key):
    rc, out, err = run(*cluster_file_case(tmp_path, ssh_key, tmp_path / "nope.toml"))
    assert_one_error(rc, out, err, "CLUSTER_FILE_NOT_FOUND", "check the path given to -f/--file")
    assert not (tmp_path / "out").exists()


def test_cluster_file_that_is_a_directory(run, tmp_path, ssh_key):
    rc, out, err = run(*cluster_file_case(tmp_path, ssh_key, tmp_path))
    assert_one_error(rc, out, err, "CLUSTER_FILE_UNREADABLE", "pass the path of a .toml file to -f/--file")
    assert not (tmp_path / "out").exists()


def test_cluster_file_with_invalid_toml(run, tmp_path, ssh_key):
    path = tmp_path / "bad.toml"
    path.write_text('profile = "nd-a100-v4\nnodes = 4\n')
    rc, out, err = run(*cluster_file_case(tmp_path, ssh_key, path))
    assert_one_error(rc, out, err, "CLUSTER_FILE_INVALID", "fix the TOML syntax")
    assert not (tmp_path / "out").exists()


def test_cluster_file_with_unknown_key_suggests_the_flag(run, tmp_path, ssh_key):
    path = tmp_path / "typo.toml"
    path.write_text('profile = "nd-a100-v4"\nnods = 4\n')
    rc, out, err = run(*cluster_file_case(tmp_path, ssh_key, path))
    assert_one_error(rc, out, err, "UNKNOWN_KEY", "did you mean 'nodes'?")
    assert f"unknown key 'nods' in {path}" in err
    assert not (tmp_path / "out").exists()


def test_cluster_file_with_nested_table(run, tmp_path, ssh_key):
    path = tmp_path / "nested.toml"
    path.write_text('profile = "nd-a100-v4"\n[network]\nvnet-address-prefix = "10.1.0.0/16"\n')
    rc, out, err = run(*cluster_file_case(tmp_path, ssh_key, path))
    assert_one_error(rc, out, err, "CLUSTER_FILE_INVALID", "write keys at the top level")
    assert "['network']" in err


def test_cluster_file_with_wrong_value_type(run, tmp_path, ssh_key):
    path = tmp_path / "types.toml"
    path.write_text('profile = "nd-a100-v4"\nlocation = 42\n')
    rc, out, err = run(*cluster_file_case(tmp_path, ssh_key, path))
    assert_one_error(rc, out, err, "INVALID_LOCATION", "quote the value")


def test_cluster_file_values_are_used_and_flags_override_them(run, tmp_path, ssh_key):
    path = tmp_path / "cluster.toml"
    path.write_text('profile = "nd-h100-v5"\nnodes = 4\nlocation = "westus2"\n[tags]\nteam = "ml"\n')
    rc, out, err = run("plan", "-f", path, "-n", "demo", "--ssh-key", ssh_key, "--nodes", "6", "--tag", "env=dev",
                       "--query", "[profile, nodes, location]", "-o", "tsv")
    assert rc == 0, err
    assert out.split() == ["nd-h100-v5", "6", "westus2"]


# ------------------------------------------------------------------------------ all at once, --debug


def test_every_error_is_reported_at_once(run, tmp_path, ssh_key):
    rc, out, err = run(*render_args(tmp_path, ssh_key, "--nodes", "0", "-l", "mars", "--vnet-address-prefix", "foo"))
    assert rc == 2
    errors = [line for line in err.splitlines() if line.startswith("ERROR: ")]
    assert [e.split("]")[0] for e in errors] == ["ERROR: [INVALID_NODES", "ERROR: [INVALID_LOCATION",
                                                 "ERROR: [INVALID_CIDR"]
    assert err.count("  remedy: ") >= 3
    assert not (tmp_path / "out").exists()


def test_errors_and_warnings_come_together(run, tmp_path, ssh_key):
    rc, _, err = run(*render_args(tmp_path, ssh_key, "--image", "ubuntu-2204-gen1", "--public-ip"))
    assert rc == 2
    assert "ERROR: [IMAGE_GENERATION]" in err
    assert "WARNING: [PUBLIC_IP_WITHOUT_SSH_RULE]" in err


def test_debug_raises_instead_of_hiding_the_traceback(run, tmp_path, ssh_key):
    with pytest.raises(ValidationFailed) as info:
        run(*render_args(tmp_path, ssh_key, "--nodes", "0", "--debug"))
    assert info.value.code == "INVALID_NODES"


def test_debug_prints_a_traceback_from_the_command_line(tmp_path, ssh_key):
    code = "import sys; from azgpu.cli import main; sys.exit(main(sys.argv[1:]))"
    argv = [str(a) for a in render_args(tmp_path, ssh_key, "--nodes", "0")]
    quiet = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, cwd=tmp_path)
    loud = subprocess.run([sys.executable, "-c", code, *argv, "--debug"], capture_output=True, text=True, cwd=tmp_path)
    assert quiet.returncode == 2 and "Traceback" not in quiet.stderr
    assert "Traceback" in loud.stderr and "ValidationFailed" in loud.stderr


def test_no_arguments_shows_help(run):
    rc, out, err = run()
    assert rc == 0
    assert "Usage: provision" in out and "render" in out
    assert "Traceback" not in err


def test_unknown_command_is_a_usage_error(run):
    rc, out, err = run("deploy-everything")
    assert rc == 2
    assert err.startswith("ERROR: [USAGE] No such command 'deploy-everything'")


def test_out_dir_that_is_a_file(run, tmp_path, ssh_key):
    target = tmp_path / "file"
    target.write_text("")
    rc, out, err = run("render", *GOOD, "--ssh-key", ssh_key, "--out-dir", target)
    assert_one_error(rc, out, err, "INVALID_OUT_DIR", "pass a directory path")


# ------------------------------------------------------------------------------ the happy path


def test_render_writes_four_files_and_reports_them(run, tmp_path, ssh_key):
    rc, out, err = run(*render_args(tmp_path, ssh_key, "--nodes", "250", "--query", "files[].name", "-o", "tsv"))
    assert rc == 0, err
    assert out.split() == ["main.json", "main.parameters.json", "main.bicep", "main.bicepparam"]
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == sorted(out.split())
    assert "WARNING: [IB_DOMAIN_SPLIT]" in err


@pytest.mark.parametrize("fmt, files", [("arm", ["main.json", "main.parameters.json"]),
                                        ("bicep", ["main.bicep", "main.bicepparam"])])
def test_render_one_format(run, tmp_path, ssh_key, fmt, files):
    rc, _, err = run(*render_args(tmp_path, ssh_key, "--format", fmt))
    assert rc == 0, err
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == sorted(files)


def test_notes_only_with_verbose(run, tmp_path, ssh_key):
    args = ["validate", "--profile", "nd", "--size", "ND6", "-n", "demo", "--ssh-key", ssh_key]
    _, _, quiet = run(*args)
    _, _, verbose = run(*args, "--verbose")
    assert "ACCELERATED_NETWORKING_OFF" not in quiet
    assert "NOTE: [ACCELERATED_NETWORKING_OFF]" in verbose


@pytest.mark.parametrize("fmt", ["json", "table", "yaml", "tsv", "none"])
def test_every_output_format_prints_results_on_stdout(run, ssh_key, fmt):
    rc, out, err = run("validate", *GOOD, "--ssh-key", ssh_key, "-o", fmt)
    assert rc == 0, err
    assert (out == "") == (fmt == "none")
    assert err == ""
