"""azgpu: provision Azure GPU clusters correctly the first time.

    import azgpu
    req = azgpu.build_request(profile="nd-a100-v4", name="train01", nodes=16, location="eastus")
    spec = azgpu.validate(req)                # raises azgpu.ValidationFailed with every finding
    plan = azgpu.build_plan(spec)
    template = azgpu.render_arm(plan)         # dict
    bicep = azgpu.render_bicep(plan)          # text
    cost = azgpu.estimate_cost(plan)          # Azure Retail Prices API: per hour and per month
    with azgpu.simulated_session() as session:    # the simulated subscription of --simulate, offline
        changes = azgpu.what_if(session, req)     # loads the Azure SDK

Nothing here imports the Azure SDK; only azgpu.deploy does, when it deploys.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .errors import AzgpuError, AzureError, Finding, InputError, NotFoundError, ProfileError, ValidationFailed

if TYPE_CHECKING:
    from .images import Image
    from .images import catalog as image_catalog
    from .plan import Plan, build_plan
    from .profiles import Profile, Size, find_size, list_profiles, load_profile
    from .render.arm import render_arm, render_arm_parameters
    from .render.bicep import render_bicep, render_bicepparam
    from .request import Request, build_request, read_cluster_file
    from .spec import Spec, validate

__version__ = "0.1.0"

# The Python face loads on first use (PEP 562): every azgpu module imports this package first, and
# `provision --help` or a command that talks to Azure should not pay for the offline core it does not run.
_LAZY = {
    "Image": ("images", "Image"), "image_catalog": ("images", "catalog"), "Plan": ("plan", "Plan"),
    "build_plan": ("plan", "build_plan"), "Profile": ("profiles", "Profile"), "Size": ("profiles", "Size"),
    "find_size": ("profiles", "find_size"), "list_profiles": ("profiles", "list_profiles"),
    "load_profile": ("profiles", "load_profile"), "render_arm": ("render.arm", "render_arm"),
    "render_arm_parameters": ("render.arm", "render_arm_parameters"), "render_bicep": ("render.bicep", "render_bicep"),
    "render_bicepparam": ("render.bicep", "render_bicepparam"), "Request": ("request", "Request"),
    "build_request": ("request", "build_request"), "read_cluster_file": ("request", "read_cluster_file"),
    "Spec": ("spec", "Spec"), "validate": ("spec", "validate"),
}


def __getattr__(name: str):
    if name not in _LAZY:
        raise AttributeError(f"module 'azgpu' has no attribute {name!r}")
    import importlib

    module, attr = _LAZY[name]
    value = getattr(importlib.import_module(f"{__name__}.{module}"), attr)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


def what_if(session, request: Request, *, currency: str = "USD", prices: bool = True):
    """What `provision create` would change in the subscription, resource by resource and instance
    by instance, with the cost (an azgpu.changes.WhatIf: .as_dict(), azgpu.changes.format_what_if()).
    Writes nothing; loads the Azure SDK."""
    from .deploy.whatif import what_if as _what_if

    return _what_if(session, request, currency=currency, prices=prices)


def simulated_session(*, state: str | None = None, latency: float = 0.0):
    """A context manager giving a Session (azgpu.deploy.session.Session) against the simulated subscription that
    `provision ... --simulate` runs against: no account, no network, no request leaves the process.

        with azgpu.simulated_session() as session:
            azgpu.deploy.create(session, request)

    state: the file holding the simulated cloud (default: AZGPU_SIMULATE_STATE, else the user state directory, as
    --simulate-state), so `provision status --simulate` sees what a script made. latency: seconds each long-running
    operation takes (0, the default: none, on a virtual clock; the CLI's --simulate-latency defaults to 3)."""
    from .deploy.simulate import simulated_session as _simulated_session

    return _simulated_session(latency=latency, state=state)


def estimate_cost(plan: Plan, *, currency: str = "USD"):
    """A plan's price per hour and per month from the Azure Retail Prices API (a pricing.Estimate:
    .as_dict()); "unknown" with the reason when offline. Loads no Azure SDK."""
    from .pricing import plan_estimate

    return plan_estimate(plan, currency=currency)

__all__ = [
    "AzgpuError", "AzureError", "Finding", "Image", "InputError", "NotFoundError", "Plan", "Profile", "ProfileError",
    "Request", "Size", "Spec", "ValidationFailed", "build_request", "find_size", "image_catalog", "list_profiles",
    "load_profile", "build_plan", "read_cluster_file", "render_arm", "render_arm_parameters", "render_bicep",
    "render_bicepparam", "validate", "what_if", "estimate_cost", "simulated_session",
]
