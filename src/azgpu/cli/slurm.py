"""`provision slurm config|resume|suspend|resume-fail`: azgpu as Slurm's power-saving programs.

slurmctld runs the programs `slurm config` writes, with a hostlist as the only argument
(slurm.conf(5)); they carry the cluster file and every option. Importing this module is cheap:
the Azure SDK loads only inside resume, suspend and resume-fail. What the programs report, the
final error and its remedy included, goes to the power log in one line format (time, pid,
command, hostlist): slurmctld keeps nothing they print.
"""

from __future__ import annotations

import os
import shutil
import socket
from contextlib import contextmanager
from pathlib import Path

import click

from ..errors import AzgpuError, Finding, InputError, ValidationFailed
from ..health.limits import MAX_ROUNDS
from . import options
from .options import ListOption, azure_options, common, emit, log

DEFAULT_STATE_DIR = "/var/lib/azgpu-slurm"
DEFAULT_LOG_FILE = "/var/log/slurm/azgpu-power.log"
# ResumeTimeout, SuspendTimeout and HealthCheckInterval are 16-bit in slurm.conf (S_P_UINT16, src/common/read_config.c);
# 65534 and 65535 stand for NO_VAL16 and INFINITE16 (slurm.h), above is a configuration error (parse_value.c).
UINT16_MAX = 65533
# The cluster file's key for each field a finding can be about: the slurm commands take no -g, -n ...
FILE_KEYS = {"resource_group": "resource-group", "name": "name", "location": "location", "ssh_key": "ssh-key",
             "profile": "profile", "nodes": "nodes", "custom_data": "custom-data"}
EXAMPLES = {"resource-group": "ml-rg", "name": "train01", "location": "eastus", "ssh-key": "/home/slurm/.ssh/id.pub",
            "profile": "nd-h100-v5", "nodes": "16"}


def _default_state_dir() -> str:
    from platformdirs import user_state_dir

    return str(Path(user_state_dir("azgpu")) / "slurm")


def _file_findings(findings: list[Finding], cluster_file: str) -> list[Finding]:
    """Validation's findings as the slurm commands' user can act on them: a missing value is a key of the
    cluster file, since these commands take no -g/-n/-l flags."""
    out = []
    for f in findings:
        key = FILE_KEYS.get(f.field)
        if f.is_error and key and f.code.startswith("MISSING_"):
            value = EXAMPLES.get(key, "...")
            shown = value if key == "nodes" else f'"{value}"'
            f = Finding(code=f.code, message=f"the cluster file {cluster_file} has no '{key}'",
                        remedy=f"set {key} = {shown} in {cluster_file} ('provision slurm' takes the cluster from "
                               "its file only)", source=f.source, field=f.field)
        out.append(f)
    return out


def _relative_paths(cluster_file: str) -> list[Finding]:
    """Paths in the cluster file that the programs read later, from slurmctld's working directory and as
    the Slurm user: a relative one, or one under '~', would name another file (or none) there."""
    from ..request import read_cluster_file

    raw = read_cluster_file(cluster_file)
    base = Path(cluster_file).resolve().parent
    out = []
    for key in ("ssh-key", "ssh_key", "custom-data", "custom_data"):
        value = raw.get(key)
        if not isinstance(value, str) or "\n" in value or value.lstrip().startswith(("ssh-", "ecdsa-", "sk-", "#")):
            continue  # a key or a cloud-init text itself, not a path
        path = Path(value.strip())
        if path.is_absolute():
            continue
        where = path.expanduser() if value.strip().startswith("~") else base / path
        out.append(Finding(code="SLURM_RELATIVE_PATH",
                           message=f"{key} = '{value}' in {cluster_file} is not an absolute path; slurmctld runs the "
                                   "programs from its own directory, as the Slurm user",
                           remedy=f'set {key.replace("_", "-")} = "{where.resolve()}" (an absolute path the Slurm user '
                                  "can read)", field=key.replace("-", "_")))
    return out


