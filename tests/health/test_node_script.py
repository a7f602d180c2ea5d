"""azgpu's node script (src/azgpu/health/node_check.sh) run for real, in bash, against stub tools that
print real output (tests/fixtures/health) and faulty variants derived from it. No GPU machine is
lent to this work: these captures are the check that the script reads real bytes right."""

from __future__ import annotations

import json

import pytest
from node_support import Node, capture, fixture, kinds, nvidia_q, xid_line

from azgpu.health.results import failure_of


@pytest.fixture
def node(tmp_path) -> Node:
    return Node(tmp_path / "node")


# ------------------------------------------------------------------------------ the real H100 capture


def test_the_real_single_h100_passes_the_fallback_for_one_gpu_without_infiniband(node):
    q, _ = capture("h100-nvidia-smi-q.txt")
    node.nvidia(q, nvlink=capture("h100-nvidia-smi-nvlink-s.txt")[0])
    verdict = node.check(AZGPU_EXPECT_GPUS=1, AZGPU_EXPECT_IB_PORTS=0, AZGPU_CHECK_NVLINK=1)
    assert verdict["failures"] == [] and verdict["gpus_found"] == 1
    assert verdict["checker"] == "fallback" and verdict["aznhc"] == "missing"


def test_the_real_single_h100_fails_an_eight_gpu_expectation(node):
    node.nvidia(capture("h100-nvidia-smi-q.txt")[0])
    (failure,) = node.check(AZGPU_EXPECT_IB_PORTS=0)["failures"][:1]
    assert failure["kind"] == "missing_gpu" and failure["expected"] == "8" and failure["measured"] == "1"


def test_expecting_infiniband_on_the_real_machine_without_it_reports_it_missing(tmp_path):
    node = Node(tmp_path / "n")
    for i in range(8):  # the real machine's /sys/class/infiniband is empty (h100-sys-class-infiniband.txt)
        for f in ("state", "phys_state", "rate", "link_layer"):
            (node.box.root / f"sys/class/infiniband/mlx5_ib{i}/ports/1/{f}").unlink()
    assert "total 0" in fixture("h100-sys-class-infiniband.txt")
    verdict = node.check()
    (failure,) = verdict["failures"]
    assert failure["kind"] == "ib_missing" and failure["measured"] == "0 ports" and verdict["ib_found"] == 0


# ------------------------------------------------------------------------------ GPUs


def test_a_healthy_eight_gpu_node_passes(node):
    verdict = node.check()
    assert verdict["failures"] == [] and verdict["gpus_found"] == 8 and verdict["ib_found"] == 8
    assert "gpus" not in verdict  # the inventory comes only with a GPU fault


def test_seven_of_eight_gpus_names_the_missing_one_by_its_pci_bus_id(node):
    node.nvidia(nvidia_q(7))
    verdict = node.check()
    (failure,) = verdict["failures"]
    assert (failure["kind"], failure["expected"], failure["measured"]) == ("missing_gpu", "8", "7")
    assert failure["gpus"] == [{"bus": "0008:00:00.0", "serial": ""}]
    assert [g["serial"] for g in verdict["gpus"]][:2] == ["1753024030845", "1753024030846"]


def test_gpu_memory_below_the_floor_is_a_failure_per_gpu(node):
    node.nvidia(nvidia_q(8, memory_mib=40960))
    verdict = node.check()
    assert kinds(verdict) == ["gpu_memory"] * 8
    assert verdict["failures"][0]["measured"] == "40960 MiB" and verdict["failures"][0]["expected"] == ">= 77824 MiB"


def test_an_nvidia_smi_that_hangs_is_reported_as_a_hang(node):
    node.nvidia("", rc=124)  # what timeout(1) returns after killing a hung nvidia-smi
    (failure,) = node.check()["failures"]
    assert failure["kind"] == "nvidia_smi_hang"


