"""The fault matrix: every fault kind injected at every deployment stage, each cell its own test.

Stages (the fault always targets that stage's PUT):

- ``resource-group``: PUT .../resourcegroups/fm-rg. ARM creates a resource group synchronously, so
  there is no long-running operation that could fail: an operation fault (AllocationFailed ...)
  cannot fire there. Those cells assert exactly that (the fault never fires, create succeeds).
- ``nsg``, ``public-ip``: the first wave (in parallel); ``nat-gateway`` (it holds the public IP),
  then ``vnet`` (its subnet uses the NAT gateway).
- ``vmss000``, ``vmss001``, ``vmss002``: each scale set of a three-domain cluster (5 x
  Standard_ND96asr_v4 with ``--max-ib-domain 2``: 2/2/1 nodes), deployed in parallel in one wave.
- ``extensions``: scale-set extensions are not separate resources. azgpu writes them inline in the
  scale set's ``virtualMachineProfile.extensionProfile`` (NDv2 with a plain Ubuntu Gen 2 image gets
  NvidiaGpuDriverLinux), and a failed extension surfaces as the scale set's long-running operation
  failing with ``VMExtensionProvisioningError``. So this stage injects on the scale-set PUT of such
  a deployment.

Fault kinds: 429 with ``Retry-After: 7``, 500, 503 and a dropped connection (each twice, then
gone); a long-running operation that fails once with AllocationFailed, ZonalAllocationFailed,
InternalExecutionError or VMExtensionProvisioningError; and a PUT refused once on the spot (409) with
SkuNotAvailable or QuotaExceeded, which Azure answers synchronously, never in a failed operation.

Every cell checks, on a fresh fake Azure in virtual time (nothing sleeps for real):

1. The outcome. A transient fault is retried and create succeeds, a 429 after waiting its
   Retry-After. A failed operation ends in the typed error that ``azure_errors.TABLE`` maps its
   code to, with that code and remedy, naming the resource that failed.
2. Nothing leaked and nothing wrongly deleted after the faulty run. Every resource is one the plan
   declares (tagged for this cluster, so status and destroy find it), an instance or NIC of one of
   them, or a pre-seeded foreign resource, unchanged. The foreign resources are an untagged RG
   holding an NSG, a VNet, a public IP and a NAT gateway with *our* names, an untagged NSG in our RG,
   and an NSG of another azgpu cluster in our RG.
3. A re-run without the fault converges. Every planned resource ends Succeeded at the planned
   capacity, and the re-run writes exactly what was not converged: nothing after a retried fault.
4. ``destroy`` afterwards removes everything the cluster made and nothing else: leaked 0, wrongly
   deleted 0.

``run_cell``, ``run_matrix`` and ``format_matrix`` are plain functions (no pytest fixtures), so
``python benchmarks/run.py`` prints the same matrix.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
from deploy_support import NAT, NSG, PIP, SSH_KEY, VM, VMSS, VNET

import azgpu
from azgpu.deploy import CreateOptions, create
from azgpu.deploy.azure_errors import TABLE
from azgpu.deploy.lifecycle import destroy
from azgpu.deploy.session import Session
from azgpu.errors import AzgpuError, AzureError
from azgpu.testing import FakeAzure, FakeCredential

NAME, RG, LOCATION = "fm", "fm-rg", "eastus"
FOREIGN_RG = "fm-someone-elses-rg"

# Three InfiniBand domains in one wave: 5 nodes, 2 per scale set.
CLUSTER = {"profile": "nd-a100-v4", "nodes": 5, "max_ib_domain": 2}
# A plain (non-HPC) Gen 2 image on NDv2: the plan adds the NvidiaGpuDriverLinux extension inline.
WITH_EXTENSION = {"profile": "ndv2", "nodes": 2, "image": "ubuntu-2204-gen2"}


@dataclass(frozen=True)
class Stage:
    path: str  # regex on the request path of the stage's PUT
    deployment: dict[str, Any]
    synchronous: bool = False  # no long-running operation: operation faults cannot fire


STAGES: dict[str, Stage] = {
    "resource-group": Stage(rf"/resourcegroups/{RG}$", CLUSTER, synchronous=True),
    "nsg": Stage(rf"/networkSecurityGroups/{NAME}-nsg$", CLUSTER),
    "public-ip": Stage(rf"/publicIPAddresses/{NAME}-natgw-ip$", CLUSTER),
    "nat-gateway": Stage(rf"/natGateways/{NAME}-natgw$", CLUSTER),
    "vnet": Stage(rf"/virtualNetworks/{NAME}-vnet$", CLUSTER),
    "vmss000": Stage(rf"/virtualMachineScaleSets/{NAME}-vmss000$", CLUSTER),
    "vmss001": Stage(rf"/virtualMachineScaleSets/{NAME}-vmss001$", CLUSTER),
    "vmss002": Stage(rf"/virtualMachineScaleSets/{NAME}-vmss002$", CLUSTER),
    "extensions": Stage(rf"/virtualMachineScaleSets/{NAME}-vmss000$", WITH_EXTENSION),
}

RETRY_AFTER = 7
TRANSIENT: dict[str, dict[str, Any]] = {
    "429": {"status": 429, "retry_after": RETRY_AFTER},
    "500": {"status": 500},
    "503": {"status": 503},
    "reset": {"reset": True},
}
TRANSIENT_TIMES = 2
OPERATION = ["AllocationFailed", "ZonalAllocationFailed", "InternalExecutionError", "VMExtensionProvisioningError"]
# Refused on the PUT itself (Learn: SkuNotAvailable and quota errors come back when the request is made).
REFUSED = {"SkuNotAvailable": {"status": 409, "code": "SkuNotAvailable"},
           "QuotaExceeded": {"status": 409, "code": "QuotaExceeded"}}
KINDS = [*TRANSIENT, *OPERATION, *REFUSED]
CELLS = [(stage, kind) for stage in STAGES for kind in KINDS]


# ------------------------------------------------------------------------------------ one cell


@dataclass
class Cell:
    stage: str
    kind: str
    fired: int = 0
    outcome: str = ""  # "succeeded" | "error" | "crashed"
    error_type: str = ""
    error_code: str = ""
    azure_code: str = ""
    remedy: str = ""
    message: str = ""
    retry_after_waits: int = 0  # virtual sleeps of exactly RETRY_AFTER seconds
    leaked: list[str] = field(default_factory=list)  # after the faulty run, the re-run and destroy
    wrongly_deleted: list[str] = field(default_factory=list)  # foreign resources gone or changed
    unconverged: list[str] = field(default_factory=list)  # planned resources not done after the faulty run
    rerun_error: str = ""
    rerun_writes: list[str] = field(default_factory=list)
    rerun_not_succeeded: list[str] = field(default_factory=list)
    rerun_fired: int = 0
    left_after_destroy: list[str] = field(default_factory=list)

    @property
    def transient(self) -> bool:
        return self.kind in TRANSIENT

    @property
    def not_applicable(self) -> bool:
        return self.kind in OPERATION and STAGES[self.stage].synchronous


def _request(deployment: dict[str, Any]) -> azgpu.Request:
    return azgpu.build_request(name=NAME, resource_group=RG, location=LOCATION, ssh_key=SSH_KEY, **deployment)


def _id(sub: str, rg: str, type_: str | None = None, name: str | None = None) -> str:
    base = f"/subscriptions/{sub}/resourceGroups/{rg}"
    return f"{base}/providers/{type_}/{name}" if type_ else base


def _nsg_body(tags: dict | None = None) -> dict:
    body: dict[str, Any] = {"location": LOCATION, "properties": {"securityRules": []}}
    if tags:
        body["tags"] = tags
    return body


def _seed_foreign_elsewhere(azure: FakeAzure) -> None:
    """Before the run: someone else's RG with an NSG, a VNet, a public IP and a NAT gateway that carry
    our names, untagged."""
    sub = azure.subscription_id
    azure.add_resource(_id(sub, FOREIGN_RG), {"location": LOCATION})
    azure.add_resource(_id(sub, FOREIGN_RG, NSG, f"{NAME}-nsg"), _nsg_body())
    azure.add_resource(_id(sub, FOREIGN_RG, PIP, f"{NAME}-natgw-ip"), {
        "location": LOCATION, "sku": {"name": "Standard"}, "properties": {"publicIPAllocationMethod": "Static"}})
    azure.add_resource(_id(sub, FOREIGN_RG, NAT, f"{NAME}-natgw"), {
        "location": LOCATION, "sku": {"name": "Standard"},
        "properties": {"publicIpAddresses": [{"id": _id(sub, FOREIGN_RG, PIP, f"{NAME}-natgw-ip")}]}})
    azure.add_resource(_id(sub, FOREIGN_RG, VNET, f"{NAME}-vnet"), {
        "location": LOCATION,
        "properties": {"addressSpace": {"addressPrefixes": ["10.9.0.0/16"]},
                       "subnets": [{"name": "default", "properties": {"addressPrefix": "10.9.0.0/24"}}]}})


def _seed_foreign_alongside(azure: FakeAzure) -> None:
    """Once our RG exists: an untagged NSG and another azgpu cluster's NSG next to ours."""
    sub = azure.subscription_id
    if azure.get(_id(sub, RG)) is None:
        return
    azure.add_resource(_id(sub, RG, NSG, "shared-nsg"), _nsg_body())
    azure.add_resource(_id(sub, RG, NSG, "other-nsg"),
                       _nsg_body({"managed-by": "azgpu", "azgpu-cluster": "other", "azgpu-profile": "nd-a100-v4"}))


