"""Every command's `-o table` fits a terminal: no line wider than 120 columns at the default width
(a pipe, as here), and never JSON in a cell (`-o json` has everything)."""

from __future__ import annotations

import re
from pathlib import Path

import click

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
