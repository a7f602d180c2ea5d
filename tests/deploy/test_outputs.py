"""`provision outputs`: hostfile, Slurm node lines per InfiniBand domain, NCCL environment, JSON."""

from __future__ import annotations

import json
import re

import pytest
from deploy_support import NIC, cluster_args, request

from azgpu.deploy.create import create
from azgpu.profiles import load_profile

SETS = ["c1-vmss000", "c1-vmss001", "c1-vmss002"]


@pytest.fixture
def cluster(azure, session):
    """nd-a100-v4, 5 nodes in InfiniBand domains of 2: scale sets of 2, 2 and 1."""
    create(session, request("nd-a100-v4", nodes=5, max_ib_domain=2))
    return azure


def outputs(cli, fmt: str) -> str:
    rc, out, err = cli("outputs", *cluster_args(), "--format", fmt)
    assert rc == 0, err
    return out


def private_ips(azure) -> set[str]:
    return {c["properties"]["privateIPAddress"] for n in azure.resources(type=NIC) for c in n["properties"]["ipConfigurations"]}


def test_hostfile_has_one_private_ip_per_line_for_every_node(cluster, cli):
    lines = outputs(cli, "hostfile").splitlines()
    assert len(lines) == 5
    assert set(lines) == private_ips(cluster)
    assert all(re.fullmatch(r"10\.0\.\d+\.\d+", line) for line in lines)


def test_slurm_has_a_node_line_per_node_with_gpus_cpus_and_memory(cluster, cli):
    size = load_profile("nd-a100-v4").size("Standard_ND96asr_v4")
    nodes = [line for line in outputs(cli, "slurm").splitlines() if line.startswith("NodeName=")]
    assert len(nodes) == 5
    for line in nodes:
        fields = dict(part.split("=", 1) for part in line.split())
        assert fields["Gres"] == f"gpu:{size.gpus}" == "gpu:8"
        assert fields["CPUs"] == str(size.vcpus)
        assert 0.9 * size.memory_gib * 1024 <= int(fields["RealMemory"]) < size.memory_gib * 1024
        assert fields["NodeAddr"] in private_ips(cluster)


def test_slurm_has_one_partition_per_scale_set(cluster, cli):
    text = outputs(cli, "slurm")
    partitions = [dict(p.split("=", 1) for p in line.split()) for line in text.splitlines()
                  if line.startswith("PartitionName=")]
    assert [p["PartitionName"] for p in partitions] == SETS
    assert [len(p["Nodes"].split(",")) for p in partitions] == [2, 2, 1]
    names = [dict(p.split("=", 1) for p in line.split())["NodeName"] for line in text.splitlines()
             if line.startswith("NodeName=")]
    assert sorted(n for p in partitions for n in p["Nodes"].split(",")) == sorted(names)


def test_nccl_env_is_the_profiles_env_as_export_lines(cluster, cli):
    env = load_profile("nd-a100-v4").nccl["env"]
    lines = outputs(cli, "nccl-env").splitlines()
    assert lines == [f"export {k}={v}" for k, v in env.items()]
    assert "export NCCL_TOPO_FILE=/opt/microsoft/ndv4/topo.xml" in lines


def test_json_groups_nodes_by_infiniband_domain(cluster, cli):
    out = json.loads(outputs(cli, "json"))
    assert (out["profile"], out["size"], out["gpus_per_node"]) == ("nd-a100-v4", "Standard_ND96asr_v4", 8)
    assert [d["scale_set"] for d in out["ib_domains"]] == SETS
    assert [len(d["nodes"]) for d in out["ib_domains"]] == [2, 2, 1]
    assert {n["ip"] for d in out["ib_domains"] for n in d["nodes"]} == private_ips(cluster)
    assert out["nccl_env"] == load_profile("nd-a100-v4").nccl["env"]


def test_slurm_for_a_series_without_infiniband(azure, session, cli):
    create(session, request("ng", nodes=2))
    size = load_profile("ng").size(load_profile("ng").default_size)
    nodes = [line for line in outputs(cli, "slurm").splitlines() if line.startswith("NodeName=")]
    assert len(nodes) == 2 and all(f"Gres=gpu:{size.gpus} " in line for line in nodes)
