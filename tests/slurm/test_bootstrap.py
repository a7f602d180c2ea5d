"""The node bootstrap (azgpu/slurm/bootstrap.py): what resume sends, through which channel, and what the script
refuses. tests/slurm/test_slurmctld.py runs it for real under slurmctld on two Slurm versions."""

from __future__ import annotations

import base64
import json
import os
import socket
import threading
from contextlib import contextmanager
from pathlib import Path

import pytest
from slurm_support import cluster_file, fake_scontrol

from azgpu.errors import InputError
from azgpu.slurm import bootstrap
from azgpu.testing import DEFAULT_SUBSCRIPTION, FakeAzure, FakeCredential


class VMs:
    """The VMs' side for the fake, here without an operating system: each answers the bootstrap as the real
    script ends (its result line), or fails as told. Records what reached each VM."""

    def __init__(self, root: Path, fail: str = ""):
        self.fail = fail
        self.seen: list[dict] = []
        self.path = str(root / "vms.sock")
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(self.path)
        self.server.listen(8)
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def close(self) -> None:
        # shutdown wakes the thread blocked in accept(); a bare close would leave it accepting on whatever socket
        # reuses the descriptor number next (the next test's).
        try:
            self.server.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.server.close()
        self.thread.join(timeout=10)

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            with conn:
                data = b""
                while chunk := conn.recv(65536):
                    data += chunk
                request = json.loads(data)
                reply: dict = {}
                if request["op"] == "run" and "AZGPU_SLURM_NODE" not in request["env"]:
                    reply = {"stdout": "", "stderr": "", "rc": 0}  # the binding's script (deploy/nodes.py): exit 0
                elif request["op"] == "run":
                    self.seen.append(request)
                    env = request["env"]
                    if self.fail:
                        reply = {"stdout": "", "stderr": f"azgpu-bootstrap: ERROR: {self.fail}\n", "rc": 1}
                    else:
                        line = {"azgpu_bootstrap": 1, "node": env["AZGPU_SLURM_NODE"], "slurmd": "24.11.5",
                                "installed": ""}
                        reply = {"stdout": "azgpu-bootstrap: slurmd 24.11.5\n" + json.dumps(line) + "\n", "stderr": "",
                                 "rc": 0}
                conn.sendall(json.dumps(reply).encode())


@pytest.fixture
def world(tmp_path):
    key = os.urandom(1024)
    key_file = tmp_path / "munge.key"
    key_file.write_bytes(key)
    scontrol, calls = fake_scontrol(tmp_path)

    def make(fail: str = ""):
        from azgpu.cli.slurm import _spec
        from azgpu.deploy.session import Session
        from azgpu.slurm.power import Context, EventLog, Slurmctld

        fake = FakeAzure()
        fake.start()
        vms = VMs(tmp_path, fail)
        fake.attach_machines(vms.path)
        request, spec = _spec(str(cluster_file(tmp_path, nodes=8)), False)

        @contextmanager
        def open_session():
            yield Session(DEFAULT_SUBSCRIPTION, FakeCredential(), polling_interval=0, sleep=fake.sleep,
                          requests_session=fake.requests_session, simulated=True, clock=fake.now)

        join = bootstrap.JoinSettings("ctl.example:6817", "24.11.5", str(key_file))
        ctx = Context(request, spec, open_session, str(tmp_path / "map"), Slurmctld(str(scontrol)),
                      EventLog(str(tmp_path / "power.log")), join=join)
        return fake, vms, ctx

    made = []

    def build(fail: str = ""):
        made.append(make(fail))
        return made[-1]

    yield {"build": build, "key": key, "calls": calls, "log": tmp_path / "power.log"}
    for fake, vms, _ in made:
        vms.close()
        fake.stop()


def test_the_munge_key_travels_only_as_a_protected_parameter(world):
    from azgpu.slurm.power import resume

    fake, vms, ctx = world["build"]()
    assert resume(ctx, "demo-d000-[0001-0002]") == {"resumed": ["demo-d000-0001", "demo-d000-0002"], "failed": []}
    key, encoded = world["key"], base64.b64encode(world["key"]).decode()
    join = f"/runCommands/{bootstrap.RUN_COMMAND_NAME}"
    puts = [r for r in fake.requests if r.method == "PUT" and r.path.endswith(join)]
    assert len(puts) == 2
    for put in puts:
        props = put.body["properties"]
        assert props["protectedParameters"] == [{"name": "AZGPU_MUNGE_KEY", "value": encoded}]
        assert {p["name"]: p["value"] for p in props["parameters"]}["AZGPU_SLURM_CONF_SERVER"] == "ctl.example:6817"
        assert props["source"]["script"] == bootstrap.script(ctx.spec.size)
    # What each VM got: its name, the controller's release and the older ones it accepts, the key.
    names = sorted(s["env"]["AZGPU_SLURM_NODE"] for s in vms.seen)
    assert names == ["demo-d000-0001", "demo-d000-0002"]
    assert {s["env"]["AZGPU_SLURM_RELEASES"] for s in vms.seen} == {"24.11 24.05 23.11 23.02"}
    assert all(s["env"]["AZGPU_MUNGE_KEY"] == encoded for s in vms.seen)
    # Nowhere else: no other request, no answer Azure keeps (the run commands are deleted after), no state,
    # no log, nothing reported to slurmctld.
    others = [json.dumps(r.body) for r in fake.requests if r not in puts]
    assert not any(encoded in text for text in others)
    assert encoded not in json.dumps(fake._store.to_json())
    assert not [rid for rid in fake._store.resources if rid.lower().endswith(join.lower())]
    # The bootstrap runs after the binding: the name is recorded on the VM before slurmd starts with it.
    put_paths = [r.path for r in fake.requests if r.method == "PUT" and "/runCommands/" in r.path]
    for put in puts:
        instance = put.path.rsplit("/runCommands/", 1)[0]
        assert put_paths.index(f"{instance}/runCommands/azgpu-slurm-node") < put_paths.index(put.path)
    assert encoded not in world["log"].read_text() and encoded not in world["calls"].read_text()
    assert key not in world["log"].read_bytes()


