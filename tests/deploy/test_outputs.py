"""`provision outputs` against the fake Azure: JSON, hostfiles, Slurm files, NVLink racks, public IPs, --query.

Files are read back as their tools document them (see tests/test_scheduler_files.py for the
formats themselves); hostlists are expanded with python-hostlist, an implementation independent
of azgpu's.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import hostlist as oracle
import pytest
from deploy_support import NIC, RG, VM, assert_cli_error, calls, cluster_args, create_args, model, request

from azgpu import racks
from azgpu.deploy import create
from azgpu.deploy.lifecycle import interconnect, public_ips
from azgpu.profiles import load_profile
from azgpu.scheduler_files import separator

SETS = ["c1-vmss000", "c1-vmss001", "c1-vmss002"]
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "azure"
GB300_FAMILY = "standardNDISRGB300V6Family"


@pytest.fixture
def cluster(azure, session):
    """nd-a100-v4, 5 nodes in InfiniBand domains of 2: scale sets of 2, 2 and 1."""
    create(session, request("nd-a100-v4", nodes=5, max_ib_domain=2))
    return azure


def two_racks(azure, session, **values):
    """A two-rack ND GB300 v6 cluster: 36 VMs of 128 vCPUs, past the fake's default GPU quota."""
    azure.set_quota("eastus", GB300_FAMILY, limit=36 * 128)
    create(session, request("nd-gb300-v6", nodes=36, **values))
    return azure


def outputs(cli, *args: str) -> str:
    rc, out, err = cli("outputs", *cluster_args(), *args)
    assert rc == 0, err
    return out


def entries(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip() and not line.startswith("#")]


def slurm_lines(text: str) -> list[dict[str, str]]:
    """topology.conf(5) / slurm.conf(5): one entry per line, `Key=Value` pairs, case-insensitive keys, `#` comments."""
    return [{k.lower(): v for k, v in (p.split("=", 1) for p in line.split("#", 1)[0].split())}
            for line in entries(text)]


def sections(stream: str) -> dict[str, str]:
    """The files of `--format slurm`'s stream, split at its `# ---- NAME ----` lines."""
    found: dict[str, list[str]] = {}
    current = None
    for line in stream.splitlines(keepends=True):
        if line.startswith("# ---- ") and line.rstrip().endswith(" ----"):
            current = line.strip()[len("# ---- "):-len(" ----")]
            found[current] = []
        else:
            found[current].append(line)
    return {name: "".join(lines) for name, lines in found.items()}


def private_ips(azure) -> set[str]:
    return {c["properties"]["privateIPAddress"] for n in azure.resources(type=NIC)
            for c in n["properties"]["ipConfigurations"]}


def node_public_ips(azure) -> list[dict]:
    """The nodes' public IPs: those below a scale set (the NAT gateway's is a resource of the group)."""
    return [r for r in azure.resources(type="Microsoft.Network/publicIPAddresses")
            if "/virtualMachineScaleSets/" in r["id"]]


def public_addresses(azure) -> set[str]:
    return {r["properties"]["ipAddress"] for r in node_public_ips(azure)}


# ------------------------------------------------------------------------------------ JSON


def test_json_groups_nodes_by_infiniband_domain(cluster, cli):
    out = json.loads(outputs(cli, "--format", "json"))
    assert (out["profile"], out["size"], out["gpus_per_node"], out["gpu_vendor"]) == (
        "nd-a100-v4", "Standard_ND96asr_v4", 8, "nvidia")
    assert [d["scale_set"] for d in out["ib_domains"]] == SETS
    assert [len(d["nodes"]) for d in out["ib_domains"]] == [2, 2, 1]
    assert {n["ip"] for d in out["ib_domains"] for n in d["nodes"]} == private_ips(cluster)
    assert out["nccl_env"] == load_profile("nd-a100-v4").nccl["env"]


def test_json_of_a_private_cluster_has_null_public_ips_and_lists_none(cluster, cli):
    since = len(cluster.requests)
    out = json.loads(outputs(cli))
    assert {n["public_ip"] for d in out["ib_domains"] for n in d["nodes"]} == {None}
    assert not calls(cluster, "GET", since=since, path="/publicipaddresses")


