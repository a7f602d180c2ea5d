"""`provision certify`: burn a cluster in before hand-over; `--dry-run` says what a level costs.

Importing this module is cheap: the Azure SDK is imported only inside the command, and `--dry-run
--size SIZE --nodes N` never imports it (what it prints comes from the profiles, azgpu.certify.levels
and the Azure Retail Prices API).
"""

from __future__ import annotations

import functools
import math
import os
import tempfile
from pathlib import Path
from typing import Any

import click

from ..certify.levels import LEVELS
from ..errors import InputError
from ..health.limits import INSIGHT_TIMEOUT, MAX_ROUNDS
from . import options
from .check import health_options
from .options import azure_options, common, emit, log


def certify_options(fn):
    """--level, --replace, --max-rounds, --report-to-azure, --insight-timeout, -y, --chart: shared by
    `certify` and `create --certify`."""

    @functools.wraps(fn)
    def command(*args, level, replace, certify_max_rounds, report_to_azure, insight_timeout, yes, chart, **kwargs):
        return fn(*args, certify={"level": level, "replace": replace, "max_rounds": certify_max_rounds,
                                  "report_to_azure": report_to_azure, "insight_timeout": insight_timeout,
                                  "yes": yes, "chart": chart}, **kwargs)

    wrapped = command
    for option in reversed([
        click.option("--level", type=click.Choice(list(LEVELS)), default="standard", show_default=True,
                     help="quick: dcgmi diag -r 1, one round of pairs, one all_reduce; standard: -r 2, a 120 s "
                          "thermal run, all_reduce and all_to_all to 16 GiB; extended: -r 3, 900 s under load."),
        click.option("--replace", is_flag=True,
                     help="Replace the nodes proven faulty (a faulty node's whole rack on NVL72 sizes) and certify the "
                          "replacements."),
        click.option("--max-rounds", "certify_max_rounds", type=int, default=MAX_ROUNDS, show_default=True,
                     help="Replacement rounds at most."),
        click.option("--report-to-azure", is_flag=True,
                     help="File a Guest Health Report (preview) for each fault, with its measurement, before its "
                          "node is replaced. Asks first unless --yes."),
        click.option("--insight-timeout", type=float, default=INSIGHT_TIMEOUT, show_default=True,
                     help="Seconds to follow a report's insights (0: read them once)."),
        click.option("-y", "--yes", is_flag=True, help="Do not ask before filing reports."),
        click.option("--chart", default=None, metavar="FILE.svg",
                     help="Also write a per-node bandwidth chart as SVG (-o table draws it in the terminal)."),
    ]):
        wrapped = option(wrapped)
    return wrapped


def certify_request(certify: dict[str, Any], node_check):
    """CertifyOptions from the flags, every bad value found before anything runs."""
    from ..deploy.interface import CertifyOptions, ReportOptions
    from .report import ask_to_report, report_findings

    report = ReportOptions(report_to_azure=certify["report_to_azure"], insight_timeout=certify["insight_timeout"],
                           confirm=None if certify["yes"] else ask_to_report)
    problems = [*report_findings(report_to_azure=certify["report_to_azure"], replace_unhealthy=True,
                                 yes=certify["yes"]), *(report.findings() if report.report_to_azure else [])]
    if not 1 <= certify["max_rounds"] <= 10:
        raise InputError(f"--max-rounds {certify['max_rounds']} is out of range", code="INVALID_MAX_ROUNDS",
                         remedy="use 1 to 10 replacement rounds (default 3)")
    chart = certify.get("chart")
    if chart and (not str(chart).endswith(".svg") or Path(chart).is_dir()):
        raise InputError(f"--chart {chart!r} is not an .svg file name", code="INVALID_CHART_FILE",
                         remedy="name a file to write, e.g. --chart certificate.svg")
    folder = Path(chart).expanduser().parent if chart else None
    if folder is not None and not (folder.is_dir() and os.access(folder, os.W_OK | os.X_OK)):
        # Known before hours of burn-in, not after them.
        raise InputError(f"--chart {chart!r}: its folder {str(folder)!r} is not a folder azgpu can write to",
                         code="INVALID_CHART_FILE", remedy="name a file in a writable folder, e.g. --chart "
                                                           "certificate.svg")
    if problems:
        from ..errors import ValidationFailed

        raise ValidationFailed(problems)
    return CertifyOptions(level=certify["level"], replace=certify["replace"], max_rounds=certify["max_rounds"],
                          node=node_check, report=report, on_notice=log)


