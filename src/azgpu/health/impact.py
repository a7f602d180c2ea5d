"""The Guest Health Reporting impact category of a failure: a pure function of the failure.

GHR (preview) takes `impactCategory` = Resource.Hpc.Unhealthy.* for a broken host (D-ghr-cat). AzNHC
maps its own fault codes in triggerGHR/config/nhc_fault_dictionary.cfg (R-nhc-ghr); its generic Xid
failure (NHC2001) is made specific with the Xid number here, and the fallback's findings map by kind.
NHCNA means the check itself was not set up, which says nothing about the host: no category.
Whatever this module returns is on Learn's list of categories (LEARN_CATEGORIES); a test enumerates
every category it can return and fails for one that is not.
"""

from __future__ import annotations

from typing import Protocol


class Failure(Protocol):
    """What a category is read from: the fields of model.Failure this module reads (model.py imports this
    module to print a failure's category, so it names none of model's types)."""

    kind: str
    fault_code: str | None
    xid: int | None
    measured: str | None

PREFIX = "Resource.Hpc.Unhealthy."
# triggerGHR/config/nhc_fault_dictionary.cfg at 0e0a1ac2 (NHC2006 is not in it).
FAULT_CODES = {
    "NHC2001": "HpcGenericFailure", "NHC2002": "MissingIB", "NHC2003": "IBPerformance", "NHC2004": "IBPortDown",
    "NHC2005": "IBPortFlapping", "NHC2007": "HpcRowRemapFailure", "NHC2008": "HpcInforomCorruption",
    "NHC2009": "HpcMissingGpu", "NHC2010": "ManualInvestigation", "NHC2011": "XID95UncontainedECCError",
    "NHC2012": "XID94ContainedECCError", "NHC2013": "XID79FallenOffBus", "NHC2014": "XID48DoubleBitECC",
    "NHC2015": "UnhealthyGPUNvidiasmi", "NHC2016": "NvLink", "NHC2017": "HpcDcgmiThermalReport",
    "NHC2018": "ECCPageRetirementTableFull", "NHC2019": "DBEOverLimit", "NHC2020": "HpcGpuDcgmDiagFailure",
    "NHC2021": "GPUMemoryBWFailure", "NHC2022": "CPUPerformance", "NHC2023": "HpcGenericFailure",
}
XIDS = {79: "XID79FallenOffBus", 94: "XID94ContainedECCError", 95: "XID95UncontainedECCError",
        48: "XID48DoubleBitECC"}
OTHER_XID = "GpuXIDError"  # Learn: "GPU reports a Xid error other than 48, 79, 94, or 95"
GENERIC = "HpcGenericFailure"  # Learn: "Issue doesn't fall into any other category"
# The fallback's kinds (and AzNHC's checks without a fault code, by the kind results.py gives them).
# An nvidia-smi that answers with an error is not the hang Learn's UnhealthyGPUNvidiasmi describes
# ("stops responding and might not recover"): a driver that is not loaded says so too, so it is generic.
KINDS = {
    "missing_gpu": "HpcMissingGpu", "ib_missing": "MissingIB", "ib_port_down": "IBPortDown",
    "ib_port_rate": "IBPerformance", "ib_bandwidth": "IBPerformance", "ib_port_flapping": "IBPortFlapping",
    "nvidia_smi": "UnhealthyGPUNvidiasmi", "nvidia_smi_hang": "UnhealthyGPUNvidiasmi",
    "nvlink": "NvLink", "nccl_bandwidth": "ManualInvestigation",
    # The fallback's GPU memory findings carry AzNHC's fault codes too (check_gpu_ecc: NHC2007, NHC2019,
    # NHC2018); by kind for a verdict without them. A GPU the driver calls lost has fallen off the bus
    # (the condition Xid 79 names) whether or not the kernel log still holds the Xid.
    "gpu_row_remap": "HpcRowRemapFailure", "gpu_ecc": "DBEOverLimit", "gpu_retired_pages": "ECCPageRetirementTableFull",
    "gpu_lost": "XID79FallenOffBus",
    # GB racks: the NVLink fabric not Completed/Success and IMEX (which shares GPU memory over NVLink across
    # the rack) not running are NVLink faults of the node (Learn: "NvLink: NVLink issue").
    "fabric": "NvLink", "imex_service": "NvLink", "imex_channel": "NvLink",
    # provision certify's findings (azgpu/certify): a GPU throttling under load (Learn: "HpcDcgmiThermalReport",
    # AzNHC NHC2017), DCGM's diagnostics by DCGM's own error category, nvbandwidth's copies below the size's
    # figure (AzNHC's check_gpu_bw files these as NHC2020, HpcGpuDcgmDiagFailure), and NVLink across a rack.
    "thermal_slowdown": "HpcDcgmiThermalReport", "dcgm_thermal": "HpcDcgmiThermalReport",
    "dcgm_diag": "HpcGpuDcgmDiagFailure", "gpu_copy_bandwidth": "HpcGpuDcgmDiagFailure",
    "gpu_memory_bandwidth": "GPUMemoryBWFailure", "dcgm_nvlink": "NvLink", "nvlink_bandwidth": "NvLink",
}
# Faults of the check's run, not of the host: AzNHC's own set-up and its watchdog, a tool the image lacks, a
# check that could not run (the kernel log unreadable to the user running it by hand).
NOT_THE_HOST = {"aznhc_setup", "aznhc_timeout", "aznhc_watchdog", "tool_missing", "check_not_run"}
# Host faults the image could cause as well: a driver that does not load (nvidia-smi exit 9; AzNHC's own
# csc_nvidia_smi.nhc gives that exit NHCNA, "NVIDIA driver not loaded"), a GPU tool that fails, a driver that
# lists no GPU at all. One host showing them proves nothing until another host with the same image passes.
IMAGE_SUSPECT = {"driver_not_loaded", "nvidia_smi_error", "rocm_smi_error"}
# Host faults Learn has no category of their own for, filed as HpcGenericFailure ("Issue doesn't fall into any
# other category") unless AzNHC's fault code names one: said here, so a new kind is classed on purpose
# (tests/health/test_finding_rooms.py holds every kind the node script and the AzNHC reader give to a class).
# (AzNHC's CPU check carries its own fault code, NHC2022 CPUPerformance, which names the category.)
GENERIC_KINDS = {"gpu_count", "gpu_memory", "rocm_smi_hang", "aznhc", "gpu_bandwidth", "gpu_clocks", "gpu_vbios",
                 "gpu_interconnect", "nvme", "topology", "cpu_performance"}