def _snapshot(azure: FakeAzure) -> dict[str, dict]:
    return {r["id"].lower(): r for r in azure.resources()}


def _ours(resource: dict) -> bool:
    tags = resource.get("tags") or {}
    return tags.get("managed-by") == "azgpu" and tags.get("azgpu-cluster") == NAME


def _audit(azure: FakeAzure, plan: azgpu.Plan, foreign: dict[str, dict], *, planned_allowed: bool) -> tuple[list, list]:
    """(leaked, wrongly deleted): anything that is neither foreign (unchanged) nor, when
    planned_allowed, a planned resource tagged for this cluster, its instances and NICs, or our RG."""
    sub = azure.subscription_id
    declared = {_id(sub, RG, r.type, r.name).lower() for r in plan.resources}
    scale_sets = [_id(sub, RG, r.type, r.name).lower() for r in plan.scale_sets]
    now = _snapshot(azure)
    wrongly_deleted = sorted(rid for rid, before in foreign.items() if now.get(rid) != before)
    leaked = []
    for rid, resource in now.items():
        if rid in foreign:
            continue
        if rid == _id(sub, RG).lower() and _ours(resource):
            continue  # our RG, created by azgpu; destroy leaves it while foreign resources live in it
        if planned_allowed and rid in declared and _ours(resource):
            continue
        if planned_allowed and any(rid.startswith(v + "/") for v in scale_sets):
            continue  # instances and NICs of a planned scale set
        leaked.append(rid)
    return sorted(leaked), wrongly_deleted


