"""What every `provision` command shares: printing, the common options, requests from flags and
cluster files, and the session (Azure or --simulate) of the commands that talk to Azure."""

from __future__ import annotations

import functools
import re
import sys
from contextlib import contextmanager
from typing import Any

import click

from ..errors import Finding, InputError
from ..output import FORMATS, check_query, render, terminal_text
from ..resource_types import IMPACT

# ------------------------------------------------------------------------------------ printing


def emit(result: Any, ctx_obj: dict, table=None) -> None:
    """Print a result on stdout; table: the summary -o table shows (see output.render). Under --simulate the
    remedies it holds (findings, capacity lines) name the simulated subscription's commands (for_session)."""
    if ctx_obj.get("simulate"):
        result = _remedies_for_session(result, ctx_obj)
    text = render(result, ctx_obj["output"], ctx_obj["query"], table=table)
    if text:
        click.echo(text, nl=False)


# Private key material, whichever field it was pasted into: PEM/OpenSSH armour (to its end line, or
# to the end of the text when cut short), the OpenSSH private format's base64 magic, PuTTY files.
PRIVATE_KEY = re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----.*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|$)"
                         r"|[A-Za-z0-9+/=]*b3BlbnNzaC1rZXktdjE[A-Za-z0-9+/=]*|PuTTY-User-Key-File.*", re.DOTALL)


def one_line(text: str) -> str:
    """A message as one printable line: a newline or an escape sequence in a user's value (a name, a
    path) must not break the one-line format or drive the terminal, and a private key pasted into
    any flag is never echoed (it would end up in a terminal's scrollback or a CI log)."""
    return terminal_text(PRIVATE_KEY.sub("<private key material, not shown>", text))


# What every command says when its question is answered no: the user's decision, exit 0.
DECLINED = "declined at the prompt: nothing changed"


def confirm(question: str) -> bool:
    """A yes/no question on stderr, 'no' unless answered yes. Not click.confirm: before click 8.4 it
    writes the prompt's last space to stdout, which carries results only (-o json | jq ...)."""
    click.echo(f"{question} [y/N]: ", nl=False, err=True)
    answer = sys.stdin.readline()
    if not answer:  # end of input: nobody said yes
        click.echo(err=True)
    return answer.strip().lower() in ("y", "yes")


# The provision commands a remedy quotes ('provision destroy -n x -g y'), and the az ones.
# A quoted command ends at the first ' that no backslash escapes (rerun writes a ' in a word as \').
QUOTED_PROVISION = re.compile(r"'(provision (?:\\.|[^'\\])*)'")
SAFE_WORD = re.compile(r"[\w@%+=:,./-]+", re.ASCII)  # shlex.quote's: a word the shell takes as it is
QUOTED_AZ = re.compile(r"'(az [^']*)'")
# az commands whose simulated counterpart is a `provision simulate` command.
SIMULATED_AZ = {
    f"az provider register --namespace {IMPACT.type}": "provision simulate ghr --provider-state Registered",
    "az vm list-usage": "provision simulate quota list",
}


def _takes_simulate(command_line: str) -> bool:
    """Whether the provision command a remedy quotes ('provision create ...', or 'create ...') talks to Azure
    (has --simulate)."""
    from . import cli

    ctx, command = click.Context(cli), cli
    words = command_line.split()
    for word in words[1:] if words[:1] == ["provision"] else words:
        if not isinstance(command, click.Group) or word.startswith("-"):
            break
        found = command.get_command(ctx, word)
        if found is None:
            break
        command = found
    return not isinstance(command, click.Group) and any(p.name == "simulate" for p in command.params)


