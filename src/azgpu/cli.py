"""`provision`: the command line, following the az CLI's conventions.

Results go to stdout; progress, warnings and errors to stderr. Errors are one line
`ERROR: [CODE] message` and a remedy line, exit 2 for bad input, no traceback without --debug.
"""

from __future__ import annotations

import functools
import os
import sys
from pathlib import Path
from typing import Any

import click

from .errors import EXIT_INPUT, EXIT_INTERRUPTED, AzgpuError, Finding, InputError, ValidationFailed
from .output import FORMATS, check_query, render

DEBUG_ENV = "AZGPU_DEBUG"
# click 8.2 renamed NoArgsIsHelp to NoArgsIsHelpError (a UsageError); click 8.1 has neither and
# exits through click.exceptions.Exit after printing the help itself.
_NO_ARGS_IS_HELP = getattr(click.exceptions, "NoArgsIsHelpError", None) or getattr(
    click.exceptions, "NoArgsIsHelp", None) or type("_NeverRaised", (Exception,), {})


# ------------------------------------------------------------------------------------ printing


def emit(result: Any, ctx_obj: dict) -> None:
    text = render(result, ctx_obj["output"], ctx_obj["query"])
    if text:
        click.echo(text, nl=False)


def print_finding(f: Finding) -> None:
    label = {"error": "ERROR", "warning": "WARNING", "note": "NOTE"}[f.severity]
    click.echo(f"{label}: [{f.code}] {f.message}", err=True)
    if f.remedy:
        click.echo(f"  remedy: {f.remedy}", err=True)


def print_findings(findings, *, verbose: bool = False) -> None:
    for f in findings:
        if f.severity != "note" or verbose:
            print_finding(f)


# ------------------------------------------------------------------------------------ options


def common(fn):
    """-o/--output, --query, --verbose and --debug on every command, as az has them."""

    @click.option("-o", "--output", "output", type=click.Choice(FORMATS), default="json", show_default=True,
                  help="Output format.")
    @click.option("--query", default=None, help="JMESPath query applied to the result.")
    @click.option("--verbose", is_flag=True, help="Also print notes.")
    @click.option("--debug", is_flag=True, help="Show tracebacks.")
    @click.pass_context
    @functools.wraps(fn)
    def wrapper(ctx, output, query, verbose, debug, **kwargs):
        ctx.ensure_object(dict)
        check_query(query)  # a bad --query fails before anything runs or is written
        ctx.obj.update(output=output, query=query, verbose=verbose or ctx.obj.get("verbose", False),
                       debug=debug or ctx.obj.get("debug", False))
        return fn(ctx.obj, **kwargs)

    return wrapper


REQUEST_OPTIONS = [
    click.option("-f", "--file", "cluster_file", default=None, help="Cluster file (TOML) with the same keys as the flags."),
    click.option("--profile", default=None, help="Series profile id ('provision profiles list')."),
    click.option("--size", default=None, help="VM size or alias (default: the profile's)."),
    click.option("--nodes", default=None, help="Number of VMs."),
    click.option("-l", "--location", default=None, help="Azure region, e.g. eastus."),
    click.option("-g", "--resource-group", default=None, help="Resource group."),
    click.option("-n", "--name", default=None, help="Cluster name (names and tags every resource)."),
    click.option("--image", default=None, help="Catalog image name or URN (default: the profile's HPC image)."),
    click.option("--admin-username", default=None, help="Linux admin user [azureuser]."),
    click.option("--ssh-key", default=None, help="SSH public key file or the key itself [~/.ssh/id_ed25519.pub]."),
    click.option("--os-disk-size-gb", default=None, help="OS disk size in GiB."),
    click.option("--ephemeral-os-disk", is_flag=True, default=None, help="Place the OS disk on the local resource disk."),
    click.option("--data-disks", default=None, help="Number of empty data disks per VM."),
    click.option("--data-disk-size-gb", default=None, help="Size of each data disk in GiB [1024]."),
    click.option("--spot", is_flag=True, default=None, help="Use spot (low-priority) capacity."),
    click.option("--max-price", default=None, help="Spot max price in USD/hour; -1 = up to on-demand."),
    click.option("--zone", default=None, help="Availability zone (1, 2 or 3)."),
    click.option("--vnet-address-prefix", default=None, help="Address space of the new VNet [10.0.0.0/16]."),
    click.option("--subnet-id", default=None, help="Existing subnet resource ID instead of a new VNet."),
    click.option("--public-ip", is_flag=True, default=None, help="Give every node a public IP (off by default)."),
    click.option("--ssh-source", default=None, help="CIDR allowed to reach SSH (22/tcp); none by default."),
    click.option("--security-type", default=None, help="Standard (default for GPU sizes) or TrustedLaunch."),
    click.option("--max-ib-domain", default=None, help="VMs per InfiniBand scale set [100; up to 300 if raised]."),
    click.option("--tag", "tags", multiple=True, help="Tag key=value (repeatable)."),
]


def request_options(fn):
    for option in reversed(REQUEST_OPTIONS):
        fn = option(fn)
    return fn


def make_request(values: dict[str, Any]):
    from .request import build_request, read_cluster_file

    cluster_file = values.pop("cluster_file", None)
    base = read_cluster_file(cluster_file) if cluster_file else {}
    if "tag" in base:
        base["tags"] = base.pop("tag")
    flags = {k: v for k, v in values.items() if v is not None and not (k == "tags" and not v)}
    if "tags" in flags and "tags" in base:
        file_tags = base.pop("tags")
        flags["tags"] = [f"{k}={v}" for k, v in (file_tags.items() if isinstance(file_tags, dict) else [])] + list(flags["tags"])
    return build_request({**base, **flags}, origin=cluster_file or "")


