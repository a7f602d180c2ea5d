"""Per-size health expectations live in the profiles, each with its source; a size with GPUs cannot
go without them, and `profiles show` prints them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from azgpu import list_profiles, load_profile
from azgpu.errors import ProfileError
from azgpu.health.script import GPU_MEMORY_SHARE, Expectations
from azgpu.sources import sources

SIZES = [(p.id, s) for p in list_profiles() for s in p.sizes]
GPU_SIZES = [(pid, s) for pid, s in SIZES if s.gpus > 0]
IB_SIZES = [(pid, s) for pid, s in SIZES if s.infiniband]


def ids(items):
    return [s.name for _, s in items]


@pytest.mark.parametrize("profile_id, size", GPU_SIZES, ids=ids(GPU_SIZES))
def test_every_size_with_gpus_has_sourced_expectations(profile_id, size):
    assert size.health is not None, f"{profile_id} {size.name}"
    for name in ("aznhc_conf", "gpus", "gpu_vendor"):
        assert name in size.health.facts, f"{size.name}: {name}"
    known = sources()
    for name, fact in size.health.facts.items():
        assert fact.source, f"{size.name}.{name}"
        assert all(k.startswith("seed:") or k in known for k in fact.source), f"{size.name}.{name}: {fact.source}"


@pytest.mark.parametrize("profile_id, size", IB_SIZES, ids=ids(IB_SIZES))
def test_every_infiniband_size_expects_ports_rate_and_bandwidth(profile_id, size):
    for name in ("ib_ports", "ib_rate_gbps", "nccl_busbw_gbps"):
        assert name in size.health.facts, f"{size.name}: {name}"
    assert size.health.get("ib_ports") == size.ib_ports


@pytest.mark.parametrize("profile_id, size", GPU_SIZES, ids=ids(GPU_SIZES))
def test_expected_gpu_count_matches_the_documented_count(profile_id, size):
    assert size.health.get("gpus") == size.gpus


def test_aznhc_sizes_name_their_conf_file_and_the_others_say_none():
    confs = {s.name: s.health.get("aznhc_conf") for _, s in GPU_SIZES}
    assert confs["Standard_ND96asr_v4"] == "nd96asr_v4.conf"
    assert confs["Standard_ND96isr_H100_v5"] == "nd96isr_h100_v5.conf"
    assert confs["Standard_ND128isr_GB300_v6"] == "" and confs["Standard_NG8ads_V620_v1"] == ""


def test_expectations_take_the_memory_floor_from_the_documented_size():
    exp = Expectations.of(load_profile("nd-h100-v5").size("Standard_ND96isr_H100_v5"))
    assert exp.gpu_memory_mib_min == int(80 * 1024 * GPU_MEMORY_SHARE)
    # A real H100 80GB HBM3 reports 81559 MiB (gpu-samples): above the floor.
    assert exp.gpu_memory_mib_min < 81559
    assert exp.settings()["AZGPU_EXPECT_IB_RATE"] == 400


def test_amd_sizes_check_no_memory():
    exp = Expectations.of(load_profile("nd-mi300x-v5").size("Standard_ND96isr_MI300X_v5"))
    assert exp.gpu_vendor == "amd" and exp.gpu_memory_mib_min == 0


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))


HEALTH_BLOCK = '[sizes.health]\naznhc_conf = { value = "nd40rs_v2.conf", source = ["R-nhc-ndv2", "R-nhc-run"] }'


def test_a_size_with_gpus_but_no_expectations_fails_loading(profile_copy):
    text = (profile_copy / "ndv2.toml").read_text()
    start = text.index("[sizes.health]")
    end = text.index("[images]")
    (profile_copy / "ndv2.toml").write_text(text[:start] + text[end:])
    with pytest.raises(ProfileError) as info:
        load_profile("ndv2")
    message = str(info.value)
    assert "ndv2.toml" in message and "Standard_ND40rs_v2" in message and "no health expectations" in message


def test_an_expectation_without_source_fails_loading(profile_copy):
    edit(profile_copy / "ndv2.toml", 'gpus = { value = 8, source = "R-nhc-ndv2", note = "check_gpu_count 8" }',
         "gpus = { value = 8 }")
    with pytest.raises(ProfileError) as info:
        load_profile("ndv2")
    assert "ndv2.toml" in str(info.value) and "'gpus'" in str(info.value)


def test_an_infiniband_size_without_bandwidth_expectation_fails_loading(profile_copy):
    text = (profile_copy / "ndv2.toml").read_text()
    line = next(t for t in text.splitlines() if t.startswith("nccl_busbw_gbps"))
    edit(profile_copy / "ndv2.toml", line + "\n", "")
    with pytest.raises(ProfileError) as info:
        load_profile("ndv2")
    assert "nccl_busbw_gbps" in str(info.value)


def test_an_unknown_expectation_fails_loading(profile_copy):
    edit(profile_copy / "ndv2.toml", HEALTH_BLOCK, HEALTH_BLOCK + '\ngpu_clock = { value = 1, source = "R-nhc-ndv2" }')
    with pytest.raises(ProfileError) as info:
        load_profile("ndv2")
    assert "gpu_clock" in str(info.value)


def test_an_unknown_gpu_vendor_fails_loading(profile_copy):
    edit(profile_copy / "ndv2.toml", 'gpu_vendor = { value = "nvidia", source = "D-ndv2" }',
         'gpu_vendor = { value = "intel", source = "D-ndv2" }')
    with pytest.raises(ProfileError) as info:
        load_profile("ndv2")
    assert "gpu_vendor" in str(info.value) and "intel" in str(info.value)


def test_profiles_show_prints_the_expectations_with_their_sources(run):
    rc, out, err = run("profiles", "show", "nd-a100-v4", "--query", "sizes[0].health")
    assert rc == 0, err
    health = json.loads(out)
    assert health["ib_rate_gbps"]["value"] == 200
    assert "nd96asr_v4.conf" in health["gpus"]["source"]