def test_an_nvidia_smi_that_fails_keeps_its_first_line(node):
    message = "Unable to determine the device handle for GPU 0000:00:06.0: Unknown Error"
    node.nvidia(message + "\n", rc=255)
    (failure,) = node.check()["failures"]
    assert failure["kind"] == "nvidia_smi_error" and message in failure["message"] and failure["measured"] == "exit 255"


def test_a_driver_that_is_not_loaded_is_its_own_finding(node):
    # nvidia-smi(1) RETURN VALUE 9: "NVIDIA driver is not loaded"; its message as the tool prints it.
    message = "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."
    node.nvidia(message + "\n", rc=9)
    (failure,) = node.check()["failures"]
    assert failure["kind"] == "driver_not_loaded" and message in failure["message"] and failure["measured"] == "exit 9"


def test_inactive_nvlinks_from_aznhc_real_sample_fail(node):
    node.nvidia(nvidia_q(8), nvlink=fixture("aznhc-bad_nvlink_status.txt"))
    (failure,) = node.check()["failures"]
    assert failure["kind"] == "nvlink" and "GPU 6" in failure["message"]


def test_nvlink_not_exposed_is_not_judged(node):
    node.nvidia(nvidia_q(8), nvlink=capture("h100-nvidia-smi-nvlink-s.txt")[0])
    assert node.check()["failures"] == []


# ------------------------------------------------------------------------------ Xids


def test_the_real_kernel_log_without_xid_passes(node):
    assert node.check()["failures"] == []


def test_an_xid_79_is_reported_with_the_gpu_serial(node):
    node.box.tool("dmesg", capture("h100-dmesg-xid.txt")[0] + xid_line(79, "0002:00:00"))
    (failure,) = node.check()["failures"]
    assert failure["kind"] == "xid" and failure["xid"] == 79
    assert failure["gpus"] == [{"bus": "0002:00:00.0", "serial": "1753024030846"}]
    assert failure_of(failure).xid == 79


def test_an_xid_that_is_not_a_hardware_fault_is_ignored(node):
    node.box.tool("dmesg", capture("h100-dmesg-xid.txt")[0] + xid_line(13, text="Graphics SM Warp Exception"))
    assert node.check()["failures"] == []


# ------------------------------------------------------------------------------ InfiniBand


def test_a_port_down_is_named(node):
    node.box.ib_port("mlx5_ib3", state="1: DOWN", phys_state="2: Polling", rate="400 Gb/sec (4X NDR)")
    (failure,) = node.check()["failures"]
    assert (failure["kind"], failure["port"], failure["measured"]) == ("ib_port_down", "mlx5_ib3:1", "DOWN Polling")


def test_a_port_at_a_lower_rate_is_named_with_both_rates(node):
    node.box.ib_port("mlx5_ib5", rate="200 Gb/sec (2X NDR)")
    (failure,) = node.check()["failures"]
    assert (failure["kind"], failure["expected"], failure["measured"]) == ("ib_port_rate", "400 Gb/sec", "200 Gb/sec")


def test_a_rate_of_zero_means_only_the_state_is_checked(node):
    node.box.ib_port("mlx5_ib5", rate="200 Gb/sec (2X NDR)")
    assert node.check(AZGPU_EXPECT_IB_RATE=0)["failures"] == []


def test_the_accelerated_networking_ethernet_port_does_not_count(node):
    node.box.ib_port("mlx5_an0", rate="100 Gb/sec (4X EDR)", link_layer="Ethernet")
    verdict = node.check()
    assert verdict["failures"] == [] and verdict["ib_found"] == 8


def test_a_missing_port_is_counted(node):
    for f in ("state", "phys_state", "rate", "link_layer"):
        (node.box.root / f"sys/class/infiniband/mlx5_ib7/ports/1/{f}").unlink()
    (failure,) = node.check()["failures"]
    assert (failure["kind"], failure["measured"]) == ("ib_missing", "7 ports")


# ------------------------------------------------------------------------------ identity