def test_json_lists_each_nodes_public_ip_with_one_listing_per_scale_set(azure, session, cli):
    create(session, request("nd-a100-v4", nodes=3, max_ib_domain=2, public_ip=True, ssh_source="203.0.113.7/32"))
    since = len(azure.requests)
    out = json.loads(outputs(cli))
    nodes = [n for d in out["ib_domains"] for n in d["nodes"]]
    assert {n["public_ip"] for n in nodes} == public_addresses(azure) and len(public_addresses(azure)) == 3
    assert len(calls(azure, "GET", since=since, path="/publicipaddresses")) == 2
    for vm in azure.resources(type=VM):  # each address is the one Azure attached to that node's NIC
        node = next(n for n in nodes if n["hostname"] == vm["properties"]["osProfile"]["computerName"])
        nic = azure.get(vm["properties"]["networkProfile"]["networkInterfaces"][0]["id"])
        pip = azure.get(nic["properties"]["ipConfigurations"][0]["properties"]["publicIPAddress"]["id"])
        assert node["public_ip"] == pip["properties"]["ipAddress"]


def test_query_applies_to_the_json_with_any_structured_output(cluster, cli):
    ips = sorted(outputs(cli, "--query", "ib_domains[].nodes[].ip", "-o", "tsv").split())
    assert ips == sorted(private_ips(cluster))
    rows = outputs(cli, "--query", "ib_domains[].{set: scale_set, nodes: length(nodes)}", "-o", "table")
    assert rows.splitlines()[2:] == ["c1-vmss000  2", "c1-vmss001  2", "c1-vmss002  1"]


@pytest.mark.parametrize("fmt", ["hostfile", "machinefile", "slurm", "nccl-env"])
def test_query_with_a_text_format_is_refused_before_azure_is_asked(cluster, cli, fmt):
    since = len(cluster.requests)
    rc, out, err = cli("outputs", *cluster_args(), "--format", fmt, "--query", "ib_domains")
    assert_cli_error(rc, err, 2, "QUERY_NEEDS_JSON", "--format json")
    assert out == "" and len(cluster.requests) == since


# ------------------------------------------------------------------------------------ MPI


def test_hostfile_has_a_slots_line_per_node_with_one_slot_per_gpu(cluster, cli):
    lines = entries(outputs(cli, "--format", "hostfile"))
    assert len(lines) == 5
    assert {line.split()[0] for line in lines} == private_ips(cluster)
    assert {line.split()[1] for line in lines} == {"slots=8"}


def test_machinefile_lists_hostnames_with_their_gpu_count(cluster, cli):
    lines = entries(outputs(cli, "--format", "machinefile", "--address", "hostname"))
    hostnames = {vm["properties"]["osProfile"]["computerName"] for vm in cluster.resources(type=VM)}
    assert {line.rsplit(":", 1)[0] for line in lines} == hostnames and len(lines) == 5
    assert {line.rsplit(":", 1)[1] for line in lines} == {"8"}


def test_hostfile_with_public_addresses(azure, session, cli):
    create(session, request("nd-a100-v4", nodes=2, public_ip=True, ssh_source="203.0.113.7/32"))
    lines = entries(outputs(cli, "--format", "hostfile", "--address", "public", "--slots", "1"))
    assert {line.split()[0] for line in lines} == public_addresses(azure)
    assert {line.split()[1] for line in lines} == {"slots=1"}


def test_public_addresses_of_a_private_cluster_exit_2(cluster, cli):
    rc, out, err = cli("outputs", *cluster_args(), "--format", "hostfile", "--address", "public")
    assert_cli_error(rc, err, 2, "NO_PUBLIC_IP", "--public-ip")
    assert out == ""


@pytest.mark.parametrize("flag", [["--address", "hostname"], ["--slots", "2"]])
def test_hostfile_options_with_another_format_exit_2(cluster, cli, flag):
    rc, out, err = cli("outputs", *cluster_args(), "--format", "slurm", *flag)
    assert_cli_error(rc, err, 2, "OPTION_NOT_FOR_FORMAT", "--format hostfile")


def test_nccl_env_is_the_profiles_env_as_export_lines(cluster, cli):
    env = load_profile("nd-a100-v4").nccl["env"]
    lines = outputs(cli, "--format", "nccl-env").splitlines()
    assert lines == [f"export {k}={v}" for k, v in env.items()]
    assert "export NCCL_TOPO_FILE=/opt/microsoft/ndv4/topo.xml" in lines


# ------------------------------------------------------------------------------------ Slurm


def test_slurm_prints_its_four_files_after_separators(cluster, cli):
    files = sections(outputs(cli, "--format", "slurm"))
    assert list(files) == ["slurm.conf.nodes", "gres.conf", "topology.conf", "topology.yaml"]


