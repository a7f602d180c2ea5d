"""`provision --help` lists the commands from cli.SUMMARY without importing their modules: each line must be
what click would print from the command's own help, at any terminal width."""

from __future__ import annotations

import click
import pytest

from azgpu.cli import COMMANDS, SUMMARY, LazyGroup, cli


def test_every_command_has_its_line():
    assert set(SUMMARY) == set(COMMANDS)


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_each_line_is_the_first_sentence_of_the_commands_own_help(name):
    ctx = click.Context(cli)
    command = cli.get_command(ctx, name)
    stand_in = click.Command(name, help=SUMMARY[name])
    for width in range(10, 400, 3):
        assert stand_in.get_short_help_str(width) == command.get_short_help_str(width), width


def test_the_listing_is_the_one_click_prints_from_the_commands_themselves():
    group = LazyGroup(name="provision", context_settings=cli.context_settings)
    ctx = click.Context(group)
    for name in COMMANDS:
        group.get_command(ctx, name)  # loads every command module, as the listing used to
    for width in (60, 80, 110):
        ours, clicks = click.HelpFormatter(width=width), click.HelpFormatter(width=width)
        group.format_commands(ctx, ours)
        click.Group.format_commands(group, ctx, clicks)
        assert ours.getvalue() == clicks.getvalue() and "certify" in ours.getvalue()
