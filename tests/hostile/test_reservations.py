"""Hostile answers about capacity reservations (data/reservations.json): a group's reservation list, its
pages and its Block schedules, mutated from BlockCapacityReservation_CreateOrUpdate.json (the REST spec's
example of a Block reservation's answer), read by `provision release`. What a group holds decides what
release deletes, so an answer azgpu cannot read is ARM_ANSWER_INVALID (never an empty or shorter list), a
Block reservation whose schedule cannot be read is never deleted, a next page is followed only to
Resource Manager, and nothing is deleted unless the answer says it may be."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from corpus import FIXTURES, assert_clean, error_code, ids, load, mutated, writes

from azgpu.capacity import schedule_findings
from azgpu.deploy import reservations

CASES = load("reservations.json")["cases"]
EXAMPLE = json.loads((FIXTURES / "azure" / "compute" / "BlockCapacityReservation_CreateOrUpdate.json")
                     .read_text())["responses"]["200"]["body"]
SIZE, LOCATION, RG, GROUP = "Standard_ND96isr_H100_v5", "eastus", "crg-rg", "gpus"
ARM = "https://management.azure.com"


@pytest.fixture
def block_group(azure, session, monkeypatch):
    """A Block group azgpu created holding one Block reservation azgpu created (from tomorrow, two days)."""
    azure.set_sku(LOCATION, SIZE, CapacityReservationSupported="True", SupportedCapacityReservationTypes="Block")
    monkeypatch.setattr(reservations, "utc_now", lambda: datetime.fromtimestamp(azure.now(), UTC))
    today = datetime.fromtimestamp(azure.now(), UTC).date()
    schedule, bad = schedule_findings("Block", start=str(today + timedelta(days=1)), days=2, weeks=None)
    assert not bad
    plan = reservations.reserve_check(session, reservations.ReservePlan(
        resource_group=RG, group=GROUP, name="h100", location=LOCATION, size=SIZE, count=1, zone=None,
        reservation_type="Block", schedule=schedule))
    assert not plan.errors, plan.findings
    reservations.create_reservation(session, plan)
    return today


def dates(value, today):
    """'@day-1', '@day+2': a date around the fake's today, as the example writes them (YYYY-MM-DD)."""
    if isinstance(value, str) and value.startswith("@day"):
        return str(today + timedelta(days=int(value[4:])))
    if isinstance(value, dict):
        return {k: dates(v, today) for k, v in value.items()}
    if isinstance(value, list):
        return [dates(v, today) for v in value]
    return value


def listing(case: dict, today) -> object:
    """The list answer: the example's reservation as the group's (its name, size, owner, a window around
    today that has started, Succeeded), mutated as the case says."""
    item = {**EXAMPLE, "name": "h100", "id": EXAMPLE["id"].replace("blockCapacityReservation", "h100"),
            "tags": {"managed-by": "azgpu"}, "location": LOCATION,
            "properties": {**EXAMPLE["properties"], "provisioningState": "Succeeded",
                           "scheduleProfile": {"start": "@day-1", "end": "@day+1"}}}
    base = dates({"value": [item]}, today)
    if "body" in case:
        return case["body"]["replace"]
    return mutated(base, {**case, "set": dates(case.get("set") or {}, today)})


@pytest.mark.parametrize("case", CASES, ids=ids(CASES))
def test_a_reservation_answer_gets_its_exact_reading(cli, azure, block_group, case):
    body = listing(case, block_group)
    link = case.get("next")
    if link is not None:
        body = {**body, "nextLink": link.replace("@arm", ARM) if isinstance(link, str) else link}
    azure.inject(method="GET", path=rf"capacityReservationGroups/{GROUP}/capacityReservations$", status=200,
                 body=body, times=1 if case.get("next_then") or link is None else None)
    if case.get("next_then"):
        then = case["next_then"]
        azure.inject(method="GET", path=r"/page2$", status=then["status"], body=then["body"], times=None)
    since = len(azure.requests)
    rc, out, err = cli("release", "-g", RG, "--group", GROUP, "--yes", "-o", "json")
    assert_clean(rc, out, err)
    expect = case["expect"]
    assert (rc, error_code(err)) == (expect["rc"], expect.get("code")), err
    deleted = [r.path for r in writes(azure, since)]
    assert len(deleted) == expect.get("writes", 0), deleted
    if link is not None and not case.get("next_then") and "capacityReservations?" not in str(link):
        # refused before it was sent (the fake hears only Resource Manager: nothing reached /page2 there either)
        assert not [r for r in azure.requests[since:] if "page2" in r.path or "steal" in r.path]
    assert len(azure.requests) - since <= 1010  # pages bounded
