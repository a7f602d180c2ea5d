"""Ctrl-C (a real SIGINT) during `provision create --simulate` and `destroy --simulate`.

A simulation must never reach the network, whatever the timing. Each test runs `provision` in a
subprocess whose name resolution sends every host, management.azure.com first, to a listener on
the loopback (a `sitecustomize` shim on PYTHONPATH: no root, no real DNS), delivers SIGINT at a
point of the deployment, and asserts: no connection reached the listener, the process exited within
a second of the signal with exit code 130, one INTERRUPTED line and no traceback. A re-run then
converges: nothing was lost. Real time is the point here, so these run as `slow` tests.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="POSIX signals")]

REPO = Path(__file__).resolve().parents[1]
SSH_KEY = REPO / "examples" / "demo_key.pub"
LATENCY = "1.5"  # seconds each simulated operation takes: long enough to interrupt it midway
EXIT_WITHIN = 1.0

SHIM = textwrap.dedent("""
    # Test shim: every name resolves to the test's loopback listener, so any connection is seen.
    import os
    import socket

    _port = int(os.environ["AZGPU_TEST_LISTENER_PORT"])
    _getaddrinfo = socket.getaddrinfo

    def _to_listener(host, port, *args, **kwargs):
        return _getaddrinfo("127.0.0.1", _port, *args, **kwargs)

    socket.getaddrinfo = _to_listener
