"""Every command's `-o table` fits a terminal: no line wider than 120 columns at the default width
(a pipe, as here), and never JSON in a cell (`-o json` has everything)."""

from __future__ import annotations

import re
from pathlib import Path

import click
import pytest

from azgpu import output

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJOgAYClhajeh3m7rJp5Bf+XHzOywcIepjITM9B6OJMg azgpu-test"
SIM = ("--simulate", "--simulate-latency", "0")
H100 = ("-n", "wide01", "-g", "wide-rg")
GB = ("-n", "rack01", "-g", "gb-rg")
A100 = "Standard_ND96asr_v4"
# The Slurm programs report to slurmctld through scontrol: a stand-in that accepts every call (the
# test writes both files into its working directory; tests/slurm checks what reaches scontrol).
SLURM = ("-f", "slurm.toml", "--scontrol", "./scontrol", *SIM)

# Every command with -o, in an order that makes each one's table non-trivial: a cluster exists, a
# node is broken, a report is filed. (argv, exit status)
SESSION: list[tuple[tuple[str, ...], int]] = [
    (("profiles", "list"), 0),
    (("profiles", "show", "nd"), 0),
    (("profiles", "show", "nd-gb300-v6"), 0),
    (("images", "list"), 0),
    (("images", "list", "--profile", "ndv2"), 0),
    (("validate", "--profile", "ndv2", "-n", "v1", "-l", "eastus", "--ssh-key", KEY, "--image", "ubuntu-hpc-1804",
      "--nodes", "400"), 0),
    (("plan", "--profile", "nd-h100-v5", "-n", "p1", "-l", "eastus", "--nodes", "250", "--ssh-key", KEY), 0),
    (("render", "--profile", "nd-a100-v4", "-n", "r1", "-l", "eastus", "--ssh-key", KEY, "--out-dir", "out"), 0),
    (("simulate", "fault", "--next", "1", "--gpus", "7"), 0),
    (("create", "--profile", "nd-h100-v5", *H100, "-l", "eastus", "--nodes", "16", "--ssh-key", KEY, *SIM,
      "--check", "--replace-unhealthy", "--yes"), 0),
    (("create", "--profile", "nd-h100-v5", *H100, "-l", "eastus", "--nodes", "8", "--ssh-key", KEY, *SIM,
      "--what-if"), 0),
    (("create", "--profile", "nd-h100-v5", *H100, "-l", "eastus", "--nodes", "16", "--ssh-key", KEY, *SIM,
      "--dry-run"), 0),
    (("create", "--profile", "nd-gb300-v6", *GB, "-l", "westus3", "--nodes", "18", "--ssh-key", KEY, *SIM), 0),
    (("wait", *H100, *SIM), 0),
    (("status", *H100, *SIM), 0),
    (("list", *SIM), 0),
    (("outputs", *H100, *SIM), 0),
    (("outputs", *GB, *SIM), 0),
    (("outputs", *H100, *SIM, "--format", "slurm", "--out-dir", "slurm"), 0),
    (("simulate", "fault", "-n", "wide01", "--instance", "wide01-000-000003", "--ib-down", "mlx5_ib3"), 0),
    (("simulate", "fabric", "--scale-set", "wide01-vmss000", "--factor", "0.5"), 0),
    (("check", *H100, *SIM, "--nccl"), 1),
    (("simulate", "rack", "-n", "rack01", "--fabric-incomplete", "rack01-000-000002"), 0),
    (("check", *GB, *SIM), 1),
    (("report", *H100, *SIM, "--yes"), 0),
    (("certify", *H100, *SIM, "--level", "quick"), 1),
    (("certify", "--dry-run", "--size", "Standard_ND96isr_H100_v5", "--nodes", "64"), 0),
    (("reports", "-g", "wide-rg", *SIM), 0),
    (("simulate", "quota", "list", "-l", "eastus"), 0),
    (("simulate", "quota", "set", "-l", "eastus", "--name", "cores", "--limit", "60000"), 0),
    (("simulate", "sku", "restrict", "-l", "eastus", "--size", "Standard_ND96asr_v4", "--zone", "1"), 0),
    (("simulate", "sku", "unrestrict", "-l", "eastus", "--size", "Standard_ND96asr_v4"), 0),
    (("simulate", "capacity", "set", "-l", "westus2", "--size", "Standard_ND96asr_v4", "--max-vms", "0"), 0),
    (("simulate", "sku", "capability", "-l", "eastus", "--size", A100, "--name", "CapacityReservationSupported",
      "--value", "True"), 0),
    (("reserve", "-g", "crg-rg", "--group", "gpus", "-l", "eastus", "--profile", "nd-a100-v4", "--count", "2", "--yes",
      *SIM), 0),
    (("release", "-g", "crg-rg", "--group", "gpus", "--yes", *SIM), 0),
    (("simulate", "quota", "set", "-l", "eastus", "--name", "standardNDASv4_A100Family", "--limit", "96"), 0),
    (("capacity", "--profile", "nd-a100-v4", "--nodes", "2", "-l", "eastus", "--zones", "1", "4",
      "--fallback-locations", "westus2", *SIM), 1),
    (("simulate", "quota", "outcome", "-l", "eastus", "--name", "standardNDASv4_A100Family", "--outcome", "escalate"),
     0),
    (("quota", "request", "--profile", "nd-a100-v4", "-n", "q1", "-g", "q-rg", "-l", "eastus", "--nodes", "2",
      "--ssh-key", KEY, "--yes", *SIM), 1),
    (("quota", "status", "-l", "eastus", *SIM), 0),
    (("simulate", "policy", "deny-size", "no-nd-a100", "--size", A100, "--display-name",
      "Allowed virtual machine size SKUs"), 0),
    (("slurm", "config", "-f", "slurm.toml", "--health-check", "--out-dir", "slurm-azgpu"), 0),
    (("slurm", "resume", *SLURM, "sl01-d000-[0001-0004]"), 0),
    (("slurm", "suspend", *SLURM, "sl01-d000-[0002,0004,0007]"), 0),
    (("slurm", "resume-fail", *SLURM, "sl01-d000-[0001,0003]"), 0),
    (("simulate", "ghr", "--provider-state", "Registered"), 0),
    (("simulate", "show",), 0),
    (("destroy", *GB, *SIM, "--yes"), 0),
    (("simulate", "reset", "--yes"), 0),
]
JSON_CELL = re.compile(r"[\[{]\s*\"\w+\"\s*:")


