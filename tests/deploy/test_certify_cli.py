"""`provision certify` and `simulate fault`'s certification faults on the command line: bad input exits 2
with one line and a remedy before anything runs; --dry-run prices a level; create --certify."""

from __future__ import annotations

import json

from deploy_support import RG, assert_cli_error, request

from azgpu.deploy import CertifyOptions, CreateOptions, create

H100 = "Standard_ND96isr_H100_v5"
KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJOgAYClhajeh3m7rJp5Bf+XHzOywcIepjITM9B6OJMg t"


def test_dry_run_of_a_size_prints_gpu_hours_and_the_stages(run, monkeypatch):
    monkeypatch.setenv("AZGPU_PRICES", "off")
    rc, out, err = run("certify", "--dry-run", "--size", H100, "--nodes", "64", "--level", "extended")
    assert rc == 0, err
    data = json.loads(out)
    stages = [s["stage"] for s in data["scale_sets"][0]["stages"]]
    assert stages[:3] == ["gate (AzNHC)", "dcgmi diag -r 3", "thermal (900 s under load)"]
    dcgm = data["scale_sets"][0]["stages"][1]
    assert dcgm["minutes"] == 15.3 and "15 minutes (NVIDIA" in dcgm["basis"]
    assert abs(data["gpu_hours"] - 64 * 8 * data["minutes"] / 60) < 1  # minutes are shown rounded
    assert data["scale_sets"][0]["localisation_minutes_at_most"] == round(8 * (90 + 20) / 60, 1)


def test_dry_run_of_a_simulated_cluster_prices_it_at_the_retail_price(sim, session, azure):
    assert sim("create", "--profile", "nd-h100-v5", "-n", "c1", "-g", RG, "-l", "eastus", "--nodes", "4",
               "--ssh-key", KEY)[0] == 0
    rc, out, err = sim("certify", "--dry-run", "-n", "c1", "-g", RG, "--level", "quick")
    assert rc == 0, err
    data = json.loads(out)
    row = data["scale_sets"][0]
    assert row["nodes"] == 4 and row["price_per_node_hour"] > 0
    assert abs(data["cost"] - row["price_per_node_hour"] * 4 * row["minutes"] / 60) < 0.01 * data["cost"]


def test_bad_input_exits_2_before_anything_runs(run):
    cases = [
        (("certify", "--dry-run", "--size", H100), "MISSING_ARGUMENT", "--nodes"),
        (("certify", "-n", "c1", "-g", RG, "--size", H100, "--simulate"), "CONFLICTING_OPTIONS", "--dry-run"),
        (("certify", "-n", "c1", "-g", RG, "--chart", "out.png", "--simulate"), "INVALID_CHART_FILE", ".svg"),
        (("certify", "-n", "c1", "-g", RG, "--max-rounds", "0", "--simulate"), "INVALID_MAX_ROUNDS", "1 to 10"),
        (("certify", "--dry-run", "--size", "Standard_Nope", "--nodes", "2"), "UNKNOWN_SIZE", "profiles list"),
        (("certify", "-n", "c1", "-g", RG, "--report-to-azure", "--simulate"), "CONFIRMATION_REQUIRED", "--yes"),
    ]
    for argv, code, remedy in cases:
        rc, out, err = run(*argv)
        assert_cli_error(rc, err, 2, code, remedy)
        assert "Traceback" not in err and out == ""


def test_simulate_fault_refuses_a_bad_certification_fault(sim, run, state_file):
    assert sim("create", "--profile", "nd-h100-v5", "-n", "c1", "-g", RG, "-l", "eastus", "--nodes", "2",
               "--ssh-key", KEY)[0] == 0
    for flag, value in (("--ib-degraded", "mlx5_ib9:0.5"), ("--ib-degraded", "mlx5_ib1:1.5"),
                        ("--gpu-throttle", "9:60"), ("--transient", "0"), ("--nvlink-degraded", "0.5")):
        rc, out, err = run("simulate", "fault", "-n", "c1", "--instance", "0", flag, value,
                           "--simulate-state", state_file)
        assert rc == 2 and "INVALID_FAULT" in err and "Traceback" not in err, (flag, value, err)
    rc, out, err = run("simulate", "fault", "-n", "c1", "--instance", "0", "--ib-degraded", "mlx5_ib3:0.6",
                       "--gpu-throttle", "2:60", "--ib-flapping", "mlx5_ib1:20", "--transient", "1",
                       "--simulate-state", state_file)
    assert rc == 0, err
    assert json.loads(out)["nodes"][0]["faults"] == ["mlx5_ib3 carries 60%", "mlx5_ib1 flaps every 20 s",
                                                    "GPU 2 throttles after 60 s under load", "1 transient slowdown(s)"]


def test_create_certify_puts_the_certificate_in_the_result(azure, session):
    result = create(session, request("nd-h100-v5", nodes=3),
                    CreateOptions(certify=CertifyOptions(level="quick")))
    assert result.healthy and result.certificate["verdict"] == "certified"
    assert result.as_dict()["certificate"]["summary"]["certified"] == 3


def test_a_chart_in_a_folder_that_is_not_there_is_refused_before_anything_runs(run, tmp_path):
    """Found after hours of burn-in, a bad chart path used to end the command with the certificate unprinted."""
    rc, out, err = run("certify", "-n", "c1", "-g", RG, "--chart", str(tmp_path / "nope" / "c.svg"), "--simulate")
    assert_cli_error(rc, err, 2, "INVALID_CHART_FILE", "writable folder")


def test_the_chart_replaces_a_symlink_never_writes_through_it(tmp_path):
    from azgpu.cli.certify import emit_certificate

    victim = tmp_path / "authorized_keys"
    victim.write_text("ssh-ed25519 AAAA keep\n")
    link = tmp_path / "chart.svg"
    link.symlink_to(victim)
    record = {"cluster": "c1", "verdict": "certified", "nodes": [
        {"node": "n0", "status": "certified", "measurements": [{"check": "loopback_busbw", "value": 40.0}]}]}
    emit_certificate(record, {"output": "json", "query": None}, str(link))
    assert victim.read_text() == "ssh-ed25519 AAAA keep\n"
    assert not link.is_symlink() and link.read_text().startswith("<svg")
