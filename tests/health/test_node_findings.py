"""The node script's findings that matter most on real nodes: a full AzNHC -a log whose GPU finding must
survive the 4 KB budget, AzNHC's watchdog and set-up faults, the fallback's ECC, row-remap, retired-page,
lost-GPU and GB fabric/IMEX checks, and the script's own hygiene (timeouts, log, verdict descriptor).

The nvidia-smi -q variants are the real H100 capture (tests/fixtures/health/h100-nvidia-smi-q.txt) with the
fields of one section changed, in the driver's own layout; the fabric values are those Microsoft's image
test wants (Azure/azhpc-images, tests: verify_nvlink_setup: State Completed, Status Success, a ClusterUUID
and a non-zero CliqueId)."""

from __future__ import annotations

import json
import re

import pytest
from node_support import Node, fixture, nvidia_q

from azgpu.health.impact import impact_category
from azgpu.health.results import failure_of


@pytest.fixture
def node(tmp_path) -> Node:
    return Node(tmp_path / "node")


AZNHC_HEAD = "Azure Healthcheck log\n------ VM Meta Data ------\nPHYSICAL HOST NAME: AMS081063509028\n"


def category(raw: dict) -> str | None:
    c = impact_category(failure_of(raw))
    return c.rsplit(".", 1)[-1] if c else None


# ------------------------------------------------------------------------------ AzNHC's 24 failures


def test_a_24_failure_aznhc_log_keeps_the_missing_gpu_with_its_values(node):
    node.aznhc(fixture("aznhc-24-failures-gpu-count.log"), rc=1)
    verdict = node.check()
    line = json.dumps(verdict, separators=(",", ":"))
    assert len(line) <= 4000
    assert len(verdict["failures"]) + verdict["more"] == 24
    (gpu,) = [f for f in verdict["failures"] if f["check"] == "check_gpu_count"]
    assert (gpu["expected"], gpu["measured"], gpu["fault_code"], category(gpu)) == ("8", "1", "NHC2009",
                                                                                    "HpcMissingGpu")
    # Host faults with a category of their own come first, whatever AzNHC's log order.
    assert verdict["failures"][0]["check"] in ("check_hw_ib", "check_gpu_count", "check_ib_bw_gdr")
    assert verdict["failures"][-1]["fault_code"] == "NHCNA"


def test_when_findings_must_be_dropped_each_category_is_still_counted(node):
    log = AZNHC_HEAD + "".join(f"ERROR:  nhc:  Health check failed:  check_hw_eth:  No Ethernet device found matching "
                               f"eth{i}\n" for i in range(120))
    log += "ERROR:  nhc:  Health check failed:  -e check_gpu_count: Expected to see 8 but found 1. FaultCode: NHC2009\n"
    node.aznhc(log, rc=1)
    verdict = node.check()
    assert len(json.dumps(verdict, separators=(",", ":"))) <= 4000
    assert verdict["failures"][0]["check"] == "check_gpu_count"
    assert verdict["more"] > 0 and verdict["dropped"] == {"check_hw_eth": verdict["more"]}


def test_the_watchdog_line_is_not_a_failure_of_the_check_it_interrupted(node):
    node.aznhc(AZNHC_HEAD
               + 'ERROR:  nhc:  Health check failed:  Script timed out while executing "check_ib_bw_gdr 380".\n',
               rc=1)
    (f,) = node.check()["failures"]
    assert (f["check"], f["kind"]) == ("check_ib_bw_gdr", "aznhc_watchdog") and category(f) is None


def test_failures_aznhc_prints_only_on_stdout_are_read(node):
    line = "ERROR:  nhc:  Health check failed:  -e check_gpu_count: Expected to see 8 but found 7. FaultCode: NHC2009\n"
    node.aznhc(AZNHC_HEAD, rc=1, stdout=line)
    verdict = node.check()
    assert verdict["checker"] == "aznhc" and [f["check"] for f in verdict["failures"]] == ["check_gpu_count"]


