"""ARM REST routes: each provider module registers (method, path pattern, handler) on ROUTES.

Patterns are matched case-insensitively against the whole path, as ARM matches them; the named
groups keep the caller's spelling, which becomes the stored resource's name.
"""

from __future__ import annotations

import re
from typing import Callable

from ..messages import Response, page  # noqa: F401 - page is re-exported for the route modules

SUB = r"/subscriptions/(?P<sub>[^/]+)"
RG = SUB + r"/resourceGroups/(?P<rg>[^/]+)"
COMPUTE = RG + r"/providers/Microsoft\.Compute"
NETWORK = RG + r"/providers/Microsoft\.Network"
VMSS = COMPUTE + r"/virtualMachineScaleSets/(?P<vmss>[^/]+)"


Handler = Callable[..., Response]
ROUTES: list[tuple[str, re.Pattern, Handler]] = []


def route(method: str, pattern: str) -> Callable[[Handler], Handler]:
    def register(handler: Handler) -> Handler:
        ROUTES.append((method.upper(), re.compile(pattern, re.IGNORECASE), handler))
        return handler

    return register


def find(method: str, path: str) -> tuple[Handler, dict] | None:
    for m, pattern, handler in ROUTES:
        if m == method.upper():
            match = pattern.fullmatch(path)
            if match:
                return handler, match.groupdict()
    return None


# Importing the provider modules registers their routes.
from . import catalog, compute, network, operations, resources, scale_set_vms  # noqa: E402,F401
from . import galleries, identity, marketplace, placement  # noqa: E402,F401
from . import authorization, deployments, impact, providers  # noqa: E402,F401
from . import capacity_reservations, quota  # noqa: E402,F401
