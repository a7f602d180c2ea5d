"""The certification parsers on each real output format from its public source (tests/fixtures/certify/,
sources.toml names each), and on hostile variants of them: truncated, NaN, huge, nested, wrong types.
A parser ends in a typed result or an OutputError, never a traceback."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from azgpu.certify import clocks, dcgm, nccl_tests, nvbandwidth, perftest
from azgpu.certify.bounded import MAX_TEXT, OutputError

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "certify"
HEALTH = Path(__file__).resolve().parents[1] / "fixtures" / "health"
TEMPLATES = Path(__file__).resolve().parents[2] / "src" / "azgpu" / "testing" / "data" / "certify"


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


def test_every_fixture_names_its_source():
    listed = tomllib.loads((FIXTURES / "sources.toml").read_text())
    assert {p.name for p in FIXTURES.iterdir() if p.name != "sources.toml"} == set(listed)
    for name, entry in listed.items():
        assert entry.get("what") and entry.get("source", "").startswith("https://github.com/"), name


def test_the_fakes_templates_are_the_fixtures():
    for template in TEMPLATES.iterdir():
        assert template.read_bytes() == (FIXTURES / template.name).read_bytes(), template.name


# ------------------------------------------------------------------------------ real formats


def test_nccl_tests_all_reduce_of_two_h100_nodes():
    run = nccl_tests.parse(fixture("nccl-all_reduce_perf-2x8-h100.txt"))
    assert (run.ranks, run.hosts, len(run.rows)) == (16, ("ztan-mig-235z", "ztan-mig-gq73"), 31)
    assert (run.largest.size, run.busbw, run.wrong) == (8589934592, 338.82, 0)
    assert (run.out_of_bounds, run.avg_busbw) == (0, 70.742)


def test_nccl_tests_table_without_header_and_with_na_in_place():
    run = nccl_tests.parse(fixture("nccl-sendrecv_perf-8xa100.txt"))
    assert run.largest.in_place_wrong is None and run.largest.wrong == 0
    assert run.busbw == 195.56  # the better of out of place (195.10) and in place


def test_perftest_with_gpudirect_reads_the_average_of_a_duration_run():
    run = perftest.parse(fixture("perftest-ib_write_bw-cuda-client.txt"))
    assert (run.gbps, run.device, run.qps, run.cuda, run.gpu) == (181.46, "mlx5_1", 16, True, "NVIDIA A40")
    assert run.rows[0].bw_peak == 0.0 and run.errors == ()


def test_dcgm_3_json_with_nulls_between_tests_and_text_before_it():
    run = dcgm.parse(fixture("dcgm-3.1.0-diag-8gpu.json.txt"))
    assert run.version == "3.1.0" and len(run.results) == 17 and run.failures == ()
    assert run.results[0].gpus == tuple(range(8)) and run.results[-1].gpus == (7,)


def test_dcgm_4_real_fragment_is_refused_in_one_line():
    with pytest.raises(OutputError, match="neither 'DCGM Diagnostic'"):
        dcgm.parse(fixture("dcgm-4-diag-r4-fragment-issue215.txt"))


def test_dcgm_4_document_around_the_real_results():
    """The real DCGM 4 results, put in the document shape NVIDIA's schema gives (a root object whose
    'DCGM Diagnostic' holds test_categories; metadata beside it)."""
    fragment = fixture("dcgm-4-diag-r4-fragment-issue215.txt").rstrip().rstrip(",")
    text = ('{"DCGM Diagnostic": {"test_categories": [{"category": "Stress", "tests": [' + fragment + ']}]},'
            ' "metadata": {"version": "4.1.1", "Driver Version Detected": "570.86.15"}}')
    run = dcgm.parse(text)
    assert (run.version, run.driver, len(run.results)) == ("4.1.1", "570.86.15", 8)
    assert [r.gpus for r in run.results] == [(i,) for i in range(8)] and run.results[0].info[2].startswith("GPU 0")


def test_dcgm_failure_categories_follow_dcgm_errors_table():
    def run(category: int, error_id: int = 40, test: str = "diagnostic", section: str = "Stress"):
        text = json.dumps({"DCGM Diagnostic": {"test_categories": [{"category": section, "tests": [{"name": test,
            "results": [{"entity_group": "GPU", "entity_id": 3, "status": "Fail", "warnings": [
                {"warning": "w", "error_id": error_id, "error_category": category, "error_severity": 1}]}]}]}]}})
        (result,) = dcgm.parse(text).failures
        return result.host_fault(), result.impact()

    assert run(9) == (True, "HpcDcgmiThermalReport")  # DCGM_FR_EC_HARDWARE_THERMAL
    assert run(1, 62) == (True, "GPUMemoryBWFailure")  # DCGM_FR_MEMORY_BANDWIDTH
    assert run(11, 14) == (True, "NvLink")  # DCGM_FR_NVLINK_DOWN
    assert run(10, 4) == (True, "HpcGpuDcgmDiagFailure")  # DCGM_FR_VOLATILE_DBE_DETECTED
    assert run(8, 29, "software", "Deployment")[0] is False  # DCGM_FR_PERSISTENCE_MODE: the set-up


def test_nvbandwidth_of_a_real_h100_node():
    run = nvbandwidth.parse(fixture("nvbandwidth-v0.4-h100-8gpu-d2d-read-ce.txt"))
    m = run.matrices["device_to_device_memcpy_read_ce"]
    assert (run.version, run.driver, len(run.devices), m.total) == ("v0.4", "570.133.20", 8, 20785.58)
    assert min(m.values()) == 370.26 and len(m.values()) == 56 and m.per_gpu()[0] == 370.26


def test_nvbandwidth_readme_layout_with_zeros_on_the_diagonal():
    m = nvbandwidth.parse(fixture("nvbandwidth-readme-d2d-write-ce.txt")).matrices["device_to_device_memcpy_write_ce"]
    assert min(m.values()) == 274.89  # the 0.00 diagonal left out


def test_clock_reasons_of_a_real_h100():
    (gpu,) = clocks.parse((HEALTH / "h100-nvidia-smi-q.txt").read_text()).values()
    assert gpu.bus == "00000000:00:06.0" and gpu.slowdown == [] and gpu.reasons["Idle"] is True
    assert gpu.counters_us["HW Thermal Slowdown"] == 0


def test_clock_reasons_show_a_thermal_slowdown():
    text = (HEALTH / "h100-nvidia-smi-q.txt").read_text().replace(
        "            HW Thermal Slowdown                        : Not Active",
        "            HW Thermal Slowdown                        : Active")
    (gpu,) = clocks.parse(text).values()
    assert gpu.slowdown == ["HW Thermal Slowdown"]


# ------------------------------------------------------------------------------ hostile variants

PARSERS = {
    "nccl": (nccl_tests.parse, "nccl-all_reduce_perf-2x8-h100.txt"),
    "perftest": (perftest.parse, "perftest-ib_write_bw-cuda-client.txt"),
    "dcgm": (dcgm.parse, "dcgm-3.1.0-diag-8gpu.json.txt"),
    "nvbandwidth": (nvbandwidth.parse, "nvbandwidth-v0.4-h100-8gpu-d2d-read-ce.txt"),
    "clocks": (clocks.parse, None),
}


def _real(name: str) -> str:
    parse, file = PARSERS[name]
    return fixture(file) if file else (HEALTH / "h100-nvidia-smi-q.txt").read_text()


def _variants(text: str) -> dict[str, object]:
    return {
        "truncated half": text[: len(text) // 2],
        "truncated to a line": text[:120],
        "empty": "",
        "nan": text.replace("338.82", "nan").replace("181.46", "NaN").replace("370.26", "nan")
                   .replace("\"PASS\"", "NaN"),
        "inf": text.replace("338.82", "inf").replace("181.46", "1e999").replace("370.26", "Infinity"),
        "huge numbers": text.replace("338.82", "9" * 400).replace("181.46", "1" * 300).replace("370.26", "7" * 500),
        "huge text": text + "A" * (MAX_TEXT + 1),
        "long lines": "x" * 200_000 + "\n" + text,
        "many lines": "\n" * 60_000 + text,
        "nested": "{" * 50_000 + "[" * 50_000,
        "nested json": '{"DCGM GPU Diagnostic": ' + "[" * 5000 + "]" * 5000 + "}",
        "control characters": text.replace(" ", "\x1b[31m\x00"),
        "bytes": text.encode(),
        "none": None,
        "a list": [text],
        "negative": text.replace("338.82", "-338.82").replace("181.46", "-181.46").replace("370.26", "-370.26"),
        "unicode": text.replace("H100", "Н100\u202e"),
    }


@pytest.mark.parametrize("name", list(PARSERS))
def test_hostile_variants_end_in_a_result_or_one_line(name):
    parse = PARSERS[name][0]
    for label, variant in _variants(_real(name)).items():
        try:
            parse(variant)
        except OutputError as exc:
            assert "\n" not in str(exc) and len(str(exc)) < 300, (name, label, str(exc))


def test_a_nan_busbw_is_refused_not_read_as_a_number():
    with pytest.raises(OutputError, match="not a finite number|not a number"):
        nccl_tests.parse(fixture("nccl-all_reduce_perf-2x8-h100.txt").replace("338.82", "nan"))


def test_a_huge_busbw_is_refused():
    with pytest.raises(OutputError):
        nccl_tests.parse(fixture("nccl-all_reduce_perf-2x8-h100.txt").replace("338.82", "1" * 300))


def test_deeply_nested_dcgm_json_is_refused_before_json_recurses():
    with pytest.raises(OutputError, match="nested deeper"):
        dcgm.parse('{"DCGM GPU Diagnostic": ' + "[" * 100_000 + "]" * 100_000 + "}")


def test_a_truncated_perftest_report_has_no_bandwidth():
    text = fixture("perftest-ib_write_bw-cuda-client.txt")
    assert perftest.parse(text[: text.index(" #bytes")]).gbps is None


def test_a_nvbandwidth_row_of_the_wrong_width_is_refused():
    text = fixture("nvbandwidth-v0.4-h100-8gpu-d2d-read-ce.txt").replace("370.26    371.67", "370.26")
    with pytest.raises(OutputError, match="values under 8 columns"):
        nvbandwidth.parse(text)
