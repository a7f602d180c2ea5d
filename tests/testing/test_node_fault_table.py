"""A node fault is one row of azgpu.testing.node_fault_table: the CLI's options, apply_fault, validate_fault and
docs/node-faults.md are built from it, and a row without its help or effect is refused."""

from __future__ import annotations

import dataclasses
import inspect

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