def _not_converged(azure: FakeAzure, plan: azgpu.Plan) -> list[str]:
    sub = azure.subscription_id
    out = [] if azure.get(_id(sub, RG)) else [RG]
    for r in plan.resources:
        found = azure.get(_id(sub, RG, r.type, r.name))
        state = (found or {}).get("properties", {}).get("provisioningState")
        capacity_ok = r.stage != "scale-set" or (found or {}).get("sku",
                                                                  {}).get("capacity") == r.body["sku"]["capacity"]
        if state != "Succeeded" or not capacity_ok:
            out.append(r.name)
    return sorted(out)


def _written(azure: FakeAzure, since: int) -> list[str]:
    """Names of the resources a run PUT successfully (retried attempts and failures not counted)."""
    return sorted({r.path.rstrip("/").rsplit("/", 1)[-1] for r in azure.requests[since:]
                   if r.method == "PUT" and r.status in (200, 201)})


def run_cell(stage: str, kind: str) -> Cell:
    """Inject `kind` at `stage`, deploy, audit, re-run, audit, destroy, audit. Observations only."""
    cell = Cell(stage, kind)
    where = STAGES[stage]
    request = _request(where.deployment)
    plan = azgpu.build_plan(azgpu.validate(request, command="create"))
    with FakeAzure() as azure:
        session = Session(azure.subscription_id, FakeCredential(), polling_interval=0, sleep=azure.sleep)
        _seed_foreign_elsewhere(azure)
        foreign = _snapshot(azure)
        if kind in TRANSIENT:
            fault = azure.inject(method="PUT", path=where.path, times=TRANSIENT_TIMES, **TRANSIENT[kind])
        elif kind in REFUSED:
            fault = azure.inject(method="PUT", path=where.path, times=1, **REFUSED[kind])
        else:
            fault = azure.inject(method="PUT", path=where.path, operation_error=kind, times=1)

        try:
            create(session, request)
            cell.outcome = "succeeded"
        except AzgpuError as exc:
            cell.outcome = "error"
            cell.error_type = type(exc).__name__
            cell.error_code = exc.code
            cell.azure_code = getattr(exc, "azure_code", "")
            cell.remedy = exc.remedy
            cell.message = exc.message
        except Exception as exc:  # an untyped error is a finding, not a crash of the matrix
            cell.outcome = "crashed"
            cell.error_type = type(exc).__name__
            cell.message = str(exc)
        cell.fired = fault.fired
        cell.retry_after_waits = sum(1 for s in azure.sleeps if s == RETRY_AFTER)
        leaked, wrong = _audit(azure, plan, foreign, planned_allowed=True)

        _seed_foreign_alongside(azure)
        foreign = {**foreign, **{rid: r for rid, r in _snapshot(azure).items()
                                 if rid.endswith(("/shared-nsg", "/other-nsg"))}}
        cell.unconverged = _not_converged(azure, plan)
        since = len(azure.requests)
        try:
            create(session, request)
        except Exception as exc:
            cell.rerun_error = f"{type(exc).__name__}: {getattr(exc, 'code', '')} {exc}"
        cell.rerun_fired = fault.fired - cell.fired
        cell.rerun_writes = _written(azure, since)
        cell.rerun_not_succeeded = _not_converged(azure, plan)
        more_leaked, more_wrong = _audit(azure, plan, foreign, planned_allowed=True)

        destroy(session, NAME, RG)
        gone_leaked, gone_wrong = _audit(azure, plan, foreign, planned_allowed=False)
        cell.left_after_destroy = gone_leaked
        cell.leaked = sorted(set(leaked) | set(more_leaked) | set(gone_leaked))
        cell.wrongly_deleted = sorted(set(wrong) | set(more_wrong) | set(gone_wrong))
    return cell


