"""Machines for the real-Slurm tests: the controller and every simulated VM, each in namespaces of its own.

A Machine is a root file system (the host's own, with Debian 12's Slurm 22.05, or a Debian 13 root
with Slurm 24.11 built by tools/slurm_test_root.py) seen through an overlay whose upper layer is a
tmpfs, in its own mount, network, UTS and PID namespaces: its own /etc/munge, /run, spool and logs,
its own host name, its own processes (killing its first process ends all of them, as deleting the VM
does), and nothing it writes reaches the host's files. The machines share one Ethernet segment: a
bridge in a network namespace of its own, holding nothing but their veth pairs, so packets go from
machine to machine and never leave this host (no route leads anywhere else).

Hypervisor plays Azure's side of the VMs for the fake (azgpu.testing.machines): when azgpu's managed
Run Command reaches a VM, it starts that VM's machine (host name and address as the fake gave them)
and runs exactly the script as root there, as RunCommandHandlerLinux runs it (named parameters as
environment variables, output to files); when Azure deletes a VM, its machine stops. The tests start
the controller's daemons themselves (the controller is the user's), never a node's.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import socket
import subprocess
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ISOLATION = ("unshare", "nsenter", "ip", "mount")
ROOTS = Path(os.environ.get("AZGPU_SLURM_ROOTS", "/var/cache/azgpu/slurm-roots"))
CONTROLLER_ADDRESS = "10.255.255.254"
PREFIX = 8  # every machine on one segment: the fake's subnets are 10.x, the controller is 10.255.255.254


def sbin(name: str) -> str:
    return shutil.which(name) or f"/usr/sbin/{name}"


def run_checked(argv: list[str], **kwargs) -> subprocess.CompletedProcess:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=kwargs.pop("timeout", 60), **kwargs)
    if done.returncode:
        raise AssertionError(f"{' '.join(argv)}: {done.stderr.strip() or done.stdout.strip()}")
    return done


def _children(pid: int) -> list[int]:
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


class Network:
    """A bridge in a network namespace of its own: the machines' only link."""

    def __init__(self):
        self.holder = subprocess.Popen([sbin("unshare"), "--net", "--", "sleep", "infinity"],
                                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                       stderr=subprocess.DEVNULL, start_new_session=True)
        mine = os.readlink("/proc/self/ns/net")
        end = time.monotonic() + 10
        while self._ns() in (None, mine):
            if self.holder.poll() is not None or time.monotonic() > end:
                self.close()
                raise AssertionError("cannot create the machines' network namespace (unshare --net)")
            time.sleep(0.05)
        self.links = 0
        self.ip("link", "add", "br0", "type", "bridge")
        self.ip("link", "set", "br0", "up")

    def _ns(self) -> str | None:
        try:
            return os.readlink(f"/proc/{self.holder.pid}/ns/net")
        except OSError:
            return None

    def ip(self, *argv: str) -> str:
        return run_checked([sbin("nsenter"), f"--net=/proc/{self.holder.pid}/ns/net", "--", sbin("ip"), *argv]).stdout

    def plug(self, pid: int, address: str) -> None:
        """A veth from the bridge into the network namespace of `pid`, as eth0 with `address`."""
        self.links += 1
        port = f"p{self.links}"
        self.ip("link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", str(pid))
        self.ip("link", "set", port, "master", "br0", "up")
        inside = [sbin("nsenter"), f"--net=/proc/{pid}/ns/net", "--", sbin("ip")]
        for argv in (["addr", "add", f"{address}/{PREFIX}", "dev", "eth0"], ["link", "set", "eth0", "up"],
                     ["link", "set", "lo", "up"]):
            run_checked(inside + argv)

    def interfaces(self) -> list[str]:
        return [line.split(":")[1].strip().split("@")[0] for line in self.ip("-o", "link", "show").splitlines()]

    def close(self) -> None:
        if self.holder.poll() is None:
            self.holder.kill()
        self.holder.wait(timeout=10)


