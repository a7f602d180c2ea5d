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

# Each command's one line in `provision --help`: the first sentence of its own help, held to it by
# tests/test_cli_help.py. Listing the commands from here imports none of their modules, which would load
# the health gate's, certify's and the fake's libraries just to print a line each (issue #31, cold start).
SUMMARY = {
    "capacity": ("One report before anything is created: SKU restrictions per location and zone, quota headroom "
                 "(family, regional, spot) and reservation headroom, each line with its remedy."),
    "certify": ("Burn the cluster in and name the bad node, link or rack: the health gate, DCGM's diagnostics, a "
                "thermal run under load, nvbandwidth, the InfiniBand loopback, ib_write_bw on every port of pairs "
                "of nodes, and all_reduce and all_to_all across each InfiniBand domain (each NVL72 rack's NVLink "
                "all_reduce on GB sizes)."),
    "check": ("Run the node health checks on every node (AzNHC where the image has it, else azgpu's fallback) "
              "through Run Command; exit 0 only when every node passed."),
    "create": "Validate, preflight against Azure, and deploy the cluster (re-runs converge).",
    "destroy": ("Delete only the resources azgpu created for this cluster (and its resource group if azgpu made it "
                "and it is empty)."),
    "images": "The image catalog azgpu checks requests against offline.",
    "list": ("Every azgpu cluster: name, group, location, profile, size, nodes running/total, InfiniBand "
             "domains, created."),
    "outputs": "What MPI launchers and schedulers need: hostfiles, Slurm configuration, NCCL environment.",
    "plan": "Show the resources a request would create, in dependency order, and what they cost.",
    "profiles": "Per-series profiles: sizes, documented requirements, sources.",
    "quota": "vCPU quota increases through the Microsoft.Quota API, from the preflight's own arithmetic.",
    "release": ("Delete the reservations azgpu created in a group (tagged managed-by: azgpu), and the group when "
                "azgpu created it and nothing else is left; what is left is named."),
    "render": "Write ARM JSON and/or Bicep templates (+ parameter files) for review.",
    "report": "Check the nodes and file a Guest Health Report (preview) with Azure for each failing one's host.",
    "reports": "The Guest Health Reports filed for a cluster's nodes, read from Azure, with their latest insight.",
    "reserve": "Reserve GPU capacity: a capacity reservation group and one reservation in it, checked first.",
    "simulate": "Shape the simulated subscription behind --simulate: quota, SKU restrictions, capacity.",
    "slurm": "Slurm power saving: CLOUD nodes per InfiniBand domain that azgpu creates and removes (docs/slurm.md).",
    "status": "Provisioning and power state per scale set and instance (exit 3 if the cluster does not exist).",
    "validate": "Check a request against every documented rule; exit 2 on any error.",
    "wait": "Wait until every scale set of the cluster has succeeded (after --no-wait).",
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

    def format_commands(self, ctx, formatter):
        listing = click.Group(commands=[click.Command(name, help=SUMMARY[name]) for name in self.list_commands(ctx)])
        listing.format_commands(ctx, formatter)

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