def expected_error(kind: str) -> tuple[type[AzureError], str, str]:
    mapping = TABLE[kind]
    return mapping.kind, mapping.code, mapping.remedy


def problems(cell: Cell) -> list[str]:
    """What is wrong with a cell; empty when it behaves as the matrix requires."""
    out = []
    if cell.transient:
        if cell.outcome != "succeeded":
            out.append(f"expected success after retries, got {cell.outcome} {cell.error_code} {cell.message}")
        if cell.fired != TRANSIENT_TIMES:
            out.append(f"fault fired {cell.fired} times, expected {TRANSIENT_TIMES}")
        if cell.kind == "429" and cell.retry_after_waits != cell.fired:
            out.append(f"{cell.fired} throttled answers but {cell.retry_after_waits} "
                       f"waits of Retry-After {RETRY_AFTER} s")
    elif cell.not_applicable:
        if cell.fired != 0 or cell.outcome != "succeeded":
            out.append(f"a synchronous PUT cannot fail an operation: fired {cell.fired}, outcome {cell.outcome}")
    else:
        kind, code, remedy = expected_error(cell.kind)
        if cell.outcome != "error" or cell.fired != 1:
            out.append(f"expected the typed error {code}, got {cell.outcome} (fired {cell.fired}) {cell.message}")
        else:
            if cell.error_type != kind.__name__ or cell.error_code != code or cell.remedy != remedy:
                out.append(f"expected {kind.__name__} {code} / {remedy!r}, got {cell.error_type} {cell.error_code} / "
                           f"{cell.remedy!r}")
            if cell.azure_code != cell.kind:
                out.append(f"azure_code {cell.azure_code!r}, expected {cell.kind!r}")
            failed = STAGES[cell.stage].path.strip("$").rsplit("/", 1)[-1]
            if failed not in cell.message:
                out.append(f"the error does not name {failed}: {cell.message}")
    if cell.outcome == "succeeded" and cell.unconverged:
        out.append(f"create succeeded but left {cell.unconverged} unconverged")
    if cell.rerun_error:
        out.append(f"re-run failed: {cell.rerun_error}")
    if cell.rerun_fired:
        out.append("the fault fired again in the re-run")
    if cell.rerun_not_succeeded:
        out.append(f"re-run did not converge: {cell.rerun_not_succeeded}")
    if cell.rerun_writes != cell.unconverged:
        out.append(f"re-run wrote {cell.rerun_writes}, expected exactly the unconverged {cell.unconverged}")
    if cell.leaked:
        out.append(f"leaked: {cell.leaked}")
    if cell.wrongly_deleted:
        out.append(f"foreign resources deleted or changed: {cell.wrongly_deleted}")
    return out