""")


class Listener:
    """Stands in for management.azure.com on the loopback and records every connection."""

    def __init__(self):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.connections: list[tuple] = []
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self):
        while not self._done.is_set():
            try:
                conn, addr = self.sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.connections.append(addr)
            conn.close()

    def close(self):
        self._done.set()
        self._thread.join(2)
        self.sock.close()


class Run:
    """`provision ARGS` in a subprocess, its stderr read line by line as it comes."""

    def __init__(self, args: list[str], env: dict[str, str]):
        code = "import sys; from azgpu.cli import main; sys.exit(main())"  # what the console script runs
        self.proc = subprocess.Popen([sys.executable, "-c", code, *args], env=env, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        self.lines: list[str] = []
        self._seen = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self):
        for line in self.proc.stderr:
            with self._seen:
                self.lines.append(line)
                self._seen.notify_all()
        with self._seen:
            self.lines.append(None)  # end of stream
            self._seen.notify_all()

    def wait_for_line(self, text: str, timeout: float = 90) -> None:
        with self._seen:
            ok = self._seen.wait_for(lambda: any(line is None or text in line for line in self.lines), timeout)
        assert ok and any(line and text in line for line in self.lines), (text, self.stderr())

    def interrupt(self, times: int = 1) -> float:
        """Send SIGINT (twice 50 ms apart when times=2); seconds from the first one to the exit."""
        start = time.monotonic()
        self.proc.send_signal(signal.SIGINT)
        for _ in range(times - 1):
            threading.Event().wait(0.05)
            self.proc.send_signal(signal.SIGINT)
        self.proc.wait(timeout=30)
        took = time.monotonic() - start
        self._reader.join(10)
        return took

    def finish(self, timeout: float = 120) -> int:
        self.proc.wait(timeout=timeout)
        self._reader.join(10)
        return self.proc.returncode

    def stderr(self) -> str:
        return "".join(line for line in self.lines if line)


@pytest.fixture
def listener():
    server = Listener()
    yield server
    server.close()


@pytest.fixture
def env(tmp_path, listener):
    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / "sitecustomize.py").write_text(SHIM)
    out = {k: v for k, v in os.environ.items() if not k.startswith(("AZGPU_", "AZURE_"))}
    out.update(PYTHONPATH=str(shim), AZGPU_TEST_LISTENER_PORT=str(listener.port), HOME=str(tmp_path / "home"),
               XDG_CACHE_HOME=str(tmp_path / "cache"), AZGPU_SIMULATE_STATE=str(tmp_path / "state.json"))
    return out


def create_args(latency: str = LATENCY) -> list[str]:
    return ["create", "--profile", "nd-a100-v4", "-n", "c1", "-g", "rg1", "-l", "eastus", "--nodes", "2",
            "--ssh-key", str(SSH_KEY), "--simulate", "--simulate-latency", latency, "--verbose", "-o", "json"]


def wait_for_file(path: Path, run: Run, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert run.proc.poll() is None, run.stderr()
        assert time.monotonic() < deadline, f"{path} never appeared"
        threading.Event().wait(0.01)


def assert_interrupted_cleanly(run: Run, took: float, listener: Listener) -> None:
    err = run.stderr()
    assert run.proc.returncode == 130, err
    assert took < EXIT_WITHIN, f"exited {took:.2f} s after SIGINT"
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert [line for line in err.splitlines() if line.startswith("ERROR: ")] == [
        "ERROR: [INTERRUPTED] interrupted; a re-run continues where this one stopped"], err
    assert listener.connections == [], "a simulation reached the network"


def assert_rerun_converges(env: dict[str, str], listener: Listener) -> None:
    run = Run(create_args("0"), env)
    assert run.finish() == 0, run.stderr()
    result = json.loads(run.proc.stdout.read())
    assert {r["state"] for r in result["resources"]} <= {"succeeded", "exists"}
    assert listener.connections == []


# -- the listener really sees a leak (so the tests below could fail) -----------------------------------

def test_the_shim_sends_management_azure_com_to_the_listener(env, listener):
    code = ("import socket; s = socket.create_connection(('management.azure.com', 443), timeout=5); s.close()")
    subprocess.run([sys.executable, "-c", code], env=env, check=True, timeout=60)
    threading.Event().wait(0.3)  # let the listener's accept loop record it
    assert len(listener.connections) == 1


# -- create ----------------------------------------------------------------------------------------------

def test_ctrl_c_while_the_network_is_being_created(env, listener, tmp_path):
    run = Run(create_args(), env)
    wait_for_file(tmp_path / "state.json", run)  # the resource group exists: NSG and VNet are in flight
    took = run.interrupt()
    assert_interrupted_cleanly(run, took, listener)
    assert_rerun_converges(env, listener)


def test_ctrl_c_right_after_the_scale_set_put(env, listener):
    run = Run(create_args(), env)
    run.wait_for_line("c1-vnet (vnet): succeeded")  # the scale set's PUT goes out now
    took = run.interrupt()
    assert_interrupted_cleanly(run, took, listener)
    assert_rerun_converges(env, listener)


def test_ctrl_c_while_the_scale_set_is_polled(env, listener):
    run = Run(create_args(), env)
    run.wait_for_line("c1-vnet (vnet): succeeded")
    threading.Event().wait(0.7)  # midway through the scale set's operation: its poller waits Retry-After
    took = run.interrupt()
    assert_interrupted_cleanly(run, took, listener)
    assert_rerun_converges(env, listener)


def test_a_second_ctrl_c_prints_no_traceback_either(env, listener):
    run = Run(create_args(), env)
    run.wait_for_line("c1-vnet (vnet): succeeded")
    threading.Event().wait(0.3)
    took = run.interrupt(times=2)
    assert_interrupted_cleanly(run, took, listener)


# -- destroy ---------------------------------------------------------------------------------------------

def _created(env, listener) -> None:
    run = Run(create_args("0"), env)
    assert run.finish() == 0, run.stderr()


def destroy_args() -> list[str]:
    return ["destroy", "-n", "c1", "-g", "rg1", "--yes", "--simulate", "--simulate-latency", LATENCY, "--verbose"]


@pytest.mark.parametrize("after", [0.0, 0.7], ids=["at-the-delete", "while-deleting"])
def test_ctrl_c_during_destroy(env, listener, after):
    _created(env, listener)
    run = Run(destroy_args(), env)
    run.wait_for_line("c1-vmss000: deleting")
    if after:
        threading.Event().wait(after)
    took = run.interrupt()
    assert_interrupted_cleanly(run, took, listener)
    again = Run(["destroy", "-n", "c1", "-g", "rg1", "--yes", "--simulate", "--simulate-latency", "0"], env)
    assert again.finish() == 0, again.stderr()  # a re-run deletes what is left
    assert listener.connections == []
