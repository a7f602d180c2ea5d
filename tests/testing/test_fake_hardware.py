"""The fake's nvidia-smi -q: every GPU's section carries the node's own facts."""

from __future__ import annotations

import re

from azgpu.testing import hardware


def test_every_gpu_of_a_gb_node_prints_the_product_name_and_its_fabric():
    gpus = [{"bus": hardware.gpu_bus(i, 4), "serial": str(1650000000000 + i)} for i in range(4)]
    fabric = {"state": "Completed", "status": "Success", "cliqueId": 7,
              "clusterUuid": "0f2a5c1e-0000-4000-8000-000000000001"}
    text = hardware.nvidia_smi_q(gpus, "NVIDIA GB300", 284208, fabric)
    assert re.findall(r"Product Name\s+: (.*)", text) == ["NVIDIA GB300"] * 4
    assert re.findall(r"ClusterUUID\s+: (.*)", text) == [fabric["clusterUuid"]] * 4
    assert re.findall(r"CliqueId\s+: (.*)", text) == ["7"] * 4