def test_a_line_seen_in_the_log_and_on_stdout_counts_once(node):
    line = "ERROR:  nhc:  Health check failed:  -e check_gpu_count: Expected to see 8 but found 7. FaultCode: NHC2009\n"
    node.aznhc(AZNHC_HEAD + line, rc=1, stdout=line)
    assert len(node.check()["failures"]) == 1


def test_not_supported_text_does_not_hide_real_failures(node):
    node.aznhc(AZNHC_HEAD + "The vm SKU 'x' is currently not supported by Azure health checks.\n"
               "ERROR:  nhc:  Health check failed:  check_hw_ib:  No "
               "IB port mlx5_ib0:1 is ACTIVE (LinkUp 400 Gb/sec).\n",
               rc=1)
    verdict = node.check()
    assert verdict["aznhc"] == "ran" and verdict["failures"][0]["check"] == "check_hw_ib"


def test_aznhc_gets_the_whole_run_budget_as_its_watchdog(node):
    node.box.script("run-health-checks.sh", "#!/bin/bash\necho \"args: $*\"\nexit 0\n",
                    path="/opt/azurehpc/test/azurehpc-health-checks/run-health-checks.sh")
    node.check(AZGPU_AZNHC_TIMEOUT=3300)
    log = next((node.box.root / "var/log/azgpu").glob("health-*.log")).read_text()
    assert re.search(r"args: -a -t 3300 -o ", log)


# ------------------------------------------------------------------------------ the fallback


def q_with(section: str, field: str, value: str, gpu: int = 0, present: int = 8) -> str:
    """The 8-GPU -q with one field of one section of GPU `gpu` set (the driver's layout kept)."""
    text = nvidia_q(present)
    parts = re.split(r"(?m)^(?=GPU [0-9A-F]{8}:)", text)
    body = parts[gpu + 1]
    head, sep, rest = body.partition(f"\n    {section}\n")
    assert sep, section
    rest = re.sub(rf"(?m)^(        {re.escape(field)}\s+: ).*$", lambda m: m.group(1) + value, rest, count=1)
    parts[gpu + 1] = head + sep + rest
    return "".join(parts)


def test_the_real_h100_sections_pass_the_ecc_and_remap_checks(node):
    assert node.check()["failures"] == []


@pytest.mark.parametrize("section,field,value,kind,code,cat", [
    ("Remapped Rows", "Pending", "Yes", "gpu_row_remap", "NHC2007", "HpcRowRemapFailure"),
    ("Remapped Rows", "Remapping Failure Occurred", "Yes", "gpu_row_remap", "NHC2007", "HpcRowRemapFailure"),
])
def test_row_remapping_pending_or_failed_is_a_row_remap_failure(node, section, field, value, kind, code, cat):
    node.nvidia(q_with(section, field, value, gpu=3))
    (f,) = node.check()["failures"]
    assert (f["kind"], f["fault_code"], category(f)) == (kind, code, cat)
    assert f["gpus"][0]["bus"] == "0004:00:00.0" and f["gpus"][0]["serial"] == "1753024030848"


@pytest.mark.parametrize("sub,field",
                         [("Volatile", "SRAM Uncorrectable SEC-DED"), ("Aggregate", "SRAM Uncorrectable Parity")])
def test_uncorrectable_sram_ecc_is_dbe_over_limit(node, sub, field):
    text = nvidia_q(8)
    parts = re.split(r"(?m)^(?=GPU [0-9A-F]{8}:)", text)
    parts[2] = re.sub(rf"(?ms)(^        {sub}\n.*?^            {field}\s+: )0", r"\g<1>2", parts[2], count=1)
    node.nvidia("".join(parts))
    (f,) = node.check()["failures"]
    assert (f["kind"], f["fault_code"], category(f)) == ("gpu_ecc", "NHC2019", "DBEOverLimit")


