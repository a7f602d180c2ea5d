"""What a cluster costs, from the Azure Retail Prices API: per hour and per month, pay-as-you-go or spot.

The API is public and needs no credentials (Learn, "Azure Retail Prices overview"): GET
https://prices.azure.com/api/retail/prices with a `$filter` on serviceName, armRegionName,
armSkuName and priceType, `currencyCode='EUR'` for another currency, up to 1,000 items a page and
`NextPageLink` for the next. One size in one region answers a few rows: Linux and Windows
("Windows" in productName), pay-as-you-go, "Spot" and "Low Priority" meters (in meterName and
skuName); priceType 'Consumption' leaves out "Reservation" and "DevTestConsumption" rows.

Never blocking, never guessing: one lookup has a deadline of a few seconds, answers are kept in
azgpu's cache directory (a day for a price, five minutes for a failure, so an offline machine does
not try again on every command), and whatever goes wrong gives "unknown" with the reason. Only
`requests` is imported, and only on a cache miss: `provision plan` loads no Azure SDK.
"""

from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from .errors import InputError

ENDPOINT = "https://prices.azure.com/api/retail/prices"
API_VERSION = "2023-01-01-preview"  # filter values are case-sensitive from this version on (Learn)
SOURCE = "Azure Retail Prices API"
# Azure's pricing calculator and price pages estimate a month as 730 hours.
HOURS_PER_MONTH = 730
# Learn, "Azure Retail Prices overview", Supported currencies.
CURRENCIES = ("USD", "AUD", "BRL", "CAD", "CHF", "CNY", "DKK", "EUR", "GBP", "INR", "JPY", "KRW", "NOK", "NZD",
              "RUB", "SEK", "TWD")
DEADLINE = 4.0  # seconds for one lookup, every page included
MAX_PAGES = 5  # one size in one region is a handful of rows; more pages mean the filter did not apply
PRICE_TTL = 24 * 3600
FAILURE_TTL = 300
CACHE_FILE = "retail-prices.json"
PRICES_ENV = "AZGPU_PRICES"  # "off": never ask the API (air-gapped machines, test suites)

# The fake Azures (azgpu.testing.FakeAzure) started in this process. While one runs, it answers the
# Retail Prices API with its own recorded prices: those must never land in, nor be read from, the
# user's real cache, where an offline `plan` would later show them as the API's.
_fakes: set[int] = set()


def fake_started(fake: object) -> None:
    _fakes.add(id(fake))


def fake_stopped(fake: object) -> None:
    _fakes.discard(id(fake))


@dataclass(frozen=True)
class Price:
    """The price of one VM hour, or why there is none."""

    status: str  # known | unknown
    per_hour: float | None = None
    currency: str = "USD"
    price_type: str = "pay-as-you-go"  # or spot
    meter: str = ""
    as_of: str = ""  # effectiveStartDate of the row used
    reason: str = ""
    source: str = SOURCE


@dataclass
class Estimate:
    """A cluster's cost: nodes x the price of one VM hour, per hour and per HOURS_PER_MONTH."""

    price: Price
    size: str
    location: str
    nodes: int
    scale_sets: list[tuple[str, int]] = field(default_factory=list)
    before: Estimate | None = None  # what the cluster costs now, for create --what-if

    @property
    def hourly(self) -> float | None:
        return None if self.price.per_hour is None else round(self.price.per_hour * self.nodes, 4)

    def as_dict(self) -> dict[str, Any]:
        p = self.price
        out: dict[str, Any] = {"status": p.status, "size": self.size, "location": self.location, "nodes": self.nodes,
                               "currency": p.currency, "price_type": p.price_type, "source": p.source}
        if p.status == "known":
            out.update(per_node_hourly=p.per_hour, hourly=self.hourly,
                       monthly=round(p.per_hour * self.nodes * HOURS_PER_MONTH, 2), hours_per_month=HOURS_PER_MONTH,
                       meter=p.meter, as_of=p.as_of)
        else:
            out["reason"] = p.reason
        if self.before is not None:
            out["before"] = self.before.as_dict()
        # Always a list, so -o table shows the cost as a section of its own.
        out["scale_sets"] = [{"name": n, "nodes": c, "hourly": round(p.per_hour * c, 4)}
                             for n, c in self.scale_sets] if p.status == "known" else []
        return out