def _spec(cluster_file: str, health_check: bool, *, config: bool = False):
    """The cluster file as create validates it. With config, the paths the programs will read must be
    absolute. (The node bootstrap, not cloud-init, installs the health check: health_check is kept for the
    programs' flag.)"""
    from ..spec import validate

    extra = _relative_paths(cluster_file) if config else []
    request = options.make_request({"cluster_file": cluster_file})
    try:
        spec = validate(request, command="create")
    except ValidationFailed as exc:
        raise ValidationFailed(_file_findings([*exc.findings, *extra], cluster_file)) from None
    findings = [f for f in spec.findings or () if f.is_error] + extra
    if findings:
        raise ValidationFailed(_file_findings(findings, cluster_file))
    if not request.resource_group or not request.name:
        missing = [k for k, v in (("name", request.name), ("resource-group", request.resource_group)) if not v]
        raise InputError(f"the cluster file {cluster_file} has no {' and no '.join(repr(k) for k in missing)}",
                         code="SLURM_CLUSTER_FILE",
                         remedy=" and ".join(f'set {k} = "{EXAMPLES[k]}"' for k in missing) + f" in {cluster_file}")
    return request, spec


SBIN = "/usr/sbin:/sbin"  # where slurmctld lives when the user's PATH has no sbin (Debian's for non-root users)


