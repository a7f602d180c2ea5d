"""The guard that keeps every deploy test from sleeping, and proof that long waits stay virtual."""

from __future__ import annotations

import time

import pytest
from deploy_support import request

from azgpu.deploy import create
from azgpu.deploy.lifecycle import destroy
from azgpu.deploy.session import Session
from azgpu.testing import FakeAzure, FakeCredential


def test_guard_fails_a_real_sleep(_no_real_sleep):
    with pytest.raises(AssertionError, match="must not sleep"):
        time.sleep(0.01)
    assert _no_real_sleep.calls == [(0.01, "MainThread")]
    _no_real_sleep.calls.clear()  # handled here; the guard's teardown would fail the test otherwise


def test_guard_lets_a_zero_sleep_pass():
    time.sleep(0)


def test_slow_operations_and_throttling_take_no_wall_clock_time():
    start = time.monotonic()
    with FakeAzure(lro_polls=20) as azure:
        session = Session(azure.subscription_id, FakeCredential(), polling_interval=0, sleep=azure.sleep)
        azure.inject(method="PUT", path="virtualMachineScaleSets", status=429, retry_after=60)
        create(session, request(nodes=4, max_ib_domain=2))
        destroy(session, "c1", "rg1")
        virtual = sum(azure.sleeps)
    assert virtual >= 60 + 19  # the Retry-After and every poll's Retry-After were waited, virtually
    assert time.monotonic() - start < 5


def test_guard_fails_a_real_wait_of_a_session(_no_real_sleep):
    session = Session("sub", FakeCredential())  # no fake clock: it would wait in real time
    with pytest.raises(AssertionError, match="must not sleep"):
        session.pause(0.01)
    _no_real_sleep.calls.clear()