def emit_certificate(record: dict[str, Any], obj: dict, chart: str | None) -> None:
    from ..certify import chart as charts
    from ..certify.certificate import table

    if obj["output"] == "table" and not obj["query"]:
        emit(table(record), obj)
        click.echo(charts.terminal(record), nl=False)
    else:
        emit(record, obj)
    if chart:  # after the certificate: a chart that cannot be written never costs the certificate
        try:
            _write_chart(Path(chart).expanduser(), charts.svg(record))
        except OSError as exc:
            log(f"chart not written to {chart}: {exc.strerror or exc}")
        else:
            log(f"chart written to {chart}")


def _write_chart(path: Path, text: str) -> None:
    """Written beside the target, then renamed over it: a symlink at the path is replaced, never followed
    (a chart name in a shared folder cannot make azgpu overwrite the file a link points to)."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _dry_run(obj, name, resource_group, size_name, nodes, location, level, currency, node_check, subscription,
             simulate, simulate_latency, simulate_state) -> None:
    """What the level costs: GPU-hours, the size's retail price, the expected duration, stage by stage."""
    from ..certify.levels import estimate
    from ..pricing import check_currency, lookup
    from ..profiles import find_size

    currency = check_currency(currency)
    prices: dict[tuple[str, str], Any] = {}
    if size_name:
        if nodes is None or nodes < 1:
            raise InputError("--dry-run --size needs --nodes N", code="MISSING_ARGUMENT",
                             remedy="e.g. 'provision certify --dry-run --size Standard_ND96isr_H100_v5 --nodes 64'")
        sets = [(find_size(size_name)[1], nodes, location)]
        if location:
            prices[(sets[0][0].name, location)] = lookup(sets[0][0].name, location, currency=currency)
    else:
        options.cluster_args(name, resource_group, latency=simulate_latency)
        with options.session_for(subscription, simulate, simulate_latency, simulate_state) as session:
            sets = _cluster_sizes(session, name, resource_group)
            for size, _, where in sets:  # while a simulated cloud runs, its prices answer
                prices[(size.name, where)] = lookup(size.name, where, currency=currency, simulated=bool(simulate))
    rows, total_price, total_gpu_hours, longest = [], 0.0, 0.0, 0.0
    for size, count, where in sets:
        vertical = find_size(size.name)[0].rack_size or 0
        gpus = int(size.health.get("gpus", size.gpus)) if size.health else size.gpus
        est = estimate(level, count, gpus, racks=math.ceil(count / vertical) if vertical else 0,
                       parallel=node_check.parallel)
        price = prices.get((size.name, where))
        hours = est.seconds / 3600
        cost = round(price.per_hour * count * hours, 2) if price is not None and price.per_hour is not None else None
        rows.append({"size": size.name, "nodes": count, "gpu_hours": round(est.gpu_hours, 1),
                     "minutes": round(est.seconds / 60, 1), "price_per_node_hour": price.per_hour if price else None,
                     "cost": cost, "currency": currency,
                     "price": (price.reason or price.source) if price is not None else "no location: pass -l",
                     "stages": [{"stage": s, "minutes": round(sec / 60, 1), "basis": why}
                                for s, sec, why in est.stages],
                     "localisation_minutes_at_most": round(est.localisation_seconds / 60, 1)})
        total_gpu_hours += est.gpu_hours
        total_price += cost or 0.0
        longest = max(longest, est.seconds)
    result = {"level": level, "dry_run": True, "gpu_hours": round(total_gpu_hours, 1),
              "minutes": round(longest / 60, 1),
              "cost": round(total_price, 2) if any(r["cost"] for r in rows) else None,
              "currency": currency, "scale_sets": rows,
              "note": "nothing ran: the duration is the level's stages at the documented or estimated length (basis); "
                      "a collective below its band adds localisation rounds, at most the figure given"}
    if obj["output"] == "table" and not obj["query"]:
        result = {k: v for k, v in result.items() if k not in ("scale_sets", "note")} | {
            "price": "; ".join(f"{r['size']}: {r['price_per_node_hour']} {currency}/node-hour" if r["cost"] is not None
                               else f"{r['size']}: {r['price']}" for r in rows),
            "stages": [{"size": r["size"], "stage": s["stage"], "minutes": s["minutes"]} for r in rows
                       for s in r["stages"]]}
    emit(result, obj)


