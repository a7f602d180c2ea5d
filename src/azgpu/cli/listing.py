"""`provision list`: every azgpu cluster in the subscription or one resource group."""

from __future__ import annotations

import click

from ..errors import InputError
from . import options
from .options import azure_options, common, emit


def register(cli: click.Group) -> None:
    @cli.command("list")
    @click.option("-g", "--resource-group", default=None, help="Only this resource group (default: the subscription).")
    @azure_options
    @common
    def list_cmd(obj, resource_group, subscription, simulate, simulate_latency, simulate_state):
        """Every azgpu cluster: name, group, location, profile, size, nodes running/total, InfiniBand domains,
        created. One listing of the subscription (found by azgpu's tags) plus one instance listing per scale set."""
        from .. import naming
        from ..deploy import list as list_clusters

        if resource_group is not None and (problem := naming.check("resource_group", resource_group)):
            # Checked before it goes into a request URL: a '/' would address another resource.
            raise InputError(problem, code="INVALID_RESOURCE_GROUP", remedy="e.g. -g ml-rg")
        with options.session_for(subscription, simulate, simulate_latency, simulate_state) as session:
            emit(list_clusters(session, resource_group), obj)