def test_a_bootstrap_that_fails_leaves_the_names_down_with_why_and_replaces_nothing(world):
    from azgpu.slurm.power import resume

    fake, vms, ctx = world["build"](fail="slurmd 21.08.5 cannot join a Slurm 24.11 controller")
    result = resume(ctx, "demo-d000-[0001-0002]")
    assert result == {"resumed": [], "failed": ["demo-d000-0001", "demo-d000-0002"]}, world["log"].read_text()
    down = [line for line in world["calls"].read_text().splitlines() if "state=DOWN" in line]
    assert len(down) == 1 and "reason=azgpu SLURM_JOIN_FAILED: the bootstrap ended Failed (exit 1): azgpu-bootstrap: " \
                              "ERROR: slurmd 21.08.5 cannot join" in down[0]
    assert len(vms.seen) == 2, "a bootstrap that fails fails alike on a new VM: none is created for another try"
    vm_type = "Microsoft.Compute/virtualMachineScaleSets/virtualMachines"
    assert len(fake.resources(vm_type)) == 2, "the VMs stay for inspection"


def test_the_munge_key_file_is_checked_before_anything_is_sent(tmp_path):
    with pytest.raises(InputError) as err:
        bootstrap.read_key(str(tmp_path / "nope"))
    assert err.value.code == "SLURM_MUNGE_KEY" and "--munge-key" in err.value.remedy
    (tmp_path / "short").write_bytes(b"x" * 31)  # munged 0.5.15: "Keyfile must be at least 32 bytes"
    with pytest.raises(InputError) as err:
        bootstrap.read_key(str(tmp_path / "short"))
    assert "31 bytes" in err.value.message


@pytest.mark.parametrize("version, accepted", [
    ("22.05.8", ["22.05", "21.08", "20.11"]),
    ("slurm-wlm 24.11.5", ["24.11", "24.05", "23.11", "23.02"]),
    ("25.11.0", ["25.11", "25.05", "24.11", "24.05"]),
])
def test_a_controller_accepts_slurmd_of_its_compatibility_window(version, accepted):
    # doc/html/upgrades.shtml of slurm-24.11, "Compatibility Window"; quickstart_admin.shtml of slurm-22.05.
    assert bootstrap.releases(version) == accepted


@pytest.mark.parametrize("server", ["ctl", "ctl.example:6817", "10.0.0.1:6817,10.0.0.2"])
def test_controller_addresses_as_slurmd_takes_them(server):
    assert bootstrap.JoinSettings(server, "24.11").conf_server == server


# A TCP port is 1-65535: slurmd would refuse a fifth digit's 99999 only on the node, after the VM was paid for.
@pytest.mark.parametrize("server", ["", "ctl; reboot", "$(id)", "ctl:port", "ctl:99999", "ctl:0", "a:6817,b:70000"])
def test_anything_else_is_refused(server):
    with pytest.raises(InputError) as err:
        bootstrap.JoinSettings(server, "24.11")
    assert err.value.code == "INVALID_CONF_SERVER"


def test_the_script_never_names_the_key_but_by_its_variable():
    from azgpu.profiles import find_size

    text = bootstrap.script(find_size("Standard_ND96isr_H100_v5")[1])
    uses = [line.strip() for line in text.splitlines()
            if "AZGPU_MUNGE_KEY" in line and not line.lstrip().startswith("#")]
    # Checked, decoded through a builtin (no command line shows it), then unset before any daemon starts.
    assert uses == ['[ -n "${AZGPU_MUNGE_KEY:-}" ] || fail "no munge key (the protected parameter AZGPU_MUNGE_KEY)"',
                    """if ! printf '%s' "$AZGPU_MUNGE_KEY" | base64 -d >"$key_tmp" 2>/dev/null; then""",
                    "unset AZGPU_MUNGE_KEY"]
    assert text.index("unset AZGPU_MUNGE_KEY") < text.index('runuser -u munge -- "$munged_bin"')
    assert "set -x" not in text