def for_session(remedy: str, obj: dict | None = None) -> str:
    """A remedy as this invocation pastes it: under --simulate, each provision command it quotes that talks to
    Azure carries --simulate (and the --simulate-state it was given), and each az command, which would
    reach the real Azure, names the simulated subscription's own command or says it is Azure's."""
    if obj is None:
        ctx = click.get_current_context(silent=True)
        obj = (ctx.find_root().obj if ctx else None) or {}
    if not remedy or not obj.get("simulate"):
        return remedy
    state = obj.get("simulate_state")
    if state and not re.fullmatch(r"[\w./~-]+", state):
        state = repr(state)
    extra = " --simulate" + (f" --simulate-state {state}" if state else "")

    def provision(match: re.Match) -> str:
        line = match.group(1)
        if "--simulate" in line.split() or not _takes_simulate(line):
            return match.group(0)
        end = re.search(r"\s[>|]", line)  # before a redirect or a pipe: the flag is provision's
        at = end.start() if end else len(line)
        return f"'{line[:at]}{extra}{line[at:]}'"

    def az(match: re.Match) -> str:
        line = match.group(1)
        for real, simulated in SIMULATED_AZ.items():
            if line.startswith(real):  # the same question, asked of the simulated subscription
                return f"'{simulated}{line[len(real):]}'"
        return f"{match.group(0)} (in Azure, not in the simulated subscription)"

    from . import COMMANDS

    # A command quoted without its 'provision' ('create --replace-unhealthy') is one too.
    bare = re.compile(r"'((?:" + "|".join(sorted(COMMANDS)) + r") [^']*)'")
    return QUOTED_AZ.sub(az, bare.sub(provision, QUOTED_PROVISION.sub(provision, remedy)))


def rerun(obj: dict, *added: str) -> str | None:
    """This invocation's own command line with the flags `added` that it lacks: a remedy's command the user pastes
    whole (create's options cannot be guessed afterwards). None where the command line is not known, or holds a
    character that no one line shows as typed (a newline, an escape sequence: one_line shows them escaped, so the
    pasted command would differ). A remedy quotes its commands in single quotes, so a word the shell would split
    or expand is double-quoted, or, where it holds a ' or a ! (history expansion in an interactive bash, even
    in double quotes), each such character is backslash-escaped; no word holds a bare '."""
    argv = obj.get("argv")
    if argv is None or not all(w.isprintable() for w in argv):
        return None

    def word(w: str) -> str:
        if SAFE_WORD.fullmatch(w):
            return w
        if "'" not in w and "!" not in w:
            return '"' + re.sub(r'(["\\$`])', r"\\\1", w) + '"'
        return re.sub(r"[^\w@%+=:,./-]", lambda m: "\\" + m.group(), w, flags=re.ASCII)

    return "provision " + " ".join(word(w) for w in [*argv, *(flag for flag in added if flag not in argv)])


def _remedies_for_session(value: Any, obj: dict) -> Any:
    """A copy of a result whose "remedy" texts are for_session's."""
    if isinstance(value, dict):
        return {k: for_session(v, obj) if k == "remedy" and isinstance(v, str) else _remedies_for_session(v, obj)
                for k, v in value.items()}
    if isinstance(value, list):
        return [_remedies_for_session(v, obj) for v in value]
    return value


def print_finding(f: Finding, obj: dict | None = None) -> None:
    label = {"error": "ERROR", "warning": "WARNING", "note": "NOTE"}[f.severity]
    click.echo(f"{label}: [{f.code}] {one_line(f.message)}", err=True)
    if f.remedy:
        click.echo(f"  remedy: {one_line(for_session(f.remedy, obj))}", err=True)


def print_findings(findings, *, verbose: bool = False, obj: dict | None = None) -> None:
    for f in findings:
        if f.severity != "note" or verbose:
            print_finding(f, obj)


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
        if kwargs.get("simulate"):  # remedies name commands for the simulated subscription (for_session)
            ctx.obj.update(simulate=True, simulate_state=kwargs.get("simulate_state"))
        if "cluster_file" not in kwargs:  # request commands apply the defaults below a cluster file's keys
            kwargs.update(az_defaults({k: v for k, v in kwargs.items() if k in ("resource_group", "location")},
                                      verbose=ctx.obj["verbose"]))
        return fn(ctx.obj, **kwargs)

    return wrapper


class Deferred(click.ParamType):
    """A number flag that --help shows with its type but that stays text until the request is built,
    so that every bad value is reported together with every other finding (click would stop at the
    first one)."""

    def __init__(self, name: str):
        self.name = name

    def convert(self, value, param, ctx):
        return value


INTEGER = Deferred("integer")
NUMBER = Deferred("float")

