"""Racks: Azure's interconnect subgroups where Azure reports them, the NVLink fabric each node reports as
evidence (a node that disagrees is disputed), the nodes' own grouping where Azure reports nothing, with
exclusions and short racks visible."""

from __future__ import annotations

from types import SimpleNamespace

from azgpu import racks
from azgpu.scheduler_files import openmpi_hostfile, slurm_files


def fab(cluster_uuid, clique=32766, complete=True):
    # NodeResult.as_dict()["fabric"], the interface the health gate provides (see docs/gb-racks.md)
    return {"clusterUuid": cluster_uuid, "cliqueId": clique, "state": "Completed" if complete else "In Progress",
            "status": "Success" if complete else "N/A", "complete": complete}


def domain(count, scale_set="c1-vmss000"):
    return {"scale_set": scale_set, "nodes": [{"hostname": f"n{i:02d}", "ip": f"10.0.0.{i + 4}", "instance_id": str(i),
                                               "public_ip": None} for i in range(count)]}


def test_nodes_are_grouped_by_the_fabric_they_report_not_by_instance_order():
    d = domain(36)
    # Interleaved on purpose: instance order would put n00..n17 in one rack.
    fabrics = {f"n{i:02d}": fab("A" if i % 2 else "B") for i in range(36)}
    out = racks.group("c1", [d], {}, 18, fabrics=fabrics)
    assert [(r["basis"], len(r["nodes"])) for r in out] == [("measured", 18), ("measured", 18)]
    assert out[0]["nodes"] == [f"n{i:02d}" for i in range(0, 36, 2)]
    assert out[0]["id"] == "B/32766"


def test_same_cluster_uuid_but_another_clique_is_another_domain():
    fabrics = {f"n{i:02d}": fab("A", 1 if i < 9 else 2) for i in range(18)}
    assert [len(r["nodes"]) for r in racks.group("c1", [domain(18)], {}, 18, fabrics=fabrics)] == [9, 9]


def test_azures_subgroups_are_the_racks_and_a_node_that_disagrees_is_disputed():
    fabrics = {f"n{i:02d}": fab("A" if i else "STRAY") for i in range(18)}
    signals = {f"n{i:02d}": {"subgroup": "S1", "block": None} for i in range(18)}
    (rack,) = racks.group("c1", [domain(18)], signals, 18, fabrics=fabrics)
    assert (rack["basis"], len(rack["nodes"]), rack["short"], rack["agrees_with_azure"]) == ("reported", 18, 0, False)
    assert [d["hostname"] for d in rack["disputed"]] == ["n00"] and "STRAY/32766" in rack["disputed"][0]["reason"]
    whole = racks.group("c1", [domain(18)], signals, 18, fabrics={f"n{i:02d}": fab("A") for i in range(18)})
    assert whole[0]["agrees_with_azure"] is True and whole[0]["short"] == 0 and "disputed" not in whole[0]


def test_two_nodes_swapping_their_rack_identity_are_both_disputed_and_no_rack_spans_two():
    # n00 sits in Azure's rack S0 and claims S1's NVLink domain B; n18 sits in S1 and claims A.
    fabrics = {f"n{i:02d}": fab("A" if (i < 18) != (i in (0, 18)) else "B") for i in range(36)}
    signals = {f"n{i:02d}": {"subgroup": "S0" if i < 18 else "S1", "block": None} for i in range(36)}
    assert racks.disputes([domain(36)], signals, fabrics, 18).keys() == {"n00", "n18"}
    out = racks.group("c1", [domain(36)], signals, 18, fabrics=fabrics)
    assert [(r["id"], r["nodes"][0], r["nodes"][-1], len(r["nodes"])) for r in out] == [
        ("S0", "n00", "n17", 18), ("S1", "n18", "n35", 18)]
    # Without Azure's subgroups the nodes alone would have made two "whole" racks across Azure's two.
    alone = racks.group("c1", [domain(36)], {}, 18, fabrics=fabrics)
    assert sorted(len(r["nodes"]) for r in alone) == [18, 18] and any({"n00", "n19"} <= set(r["nodes"]) for r in alone)


