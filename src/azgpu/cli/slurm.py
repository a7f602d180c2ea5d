"""`provision slurm config|resume|suspend|resume-fail`: azgpu as Slurm's power-saving programs.

slurmctld runs the programs `slurm config` writes, with a hostlist as the only argument
(slurm.conf(5)); they carry the cluster file and every option. Importing this module is cheap:
the Azure SDK loads only inside resume, suspend and resume-fail.
"""

from __future__ import annotations

import os
import shutil
import socket
from contextlib import contextmanager
from pathlib import Path

import click

from ..errors import InputError
from ..health.limits import MAX_ROUNDS
from . import options
from .options import ListOption, azure_options, common, emit, log


def _default_state_dir() -> str:
    from platformdirs import user_state_dir

    return str(Path(user_state_dir("azgpu")) / "slurm")


def _spec(cluster_file: str, health_check: bool):
    """The cluster file as create validates it. (The node bootstrap, not cloud-init, installs the health
    check: health_check is kept for the programs' flag.)"""
    from ..spec import validate

    request = options.make_request({"cluster_file": cluster_file})
    spec = validate(request, command="create")
    if spec.findings and any(f.is_error for f in spec.findings):
        from ..errors import ValidationFailed

        raise ValidationFailed(list(spec.findings))
    if not request.resource_group or not request.name:
        raise InputError("the cluster file names no cluster or resource group", code="SLURM_CLUSTER_FILE",
                         remedy="set name = \"...\" and resource-group = \"...\" in the cluster file")
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
                     remedy="pass --slurm-version X.Y (what 'slurmctld -V' prints on the controller)")


