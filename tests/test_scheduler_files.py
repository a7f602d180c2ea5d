"""The files `provision outputs` writes for MPI launchers and Slurm, from outputs dicts made here.

Formats as their tools document them: Open MPI hostfile (`host slots=N`), MPICH/Hydra machinefile
(`host:N`), slurm.conf(5), gres.conf(5), topology.conf(5) and topology.yaml(5). Slurm files are read
back with `slurm_lines` (keys are case-insensitive, `#` starts a comment) and python-hostlist.
"""

from __future__ import annotations

import subprocess
import sys

import hostlist as oracle
import pytest
import yaml

from azgpu import racks
from azgpu.errors import InputError
from azgpu.scheduler_files import (
    mpich_machinefile,
    openmpi_hostfile,
    render_files,
    separator,
    slurm_files,
    slurm_stream,
)
from azgpu.testing.models.instances import base36


def cluster(sizes=(2,), *, gpus=8, vendor="nvidia", infiniband=True, public=False, rack=None,
            signals=None) -> dict:
    """An outputs dict like azgpu.deploy.lifecycle.outputs returns: scale sets of the given sizes."""
    domains, ip = [], 4
    for index, count in enumerate(sizes):
        nodes = []
        for i in range(count):
            nodes.append({"hostname": f"c1-{index:03d}-{base36(i)}", "ip": f"10.0.{ip // 256}.{ip % 256}",
                          "public_ip": f"20.1.0.{ip % 256}" if public else None, "instance_id": str(i)})
            ip += 1
        domains.append({"scale_set": f"c1-vmss{index:03d}", "nodes": nodes})
    return {"cluster": "c1", "resource_group": "rg1", "profile": "p", "size": "Standard_X", "gpus_per_node": gpus,
            "gpu_vendor": vendor, "vcpus_per_node": 96, "memory_gib_per_node": 900, "infiniband": infiniband,
            "nccl_env": {"NCCL_IB_PCI_RELAXED_ORDERING": "1"}, "ib_domains": domains, "nodes_per_rack": rack,
            "racks": racks.group("c1", domains, signals or {}, rack) if rack else []}


