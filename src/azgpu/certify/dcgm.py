"""`dcgmi diag -r N -j`: DCGM's diagnostic results, read, and what each failure says about the host.

Two shapes, both read (NVIDIA/DCGM nvvs/include/NvvsJsonStrings.h, testing/python3/dcgm_diag_schema.json):
DCGM 3 nests `test_categories` under "DCGM GPU Diagnostic", results carry `gpu_ids` (a number, or a
string "0,1,2" for the software tests) and `warnings` ({warning, error_id, error_category,
error_severity}), and nulls may stand between tests; DCGM 4 nests them under "DCGM Diagnostic", results
carry entity_group/entity_id and each test a `test_summary`, and `metadata` (version, "Driver Version
Detected") and `runtime_error` stand beside. Text before the JSON (a stray warning line) is skipped.

What a failure says is DCGM's own classification: each DCGM_FR_* error has a category
(dcgmlib/dcgm_errors.h, the table in dcgmlib/src/dcgm_errors.c @ 72fa3fe, DCGM 4.6.0). Hardware
categories (thermal, memory, NVLink, NVSwitch, PCIe, power, other hardware) and the performance ones are
the host's; software, library, CUDA, configuration and internal errors are the image's or the set-up's
and are never reported as the host's (the gate's outcome classes, health/outcome.py).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from .bounded import MAX_TEXT, OutputError, printable, text_of

MAX_DEPTH = 32
MAX_RESULTS = 4096
# dcgmErrorCategory_t (dcgmlib/dcgm_errors.h)
THERMAL, MEMORY, NVLINK, NVSWITCH, PCIE, POWER, HARDWARE_OTHER = 9, 10, 11, 12, 13, 14, 15
PERF_THRESHOLD, PERF_VIOLATION = 1, 2
HOST_CATEGORIES = {THERMAL, MEMORY, NVLINK, NVSWITCH, PCIE, POWER, HARDWARE_OTHER, PERF_THRESHOLD, PERF_VIOLATION}
MEMORY_BANDWIDTH = 62  # DCGM_FR_MEMORY_BANDWIDTH: "GPU %u only achieved a memory bandwidth of %.2f GB/s ..."
# The test categories whose tests check the software set-up, not the GPU (NvvsJsonStrings.h).
SETUP_TESTS = {"deployment", "software"}
STATUSES = {"pass": "pass", "fail": "fail", "warn": "warn", "warning": "warn", "skip": "skip", "skipped": "skip"}


@dataclass(frozen=True)
class DcgmWarning:
    text: str
    error_id: int | None = None
    category: int | None = None
    severity: int | None = None


@dataclass(frozen=True)
class DcgmResult:
    category: str  # the test category: Deployment, Hardware, Integration, Stress, Performance, Custom ...
    test: str
    gpus: tuple[int, ...]
    status: str  # pass | fail | warn | skip | other
    warnings: tuple[DcgmWarning, ...] = ()
    info: tuple[str, ...] = ()

    def host_fault(self) -> bool:
        """A failure DCGM attributes to the GPU or its links, not to the software set-up."""
        if self.status != "fail":
            return False
        categories = {w.category for w in self.warnings if w.category is not None}
        if categories:
            return bool(categories & HOST_CATEGORIES)
        return self.category.lower() not in SETUP_TESTS  # a plugin test failed without saying why

    def impact(self) -> str:
        """Guest Health Reporting's category (without the Resource.Hpc.Unhealthy. prefix)."""
        ids = {w.error_id for w in self.warnings}
        categories = {w.category for w in self.warnings}
        if MEMORY_BANDWIDTH in ids:
            return "GPUMemoryBWFailure"
        if THERMAL in categories:
            return "HpcDcgmiThermalReport"
        if categories & {NVLINK, NVSWITCH}:
            return "NvLink"
        return "HpcGpuDcgmDiagFailure"


@dataclass(frozen=True)
class DcgmRun:
    results: tuple[DcgmResult, ...]
    version: str | None = None
    driver: str | None = None
    runtime_error: str | None = None

    @property
    def failures(self) -> tuple[DcgmResult, ...]:
        return tuple(r for r in self.results if r.status == "fail")


_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_BRACKETS = re.compile(r"[\[\]{}]")


def _depth(text: str) -> int:
    """The deepest nesting of JSON arrays and objects, outside strings (json's C parser recurses)."""
    depth = top = 0
    for c in _BRACKETS.findall(_STRING.sub("", text)):
        if c in "[{":
            depth += 1
            if depth > top:
                top = depth
                if top > MAX_DEPTH:
                    return top
        else:
            depth -= 1
    return top


