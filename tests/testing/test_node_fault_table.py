"""A node fault is one row of azgpu.testing.node_fault_table: the CLI's options, apply_fault, validate_fault and
docs/node-faults.md are built from it, and a row without its help or effect is refused."""

from __future__ import annotations

import dataclasses
import inspect
import json

import pytest
from click.testing import CliRunner

from azgpu.cli import cli
from azgpu.testing import node_fault_table
from azgpu.testing.node_fault_table import NODE_FAULTS, NodeFault, check_table


def _fault_command():
    return cli.get_command(None, "simulate").get_command(None, "fault")


def test_fault_cmd_takes_at_most_five_parameters():
    callback = _fault_command().callback
    while hasattr(callback, "__wrapped__"):
        callback = callback.__wrapped__
    assert callback.__name__ == "fault_cmd"
    assert len(inspect.signature(callback).parameters) <= 5


def test_every_row_is_an_option_of_simulate_fault_with_its_help():
    options = {p.name: p for p in _fault_command().params}
    for row in NODE_FAULTS:
        assert options[row.name].opts == [row.option]
        assert options[row.name].help == row.help
    # and nothing else breaks a node: the other options say which nodes, where, and how to print
    others = {"name", "instances", "next_count", "simulate_state", "output", "query", "verbose", "debug"}
    assert set(options) == {row.name for row in NODE_FAULTS} | others


@pytest.mark.parametrize("field", ["help", "effect"])
def test_a_row_missing_its_help_or_effect_is_refused(field):
    row = dataclasses.replace(NODE_FAULTS[0], name="new_fault", option="--new-fault", **{field: None})
    with pytest.raises(ValueError, match=f"new_fault: no {field}"):
        check_table((*NODE_FAULTS, row))
    blank = dataclasses.replace(row, **{field: "" if field == "help" else "not callable"})
    with pytest.raises(ValueError, match=f"new_fault: no {field}"):
        check_table((*NODE_FAULTS, blank))


def test_two_rows_of_one_option_are_refused():
    row = dataclasses.replace(NODE_FAULTS[1], name="other_down")
    with pytest.raises(ValueError, match="option '--ib-down' twice"):
        check_table((*NODE_FAULTS, row))


def test_the_table_as_shipped_is_whole():
    check_table()
    assert all(isinstance(row, NodeFault) and not row.problems() for row in NODE_FAULTS)


def test_a_new_row_is_an_option_applied_by_its_effect(monkeypatch):
    """What a row holds is what the CLI offers and apply_fault does: no second list to keep."""

    def effect(node, value, _fault):
        node["faults"].append(f"fan {value} stopped")

    row = NodeFault("fan", "--fan", "A fan stops.", effect, "int")
    monkeypatch.setattr(node_fault_table, "NODE_FAULTS", (*NODE_FAULTS, row))
    monkeypatch.setattr(node_fault_table, "BY_NAME", {**node_fault_table.BY_NAME, "fan": row})
    monkeypatch.setattr(node_fault_table, "FAULT_KEYS", (*node_fault_table.FAULT_KEYS, "fan"))
    node = {"faults": []}
    node_fault_table.apply_fault(node, **node_fault_table.validate_fault({"fan": 2}))
    assert node["faults"] == ["fan 2 stopped"]

    from azgpu.cli import simulate_faults

    command = simulate_faults.fault_options(lambda **kw: kw)
    assert "--fan" in [opt for p in command.__click_params__ for opt in p.opts]


def test_simulate_fault_help_lists_every_row():
    out = CliRunner().invoke(cli, ["simulate", "fault", "--help"], terminal_width=200).output
    for row in NODE_FAULTS:
        assert row.option in out


def test_the_docs_page_lists_every_row():
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
    try:
        import reference_docs
    finally:
        sys.path.pop(0)
    page = reference_docs.node_faults_page()
    for row in NODE_FAULTS:
        assert f"| `{row.option}` | `{row.name}` |" in page


# Values no node could show: ibstat prints no rate of 0 or below and none above the port's full rate; NVIDIA's Xid
# catalog numbers Xids from 1; a period that is not a number is a typo, not the default. Each is refused when the
# fault is named, also for the next instances (--next), where it used to fail Azure's side of `create` later.
REFUSED = [
    (["--ib-rate", "-5"], "ib_rate=-5"), (["--ib-rate", "0"], "ib_rate=0"),
    (["--xid", "-1"], "xid=-1"), (["--xid", "99999999999999999999"], "an Xid from 1"), (["--ecc", "-3"], "ecc=-3"),
    (["--ib-flapping", "mlx5_ib0:x"], "whole number of seconds"), (["--ib-flapping", "mlx5_ib0:2"], "3 to 86400"),
    (["--gpu-throttle", "0:x"], "whole number of seconds"), (["--gpu-throttle", "\u00b2"], "GPU an index"),
    (["--gpu-throttle", "0:0"], "1 to 86400"), (["--transient", "0"], "1 or more"), (["--gpus", "-1"], "gpus=-1"),
]


@pytest.fixture
def simulated(tmp_path, monkeypatch, run, ssh_key_file):
    monkeypatch.setenv("AZGPU_SIMULATE_STATE", str(tmp_path / "state.json"))

    def create(nodes: int, *more: str) -> int:
        return run("create", "--profile", "nd-h100-v5", "-n", "demo", "-g", "demo-rg", "-l", "eastus", "--nodes",
                   nodes, "--ssh-key", ssh_key_file, "--simulate", "--simulate-latency", "0", "-o", "none", *more)[0]
    assert create(1) == 0
    return create