def leaf_commands(group: click.Group, ctx: click.Context, prefix: tuple[str, ...] = ()) -> set[tuple[str, ...]]:
    out = set()
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        if isinstance(command, click.Group):
            out |= leaf_commands(command, ctx, (*prefix, name))
        elif any("--output" in p.opts for p in command.params if isinstance(p, click.Option)):
            out.add((*prefix, name))
    return out


def command_of(argv: tuple[str, ...]) -> tuple[str, ...]:
    """The leading words of argv that name groups and then the command (the rest are its arguments)."""
    from azgpu.cli import cli

    ctx, command, path = click.Context(cli), cli, ()
    for word in argv:
        found = command.get_command(ctx, word) if isinstance(command, click.Group) else None
        if found is None:
            break
        command, path = found, (*path, word)
    return path


def test_the_session_covers_every_command():
    from azgpu.cli import cli

    ctx = click.Context(cli)
    every = leaf_commands(cli, ctx)
    covered = {command_of(argv) for argv, _ in SESSION}
    assert every - covered == set(), f"add these commands to SESSION: {sorted(every - covered)}"


def test_every_table_fits_120_columns(run, monkeypatch, tmp_path):
    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.setenv("AZGPU_SIMULATE_STATE", str(tmp_path / "simulate.json"))
    Path("slurm.toml").write_text('profile = "nd-h100-v5"\nnodes = 8\nname = "sl01"\nlocation = "eastus"\n'
                                  f'resource-group = "sl-rg"\nssh-key = "{KEY}"\n')
    Path("scontrol").write_text("#!/bin/sh\nexit 0\n")
    Path("scontrol").chmod(0o755)
    for argv, status in SESSION:
        rc, out, err = run(*argv, "-o", "table")
        assert rc == status, f"provision {' '.join(argv)} exited {rc}:\n{err}"
        assert out.strip() or argv[0] in ("simulate",) and argv[1] in ("reset",), f"{argv}: no table"
        wide = [line for line in out.splitlines() if len(line) > 120]
        assert not wide, f"provision {' '.join(argv)} -o table has lines of {max(map(len, wide))} columns:\n" + \
            "\n".join(wide[:5])
        assert not JSON_CELL.search(out), f"provision {' '.join(argv)} -o table holds JSON:\n{out[:2000]}"


