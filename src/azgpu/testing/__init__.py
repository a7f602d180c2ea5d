"""azgpu.testing: a fake Azure Resource Manager for tests of Azure automation (as moto is for AWS).

    from azgpu.testing import FakeAzure, FakeCredential

    with FakeAzure() as azure:
        compute = ComputeManagementClient(FakeCredential(), azure.subscription_id, polling_interval=0)
        ...

It answers the real Azure SDK clients (resource groups, NSGs, virtual networks, scale sets and
their instances, NICs, extensions, resource SKUs, usages, marketplace images) through `responses`,
with long-running operations, ARM's reference/quota/capacity errors and injectable faults.
azgpu's `--simulate` mode runs its real deploy path against it.
"""

from .credential import FakeCredential
from .errors import NotImplementedInFake
from .fake import DEFAULT_SUBSCRIPTION, FakeAzure, LoggedRequest
from .faults import Fault

__all__ = ["DEFAULT_SUBSCRIPTION", "FakeAzure", "FakeCredential", "Fault", "LoggedRequest", "NotImplementedInFake"]