def test_slurm_node_lines_pair_each_hostname_with_its_ip(cluster, cli):
    nodes = [x for x in slurm_lines(sections(outputs(cli, "--format", "slurm"))["slurm.conf.nodes"]) if "nodename" in x]
    pairs = {pair for x in nodes
             for pair in zip(oracle.expand_hostlist(x["nodename"]), oracle.expand_hostlist(x["nodeaddr"]), strict=True)}
    vms = cluster.resources(type=VM)
    assert len(pairs) == len(vms) == 5
    for vm in vms:
        nic = cluster.get(vm["properties"]["networkProfile"]["networkInterfaces"][0]["id"])
        ip = nic["properties"]["ipConfigurations"][0]["properties"]["privateIPAddress"]
        assert (vm["properties"]["osProfile"]["computerName"], ip) in pairs


def test_slurm_node_line_has_gpus_cpus_and_memory_of_the_size(cluster, cli):
    size = load_profile("nd-a100-v4").size("Standard_ND96asr_v4")
    nodes = [x for x in slurm_lines(sections(outputs(cli, "--format", "slurm"))["slurm.conf.nodes"]) if "nodename" in x]
    for line in nodes:
        assert line["gres"] == f"gpu:{size.gpus}" == "gpu:8"
        assert line["cpus"] == str(size.vcpus)
        assert 0.9 * size.memory_gib * 1024 <= int(line["realmemory"]) < size.memory_gib * 1024


def test_slurm_has_one_partition_and_one_switch_per_infiniband_domain(cluster, cli):
    files = sections(outputs(cli, "--format", "slurm"))
    partitions = [x for x in slurm_lines(files["slurm.conf.nodes"]) if "partitionname" in x]
    switches = slurm_lines(files["topology.conf"])
    assert [p["partitionname"] for p in partitions] == [s["switchname"] for s in switches] == SETS
    assert [len(oracle.expand_hostlist(s["nodes"])) for s in switches] == [2, 2, 1]
    assert not any("switches" in s for s in switches)


def test_one_infiniband_domain_is_one_switch(azure, session, cli):
    create(session, request("nd-h100-v5", nodes=3))
    (switch,) = slurm_lines(sections(outputs(cli, "--format", "slurm"))["topology.conf"])
    assert switch["switchname"] == "c1-vmss000" and len(oracle.expand_hostlist(switch["nodes"])) == 3


def test_out_dir_writes_the_files_the_stream_shows(cluster, cli, tmp_path):
    stream = sections(outputs(cli, "--format", "slurm"))
    summary = json.loads(outputs(cli, "--format", "slurm", "--out-dir", tmp_path / "slurm"))
    assert [f["name"] for f in summary["files"]] == list(stream)
    assert {p.name: p.read_text() for p in (tmp_path / "slurm").iterdir()} == stream


def test_out_dir_replaces_an_older_file(cluster, cli, tmp_path):
    (tmp_path / "hostfile").write_text("stale\n")
    outputs(cli, "--format", "hostfile", "--out-dir", tmp_path, "-o", "none")
    assert "stale" not in (tmp_path / "hostfile").read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hostfile"]  # no temporary file left


def test_out_dir_with_json_exits_2(cluster, cli, tmp_path):
    rc, out, err = cli("outputs", *cluster_args(), "--out-dir", tmp_path)
    assert_cli_error(rc, err, 2, "OUT_DIR_NEEDS_TEXT_FORMAT", "> outputs.json")


def test_out_dir_that_is_a_file_exits_2_before_azure_is_asked(cluster, cli, tmp_path):
    since = len(cluster.requests)
    (tmp_path / "f").write_text("")
    rc, out, err = cli("outputs", *cluster_args(), "--format", "slurm", "--out-dir", tmp_path / "f")
    assert_cli_error(rc, err, 2, "INVALID_OUT_DIR")
    assert len(cluster.requests) == since


# ------------------------------------------------------------------------------------ NVLink racks


def test_two_gb300_racks_are_two_blocks_of_18(azure, session, cli):
    two_racks(azure, session)
    files = sections(outputs(cli, "--format", "slurm"))
    lines = slurm_lines(files["topology.conf"])
    blocks = [x for x in lines if "blockname" in x]
    # topology.conf(5), topology/block
    assert [set(x) for x in lines] == [{"blockname", "nodes"}] * 2 + [{"blocksizes"}]
    assert lines[-1]["blocksizes"] == "18"
    members = [oracle.expand_hostlist(b["nodes"]) for b in blocks]
    assert [len(m) for m in members] == [18, 18] and not set(members[0]) & set(members[1])
    hostnames = {vm["properties"]["osProfile"]["computerName"] for vm in azure.resources(type=VM)}
    assert set(members[0]) | set(members[1]) == hostnames and len(hostnames) == 36
    assert len({b["blockname"] for b in blocks}) == 2