def _controller_version() -> str:
    """The controller's Slurm version: `slurmctld -V` (slurm-wlm 24.11.5), else `scontrol --version`, which
    on 22.05 needs a configuration to read before it answers."""
    import subprocess

    for argv in (["slurmctld", "-V"], ["scontrol", "--version"]):
        found = shutil.which(argv[0]) or shutil.which(argv[0], path=SBIN)
        if not found:
            continue
        try:
            done = subprocess.run([found, *argv[1:]], capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            continue
        words = done.stdout.split()
        if done.returncode == 0 and words:
            return words[-1]
    raise InputError("cannot tell the controller's Slurm version: neither 'slurmctld -V' nor 'scontrol --version' "
                     "answered here", code="SLURM_VERSION_UNKNOWN",
                     remedy="pass the release 'slurmctld -V' prints on the controller, e.g. --slurm-version 24.11")


def _config_findings(program_dir: str | None, state_dir: str | None, log_file: str | None, zones, locations,
                     subscription: str | None) -> list[Finding]:
    """What `slurm config` writes into slurm.conf and the programs, checked before anything is written."""
    from ..deploy.session import check_subscription_id
    from ..spec import check_fallbacks

    out = list(check_fallbacks(zones or (), locations or ()))
    for flag, value in (("--program-dir", program_dir), ("--state-dir", state_dir), ("--log-file", log_file)):
        if value is None:
            continue
        bad = [ch for ch in value if not ch.isprintable() or (flag == "--program-dir" and (ch.isspace() or ch == "#"))]
        if bad or not value:
            what = "a space, a '#' or a control character" if flag == "--program-dir" else "a control character"
            out.append(Finding(code="SLURM_INVALID_PATH", message=f"{flag} {value!r} holds {what}",
                               remedy=f"pass a {flag} without it: slurm.conf reads one setting a line, up to a '#'"
                               if flag == "--program-dir" else f"pass a {flag} without it",
                               field=flag.lstrip("-").replace("-", "_")))
        elif not os.path.isabs(value):
            out.append(Finding(code="SLURM_RELATIVE_PATH",
                               message=f"{flag} {value} is not an absolute path; slurmctld runs the programs from its "
                                       "own directory", remedy=f"pass {flag} {os.path.abspath(value)}",
                               field=flag.lstrip("-").replace("-", "_")))
    if subscription is not None:
        try:
            check_subscription_id(subscription)
        except InputError as exc:
            out.append(Finding(code=exc.code, message=exc.message, remedy=exc.remedy, field="subscription"))
    return out


def _power_options(fn):
    decorators = [
        click.option("-f", "--file", "cluster_file", required=True,
                     help="Cluster file (TOML): the cluster the CLOUD nodes belong to, its most nodes in 'nodes'."),
        click.option("--state-dir", default=None, metavar="DIR",
                     help="Where the cache of node-to-VM bindings and the lock live [user state dir]/slurm."),
        click.option("--log-file", default=None, metavar="FILE", help="Append one line per event to this file."),
        click.option("--scontrol", default="scontrol", show_default=True,
                     help="The scontrol to report to slurmctld with."),
        click.option("--health-check", is_flag=True,
                     help="HealthCheckProgram reads azgpu's node check (passed by the programs slurm config wrote)."),
        click.option("--conf-server", default=None, metavar="HOST[:PORT]",
                     help="Resume starts slurmd on each new node, fetching its configuration from here (configless)."),
        click.option("--slurm-version", default=None, metavar="X.Y", help="The controller's Slurm version."),
        click.option("--munge-key", default=None, metavar="FILE", help="The munge key resume gives the nodes."),
        click.option("--node-check-interval", type=click.IntRange(min=1), default=None,
                     help="Seconds between the nodes' background node checks."),
    ]
    for d in reversed(decorators):
        fn = d(fn)
    return fn


def _reported(obj, command: str, hostlist: str, log_file: str | None, body):
    """Run a power program's body; its final error and remedy reach the power log as every event does
    (time, pid, command, hostlist), and the CLI then exits with the error's status without printing it
    a second time in another format."""
    from ..slurm.power import EventLog
    from .options import for_session

    events = EventLog(log_file, echo=log)  # a log that cannot be written is the error itself
    try:
        return body(events)
    except ValidationFailed as exc:
        for f in exc.errors:
            events.error(command, hostlist, InputError(f.message, code=f.code, remedy=for_session(f.remedy, obj)))
        exc.reported = not obj.get("debug")
        raise
    except AzgpuError as exc:
        exc.remedy = for_session(exc.remedy, obj)  # the log's remedy fits the session, as the CLI's does
        events.error(command, hostlist, exc)
        exc.reported = not obj.get("debug")
        raise
    except (click.exceptions.Exit, click.ClickException, KeyboardInterrupt):
        raise
    except Exception as exc:  # slurmctld discards a traceback: the log must say it
        if obj.get("debug"):
            raise
        error = AzgpuError(f"{type(exc).__name__}: {exc}", code="SLURM_PROGRAM_FAILED",
                           remedy="run it again by hand with --debug and report the traceback")
        error.exit_code = 1
        events.error(command, hostlist, error)
        error.reported = True
        raise error from None


def register(cli: click.Group) -> None:
    @cli.group("slurm")
    def slurm_group():
        """Slurm power saving: CLOUD nodes per InfiniBand domain that azgpu creates and removes (docs/slurm.md)."""

    @slurm_group.command("config")
    @click.option("-f", "--file", "cluster_file", required=True,
                  help="Cluster file (TOML); 'nodes' is the most nodes Slurm may power up.")
    @click.option("--out-dir", default=None, metavar="DIR",
                  help="Write azgpu.conf, gres.conf, topology.conf and the three programs here (programs 0755).")
    @click.option("--program-dir", default=None, metavar="DIR",
                  help="Where slurm.conf finds the programs [--out-dir, else /etc/slurm].")
    @click.option("--state-dir", default=None, metavar="DIR", help=f"The programs' --state-dir [{DEFAULT_STATE_DIR}].")
    @click.option("--log-file", default=None, metavar="FILE", help=f"The programs' --log-file [{DEFAULT_LOG_FILE}].")
    @click.option("--resume-timeout", type=click.IntRange(min=1, max=UINT16_MAX), default=None,
                  help="ResumeTimeout in seconds [1800].")
    @click.option("--suspend-time", type=click.IntRange(min=1), default=None, help="SuspendTime in seconds [600].")
    @click.option("--suspend-timeout", type=click.IntRange(min=1, max=UINT16_MAX), default=None,
                  help="SuspendTimeout in seconds [300].")
    @click.option("--health-check", is_flag=True,
                  help="HealthCheckProgram reads azgpu's node check, run in the background on every node (drains a "
                       "node it finds faulty).")
    @click.option("--health-check-interval", type=click.IntRange(min=1, max=UINT16_MAX), default=None,
                  help="HealthCheckInterval in seconds [300].")
    @click.option("--node-check-interval", type=click.IntRange(min=1), default=None,
                  help="Seconds between the nodes' background runs of azgpu's node check [3600].")
    @click.option("--slurm-version", default=None, metavar="X.Y[.Z]",
                  help="The controller's Slurm version [scontrol --version]: the fragment holds only what it accepts.")
    @click.option("--conf-server", default=None, metavar="HOST[:PORT]",
                  help="Where new nodes' slurmd fetches its configuration (slurmd --conf-server) [this host's name].")
    @click.option("--munge-key", default=None, metavar="FILE",
                  help="The munge key resume gives new nodes, readable by SlurmUser [/etc/munge/munge.key].")
    @click.option("--keep-racks", is_flag=True,
                  help="Vertical-connect sizes: keep the rack partitions out of suspend (SuspendExcParts).")
    @click.option("--zones", cls=ListOption, help="Zones resume tries in order on capacity errors.")
    @click.option("--fallback-locations", cls=ListOption, help="Locations resume tries in order on capacity errors.")
    @azure_options
    @common
    def config_cmd(obj, cluster_file, out_dir, program_dir, state_dir, log_file, resume_timeout, suspend_time,
                   suspend_timeout, health_check, health_check_interval, node_check_interval, slurm_version,
                   conf_server, munge_key, keep_racks, zones, fallback_locations, subscription, simulate,
                   simulate_latency,
                   simulate_state):
        """The slurm.conf fragment (CLOUD nodes, partitions, power saving, topology) and the programs slurmctld runs.

        Without --out-dir the fragment goes to stdout. Nothing talks to Azure.
        """
        from ..slurm import conf
        from .outputs import write_files

        checked = _config_findings(program_dir, state_dir, log_file, zones, fallback_locations, subscription)
        try:
            _, spec = _spec(cluster_file, health_check, config=True)
        except ValidationFailed as exc:
            raise ValidationFailed([*exc.findings, *checked]) from None
        if any(f.is_error for f in checked):
            raise ValidationFailed(checked)
        if keep_racks and not spec.profile.vertical_connect:
            raise InputError(f"--keep-racks is for vertical-connect sizes (ND GB200/GB300 v6); {spec.size.name} has no "
                             "racks", code="SLURM_NO_RACKS", remedy="leave --keep-racks out")
        from ..slurm.bootstrap import DEFAULT_MUNGE_KEY, JoinSettings

        version = slurm_version or _controller_version()
        join = JoinSettings(conf_server or socket.getfqdn(), version, munge_key or DEFAULT_MUNGE_KEY,
                            **({"node_check_interval": node_check_interval} if node_check_interval else {}))
        extra: list[str] = ["--conf-server", join.conf_server, "--slurm-version", version, "--munge-key",
                            str(Path(join.munge_key).resolve()), "--node-check-interval", str(join.node_check_interval)]
        if subscription:
            extra += ["--subscription", subscription]
        if health_check:
            extra.append("--health-check")
        for z in zones or ():
            extra += ["--zone", z]
        for loc in fallback_locations or ():
            extra += ["--fallback-location", loc]
        scontrol = shutil.which("scontrol")
        if scontrol:  # slurmctld runs the programs without PATH
            extra += ["--scontrol", scontrol]
        env = {}
        if simulate:  # the programs run against the same simulated subscription, without its latency
            from ..deploy.simulate import state_file

            state = state_file(simulate_state).resolve()
            extra += ["--simulate", "--simulate-state", str(state),
                      "--simulate-latency", str(simulate_latency if simulate_latency is not None else 0)]
            # azgpu's cache beside the simulated state, not in the home of whoever runs slurmctld
            env["XDG_CACHE_HOME"] = str(state.parent / "cache")
        settings = {k: v for k, v in (("resume_timeout", resume_timeout), ("suspend_time", suspend_time),
                                      ("suspend_timeout", suspend_timeout),
                                      ("health_check_interval", health_check_interval)) if v}
        where = program_dir or (str(Path(out_dir).resolve()) if out_dir else "/etc/slurm")
        files = conf.files(spec, program_dir=where, cluster_file=str(Path(cluster_file).resolve()),
                           state_dir=state_dir or DEFAULT_STATE_DIR, log_file=log_file or DEFAULT_LOG_FILE,
                           extra=extra, env=env, health_check=health_check, slurm_version=version,
                           keep_racks=keep_racks, **settings)
        if out_dir is None:
            click.echo(files["azgpu.conf"], nl=False)
            return
        write_files(out_dir, files)
        for name in files:
            if name.startswith("azgpu-"):
                os.chmod(Path(out_dir) / name, 0o755)
        emit({"out_dir": str(Path(out_dir)), "files": sorted(files)}, obj)

    def _context(events, cluster_file, state_dir, log_file, scontrol, health_check, conf_server, slurm_version,
                 munge_key, node_check_interval, subscription, simulate, simulate_latency, simulate_state, zones=(),
                 fallback_locations=(), **extra):
        from ..slurm.power import Context, Slurmctld
        from ..spec import check_fallbacks

        bad = [f for f in check_fallbacks(zones, fallback_locations) if f.is_error]
        if bad:
            raise ValidationFailed(bad)
        request, spec = _spec(cluster_file, health_check)
        if conf_server:  # resume starts slurmd on each new node (azgpu.slurm.bootstrap)
            from ..slurm.bootstrap import DEFAULT_MUNGE_KEY, JoinSettings

            interval = {"node_check_interval": node_check_interval} if node_check_interval else {}
            extra["join"] = JoinSettings(conf_server, slurm_version or _controller_version(),
                                         munge_key or DEFAULT_MUNGE_KEY, **interval)

        @contextmanager
        def open_session():
            with options.session_for(subscription, simulate, simulate_latency, simulate_state) as session:
                yield session

        def price(size: str, location: str):
            from ..pricing import lookup

            return lookup(size, location, simulated=bool(simulate))

        return Context(request, spec, open_session, state_dir or _default_state_dir(), Slurmctld(scontrol), events,
                       zones=list(zones), fallback_locations=list(fallback_locations), price=price, **extra)

    @slurm_group.command("resume")
    @click.argument("hostlist")
    @_power_options
    @click.option("--zone", "zones", multiple=True, help="A zone to try on capacity errors (repeat, in order).")
    @click.option("--fallback-location", "fallback_locations", multiple=True,
                  help="A location to try on capacity errors (repeat, in order).")
    @click.option("--max-rounds", type=click.IntRange(min=0, max=10), default=MAX_ROUNDS, show_default=True,
                  help="Rounds of replacing nodes that fail the health check (0 to 10).")
    @click.option("--node-timeout", type=float, default=None, help="Seconds the health check may take per node.")
    @azure_options
    @common
    def resume_cmd(obj, hostlist, max_rounds, node_timeout, **values):
        """ResumeProgram: create the VMs for HOSTLIST, check them, give slurmctld their addresses.

        Exit 1 when a node could not be brought up: those nodes are set DOWN with the reason.
        """
        def body(events):
            from ..deploy import CheckOptions
            from ..health.limits import check_options
            from ..slurm.power import ResumeIncomplete, resume

            # Before the state, the lock, scontrol or Azure: nan, inf, 0 and -1 are refused, never read as the default.
            check_options(node_timeout=node_timeout)
            node_check = CheckOptions(node_timeout=node_timeout) if node_timeout is not None else CheckOptions()
            ctx = _context(events, **values, max_rounds=max_rounds, node_check=node_check)
            result = resume(ctx, hostlist)
            emit(result, obj)
            if result["failed"]:
                where = values["log_file"] or "stderr"
                raise ResumeIncomplete(f"{len(result['failed'])} node(s) did not come up and are DOWN with the reason",
                                       remedy=f"see the log ({where}) and 'scontrol show node'; "
                                              "'scontrol update nodename=... state=resume' once the cause is fixed")

        _reported(obj, "resume", hostlist, values["log_file"], body)

    @slurm_group.command("suspend")
    @click.argument("hostlist")
    @_power_options
    @azure_options
    @common
    def suspend_cmd(obj, hostlist, **values):
        """SuspendProgram: free the VMs that carry HOSTLIST's nodes (on rack sizes: whole racks once unused)."""
        def body(events):
            from ..slurm.power import suspend

            emit(suspend(_context(events, **values), hostlist), obj)

        _reported(obj, "suspend", hostlist, values["log_file"], body)

    @slurm_group.command("resume-fail")
    @click.argument("hostlist")
    @click.option("--keep", is_flag=True, help="Leave the nodes' VMs for inspection instead of deleting them.")
    @_power_options
    @azure_options
    @common
    def resume_fail_cmd(obj, hostlist, keep, **values):
        """ResumeFailProgram: give HOSTLIST's DOWN nodes azgpu's reason back and free their VMs (unless --keep)."""
        def body(events):
            from ..slurm.power import resume_fail

            emit(resume_fail(_context(events, **values), hostlist, keep=keep), obj)

        _reported(obj, "resume-fail", hostlist, values["log_file"], body)
