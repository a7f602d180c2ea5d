"""create / status / wait / destroy: the commands that talk to Azure (or to --simulate); outputs is in outputs.py.

Importing this module is cheap: the Azure SDK is imported only inside the commands.
"""

from __future__ import annotations

import dataclasses
import functools
import sys
from types import SimpleNamespace

import click

from ..errors import Finding, InputError
from ..health.limits import MAX_ROUNDS
from ..output import listing, terminal_text
from ..resource_types import DEPLOYMENT, QUOTA
from . import options
from .check import ALL_NODES, health_options, with_compact_health
from .options import (
    DECLINED,
    ListOption,
    azure_options,
    cluster_args,
    common,
    emit,
    log,
    make_request,
    number_findings,
    print_finding,
    print_findings,
    request_options,
    validated_with,
)
from .progress import progress_for
from .report import ask_to_report, report_findings, report_options, with_compact_reports


def create_options(fn):
    """create's flags gathered once into one CreateOptions (`settings`), its gate and reporting flags
    into the nested GateOptions and ReportOptions; the command gets the options object, not the flags.
    The hooks that need the command's own context (prompts, progress) are added where it has them."""

    @functools.wraps(fn)
    def command(*args, dry_run, no_wait, timeout, zones, fallback_locations, accept_terms, no_arm_validate,
                allow_scale_in, currency, check, replace_unhealthy, max_rounds, spare_racks, node_check,
                report_to_azure, insight_timeout, certify, certify_level, **kwargs):
        from ..deploy import CertifyOptions, CreateOptions, GateOptions, ReportOptions

        settings = CreateOptions(
            dry_run=dry_run, wait=not no_wait, timeout=timeout, zones=tuple(zones or ()),
            fallback_locations=tuple(fallback_locations or ()), accept_terms=accept_terms,
            allow_scale_in=allow_scale_in, currency=currency, arm_validate=not no_arm_validate,
            gate=GateOptions(check=check, replace_unhealthy=replace_unhealthy, max_rounds=max_rounds,
                             spare_racks=spare_racks, node=node_check),
            report=ReportOptions(report_to_azure=report_to_azure, insight_timeout=insight_timeout),
            certify=CertifyOptions(level=certify_level, replace=replace_unhealthy, max_rounds=max_rounds,
                                   node=node_check) if certify else None)
        return fn(*args, settings=settings, **kwargs)

    return command


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
    @click.option("--accept-terms", is_flag=True,
                  help="Accept the marketplace terms of the image's purchase plan for the subscription if needed "
                       "(as 'az vm image terms accept').")
    @click.option("--what-if", "what_if_", is_flag=True,
                  help="Show what create would change, resource by resource and instance by instance, and the cost "
                       "(as 'az deployment group what-if'); write nothing. -o json for automation.")
    @click.option("--no-arm-validate", is_flag=True,
                  help="Skip Azure's own template validation (and, with --what-if, Azure's what-if), for callers "
                       f"without {DEPLOYMENT.action('validate/action')}.")
    @click.option("--allow-scale-in", is_flag=True,
                  help="Allow deleting instances (fewer --nodes, a scale set no longer planned); without it create "
                       "refuses, or asks at a terminal.")
    @click.option("--currency", default="USD", show_default=True,
                  help="Currency of the cost shown by --what-if and --dry-run (e.g. EUR).")
    @click.option("--check", is_flag=True, help="After the scale sets succeed, run the health checks on every node "
                                                "(see 'provision check'); exit 1 unless all pass.")
    @click.option("--replace-unhealthy", is_flag=True,
                  help="With --check (implied): delete failing nodes, scale back out, check the new ones.")
    @click.option("--max-rounds", type=int, default=MAX_ROUNDS, show_default=True, help="Replacement rounds at most.")
    @click.option("--spare-racks", type=int, default=0, show_default=True,
                  help="GB200/GB300: deploy N racks more than --nodes, check every node (implies --check), then "
                       "remove whole racks (partial, unhealthy or beyond --nodes) to end with whole healthy racks.")
    @click.option("--certify", is_flag=True,
                  help="Once the cluster is up, certify it as 'provision certify' does (with --replace-unhealthy: "
                       "replace the nodes it proves faulty; with --report-to-azure: report them first).")
    @click.option("--certify-level", type=click.Choice(["quick", "standard", "extended"]), default="standard",
                  show_default=True, help="The level of --certify.")
    @click.option("--capacity-reservation-group", default=None, metavar="ID",
                  help="Deploy the scale sets into this existing capacity reservation group (see 'provision "
                       "reserve'); the preflight checks it has room first.")
    @click.option("--accept-reservation-infiniband-risk", is_flag=True, default=None,
                  help="Deploy an InfiniBand size into --capacity-reservation-group although Learn gives a scale set "
                       "there (singlePlacementGroup false) no InfiniBand; prove the fabric with --check.")
    @click.option("--request-quota", is_flag=True,
                  help=f"File the quota increases the preflight finds short ({QUOTA.namespace}; asks first unless "
                       "--yes) and go on once they are approved; see 'provision quota request'.")
    @ALL_NODES
    @health_options
    @report_options
    @common
    @create_options
    def create_cmd(obj, subscription, simulate, simulate_latency, simulate_state, settings, what_if_, request_quota,
                   yes, all_nodes, **values):
        """Validate, preflight against Azure, and deploy the cluster (re-runs converge).

        A re-run that would delete instances (fewer --nodes) lists them and goes on only with
        --allow-scale-in or a yes at the prompt; without a terminal it refuses (exit 2).
        """
        from ..deploy import create
        from ..pricing import check_currency
        from ..spec import check_fallbacks

        obj["all_nodes"] = all_nodes
        dry_run, gate, reporting = settings.dry_run, settings.gate, settings.report
        if what_if_ and dry_run:
            raise InputError("--what-if and --dry-run both preview the deployment", code="CONFLICTING_OPTIONS",
                             remedy="pass one: --what-if for the changes, --dry-run for the plan and preflight")
        check_currency(settings.currency)
        request = make_request(values)
        # Offline findings first, the flags of create itself with them: nothing touches Azure on bad input.
        spec = validated_with(request, "create", [
            *check_fallbacks(settings.zones, settings.fallback_locations),
            *number_findings(timeout=settings.timeout, latency=simulate_latency),
            *settings.findings(),  # the options' own check, once: create's door finds it done
            *report_findings(report_to_azure=reporting.report_to_azure, yes=yes,
                             replace_unhealthy=gate.replace_unhealthy)])
        print_findings(spec.findings, verbose=obj["verbose"])
        if what_if_:
            _what_if(obj, spec, subscription, simulate, simulate_latency, simulate_state, settings.currency,
                     arm=settings.arm_validate)
            return

        def ask(report: str) -> bool:
            click.echo(terminal_text(report, lines=True), err=True)
            if yes:  # --yes answers every prompt: the instances listed above are deleted
                click.echo("Delete these instances and go on? yes (--yes)", err=True)
                return True
            return options.confirm("Delete these instances and go on?")

        # Only a terminal (or --yes) can say yes; without one, create refuses (SCALE_IN_REFUSED) unless
        # --allow-scale-in.
        confirm = ask if not settings.allow_scale_in and not dry_run and (yes or sys.stdin.isatty()) else None
        settings = dataclasses.replace(settings, confirm=confirm,
                                       report=reporting.with_hooks(confirm=None if yes else ask_to_report))
        if settings.certify is not None:
            settings = dataclasses.replace(settings, certify=dataclasses.replace(
                settings.certify, report=settings.report, on_notice=log))
        with options.session_for(subscription, simulate, simulate_latency, simulate_state) as session:
            if request_quota and not dry_run:
                from .capacity import quota_before_create

                quota_before_create(session, spec.request, fallback_locations=list(settings.fallback_locations),
                                    yes=yes)
            title = f"{'simulated ' if simulate else ''}create {spec.names.cluster} in {request.resource_group}"
            with progress_for(title, obj["output"], verbose=obj["verbose"], log=log) as progress:
                result = create(session, spec, dataclasses.replace(
                    settings, on_event=progress.update, on_notice=progress.notice))
        if not result.healthy:  # the result and its health report first, then the error
            error = result.unhealthy_error()
            if error.code == "UNHEALTHY_NODES" and not result.replacing:  # the replacing create, whole, as typed
                from ..health.outcome import unhealthy_error

                error = unhealthy_error(error.report, cluster=result.cluster, resource_group=result.resource_group,
                                        replacing=False, result=error.result,
                                        rerun=options.rerun(obj, "--check", "--replace-unhealthy"))
            emit(with_compact_reports(with_compact_health(error.result, obj), obj), obj)
            raise error
        for f in result.preflight.findings:
            print_finding(f)
        emit(with_compact_reports(with_compact_health(result.as_dict(), obj), obj), obj)

    def _what_if(obj, spec, subscription, simulate, simulate_latency, simulate_state, currency, arm=True):
        from ..changes import format_what_if
        from ..deploy.whatif import what_if

        with options.session_for(subscription, simulate, simulate_latency, simulate_state) as session:
            result = what_if(session, spec.request, currency=currency, arm=arm)
        for f in (result.preflight or {}).get("findings", []):
            print_finding(Finding(**{k: f[k] for k in ("code", "message", "remedy", "source", "severity", "field")}))
        source = click.get_current_context().get_parameter_source("output")
        if obj["output"] == "table" or (source == click.core.ParameterSource.DEFAULT and not obj["query"]):
            # The az-style report, as 'az deployment group what-if' prints it; -o json|yaml|tsv for scripts.
            click.echo(format_what_if(result, color=sys.stdout.isatty()), nl=False)  # its Azure text is made safe there
        else:
            emit(result.as_dict(), obj)

    @cli.command("status")
    @click.option("-n", "--name", default=None, help="Cluster name.")
    @click.option("-g", "--resource-group", default=None, help="Resource group.")
    @azure_options
    @common
    def status_cmd(obj, name, resource_group, subscription, simulate, simulate_latency, simulate_state):
        """Provisioning and power state per scale set and instance (exit 3 if the cluster does not exist)."""
        from ..deploy import status

        cluster_args(name, resource_group, latency=simulate_latency)
        with options.session_for(subscription, simulate, simulate_latency, simulate_state) as session:
            emit(status(session, name, resource_group), obj)

    @cli.command("wait")
    @click.option("-n", "--name", default=None, help="Cluster name.")
    @click.option("-g", "--resource-group", default=None, help="Resource group.")
    @click.option("--timeout", type=float, default=None, help="Give up after this many seconds.")
    @azure_options
    @common
    def wait_cmd(obj, name, resource_group, timeout, subscription, simulate, simulate_latency, simulate_state):
        """Wait until every scale set of the cluster has succeeded (after --no-wait)."""
        from ..deploy import wait

        cluster_args(name, resource_group, timeout=timeout, latency=simulate_latency)
        with options.session_for(subscription, simulate, simulate_latency, simulate_state) as session:
            interval = 0 if simulate and simulate_latency == 0 else 5
            seen: dict[str, str] = {}

            def changed(cluster) -> None:  # one line per scale set whose state changed
                for vmss in cluster.scale_sets:
                    state = str(getattr(vmss.provisioning_state, "value", vmss.provisioning_state))
                    if seen.get(vmss.name) != state:
                        seen[vmss.name] = state
                        log(f"{vmss.name}: {state}")

            result = wait(session, name, resource_group, timeout=timeout, interval=interval, on_update=changed)
            changed(SimpleNamespace(scale_sets=[SimpleNamespace(name=s["name"],
                                                                provisioning_state=s["provisioning_state"])
                                                for s in result["scale_sets"]]))
            emit(result, obj)

    def _group_fate(session, cluster) -> str:
        """What destroy does to the resource group, said before the question (as lifecycle.destroy decides)."""
        from ..deploy.arm import list_group
        from ..ownership import created_by_azgpu, is_ours

        group = cluster.resource_group
        tags = (cluster.group.tags or {}) if cluster.group is not None else {}
        if not (created_by_azgpu(tags) and is_ours(tags, cluster.name)):
            return f"The resource group '{group}' is kept: azgpu did not create it."
        others = [r.name for r in list_group(session, group) or [] if r.name not in {c.name for c in cluster.resources}]
        if others:
            return (f"The resource group '{group}' is kept: it also holds {len(others)} other resource(s) "
                    f"({listing(others)}).")
        return f"Then the resource group '{group}' itself is deleted: azgpu created it for this cluster."

    @cli.command("destroy")
    @click.option("-n", "--name", default=None, help="Cluster name.")
    @click.option("-g", "--resource-group", default=None, help="Resource group.")
    @click.option("-y", "--yes", is_flag=True, help="Do not ask for confirmation.")
    @azure_options
    @common
    def destroy_cmd(obj, name, resource_group, yes, subscription, simulate, simulate_latency, simulate_state):
        """Delete only the resources azgpu created for this cluster (and its resource group if azgpu made it
        and it is empty)."""
        from ..deploy.lifecycle import destroy, find_cluster, require

        cluster_args(name, resource_group, latency=simulate_latency)
        if not yes and not sys.stdin.isatty():
            raise InputError("destroy needs confirmation and there is no terminal to ask", code="CONFIRMATION_REQUIRED",
                             remedy="add --yes to delete without asking")
        with options.session_for(subscription, simulate, simulate_latency, simulate_state) as session:
            cluster = require(find_cluster(session, name, resource_group))
            if not yes:
                items = [r.name for r in cluster.resources]
                log(f"This deletes {len(items)} resource(s) of cluster '{name}' in '{resource_group}': "
                    f"{listing(items)}.")
                log(_group_fate(session, cluster))
                if not options.confirm("Delete them?"):
                    # Answering no is the user's decision, not a failure or an interruption.
                    log(DECLINED)
                    return
            # One line per resource on stderr as it goes (a CI log shows the teardown while it runs).
            result = destroy(session, name, resource_group, on_update=lambda kind, n, state: log(f"{n}: {state}"))
        emit(result, obj)