# Learn, "Impact categories for Guest Health Reporting (preview)" (MicrosoftDocs/azure-compute-docs
# articles/azure-impact-reporting/guest-health-impact-categories.md @ 883ff7bb, ms.date 2025-09-18):
# "Only an approved string list is allowed" (guest-health-impact-report.md). azgpu sends only these.
LEARN_CATEGORIES = frozenset({
    "Resource.Hpc.Reset", "Resource.Hpc.Reboot",
    *(PREFIX + c for c in (
        "HpcMissingGpu", "MissingIB", "IBPerformance", "IBPortDown", "IBPortFlapping", "HpcGpuDcgmDiagFailure",
        "HpcRowRemapFailure", "HpcInforomCorruption", "HpcGenericFailure", "ManualInvestigation",
        "XID95UncontainedECCError", "XID94ContainedECCError", "XID79FallenOffBus", "XID48DoubleBitECC",
        "UnhealthyGPUNvidiasmi", "NvLink", "HpcDcgmiThermalReport", "ECCPageRetirementTableFull", "DBEOverLimit",
        "GpuXIDError", "AmdGpuResetFailed", "EROTFailure", "GPUMemoryBWFailure", "CPUPerformance")),
})
CATEGORIES_SOURCE = ("Microsoft Learn, Impact categories for Guest Health Reporting (preview): "
                     "https://learn.microsoft.com/azure/azure-impact-reporting/guest-health-impact-categories")


def impact_category(failure: Failure) -> str | None:
    """Resource.Hpc.Unhealthy.<category>, or None when the failure says nothing about the host."""
    if failure.fault_code == "NHCNA" or failure.kind in NOT_THE_HOST:
        return None
    if failure.kind == "xid" and failure.xid is not None:
        return PREFIX + XIDS.get(failure.xid, OTHER_XID)
    if failure.fault_code in FAULT_CODES:
        return PREFIX + FAULT_CODES[failure.fault_code]
    return PREFIX + KINDS.get(failure.kind, GENERIC)


def could_be_image(failure: Failure) -> bool:
    """A host fault that the image (its driver, its tools) could cause on any host: confirmed on a second
    host before it is reported (health_gate, second_host)."""
    if failure.kind in IMAGE_SUSPECT:
        return True
    return failure.kind == "missing_gpu" and failure.measured == "0"


def possible_categories() -> frozenset[str]:
    """Every category impact_category can return (what a test holds against LEARN_CATEGORIES)."""
    names = {*FAULT_CODES.values(), *XIDS.values(), OTHER_XID, GENERIC, *KINDS.values()}
    return frozenset(PREFIX + n for n in names)
