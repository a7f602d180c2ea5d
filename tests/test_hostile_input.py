"""Hostile and malformed input, from flags, cluster files, key files, state files and output paths:
exit 2 (3 for what does not exist, 1 for an operation that failed), one `ERROR: [CODE]` line with a
remedy, no traceback, nothing written, and no key material or control character echoed back."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJOgAYClhajeh3m7rJp5Bf+XHzOywcIepjITM9B6OJMg azgpu-test"
PRIVATE = ("-----BEGIN OPENSSH PRIVATE KEY-----\n"
           "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\n"
           "QyNTUxOQAAACDSECRETSECRETSECRETSECRETSECRETSECRETSECRETAAAA\n"
           "-----END OPENSSH PRIVATE KEY-----\n")
SECRET = "SECRETSECRET"  # a piece of the private key above that must never be printed

RENDER = ["render", "--profile", "nd-a100-v4", "-n", "demo", "-l", "eastus", "--ssh-key", KEY, "--out-dir", "{out}"]
SIM = ["--simulate", "--simulate-latency", "0", "--simulate-state", "{state}"]
CREATE = ["create", "--profile", "ndv2", "-n", "demo", "-g", "rg", "-l", "eastus", "--nodes", "1", "--ssh-key", KEY,
          *SIM]
CLUSTER = ["-n", "demo", "-g", "rg", *SIM]


def files(tmp: Path) -> dict[str, str]:
    """Hostile files, by the placeholder the corpus uses for their path."""
    made = {}

    def write(name: str, content: bytes) -> None:
        (tmp / name).write_bytes(content)
        made[name.replace(".", "_")] = str(tmp / name)

    write("binary.pub", bytes(range(256)) * 4)
    write("latin1.pub", "ssh-ed25519 AAAA caf\xe9".encode("latin-1"))
    write("big.pub", b"ssh-ed25519 " + b"A" * (70 * 1024))
    write("id_ed25519", PRIVATE.encode())
    write("putty.ppk",
          b"PuTTY-User-Key-File-3: ssh-ed25519\nEncryption: none\nPrivate-Lines: 1\nAAAA" + SECRET.encode())
    write("control.pub", (KEY + " \x1b[2J").encode())
    write("empty.pub", b"")
    write("tags5.toml", b'profile = "ndv2"\ntags = 5\n')
    write("inline.toml", b'profile = "ndv2"\n[tags]\nteam = { name = "ml" }\n')
    write("price.toml", b'profile = "ndv2"\nspot = true\nmax-price = true\n')
    write("float_nodes.toml", b'profile = "ndv2"\nnodes = 1.5\n')
    write("binary.toml", bytes(range(256)))
    write("deep.toml", b"x = " + b"[" * 5000 + b"]" * 5000 + b"\n")  # 10 KB: tomllib recursed until RecursionError
    write("private.toml", f'profile = "ndv2"\nssh-key = """{PRIVATE}"""\n'.encode())
    write("state_garbage.json", b"\x00garbage")
    write("file", b"")
    if hasattr(os, "mkfifo"):
        os.mkfifo(tmp / "fifo")
        made["fifo"] = str(tmp / "fifo")
    (tmp / "outdir").mkdir()
    (tmp / "outdir" / "main.bicep").mkdir()
    made["outdir_with_dir"] = str(tmp / "outdir")
    made["dir"] = str(tmp)
    return made


# id: (argv, exit code, ERROR code). Placeholders: {out} (an output directory that must stay
# absent), {state} (a state file that must stay absent), and the files above.
CORPUS = {
    # ARM/Bicep injection and Azure's tag rules
    "tag name 513 characters": ([*RENDER, "--tag", "k" * 513 + "=v"], 2, "INVALID_TAG"),
    "tag name with a slash": ([*RENDER, "--tag", "a/b=c"], 2, "INVALID_TAG"),
    "tag name with a newline": ([*RENDER, "--tag", "a\nb=c"], 2, "INVALID_TAG"),
    "tag value with an escape sequence": ([*RENDER, "--tag", "team=\x1b[31mred"], 2, "INVALID_TAG"),
    "tag value not UTF-8": ([*RENDER, "--tag", "team=\udcff"], 2, "INVALID_TAG"),
    "tag without a name": ([*RENDER, "--tag", "=x"], 2, "INVALID_TAG"),
    "48 tags": ([*RENDER, *[a for i in range(48) for a in ("--tag", f"t{i}=v")]], 2, "TOO_MANY_TAGS"),
    "tags differing in case": ([*RENDER, "--tag", "Team=a", "--tag", "team=b"], 2, "DUPLICATE_TAG"),
    "azgpu's own tag": ([*RENDER, "--tag", "Managed-By=me"], 2, "RESERVED_TAG"),
    # SSH keys
    "binary key file": ([*RENDER, "--ssh-key", "{binary_pub}"], 2, "INVALID_SSH_KEY"),
    "key file not UTF-8": ([*RENDER, "--ssh-key", "{latin1_pub}"], 2, "INVALID_SSH_KEY"),
    "huge key file": ([*RENDER, "--ssh-key", "{big_pub}"], 2, "INVALID_SSH_KEY"),
    "/dev/zero as key": ([*RENDER, "--ssh-key", "/dev/zero"], 2, "SSH_KEY_UNREADABLE"),
    "FIFO as key": ([*RENDER, "--ssh-key", "{fifo}"], 2, "SSH_KEY_UNREADABLE"),
    "directory as key": ([*RENDER, "--ssh-key", "{dir}"], 2, "SSH_KEY_UNREADABLE"),
    "empty key file": ([*RENDER, "--ssh-key", "{empty_pub}"], 2, "INVALID_SSH_KEY"),
    "key comment with an escape sequence": ([*RENDER, "--ssh-key", "{control_pub}"], 2, "INVALID_SSH_KEY"),
    "private key as the value": ([*RENDER, "--ssh-key", PRIVATE], 2, "SSH_KEY_PRIVATE"),
    "private key file": ([*RENDER, "--ssh-key", "{id_ed25519}"], 2, "SSH_KEY_PRIVATE"),
    "PuTTY private key file": ([*RENDER, "--ssh-key", "{putty_ppk}"], 2, "SSH_KEY_PRIVATE"),
    "private key in a cluster file": (["render", "-f", "{private_toml}", "-n", "demo", "--out-dir", "{out}"], 2,
                                      "SSH_KEY_PRIVATE"),
    # cluster files
    "tags = 5": (["render", "-f", "{tags5_toml}", "-n", "demo", "--ssh-key", KEY, "--out-dir", "{out}"], 2,
                 "INVALID_TAG"),
    "inline table as a tag value": (["render", "-f", "{inline_toml}", "-n", "demo", "--ssh-key", KEY, "--out-dir",
                                     "{out}"], 2, "INVALID_TAG"),
    "max-price = true": (["render", "-f", "{price_toml}", "-n", "demo", "--ssh-key", KEY, "--out-dir", "{out}"], 2,
                         "INVALID_MAX_PRICE"),
    "nodes = 1.5": (["render", "-f", "{float_nodes_toml}", "-n", "demo", "--ssh-key", KEY, "--out-dir", "{out}"], 2,
                    "INVALID_NODES"),
    "binary cluster file": (["render", "-f", "{binary_toml}", "--out-dir", "{out}"], 2, "CLUSTER_FILE_INVALID"),
    "cluster file nested 5,000 arrays deep": (["render", "-f", "{deep_toml}", "--out-dir", "{out}"], 2,
                                              "CLUSTER_FILE_INVALID"),
    "/dev/zero as cluster file": (["render", "-f", "/dev/zero", "--out-dir", "{out}"], 2, "CLUSTER_FILE_UNREADABLE"),
    "FIFO as cluster file": (["render", "-f", "{fifo}", "--out-dir", "{out}"], 2, "CLUSTER_FILE_UNREADABLE"),
    # names: full matches, no trailing newline, no path separators
    "group with a trailing newline": ([*CREATE, "-g", "rg\n"], 2, "INVALID_RESOURCE_GROUP"),
    "name with a trailing newline": ([*CREATE, "-n", "demo\n"], 2, "INVALID_NAME"),
    "name with a right-to-left override": ([*CREATE, "-n", "demo\u202e"], 2, "INVALID_NAME"),
    "admin user with a trailing newline": ([*RENDER, "--admin-username", "azureuser\n"], 2, "INVALID_ADMIN_USERNAME"),
    "location with a trailing newline": ([*RENDER, "-l", "eastus\n"], 2, "INVALID_LOCATION"),
    "zone with a trailing newline": ([*RENDER, "--zone", "1\n"], 2, "INVALID_ZONE"),
    "group with a slash on create": ([*CREATE, "-g", "bad/rg"], 2, "INVALID_RESOURCE_GROUP"),
    "group with a slash on status": (["status", *CLUSTER, "-g", "bad/rg"], 2, "INVALID_RESOURCE_GROUP"),
    "group with a slash on outputs": (["outputs", *CLUSTER, "-g", "bad/rg"], 2, "INVALID_RESOURCE_GROUP"),
    "group with a slash on wait": (["wait", *CLUSTER, "-g", "bad/rg"], 2, "INVALID_RESOURCE_GROUP"),
    "group with a slash on destroy": (["destroy", *CLUSTER, "-g", "../rg", "--yes"], 2, "INVALID_RESOURCE_GROUP"),
    "name with a path on status": (["status", *CLUSTER, "-n", "../other"], 2, "INVALID_NAME"),
    "subnet ID with a quote": ([*RENDER, "--subnet-id",
                                "/subscriptions/0/resourceGroups/rg/providers/Microsoft.Network/"
                                "virtualNetworks/v'/subnets/s"], 2, "INVALID_SUBNET_ID"),
    "subnet ID with a space": ([*RENDER, "--subnet-id", "/subscriptions/0/resourceGroups/my rg/providers/"
                                "Microsoft.Network/virtualNetworks/v/subnets/s"], 2, "INVALID_SUBNET_ID"),
    "subnet ID with brackets": ([*RENDER, "--subnet-id", "/subscriptions/[x]/resourceGroups/rg/providers/"
                                 "Microsoft.Network/virtualNetworks/v/subnets/s"], 2, "INVALID_SUBNET_ID"),
    "subnet ID with a newline": ([*RENDER, "--subnet-id", "/subscriptions/0/resourceGroups/rg/providers/"
                                  "Microsoft.Network/virtualNetworks/v/subnets/s\n"], 2, "INVALID_SUBNET_ID"),
    # numbers
    "nodes 1_000": ([*RENDER, "--nodes", "1_000"], 2, "INVALID_NODES"),
    "nodes in Arabic-Indic digits": ([*RENDER, "--nodes", "\u0661\u0662"], 2, "INVALID_NODES"),
    "nodes 4.0": ([*RENDER, "--nodes", "4.0"], 2, "INVALID_NODES"),
    "nodes empty": ([*RENDER, "--nodes", ""], 2, "INVALID_NODES"),
    "nodes with 5000 digits": ([*RENDER, "--nodes", "9" * 5000], 2, "INVALID_NODES"),
    "max price 1_0": ([*RENDER, "--spot", "--max-price", "1_0"], 2, "INVALID_MAX_PRICE"),
    "max price inf": ([*RENDER, "--spot", "--max-price", "inf"], 2, "INVALID_MAX_PRICE"),
    "OS disk 0x10": ([*RENDER, "--os-disk-size-gb", "0x10"], 2, "INVALID_OS_DISK_SIZE_GB"),
    "timeout 0": ([*CREATE, "--timeout", "0"], 2, "INVALID_TIMEOUT"),
    "timeout -1": ([*CREATE, "--timeout", "-1"], 2, "INVALID_TIMEOUT"),
    "timeout nan": ([*CREATE, "--timeout", "nan"], 2, "INVALID_TIMEOUT"),
    "wait timeout -5": (["wait", *CLUSTER, "--timeout", "-5"], 2, "INVALID_TIMEOUT"),
    "zones 7": ([*CREATE, "--zones", "7"], 2, "INVALID_ZONES"),
    "fallback location mars": ([*CREATE, "--fallback-locations", "mars"], 2, "INVALID_FALLBACK_LOCATIONS"),
    "latency -5": ([*CREATE, "--simulate-latency", "-5"], 2, "INVALID_SIMULATE_LATENCY"),
    "latency nan on status": (["status", *CLUSTER, "--simulate-latency", "nan"], 2, "INVALID_SIMULATE_LATENCY"),
    "latency inf on destroy": (["destroy", *CLUSTER, "--simulate-latency", "inf", "--yes"], 2,
                               "INVALID_SIMULATE_LATENCY"),
    # output paths
    "empty out-dir": ([*RENDER, "--out-dir", ""], 2, "INVALID_OUT_DIR"),
    "out-dir is a file": ([*RENDER, "--out-dir", "{file}"], 2, "INVALID_OUT_DIR"),
    "out-dir holds a directory main.bicep": ([*RENDER, "--out-dir", "{outdir_with_dir}"], 2, "INVALID_OUT_DIR"),
    # simulated state
    "garbage state file": (["status", "-n", "demo", "-g", "rg", "--simulate", "--simulate-latency", "0",
                            "--simulate-state", "{state_garbage_json}"], 2, "SIMULATE_STATE_INVALID"),
    "state file is a directory": (["status", "-n", "demo", "-g", "rg", "--simulate", "--simulate-latency", "0",
                                   "--simulate-state", "{dir}"], 2, "SIMULATE_STATE_INVALID"),
    "/dev/zero as state file": (["status", "-n", "demo", "-g", "rg", "--simulate", "--simulate-latency", "0",
                                 "--simulate-state", "/dev/zero"], 2, "SIMULATE_STATE_INVALID"),
    "FIFO as state file": (["status", "-n", "demo", "-g", "rg", "--simulate", "--simulate-latency", "0",
                            "--simulate-state", "{fifo}"], 2, "SIMULATE_STATE_INVALID"),
    # Azure: the subscription goes into every request path
    "subscription with a path": (["status", "-n", "demo", "-g", "rg", "--subscription", "../other"], 2,
                                 "INVALID_SUBSCRIPTION"),
    "subscription by name": (["status", "-n", "demo", "-g", "rg", "--subscription", "My Subscription"], 2,
                             "INVALID_SUBSCRIPTION"),
    # NUL cannot come from a shell, but main(argv) takes it from Python
    "cluster file path with NUL": (["render", "-f", "a\0b", "--out-dir", "{out}"], 2, "CLUSTER_FILE_NOT_FOUND"),
    "out-dir with NUL": ([*RENDER, "--out-dir", "out\0"], 2, "INVALID_OUT_DIR"),
    "state file path with NUL": (["status", "-n", "demo", "-g", "rg", "--simulate", "--simulate-latency", "0",
                                  "--simulate-state", "s\0.json"], 2, "SIMULATE_STATE_INVALID"),
    "key path with NUL": ([*RENDER, "--ssh-key", "id\0.pub"], 2, "INVALID_SSH_KEY"),
    # what does not exist
    "status of no cluster": (["status", *CLUSTER], 3, "CLUSTER_NOT_FOUND"),
    # the command line itself
    "unknown output format": ([*RENDER, "-o", "xml"], 2, "USAGE"),
    "query that is not JMESPath": ([*RENDER, "--query", "[["], 2, "INVALID_QUERY"),
    "unknown command with a newline": (["deploy\nall"], 2, "USAGE"),
}


@pytest.fixture
def hostile(tmp_path):
    return {**files(tmp_path), "out": str(tmp_path / "out"), "state": str(tmp_path / "state.json")}


def fill(argv: list[str], paths: dict[str, str]) -> list[str]:
    out = []
    for arg in argv:
        for name, path in paths.items():
            arg = arg.replace("{" + name + "}", path)
        out.append(arg)
    return out


@pytest.mark.parametrize("argv, exit_code, code", CORPUS.values(), ids=CORPUS.keys())
def test_hostile_input_gets_one_error_line_and_no_traceback(run, hostile, argv, exit_code, code):
    if any("{fifo}" in a for a in argv) and "fifo" not in hostile:
        pytest.skip("no FIFOs on this platform")
    if "/dev/zero" in argv and not os.path.exists("/dev/zero"):
        pytest.skip("no /dev/zero on this platform")
    rc, out, err = run(*fill(argv, hostile))
    assert rc == exit_code, err
    assert "Traceback" not in err
    errors = [line for line in err.splitlines() if line.startswith("ERROR: ")]
    assert len(errors) == 1 and errors[0].startswith(f"ERROR: [{code}] "), err
    lines = err.splitlines()
    assert lines[lines.index(errors[0]) + 1].startswith("  remedy: "), err
    assert all(line.isprintable() for line in lines), [line for line in lines if not line.isprintable()]
    assert SECRET not in err and "b3BlbnNzaC1rZXktdjE" not in err  # no key material, ever
    assert out == ""
    assert not Path(hostile["out"]).exists() and not Path(hostile["state"]).exists()  # nothing written


# ------------------------------------------------------------------------------ key files


def test_fifo_as_key_file_does_not_block(run, tmp_path):
    """Opening a FIFO for reading blocks until a writer comes; azgpu must not wait for one."""
    if not hasattr(os, "mkfifo"):
        pytest.skip("no FIFOs on this platform")
    os.mkfifo(tmp_path / "key.pub")
    rc, _, err = run("validate", "--profile", "ndv2", "-n", "demo", "--ssh-key", tmp_path / "key.pub")
    assert rc == 2 and "is not a regular file" in err


def test_private_key_value_is_never_printed_whole_or_in_part(run):
    rc, out, err = run("validate", "--profile", "ndv2", "-n", "demo", "--ssh-key", PRIVATE)
    assert rc == 2
    assert "PRIVATE KEY" not in err and SECRET not in err and SECRET not in out
    assert "  remedy: pass the public key file, e.g. --ssh-key ~/.ssh/id_ed25519.pub" in err


@pytest.mark.parametrize("flag", ["--profile", "--image", "-n", "-g", "--size", "--tag"])
def test_a_private_key_pasted_into_any_flag_is_never_echoed(run, flag):
    # Found by the property test below: an unknown --profile echoed its value, key and all.
    rc, out, err = run("validate", "--profile", "ndv2", "-n", "demo", flag, PRIVATE)
    assert rc == 2, err
    assert SECRET not in err and SECRET not in out and "b3BlbnNzaC1rZXktdjE" not in err


def test_a_public_key_whose_comment_says_private_is_still_a_public_key(az):
    spec = az.spec(profile="ndv2", ssh_key=KEY + " (public half only; the private key was discarded)")
    assert spec.request.ssh_key.startswith("ssh-ed25519 ")


# ------------------------------------------------------------------------------ cluster files and flags


def test_file_tags_and_flag_tags_merge_with_flags_winning_per_name(tmp_path):
    cluster = tmp_path / "c.toml"
    cluster.write_text('profile = "ndv2"\nname = "demo"\n[tags]\nteam = "ml"\ncost-center = "4711"\n')
    from azgpu.cli.options import make_request

    request = make_request({"cluster_file": str(cluster), "tags": ("Team=research", "env=dev")})
    assert request.tags == {"cost-center": "4711", "Team": "research", "env": "dev"}


def test_tag_list_in_a_cluster_file_is_kept_with_flags(tmp_path):
    from azgpu.cli.options import make_request

    cluster = tmp_path / "c.toml"
    cluster.write_text('profile = "ndv2"\ntag = ["team=ml", "env=prod"]\n')
    assert make_request({"cluster_file": str(cluster), "tags": ("env=dev",)}).tags == {"team": "ml", "env": "dev"}


def test_zone_as_a_toml_number_is_zone_text(tmp_path, az):
    import azgpu

    cluster = tmp_path / "c.toml"
    cluster.write_text('profile = "nd-a100-v4"\nzone = 2\n')
    request = azgpu.build_request(azgpu.read_cluster_file(str(cluster)), name="demo", ssh_key=KEY)
    assert request.zone == "2" and not request.input_findings


@pytest.mark.parametrize("value", [True, 1.5, [1], {"a": 1}])
def test_text_keys_of_other_types_are_findings_not_coercions(az, value):
    f = az.only(az.errors(profile="ndv2", admin_username=value), "INVALID_ADMIN_USERNAME")
    assert f.remedy == "quote the value"


# ------------------------------------------------------------------------------ zones, locations, numbers


def test_every_bad_zone_and_location_is_reported_with_the_request_errors(run, tmp_path):
    rc, _, err = run("create", "--profile", "ndv2", "-n", "demo", "-g", "rg", "-l", "eastus", "--nodes", "0",
                     "--ssh-key", KEY, "--zones", "7", "x", "--fallback-locations", "mars", "westus2",
                     "--timeout", "-1", "--simulate", "--simulate-latency", "0", "--simulate-state",
                     tmp_path / "s.json")
    assert rc == 2
    codes = [line.split("]")[0][8:] for line in err.splitlines() if line.startswith("ERROR: ")]
    assert codes == ["INVALID_NODES", "INVALID_ZONES", "INVALID_ZONES", "INVALID_FALLBACK_LOCATIONS", "INVALID_TIMEOUT"]
    assert not (tmp_path / "s.json").exists()


def test_help_shows_number_types(run):
    rc, out, _ = run("create", "--help")
    assert rc == 0
    for flag, kind in [("--nodes", "INTEGER"), ("--max-price", "FLOAT"), ("--os-disk-size-gb", "INTEGER"),
                       ("--data-disks", "INTEGER"), ("--max-ib-domain", "INTEGER"), ("--timeout", "FLOAT")]:
        assert f"{flag} {kind}" in out, flag
    assert "TEXT" not in [w for line in out.splitlines() if "--nodes" in line for w in line.split()]


def test_bad_numbers_are_still_reported_all_at_once(run):
    rc, _, err = run("validate", "--profile", "ndv2", "-n", "demo", "--ssh-key", KEY, "--nodes", "x",
                     "--os-disk-size-gb", "y", "--max-price", "z", "--spot")
    assert rc == 2
    assert [line.split("]")[0][8:] for line in err.splitlines() if line.startswith("ERROR: ")] == [
        "INVALID_NODES", "INVALID_OS_DISK_SIZE_GB", "INVALID_MAX_PRICE"]


def test_messages_show_a_newline_in_a_value_escaped_on_one_line(run):
    rc, _, err = run("validate", "--profile", "ndv2", "-n", "demo", "--ssh-key", KEY, "-g", "rg\nERROR: [FAKE] x")
    assert rc == 2
    assert [line for line in err.splitlines() if line.startswith("ERROR: ")] == [
        "ERROR: [INVALID_RESOURCE_GROUP] resource group name 'rg\\nERROR: [FAKE] x' is not allowed: letters, digits, "
        "underscores, hyphens, periods and parentheses, not ending in a period"]


# ------------------------------------------------------------------------------ --out-dir


def render_to(run, out_dir, *extra):
    return run("render", "--profile", "ndv2", "-n", "demo", "--ssh-key", KEY, "--out-dir", out_dir, "-o", "none",
               *extra)


def test_symlinked_target_is_replaced_not_followed(run, tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    out = tmp_path / "out"
    out.mkdir()
    (out / "main.json").symlink_to(victim)
    rc, _, err = render_to(run, out)
    assert rc == 0, err
    assert victim.read_text() == "precious"
    assert not (out / "main.json").is_symlink() and json.loads((out / "main.json").read_text())["resources"]


def test_a_failure_partway_leaves_the_earlier_files_as_they_were(run, tmp_path, monkeypatch):
    out = tmp_path / "out"
    out.mkdir()
    (out / "main.json").write_text("old")
    real_open = open

    def failing_open(path, *args, **kwargs):
        if str(path).endswith("main.bicep"):
            raise OSError(28, "No space left on device")
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr("builtins.open", failing_open)
    rc, _, err = render_to(run, out)
    monkeypatch.undo()
    assert rc == 2 and "ERROR: [INVALID_OUT_DIR] cannot write to" in err and "No space left on device" in err
    assert sorted(p.name for p in out.iterdir()) == ["main.json"]  # no temporary directory left
    assert (out / "main.json").read_text() == "old"


def test_a_failure_leaves_no_directory_it_created(run, tmp_path, monkeypatch):
    real_mkdir = Path.mkdir

    def failing_staging(self, *args, **kwargs):  # the out-dir's parents are made; its staging directory is not
        if self.name.startswith(".azgpu-render-"):
            raise OSError(13, "Permission denied")
        return real_mkdir(self, *args, **kwargs)

    monkeypatch.setattr(Path, "mkdir", failing_staging)
    rc, _, err = render_to(run, tmp_path / "a" / "b")
    assert rc == 2 and "Permission denied" in err
    assert not (tmp_path / "a").exists()


def test_out_dir_that_is_a_symlink_to_a_directory_is_used(run, tmp_path):
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real", target_is_directory=True)
    rc, _, err = render_to(run, tmp_path / "link")
    assert rc == 0, err
    assert sorted(p.name for p in (tmp_path / "real").iterdir()) == [
        "main.bicep", "main.bicepparam", "main.json", "main.parameters.json"]


def test_written_files_are_regular_files(run, tmp_path):
    rc, _, _ = render_to(run, tmp_path / "out")
    assert rc == 0
    assert all(stat.S_ISREG(p.lstat().st_mode) for p in (tmp_path / "out").iterdir())


# ------------------------------------------------------------------------------ any argument list

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

VALUES = ["", " ", "\n", "x", "-1", "0", "1", "3", "1e9", "nan", "inf", "1_0", "\u0661", "[x]", "'", "${x}", "a=b", "=",
          "/", "../x", "\x1b[2J", "\udcff", "\x00", "eastus", "ndv2", "demo", "rg", KEY, "/dev/null", "10.0.0.0/8", "*",
          "TrustedLaunch", "ubuntu-hpc-2204", "a:b:c:d", "9" * 40, PRIVATE]
FLAGS = ["--profile", "--size", "--nodes", "-l", "-g", "-n", "--image", "--admin-username", "--ssh-key",
         "--os-disk-size-gb", "--data-disks", "--max-price", "--zone", "--vnet-address-prefix", "--subnet-id",
         "--ssh-source", "--security-type", "--max-ib-domain", "--tag", "-f", "--query", "-o", "--format", "--timeout",
         "--zones", "--fallback-locations", "--simulate-latency", "--subscription"]
COMMANDS = [["validate"], ["plan"], ["render", "--out-dir", "out"], ["create", *SIM], ["status", *SIM],
            ["outputs", *SIM],
            ["destroy", "--yes", *SIM], ["wait", *SIM], ["profiles", "show"], ["images", "list"]]


@settings(max_examples=120, deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(command=st.sampled_from(COMMANDS), base=st.booleans(),
       pairs=st.lists(st.tuples(st.sampled_from(FLAGS), st.one_of(st.sampled_from(VALUES), st.text(max_size=8))),
                      max_size=4))
def test_no_argument_list_gives_a_traceback(run, tmp_path, command, base, pairs):
    argv = [a.replace("{state}", str(tmp_path / "state.json")) for a in command]
    if base:
        argv += ["--profile", "ndv2", "-n", "demo", "-g", "rg", "-l", "eastus", "--ssh-key", KEY, "--simulate-latency",
                 "0"]
    argv += [a for pair in pairs for a in pair]
    rc, out, err = run(*argv)  # an exception out of main() fails the test with its traceback
    assert rc in (0, 1, 2, 3), (rc, err)
    assert "Traceback" not in err and all(line.isprintable() for line in err.splitlines()), err
    assert SECRET not in err + out
