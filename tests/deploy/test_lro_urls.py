"""The SDK's long-running operations follow the status URL Azure's answer names (Azure-AsyncOperation, Location:
ARM's asynchronous pattern), and the session's bearer token goes with every request: a status URL anywhere but
Resource Manager is ARM_ANSWER_INVALID and is never asked, as nextLinks and What-If's status URLs already were."""

from __future__ import annotations

import pytest
from deploy_support import request

from azgpu.deploy import create
from azgpu.errors import AzgpuError


@pytest.mark.parametrize("header", ["Azure-AsyncOperation", "Location"])
# (plain http is refused before the transport by azure-core's bearer token policy, as a NETWORK_ERROR)
@pytest.mark.parametrize("url", ["https://collector.example/steal-token", "https://management.azure.com.example.com/x",
                                 "https://x@management.azure.com/x", "https://management.azure.com:8443/x"])
def test_a_create_whose_status_url_is_elsewhere_sends_nothing_there(azure, session, header, url):
    accepted = {"id": "/x", "name": "n", "properties": {"provisioningState": "Creating"}}
    azure.inject(method="PUT", path=r"virtualNetworks/[^/]+$", status=201, body=accepted,
                 headers={header: url, "Retry-After": "0"}, times=1)
    with pytest.raises(AzgpuError) as info:
        create(session, request())
    assert info.value.code == "ARM_ANSWER_INVALID" and info.value.exit_code == 1
    assert not [r for r in azure.requests if "steal" in r.path or r.path == "/x"]