def entries(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def slurm_lines(text: str) -> list[dict[str, str]]:
    """Each configuration line as {key (lower case): value}, as Slurm's parser reads key=value pairs."""
    out = []
    for line in entries(text):
        line = line.split("#", 1)[0]
        out.append({k.lower(): v for k, v in (pair.split("=", 1) for pair in line.split())})
    return out


def every_node(out: dict) -> list[dict]:
    return [n for d in out["ib_domains"] for n in d["nodes"]]


# ------------------------------------------------------------------------------------ MPI


def test_openmpi_hostfile_gives_each_node_one_slot_per_gpu():
    out = cluster((2, 1), gpus=8)
    assert entries(openmpi_hostfile(out)) == [f"{n['ip']} slots=8" for n in every_node(out)]


def test_mpich_machinefile_writes_host_colon_slots():
    out = cluster((3,), gpus=4)
    assert entries(mpich_machinefile(out)) == [f"{n['ip']}:4" for n in every_node(out)]


def test_slots_override_the_gpu_count():
    assert entries(openmpi_hostfile(cluster((1,)), slots=2)) == ["10.0.0.4 slots=2"]


def test_hostfile_lists_hostnames_on_request():
    out = cluster((2,))
    assert entries(mpich_machinefile(out, address="hostname")) == ["c1-000-000000:8", "c1-000-000001:8"]


def test_hostfile_lists_public_ips_on_request():
    out = cluster((2,), public=True)
    assert entries(openmpi_hostfile(out, address="public")) == [f"{n['public_ip']} slots=8" for n in every_node(out)]


def test_public_addresses_of_a_private_cluster_are_refused():
    with pytest.raises(InputError) as err:
        openmpi_hostfile(cluster((2,)), address="public")
    assert err.value.code == "NO_PUBLIC_IP"
    assert "--public-ip" in err.value.remedy and "--address private" in err.value.remedy


def test_a_node_without_its_public_ip_yet_is_named():
    out = cluster((2,), public=True)
    out["ib_domains"][0]["nodes"][1]["public_ip"] = None
    with pytest.raises(InputError, match="c1-000-000001") as err:
        mpich_machinefile(out, address="public")
    assert err.value.code == "NO_PUBLIC_IP"


def test_an_unknown_address_kind_is_refused():
    with pytest.raises(InputError) as err:
        openmpi_hostfile(cluster((1,)), address="ipv6")
    assert err.value.code == "INVALID_ADDRESS" and "private, public or hostname" in err.value.remedy


def test_hostfile_marks_each_infiniband_domain_with_a_comment():
    text = openmpi_hostfile(cluster((1, 1)))
    assert [line for line in text.splitlines() if line.startswith("# InfiniBand domain")] == [
        "# InfiniBand domain c1-vmss000", "# InfiniBand domain c1-vmss001"]


# ------------------------------------------------------------------------------------ slurm.conf


def node_address_pairs(text: str) -> list[tuple[str, str]]:
    pairs = []
    for line in slurm_lines(text):
        if "nodename" in line:
            names, addresses = oracle.expand_hostlist(line["nodename"]), oracle.expand_hostlist(line["nodeaddr"])
            assert len(names) == len(addresses), line
            pairs += zip(names, addresses, strict=True)
    return pairs


def test_nodename_and_nodeaddr_hostlists_pair_every_node_with_its_ip():
    out = cluster((50, 7))  # past instance 35: Azure's base-36 names leave decimal order
    assert node_address_pairs(slurm_files(out)["slurm.conf.nodes"]) == [(n["hostname"], n["ip"])
                                                                        for n in every_node(out)]


def test_node_lines_are_one_per_infiniband_domain():
    nodes = [line for line in slurm_lines(slurm_files(cluster((2, 2, 1)))["slurm.conf.nodes"]) if "nodename" in line]
    assert [len(oracle.expand_hostlist(line["nodename"])) for line in nodes] == [2, 2, 1]


def test_node_line_carries_cpus_memory_headroom_and_gpus():
    (line,) = [x for x in slurm_lines(slurm_files(cluster((2,), gpus=4))["slurm.conf.nodes"]) if "nodename" in x]
    assert (line["cpus"], line["gres"], line["state"]) == ("96", "gpu:4", "UNKNOWN")
    assert int(line["realmemory"]) == int(900 * 1024 * 0.95)


def test_one_partition_per_infiniband_domain_and_the_first_is_default():
    parts = [x for x in slurm_lines(slurm_files(cluster((2, 3)))["slurm.conf.nodes"]) if "partitionname" in x]
    assert [p["partitionname"] for p in parts] == ["c1-vmss000", "c1-vmss001"]
    assert [len(oracle.expand_hostlist(p["nodes"])) for p in parts] == [2, 3]
    assert [p.get("default") for p in parts] == ["YES", None]


def test_without_infiniband_one_partition_holds_every_node():
    out = cluster((2, 3), gpus=1, vendor="amd", infiniband=False)
    (part,) = [x for x in slurm_lines(slurm_files(out)["slurm.conf.nodes"]) if "partitionname" in x]
    assert sorted(oracle.expand_hostlist(part["nodes"])) == sorted(n["hostname"] for n in every_node(out))


# ------------------------------------------------------------------------------------ gres.conf


def gres(out: dict) -> dict[str, str]:
    (line,) = slurm_lines(slurm_files(out)["gres.conf"])
    return line


def test_nvidia_gpus_are_dev_nvidia_files():
    line = gres(cluster((2,), gpus=8))
    assert (line["name"], line["file"]) == ("gpu", "/dev/nvidia[0-7]")
    assert oracle.expand_hostlist(line["file"]) == [f"/dev/nvidia{i}" for i in range(8)]


def test_amd_gpus_are_render_nodes_with_the_amd_environment_flag():
    line = gres(cluster((2,), gpus=8, vendor="amd"))
    assert oracle.expand_hostlist(line["file"]) == [f"/dev/dri/renderD{128 + i}" for i in range(8)]
    assert line["flags"] == "amd_gpu_env"


def test_a_single_amd_gpu_is_one_render_node():
    assert gres(cluster((2,), gpus=1, vendor="amd", infiniband=False))["file"] == "/dev/dri/renderD128"


def test_gres_line_names_every_node():
    out = cluster((40, 3))
    assert sorted(oracle.expand_hostlist(gres(out)["nodename"])) == sorted(n["hostname"] for n in every_node(out))


def test_autodetect_is_offered_commented_out():
    text = slurm_files(cluster((1,), vendor="amd"))["gres.conf"]
    assert "#AutoDetect=rsmi" in text.splitlines()
    assert not any(k == "autodetect" for line in slurm_lines(text) for k in line)


# ------------------------------------------------------------------------------------ topology


def test_tree_has_one_leaf_switch_per_infiniband_domain_and_no_parent():
    out = cluster((2, 3))
    lines = slurm_lines(slurm_files(out)["topology.conf"])
    assert [line["switchname"] for line in lines] == ["c1-vmss000", "c1-vmss001"]
    assert all("switches" not in line for line in lines)  # no job may span InfiniBand domains
    assert [oracle.expand_hostlist(line["nodes"]) for line in lines] == [
        sorted(n["hostname"] for n in d["nodes"]) for d in out["ib_domains"]]


def test_tree_offers_the_joining_switch_only_as_a_comment():
    text = slurm_files(cluster((2, 3)))["topology.conf"]
    assert "#SwitchName=c1-ethernet Switches=c1-vmss[000-001]" in text.splitlines()


def test_without_infiniband_a_top_switch_joins_the_scale_sets():
    lines = slurm_lines(slurm_files(cluster((2, 2), infiniband=False, vendor="amd"))["topology.conf"])
    assert lines[-1] == {"switchname": "c1-ethernet", "switches": "c1-vmss[000-001]"}


def test_switch_names_fit_slurms_64_characters():
    out = cluster((1, 1))
    out["cluster"] = "c" * 50
    for d in out["ib_domains"]:
        d["scale_set"] = f"{out['cluster']}-{d['scale_set'][3:]}"
    assert all(len(line["switchname"]) <= 64 for line in slurm_lines(slurm_files(out)["topology.conf"]))


def test_racks_make_a_block_topology_with_the_rack_as_base_block():
    lines = slurm_lines(slurm_files(cluster((36,), gpus=4, rack=18))["topology.conf"])
    blocks = [line for line in lines if "blockname" in line]
    assert [len(oracle.expand_hostlist(b["nodes"])) for b in blocks] == [18, 18]
    assert lines[-1] == {"blocksizes": "18"}


def test_a_short_rack_is_flagged_for_slurm_before_25_05():
    text = slurm_files(cluster((20,), gpus=4, rack=18))["topology.conf"]
    assert ("# c1-rack001: c1-vmss000, assumed; SHORT: 2 of 18 VMs: blocks smaller than BlockSizes need "
            "Slurm 25.05+") in text


def test_topology_yaml_holds_blocks_by_default_and_the_tree_beside_them():
    doc = yaml.safe_load(slurm_files(cluster((36,), gpus=4, rack=18))["topology.yaml"])
    assert [list(t)[0] for t in doc] == ["topology", "topology"]  # topology.yaml(5): the name comes first
    block, tree = doc
    assert (block["cluster_default"], tree["cluster_default"]) == (True, False)
    assert block["block"]["block_sizes"] == [18]
    assert [len(oracle.expand_hostlist(b["nodes"])) for b in block["block"]["blocks"]] == [18, 18]
    assert [s["switch"] for s in tree["tree"]["switches"]] == ["c1-vmss000"]


def test_topology_yaml_without_racks_is_the_default_tree():
    (tree,) = yaml.safe_load(slurm_files(cluster((2, 2)))["topology.yaml"])
    assert tree["cluster_default"] is True and set(tree) == {"topology", "cluster_default", "tree"}
    assert [s["switch"] for s in tree["tree"]["switches"]] == ["c1-vmss000", "c1-vmss001"]


def test_slurm_stream_puts_each_file_after_its_separator():
    files = slurm_files(cluster((2,)))
    stream = slurm_stream(files)
    for name, text in files.items():
        assert f"{separator(name)}\n{text}" in stream
    assert [line for line in stream.splitlines() if line.startswith("# ---- ")] == [separator(n) for n in files]


def test_render_files_names_the_file_of_each_text_format():
    out = cluster((1,))
    assert {fmt: list(render_files(out, fmt)) for fmt in ("hostfile", "machinefile", "nccl-env")} == {
        "hostfile": ["hostfile"], "machinefile": ["machinefile"], "nccl-env": ["nccl.env"]}
    assert list(render_files(out, "slurm")) == ["slurm.conf.nodes", "gres.conf", "topology.conf", "topology.yaml"]


# ------------------------------------------------------------------------------------ racks


def nodes_of(out: dict, rack: int) -> list[str]:
    return out["racks"][rack]["nodes"]


def test_racks_are_assumed_consecutive_instances_without_an_azure_signal():
    out = cluster((36,), rack=18)
    assert [r["source"] for r in out["racks"]] == [racks.ASSUMED] * 2
    assert nodes_of(out, 0) == [n["hostname"] for n in every_node(out)[:18]]


def test_racks_follow_the_interconnect_subgroup_azure_reports():
    names = [f"c1-000-{base36(i)}" for i in range(4)]
    signals = {name: {"subgroup": "g-b" if i % 2 else "g-a", "block": "ignored"} for i, name in enumerate(names)}
    out = cluster((4,), rack=18, signals=signals)
    assert [(r["source"], r["id"], r["nodes"]) for r in out["racks"]] == [
        (racks.SUBGROUP, "g-a", names[0::2]), (racks.SUBGROUP, "g-b", names[1::2])]


def test_racks_follow_the_interconnect_block_when_there_is_no_subgroup():
    names = [f"c1-000-{base36(i)}" for i in range(3)]
    signals = {name: {"subgroup": None, "block": "/icb/b1"} for name in names}
    (rack,) = cluster((3,), rack=18, signals=signals)["racks"]
    assert (rack["source"], rack["id"], rack["nodes"]) == (racks.BLOCK, "/icb/b1", names)


def test_a_partial_signal_falls_back_to_the_assumption():
    signals = {"c1-000-000000": {"subgroup": "g-a", "block": None}}
    out = cluster((2,), rack=18, signals=signals)
    assert [r["source"] for r in out["racks"]] == [racks.ASSUMED]


def test_racks_never_cross_scale_sets():
    out = cluster((10, 10), rack=18)
    assert [(r["scale_set"], len(r["nodes"])) for r in out["racks"]] == [("c1-vmss000", 10), ("c1-vmss001", 10)]


def test_text_formats_load_no_azure_module():
    probe = ("import sys\nfrom azgpu.scheduler_files import render_files\n"
             f"out = {cluster((3,), rack=18)!r}\n"
             "for fmt in ('hostfile', 'machinefile', 'slurm', 'nccl-env'): render_files(out, fmt)\n"
             "loaded = [m for m in sys.modules if m == 'azure' or m.startswith('azure.')]\n"
             "assert not loaded, loaded\n")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