def validated(values: dict[str, Any], command: str):
    from .validate import validate

    return validate(make_request(values), command=command)


# ------------------------------------------------------------------------------------ commands


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110})
@click.version_option(package_name="azgpu", prog_name="provision")
def cli():
    """Provision Azure GPU clusters (ND, NDv2, NG, ND A100 v4 ... ND GB300 v6) correctly the first time."""


@cli.group()
def profiles():
    """Per-series profiles: sizes, documented requirements, sources."""


@profiles.command("list")
@common
def profiles_list(obj):
    """List the series profiles."""
    from .describe import list_rows

    emit(list_rows(), obj)


@profiles.command("show")
@click.argument("profile_id")
@common
def profiles_show(obj, profile_id):
    """Show a profile: sizes, requirements with their sources, seed discrepancies."""
    from .describe import profile_detail
    from .profiles import find_size, load_profile

    try:
        profile = load_profile(profile_id)
    except InputError as unknown:
        try:
            profile = find_size(profile_id)[0]  # ND6, NG8 ... resolve to their series
        except InputError:
            raise unknown from None
    emit(profile_detail(profile), obj)


@cli.group()
def images():
    """The image catalog azgpu checks requests against offline."""


@images.command("list")
@click.option("--profile", default=None, help="Only images built for this profile.")
@common
def images_list(obj, profile):
    """List catalog images (Azure HPC images and common marketplace images)."""
    from .describe import image_rows

    emit(image_rows(profile), obj)


@cli.command("validate")
@request_options
@common
def validate_cmd(obj, **values):
    """Check a request against every documented rule; exit 2 on any error."""
    spec = validated(values, "validate")
    print_findings(spec.findings, verbose=obj["verbose"])
    emit({"valid": True, "profile": spec.profile.id, "size": spec.size.name, "nodes": spec.nodes,
          "scale_sets": list(spec.scale_sets), "image": spec.image.urn,
          "findings": [f.as_dict() for f in spec.findings]}, obj)


@cli.command("plan")
@request_options
@common
def plan_cmd(obj, **values):
    """Show the resources a request would create, in dependency order."""
    from .plan import build_plan

    spec = validated(values, "plan")
    print_findings(spec.findings, verbose=obj["verbose"])
    emit(build_plan(spec).summary(), obj)


@cli.command("render")
@request_options
@click.option("--format", "fmt", type=click.Choice(["arm", "bicep", "all"]), default="all", show_default=True,
              help="Template format(s) to write.")
@click.option("--out-dir", default="out", show_default=True, help="Directory to write the templates to.")
@common
def render_cmd(obj, fmt, out_dir, **values):
    """Write ARM JSON and/or Bicep templates (+ parameter files) for review."""
    from .plan import build_plan
    from .render.arm import render_arm, render_arm_parameters, to_json

    spec = validated(values, "render")
    plan = build_plan(spec)
    files: dict[str, str] = {}
    if fmt in ("arm", "all"):
        files["main.json"] = to_json(render_arm(plan))
        files["main.parameters.json"] = to_json(render_arm_parameters(plan))
    if fmt in ("bicep", "all"):
        from .render.bicep import render_bicep, render_bicepparam

        files["main.bicep"] = render_bicep(plan)
        files["main.bicepparam"] = render_bicepparam(plan)
    directory = Path(out_dir)
    if directory.exists() and not directory.is_dir():
        raise InputError(f"--out-dir '{out_dir}' is a file", code="INVALID_OUT_DIR", remedy="pass a directory path")
    print_findings(spec.findings, verbose=obj["verbose"])
    try:
        directory.mkdir(parents=True, exist_ok=True)
        for name, text in files.items():
            (directory / name).write_text(text)
    except OSError as exc:
        raise InputError(f"cannot write to '{out_dir}': {exc.strerror}", code="INVALID_OUT_DIR",
                         remedy="pass a writable --out-dir") from None
    emit({"out_dir": str(directory), "files": [{"name": n, "bytes": len(t.encode())} for n, t in files.items()],
          "resources": len(plan.resources), "scale_sets": [r.name for r in plan.scale_sets]}, obj)


# create/status/outputs/wait/destroy live in cli_deploy; the Azure SDK loads only when they run.
from . import cli_deploy  # noqa: E402 - needs `cli` and the option helpers above

cli_deploy.register(cli)


# ------------------------------------------------------------------------------------ entry point


def main(argv: list[str] | None = None) -> int:
    """Run the CLI in-process and return the exit code (tests call this directly)."""
    args = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in args or bool(os.environ.get(DEBUG_ENV))
    try:
        cli.main(args=args, prog_name="provision", standalone_mode=False, obj={"debug": debug})
    except ValidationFailed as exc:
        print_findings(exc.findings, verbose="--verbose" in args)
        if debug:
            raise
        return EXIT_INPUT
    except AzgpuError as exc:
        click.echo(f"ERROR: [{exc.code}] {exc.message}", err=True)
        if exc.remedy:
            click.echo(f"  remedy: {exc.remedy}", err=True)
        if debug:
            raise
        return exc.exit_code
    except _NO_ARGS_IS_HELP as exc:
        # `provision` or `provision profiles` alone: show that group's help, as az does.
        click.echo(exc.ctx.get_help() if exc.ctx else exc.format_message())
        return 0
    except click.UsageError as exc:
        command = exc.ctx.command_path if exc.ctx else "provision"
        click.echo(f"ERROR: [USAGE] {exc.format_message()}", err=True)
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


if __name__ == "__main__":
    sys.exit(main())