def test_dram_errors_above_aznhc_threshold_are_dbe_over_limit(node):
    text = nvidia_q(8)
    parts = re.split(r"(?m)^(?=GPU [0-9A-F]{8}:)", text)
    parts[1] = re.sub(r"(?ms)(^        Aggregate\n.*?^            DRAM Uncorrectable\s+: )0", r"\g<1>20000001",
                      parts[1], count=1)
    node.nvidia("".join(parts))
    (f,) = node.check()["failures"]
    assert (f["kind"], category(f)) == ("gpu_ecc", "DBEOverLimit")


def test_a_full_page_retirement_table_is_reported_where_the_gpu_retires_pages(node):
    text = q_with("Retired Pages", "Single Bit ECC", "40")
    text = text.replace("Double Bit ECC                                 : N/A",
                        "Double Bit ECC                                 : 22", 1)
    text = text.replace("Pending Page Blacklist                         : N/A",
                        "Pending Page Blacklist                         : Yes", 1)
    node.nvidia(text)
    (f,) = node.check()["failures"]
    assert (f["kind"], f["fault_code"], category(f)) == ("gpu_retired_pages", "NHC2018", "ECCPageRetirementTableFull")


def test_no_devices_found_while_the_gpus_are_on_the_pci_bus_is_a_missing_gpu(node):
    node.nvidia("No devices were found\n", rc=6)
    (f,) = node.check()["failures"]
    assert (f["kind"], f["expected"], f["measured"], category(f)) == ("missing_gpu", "8", "0", "HpcMissingGpu")
    assert len(f["gpus"]) == 8 and "8 on the PCI bus" in f["message"]


def test_a_lost_gpu_without_an_xid_line_is_fallen_off_the_bus(node):
    node.nvidia("Unable to determine the device handle for GPU0000:00:00.0: GPU is lost.  Reboot the system to "
                "recover this GPU\n".replace("GPU0000:00:00.0", "GPU 00000003:00:00.0"), rc=15)
    (f,) = node.check()["failures"]
    assert (f["kind"], category(f)) == ("gpu_lost", "XID79FallenOffBus")
    assert f["gpus"][0]["bus"] == "0003:00:00.0"


def test_no_nvidia_smi_at_all_is_an_image_fault_not_a_host_fault(node):
    node.box.script("nvidia-smi", "#!/bin/bash\nexit 127\n")
    (f,) = node.check()["failures"]
    assert f["kind"] == "tool_missing" and category(f) is None


# ------------------------------------------------------------------------------ GB fabric and IMEX


def gb_q(state: str = "Completed", status: str = "Success", clique: str = "32766",
         uuid: str = "4e5f6a7b-0000-4c4c-9e9e-0123456789ab", gpus: int = 4) -> str:
    text = nvidia_q(gpus)
    text = re.sub(r"(?m)^(        State\s+: )N/A", lambda m: m.group(1) + state, text)
    text = re.sub(r"(?m)^(        Status\s+: )N/A", lambda m: m.group(1) + status, text)
    text = re.sub(r"(?m)^(        CliqueId\s+: )N/A", lambda m: m.group(1) + clique, text)
    return re.sub(r"(?m)^(        ClusterUUID\s+: )N/A", lambda m: m.group(1) + uuid, text)


def gb_node(node: Node, q: str, *, imex: str = "active", channel: bool = True) -> dict:
    node.nvidia(q)
    node.box.tool("systemctl", imex + "\n", rc=0 if imex == "active" else 3)
    if channel:
        node.box.file("/dev/nvidia-caps-imex-channels/channel0", "")
    return node.check(AZGPU_EXPECT_GPUS=4, AZGPU_CHECK_FABRIC=1, AZGPU_EXPECT_IB_PORTS=0, AZGPU_CHECK_NVLINK=0)