# ------------------------------------------------------------------------------------ the matrix


def run_matrix() -> list[Cell]:
    return [run_cell(stage, kind) for stage, kind in CELLS]


def _label(cell: Cell) -> str:
    if problems(cell):
        return "FAIL"
    if cell.not_applicable:
        return "n/a"
    if cell.transient:
        return "retried"
    return cell.error_code


def format_matrix(cells: list[Cell]) -> str:
    """Stages down, fault kinds across; each cell: 'retried' (create succeeded), the typed error
    code, 'n/a' (cannot happen there), or FAIL; then the totals."""
    by = {(c.stage, c.kind): c for c in cells}
    stages = [s for s in STAGES if any((s, k) in by for k in KINDS)]
    kinds = [k for k in KINDS if any((s, k) in by for s in STAGES)]
    width = {k: max(len(k), *(len(_label(by[s, k])) for s in stages if (s, k) in by)) for k in kinds}
    first = max(len("stage"), *(len(s) for s in stages))
    lines = ["  ".join(["stage".ljust(first), *(k.ljust(width[k]) for k in kinds)])]
    for s in stages:
        lines.append("  ".join([s.ljust(first),
                                *(_label(by[s, k]).ljust(width[k]) if (s, k) in by else "".ljust(width[k])
                                                  for k in kinds)]))
    ok = sum(1 for c in cells if not problems(c))
    converged = sum(1 for c in cells if not c.rerun_error and not c.rerun_not_succeeded)
    leaked = sum(len(c.leaked) for c in cells)
    deleted = sum(len(c.wrongly_deleted) for c in cells)
    lines.append(f"{len(cells)} cells: {ok} as required, re-run converged in {converged}, "
                 f"leaked {leaked}, wrongly deleted {deleted}")
    codes = {c.error_code: c.remedy for c in cells if c.outcome == "error" and not problems(c)}
    lines += [f"  {code}: {remedy}" for code, remedy in codes.items()]
    return "\n".join(lines)


def summary(cells: list[Cell]) -> dict[str, Any]:
    return {
        "cells": len(cells),
        "as_required": sum(1 for c in cells if not problems(c)),
        "rerun_converged": sum(1 for c in cells if not c.rerun_error and not c.rerun_not_succeeded),
        "leaked": sum(len(c.leaked) for c in cells),
        "wrongly_deleted": sum(len(c.wrongly_deleted) for c in cells),
        "stages": list(STAGES),
        "kinds": KINDS,
        "outcomes": {f"{c.stage}/{c.kind}": _label(c) for c in cells},
        "problems": {f"{c.stage}/{c.kind}": problems(c) for c in cells if problems(c)},
    }


# ------------------------------------------------------------------------------------ the tests


