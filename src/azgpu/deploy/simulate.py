"""--simulate: the real deploy path against azgpu.testing's fake Azure, with state kept in a file."""

from __future__ import annotations

import os
import time
from contextlib import contextmanager
from pathlib import Path

from .session import Session

STATE_ENV = "AZGPU_SIMULATE_STATE"
DEFAULT_LATENCY = 3.0
# The simulated subscription is one that was granted GPU quota: every example and README command
# fits (the largest, examples/nd-a100-v4.toml, is 150 x 96 = 14,400 vCPUs; the README's plan of
# 250 x ND96isr_H100_v5 is 24,000). A new subscription has 0 vCPUs in the GPU families and gets what
# a quota request asks for (facts sheet, section 4; Learn, "Troubleshoot quota errors": the message
# names the "(Minimum) New Limit Required"); 'provision simulate quota set' makes it smaller again.
SIMULATED_QUOTA = {"gpuFamily": 25000, "cores": 50000, "lowPriorityCores": 25000}


def state_file(explicit: str | None = None) -> Path:
    if explicit or os.environ.get(STATE_ENV):
        return Path(explicit or os.environ[STATE_ENV]).expanduser()
    from platformdirs import user_state_dir

    return Path(user_state_dir("azgpu")) / "simulate.json"


def simulated_azure(state: str | None = None, **kwargs):
    """The simulated subscription kept in the state file (a FakeAzure, not started)."""
    from ..testing import DEFAULT_SUBSCRIPTION, FakeAzure

    # FakeAzure makes the folder, under the state file's own checks (SIMULATE_STATE_INVALID).
    return FakeAzure(DEFAULT_SUBSCRIPTION, state_file=state_file(state), quota_limits=SIMULATED_QUOTA, **kwargs)


@contextmanager
def simulated_session(*, latency: float = DEFAULT_LATENCY, state: str | None = None, throttle: str | None = None):
    """A Session whose clients talk to the fake; every long-running operation takes `latency` seconds.
    throttle="azure" (`--simulate-throttle`): the fake answers 429 as Azure's documented limits would.

    With latency 0 the fake keeps virtual time (no real sleep at all), which is what tests use.
    The clients' transport can never open a connection (FakeAzure.requests_session), and on any
    exit, Ctrl-C included, the session's waits are cancelled before the fake stops, which waits for
    requests in flight: no request of a simulation can leave the process, whatever the timing.
    """
    from ..testing import DEFAULT_SUBSCRIPTION, FakeCredential

    real_time = latency > 0
    fake = simulated_azure(state, lro_seconds=latency if real_time else None, lro_polls=1,
                           clock=time.time if real_time else None, throttle=throttle)
    with fake:
        session = Session(DEFAULT_SUBSCRIPTION, FakeCredential(), polling_interval=1 if real_time else 0,
                          sleep=None if real_time else fake.sleep, requests_session=fake.requests_session,
                          simulated=True, clock=time.monotonic if real_time else fake.now)
        try:
            yield session
        except BaseException:
            session.cancel()  # pollers and workers stop waiting before the fake goes away
            raise
