"""provision outputs: what MPI launchers and schedulers read about a deployed cluster.

The JSON comes from azgpu.deploy.lifecycle.outputs (the one place that reads Azure); the text
formats are pure functions of it in azgpu.scheduler_files. Importing this module is cheap.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import click

from ..errors import InputError
from . import options
from .options import azure_options, cluster_args, common, emit

FORMATS = ("json", "hostfile", "machinefile", "slurm", "nccl-env", "dstack-fleet")
HOSTS_FORMATS = ("hostfile", "machinefile")


def _check(fmt: str, query: str | None, address: str | None, slots: int | None, out_dir: str | None) -> None:
    """Refuse flag combinations that cannot work, before anything talks to Azure."""
    if query and fmt != "json":
        raise InputError(f"--query selects from structured output, and --format {fmt} is a file for a tool",
                         code="QUERY_NEEDS_JSON",
                         remedy="use --format json (with -o json, yaml, tsv or table) to --query, e.g. "
                                "--format json --query \"ib_domains[].nodes[].ip\"")
    for flag, value in (("--address", address), ("--slots", slots)):
        if value is not None and fmt not in HOSTS_FORMATS:
            raise InputError(f"{flag} applies to --format hostfile or machinefile, not {fmt}",
                             code="OPTION_NOT_FOR_FORMAT",
                             remedy=f"drop {flag}, or use --format hostfile or --format machinefile")
    if out_dir is not None:
        if fmt == "json":
            raise InputError("--out-dir writes the text formats' files; JSON goes to stdout",
                             code="OUT_DIR_NEEDS_TEXT_FORMAT",
                             remedy="drop --out-dir and redirect the command's "
                                    "stdout to a file instead (> outputs.json)")
        if Path(out_dir).exists() and not Path(out_dir).is_dir():
            raise InputError(f"--out-dir '{out_dir}' is a file", code="INVALID_OUT_DIR", remedy="pass a directory path")


def write_files(out_dir: str, files: dict[str, str]) -> None:
    """Each file replaces its old version in one step (write beside it, then rename), so a
    scheduler reading the directory never sees half a file."""
    directory = Path(out_dir)
    try:
        directory.mkdir(parents=True, exist_ok=True)
        for name, text in files.items():
            fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{name}.", suffix=".tmp")
            try:
                with os.fdopen(fd, "w") as fh:
                    fh.write(text)
                os.chmod(tmp, 0o644)  # read by slurmctld/slurmd and mpirun, not only by this user
                os.replace(tmp, directory / name)
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise
    except OSError as exc:
        raise InputError(f"cannot write to '{out_dir}': {exc.strerror}", code="INVALID_OUT_DIR",
                         remedy="pass a writable --out-dir") from None


def register(cli: click.Group) -> None:
    @cli.command("outputs")
    @click.option("-n", "--name", default=None, help="Cluster name.")
    @click.option("-g", "--resource-group", default=None, help="Resource group.")
    @click.option("--format", "fmt", type=click.Choice(FORMATS), default="json", show_default=True,
                  help="json: nodes per InfiniBand domain, public IPs, NVLink racks (-o and --query apply); "
                       "hostfile: Open MPI 'host slots=N'; machinefile: MPICH/Intel MPI 'host:N'; "
                       "slurm: slurm.conf.nodes, gres.conf, topology.conf, topology.yaml; nccl-env: export lines; "
                       "dstack-fleet: a dstack SSH fleet per InfiniBand domain (placement: cluster).")
    @click.option("--address", type=click.Choice(("private", "public", "hostname")), default=None,
                  help="Hosts in hostfile/machinefile by private IP (default), public IP or hostname.")
    @click.option("--slots", type=click.IntRange(min=1), default=None, metavar="N",
                  help="Slots per host in hostfile/machinefile [GPUs per node].")
    @click.option("--out-dir", default=None, metavar="DIR",
                  help="Write the text format's file(s) to this directory, each replaced in one step; "
                       "stdout then lists them.")
    @click.option("--ssh-user", default=None, metavar="USER",
                  help="dstack-fleet: the user dstack logs in as [azureuser, azgpu's admin user].")
    @click.option("--identity-file", default=None, metavar="FILE",
                  help="dstack-fleet: the private key of the cluster's --ssh-key [~/.ssh/id_rsa].")
    @azure_options
    @common
    def outputs_cmd(obj, name, resource_group, fmt, address, slots, out_dir, ssh_user, identity_file, subscription,
                    simulate, simulate_latency, simulate_state):
        """What MPI launchers and schedulers need: hostfiles, Slurm configuration, NCCL environment.

        --query applies to --format json, whose -o may be json, yaml, tsv or table. The other formats
        are files for tools: --query with them is refused (exit 2) rather than guessed at. Without
        --out-dir, --format slurm prints its four files in one stream, each after a
        '# ---- NAME ----' line.
        """
        from ..deploy import lifecycle
        from ..scheduler_files import render_files, slurm_stream

        cluster_args(name, resource_group, latency=simulate_latency)
        _check(fmt, obj["query"], address, slots, out_dir)
        if (ssh_user or identity_file) and fmt != "dstack-fleet":
            raise InputError("--ssh-user and --identity-file apply to --format dstack-fleet",
                             code="OPTION_NOT_FOR_FORMAT",
                             remedy="drop them, or use --format dstack-fleet")
        with options.session_for(subscription, simulate, simulate_latency, simulate_state) as session:
            out = lifecycle.outputs(session, name, resource_group)
        if fmt == "json":
            emit(out, obj)
            return
        if fmt == "dstack-fleet":
            from ..dstack_fleet import DEFAULT_IDENTITY, DEFAULT_USER, fleet_files

            files = fleet_files(out, user=ssh_user or DEFAULT_USER, identity_file=identity_file or DEFAULT_IDENTITY)
        else:
            files = render_files(out, fmt, address=address or "private", slots=slots)
        if out_dir is not None:
            write_files(out_dir, files)
            emit({"out_dir": str(Path(out_dir)),
                  "files": [{"name": n, "bytes": len(t.encode())} for n, t in files.items()]},
                 obj)
        else:
            click.echo(slurm_stream(files) if fmt in ("slurm", "dstack-fleet") else "".join(files.values()), nl=False)