@pytest.mark.parametrize("stage, kind", CELLS, ids=[f"{s}-{k}" for s, k in CELLS])
def test_fault_matrix_cell(stage, kind):
    cell = run_cell(stage, kind)
    assert cell.outcome != "crashed", f"untyped error: {cell.error_type}: {cell.message}"
    assert cell.leaked == [], cell.leaked
    assert cell.wrongly_deleted == [], cell.wrongly_deleted
    assert cell.left_after_destroy == []
    assert not cell.rerun_error and not cell.rerun_not_succeeded, (cell.rerun_error, cell.rerun_not_succeeded)
    assert problems(cell) == []


def test_the_matrix_covers_every_stage_and_kind():
    assert len(CELLS) == len(STAGES) * len(KINDS) == 90
    assert set(OPERATION) | set(REFUSED) <= set(TABLE)  # every fault has a typed error with a remedy


def test_the_extension_stage_really_carries_an_inline_extension():
    plan = azgpu.build_plan(azgpu.validate(_request(WITH_EXTENSION), command="create"))
    (vmss,) = plan.scale_sets
    extensions = vmss.body["properties"]["virtualMachineProfile"]["extensionProfile"]["extensions"]
    assert [e["properties"]["type"] for e in extensions] == ["NvidiaGpuDriverLinux"]
    assert not any("extensions" in r.type for r in plan.resources)  # no separate extension resource


def test_format_matrix_prints_every_stage_and_the_totals():
    cells = [run_cell("nsg", "429"), run_cell("vmss001", "AllocationFailed"),
             run_cell("resource-group", "AllocationFailed")]
    text = format_matrix(cells)
    assert "retried" in text and "CAPACITY_UNAVAILABLE" in text and "n/a" in text
    assert "3 cells: 3 as required, re-run converged in 3, leaked 0, wrongly deleted 0" in text.splitlines()
    assert text.splitlines()[-1] == f"  CAPACITY_UNAVAILABLE: {TABLE['AllocationFailed'].remedy}"


def test_quota_taken_between_preflight_and_deploy_is_a_typed_error_without_leaks(monkeypatch):
    """Quota is checked in preflight, but another deployment can take it before the scale sets go
    in: ARM then refuses the PUT synchronously (409 OperationNotAllowed), not as a failed operation."""
    from azgpu.deploy import live_plan as create_module

    request = _request(CLUSTER)
    plan = azgpu.build_plan(azgpu.validate(request, command="create"))
    with FakeAzure() as azure:
        session = Session(azure.subscription_id, FakeCredential(), polling_interval=0, sleep=azure.sleep)
        _seed_foreign_elsewhere(azure)
        foreign = _snapshot(azure)
        real_preflight = create_module.run_preflight

        def preflight_then_someone_takes_the_quota(*args, **kwargs):
            result = real_preflight(*args, **kwargs)
            azure.set_quota(LOCATION, "cores", usage=4900)  # of 5000: room for one ND96 node
            return result

        monkeypatch.setattr(create_module, "run_preflight", preflight_then_someone_takes_the_quota)
        with pytest.raises(AzureError) as info:
            create(session, request)
        kind, code, remedy = expected_error("OperationNotAllowed")
        assert isinstance(info.value, kind) and info.value.code == code and info.value.remedy == remedy
        assert _audit(azure, plan, foreign, planned_allowed=True) == ([], [])
        # Only the one-node scale set still fitted; the refused ones were never created.
        assert [vm["name"] for vm in azure.resources(type=VM)] == [f"{NAME}-vmss002_0"]
        assert sorted(r["name"] for r in azure.resources(type=VMSS, resource_group=RG)) == [f"{NAME}-vmss002"]

        monkeypatch.setattr(create_module, "run_preflight", real_preflight)
        azure.set_quota(LOCATION, "cores", usage=0)
        create(session, request)
        assert _not_converged(azure, plan) == []
        destroy(session, NAME, RG)
        assert _audit(azure, plan, foreign, planned_allowed=False) == ([], [])