def check_currency(currency: str | None) -> str:
    code = (currency or "USD").strip().upper()
    if code not in CURRENCIES:
        raise InputError(f"--currency {currency!r} is not a currency the Azure Retail Prices API offers",
                         code="INVALID_CURRENCY", remedy=f"use one of {', '.join(CURRENCIES)}")
    return code


def _filter(size: str, location: str) -> str:
    return (f"serviceName eq 'Virtual Machines' and armRegionName eq '{location}' and armSkuName eq '{size}' "
            "and priceType eq 'Consumption'")


def _is_spot(item: dict) -> bool:
    return any(str(item.get(k, "")).endswith(" Spot") for k in ("meterName", "skuName"))


def _is_low_priority(item: dict) -> bool:
    return any(str(item.get(k, "")).endswith(" Low Priority") for k in ("meterName", "skuName"))


def choose(items: list[dict], size: str, location: str, *, spot: bool, currency: str) -> Price:
    """The row that prices one Linux VM hour of `size` in `location`, from the API's items."""
    price_type = "spot" if spot else "pay-as-you-go"
    rows = [i for i in items
            if str(i.get("armSkuName", "")).lower() == size.lower()
            and str(i.get("armRegionName", "")).lower() == location.lower()
            and i.get("type", "Consumption") == "Consumption"
            and i.get("unitOfMeasure", "1 Hour") == "1 Hour"
            and "windows" not in str(i.get("productName", "")).lower()
            and _is_spot(i) == spot and not _is_low_priority(i)
            and i.get("retailPrice") is not None]
    if not rows:
        what = "spot price" if spot else "pay-as-you-go price"
        return Price("unknown", currency=currency, price_type=price_type,
                     reason=f"the {SOURCE} lists no Linux {what} for {size} in {location}")
    primary = [i for i in rows if i.get("isPrimaryMeterRegion", True)] or rows
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    current = [i for i in primary if str(i.get("effectiveStartDate", "")) <= now] or primary
    row = max(current, key=lambda i: str(i.get("effectiveStartDate", "")))
    return Price("known", float(row["retailPrice"]), row.get("currencyCode", currency), price_type,
                 str(row.get("meterName", "")), str(row.get("effectiveStartDate", "")))


# ------------------------------------------------------------------------------------ fetching


def _fetch(size: str, location: str, currency: str, endpoint: str, deadline: float) -> list[dict]:
    import requests  # only here: a cached answer needs no HTTP library

    items: list[dict] = []
    url: str | None = endpoint
    params: dict[str, str] | None = {"api-version": API_VERSION, "currencyCode": f"'{currency}'",
                                     "$filter": _filter(size, location)}
    for _ in range(MAX_PAGES):
        left = deadline - time.monotonic()
        if left <= 0 or url is None:
            break
        answer = requests.get(url, params=params, timeout=(min(left, 3.0), left))
        answer.raise_for_status()
        body = answer.json()
        items.extend(body.get("Items") or [])
        url, params = body.get("NextPageLink") or None, None  # the link carries the query
    return items


