"""--simulate: the real deploy path against azgpu.testing's fake Azure, with state kept in a file."""

from __future__ import annotations

import os
import time
from contextlib import contextmanager
from pathlib import Path

from .session import Session

STATE_ENV = "AZGPU_SIMULATE_STATE"
DEFAULT_LATENCY = 3.0


def state_file(explicit: str | None = None) -> Path:
    if explicit or os.environ.get(STATE_ENV):
        return Path(explicit or os.environ[STATE_ENV]).expanduser()
    from platformdirs import user_state_dir

    return Path(user_state_dir("azgpu")) / "simulate.json"


@contextmanager
def simulated_session(*, latency: float = DEFAULT_LATENCY, state: str | None = None):
    """A Session whose clients talk to the fake; every long-running operation takes `latency` seconds.

    With latency 0 the fake keeps virtual time (no real sleep at all), which is what tests use.
    """
    from ..testing import DEFAULT_SUBSCRIPTION, FakeAzure, FakeCredential

    path = state_file(state)
    real_time = latency > 0
    fake = FakeAzure(DEFAULT_SUBSCRIPTION, lro_seconds=latency if real_time else None, lro_polls=1,
                     clock=time.time if real_time else None, state_file=path)
    with fake:
        yield Session(DEFAULT_SUBSCRIPTION, FakeCredential(), polling_interval=1 if real_time else 0,
                      sleep=time.sleep if real_time else fake.sleep)
