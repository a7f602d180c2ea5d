"""azgpu.testing: a fake Azure Resource Manager for tests of Azure automation (as moto is for AWS).

    from azgpu.testing import FakeAzure, FakeCredential

    with FakeAzure() as azure:
        compute = ComputeManagementClient(FakeCredential(), azure.subscription_id, polling_interval=0)
        ...
        azure.requests, azure.sleeps, azure.resources()   # what happened

It answers the real Azure SDK clients (resource groups, NSGs, virtual networks and subnets, scale
sets with their instances, NICs, public IPs and extensions, resource SKUs, usages, marketplace
images and the terms of their purchase plans) through `responses`: real serializers, real retry
policy, real LRO pollers. Its SKU and image catalogs are Azure-shaped data of its own
(azgpu/testing/data: recordings of the real APIs, entries written from Microsoft's docs, each with
its provenance), never azgpu's profiles. It checks
what ARM checks (missing groups and references, resources in use, SKU availability, vCPU quota)
and answers with ARM's error codes. `inject` adds throttling, server errors, dropped connections
and failed operations (AllocationFailed ...). A request it does not implement raises
NotImplementedInFake; nothing reaches the network. Clients built on `azure.requests_session()` cannot
open a connection at all: after stop() their requests raise OfflineError.

Time: by default a virtual clock that the SDK's sleeps advance, so nothing sleeps for real and an
operation finishes after `lro_polls` polls. azgpu's `--simulate` uses
`FakeAzure(state_file=..., clock=time.time, lro_seconds=...)`: real time, and state carried in a
JSON file from one CLI process to the next.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

# The public names load when first used (PEP 562), so the command line can read the fake's light tables
# (node_fault_table.py for `provision simulate fault --help`) without importing the Azure SDK.
_PUBLIC = {"FakeCredential": "credential", "NotImplementedInFake": "errors", "OfflineError": "errors",
           "DEFAULT_SUBSCRIPTION": "fake", "FakeAzure": "fake", "LoggedRequest": "fake", "Fault": "faults"}
__all__ = ["DEFAULT_SUBSCRIPTION", "FakeAzure", "FakeCredential", "Fault", "LoggedRequest", "NotImplementedInFake",
           "OfflineError"]

if TYPE_CHECKING:
    from .credential import FakeCredential
    from .errors import NotImplementedInFake, OfflineError
    from .fake import DEFAULT_SUBSCRIPTION, FakeAzure, LoggedRequest
    from .faults import Fault


def __getattr__(name: str):
    if name in _PUBLIC:
        value = getattr(importlib.import_module(f"{__name__}.{_PUBLIC[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
