"""Fixtures of the hostile-input corpus (tests/hostile/data/*.json, one file per surface).

The deploy tests' fixtures, for this directory: `azure` (the fake, virtual clock), `session` on it, `cli`
(`provision ...` in-process with the commands that talk to Azure bound to `session`, so a test reads
`azure.requests` around a call), and no real sleep anywhere (a wait of the session or time.sleep fails).
"""

from __future__ import annotations

import time
from contextlib import contextmanager

import pytest

from azgpu.deploy.session import Session
from azgpu.testing import FakeAzure, FakeCredential


@pytest.fixture(autouse=True)
def _no_real_sleep(monkeypatch):
    from azgpu.deploy import session as session_module

    slept = []

    def guard(seconds):
        if seconds and seconds > 0:
            slept.append(seconds)
            raise AssertionError(f"a real wait of {seconds} s in a hostile-input test")

    monkeypatch.setattr(time, "sleep", guard)
    monkeypatch.setattr(session_module, "real_wait", lambda event, seconds: guard(seconds) or event.is_set())
    yield
    assert not slept, slept


@pytest.fixture
def azure():
    with FakeAzure() as fake:
        yield fake


@pytest.fixture
def session(azure) -> Session:
    return Session(azure.subscription_id, FakeCredential(), polling_interval=0, sleep=azure.sleep,
                   requests_session=azure.requests_session, clock=azure.now)


@pytest.fixture
def cli(run, session, monkeypatch):
    from azgpu.cli import options

    @contextmanager
    def bound(*args, **kwargs):
        yield session

    monkeypatch.setattr(options, "session_for", bound)
    return run
