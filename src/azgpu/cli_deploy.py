"""create / status / outputs / wait / destroy: the commands that talk to Azure (or to --simulate).

Importing this module is cheap: the Azure SDK is imported only inside the commands.
"""

from __future__ import annotations

import sys
from contextlib import contextmanager

import click

from .cli import common, emit, make_request, print_finding, print_findings, request_options
from .errors import Finding, InputError


class ListOption(click.Option):
    """A list option as az has them: `--zones 1 2 3` (and repeated `--zones 1 --zones 2` too).

    click has no nargs='+' for options, so each value also takes the arguments after it up to the
    next option.
    """

    def __init__(self, *args, **kwargs):
        super().__init__(*args, multiple=True, **kwargs)

    def add_to_parser(self, parser, ctx):
        result = super().add_to_parser(parser, ctx)
        for opt in self.opts:
            target = parser._long_opt.get(opt) or parser._short_opt.get(opt)
            if target is None:
                continue
            single = target.process

            def process(value, state, single=single):
                single(value, state)
                while state.rargs and not state.rargs[0].startswith("-"):
                    single(state.rargs.pop(0), state)

            target.process = process
        return result


def azure_options(fn):
    options = [
        click.option("--subscription", default=None, help="Subscription ID (default: AZURE_SUBSCRIPTION_ID or az's default)."),
        click.option("--simulate", is_flag=True, help="Run against azgpu's simulated Azure (no account needed)."),
        click.option("--simulate-latency", type=float, default=None,
                     help="Seconds each simulated long-running operation takes [3]; 0 = instant."),
        click.option("--simulate-state", default=None, help="File holding the simulated cloud (default: user state dir)."),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


@contextmanager
def session_for(subscription, simulate, latency, state):
    if simulate:
        from .deploy.simulate import DEFAULT_LATENCY, simulated_session

        with simulated_session(latency=DEFAULT_LATENCY if latency is None else latency, state=state) as session:
            yield session
        return
    from .deploy.session import Session, default_credential, resolve_subscription

    session = Session(resolve_subscription(subscription), default_credential())
    session.check_credential()
    yield session


def _log(message: str) -> None:
    click.echo(message, err=True)


def _cluster_args(name, resource_group):
    missing = [flag for flag, v in (("-n/--name", name), ("-g/--resource-group", resource_group)) if not v]
    if missing:
        raise InputError(f"{' and '.join(missing)} required", code="MISSING_ARGUMENT",
                         remedy="name the cluster: -n NAME -g RESOURCE_GROUP")


def register(cli: click.Group) -> None:
    @cli.command("create")
    @request_options
    @azure_options
    @click.option("--dry-run", is_flag=True, help="Run every check against Azure and print the plan; write nothing.")
    @click.option("--no-wait", is_flag=True, help="Return once Azure accepted the scale sets ('provision wait').")
    @click.option("--timeout", type=float, default=None, help="Give up waiting after this many seconds.")
    @click.option("--zones", cls=ListOption, help="Zones to try in order on capacity errors: --zones 1 2 3.")
    @click.option("--fallback-locations", cls=ListOption,
                  help="Locations to try in order on capacity errors: --fallback-locations westus2 westus3.")
    @common
    def create_cmd(obj, subscription, simulate, simulate_latency, simulate_state, dry_run, no_wait, timeout, zones,
                   fallback_locations, **values):
        """Validate, preflight against Azure, and deploy the cluster (re-runs converge)."""
        from .deploy.create import create
        from .deploy.progress import progress_for
        from .validate import validate

        request = make_request(values)
        spec = validate(request, command="create")  # offline findings first: nothing touches Azure on bad input
        print_findings(spec.findings, verbose=obj["verbose"])
        with session_for(subscription, simulate, simulate_latency, simulate_state) as session:
            title = f"{'simulated ' if simulate else ''}create {spec.names.cluster} in {request.resource_group}"
            with progress_for(title, obj["output"], verbose=obj["verbose"], log=_log) as progress:
                result = create(session, spec.request, dry_run=dry_run, wait=not no_wait, timeout=timeout,
                                zones=list(zones), fallback_locations=list(fallback_locations),
                                on_event=progress.update, on_notice=progress.notice)
        for f in result.get("preflight", {}).get("findings", []):
            print_finding(Finding(**{k: f[k] for k in ("code", "message", "remedy", "source", "severity", "field")}))
        emit(result, obj)

    @cli.command("status")
    @click.option("-n", "--name", default=None, help="Cluster name.")
    @click.option("-g", "--resource-group", default=None, help="Resource group.")
    @azure_options
    @common
    def status_cmd(obj, name, resource_group, subscription, simulate, simulate_latency, simulate_state):
        """Provisioning and power state per scale set and instance (exit 3 if the cluster does not exist)."""
        from .deploy.lifecycle import status

        _cluster_args(name, resource_group)
        with session_for(subscription, simulate, simulate_latency, simulate_state) as session:
            emit(status(session, name, resource_group), obj)

    @cli.command("outputs")
    @click.option("-n", "--name", default=None, help="Cluster name.")
    @click.option("-g", "--resource-group", default=None, help="Resource group.")
    @click.option("--format", "fmt", type=click.Choice(["hostfile", "slurm", "nccl-env", "json"]), default="json",
                  show_default=True, help="hostfile: private IPs; slurm: node lines; nccl-env: export lines.")
    @azure_options
    @common
    def outputs_cmd(obj, name, resource_group, fmt, subscription, simulate, simulate_latency, simulate_state):
        """What schedulers need: hostfile, Slurm node lines per InfiniBand domain, NCCL environment."""
        from .deploy import lifecycle

        _cluster_args(name, resource_group)
        with session_for(subscription, simulate, simulate_latency, simulate_state) as session:
            out = lifecycle.outputs(session, name, resource_group)
        if fmt == "json":
            emit(out, obj)
        else:
            text = {"hostfile": lifecycle.hostfile, "slurm": lifecycle.slurm, "nccl-env": lifecycle.nccl_env}[fmt](out)
            click.echo(text, nl=False)

    @cli.command("wait")
    @click.option("-n", "--name", default=None, help="Cluster name.")
    @click.option("-g", "--resource-group", default=None, help="Resource group.")
    @click.option("--timeout", type=float, default=None, help="Give up after this many seconds.")
    @azure_options
    @common
    def wait_cmd(obj, name, resource_group, timeout, subscription, simulate, simulate_latency, simulate_state):
        """Wait until every scale set of the cluster has succeeded (after --no-wait)."""
        from .deploy.lifecycle import wait

        _cluster_args(name, resource_group)
        with session_for(subscription, simulate, simulate_latency, simulate_state) as session:
            interval = 0 if simulate and simulate_latency == 0 else 5
            emit(wait(session, name, resource_group, timeout=timeout, interval=interval), obj)

    @cli.command("destroy")
    @click.option("-n", "--name", default=None, help="Cluster name.")
    @click.option("-g", "--resource-group", default=None, help="Resource group.")
    @click.option("-y", "--yes", is_flag=True, help="Do not ask for confirmation.")
    @azure_options
    @common
    def destroy_cmd(obj, name, resource_group, yes, subscription, simulate, simulate_latency, simulate_state):
        """Delete only the resources azgpu created for this cluster (and its resource group if azgpu made it and it is empty)."""
        from .deploy.lifecycle import destroy, find_cluster, require

        _cluster_args(name, resource_group)
        if not yes and not sys.stdin.isatty():
            raise InputError("destroy needs confirmation and there is no terminal to ask", code="CONFIRMATION_REQUIRED",
                             remedy="add --yes to delete without asking")
        with session_for(subscription, simulate, simulate_latency, simulate_state) as session:
            cluster = require(find_cluster(session, name, resource_group))
            if not yes:
                items = [v.name for v in cluster.scale_sets + cluster.nsgs + cluster.vnets]
                click.echo(f"This deletes {len(items)} resource(s) of cluster '{name}' in '{resource_group}': "
                           f"{', '.join(items)}", err=True)
                if not click.confirm("Continue?", err=True):
                    raise click.Abort()
            result = destroy(session, name, resource_group,
                             on_update=(lambda kind, n, state: _log(f"{n}: {state}")) if obj["verbose"] else None)
        emit(result, obj)