def _cluster_sizes(session, name: str, resource_group: str) -> list:
    from ..deploy.lifecycle import find_cluster, require
    from ..profiles import find_size

    cluster = require(find_cluster(session, name, resource_group))
    return [(find_size(v.sku.name)[1], v.sku.capacity or 0, v.location) for v in cluster.scale_sets]


def register(cli: click.Group) -> None:
    @cli.command("certify")
    @click.option("-n", "--name", default=None, help="Cluster name.")
    @click.option("-g", "--resource-group", default=None, help="Resource group.")
    @click.option("--dry-run", is_flag=True,
                  help="Run nothing: print the level's GPU-hours, price and expected duration.")
    @click.option("--size", default=None, help="With --dry-run, instead of a cluster: the VM size.")
    @click.option("--nodes", type=int, default=None, help="With --dry-run --size: the node count.")
    @click.option("-l", "--location", default=None, help="With --dry-run --size: the region whose price to show.")
    @click.option("--currency", default="USD", show_default=True, help="Currency of the price.")
    @certify_options
    @health_options
    @azure_options
    @common
    def certify_cmd(obj, name, resource_group, dry_run, size, nodes, location, currency, certify, node_check,
                    subscription, simulate, simulate_latency, simulate_state):
        """Burn the cluster in and name the bad node, link or rack: the health gate, DCGM's diagnostics, a thermal
        run under load, nvbandwidth, the InfiniBand loopback, ib_write_bw on every port of pairs of nodes, and
        all_reduce and all_to_all across each InfiniBand domain (each NVL72 rack's NVLink all_reduce on GB sizes).
        A collective below its band is bisected to its culprit. Prints the certificate; exit 1 unless certified."""
        if dry_run:
            _dry_run(obj, name, resource_group, size, nodes, location, certify["level"], currency, node_check,
                     subscription, simulate, simulate_latency, simulate_state)
            return
        if size or nodes is not None:
            raise InputError("--size and --nodes go with --dry-run", code="CONFLICTING_OPTIONS",
                             remedy="certify a cluster by its name and group "
                                    "(e.g. -n demo -g demo-rg), or price a level with --dry-run (e.g. 'provision "
                                    "certify --dry-run --size Standard_ND96isr_H100_v5 --nodes 64')")
        opts = certify_request(certify, node_check)
        options.cluster_args(name, resource_group, latency=simulate_latency)
        from ..deploy import certify as run_certify

        with options.session_for(subscription, simulate, simulate_latency, simulate_state) as session:
            done = run_certify(session, name, resource_group, opts)
        record = done.as_dict()
        emit_certificate(record, obj, certify.get("chart"))
        if not done.certified:
            raise _not_certified(record, name, resource_group)
        if record["verdict"] != "certified":
            log(f"certified with warnings: {len(record['named'])} named (see 'named')")


def _not_certified(record: dict[str, Any], name: str, resource_group: str):
    from ..health.outcome import UnhealthyNodes

    faults = record["faults"]
    shown = "; ".join(f"{f['subject']}: {(f.get('category') or f['kind']).rsplit('.', 1)[-1]}" for f in faults[:4])
    parts = [f"{len(faults)} fault(s)" + (f" ({shown})" if shown else "")] if faults else []
    if record["common"]:
        parts.append(f"{len(record['common'])} finding(s) every node shares (the image or the configuration)")
    if record["inconclusive"]:
        parts.append(f"{len(record['inconclusive'])} inconclusive finding(s)")
    remedy = (f"see the certificate ('provision certify -n {name} -g {resource_group} -o table'); "
              + ("replace the faulty nodes with --replace (and --report-to-azure to hand their hosts back)"
                 if faults and not record["replaced"] else "fix the image or the configuration and certify again"))
    return UnhealthyNodes("not certified: " + ", ".join(parts or ["see the certificate"]), code="NOT_CERTIFIED",
                          remedy=remedy, report={"nodes": []}, result=record)
