"""`certify`: burn a cluster in through Run Command, hand the bad hardware back to Azure, replace it.

The gate first (health_gate.check: AzNHC or the fallback on every node); then, per InfiniBand domain
(scale set), the certification suite (azgpu.certify.suite) over a Run Command runner: each step is
azgpu/health/certify_node.sh on a node, its output paged back and read by the bounded parsers; the
fabric rounds run on one launcher node, which reaches the others over ssh with the key of the gate's
multi-node NCCL check (made there, accepted by the others from its address only, for a bounded time,
removed afterwards). Every fault the suite attributes to hardware becomes the node's failed result:
with reporting asked for, Guest Health Reporting files it with the measurement as evidence (ghr.py)
while the VM exists; with replacing asked for, the node is then deleted and the scale set grown back
(health_gate's replacement), and the new node is certified against the nodes that passed. Findings that
could be the image's or the configuration's are never reported or replaced; replacing stops by the gate's
rules (health_gate.replacement_stop). Nodes go through azgpu.deploy's node verbs (nodes.py). NVL72 sizes
are kept in whole racks: a faulty node's rack (as rack_gate.measure names it) is replaced whole, never
one node of it; a rack that cannot be named whole is reported and kept.
"""

from __future__ import annotations

import dataclasses
import datetime
import itertools
import re
import secrets
import threading
import zlib
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from .. import resource_types
from ..certify import certificate, node_step
from ..certify.levels import RUN_COMMAND
from ..certify.levels import level as level_of
from ..certify.runner import NodeInfo, Output, RoundFailed
from ..certify.suite import SuitePlan, SuiteResult
from ..certify.suite import run as run_suite
from ..errors import AzgpuError
from ..health.results import FAILED, PASSED, NodeResult, output_streams
from ..health.trust import valid_nccl_pubkey
from ..ownership import live_profile
from ..profiles import Figure, Size, find_size
from ..racks import fabric_domain, fabric_of
from . import rack_gate
from .arm import to_azure_error
from .ghr import Reporter
from .health_gate import _ips, inspect, replacement_stop, signature
from .interface import CertifyOptions, CertifyResult, HealthReport, refuse
from .lifecycle import live_cluster
from .nodes import delete_instances, set_capacity
from .run_command import Instance, Unreachable, _run, check_node_raw, list_instances

KEY_HOURS = 8  # the launcher's key is accepted this long at most, whatever happens to the clean-up