def test_one_domain_claimed_by_two_of_azures_racks_disputes_them_all():
    fabrics = {f"n{i:02d}": fab("A") for i in range(36)}
    signals = {f"n{i:02d}": {"subgroup": "S0" if i < 18 else "S1", "block": None} for i in range(36)}
    assert len(racks.disputes([domain(36)], signals, fabrics, 18)) == 36


def test_without_azure_more_nodes_in_one_domain_than_a_rack_holds_are_disputed():
    fabrics = {f"n{i:02d}": fab("A" if i < 19 else "B") for i in range(36)}
    disputed = racks.disputes([domain(36)], {}, fabrics, 18)
    assert sorted(disputed) == [f"n{i:02d}" for i in range(19)] and "19 nodes report" in disputed["n00"]


def test_a_node_whose_fabric_is_not_complete_joins_its_subgroups_rack_and_is_named():
    fabrics = {f"n{i:02d}": fab("A", complete=i != 5) for i in range(18)}
    signals = {f"n{i:02d}": {"subgroup": "S1", "block": None} for i in range(18)}
    (rack,) = racks.group("c1", [domain(18)], signals, 18, fabrics=fabrics)
    assert len(rack["nodes"]) == 18 and rack["fabric_not_complete"] == ["n05"]


def test_without_measurement_racks_are_reported_or_assumed():
    signals = {f"n{i:02d}": {"subgroup": "S1" if i < 18 else "S2", "block": None} for i in range(36)}
    assert {r["basis"] for r in racks.group("c1", [domain(36)], signals, 18)} == {"reported"}
    assert {r["basis"] for r in racks.group("c1", [domain(36)], {}, 18)} == {"assumed"}


def test_fabric_is_read_from_a_node_result_attribute_or_its_dict():
    assert racks.fabric_domain(racks.fabric_of(SimpleNamespace(fabric=fab("A")))) == "A/32766"
    assert racks.fabric_of(SimpleNamespace()) is None  # a NodeResult from before the fabric field
    # The fake's node state carries state/status without 'complete'.
    assert racks.fabric_domain({"clusterUuid": "A", "cliqueId": 7, "state": "Completed", "status": "Success"}) == "A/7"
    assert racks.fabric_domain({"clusterUuid": "A", "cliqueId": 7, "state": "In Progress", "status": "N/A"}) is None


def outputs_with(excluded):
    d = domain(36)
    fabrics = {f"n{i:02d}": fab("A" if i < 18 else "B") for i in range(36)}
    out = {"cluster": "c1", "size": "Standard_ND128isr_GB300_v6", "gpus_per_node": 4, "gpu_vendor": "nvidia",
           "vcpus_per_node": 128, "memory_gib_per_node": 864, "infiniband": True, "nccl_env": {},
           "nodes_per_rack": 18, "racks_measured_at": "2026-11-25T06:00:00Z",
           "racks": racks.group("c1", [d], {}, 18, fabrics=fabrics, excluded=excluded)}
    out["ib_domains"] = [{**d, "nodes": [n for n in d["nodes"] if n["hostname"] not in excluded]}]
    out["excluded_nodes"] = [{"hostname": h, "reason": r} for h, r in excluded.items()]
    return out