def test_identity_comes_from_kvp_pool_3_and_imds(node):
    host = node.check()["host"]
    assert host == {"computer": "nd-node-0", "physical_host": "AMS081063509028",
                    "vm_id": "5f0a3c2e-1111-4c4c-9e9e-0123456789ab", "vm_id_source": "imds",
                    "vm_size": "Standard_ND96isr_H100_v5"}


def test_kvp_client_is_preferred_where_the_image_ships_it(node):
    node.box.tool("kvp_client", "Pool is 3\nNum records is 1\nKey: PhysicalHostName; Value: GGBB90904476\n",
                  path="/opt/azurehpc/tools/kvp_client")
    assert node.check()["host"]["physical_host"] == "GGBB90904476"


def test_without_imds_the_vm_id_comes_from_smbios_and_says_so(node):
    node.box.tool("curl", "", rc=28)
    node.box.file("/sys/class/dmi/id/product_uuid", "2E3C0A5F-1111-4C4C-9E9E-0123456789AB\n")
    host = node.check()["host"]
    assert host["vm_id"] == "2E3C0A5F-1111-4C4C-9E9E-0123456789AB" and host["vm_id_source"] == "smbios"


# ------------------------------------------------------------------------------ AzNHC


AZNHC_HEAD = "Azure Healthcheck log\n------ VM Meta Data ------\nPHYSICAL HOST NAME: AMS081063509028\n"


def real_aznhc_lines() -> list[str]:
    return fixture("aznhc-lines-real.txt").splitlines()


def test_aznhc_real_failure_lines_are_digested(node):
    lines = real_aznhc_lines()
    node.box.ib_port("mlx5_ib0", state="1: DOWN", phys_state="2: Polling", rate="400 Gb/sec (4X NDR)")
    node.aznhc(AZNHC_HEAD + "\n".join(lines[:5]) + "\nsome unrelated stderr line\n", rc=1)
    verdict = node.check()
    assert verdict["checker"] == "aznhc" and verdict["aznhc"] == "ran"
    count, ib, setup = verdict["failures"]  # the summary line "24 health checks failed." is not a check
    assert (count["check"], count["expected"], count["measured"], count["fault_code"]) == \
           ("check_gpu_count", "8", "1", "NHC2009")
    assert count["message"].startswith("check_gpu_count:")  # the stray "-e " is gone
    assert (ib["check"], ib["port"], ib["expected"], ib["measured"]) == \
           ("check_hw_ib", "mlx5_ib0:1", "ACTIVE LinkUp 400 Gb/sec", "DOWN Polling 400 Gb/sec")
    assert "fault_code" not in ib  # check_hw_ib prints none
    assert setup["check"] == "check_all_reduce_dependencies" and "HPCX_DIR" in setup["message"]
    assert failure_of(count).kind == "missing_gpu" and failure_of(ib).kind == "ib_port_down"


def test_aznhc_fault_code_misspelt_fauledcode_is_read(node):
    node.aznhc(AZNHC_HEAD + "ERROR:  nhc:  Health check failed:  check_hw_topology: SKU x is not supported for this "
                            "test. FauleCode: NHCNA\n", rc=1)
    (failure,) = node.check()["failures"]
    assert failure["fault_code"] == "NHCNA"


def test_aznhc_passing_means_the_fallback_does_not_run(node):
    node.nvidia("", rc=124)  # would fail the fallback
    node.aznhc(AZNHC_HEAD + real_aznhc_lines()[0] + "\nHealth checks completed with exit code: 0.\n")
    verdict = node.check()
    assert verdict["failures"] == [] and verdict["checker"] == "aznhc"


def test_an_unsupported_size_falls_back_and_says_so(node):
    unsupported = real_aznhc_lines()[5]
    node.aznhc(unsupported + "\n", stdout="No custom conf file specified, detecting VM SKU...\n" + unsupported + "\n")
    node.nvidia(nvidia_q(7))
    verdict = node.check()
    assert verdict["aznhc"] == "unsupported" and verdict["checker"] == "fallback"
    assert kinds(verdict) == ["missing_gpu"]


