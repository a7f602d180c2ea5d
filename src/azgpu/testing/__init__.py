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

from .credential import FakeCredential
from .errors import NotImplementedInFake, OfflineError
from .fake import DEFAULT_SUBSCRIPTION, FakeAzure, LoggedRequest
from .faults import Fault

__all__ = ["DEFAULT_SUBSCRIPTION", "FakeAzure", "FakeCredential", "Fault", "LoggedRequest", "NotImplementedInFake",
           "OfflineError"]