def _complete_profiles(incomplete: str) -> list[str]:
    """Shell completion of --profile (click's mechanism: `_PROVISION_COMPLETE=bash_source provision`)."""
    from ..profiles import list_profiles

    return [p.id for p in list_profiles() if p.id.startswith(incomplete)]


REQUEST_OPTIONS = [
    click.option("-f", "--file", "cluster_file", default=None,
                 help="Cluster file (TOML) with the same keys as the flags."),
    click.option("--profile", default=None, help="Series profile id ('provision profiles list').",
                 shell_complete=lambda ctx, param, incomplete: _complete_profiles(incomplete)),
    click.option("--size", default=None, help="VM size or alias (default: the profile's)."),
    click.option("--nodes", type=INTEGER, default=None, help="Number of VMs."),
    click.option("-l", "--location", default=None, help="Azure region, e.g. eastus."),
    click.option("-g", "--resource-group", default=None, help="Resource group."),
    click.option("-n", "--name", default=None, help="Cluster name (names and tags every resource)."),
    click.option("--image", default=None, help="Catalog image name or URN (default: the profile's HPC image)."),
    click.option("--admin-username", default=None, help="Linux admin user [azureuser]."),
    click.option("--ssh-key", default=None, help="SSH public key file or the key itself [~/.ssh/id_ed25519.pub]."),
    click.option("--os-disk-size-gb", type=INTEGER, default=None, help="OS disk size in GiB."),
    click.option("--ephemeral-os-disk", is_flag=True, default=None,
                 help="Place the OS disk on the local resource disk."),
    click.option("--data-disks", type=INTEGER, default=None, help="Number of empty data disks per VM."),
    click.option("--data-disk-size-gb", type=INTEGER, default=None, help="Size of each data disk in GiB [1024]."),
    click.option("--spot", is_flag=True, default=None, help="Use spot (low-priority) capacity."),
    click.option("--max-price", type=NUMBER, default=None, help="Spot max price in USD/hour; -1 = up to on-demand."),
    click.option("--zone", default=None, help="Availability zone (1, 2 or 3)."),
    click.option("--vnet-address-prefix", default=None, help="Address space of the new VNet [10.0.0.0/16]."),
    click.option("--subnet-id", default=None, help="Existing subnet resource ID instead of a new VNet."),
    click.option("--public-ip", is_flag=True, default=None, help="Give every node a public IP (off by default)."),
    click.option("--outbound/--no-outbound", default=None,
                 help="Outbound internet for the nodes through a NAT gateway on the new VNet [on]; --no-outbound for "
                      "locked-down networks (no downloads, no Run Command results)."),
    click.option("--ssh-source", default=None, help="CIDR allowed to reach SSH (22/tcp); none by default."),
    click.option("--security-type", default=None, help="Standard (default for GPU sizes) or TrustedLaunch."),
    click.option("--max-ib-domain", type=INTEGER, default=None,
                 help="VMs per InfiniBand scale set [100; up to 300 if raised]."),
    click.option("--tag", "tags", multiple=True, help="Tag key=value (repeatable)."),
    click.option("--custom-data", default=None, metavar="FILE",
                 help="cloud-init for every node (a #cloud-config or a script), merged with azgpu's own."),
    click.option("--assign-identity", is_flag=True, default=None,
                 help="Give the nodes a system-assigned managed identity."),
    click.option("--identity", "identities", multiple=True, metavar="ID",
                 help="User-assigned managed identity resource ID for the nodes (repeatable)."),
    click.option("--ppg", default=None, metavar="NAME|ID",
                 help="Proximity placement group: a name to create, or an existing group's resource ID."),
    click.option("--boot-diagnostics/--no-boot-diagnostics", default=None,
                 help="Boot diagnostics with managed storage (serial log and console) [on]."),
    click.option("--eviction-policy", default=None, help="Spot eviction: Delete (default) or Deallocate."),
    click.option("--generate-ssh-keys", is_flag=True, default=None,
                 help="Create ~/.ssh/id_rsa and id_rsa.pub when no SSH key exists (never overwrites), as az does."),
]


def request_options(fn):
    for option in reversed(REQUEST_OPTIONS):
        fn = option(fn)
    return fn