def test_aznhc_that_breaks_without_results_falls_back_with_its_error(node):
    node.aznhc("", rc=125, stdout="docker: Error response from daemon: could not select device driver.\n")
    verdict = node.check()
    assert verdict["aznhc"] == "failed" and verdict["checker"] == "fallback"
    assert "could not select device driver" in verdict["aznhc_error"] and verdict["failures"] == []


def test_the_physical_host_falls_back_to_aznhc_meta_data(node):
    node.box.kvp_pool(3, {"HostName": "x"})
    node.aznhc(AZNHC_HEAD + real_aznhc_lines()[0] + "\n")
    assert node.check()["host"]["physical_host"] == "AMS081063509028"


# ------------------------------------------------------------------------------ the 4 KB tail


def test_many_failures_still_fit_in_one_short_line(node):
    lines = "".join(xid_line(79, f"{i:04x}:00:00", text="x" * 300 + '"\\ quoted') for i in range(1, 9))
    node.box.tool("dmesg", lines)
    node.nvidia(nvidia_q(1, memory_mib=100))
    for i in range(8):
        node.box.ib_port(f"mlx5_ib{i}", state="1: DOWN", phys_state="3: Disabled", rate="400 Gb/sec (4X NDR)")
    verdict = node.check()
    line = json.dumps(verdict, separators=(",", ":"))
    assert len(line) <= 4000  # the budget: Run Command's 4,096-byte tail less 96 bytes
    assert len(verdict["failures"]) == 1 + 1 + 8 + 8 and verdict["more"] == 0  # count, memory, 8 ports, 8 Xids


def test_control_characters_and_quotes_stay_valid_json(node):
    node.nvidia('bad "quote" \\ back\tslash \x01 \xe2\x9c\x93\n', rc=3)
    (failure,) = node.check()["failures"]
    assert '"quote"' in failure["message"]


# ------------------------------------------------------------------------------ AMD


def test_the_real_rocm_smi_output_counts_eight_gpus(node):
    node.box.tool("rocm-smi", "", cases=[("--showbus", fixture("rocm-smi-showbus-8xmi60.txt"), 0)])
    verdict = node.check(AZGPU_GPU_VENDOR="amd", AZGPU_GPU_MEMORY_MIB_MIN=0)
    assert verdict["failures"] == [] and verdict["gpus_found"] == 8


def test_seven_amd_gpus_are_reported_missing(node):
    text = "\n".join(row for row in fixture("rocm-smi-showbus-8xmi60.txt").splitlines() if "GPU[7]" not in row) + "\n"
    node.box.tool("rocm-smi", "", cases=[("--showbus", text, 0)])
    (failure,) = node.check(AZGPU_GPU_VENDOR="amd", AZGPU_GPU_MEMORY_MIB_MIN=0)["failures"]
    assert (failure["kind"], failure["measured"]) == ("missing_gpu", "7")


# ------------------------------------------------------------------------------ multi-node NCCL steps


def test_keygen_keeps_the_private_key_and_returns_the_public_one(node):
    node.box.script("ssh-keygen", "#!/bin/bash\nwhile [ $# -gt 0 ]; do [ \"$1\" = -f ] && F=$2; shift; done\n"
                                  "echo PRIVATE >\"$F\"\necho 'ssh-ed25519 AAAAtest azgpu-nccl' >\"$F.pub\"\n")
    verdict = node.run("nccl-keygen", {"AZGPU_ADMIN_USER": "azureuser"})
    assert verdict["pubkey"] == "ssh-ed25519 AAAAtest azgpu-nccl"
    assert (node.box.root / "home/azureuser/.azgpu-nccl/id_ed25519").read_text() == "PRIVATE\n"


KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGt5LWZvci10aGUtdGVzdHMtb25seS0wMDAwMDAwMDAw azgpu-nccl"