def _not_finite(name: str):
    raise OutputError(f"dcgmi diag: {name} is not a number JSON allows")


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and -2**31 <= value < 2**31 else None


def _text(value: object, limit: int = 300) -> str | None:
    return printable(value, limit) if isinstance(value, (str, int, float)) and not isinstance(value, bool) else None


def _gpus(result: dict) -> tuple[int, ...]:
    if "entity_id" in result:
        if result.get("entity_group") not in (None, "GPU"):
            return ()
        one = _int(result.get("entity_id"))
        return (one,) if one is not None and 0 <= one < 4096 else ()
    ids = result.get("gpu_ids", result.get("gpu_id"))
    if isinstance(ids, int) and not isinstance(ids, bool):
        return (ids,) if 0 <= ids < 4096 else ()
    if isinstance(ids, str) and re.fullmatch(r"\d{1,4}(,\d{1,4}){0,1023}", ids.strip()):
        return tuple(int(i) for i in ids.strip().split(","))
    return ()


def _warnings(items: object) -> tuple[DcgmWarning, ...]:
    out = []
    for w in items if isinstance(items, list) else []:
        if isinstance(w, str):
            out.append(DcgmWarning(printable(w, 300)))
        elif isinstance(w, dict):
            out.append(DcgmWarning(_text(w.get("warning")) or _text(w.get("message")) or "", _int(w.get("error_id")),
                                   _int(w.get("error_category")), _int(w.get("error_severity"))))
        if len(out) >= 16:
            break
    return tuple(out)


def _info(items: object) -> tuple[str, ...]:
    if isinstance(items, str):
        items = [items]
    return tuple(printable(i, 200) for i in (items if isinstance(items, list) else [])[:16] if isinstance(i, str))


def _document(text: str) -> dict:
    start = text.find("{")
    if start < 0:
        raise OutputError("dcgmi diag: no JSON document in the output")
    body = text[start:]
    if _depth(body) > MAX_DEPTH:
        raise OutputError(f"dcgmi diag: JSON nested deeper than {MAX_DEPTH} levels")
    try:
        data, _ = json.JSONDecoder(parse_constant=_not_finite).raw_decode(body)
    except OutputError:
        raise
    except ValueError as exc:
        raise OutputError(f"dcgmi diag: the JSON does not parse ({printable(exc, 120)}); the output may be cut "
                          "off") from None
    if not isinstance(data, dict):
        raise OutputError("dcgmi diag: the JSON document is not an object")
    return data


def parse(text: object) -> DcgmRun:
    """DCGM's results in either shape; OutputError when the output holds no readable diagnostic."""
    data = _document(text_of(text, "dcgmi diag")[:MAX_TEXT])
    root = data.get("DCGM Diagnostic", data.get("DCGM GPU Diagnostic"))
    if not isinstance(root, dict):
        raise OutputError("dcgmi diag: neither 'DCGM Diagnostic' (DCGM 4) nor 'DCGM GPU Diagnostic' (DCGM 3) in "
                          "the JSON")
    meta = data.get("metadata") if isinstance(data.get("metadata"), dict) else {}
    version = _text(meta.get("version") or root.get("version") or data.get("version"), 40)
    driver = _text(meta.get("Driver Version Detected") or root.get("Driver Version Detected")
                   or data.get("Driver Version Detected"), 40)
    runtime = _text(root.get("runtime_error") or data.get("runtime_error"), 300)
    results: list[DcgmResult] = []
    categories = root.get("test_categories")
    for cat in categories if isinstance(categories, list) else []:
        if not isinstance(cat, dict):
            continue
        category = _text(cat.get("category"), 40) or "unknown"
        for test in cat.get("tests") if isinstance(cat.get("tests"), list) else []:
            if not isinstance(test, dict):  # DCGM 3 writes nulls between tests
                continue
            name = _text(test.get("name"), 60) or "unknown"
            for result in test.get("results") if isinstance(test.get("results"), list) else []:
                if not isinstance(result, dict):
                    continue
                if len(results) >= MAX_RESULTS:
                    raise OutputError(f"dcgmi diag: more than {MAX_RESULTS} results")
                raw = _text(result.get("status"), 20) or ""
                results.append(DcgmResult(category, name, _gpus(result), STATUSES.get(raw.lower(), "other"),
                                          _warnings(result.get("warnings")), _info(result.get("info"))))
    if not results and runtime is None:
        raise OutputError("dcgmi diag: the JSON holds no test result")
    return DcgmRun(tuple(results), version, driver, runtime)
