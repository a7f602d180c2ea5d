"""`provision`: the command line, following the az CLI's conventions.

Results go to stdout; progress, warnings and errors to stderr. Errors are one line
`ERROR: [CODE] message` and a remedy line, exit 2 for bad input, no traceback without --debug.
Each family of commands lives in its own module and registers itself on the group here; the
Azure SDK loads only inside the commands that talk to Azure.
"""

from __future__ import annotations

import importlib
import os
import signal
import sys
import threading
from contextlib import contextmanager

import click

from ..errors import EXIT_INPUT, EXIT_INTERRUPTED, AzgpuError, ValidationFailed
from .options import DECLINED, for_session, one_line, print_findings

DEBUG_ENV = "AZGPU_DEBUG"
# click 8.2 renamed NoArgsIsHelp to NoArgsIsHelpError (a UsageError); click 8.1 has neither and
# exits through click.exceptions.Exit after printing the help itself.
_NO_ARGS_IS_HELP = getattr(click.exceptions, "NoArgsIsHelpError", None) or getattr(
    click.exceptions, "NoArgsIsHelp", None) or type("_NeverRaised", (Exception,), {})


# The modules that make each command: a module registers all of its commands at once, and several
# add to `simulate`. They load when their command is used (click's "lazily loading subcommands"), so
# `provision render` pays for neither the deploy commands nor the health gate's nor reporting's.
COMMANDS = {
    **dict.fromkeys(("profiles", "images", "validate", "plan", "render"), ("offline",)),
    **dict.fromkeys(("create", "status", "wait", "destroy"), ("deploy",)),
    "outputs": ("outputs",), "check": ("check",), "list": ("listing",),
    "report": ("report",), "reports": ("report",), "slurm": ("slurm",), "certify": ("certify",),
    "quota": ("capacity",), "capacity": ("capacity",), "reserve": ("capacity",), "release": ("capacity",),
    "simulate": ("simulate", "simulate_faults", "report", "capacity"),
}


class LazyGroup(click.Group):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.loaded: set[str] = set()

    def load(self, module: str) -> None:
        if module not in self.loaded:
            self.loaded.add(module)
            importlib.import_module(f"{__name__}.{module}").register(self)

    def list_commands(self, ctx):
        return sorted(set(COMMANDS) | set(self.commands))

    def get_command(self, ctx, name):
        for module in COMMANDS.get(name, ()):
            self.load(module)
        return self.commands.get(name)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110})
@click.version_option(package_name="azgpu", prog_name="provision")
def cli():
    """Provision Azure GPU clusters (ND, NDv2, NG, ND A100 v4 ... ND GB300 v6) correctly the first time."""


# ------------------------------------------------------------------------------------ entry point


@contextmanager
def _first_interrupt_only():
    """The first Ctrl-C raises KeyboardInterrupt; any further one is ignored while azgpu stops (the
    stop is bounded: every wait ends at once), so it cannot print a traceback of its own."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def first(signum, frame):
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGINT, first)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def main(argv: list[str] | None = None) -> int:
    """Run the CLI in-process and return the exit code (tests call this directly)."""
    with _first_interrupt_only():
        code = _main(argv)
    if code == EXIT_INTERRUPTED and argv is None:
        # The `provision` process itself: exit now. A worker thread may still wait on a request to
        # Azure (which finishes what it accepted; a re-run follows it); the interpreter would join it.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


def _main(argv: list[str] | None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in args or bool(os.environ.get(DEBUG_ENV))
    # What the command's options said (common() fills it), for the error lines below; the command line as typed,
    # for a remedy that names it again (options.rerun).
    obj = {"debug": debug, "argv": args}
    try:
        cli.main(args=args, prog_name="provision", standalone_mode=False, obj=obj)
    except ValidationFailed as exc:
        if getattr(exc, "reported", False):  # a Slurm program logged it in its own line format
            return EXIT_INPUT
        print_findings(exc.findings, verbose="--verbose" in args, obj=obj)
        if debug:
            raise
        return EXIT_INPUT
    except AzgpuError as exc:
        if getattr(exc, "declined", False) or exc.code == "GHR_DECLINED":
            # A no at a prompt is the user's decision, not a failure: exit 0 wherever it was asked.
            click.echo(f"{one_line(exc.message)}; {DECLINED}", err=True)
            return 0
        if getattr(exc, "reported", False):  # a Slurm program logged it in its own line format
            return exc.exit_code
        click.echo(f"ERROR: [{exc.code}] {one_line(exc.message)}", err=True)
        if exc.remedy:
            click.echo(f"  remedy: {one_line(for_session(exc.remedy, obj))}", err=True)
        if debug:
            raise
        return exc.exit_code
    except _NO_ARGS_IS_HELP as exc:
        # `provision` or `provision profiles` alone: show that group's help, as az does.
        click.echo(exc.ctx.get_help() if exc.ctx else exc.format_message())
        return 0
    except click.UsageError as exc:
        command = exc.ctx.command_path if exc.ctx else "provision"
        click.echo(f"ERROR: [USAGE] {one_line(exc.format_message())}", err=True)
        click.echo(f"  remedy: see '{command} --help'", err=True)
        return EXIT_INPUT
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except click.Abort:
        click.echo("ERROR: [INTERRUPTED] interrupted; a re-run continues where this one stopped", err=True)
        return EXIT_INTERRUPTED
    except KeyboardInterrupt:
        click.echo("ERROR: [INTERRUPTED] interrupted; a re-run continues where this one stopped", err=True)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        return 0
    return 0