@pytest.mark.parametrize("fallback", [{"zones": ["2"]}, {"fallback_locations": ["westus2"]}], ids=["zone", "location"])
def test_capacity_fallback_deletes_only_this_clusters_resources(fallback):
    """The one place create deletes: before trying the next zone or location after a capacity
    error. It must take only this cluster's resources with it, and the cluster must end up whole."""
    request = _request({**CLUSTER, "zone": "1"})
    with FakeAzure() as azure:
        session = Session(azure.subscription_id, FakeCredential(), polling_interval=0, sleep=azure.sleep)
        _seed_foreign_elsewhere(azure)
        sub = azure.subscription_id
        azure.add_resource(_id(sub, RG), {"location": LOCATION})  # a shared, pre-existing RG
        azure.add_resource(_id(sub, RG, NSG, "shared-nsg"), _nsg_body())
        azure.add_resource(_id(sub, RG, NSG, "other-nsg"),
                           _nsg_body({"managed-by": "azgpu", "azgpu-cluster": "other", "azgpu-profile": "ndv2"}))
        foreign = _snapshot(azure)
        fault = azure.inject(method="PUT", path=STAGES["vmss001"].path, operation_error="ZonalAllocationFailed",
                             times=1)
        notices: list[str] = []
        result = create(session, request, CreateOptions(on_notice=notices.append, **fallback)).as_dict()
        assert fault.fired == 1 and len(notices) == 1
        assert all(r["state"] in ("succeeded", "exists") for r in result["resources"])
        final = azgpu.build_plan(azgpu.validate(request.with_changes(
            zone=fallback.get("zones", [None])[0] if "zones" in fallback else None,
            location=fallback.get("fallback_locations", [LOCATION])[0]), command="create"))
        assert _not_converged(azure, final) == []
        assert _audit(azure, final, foreign, planned_allowed=True) == ([], [])
        destroy(session, NAME, RG)
        assert _audit(azure, final, foreign, planned_allowed=False) == ([], [])


# ------------------------------------------------------------------------------ the health gate's row

RUN_COMMAND_FAULTS = {
    "post-500": dict(method="POST", path=r"/virtualMachines/1/runCommand", status=500, times=None),
    "post-reset": dict(method="POST", path=r"/virtualMachines/1/runCommand", reset=True, times=None),
    "poll-500": dict(method="GET", path=r"/operations/", status=500, times=None),
    "poll-reset": dict(method="GET", path=r"/operations/", reset=True, times=None),
}


@pytest.mark.parametrize("fault", sorted(RUN_COMMAND_FAULTS))
def test_a_run_command_error_never_deletes_or_reports_a_node(azure, session, fault):
    """A 500 or a dropped connection from Run Command (on the POST, or on every status poll) says nothing
    about the host: the nodes are unreachable, create --replace-unhealthy deletes nothing and files nothing."""
    from deploy_support import request as health_request

    from azgpu.deploy import ghr
    from azgpu.deploy import health_gate as health
    from azgpu.deploy.interface import GateHooks, GateOptions
    from azgpu.deploy.lifecycle import live_cluster
    from azgpu.health.outcome import unhealthy_error

    create(session, health_request("nd-a100-v4", nodes=3))
    azure.make_unhealthy("c1-vmss000/0", gpus=7)  # node 0 really is bad: it alone may go
    after = len(azure.requests)
    azure.inject(**RUN_COMMAND_FAULTS[fault])
    reporter = ghr.Reporter(session)
    outcome = health.gate(session, live_cluster(session, "c1", "rg1"), GateOptions(replace_unhealthy=True),
                          GateHooks(before_delete=reporter))
    nodes = {n.instance_id: n for n in outcome.report}
    assert nodes["1"].status == "unreachable" and nodes["1"].reason_code == "run_command_failed"
    deleted = [c for c in azure.requests[after:] if c.method == "POST" and "/delete" in c.path]
    if fault.startswith("poll"):  # no node answered at all: nothing is known about any host
        assert not deleted and not azure.impacts() and not outcome.replaced
        assert {n.status for n in nodes.values()} == {"unreachable"}
    else:
        assert [r["instance_id"] for r in outcome.replaced] == ["0"]
        assert all("1" not in (c.body or {}).get("instanceIds", []) for c in deleted)
        assert len(azure.impacts()) == 1
    error = unhealthy_error(outcome.as_dict(), cluster="c1", resource_group="rg1", replacing=True,
                                   stopped=outcome.stopped)
    assert "unreachable" in error.message