def test_two_gb300_racks_follow_the_interconnect_subgroup_azure_reports(azure, session, cli):
    two_racks(azure, session)
    out = json.loads(outputs(cli))
    by_instance = {n["hostname"]: int(n["instance_id"]) for d in out["ib_domains"] for n in d["nodes"]}
    assert [r["source"] for r in out["racks"]] == [racks.SUBGROUP] * 2
    assert [sorted(by_instance[h] for h in r["nodes"]) for r in out["racks"]] == [list(range(18)), list(range(18, 36))]
    assert "ASSUME" not in sections(outputs(cli, "--format", "slurm"))["topology.conf"]


def test_gb300_lists_instances_with_their_instance_view_once_per_scale_set(azure, session, cli):
    two_racks(azure, session)
    since = len(azure.requests)
    outputs(cli)
    listings = [r for r in calls(azure, "GET", since=since) if r.path.lower().endswith("/virtualmachines")]
    assert [r.query.get("$expand") for r in listings] == ["instanceView"]


# Interconnect blocks and subgroups exist in Compute 2026-03-01: azgpu reads them from the REST answer at its own
# api-version, so they count whichever azure-mgmt-compute is installed.
def test_racks_follow_the_interconnect_block_of_each_instance(azure, session, cli):
    """Scale sets allocated from interconnect blocks (Compute 2026-03-01): every instance names its block."""
    sub = azure.subscription_id
    base = f"/subscriptions/{sub}/resourceGroups/{RG}/providers/Microsoft.Compute"
    two_racks(azure, session)
    for index in (0, 1):  # two more scale sets of one interconnect block each, as azgpu would tag them
        vmss = azure.get(f"{base}/virtualMachineScaleSets/c1-vmss000")
        body = {k: vmss[k] for k in ("location", "tags")}
        body["sku"] = {**vmss["sku"], "capacity": 3}
        body["properties"] = {"virtualMachineProfile": {
            **vmss["properties"]["virtualMachineProfile"],
            "osProfile": {**vmss["properties"]["virtualMachineProfile"]["osProfile"],
                          "computerNamePrefix": f"c1-icb{index}-"},
            "interconnectBlockProfile": {"interconnectBlock": {"id": f"{base}/interconnectBlocks/icb{index}"}}}}
        azure.add_resource(f"{base}/virtualMachineScaleSets/c1-vmss10{index}", body)
    out = json.loads(outputs(cli))
    by_block = [r for r in out["racks"] if r["source"] == racks.BLOCK]
    assert [(r["scale_set"], r["id"].rsplit("/", 1)[-1], len(r["nodes"])) for r in by_block] == [
        ("c1-vmss100", "icb0", 3), ("c1-vmss101", "icb1", 3)]


def test_rack_signals_are_read_from_the_rest_answer_whatever_sdk_is_installed():
    from azgpu.errors import AzureError

    vm = {  # the shape of Compute 2026-03-01's VirtualMachineScaleSetVM (REST body)
        "instanceId": "3", "location": "eastus",
        "properties": {"osProfile": {"computerName": "c1-000-000003"},
                       "interconnectBlockProfile": {"interconnectBlock": {"id": "/x/interconnectBlocks/icb1"}},
                       "instanceView": {"interconnectInstanceView": {"interconnectSubgroupId": "0f0b-aaf1"}}}}
    assert interconnect(vm) == {"subgroup": "0f0b-aaf1", "block": "/x/interconnectBlocks/icb1"}
    assert interconnect({"instanceId": "4", "location": "eastus", "properties": {}}) == {"subgroup": None,
                                                                                            "block": None}
    for bad in ({"properties": {"instanceView": {"interconnectInstanceView": {"interconnectSubgroupId": 7}}}},
                {"properties": {"instanceView": {"interconnectInstanceView": {"interconnectSubgroupId": "../x"}}}},
                {"properties": {"instanceView": []}}, {"properties": "x"}, "x"):
        with pytest.raises(AzureError) as info:
            interconnect(bad)
        assert info.value.code == "ARM_ANSWER_INVALID"