_SETUP = r"""
set -e
M=$1 LOWER=$2 NAME=$3
shift 3
mount -t tmpfs -o mode=0755 azgpu-machine "$M"
mkdir "$M/upper" "$M/work" "$M/root"
mount -t overlay overlay -o "lowerdir=$LOWER,upperdir=$M/upper,workdir=$M/work" "$M/root"
R=$M/root
mount -t proc proc "$R/proc"
mount --rbind -o ro /sys "$R/sys" 2>/dev/null || mount --rbind /sys "$R/sys"
mount -t tmpfs -o mode=0755 dev "$R/dev"
for d in null zero full random urandom tty; do touch "$R/dev/$d"; mount --bind "/dev/$d" "$R/dev/$d"; done
mkdir -p "$R/dev/pts" "$R/dev/shm"
mount -t tmpfs -o mode=1777 shm "$R/dev/shm"
ln -s /proc/self/fd "$R/dev/fd"
mount -t tmpfs -o mode=0755 run "$R/run"
mount -t tmpfs -o mode=1777 tmp "$R/tmp"
while [ $# -gt 0 ]; do  # SOURCE:TARGET[:ro] binds (the test's own directory, the checkout)
    IFS=: read -r src dst mode <<<"$1"; shift
    mkdir -p "$R$dst"
    mount --bind "$src" "$R$dst"
    [ "$mode" = ro ] && mount -o remount,bind,ro "$R$dst"
done
# No name server: this host's may sit on an address the machines' segment claims (10.x), where a query
# would wait for its timeout. Names come from /etc/hosts, as the hypervisor (Azure's DNS) writes it.
rm -f "$R/etc/resolv.conf"
printf 'nameserver 127.0.0.1\noptions timeout:1 attempts:1\n' >"$R/etc/resolv.conf"
hostname "$NAME"
# "ready" is printed from inside the chroot: until then the process's root is still the host's, and a command
# entering it (nsenter --root) would change the host's own files.
exec chroot "$R" /bin/bash -c 'echo ready; exec >/dev/null; trap "" TERM; while :; do sleep 3600 & wait $!; done'
"""


class Machine:
    """A root file system in namespaces of its own; its first process is its init (kill it: all go)."""

    def __init__(self, name: str, image: Path, workdir: Path, *, binds: tuple[tuple[Path, Path, bool], ...] = ()):
        self.name = name
        self.image = image
        self.hardware: Path | None = None  # where the hypervisor presents this VM's simulated devices
        self.dir = workdir / name
        self.dir.mkdir(parents=True)
        (self.dir / "mnt").mkdir()
        specs = [f"{src}:{dst}:{'ro' if ro else 'rw'}" for src, dst, ro in binds]
        self.unshare = subprocess.Popen(
            [sbin("unshare"), "--mount", "--net", "--uts", "--pid", "--fork", "--propagation", "private", "--",
             "bash", "-c", _SETUP, "setup", str(self.dir / "mnt"), str(image), name, *specs],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=(self.dir / "setup.err").open("w"),
            start_new_session=True)
        ready, _, _ = select.select([self.unshare.stdout], [], [], 20)
        line = self.unshare.stdout.readline() if ready else b""
        self.unshare.stdout.close()
        if line != b"ready\n":
            self.stop()
            raise AssertionError(f"machine {name} did not start: {(self.dir / 'setup.err').read_text()}")
        kids = _children(self.unshare.pid)
        assert len(kids) == 1, f"machine {name}: expected one init process, found {kids}"
        self.pid = kids[0]
        assert os.readlink(f"/proc/{self.pid}/root") != "/", f"machine {name}: its init is not in its own root"

    def prefix(self) -> list[str]:
        """nsenter into every namespace and the root of this machine (never the host's: the init's root is
        checked each time, as its pid could be anyone's once it is gone)."""
        assert os.readlink(f"/proc/{self.pid}/root") != "/", f"machine {self.name}: pid {self.pid} has the host's root"
        return [sbin("nsenter"), "-t", str(self.pid), "--mount", "--net", "--uts", "--pid", "--root", "--wd", "--"]

    def path(self, inside: str) -> Path:
        """A file of this machine, as this host reaches it."""
        return Path(f"/proc/{self.pid}/root") / inside.lstrip("/")

    def run(self, argv: list[str], *, env: dict[str, str] | None = None, timeout: float = 60,
            check: bool = True, input: str | None = None) -> subprocess.CompletedProcess:
        environment = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME": "/root",
                       "LANG": "C.UTF-8", **(env or {})}
        # The environment reaches the process as nsenter's own (as the Run Command handler's reaches its
        # script): never on a command line, where /proc/PID/cmdline would show it.
        done = subprocess.run(self.prefix() + argv, env=environment, capture_output=True, text=True, timeout=timeout,
                              input=input)
        if check and done.returncode:
            raise AssertionError(f"{self.name}: {' '.join(argv)}: rc {done.returncode}\n{done.stdout}\n{done.stderr}")
        return done

    def start(self, argv: list[str], *, env: dict[str, str] | None = None, log: Path) -> subprocess.Popen:
        """A long-running process of this machine (the controller's daemons)."""
        environment = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME": "/root",
                       "LANG": "C.UTF-8", **(env or {})}
        return subprocess.Popen(self.prefix() + argv, env=environment, stdin=subprocess.DEVNULL, stdout=log.open("w"),
                                stderr=subprocess.STDOUT, start_new_session=True)

    def processes(self) -> list[str]:
        """The command names of this machine's processes."""
        done = self.run(["sh", "-c", "cat /proc/[0-9]*/comm 2>/dev/null"], check=False)
        return done.stdout.split()

    def running(self) -> bool:
        """Whether the machine's init still lives (while it does, so may every process of the machine)."""
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        try:
            state = next(line for line in Path(f"/proc/{self.pid}/status").read_text().splitlines()
                         if line.startswith("State:"))
        except (OSError, StopIteration):
            return False
        return "zombie" not in state

    def stop(self) -> None:
        # The machine's init first (SIGKILL from outside: the kernel ends its PID namespace, and every process in it,
        # with it), then unshare; killed the other way round, init would live on, reparented, with all its processes.
        for pid in {getattr(self, "pid", None), *_children(self.unshare.pid)} - {None}:
            try:
                os.kill(pid, 9)
            except ProcessLookupError:
                pass
        if self.unshare.poll() is None:
            self.unshare.kill()
        try:
            self.unshare.wait(timeout=20)
        except subprocess.TimeoutExpired:
            pass
        if self.unshare.stderr:
            self.unshare.stderr.close()


