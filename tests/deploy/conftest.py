"""Fixtures for the deploy tests: the real azure-mgmt clients against azgpu.testing.FakeAzure.

- `_no_real_sleep` (autouse): any time.sleep(seconds > 0), or a real wait of a Session
  (session.real_wait), fails the test, in any thread. The fake keeps a virtual clock and sessions
  wait through it, so nothing should ever sleep.
- `azure`: a FakeAzure (virtual clock, one poll per operation).
- `session`: an azgpu Session on the fake: FakeCredential, polling_interval=0, the fake's sleep, and
  the fake's requests session (no request can leave the process, even after the fake stops).
- `cli`: `run(*argv)` (from tests/conftest.py) with the deploy commands bound to `session`, so a
  test can inject faults and read `azure.requests` around a CLI call.
- `sim`: `run` for `--simulate --simulate-latency 0 --simulate-state TMP/state.json` commands.
"""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager

import pytest

from azgpu.deploy.session import Session
from azgpu.testing import FakeAzure, FakeCredential

_real_sleep = time.sleep


class SleepGuard:
    def __init__(self):
        self.calls: list[tuple[float, str]] = []

    def __call__(self, seconds: float) -> None:
        if seconds and seconds > 0:
            self.calls.append((seconds, threading.current_thread().name))
            raise AssertionError(f"time.sleep({seconds}) called in a deploy test: tests must not sleep")
        _real_sleep(0)


@pytest.fixture(autouse=True)
def _no_real_sleep(monkeypatch):
    from azgpu.deploy import session as session_module

    guard = SleepGuard()
    monkeypatch.setattr(time, "sleep", guard)

    def real_wait(event, seconds):
        guard(seconds)
        return event.is_set()

    monkeypatch.setattr(session_module, "real_wait", real_wait)
    yield guard
    # A sleep in a poller thread raises there and may be swallowed: fail the test anyway.
    assert not guard.calls, f"time.sleep called for real: {guard.calls}"


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
    """`provision ...` in-process with create/status/outputs/wait/destroy talking to `session`."""
    from azgpu.cli import options

    @contextmanager
    def bound(*args, **kwargs):
        yield session

    monkeypatch.setattr(options, "session_for", bound)
    return run


@pytest.fixture
def state_file(tmp_path):
    return tmp_path / "state.json"


@pytest.fixture
def sim(run, state_file):
    """`provision COMMAND ARGS --simulate ...`: every call a fresh main(), state kept in the file."""

    def _sim(command: str, *args):
        return run(command, *args, "--simulate", "--simulate-latency", "0", "--simulate-state", state_file)

    return _sim
