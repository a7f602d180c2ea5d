"""`provision slurm config|resume|suspend|resume-fail`: azgpu as Slurm's power-saving programs.

slurmctld runs the programs `slurm config` writes, with a hostlist as the only argument
(slurm.conf(5)); they carry the cluster file and every option. Importing this module is cheap:
the Azure SDK loads only inside resume, suspend and resume-fail.
"""

from __future__ import annotations

import os
import shutil
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
    """The cluster file as create validates it; with health_check its cloud-init also installs
    Slurm's HealthCheckProgram (merged with the file's own custom-data, if any)."""
    from ..spec import validate

    request = options.make_request({"cluster_file": cluster_file})
    spec = validate(request, command="create")
    if spec.findings and any(f.is_error for f in spec.findings):
        from ..errors import ValidationFailed

        raise ValidationFailed(list(spec.findings))
    if health_check:
        from ..cloud_init import compose
        from ..slurm.health_check import cloud_config

        request = request.with_changes(custom_data=compose(cloud_config(spec.size), request.custom_data))
        spec = validate(request, command="create")
    if not request.resource_group or not request.name:
        raise InputError("the cluster file names no cluster or resource group", code="SLURM_CLUSTER_FILE",
                         remedy="set name = \"...\" and resource-group = \"...\" in the cluster file")
    return request, spec


def _power_options(fn):
    decorators = [
        click.option("-f", "--file", "cluster_file", required=True,
                     help="Cluster file (TOML): the cluster the CLOUD nodes belong to, its most nodes in 'nodes'."),
        click.option("--state-dir", default=None, metavar="DIR",
                     help="Where the node-to-VM mapping and the lock live [user state dir]/slurm."),
        click.option("--log-file", default=None, metavar="FILE", help="Append one line per event to this file."),
        click.option("--scontrol", default="scontrol", show_default=True, help="The scontrol to report to slurmctld with."),
        click.option("--health-check", is_flag=True,
                     help="The nodes' cloud-init installs azgpu's node check as Slurm's HealthCheckProgram."),
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
    @click.option("--health-check", is_flag=True,
                  help="Install azgpu's node check as HealthCheckProgram on every node (drains a failing node).")
    @click.option("--zones", cls=ListOption, help="Zones resume tries in order on capacity errors.")
    @click.option("--fallback-locations", cls=ListOption, help="Locations resume tries in order on capacity errors.")
    @azure_options
    @common
    def config_cmd(obj, cluster_file, out_dir, program_dir, state_dir, log_file, resume_timeout, suspend_time,
                   health_check, zones, fallback_locations, subscription, simulate, simulate_latency, simulate_state):
        """The slurm.conf fragment (CLOUD nodes, partitions, power saving, topology) and the programs slurmctld runs.

        Without --out-dir the fragment goes to stdout. Nothing talks to Azure.
        """
        from ..slurm import conf
        from .outputs import write_files

        _, spec = _spec(cluster_file, health_check)
        extra: list[str] = []
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
        settings = {k: v for k, v in (("resume_timeout", resume_timeout), ("suspend_time", suspend_time)) if v}
        where = program_dir or (str(Path(out_dir).resolve()) if out_dir else "/etc/slurm")
        files = conf.files(spec, program_dir=where, cluster_file=str(Path(cluster_file).resolve()),
                           state_dir=state_dir or "/var/lib/azgpu-slurm",
                           log_file=log_file or "/var/log/slurm/azgpu-power.log", extra=extra, env=env,
                           health_check=health_check, **settings)
        if out_dir is None:
            click.echo(files["azgpu.conf"], nl=False)
            return
        write_files(out_dir, files)
        for name in files:
            if name.startswith("azgpu-"):
                os.chmod(Path(out_dir) / name, 0o755)
        emit({"out_dir": str(Path(out_dir)), "files": sorted(files)}, obj)

    def _context(cluster_file, state_dir, log_file, scontrol, health_check, subscription, simulate,
                 simulate_latency, simulate_state, **extra):
        from ..slurm.power import Context, EventLog, Slurmctld

        request, spec = _spec(cluster_file, health_check)

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