def test_scheduler_files_say_measured_and_leave_an_excluded_node_out_with_its_rack_short():
    out = outputs_with({"n03": "failed the health check; reported to Azure"})
    topo = slurm_files(out)["topology.conf"]
    assert "Blocks marked 'measured'" in topo and "ASSUME" not in topo
    assert "# c1-rack000: c1-vmss000, measured, NVLink domain A/32766; SHORT: 17 of 18 VMs" in topo
    assert [x for x in topo.splitlines() if x.startswith("BlockName")] == [
        "BlockName=c1-rack000 Nodes=n[00-02,04-17]", "BlockName=c1-rack001 Nodes=n[18-35]"]
    assert "# Left out: n03 (failed the health check; reported to Azure)." in topo
    hostfile = openmpi_hostfile(out)
    assert "n03 slots" not in hostfile and "# Left out: n03" in hostfile
    body = [x for x in hostfile.splitlines() if not x.startswith("#")]
    assert body[:17] == [f"10.0.0.{i + 4} slots=4" for i in range(18) if i != 3]
    assert "n03" not in slurm_files(out)["slurm.conf.nodes"]


def test_rack_clusters_get_the_imex_prolog_and_keep_the_images_channel():
    # azgpu/imex.py: each job's nodes are its IMEX domain (Azure CycleCloud's imex_prolog.sh); never
    # switch/nvidia_imex, which removes the image's channel0 when slurmd starts (Slurm 24.05.1 CHANGELOG).
    files = slurm_files(outputs_with({"n03": "failed"}))
    lines = files["slurm.conf.nodes"].splitlines()
    assert {"#SwitchType=switch/none", "#PrologFlags=alloc", "#Prolog=/etc/slurm/prolog.d/*"} <= set(lines)
    assert not any("switch/nvidia_imex" in line for line in lines if not line.startswith("# never"))
    assert "/etc/nvidia-imex/nodes_config.cfg" in files["prolog.d-azgpu-imex"]
    assert "systemctl stop nvidia-imex" in files["epilog.d-azgpu-imex"]
    no_racks = {**outputs_with({}), "racks": [], "nodes_per_rack": None}
    files = slurm_files(no_racks)
    assert "SwitchType" not in files["slurm.conf.nodes"] and not [f for f in files if "imex" in f]


def rack(name, count, scale_set="c1-vmss000", first=0, **extra):
    return {"name": name, "scale_set": scale_set, "nodes": [f"{name}-{i}" for i in range(first, first + count)],
            **extra}


def test_spare_racks_keep_whole_healthy_racks_and_remove_the_rest():
    from azgpu.deploy.rack_gate import choose

    racks3 = [rack("r0", 18), rack("r1", 18), rack("r2", 18)]
    keep, remove, why = choose(racks3, {"r0-5"}, 18, 2, 1)
    assert ([r["name"] for r in keep], [r["name"] for r in remove], why) == (["r1", "r2"], ["r0"], None)
    keep, remove, why = choose(racks3, set(), 18, 2, 1)  # all healthy: the one beyond the count goes
    assert [r["name"] for r in remove] == ["r2"]
    # A rack short of one node (one VM in an NVLink domain of its own): both pieces go, 18 instances.
    split = [rack("stray", 1), rack("r0", 17, first=1, agrees_with_azure=False), rack("r1", 18), rack("r2", 18)]
    keep, remove, why = choose(split, set(), 18, 2, 1)
    assert [r["name"] for r in remove] == ["stray", "r0"] and why is None


def test_spare_racks_never_remove_more_than_asked_nor_part_of_a_rack():
    from azgpu.deploy.rack_gate import choose

    racks3 = [rack("r0", 18), rack("r1", 18), rack("r2", 18)]
    # Two unhealthy racks, one spare: one of them goes, the other stays with its bad node left out.
    keep, remove, why = choose(racks3, {"r0-1", "r1-1"}, 18, 2, 1)
    assert [r["name"] for r in keep] == ["r2", "r0"] and [r["name"] for r in remove] == ["r1"]
    keep, remove, why = choose(racks3, set(), 18, 1, 1)  # two racks beyond the count, one spare
    assert remove == [] and "more than the 1 spare rack(s)" in why
    odd = [rack("r0", 18), rack("r1", 9, scale_set="a"), rack("r2", 9, scale_set="b")]
    keep, remove, why = choose(odd, set(), 18, 1, 1)
    assert remove == [] and "not a whole number of racks" in why