@pytest.fixture
def vm(tmp_path_factory):
    """One machine of this host's image (Debian 12, Slurm 22.05), as a VM the bootstrap runs on."""
    from machines import Machine
    from slurm_cluster import skip_reason, unavailable

    reason = skip_reason("22.05")
    if reason:
        unavailable(reason)
    found = Machine("vm", Path("/"), tmp_path_factory.mktemp("bm"))
    try:
        yield found
    finally:
        found.stop()


def _bootstrap(vm, releases: str) -> object:
    from azgpu.profiles import find_size

    env = {"AZGPU_SLURM_NODE": "demo-d000-0001", "AZGPU_SLURM_CONF_SERVER": "ctl", "AZGPU_SLURM_RELEASES": releases,
           "AZGPU_NODE_CHECK_INTERVAL": "60", "AZGPU_MUNGE_KEY": base64.b64encode(os.urandom(64)).decode()}
    script = vm.path("/var/lib/waagent/script.sh")
    script.parent.mkdir(parents=True, exist_ok=True)
    script.write_text(bootstrap.script(find_size("Standard_ND96isr_H100_v5")[1]))
    return vm.run(["/bin/bash", "/var/lib/waagent/script.sh"], env=env, check=False, timeout=120)


def test_a_slurmd_the_controller_cannot_talk_to_is_refused_before_the_key_is_written(vm):
    before = vm.path("/etc/munge/munge.key").read_bytes()
    done = _bootstrap(vm, "25.11 25.05 24.11 24.05")  # a 25.11 controller; this image's slurmd is 22.05
    assert done.returncode == 1
    assert "ERROR: slurmd 22.05.8 cannot join a Slurm 25.11 controller (it accepts slurmd 25.11, 25.05, 24.11, " \
           "24.05)" in done.stderr
    assert vm.path("/etc/munge/munge.key").read_bytes() == before and "slurmd" not in vm.processes()


def test_an_image_without_slurm_installs_it_from_its_package_manager(vm):
    # The image lacks slurmd; apt-get (here, the package repository's stand-in) installs it.
    vm.run(["sh", "-c", "mkdir -p /opt/repo && mv /usr/sbin/slurmd /opt/repo/slurmd"])
    stub = vm.path("/usr/local/sbin/apt-get")
    stub.write_text("#!/bin/sh\necho \"$*\" >>/opt/repo/calls\n"
                    "case \"$*\" in *install*) cp /opt/repo/slurmd /usr/sbin/slurmd;; esac\n")
    stub.chmod(0o755)
    done = _bootstrap(vm, "24.11 24.05 23.11 23.02")
    assert vm.path("/opt/repo/calls").read_text().splitlines() == ["-q update", "-q -y install slurmd munge"]
    assert "installing slurmd and munge (apt-get)" in done.stdout
    assert done.returncode == 1 and "slurmd 22.05.8 cannot join a Slurm 24.11 controller" in done.stderr
    assert os.path.lexists("/usr/sbin/slurmd") and not os.path.lexists("/opt/repo"), "the host's own files changed"


def test_a_verdict_from_the_name_a_vm_carried_before_is_not_the_new_names(vm):
    """A rack's waiting VM (or one left for inspection) gets a new name after passing resume's health check: the
    background verdict it kept from before (here `failed`, never drained) must not drain the new name."""
    from azgpu.slurm import health_check

    verdict = vm.path(health_check.VERDICT_PATH)
    verdict.parent.mkdir(parents=True, exist_ok=True)
    verdict.write_text(json.dumps({"status": "failed", "finding": "gpu 3 lost", "reason": "azgpu gpu 3 lost",
                                   "checked": 1.0}))
    _bootstrap(vm, "22.05 21.08 20.11")  # no controller answers: slurmd fetches nothing, the bootstrap fails
    assert not verdict.exists()


def test_a_munge_key_slurmuser_cannot_read_creates_nothing_and_sets_the_names_down(world, tmp_path):
    """Debian's /etc/munge/munge.key is munge's alone (0400): read only after the VMs passed their health check,
    every node would fail to join and resume-fail delete them. Read first, nothing is created."""
    from dataclasses import replace

    from azgpu.slurm.power import resume

    fake, vms, ctx = world["build"]()
    ctx.join = replace(ctx.join, munge_key=str(tmp_path / "no-such-key"))
    assert resume(ctx, "demo-d000-[0001-0002]") == {"resumed": [], "failed": ["demo-d000-0001", "demo-d000-0002"]}
    assert not [r for r in fake.requests if r.method in ("PUT", "PATCH", "POST", "DELETE")]
    down = [line for line in world["calls"].read_text().splitlines() if "state=DOWN" in line]
    assert len(down) == 1 and "reason=azgpu SLURM_MUNGE_KEY: " in down[0]
    assert vms.seen == []