def present(board: Path, node: dict) -> None:
    """A node's simulated hardware as its node check sees it: the fake's own sandbox of the node (stub
    nvidia-smi, IMDS, KVP pool, sysfs ports, AzNHC), written into `board`."""
    from azgpu.testing.models.vm_actions import _hardware, _identity
    from azgpu.testing.node_sandbox import Sandbox

    for _ in range(50):  # emptied, not removed: a machine has it bind-mounted, and its node check may write there
        try:
            for item in board.iterdir() if board.exists() else ():
                shutil.rmtree(item) if item.is_dir() and not item.is_symlink() else item.unlink()
            break
        except OSError:  # a file the running check wrote meanwhile: empty it again
            time.sleep(0.1)
    box = Sandbox(board)
    _identity(box, node)
    _hardware(box, node)


class Hypervisor:
    """Azure's side of the simulated VMs for the fake (azgpu.testing.machines), on a UNIX socket."""

    HANDLER_DIR = "/var/lib/waagent/run-command-handler/download"

    def __init__(self, workdir: Path, image: Path, network: Network, *, devices: tuple[str, ...] = (),
                 hardware: bool = True, on_boot=None):
        self.workdir = workdir
        self.image = image
        self.network = network
        self.devices = devices  # device files every VM has (its GPUs, as gres.conf names them)
        self.hardware = hardware  # present each VM's simulated GPUs and ports to the node check
        self.on_boot = on_boot  # called with each new machine and its VM (the tests' hardware, if any)
        self.machines: dict[str, Machine] = {}  # by lower-cased VM id
        self.vms: dict[str, dict] = {}
        self.runs: list[dict] = []  # every run: vm, script, parameter names, rc (never the values)
        self.started: dict[str, int] = {}  # VM id -> the number of its last run's directory
        self.lock = threading.Lock()
        self.path = str(workdir / "hypervisor.sock")
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(self.path)
        os.chmod(self.path, 0o600)
        self.server.listen(32)
        self.errors: list[str] = []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        with conn:
            try:
                data = b""
                while chunk := conn.recv(65536):
                    data += chunk
                request = json.loads(data)
                if request["op"] == "run":
                    reply = self.run(request["vm"], request["script"], request["env"], float(request["timeout"]))
                elif request["op"] == "gone":
                    for vm_id in request["vms"]:
                        self.gone(vm_id)
                    reply = {}
                else:
                    raise ValueError(f"unknown request {request['op']!r}")
            except Exception as exc:  # the fake sees the failure, the test sees it in .errors
                self.errors.append(f"{type(exc).__name__}: {exc}")
                reply = {"stdout": "", "stderr": f"hypervisor: {exc}", "rc": 125}
            conn.sendall(json.dumps(reply).encode())

    def machine(self, vm: dict) -> Machine:
        key = vm["id"].lower()
        with self.lock:
            found = self.machines.get(key)
            if found is None or not found.running():
                number = len(list((self.workdir / "vms").glob("*"))) if (self.workdir / "vms").exists() else 0
                binds = ()
                if self.hardware:
                    board = self.workdir / "hardware" / str(number)
                    present(board, vm["node"])
                    binds = ((board, board, False),)
                found = Machine(vm["computer_name"], self.image, self.workdir / "vms" / str(number), binds=binds)
                if self.hardware:
                    found.hardware = board
                    # The node check's one seam for a node without devices (AZGPU_ROOT and PATH, as the fake's
                    # Run Command sandbox uses it), through the runner's environment file.
                    env = found.path("/etc/default/azgpu-node-check")
                    env.parent.mkdir(parents=True, exist_ok=True)
                    env.write_text(f"AZGPU_ROOT={board}\nPATH={board}/.azgpu-stubs:/usr/local/sbin:/usr/local/bin:"
                                   "/usr/sbin:/usr/bin:/sbin:/bin\n")
                self.network.plug(found.pid, vm["ip"])
                for device in self.devices:  # the VM's hardware: slurmd stats the files gres.conf names
                    found.path(device).touch()
                # Azure's DNS answers a VM's own name in its virtual network; here /etc/hosts does.
                with found.path("/etc/hosts").open("a") as hosts:
                    hosts.write(f"{vm['ip']} {vm['computer_name']}\n")
                self.machines[key] = found
                self.vms[key] = vm
                if self.on_boot:
                    self.on_boot(found, vm)
            return found

    def run(self, vm: dict, script: str, env: dict[str, str], timeout: float) -> dict:
        machine = self.machine(vm)
        with self.lock:  # a directory per run, as the handler's: two Run Commands of one VM may run at once
            number = self.started[vm["id"]] = self.started.get(vm["id"], -1) + 1
        where = f"{self.HANDLER_DIR}/{number}"
        directory = machine.path(where)
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "script.sh").write_text(script)
        # RunCommandHandlerLinux: /bin/bash -c script.sh in the download directory, stdout and stderr to files.
        done = machine.run(["/bin/bash", "-c", f"cd {where} && /bin/bash ./script.sh >stdout 2>stderr"], env=env,
                           timeout=timeout, check=False)
        out = (directory / "stdout").read_text() if (directory / "stdout").exists() else ""
        err = (directory / "stderr").read_text() if (directory / "stderr").exists() else done.stderr
        self.runs.append({"vm": vm["id"], "script": script, "parameters": sorted(env), "rc": done.returncode})
        return {"stdout": out, "stderr": err, "rc": done.returncode}

    def change_hardware(self, vm_id: str, node: dict, *, remove: tuple[str, ...] = ()) -> None:
        """The VM's hardware changed (a fault the fake now models); `remove`: what the image lacks, as paths
        of the node (/opt/azurehpc) or tool names (nvidia-smi)."""
        machine = self.machines[vm_id.lower()]
        present(machine.hardware, node)
        for item in remove:
            where = item.lstrip("/") if item.startswith("/") else f".azgpu-stubs/{item}"
            path = machine.hardware / where
            if path.is_dir():
                shutil.rmtree(path)
            else:
                path.unlink(missing_ok=True)

    def gone(self, vm_id: str) -> None:
        with self.lock:
            found = self.machines.pop(vm_id.lower(), None)
        if found is not None:
            found.stop()

    def close(self) -> None:
        try:  # wakes the thread blocked in accept() (a bare close would leave it on a reused descriptor)
            self.server.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.server.close()
        self.thread.join(timeout=10)
        for machine in list(self.machines.values()):
            machine.stop()