def _within(fn, timeout: float):
    """fn() in a daemon thread, given up after `timeout` s: a resolver that hangs cannot hold `plan`."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # handed to the caller
            box["error"] = exc

    thread = threading.Thread(target=run, name="azgpu-prices", daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        raise TimeoutError(f"no answer within {timeout:g} s")
    if "error" in box:
        raise box["error"]
    return box["value"]


def _reason(exc: BaseException) -> str:
    name = type(exc).__name__
    if "NameResolution" in repr(exc) or "getaddrinfo" in repr(exc):
        return "offline: prices.azure.com cannot be resolved"
    if name in ("ConnectionError", "ConnectTimeout", "ReadTimeout", "TimeoutError", "Timeout"):
        return f"prices.azure.com did not answer ({name})"
    status = getattr(getattr(exc, "response", None), "status_code", None)
    if status:
        return f"prices.azure.com answered HTTP {status}"
    if isinstance(exc, ValueError):
        return "prices.azure.com answered something that is not JSON"
    return f"the price lookup failed ({name})"


# ------------------------------------------------------------------------------------ the cache


def _cache_path():
    from .shipped_data import cache_dir

    base = cache_dir()
    return base / CACHE_FILE if base is not None else None


def _cache_key(endpoint: str, size: str, location: str, currency: str) -> str:
    return f"{endpoint}|{size.lower()}|{location.lower()}|{currency}"


def _read_cache(key: str) -> dict | None:
    path = _cache_path()
    if path is None:
        return None
    try:
        entry = json.loads(path.read_text()).get(key)
    except (OSError, ValueError, AttributeError):
        return None
    if not isinstance(entry, dict) or time.time() - entry.get("at", 0) > entry.get("ttl", 0):
        return None
    return entry


def _write_cache(key: str, entry: dict) -> None:
    path = _cache_path()
    if path is None:
        return
    try:
        data = json.loads(path.read_text()) if path.exists() else {}
        if not isinstance(data, dict):
            data = {}
    except (OSError, ValueError):
        data = {}
    now = time.time()
    data = {k: v for k, v in data.items() if isinstance(v, dict) and now - v.get("at", 0) <= v.get("ttl", 0)}
    data[key] = {**entry, "at": now}
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(json.dumps(data))
        os.replace(tmp, path)
    except OSError:
        tmp.unlink(missing_ok=True)


# ------------------------------------------------------------------------------------ the API


def lookup(size: str, location: str, *, spot: bool = False, currency: str = "USD", endpoint: str = ENDPOINT,
           cache: bool = True, simulated: bool = False, timeout: float = DEADLINE) -> Price:
    """The price of one Linux VM hour; Price("unknown", reason=...) when there is none to be had.

    simulated: the answer comes from azgpu.testing's fake (--simulate): no cache, no AZGPU_PRICES.
    While a FakeAzure runs in this process the answer is the fake's too: labelled simulated and
    never cached.
    """
    currency = check_currency(currency)
    price_type = "spot" if spot else "pay-as-you-go"
    faked = simulated or bool(_fakes)
    source = f"{SOURCE} (simulated)" if faked else SOURCE
    if not simulated and os.environ.get(PRICES_ENV, "").strip().lower() in ("off", "0", "no", "false"):
        return Price("unknown", currency=currency, price_type=price_type, source=source,
                     reason=f"price lookups are turned off ({PRICES_ENV}={os.environ[PRICES_ENV]})")
    key = _cache_key(endpoint, size, location, currency)
    entry = _read_cache(key) if cache and not faked else None
    if entry is None:
        deadline = time.monotonic() + timeout
        try:
            items = _within(lambda: _fetch(size, location, currency, endpoint, deadline), timeout)
            entry = {"items": items, "ttl": PRICE_TTL}
        except Exception as exc:  # any failure is an unknown price, never an error
            entry = {"error": _reason(exc), "ttl": FAILURE_TTL}
        if cache and not faked:
            _write_cache(key, entry)
    if "error" in entry:
        return Price("unknown", currency=currency, price_type=price_type, source=source, reason=entry["error"])
    price = choose(entry["items"], size, location, spot=spot, currency=currency)
    return Price(price.status, price.per_hour, price.currency, price.price_type, price.meter, price.as_of, price.reason,
                 source)


def estimate(size: str, location: str, nodes: int, *, spot: bool = False, currency: str = "USD",
             scale_sets: list[tuple[str, int]] = (), before_nodes: int | None = None, **kw: Any) -> Estimate:
    """nodes x lookup(); before_nodes: also what the cluster costs now (create --what-if)."""
    price = lookup(size, location, spot=spot, currency=currency, **kw)
    est = Estimate(price, size, location, nodes, list(scale_sets))
    if before_nodes is not None:
        est.before = Estimate(price, size, location, before_nodes)
    return est


def plan_estimate(plan, *, currency: str = "USD", **kw: Any) -> Estimate:
    """The cost of a Plan: every scale set at the price of its size in the plan's location."""
    spec = plan.spec
    sets = [(r.name, r.body["sku"]["capacity"]) for r in plan.scale_sets]
    if not spec.request.location:
        price = Price("unknown", currency=check_currency(currency), price_type="spot" if spec.request.spot
                      else "pay-as-you-go", reason="no location given: pass -l/--location to price the cluster")
        return Estimate(price, spec.size.name, "", spec.nodes, sets)
    return estimate(spec.size.name, spec.request.location, spec.nodes, spot=spec.request.spot, currency=currency,
                    scale_sets=sets, **kw)
