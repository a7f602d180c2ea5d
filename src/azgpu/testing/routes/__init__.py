"""ARM REST routes: each provider module registers (method, path pattern, handler, api-version) on ROUTES.

A route turns a URL and a body into a call into a model (testing/models/), nothing more. Patterns
are matched case-insensitively against the whole path, as ARM matches them; the named groups keep
the caller's spelling, which becomes the stored resource's name.

Every route names the REST api-version whose shapes it answers in: the module's API_VERSION, or its
own api_version= where one operation of the provider follows another version. The fake answers
whatever api-version a client sends; the registered one is what docs/fake-coverage.md publishes
(tools/reference_docs.py reads ROUTES), so a route cannot be added without saying it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from ..messages import Response, page  # noqa: F401 - page is re-exported for the route modules

SUB = r"/subscriptions/(?P<sub>[^/]+)"
RG = SUB + r"/resourceGroups/(?P<rg>[^/]+)"
COMPUTE = RG + r"/providers/Microsoft\.Compute"
NETWORK = RG + r"/providers/Microsoft\.Network"
VMSS = COMPUTE + r"/virtualMachineScaleSets/(?P<vmss>[^/]+)"


Handler = Callable[..., Response]
# What an operation's status URL answers at: the api-version of the request that started it.
AS_STARTED = "as the operation started"
_API_VERSION = re.compile(r"\d{4}-\d{2}-\d{2}(-preview)?")


@dataclass(frozen=True)
class Route:
    method: str
    pattern: re.Pattern
    handler: Handler
    api_versions: tuple[str, ...]  # the REST api-versions whose shapes the handler answers in


ROUTES: list[Route] = []


def route(method: str, pattern: str, *, api_version: str | tuple[str, ...] | None = None) -> Callable[[Handler],
                                                                                                      Handler]:
    def register(handler: Handler) -> Handler:
        declared = api_version if api_version is not None else handler.__globals__.get("API_VERSION")
        versions = (declared,) if isinstance(declared, str) else tuple(declared or ())
        if not versions or not all(v == AS_STARTED or _API_VERSION.fullmatch(v) for v in versions):
            raise TypeError(f"route {method} {pattern} ({handler.__module__}.{handler.__name__}) names no REST "
                            f"api-version: set API_VERSION in its module or pass api_version=, got {declared!r}")
        ROUTES.append(Route(method.upper(), re.compile(pattern, re.IGNORECASE), handler, versions))
        return handler

    return register


def find(method: str, path: str) -> tuple[Handler, dict] | None:
    for entry in ROUTES:
        if entry.method == method.upper():
            match = entry.pattern.fullmatch(path)
            if match:
                return entry.handler, match.groupdict()
    return None


# Importing the provider modules registers their routes.
from . import (  # noqa: E402,F401  # noqa: E402,F401  # noqa: E402,F401
    authorization,
    capacity_reservations,
    catalog,
    deployments,
    galleries,
    identity,
    impact_reporting,
    instance_run_commands,
    instances,
    marketplace,
    network,
    operations,
    placement,
    providers,
    quota,
    resources,
    scale_sets,
    vm_actions,
)