class RunCommandRunner:
    """The suite's runner on Azure: one Run Command per node and step, one per fabric round."""

    def __init__(self, session, resource_group: str, instances: dict[str, Instance], ips: dict[str, str], *,
                 admin: str, timeout: float, plan: SuitePlan):
        """plan: the domain's suite plan, whose Run Commands in flight, GPUs, ports and NCCL environment these are."""
        self.session, self.rg = session, resource_group
        self.instances, self.ips = instances, ips
        self.admin, self.timeout, self.parallel = admin, timeout, plan.parallel
        self.gpus, self.ports, self.nccl_env = plan.gpus, tuple(plan.ports), plan.nccl_env
        self.prefix = f"c{secrets.token_hex(4)}"
        self.counter = itertools.count()
        self.lock = threading.Lock()
        self.launcher: str | None = None
        self.pubkey: str | None = None
        self.trusted: set[str] = set()
        self.refused: dict[str, str] = {}
        self.candidates: list[str] = []

    # -- one step ------------------------------------------------------------------------------
    def _run_id(self) -> str:
        with self.lock:
            return f"{self.prefix}-{next(self.counter)}"

    def _call(self, instance: Instance, body: dict) -> tuple[node_step.Verdict | None, str | None]:
        try:
            result = _run(self.session, self.rg, instance, body, self.timeout, threading.Event())
        except Unreachable as exc:
            return None, exc.reason
        stdout, stderr = output_streams(result)
        try:
            verdict = node_step.read(stdout)
        except node_step.NodeOutputError as exc:
            return None, f"the node's answer did not validate: {exc}"
        if verdict is None:
            tail = " ".join("".join(c if c.isprintable() else " " for c in stderr).split())[-160:]
            return None, f"no verdict came back (stderr ends '{tail}')"
        return verdict, None

    def step(self, name: str, mode: str, settings: dict[str, object]) -> Output:
        instance = self.instances[name]
        body = node_step.body(mode, {**settings, "AZGPU_RUN": self._run_id(), "AZGPU_ADMIN_USER": self.admin})
        verdict, error = self._call(instance, body)
        if error or verdict is None:
            return Output(None, error=error)
        if not verdict.ok or verdict.error:
            return Output(None, error=verdict.error or f"{mode} failed", image=verdict.exit == 127)
        more = []
        for page in range(1, verdict.pages):
            got, error = self._call(instance, node_step.body("page", {"AZGPU_PAGE_RUN": verdict.run,
                                                                      "AZGPU_PAGE": page}))
            if error or got is None or not got.ok:
                return Output(None, error=f"page {page} of {verdict.pages}: {error or (got and got.error)}")
            more.append(got)
        try:
            text = node_step.assemble(verdict, more)
        except node_step.NodeOutputError as exc:
            return Output(None, error=str(exc))
        return Output(text, float(verdict.seconds or 0), versions=dict(verdict.versions), pages=max(1, verdict.pages))

    def per_node(self, mode: str, nodes: Sequence[NodeInfo], settings: dict[str, object]) -> dict[str, Output]:
        if not nodes:
            return {}
        with ThreadPoolExecutor(max_workers=min(self.parallel, len(nodes))) as pool:
            outputs = list(pool.map(lambda n: self.step(n.name, mode, settings), nodes))
        return {n.name: o for n, o in zip(nodes, outputs, strict=True)}

    # -- the fabric ----------------------------------------------------------------------------
    def _settings(self) -> dict[str, object]:
        return {"AZGPU_EXPECT_GPUS": self.gpus, "AZGPU_ADMIN_USER": self.admin}

    def _key(self) -> None:
        if self.pubkey is not None:
            return
        for name in self.candidates or list(self.instances):
            if name not in self.ips:
                continue
            got = check_node_raw(self.session, self.rg, self.instances[name], "nccl-keygen", self._settings(),
                                 self.timeout)
            if got.get("ok") and valid_nccl_pubkey(got.get("pubkey")):
                self.launcher, self.pubkey = name, got["pubkey"]
                return
        raise RoundFailed("no node could make the key the fabric rounds need", remedy="see 'provision check' for "
                          "the nodes' state and run certify again")

    def _trust(self, names: set[str]) -> None:
        wanted = sorted(n for n in names | {self.launcher} if n not in self.trusted and n not in self.refused)
        if not wanted:
            return
        expiry = datetime.datetime.now(datetime.UTC) + datetime.timedelta(hours=KEY_HOURS)
        settings = {**self._settings(), "AZGPU_NCCL_PUBKEY": self.pubkey, "AZGPU_NCCL_FROM": self.ips[self.launcher],
                    "AZGPU_NCCL_EXPIRY": expiry.strftime("%Y%m%d%H%M")}
        with ThreadPoolExecutor(max_workers=min(self.parallel, len(wanted))) as pool:
            results = list(pool.map(lambda n: check_node_raw(self.session, self.rg, self.instances[n], "nccl-trust",
                                                             settings, self.timeout), wanted))
        for name, got in zip(wanted, results, strict=True):
            if got.get("ok"):
                self.trusted.add(name)
            else:
                self.refused[name] = str(got.get("error") or "refused")

    def fabric(self, jobs) -> list[Output]:
        if all(j.kind == "ibpair" for j in jobs):
            return self._pairs(jobs)
        self._key()
        self._trust({n for j in jobs for n in j.nodes})
        lines, runnable = [], []
        for i, job in enumerate(jobs):
            missing = [n for n in job.nodes if n not in self.ips or n in self.refused]
            if missing:
                continue
            ips = [self.ips[n] for n in job.nodes]
            lines.append(f"{i} collective {job.op} {job.min_bytes} {job.max_bytes} {','.join(ips)}"
                         + (" mnnvl" if job.fabric == "mnnvl" else ""))
            runnable.append(i)
        out = self.step(self.launcher, "fabric", {**self._settings(), "AZGPU_JOBS": ";".join(lines),
                                                  "AZGPU_NCCL_ENV": self.nccl_env,
                                                  "AZGPU_IB_DEVICES": " ".join(self.ports), "AZGPU_IB_SECONDS": 5,
                                                  "AZGPU_STEP_TIMEOUT": int(max(120, self.timeout - 120))})
        if out.text is None:
            raise RoundFailed(f"the fabric round on {self.launcher} did not run: {out.error}",
                              remedy="run certify again; the launcher's state is in /var/log/azgpu/ on it")
        sections = _jobs(out.text)
        results = []
        for i, job in enumerate(jobs):
            if i not in runnable:
                why = "; ".join(f"{n}: {self.refused.get(n, 'no private IP')}" for n in job.nodes
                                if n in self.refused or n not in self.ips)
                results.append(Output(None, error=f"not run ({why[:200]})"))
            else:
                results.append(Output(sections.get(str(i), ""), out.seconds, pages=out.pages))
        return results

    def _pairs(self, jobs) -> list[Output]:
        """ib_write_bw between each pair: the server end and the client end, each through its own Run Command,
        all at once (in waves of pairs when there are more than --parallel allows)."""
        out: list[Output] = []
        per_wave = max(1, self.parallel // 2)
        for start in range(0, len(jobs), per_wave):
            wave = jobs[start:start + per_wave]
            tasks = []
            for job in wave:
                a, b = job.nodes
                if a not in self.ips or b not in self.ips:
                    tasks += [None, None]
                    continue
                settings = {**self._settings(), "AZGPU_IB_DEVICES": " ".join(self.ports), "AZGPU_IB_SECONDS": 5}
                tasks.append((b, {**settings, "AZGPU_IB_ROLE": "server", "AZGPU_IB_PEER": self.ips[a]}))
                tasks.append((a, {**settings, "AZGPU_IB_ROLE": "client", "AZGPU_IB_PEER": self.ips[b]}))
            live = [t for t in tasks if t is not None]
            with ThreadPoolExecutor(max_workers=max(1, len(live))) as pool:
                done = iter(list(pool.map(lambda t: self.step(t[0], "ibpair", t[1]), live)))
            answers = [next(done) if t is not None else Output(None, error="no private IP") for t in tasks]
            for i in range(0, len(answers), 2):
                server, client = answers[i], answers[i + 1]
                out.append(Output(client.text, max(server.seconds, client.seconds), error=client.error,
                                  image=client.image, pages=client.pages))
        return out

    def close(self) -> None:
        """The key goes from every node that accepted it, and from the launcher."""
        if self.pubkey is None:
            return
        settings = {**self._settings(), "AZGPU_NCCL_PUBKEY": self.pubkey}
        present = sorted(n for n in self.trusted if n in self.instances)  # replaced nodes are gone with their keys
        with ThreadPoolExecutor(max_workers=max(1, min(self.parallel, len(present)))) as pool:
            list(pool.map(lambda n: check_node_raw(self.session, self.rg, self.instances[n], "nccl-untrust",
                                                   settings, self.timeout), present))
        if self.launcher in self.instances:
            self.step(self.launcher, "forget", {})
        self.pubkey = None


_JOB = re.compile(r"^==== job (\d{1,4})$")


def _jobs(text: str) -> dict[str, str]:
    out: dict[str, list[str]] = {}
    current = None
    for line in text.splitlines()[:200_000]:
        m = _JOB.match(line)
        if m:
            current = m.group(1)
            out[current] = []
        elif current is not None and not line.startswith("==== end "):
            out[current].append(line)
    return {k: "\n".join(v) + "\n" for k, v in out.items()}


# ------------------------------------------------------------------------------ the verb


def _size_of(vmss: Any) -> Size:
    return live_profile(vmss)[1]


def _nccl_env(vmss: Any) -> str:
    profile = live_profile(vmss)[0]
    return " ".join(f"{k}={v}" for k, v in (profile.nccl.get("env") or {}).items())


def _figure_dict(f: Figure) -> dict[str, Any]:
    return {"unit": f.unit, "expected": f.expected, "warn": f.warn, "floor": f.floor, "source": list(f.source),
            "note": f.note}


def _failed(node: NodeResult, faults) -> NodeResult:
    """The node's result as the gate's failed one, its failures the certification's faults."""
    return dataclasses.replace(node, status=FAILED, checker="certify",
                               failures=tuple(f.failure for f in faults), more_failures=0, dropped=None)


@dataclasses.dataclass
class _Domain:
    vmss: Any
    size: Size
    plan: SuitePlan
    runner: RunCommandRunner
    results: list[SuiteResult] = dataclasses.field(default_factory=list)


def certify(session, name: str, resource_group: str, options: CertifyOptions = CertifyOptions()) -> CertifyResult:
    """Certify every node and fabric of the cluster; returns the certificate (CertifyResult)."""
    refuse(options.findings())  # the verb's door: its options, once (the level among them)
    lv = level_of(options.level)
    node = options.node
    notice = options.on_notice
    reporter = None
    if options.report.report_to_azure:
        reporter = Reporter(session, insight_timeout=options.report.insight_timeout, confirm=options.report.confirm,
                            on_event=notice)
        reporter.preflight()  # before anything runs: a subscription that cannot report stops here
    started = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    notice(f"certify {name}: the health gate first")
    cluster = live_cluster(session, name, resource_group)
    report = inspect(session, cluster, node)
    gate_seconds = max((n.seconds or 0 for n in report.nodes), default=0) + RUN_COMMAND
    results = {n.resource_id.lower(): n for n in report.nodes}
    domains = _domains(session, resource_group, name, report, options, lv)
    figures: dict[str, dict] = {}
    replaced: list[dict[str, Any]] = []
    stopped = None
    checked: list[NodeResult] = list(report.nodes)  # the nodes the last round checked
    previous: set = set()  # the signatures of the nodes the last round replaced
    try:
        for d in domains.values():
            figures[d.size.name] = {k: _figure_dict(f) for k, f in d.size.certify.items()}
            nodes = _infos(d, [n for n in report.nodes if n.scale_set == d.vmss.name and n.status == PASSED])
            notice(f"certify {d.vmss.name}: {len(nodes)} node(s), level {lv.name}")
            d.results.append(run_suite(d.runner, nodes, d.plan, on_notice=notice))
        rounds = 0
        while True:
            bad = _bad(domains, results, report)
            if not bad:
                break
            doomed, whole = bad, None
            if options.replace and any(d.plan.racks for d in domains.values()):
                doomed, whole = _racks_of(session, name, resource_group, results, bad, domains)
            if not options.replace or not doomed:
                if reporter is not None:
                    reporter.report(bad)
                if options.replace:
                    stopped = f"{whole}: nothing was deleted"
                break
            # The gate's own rules for when replacing stops (health_gate.replacement_stop): the finding followed the
            # replacements to new hosts, the rounds are used up, or every node the last round checked is faulty.
            by_id = {n.resource_id.lower(): n for n in bad}
            stopped = replacement_stop([by_id.get(n.resource_id.lower(), n) for n in checked], bad, previous,
                                       rounds + 1, options.max_rounds)
            if stopped:
                break
            rounds += 1
            previous = {signature(n) for n in bad}
            hooks = [h for h in (reporter, options.before_delete) if h is not None]
            for hook in hooks:
                hook(list(bad))  # while the VMs still exist: Guest Health Reporting first
            new = _replace(session, resource_group, doomed, report)
            notice(f"certify: replaced {len(doomed)} node(s) (round {rounds}); certifying the new one(s)")
            again = inspect(session, cluster, dataclasses.replace(node, nccl=False), instances=new)
            checked = list(again.nodes)
            faulty_names = {n.computer_name: n for n in bad}
            for old in doomed:
                why = (faulty_names[old.computer_name].summary() if old.computer_name in faulty_names else
                       f"in the NVL72 rack of {whole}: Azure keeps these scale sets in whole racks")
                replaced.append({"round": rounds, "node": old.computer_name, "scale_set": old.scale_set,
                                 "physical_host": old.physical_host, "summary": why,
                                 "by": [n.computer_name for n in again.nodes if n.scale_set == old.scale_set]})
                results.pop(old.resource_id.lower(), None)
            for n in again.nodes:
                results[n.resource_id.lower()] = n
            report = HealthReport(name, resource_group, list(results.values()), again.scale_sets or report.scale_sets,
                                  report.outbound)
            _refresh(session, resource_group, domains)
            for d in domains.values():
                fresh = [n for n in again.nodes if n.scale_set == d.vmss.name and n.status == PASSED]
                if not fresh:
                    continue
                # The nodes that passed before: every node of the scale set the gate passed, but the new ones and
                # any a certification run still holds faulty.
                faulty = {f.node for r in d.results for f in r.faults}
                new_names = {n.computer_name for n in fresh}
                good = [n.computer_name for n in results.values() if n.scale_set == d.vmss.name and n.status == PASSED
                        and n.computer_name not in new_names and n.computer_name not in faulty]
                d.results.append(run_suite(d.runner, _infos(d, fresh), d.plan, reference=_infos_named(d, good),
                                           on_notice=notice))
    finally:
        for d in domains.values():
            try:
                d.runner.close()
            except AzgpuError as exc:  # the key expires by itself (KEY_HOURS): say so, keep the certificate
                notice(f"certify: the fabric key could not be removed everywhere ({exc.message}); it expires in "
                       f"{KEY_HOURS} h")
    record = _record({"cluster": name, "resource_group": resource_group, "level": lv.name,
                      "gate_seconds": gate_seconds, "started": started, "stopped": stopped},
                     domains, results, reporter, replaced, figures)
    return CertifyResult(name, resource_group, record)


def _racks_of(session, name: str, resource_group: str, results: dict[str, NodeResult], bad: list[NodeResult],
              domains: dict) -> tuple[list[NodeResult], str]:
    """On NVL72 sizes, the nodes to replace: every node of each rack holding a faulty one (Azure creates and
    shrinks these scale sets only in whole racks, facts §14.1; nodes.delete_instances refuses anything else),
    and the faulty nodes' names. ([], why) when a rack cannot be named whole: it is short, or the nodes'
    NVLink domain disagrees with Azure's interconnect subgroup (rack_gate.measure) - then nothing is deleted."""
    per_rack = {d.vmss.name: find_size(d.size.name)[0].rack_size for d in domains.values()
                if d.plan.racks}
    sick = {n.computer_name for n in bad}
    names = ", ".join(sorted(sick))
    by_name = {n.computer_name: n for n in results.values()}
    doomed: list[NodeResult] = []
    for scale_set, size in per_rack.items():
        nodes = [n for n in results.values() if n.scale_set == scale_set]
        signals = rack_gate._signals(session, resource_group, [scale_set])  # Azure's racks, then the nodes' word
        for rack in rack_gate.measure(signals, name, nodes, size):
            if not sick & set(rack["nodes"]):
                continue
            if (len(rack["nodes"]) != size or rack.get("agrees_with_azure") is False or rack.get("disputed")
                    or rack.get("fabric_not_complete")):
                why = (f"{len(rack['nodes'])} of {size} VMs" if len(rack["nodes"]) != size else
                       "its nodes' NVLink domain disagrees with Azure's rack or with each other"
                       if rack.get("agrees_with_azure") is False or rack.get("disputed") else
                       "not every node of it measured its NVLink domain")
                return [], f"rack {rack['name']} of {names} is not a whole rack azgpu can name ({why})"
            doomed += [by_name[h] for h in rack["nodes"]]
    if sick - {n.computer_name for n in doomed}:  # a faulty node of a scale set without racks
        doomed += [n for n in bad if n.computer_name not in {d.computer_name for d in doomed}]
    return doomed, names


def _replace(session, resource_group: str, bad: list[NodeResult], report: HealthReport) -> set[str]:
    """Delete the faulty instances and grow each scale set back to the capacity the gate saw, through the
    node verbs azgpu.deploy exports (nodes.py: one delete request per scale set; a request that would leave
    a vertical-connect scale set off whole racks is refused there, before it is sent); the new instances'
    resource ids."""
    by_set: dict[str, list[str]] = {}
    for node in bad:
        by_set.setdefault(node.scale_set, []).append(node.instance_id)
    sets = {s["name"]: s for s in report.scale_sets}
    for name, ids in by_set.items():
        delete_instances(session, resource_group, name, ids)
    for name in by_set:
        set_capacity(session, resource_group, name, int(sets[name]["capacity"]))
    new: set[str] = set()
    try:
        for name in by_set:
            before = set(sets[name]["instances"])
            vmss = resource_types.VMSS.get(session, resource_group, name)
            new |= {i.resource_id.lower() for i in list_instances(session, resource_group, vmss)
                    if i.instance_id not in before}
    except Exception as exc:
        raise to_azure_error(exc, "reading the replacement nodes") from None
    return new


def _domains(session, resource_group: str, name: str, report: HealthReport, options: CertifyOptions, lv) -> dict:
    out = {}
    node = options.node
    try:
        for entry in report.scale_sets:
            vmss = resource_types.VMSS.get(session, resource_group, entry["name"])
            size = _size_of(vmss)
            gpus = int(size.health.get("gpus", size.gpus)) if size.health else size.gpus
            ports = tuple(f"mlx5_ib{i}" for i in range(size.ib_ports))
            vertical = bool(find_size(size.name)[0].vertical_connect)
            admin = getattr(getattr(getattr(vmss, "virtual_machine_profile", None), "os_profile", None),
                            "admin_username", None) or "azureuser"
            instances = {i.computer_name: i for i in list_instances(session, resource_group, vmss)}
            ips = {i.computer_name: ip for i in instances.values()
                   if (ip := _ips(session, resource_group, vmss.name).get(i.instance_id))}
            seed = options.seed if options.seed is not None else zlib.crc32(f"{name}/{vmss.name}".encode())
            plan = SuitePlan(size.name, lv, size.certify, gpus, ports, racks=vertical, seed=seed,
                             parallel=node.parallel, nccl_env=_nccl_env(vmss),
                             step_timeout=int(max(60, node.node_timeout - 120)))
            runner = RunCommandRunner(session, resource_group, instances, ips, admin=admin, timeout=node.node_timeout,
                                      plan=plan)
            out[vmss.name] = _Domain(vmss, size, plan, runner)
    except AzgpuError:
        raise
    except Exception as exc:
        raise to_azure_error(exc, f"reading the scale sets of {name}") from None
    return out


def _refresh(session, resource_group: str, domains: dict) -> None:
    """After a replacement: the new instances and their addresses."""
    try:
        for d in domains.values():
            d.runner.instances = {i.computer_name: i for i in list_instances(session, resource_group, d.vmss)}
            by_id = _ips(session, resource_group, d.vmss.name)
            d.runner.ips = {i.computer_name: by_id[i.instance_id] for i in d.runner.instances.values()
                            if i.instance_id in by_id}
            d.runner.trusted &= set(d.runner.instances)
            if d.runner.launcher not in d.runner.instances:  # the launcher was replaced: a new key, a new launcher
                d.runner.launcher, d.runner.pubkey, d.runner.trusted = None, None, set()
    except Exception as exc:
        raise to_azure_error(exc, "reading the replacement nodes") from None


def _infos(d: _Domain, nodes: list[NodeResult]) -> list[NodeInfo]:
    out = []
    for n in nodes:
        rack = fabric_domain(fabric_of(n)) if d.plan.racks else None
        out.append(NodeInfo(n.computer_name, n.scale_set, n.instance_id, n.resource_id,
                            d.runner.ips.get(n.computer_name), n.physical_host, n.vm_id, rack))
    return out


def _infos_named(d: _Domain, names: list[str]) -> list[NodeInfo]:
    return [NodeInfo(n, d.vmss.name, ip=d.runner.ips.get(n)) for n in names if n in d.runner.instances]


def _bad(domains: dict, results: dict[str, NodeResult], report: HealthReport) -> list[NodeResult]:
    """The nodes proven faulty now: by the gate (a host fault) or by the certification's last run."""
    by_name = {n.computer_name: n for n in results.values()}
    out = {n.computer_name: n for n in results.values() if n.status == FAILED}
    for d in domains.values():
        if not d.results:
            continue
        faults: dict[str, list] = {}
        for fault in d.results[-1].faults:
            faults.setdefault(fault.node, []).append(fault)
        for node_name, fs in faults.items():
            if node_name in by_name and node_name not in out:
                out[node_name] = _failed(by_name[node_name], fs)
    return list(out.values())


def _record(run: dict[str, Any], domains, results, reporter, replaced, figures) -> dict[str, Any]:
    """The certificate; run: the cluster, resource group, level, gate_seconds, started and stopped."""
    gate = [n.as_dict() for n in results.values() if n.status != PASSED and n.checker != "certify"]
    suites = [(d.vmss.name, d.size.name, r) for d in domains.values() for r in d.results]
    reports = list(reporter.entries) if reporter is not None else []
    return certificate.build(**run, domains=suites, gate=gate, reports=reports, replaced=replaced, figures=figures)