def test_trust_accepts_the_key_only_from_the_launcher_until_it_expires_and_untrust_removes_it(node):
    keys = node.box.file("/home/azureuser/.ssh/authorized_keys", "ssh-ed25519 AAAAuser me@laptop\n")
    settings = {"AZGPU_ADMIN_USER": "azureuser", "AZGPU_NCCL_PUBKEY": KEY,
                "AZGPU_NCCL_FROM": "10.0.0.4", "AZGPU_NCCL_EXPIRY": "202611231700"}
    assert node.run("nccl-trust", settings)["ok"] is True
    assert keys.read_text().splitlines() == [
        "ssh-ed25519 AAAAuser me@laptop",
        f'from="10.0.0.4",expiry-time="202611231700",no-agent-forwarding,no-X11-forwarding {KEY}']
    node.run("nccl-untrust", {"AZGPU_ADMIN_USER": "azureuser", "AZGPU_NCCL_PUBKEY": KEY})
    assert keys.read_text() == "ssh-ed25519 AAAAuser me@laptop\n"


@pytest.mark.parametrize("key", [KEY + "\nssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIbad azgpu-nccl",
                                 'command="sh" ' + KEY, KEY.replace("azgpu-nccl", "other"), "", "ssh-rsa AAAA x"])
def test_trust_refuses_anything_but_one_azgpu_key_line(node, key):
    keys = node.box.file("/home/azureuser/.ssh/authorized_keys", "ssh-ed25519 AAAAuser me@laptop\n")
    verdict = node.run("nccl-trust", {"AZGPU_ADMIN_USER": "azureuser", "AZGPU_NCCL_PUBKEY": key,
                                      "AZGPU_NCCL_FROM": "10.0.0.4", "AZGPU_NCCL_EXPIRY": "202611231700"})
    assert verdict["ok"] is False and "refused" in verdict["error"]
    assert keys.read_text() == "ssh-ed25519 AAAAuser me@laptop\n"


def test_untrust_leaves_every_line_it_did_not_add(node):
    mine = f'from="10.0.0.4",expiry-time="202611231700",no-agent-forwarding,no-X11-forwarding {KEY}\n'
    others = "ssh-ed25519 AAAAuser me@laptop azgpu-nccl\nssh-ed25519 AAAAC3other x azgpu-nccl\n"
    keys = node.box.file("/home/azureuser/.ssh/authorized_keys", others + mine)
    node.run("nccl-untrust", {"AZGPU_ADMIN_USER": "azureuser", "AZGPU_NCCL_PUBKEY": KEY})
    assert keys.read_text() == others


def nccl_run(node, stdout: str, rc: int = 0) -> dict:
    node.box.script("runuser", '#!/bin/bash\nwhile [ $# -gt 0 ] && [ "$1" != -- ]; do shift; done\nshift\nexec "$@"\n')
    node.box.tool("mpirun", stdout, rc=rc)
    return node.run("nccl-run", {"AZGPU_ADMIN_USER": "azureuser", "AZGPU_NCCL_HOSTS": "10.0.0.4 10.0.0.5",
                                 "AZGPU_EXPECT_GPUS": 8})


def test_the_real_all_reduce_output_gives_the_largest_size_bus_bandwidth(node):
    verdict = nccl_run(node, fixture("nccl-all_reduce_perf-2x8-h100.txt"))
    assert (verdict["ok"], verdict["busbw_gbps"], verdict["size_bytes"], verdict["wrong"], verdict["ranks"]) == \
           (True, 338.82, 8589934592, 0, 16)


def test_an_mpirun_that_fails_reports_its_last_lines(node):
    verdict = nccl_run(node, "azureuser@10.0.0.5: Permission denied (publickey).\nORTE was unable to reliably start "
                             "one or more daemons.\n", rc=1)
    assert verdict["ok"] is False and "Permission denied" in verdict["error"]