@pytest.mark.parametrize("args,said", REFUSED, ids=[" ".join(a) for a, _ in REFUSED])
def test_a_value_no_node_could_show_is_refused_on_a_node_and_for_the_next(simulated, run, args, said):
    for target in (["-n", "demo", "--instance", "0"], ["--next", "1"]):
        code, out, err = run("simulate", "fault", *target, *args, "-o", "none")
        assert code == 2 and "[INVALID_FAULT]" in err and said in err and "Traceback" not in err, err
    # nothing was queued and nothing broken: both nodes pass the gate
    assert simulated(2, "--check") == 0


def test_a_rate_above_the_ports_full_rate_is_refused_on_the_node(simulated, run):
    # (for the next instances it depends on their size: ND GB300 v6's ports run at 800 Gb/s)
    code, _, err = run("simulate", "fault", "-n", "demo", "--instance", "0", "--ib-rate", "500", "-o", "none")
    assert code == 2 and "[INVALID_FAULT] ib_rate=500: a rate from 1 to the port's full 400 Gb/s" in err, err


def test_the_values_a_node_can_show_are_taken(simulated, run):
    for args in (["--ib-rate", "200"], ["--xid", "79"], ["--ib-flapping", "mlx5_ib0"], ["--gpu-throttle", "3:120"],
                 ["--ecc", "0"]):
        code, _, err = run("simulate", "fault", "-n", "demo", "--instance", "0", *args, "-o", "none")
        assert code == 0, (args, err)


# What depends on the node (a port's name, a GPU index, a rate above every size's full one) cannot be checked for
# the next instances, whose size is not known yet; a value that no simulated size could take is refused when
# queued, where it used to be queued and crash the fake inside the next create (a traceback).
NO_SIZE = [
    (["--ib-down", "mlx5_ib99"], "no InfiniBand port 'mlx5_ib99'"), (["--ib-port", "mlx5_ib99"], "mlx5_ib99"),
    (["--ib-degraded", "99:0.5"], "no InfiniBand port '99'"), (["--ib-flapping", "mlx5_ib99"], "mlx5_ib99"),
    (["--gpu-throttle", "8"], "GPU index"), (["--gpus", "9"], "gpus=9"), (["--ib-rate", "801"], "ib_rate=801"),
    (["--ib-down", "mlx5_ib0:x:y"], "no InfiniBand port 'mlx5_ib0:x:y'"),
]


@pytest.mark.parametrize("args,said", NO_SIZE, ids=[" ".join(a) for a, _ in NO_SIZE])
def test_a_value_no_size_could_take_is_refused_for_the_next(simulated, run, args, said):
    code, _, err = run("simulate", "fault", "--next", "1", *args, "-o", "none")
    assert code == 2 and "[INVALID_FAULT]" in err and said in err and "Traceback" not in err, err
    assert simulated(2, "--check") == 0  # nothing queued: the new node passes


def test_a_value_some_size_takes_is_queued_and_applied(simulated, run):
    code, _, err = run("simulate", "fault", "--next", "1", "--ib-flapping", "mlx5_ib3:30", "--fabric-incomplete",
                       "-o", "none")
    assert code == 0, err  # a GB size takes both (4 ports; the fabric fault only a GB size)
    code, _, err = run("simulate", "fault", "--next", "1", "--ib-down", "mlx5_ib3", "-o", "none")
    assert code == 0, err


def test_a_queued_fault_waits_for_an_instance_whose_size_can_take_it(simulated, run, tmp_path, ssh_key_file):
    # Only a GB size has an NVLink fabric to break, and these are ND H100 v5 nodes: the fabric fault stays queued,
    # where it used to fail the create (a traceback inside the fake); the fault queued after it fits an H100.
    assert run("simulate", "fault", "--next", "1", "--fabric-incomplete", "-o", "none")[0] == 0
    assert run("simulate", "fault", "--next", "1", "--gpus", "7", "-o", "none")[0] == 0
    code, out, err = run("create", "--profile", "nd-h100-v5", "-n", "demo", "-g", "demo-rg", "-l", "eastus",
                         "--nodes", "3", "--ssh-key", ssh_key_file, "--simulate", "--simulate-latency", "0",
                         "--check", "-o", "json")
    assert code == 1 and "Traceback" not in err, err
    nodes = json.loads(out)["health"]["nodes"]
    assert sorted(n["status"] for n in nodes).count("failed") == 1, nodes  # one of the two new nodes: 7 GPUs
    state = json.loads((tmp_path / "state.json").read_text())
    assert [f["fault"] for f in state["pending_faults"]] == [{"fabric_incomplete": True}]


def test_a_queued_fabric_fault_survives_the_rack_placing_its_node(tmp_path, monkeypatch, run, ssh_key_file):
    # A GB300 instance is put in its rack (a healthy NVLink fabric of the rack's) when created: the fabric fault
    # queued for it must outlast that, where it was applied first and wiped, counted as taken and the node passing.
    monkeypatch.setenv("AZGPU_SIMULATE_STATE", str(tmp_path / "state.json"))
    assert run("simulate", "fault", "--next", "1", "--fabric-incomplete", "-o", "none")[0] == 0
    code, out, err = run("create", "--profile", "nd-gb300-v6", "-n", "demo", "-g", "demo-rg", "-l", "eastus",
                         "--nodes", "18", "--ssh-key", ssh_key_file, "--simulate", "--simulate-latency", "0",
                         "--check", "-o", "json")
    assert code == 1 and "Traceback" not in err and "measured In Progress N/A" in err, err
    state = json.loads((tmp_path / "state.json").read_text())
    assert state["pending_faults"] == []
    broken = [n for n in state["nodes"].values() if n["faults"]]
    assert len(broken) == 1 and broken[0]["fabric"]["state"] == "In Progress" and "rack" in broken[0], broken