def az_defaults(given: dict[str, Any], *, verbose: bool) -> dict[str, str]:
    """The az CLI's defaults (group, location) for the parameters `given` holds as None; with
    verbose, a note on stderr of where each value came from, flags included."""
    from ..azdefaults import defaults

    filled = {}
    configured = defaults() if any(v is None for v in given.values()) else {}
    for param, value in given.items():
        flag = "-g/--resource-group" if param == "resource_group" else "-l/--location"
        if value is None and param in configured:
            filled[param], where = configured[param]
            if verbose:
                log(f"NOTE: [AZ_DEFAULT] {flag} {filled[param]} from {where}")
        elif value is not None and verbose:
            log(f"NOTE: [AZ_DEFAULT] {flag} {value} from the command line")
    return filled


def make_request(values: dict[str, Any]):
    from ..request import build_request, read_cluster_file

    cluster_file = values.pop("cluster_file", None)
    base = read_cluster_file(cluster_file) if cluster_file else {}
    # The az CLI's defaults come last: a flag or the cluster file's key wins over them.
    ctx = click.get_current_context(silent=True)
    verbose = bool(ctx and ctx.obj and ctx.obj.get("verbose"))
    for param, flag in (("resource_group", "-g/--resource-group"), ("location", "-l/--location")):
        in_file = base.get(param, base.get(param.replace("_", "-")))
        if values.get(param) is not None:
            if verbose:
                log(f"NOTE: [AZ_DEFAULT] {flag} {values[param]} from the command line")
        elif in_file is not None:
            if verbose:
                log(f"NOTE: [AZ_DEFAULT] {flag} {in_file} from the cluster file {cluster_file}")
        else:
            values = {**values, **az_defaults({param: None}, verbose=verbose)}
    flags = {k: v for k, v in values.items() if v is not None and not (k in ("tags", "identities") and not v)}
    # Flags win over the file's values; --tag replaces only the file's tag of the same name.
    return build_request(base, origin=cluster_file or "", **flags)


def validated(values: dict[str, Any], command: str):
    from ..spec import validate

    return validate(make_request(values), command=command)


def validated_with(request, command: str, extra: list[Finding]):
    """validate(request) with the findings of the command's own flags, all reported together."""
    from ..errors import ValidationFailed
    from ..spec import validate

    try:
        spec = validate(request, command=command)
    except ValidationFailed as exc:
        raise ValidationFailed([*exc.findings, *extra]) from None
    if any(f.is_error for f in extra):
        raise ValidationFailed([*spec.findings, *extra])
    return spec


# ------------------------------------------------------------------------------------ Azure


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
        click.option("--subscription", default=None,
                     help="Subscription ID (default: AZURE_SUBSCRIPTION_ID or az's default)."),
        click.option("--simulate", is_flag=True, help="Run against azgpu's simulated Azure (no account needed)."),
        click.option("--simulate-latency", type=float, default=None, envvar="AZGPU_SIMULATE_LATENCY",
                     help="Seconds each simulated long-running operation takes [3, or AZGPU_SIMULATE_LATENCY]; "
                          "0 = instant."),
        click.option("--simulate-state", default=None,
                     help="File holding the simulated cloud (default: user state dir)."),
        click.option("--simulate-throttle", is_flag=True, expose_value=False, callback=_remember_simulate_throttle,
                     help="The simulated Azure throttles as Azure documents it (Compute's, Resource Manager's and "
                          "Network's request limits)."),
        click.option("--throttle-budget", type=click.FloatRange(min=0), default=None, expose_value=False,
                     callback=_remember_throttle_budget, metavar="SECONDS",
                     help="Longest total wait for Azure's throttling to pass [600, or AZGPU_THROTTLE_BUDGET]."),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


THROTTLE_BUDGET_KEY = "azgpu.throttle_budget"
SIMULATE_THROTTLE_KEY = "azgpu.simulate_throttle"


def _remember_simulate_throttle(ctx, param, value):
    if value:
        ctx.meta[SIMULATE_THROTTLE_KEY] = True


def _remember_throttle_budget(ctx, param, value):
    if value is not None:
        ctx.meta[THROTTLE_BUDGET_KEY] = value


def _throttle_budget() -> float | None:
    ctx = click.get_current_context(silent=True)
    return ctx.meta.get(THROTTLE_BUDGET_KEY) if ctx is not None else None