def test_a_wide_table_wraps_then_leaves_columns_out():
    rows = [{"name": f"node{i}", "message": "a long message " * 12, **{f"c{j}": "x" * 14 for j in range(12)}}
            for i in range(3)]
    text = output._grid(rows, top=True, limit=100)
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 100
    note = " ".join(text[text.rindex("\n("):].split())
    assert "-o json shows everything" in note and "C11" in note
    # A narrower terminal gets the same rows wrapped, none lost.
    assert all(f"node{i}" in text for i in range(3))


def test_a_nested_object_is_a_section_not_json():
    text = output.to_table({"name": "c1", "outbound": {"type": "natGateway", "public_ip": "20.1.2.3"}})
    assert "Outbound" in text and "Public IP  20.1.2.3" in text and "{" not in text


def test_the_width_follows_the_terminal(monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    rows = [{"a": "word " * 30, "b": "x"}]
    assert max(len(line) for line in output._grid(rows, top=True).splitlines()) <= 80
    monkeypatch.delenv("COLUMNS")
    assert output.table_width() == output.DEFAULT_WIDTH  # not a terminal: 120


@pytest.mark.parametrize("columns, width", [("30", 40), ("1", 40), ("39", 40), ("40", 40), ("200", 200),
                                           ("0", 120), ("", 120), ("wide", 120),
                                           ("-5", 120), ("\u00b2", 120), (" 80 ", 80)])
def test_a_narrow_columns_in_a_pipe_is_laid_out_narrow_never_at_120(monkeypatch, columns, width):
    """COLUMNS is the width asked for, in a pipe too: below the narrowest azgpu lays out (40), the narrowest, not
    the 120 of a width nobody gave. 0, empty or not a number: not given (a pipe: 120)."""
    monkeypatch.setattr("sys.stdout.isatty", lambda: False)
    monkeypatch.setenv("COLUMNS", columns)
    assert output.table_width() == width


def test_profiles_list_at_30_columns_keeps_retired_within_40(run, monkeypatch):
    monkeypatch.setenv("COLUMNS", "30")
    rc, out, _ = run("profiles", "list", "-o", "table")
    lines = out.splitlines()
    assert rc == 0 and "Retired" in lines[0] and max(map(len, lines)) <= 40
    assert "2023-09-06" in next(line for line in lines if line.startswith("nd "))


# ------------------------------------------------------------------------------ a terminal of 80 x 24


@pytest.fixture
def fake_cli(run, monkeypatch):
    """`provision ...` in-process against one FakeAzure (no state file: 150 nodes stay quick), quota for them."""
    from contextlib import contextmanager

    from azgpu.cli import options
    from azgpu.deploy.session import Session
    from azgpu.testing import FakeAzure, FakeCredential

    with FakeAzure(quota_limits={"gpuFamily": 25000, "cores": 50000}) as azure:
        session = Session(azure.subscription_id, FakeCredential(), polling_interval=0, sleep=azure.sleep,
                          requests_session=azure.requests_session, clock=azure.now)

        @contextmanager
        def bound(*args, **kwargs):
            yield session

        monkeypatch.setattr(options, "session_for", bound)
        yield azure, run


def last_screen(out: str, err: str, lines: int = 24) -> list[str]:
    """What an 80 x 24 terminal shows last: the result on stdout, then the error lines printed after it."""
    tail = err[err.index("ERROR:"):] if "ERROR:" in err else ""
    return (out + tail).splitlines()[-lines:]


@pytest.mark.parametrize("nodes", [16, 150])
def test_the_last_screen_of_create_check_shows_the_verdict_and_counts(fake_cli, monkeypatch, nodes):
    azure, run = fake_cli
    monkeypatch.setenv("COLUMNS", "80")
    azure.unhealthy_next(1, gpus=7)
    rc, out, err = run("create", "--profile", "nd-h100-v5", "-n", "v1", "-g", "v-rg", "-l", "eastus", "--nodes",
                       str(nodes), "--ssh-key", KEY, "--check", "-o", "table")
    assert rc == 1 and "[UNHEALTHY_NODES]" in err
    screen = "\n".join(last_screen(out, err))
    assert "Healthy        false" in screen and f"Passed         {nodes - 1}" in screen and "Failed         1" in screen
    assert max(len(line) for line in out.splitlines()) <= 80
    # The failing node in full, what it measured and its fault code; past 20 nodes the others are counted.
    # (Any instance of any scale set: the next VM created may be in either of 150 nodes' two scale sets, whose
    # instances are created side by side.)
    assert re.search(r"v1-\d{3}-\d{6} .*failed .*check_gpu_count .*7 .*NHC2009", out), out
    rows = [line for line in out.splitlines() if line.startswith("v1-00")]
    assert len(rows) == (nodes if nodes <= 20 else 1)
    assert nodes <= 20 or f"+{nodes - 1} more" in out
    rc, out, err = run("check", "-n", "v1", "-g", "v-rg", "-o", "table", "--all-nodes")
    assert len([line for line in out.splitlines() if line.startswith("v1-00")]) == nodes


def test_check_at_80_columns_keeps_what_was_measured_and_leaves_empty_columns_out(fake_cli, monkeypatch):
    azure, run = fake_cli
    monkeypatch.setenv("COLUMNS", "80")
    assert run("create", "--profile", "nd-h100-v5", "-n", "v2", "-g", "v-rg", "-l", "eastus", "--nodes", "4",
               "--ssh-key", KEY, "-o", "none")[0] == 0
    rc, out, _ = run("check", "-n", "v2", "-g", "v-rg", "-o", "table")
    header = next(line for line in out.splitlines() if line.startswith("Node "))
    # Every node passed: the failure columns are empty and go before any column that says something.
    assert rc == 0 and "Expected" not in header and "Measured" not in header and "Physical host" in header
    azure.make_unhealthy("v2-vmss000/2", gpus=7)
    rc, out, _ = run("check", "-n", "v2", "-g", "v-rg", "-o", "table")
    header = next(line for line in out.splitlines() if line.startswith("Node "))
    assert rc == 1 and all(word in header for word in ("Status", "Measured", "Code"))


def test_profiles_list_at_80_columns_shows_retired(run, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    rc, out, _ = run("profiles", "list", "-o", "table")
    lines = out.splitlines()
    assert rc == 0 and "Retired" in lines[0] and max(map(len, lines)) <= 80
    assert "2023-09-06" in next(line for line in lines if line.startswith("nd "))  # the retired ND v1 says so


def test_list_in_a_pipe_keeps_state(fake_cli, monkeypatch):
    azure, run = fake_cli
    monkeypatch.delenv("COLUMNS", raising=False)  # a pipe: 120 columns
    group = "a-resource-group-with-a-long-name-" + "x" * 30
    assert run("create", "--profile", "nd-a100-v4", "-n", "a-cluster-with-a-long-name-" + "y" * 20, "-g", group, "-l",
               "eastus", "--nodes", "2", "--ssh-key", KEY, "-o", "none")[0] == 0
    rc, out, _ = run("list", "-o", "table")
    assert rc == 0 and "State" in out.splitlines()[0] and "Succeeded" in out


def test_a_long_list_in_a_cell_is_its_first_and_last_and_a_count():
    names = [f"g1-000-{i:06d}" for i in range(18)]
    text = output._grid([{"name": "g1-rack000", "scale_set": "g1-vmss000", "nodes": names, "basis": "measured",
                          **{f"c{j}": "x" * 12 for j in range(4)}}], top=True, limit=100)
    assert output._cell(names) == "g1-000-000000 … g1-000-000017 (18)"
    assert "g1-000-000017 (18)" in text and "g1-000-000009" not in text
    assert len(text.splitlines()) <= 5  # not 18 lines of one narrow column
    assert output.to_tsv([{"nodes": names}]).count("g1-000-") == 18  # tsv has every name


def test_empty_columns_go_first_then_the_others_before_the_ones_that_matter():
    rows = [{"node": "n1", "scale_set": "s" * 20, "status": "failed", "empty": "", "measured": "7", "code": "NHC2009",
             "physical_host": "h" * 20}]
    text = output._grid(rows, top=True, limit=50)
    header = text.splitlines()[0]
    assert all(word in header for word in ("Node", "Status", "Measured", "Code")) and "Empty" not in header
    assert "Physical host" in text.splitlines()[-1] or "Scale set" in " ".join(text.split())


def test_check_says_how_many_nodes_it_checks_before_the_first_answer(monkeypatch):
    from azgpu.cli import check

    said: list[str] = []
    monkeypatch.setattr(check, "log", said.append)
    progress = check.Progress({"verbose": True})  # as on a terminal: a line per node as it answers
    progress.start(16)
    assert said == ["checking 16 node(s)"]