# ------------------------------------------------------------------------------------ public IP bodies


def test_public_ip_example_from_the_rest_spec_maps_to_its_instance():
    from azure.mgmt.network.models import PublicIPAddress

    body = json.loads((FIXTURES / "vmss_public_ip_get.json").read_text())["responses"]["200"]["body"]
    assert public_ips([model(PublicIPAddress, body)]) == {"1": "13.67.119.72"}


def test_fake_public_ips_have_the_spec_examples_shape(azure, session):
    create(session, request("nd-a100-v4", nodes=1, public_ip=True, ssh_source="203.0.113.7/32"))
    example = json.loads((FIXTURES / "vmss_public_ip_get.json").read_text())["responses"]["200"]["body"]
    (fake,) = node_public_ips(azure)
    assert {"id", "name", "properties"} <= set(fake)
    for key in ("ipAddress", "ipConfiguration", "publicIPAddressVersion", "publicIPAllocationMethod",
                "provisioningState"):
        assert key in fake["properties"] and key in example["properties"]
    below_instance = (r"/virtualMachineScaleSets/[^/]+/virtualMachines/\d+/networkInterfaces/[^/]+"
                      r"/ipConfigurations/[^/]+$")
    assert re.search(below_instance, example["properties"]["ipConfiguration"]["id"])
    assert re.search(below_instance, fake["properties"]["ipConfiguration"]["id"])


def test_dynamic_address_not_yet_allocated_is_null():
    from azure.mgmt.network.models import PublicIPAddress

    body = json.loads((FIXTURES / "vmss_public_ip_get.json").read_text())["responses"]["200"]["body"]
    body = {**body, "properties": {k: v for k, v in body["properties"].items() if k != "ipAddress"}}
    assert public_ips([model(PublicIPAddress, body)]) == {"1": None}


# ------------------------------------------------------------------------------------ --simulate, AMD


def test_simulated_mi300x_gets_amd_render_nodes_in_gres_conf(sim):
    rc, out, err = sim(*create_args("nd-mi300x-v5", nodes=2))
    assert rc == 0, err
    rc, out, err = sim("outputs", *cluster_args(), "--format", "slurm")
    assert rc == 0, err
    (gres,) = slurm_lines(sections(out)["gres.conf"])
    assert oracle.expand_hostlist(gres["file"]) == [f"/dev/dri/renderD{128 + i}" for i in range(8)]
    assert gres["flags"] == "amd_gpu_env" and len(oracle.expand_hostlist(gres["nodename"])) == 2


def test_simulated_ngads_without_infiniband_has_one_partition_and_one_gpu(sim):
    rc, out, err = sim(*create_args("ng", nodes=2))
    assert rc == 0, err
    rc, out, err = sim("outputs", *cluster_args(), "--format", "slurm")
    assert rc == 0, err
    files = sections(out)
    (gres,) = slurm_lines(files["gres.conf"])
    partitions = [x for x in slurm_lines(files["slurm.conf.nodes"]) if "partitionname" in x]
    assert gres["file"] == "/dev/dri/renderD128"
    assert len(partitions) == 1 and len(oracle.expand_hostlist(partitions[0]["nodes"])) == 2
    assert "InfiniBand domain" not in files["slurm.conf.nodes"]


def test_simulated_gb300_two_racks_write_topology_files(sim, state_file, tmp_path):
    from azgpu.testing import FakeAzure

    FakeAzure.load(state_file).set_quota("eastus", GB300_FAMILY, limit=36 * 128)
    rc, out, err = sim(*create_args("nd-gb300-v6", nodes=36))
    assert rc == 0, err
    rc, out, err = sim("outputs", *cluster_args(), "--format", "slurm", "--out-dir", tmp_path / "slurm", "-o", "none")
    assert rc == 0 and out == "", err
    blocks = [x for x in slurm_lines((tmp_path / "slurm" / "topology.conf").read_text()) if "blockname" in x]
    assert [len(oracle.expand_hostlist(b["nodes"])) for b in blocks] == [18, 18]
    assert separator("topology.conf") not in (tmp_path / "slurm" / "topology.conf").read_text()


def test_outputs_of_a_missing_cluster_exit_3(azure, cli):
    azure.add_resource(f"/subscriptions/{azure.subscription_id}/resourceGroups/{RG}", {"location": "eastus"})
    rc, out, err = cli("outputs", *cluster_args(), "--format", "slurm")
    assert_cli_error(rc, err, 3, "CLUSTER_NOT_FOUND")