@contextmanager
def session_for(subscription, simulate, latency, state):
    budget = _throttle_budget()
    if simulate:
        from ..deploy.session import check_subscription_id
        from ..deploy.simulate import DEFAULT_LATENCY, simulated_session

        if subscription is not None:  # checked as it is without --simulate, before anything runs
            check_subscription_id(subscription)

        if bad := number_findings(latency=latency):
            raise InputError(bad[0].message, code=bad[0].code, remedy=bad[0].remedy)

        ctx = click.get_current_context(silent=True)
        throttle = "azure" if ctx is not None and ctx.meta.get(SIMULATE_THROTTLE_KEY) else None
        with simulated_session(latency=DEFAULT_LATENCY if latency is None else latency, state=state,
                               throttle=throttle) as session:
            if budget is not None:
                session.set_throttle_budget(budget)
            yield session
        return
    import logging

    from ..deploy.session import Session, default_credential, resolve_subscription

    # The Azure SDK logs its own reports (DefaultAzureCredential's 13 lines on every credential it
    # tried) through Python's last-resort handler; azgpu's one ERROR line says it, --debug shows them.
    ctx = click.get_current_context(silent=True)
    quiet = None if (ctx and (ctx.obj or {}).get("debug")) else logging.NullHandler()
    if quiet:
        logging.getLogger("azure").addHandler(quiet)
    try:
        session = Session(resolve_subscription(subscription), default_credential(), throttle_budget=budget)
        session.check_credential()
        try:
            yield session
        except BaseException:
            session.cancel()  # Ctrl-C: every wait of every thread ends now
            raise
    finally:
        if quiet:
            logging.getLogger("azure").removeHandler(quiet)


def log(message: str) -> None:
    """A line on stderr: names and messages from Azure or a node in it reach the terminal only as text."""
    click.echo(terminal_text(message, lines=True), err=True)


def cluster_args(name, resource_group, *, timeout: float | None = None, latency: float | None = None):
    """-n and -g of a command that finds an existing cluster, checked like create checks them before
    they go into a request URL (a '/' in a group name would address another resource); with the
    command's --timeout and --simulate-latency, every finding at once."""
    from .. import naming
    from ..errors import ValidationFailed

    missing = [flag for flag, v in (("-n/--name", name), ("-g/--resource-group", resource_group)) if not v]
    if missing:
        raise InputError(f"{' and '.join(missing)} required", code="MISSING_ARGUMENT",
                         remedy="name the cluster and its resource group, e.g. -n train01 -g ml-rg")
    findings = []
    if not naming.CLUSTER_NAME_RE.fullmatch(name):
        findings.append(Finding(code="INVALID_NAME",
                                message=f"cluster name {name!r} is not a name azgpu gives clusters (2-50 "
                                "lowercase letters, digits or hyphens)",
                                remedy="check -n/--name ('provision create' names it)",
                                field="name"))
    if problem := naming.check("resource_group", resource_group):
        findings.append(Finding(code="INVALID_RESOURCE_GROUP", message=problem, remedy="check -g/--resource-group",
                                field="resource_group"))
    findings += number_findings(timeout=timeout, latency=latency)
    if any(f.is_error for f in findings):
        raise ValidationFailed(findings)


def number_findings(*, timeout: float | None = None, latency: float | None = None) -> list[Finding]:
    """--timeout (seconds, above 0) and --simulate-latency (seconds, 0 or more): finite numbers."""
    import math

    out = []
    if timeout is not None and not (math.isfinite(timeout) and timeout > 0):
        out.append(Finding(code="INVALID_TIMEOUT",
                           message=f"--timeout must be a number of seconds above 0, not {timeout:g}",
                           remedy="pass e.g. --timeout 3600, or leave it out to wait as long as Azure works",
                           field="timeout"))
    if latency is not None and not (math.isfinite(latency) and latency >= 0):
        out.append(Finding(code="INVALID_SIMULATE_LATENCY",
                           message=f"--simulate-latency must be 0 or more seconds, not {latency:g}",
                           remedy="pass e.g. --simulate-latency 0 (instant) or 3", field="simulate_latency"))
    return out