def test_a_gb_node_with_its_fabric_completed_passes_and_says_where_it_is(node):
    verdict = gb_node(node, gb_q())
    assert verdict["failures"] == []
    assert verdict["fabric"] == {"clusterUuid": "4e5f6a7b-0000-4c4c-9e9e-0123456789ab", "cliqueId": 32766,
                                 "state": "Completed", "status": "Success", "complete": True}


def test_a_fabric_not_completed_is_an_nvlink_fault(node):
    verdict = gb_node(node, gb_q(state="In Progress", status="N/A"))
    assert {f["kind"] for f in verdict["failures"]} == {"fabric"}
    assert category(verdict["failures"][0]) == "NvLink" and verdict["fabric"]["complete"] is False


def test_a_missing_imex_channel_and_a_stopped_service_are_named(node):
    verdict = gb_node(node, gb_q(), imex="inactive", channel=False)
    assert sorted(f["kind"] for f in verdict["failures"]) == ["imex_channel", "imex_service"]
    assert {category(f) for f in verdict["failures"]} == {"NvLink"}


# ------------------------------------------------------------------------------ hygiene


def test_the_node_log_holds_each_tools_output(node):
    node.check()
    log = next((node.box.root / "var/log/azgpu").glob("health-*.log")).read_text()
    assert "==== nvidia-smi -q (exit 0)" in log and "Product Name" in log and "==== dmesg" in log


def test_a_planted_link_for_the_log_directory_is_not_followed(node, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (node.box.root / "var/log").mkdir(parents=True)
    (node.box.root / "var/log/azgpu").symlink_to(elsewhere)
    assert node.check()["failures"] == []
    assert list(elsewhere.iterdir()) == []


def test_a_tool_that_ignores_sigterm_is_killed_and_not_asked_again(node):
    calls = node.box.root / "calls"
    node.box.script("nvidia-smi", f"#!/bin/bash\necho \"$*\" >>{calls}\ntrap '' TERM\nsleep 30\n")
    verdict = node.check(AZGPU_SMI_TIMEOUT=1)
    assert [f["kind"] for f in verdict["failures"]] == ["nvidia_smi_hang"]
    assert calls.read_text().splitlines() == ["-q"]
    assert verdict["seconds"] < 20


def test_a_tool_left_running_cannot_write_the_verdict(node):
    # A child that outlives the script and writes to every descriptor it holds: none is Run Command's stdout.
    node.box.script("dmesg", "#!/bin/bash\n( sleep 1; for fd in 1 2 3 4 5 6 7 8 9; do echo '{\"azgpu_health\":1,"
                             "\"failures\":[]}' >&$fd; done ) 2>/dev/null &\nexit 0\n")
    node.nvidia(nvidia_q(7))
    ran = node.box.run(__import__("azgpu.health.script", fromlist=["x"]).script_lines("check", {
        "AZGPU_EXPECT_GPUS": 8, "AZGPU_EXPECT_IB_PORTS": 8, "AZGPU_EXPECT_IB_RATE": 400}))
    lines = [row for row in ran.stdout.splitlines() if row.strip()]
    assert len(lines) == 1 and json.loads(lines[0])["failures"][0]["kind"] == "missing_gpu"


def test_the_log_directory_keeps_only_the_newest_logs(node):
    logs = node.box.root / "var/log/azgpu"
    logs.mkdir(parents=True)
    logs.chmod(0o700)
    for i in range(60):
        (logs / f"health-20200101T0000{i:02d}Z-1.log").write_text("old\n")
    node.check()
    kept = sorted(p.name for p in logs.iterdir())
    assert len(kept) == 40 and any(not name.startswith("health-2020") for name in kept)  # this run's log stays


def test_tables_drop_control_characters_and_tsv_escapes_what_would_forge_a_row():
    from azgpu.output import render

    row = {"node": "n1\x1b]0;owned\x07", "message": "a\tb\nc\\d"}
    table = render([row], "table")
    assert "\x1b" not in table and "\x07" not in table and "a b c\\d" in table
    assert render([row], "tsv") == "n1]0;owned\ta\\tb\\nc\\\\d\n"