def _power_options(fn):
    decorators = [
        click.option("-f", "--file", "cluster_file", required=True,
                     help="Cluster file (TOML): the cluster the CLOUD nodes belong to, its most nodes in 'nodes'."),
        click.option("--state-dir", default=None, metavar="DIR",
                     help="Where the node-to-VM mapping and the lock live [user state dir]/slurm."),
        click.option("--log-file", default=None, metavar="FILE", help="Append one line per event to this file."),
        click.option("--scontrol", default="scontrol", show_default=True, help="The scontrol to report to slurmctld with."),
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
    @click.option("--state-dir", default=None, metavar="DIR", help="The programs' --state-dir [/var/lib/azgpu-slurm].")
    @click.option("--log-file", default=None, metavar="FILE",
                  help="The programs' --log-file [/var/log/slurm/azgpu-power.log].")
    @click.option("--resume-timeout", type=click.IntRange(min=1), default=None, help="ResumeTimeout in seconds [1800].")
    @click.option("--suspend-time", type=click.IntRange(min=1), default=None, help="SuspendTime in seconds [600].")
    @click.option("--suspend-timeout", type=click.IntRange(min=1), default=None,
                  help="SuspendTimeout in seconds [300].")
    @click.option("--health-check", is_flag=True,
                  help="HealthCheckProgram reads azgpu's node check, run in the background on every node (drains a "
                       "node it finds faulty).")
    @click.option("--health-check-interval", type=click.IntRange(min=1), default=None,
                  help="HealthCheckInterval in seconds [300].")
    @click.option("--node-check-interval", type=click.IntRange(min=1), default=None,
                  help="Seconds between the nodes' background runs of azgpu's node check [3600].")
    @click.option("--slurm-version", default=None, metavar="X.Y[.Z]",
                  help="The controller's Slurm version [scontrol --version]: the fragment holds only what it accepts.")
    @click.option("--conf-server", default=None, metavar="HOST[:PORT]",
                  help="Where new nodes' slurmd fetches its configuration (slurmd --conf-server) [this host's name].")
    @click.option("--munge-key", default=None, metavar="FILE",
                  help="The munge key resume gives new nodes, readable by SlurmUser [/etc/munge/munge.key].")
    @click.option("--zones", cls=ListOption, help="Zones resume tries in order on capacity errors.")
    @click.option("--fallback-locations", cls=ListOption, help="Locations resume tries in order on capacity errors.")
    @azure_options
    @common
    def config_cmd(obj, cluster_file, out_dir, program_dir, state_dir, log_file, resume_timeout, suspend_time,
                   suspend_timeout, health_check, health_check_interval, node_check_interval, slurm_version,
                   conf_server, munge_key, zones, fallback_locations, subscription, simulate, simulate_latency,
                   simulate_state):
        """The slurm.conf fragment (CLOUD nodes, partitions, power saving, topology) and the programs slurmctld runs.

        Without --out-dir the fragment goes to stdout. Nothing talks to Azure.
        """
        from ..slurm import conf
        from .outputs import write_files

        from ..slurm.bootstrap import DEFAULT_MUNGE_KEY, JoinSettings

        _, spec = _spec(cluster_file, health_check)
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
                           state_dir=state_dir or "/var/lib/azgpu-slurm",
                           log_file=log_file or "/var/log/slurm/azgpu-power.log", extra=extra, env=env,
                           health_check=health_check, slurm_version=version, **settings)
        if out_dir is None:
            click.echo(files["azgpu.conf"], nl=False)
            return
        write_files(out_dir, files)
        for name in files:
            if name.startswith("azgpu-"):
                os.chmod(Path(out_dir) / name, 0o755)
        emit({"out_dir": str(Path(out_dir)), "files": sorted(files)}, obj)

    def _context(cluster_file, state_dir, log_file, scontrol, health_check, conf_server, slurm_version, munge_key,
                 node_check_interval, subscription, simulate, simulate_latency, simulate_state, **extra):
        from ..slurm.power import Context, EventLog, Slurmctld

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

        return Context(request, spec, open_session, state_dir or _default_state_dir(), Slurmctld(scontrol),
                       EventLog(log_file, echo=log), **extra)

    @slurm_group.command("resume")
    @click.argument("hostlist")
    @_power_options
    @click.option("--zone", "zones", multiple=True, help="A zone to try on capacity errors (repeat, in order).")
    @click.option("--fallback-location", "fallback_locations", multiple=True,
                  help="A location to try on capacity errors (repeat, in order).")
    @click.option("--max-rounds", type=click.IntRange(min=0), default=MAX_ROUNDS, show_default=True,
                  help="Rounds of replacing nodes that fail the health check.")
    @click.option("--node-timeout", type=float, default=None, help="Seconds the health check may take per node.")
    @azure_options
    @common
    def resume_cmd(obj, hostlist, zones, fallback_locations, max_rounds, node_timeout, **values):
        """ResumeProgram: create the VMs for HOSTLIST, check them, give slurmctld their addresses.

        Exit 1 when a node could not be brought up: those nodes are set DOWN with the reason (resume-fail).
        """
        from ..slurm.power import ResumeIncomplete, resume

        from ..deploy import CheckOptions

        node_check = CheckOptions(node_timeout=node_timeout) if node_timeout else CheckOptions()
        ctx = _context(**values, zones=list(zones), fallback_locations=list(fallback_locations),
                       max_rounds=max_rounds, node_check=node_check)
        result = resume(ctx, hostlist)
        emit(result, obj)
        if result["failed"]:
            raise ResumeIncomplete(f"{len(result['failed'])} node(s) did not come up and are DOWN with the reason",
                                   remedy=f"see the log ({values['log_file'] or 'stderr'}) and 'scontrol show node'; "
                                          "'scontrol update nodename=... state=resume' once the cause is fixed")

    @slurm_group.command("suspend")
    @click.argument("hostlist")
    @_power_options
    @azure_options
    @common
    def suspend_cmd(obj, hostlist, **values):
        """SuspendProgram: delete exactly the VMs that carry HOSTLIST's nodes."""
        from ..slurm.power import suspend

        emit(suspend(_context(**values), hostlist), obj)

    @slurm_group.command("resume-fail")
    @click.argument("hostlist")
    @click.option("--keep", is_flag=True, help="Leave the nodes' VMs for inspection instead of deleting them.")
    @_power_options
    @azure_options
    @common
    def resume_fail_cmd(obj, hostlist, keep, **values):
        """ResumeFailProgram: set HOSTLIST DOWN with the reason and delete their VMs (unless --keep)."""
        from ..slurm.power import resume_fail

        emit(resume_fail(_context(**values), hostlist, keep=keep), obj)
