"""Resume, suspend and resume-fail: what slurmctld's power-saving programs do to azgpu's scale sets.

Which VM carries which Slurm node name is a fact about the world, read back on every run from
Azure (a named Run Command kept on the instance: azgpu.deploy.nodes) and from slurmctld (the
NodeAddr of a node that is not powered down); the state directory is only a cache of it. So a lost
state directory, a second controller or a hand run from another directory finds the same
bindings, and a VM that carries a node slurmctld holds is never given to another name nor deleted
by a suspend of another name.

Resume grows the scale set that holds the requested names with `create` itself (its preflight,
quota check and capacity fallback), checks only the new instances with the health gate's node
check and its guards (a finding every new node shares stops the round; a finding that follows the
replacements stops it too), records each node that passed on its VM, then gives slurmctld its
address. Names it could not bring up are set DOWN with azgpu's code and remedy as the reason and,
where no VM is left for them, powered down at once: slurmctld then runs no ResumeFailProgram for
them (Slurm 22.05-24.11 power_save.c downs a node at ResumeTimeout only while it is POWERING_UP), so
the reason and an administrator's later `state=resume` stay as they are.

Every run reconciles the scale sets it touches: a failed grow's capacity goes back to the VMs there
are, and a VM that carries no name is taken by a name that needs one (after its health check) or
deleted. On vertical-connect sizes (ND GB200/GB300 v6: racks of 18 that Azure creates and deletes
only whole) nothing single is ever deleted: names are bound by rack (the names of one
topology/block slot share one measured rack), the rest of a rack waits, unnamed, for the next
names, and a rack goes, in one request, when no name is bound to it any more.

Everything runs under the cluster's lock, so concurrent calls on one controller serialise.
"""

from __future__ import annotations

import os
import re
import stat
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..deploy import CheckOptions
from ..errors import AzgpuError, InputError
from ..health.limits import MAX_ROUNDS
from ..hostlist import compress
from . import state
from .names import Domain, domains, expand, locate

REASON_LIMIT = 400  # characters of a DOWN reason (azgpu's code, the message, the remedy)
SCONTROL_WAITS = (2.0, 5.0)  # seconds between attempts of an `scontrol update` that failed
SHOW_LIMIT = 16 * 1024 * 1024  # bytes of `scontrol show node` read
IN_FLIGHT = {"creating", "updating", "deleting"}



class ResumeIncomplete(AzgpuError):
    """Some nodes did not come up (they are DOWN with the reason); exit 1, as a failed check does."""

    exit_code = 1
    default_code = "SLURM_RESUME_INCOMPLETE"


def _clean(text: str, limit: int | None = None) -> str:
    """One printable line: what Azure, a node or an argument said never breaks the log's format."""
    text = " ".join("".join(ch if ch.isprintable() else " " for ch in str(text)).split())
    return text if limit is None or len(text) <= limit else text[:limit - 3] + "..."


def reason_text(code: str, message: str, remedy: str = "") -> str:
    """A DOWN reason that keeps azgpu's code and remedy whole: the message is what gets shortened."""
    tail = f"; remedy: {_clean(remedy)}" if remedy else ""
    head = f"azgpu {code}: "
    room = max(40, REASON_LIMIT - len(head) - len(tail))
    return _clean(head + _clean(message, room) + tail, REASON_LIMIT + 200)


# ------------------------------------------------------------------------------------ the log


class EventLog:
    """One line per event: time, pid, command, hostlist, what happened. Appended to the log file (opened
    without following a link) and echoed to stderr unless stderr is that file already (an administrator's
    own redirection; the programs `slurm config` writes pass --log-file, since slurmctld discards what they
    print)."""

    def __init__(self, path: str | None, echo: Callable[[str], None] | None = None):
        self.path = path
        self.echo = echo
        self._fd = _open_log(path) if path else None
        self._same = False
        if self._fd is not None:
            try:
                mine, err = os.fstat(self._fd), os.fstat(2)
                self._same = (mine.st_dev, mine.st_ino) == (err.st_dev, err.st_ino)
            except OSError:
                pass

    def __call__(self, command: str, hostlist: str, message: str) -> None:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        line = f"{stamp} azgpu-slurm[{os.getpid()}] {command} {_clean(hostlist, 200)}: {_clean(message)}"
        if self._fd is not None:
            os.write(self._fd, (line + "\n").encode("utf-8", "replace"))
        if self.echo and not self._same:
            self.echo(line)

    def error(self, command: str, hostlist: str, exc: AzgpuError) -> None:
        """The final error and remedy, as the CLI prints them, in the log's own line format."""
        self(command, hostlist, f"ERROR: [{exc.code}] {exc.message}")
        if exc.remedy:
            self(command, hostlist, f"remedy: {exc.remedy}")


def _open_log(path: str) -> int:
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0), 0o640)
    except OSError as exc:
        import errno

        why = {errno.ELOOP: "it is a symbolic link, which azgpu does not follow",
               errno.ENOENT: "its directory does not exist", errno.EISDIR: "it is a directory"}.get(
            exc.errno, exc.strerror or str(exc))
        raise InputError(f"cannot write the log file '{path}': {why}", code="SLURM_LOG_FILE",
                         remedy="pass a --log-file in a directory the Slurm user owns (e.g. /var/log/slurm), "
                                "as a regular file or a path not yet there") from None
    if stat.S_ISDIR(os.fstat(fd).st_mode):
        os.close(fd)
        raise InputError(f"cannot write the log file '{path}': it is a directory", code="SLURM_LOG_FILE",
                         remedy="pass a file path as --log-file")
    return fd


# ------------------------------------------------------------------------------------ slurmctld


@dataclass(frozen=True)
class SlurmNode:
    """One node as `scontrol show node -o` prints it (src/api/node_info.c: NodeName=... NodeAddr=...
    NodeHostName=... State=BASE+FLAG... Reason=text [user@time])."""

    name: str
    state: str  # the base state: IDLE, DOWN, ALLOCATED, MIXED ...
    flags: frozenset[str]  # CLOUD, POWERED_DOWN, POWERING_UP, POWERING_DOWN, NOT_RESPONDING ...
    addr: str
    hostname: str
    reason: str

    @property
    def down(self) -> bool:
        return self.state == "DOWN"

    @property
    def address(self) -> str | None:
        """The VM address slurmctld holds for it, None while powered down or before resume gave one
        (slurmctld resets NodeAddr to the name when a CLOUD node powers down: slurm.conf(5), cloud_reg_addrs)."""
        if "POWERED_DOWN" in self.flags or not self.addr or self.addr == self.name:
            return None
        return self.addr


# The free text slurm_sprint_node_table (src/api/node_info.c) prints after every structured field, in this
# order: an administrator's Reason, Comment and Extra (Extra also from `slurmd --extra`), InstanceId/Type.
_FREE = (" Reason=", " Comment=", " Extra=", " InstanceId=", " InstanceType=", " ReservationName=")
_REASON = re.compile(r"^(?P<text>.*?)(?: \[[^\[\]@]*@[^\[\]]*\])?"
                     r"(?: (?:Comment|Extra|InstanceId|InstanceType|ReservationName)=.*)?$")


def parse_nodes(text: str) -> dict[str, SlurmNode]:
    """`scontrol show node -o` (one node a line) as SlurmNode by name; lines it cannot read are skipped.
    Fields are read only before the free text (a Comment or Extra of "State=DOWN NodeAddr=..." is text, not
    the node's state), each at its first occurrence."""
    out: dict[str, SlurmNode] = {}
    for line in text.splitlines():
        cut = min((i for i in (line.find(mark) for mark in _FREE) if i >= 0), default=len(line))
        head, free = line[:cut], line[cut:]
        fields: dict[str, str] = {}
        for f in head.split():
            if "=" in f:
                key, value = f.split("=", 1)
                fields.setdefault(key, value)
        name = fields.get("NodeName")
        if not name or "State" not in fields:
            continue
        base, *flags = fields["State"].split("+")
        reason = free[len(" Reason="):] if free.startswith(" Reason=") else ""
        match = _REASON.match(reason) if reason else None
        out[name] = SlurmNode(name, base.rstrip("*~#%$@!^-"), frozenset(flags), fields.get("NodeAddr", ""),
                              fields.get("NodeHostName", ""), (match["text"] if match else "").strip())
    return out


class Slurmctld:
    """`scontrol` (slurm.conf(5): a power-saving program reports through it). An update that fails is
    tried again (slurmctld may be busy or restarting); `show` answers None when slurmctld does not."""

    def __init__(self, scontrol: str = "scontrol", waits: tuple[float, ...] | None = None,
                 sleep: Callable[[float], None] | None = None):
        self.scontrol = scontrol
        self.waits = SCONTROL_WAITS if waits is None else waits
        self.sleep = sleep or time.sleep
        self.calls: list[list[str]] = []

    def _run(self, argv: list[str]) -> tuple[int, str]:
        self.calls.append(argv)
        try:
            done = subprocess.run(argv, capture_output=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return -1, str(exc)
        output = (done.stdout if done.returncode == 0 else (done.stderr or done.stdout))[:SHOW_LIMIT]
        return done.returncode, output.decode("utf-8", "replace")

    def update(self, nodes: str, **fields: str) -> None:
        argv = [self.scontrol, "update", f"nodename={nodes}", *(f"{k}={v}" for k, v in fields.items())]
        for attempt in range(len(self.waits) + 1):
            rc, output = self._run(argv)
            if rc == 0:
                return
            if attempt < len(self.waits):
                self.sleep(self.waits[attempt])
        raise InputError(f"'{_clean(' '.join(argv[1:]), 300)}' failed {len(self.waits) + 1} times: "
                         f"{_clean(output, 300)}", code="SCONTROL_FAILED",
                         remedy="check that slurmctld runs ('scontrol ping') and knows these nodes; where scontrol "
                                "is not found, pass its path, e.g. --scontrol /usr/bin/scontrol")

    def show(self, hostlist: str) -> dict[str, SlurmNode] | None:
        rc, output = self._run([self.scontrol, "show", "node", "-o", hostlist])
        return parse_nodes(output) if rc == 0 else None


# ------------------------------------------------------------------------------------ the context


@dataclass
class Context:
    request: Any  # azgpu.request.Request of the cluster file
    spec: Any  # its validated Spec (the most nodes per scale set)
    open_session: Callable[[], Any]  # a context manager giving a Session
    state_dir: str
    slurm: Slurmctld
    log: EventLog
    zones: list[str] = field(default_factory=list)
    fallback_locations: list[str] = field(default_factory=list)
    max_rounds: int = MAX_ROUNDS
    node_check: CheckOptions = CheckOptions()
    join: Any = None  # azgpu.slurm.bootstrap.JoinSettings: start slurmd on each node that passed (None: leave it)
    price: Callable[[str, str], Any] | None = None  # (size, location) -> pricing.Price

    @property
    def cluster(self) -> str:
        return self.spec.names.cluster

    @property
    def resource_group(self) -> str:
        return self.request.resource_group

    @property
    def domains(self) -> list[Domain]:
        return domains(self.spec)


def _as_error(exc: BaseException, doing: str) -> AzgpuError:
    if isinstance(exc, AzgpuError):
        return exc
    if isinstance(exc, RecursionError):  # what a node sent was nested too deep to read
        return AzgpuError(f"{doing}: input nested too deeply to read", code="NODE_INPUT_INVALID",
                          remedy="see the power log; the node's answer was not read")
    from ..deploy import to_azure_error

    return to_azure_error(exc, doing)


# ------------------------------------------------------------------------------------ one scale set


@dataclass
class _Set:
    """A domain's scale set as this run sees it."""

    domain: Domain
    info: dict[str, Any] | None  # deploy.cluster_nodes' entry; None before the scale set exists
    nodes: dict[str, dict[str, Any]] = field(default_factory=dict)  # instance id -> node
    bound: dict[str, str] = field(default_factory=dict)  # instance id -> the name it carries
    inspect: set[str] = field(default_factory=set)  # instance ids left for inspection (bound or not)
    held: dict[str, str] = field(default_factory=dict)  # instance id -> why nothing may touch it
    per_rack: int | None = None  # VMs per vertical-connect rack (the profile's), None elsewhere

    @property
    def name(self) -> str:
        return self.domain.scale_set


    def vms_of(self, name: str) -> list[str]:
        return sorted((i for i, n in self.bound.items() if n == name), key=_order)

    def settled(self, instance: str) -> bool:
        return str(self.nodes[instance].get("provisioning_state") or "").lower() not in IN_FLIGHT

    def unnamed(self) -> list[str]:
        """Instances that carry no name and that nothing holds, fresh ones before those left for inspection."""
        found = [i for i in self.nodes if i not in self.bound and i not in self.held and self.settled(i)]
        return sorted(found, key=lambda i: (i in self.inspect, _order(i)))


def _order(instance: str) -> int:
    return int(instance) if instance.isdigit() else 0


class _Run:
    """One program run: the session, the cache, slurmctld's view, the scale sets as read."""

    def __init__(self, ctx: Context, session, command: str, hostlist: str, indexes: list[int]):
        self.ctx, self.session, self.command, self.hostlist = ctx, session, command, hostlist
        self.data = state.load(ctx.state_dir, ctx.cluster)
        every = compress(n for i in indexes for n in ctx.domains[i].names)
        self.view = ctx.slurm.show(every)
        if self.view is None:
            self.log("slurmctld did not answer 'scontrol show node': VMs that carry no name in Azure are neither "
                     "taken nor deleted until it does")
        self.sets: dict[int, _Set] = {}
        self.given: set[str] = set()  # names slurmctld was given an address for in this run
        # Resume brings its domains up in threads (one each, _resume_domains): the state file is written by one
        # at a time, and a scale set's size changes by one at a time (_serially).
        self._saving = threading.Lock()
        self._serial: Any = None  # a one-worker pool while domains run in parallel
        self._in_serial = threading.local()

    def log(self, message: str) -> None:
        self.ctx.log(self.command, self.hostlist, message)

    def save(self) -> None:
        """The cache as it is now, written whole. Each domain's thread changes only its own names' and
        instances' entries, and replaces an entry rather than editing it (but for `domain`, one key): a copy
        of each level (one C-level dict copy, which no thread switch splits) is a state that existed."""
        with self._saving:
            copy = {key: {k: dict(v) if isinstance(v, dict) else v for k, v in list(value.items())}
                    if isinstance(value, dict) else value for key, value in list(self.data.items())}
            state.save(self.ctx.state_dir, self.ctx.cluster, copy)

    def serially(self, fn: Callable[..., Any], *args: Any) -> Any:
        """fn(*args), one at a time across the domains' threads: a change of a scale set's size (a grow
        through create, which writes every scale set's model of the cluster and reads the others' sizes
        from this run; a deletion; a capacity set back). One grow computing another domain's size while that
        domain deletes could otherwise put the deleted VMs back. The wait is a Future's (which
        azgpu.testing's timeline sees), not a lock's."""
        if self._serial is None or getattr(self._in_serial, "on", False):
            return fn(*args)

        def one(*a: Any) -> Any:
            self._in_serial.on = True
            try:
                return fn(*a)
            finally:
                self._in_serial.on = False

        return self._serial.submit(one, *args).result()

    # ---------------------------------------------------------------- reading

    def listing(self, index: int) -> list[dict[str, Any]]:
        """deploy.cluster_nodes' entry of the domain's scale set ([] before it exists)."""
        from ..deploy import cluster_nodes

        return cluster_nodes(self.session, self.ctx.cluster, self.ctx.resource_group,
                             racks=bool(self.ctx.spec.profile.rack_size), only=[self.ctx.domains[index].scale_set])

    def load(self, index: int, verify: list[str] = (), listed: list[dict[str, Any]] | None = None) -> _Set:
        """Read the domain's scale set and its bindings: the cache where it matches what Azure lists, Azure's
        own record for every instance the cache does not know and for the names this run acts on
        (`verify`), and slurmctld's addresses. `listed`: the scale set as listing() read it just now."""
        from ..deploy import node_bindings

        domain = self.ctx.domains[index]
        per_rack = self.ctx.spec.profile.rack_size
        listed = self.listing(index) if listed is None else listed
        s = _Set(domain, listed[0] if listed else None, per_rack=per_rack)
        s.nodes = {n["instance_id"]: n for n in (s.info or {}).get("nodes", [])}
        names = set(domain.names)
        for name, entry in list(self.data["nodes"].items()):
            if entry["scale_set"] != s.name:
                continue
            vm = s.nodes.get(entry["instance_id"])
            moved = entry["vm_id"] and vm is not None and vm.get("vm_id") and entry["vm_id"] != vm["vm_id"]
            if vm is None or moved or name not in names:
                del self.data["nodes"][name]
                self.log(f"{name}: its VM {entry['hostname']} is gone")
                continue
            s.bound[entry["instance_id"]] = name
            if entry["status"] == state.INSPECT:
                s.inspect.add(entry["instance_id"])
        for where, mark in list(self.data["inspect"].items()):
            vmss, _, instance = where.partition("/")
            if vmss != s.name:
                continue
            vm = s.nodes.get(instance)
            if vm is None or (mark["vm_id"] and vm.get("vm_id") and mark["vm_id"] != vm["vm_id"]):
                del self.data["inspect"][where]
            else:
                s.inspect.add(instance)
        acted = {i for name in verify for i in s.vms_of(name) if i not in s.inspect}
        ask = sorted({i for i in s.nodes if i not in s.bound and s.settled(i)} | acted, key=_order)
        if ask and s.info:
            found = node_bindings(self.session, self.ctx.resource_group, s.name, ask, self.ctx.cluster)
            for instance, name in found.items():
                cached = s.bound.get(instance)
                if name is not None and name not in names:
                    name = None  # another domain's name on this scale set: not one azgpu gave
                if cached is not None and name != cached:
                    entry = self.data["nodes"].get(cached, {})
                    if name is None and entry.get("vm_id") is None:
                        self._record(s, instance, cached, repair=True)  # a binding from before Azure kept them
                        continue
                    self.log(f"{cached}: Azure says instance {instance} of {s.name} carries "
                             f"{name or 'no name'}; the cache was stale")
                    self.data["nodes"].pop(cached, None)
                    del s.bound[instance]
                if name is not None and instance not in s.bound:
                    s.bound[instance] = name
                    self._cache(s, instance, name, state.UP)
        self._claims(s)
        self.sets[index] = s
        return s

    def _claims(self, s: _Set) -> None:
        """slurmctld's addresses: a VM whose address a node holds carries that node. Where Azure keeps no
        name for it, the binding is recorded again; where Azure names another, nothing touches it."""
        if self.view is None:
            return
        by_ip = {n["ip"]: i for i, n in s.nodes.items() if n.get("ip")}
        by_host = {n["hostname"]: i for i, n in s.nodes.items() if n.get("hostname")}
        for name in s.domain.names:
            node = self.view.get(name)
            if not node or not node.address:
                continue
            # NodeAddr and NodeHostName: what resume gave, or (cloud_reg_addrs) what the node registered from
            instance = by_ip.get(node.address) or (by_host.get(node.hostname) if node.hostname != name else None)
            if instance is None:
                continue
            carried = s.bound.get(instance)
            if carried is None:
                self.log(f"{name}: slurmctld holds {node.address}, instance {instance} of {s.name}, which Azure "
                         "keeps no name for: recorded")
                self._record(s, instance, name, repair=True)
            elif carried != name:
                s.held[instance] = (f"Azure says it carries {carried}, slurmctld gives its address to {name}: "
                                    "neither deleted nor given to another name")
                self.log(f"instance {instance} of {s.name}: {s.held[instance]}")

    # ---------------------------------------------------------------- bindings

    def _cache(self, s: _Set, instance: str, name: str, status: str) -> None:
        vm = s.nodes[instance]
        self.data["nodes"][name] = {"scale_set": s.name, "instance_id": instance, "vm_id": vm.get("vm_id"),
                                    "hostname": vm["hostname"], "ip": vm.get("ip") or "", "status": status}

    def bind_all(self, s: _Set, pairs: list[tuple[str, str]]) -> dict[str, BaseException]:
        """Azure's record on each of these VMs ((instance, name) pairs) at once, as the health check sends
        its Run Commands: each binding is a Run Command PUT of some seconds, so one after another they took
        ten seconds a node (hours at a thousand) while the session's pace keeps them under Azure's buckets.
        instance -> the error of each that failed; the cache is _record's (bound=True), in the caller's order."""
        from concurrent.futures import ThreadPoolExecutor

        from ..deploy import bind_node
        from ..health.limits import PARALLEL

        def bind(pair: tuple[str, str]) -> BaseException | None:
            try:
                bind_node(self.session, self.ctx.resource_group, s.name, pair[0], location=s.info["location"],
                          cluster=self.ctx.cluster, name=pair[1])
            except AzgpuError as exc:
                return exc
            return None

        if not pairs:
            return {}
        with ThreadPoolExecutor(max_workers=min(PARALLEL, len(pairs))) as pool:
            errors = dict(zip((i for i, _ in pairs), pool.map(bind, pairs), strict=True))
        return {i: e for i, e in errors.items() if e is not None}

    def _record(self, s: _Set, instance: str, name: str, *, repair: bool = False, bound: bool = False,
                save: bool = True) -> None:
        """Bind: Azure's record on the VM first, then the cache. `repair`: a failure is logged, not raised.
        `bound`: Azure's record was made already (bind_all). save=False: the caller saves (once for a round)."""
        from ..deploy import bind_node

        try:
            if not bound:
                bind_node(self.session, self.ctx.resource_group, s.name, instance, location=s.info["location"],
                          cluster=self.ctx.cluster, name=name)
        except AzgpuError as exc:
            if not repair:
                raise
            self.log(f"{name}: could not record the binding on instance {instance}: [{exc.code}] {exc.message}")
        s.bound[instance] = name
        s.inspect.discard(instance)
        self.data["inspect"].pop(f"{s.name}/{instance}", None)
        self._cache(s, instance, name, state.UP)
        if save:
            self.save()

    def unbind(self, s: _Set, instances: list[str], *, inspect: str | None = None, in_azure: bool = True) -> None:
        """The VMs carry no name any more (they wait in their rack); `inspect`: marked as left for inspection.
        in_azure=False: for VMs deleted next, whose binding goes with them."""
        from ..deploy import unbind_node

        for instance in instances:
            name = s.bound.pop(instance, None)
            if name is not None and in_azure:
                unbind_node(self.session, self.ctx.resource_group, s.name, instance)
            if name and self.data["nodes"].get(name, {}).get("instance_id") == instance:
                del self.data["nodes"][name]
            if inspect or instance in s.inspect:
                self.data["inspect"][f"{s.name}/{instance}"] = {"vm_id": s.nodes[instance].get("vm_id"),
                                                                "reason": inspect or "left for inspection"}
                s.inspect.add(instance)
        self.save()

    def give_address(self, name: str, vm: dict[str, Any]) -> None:
        self.ctx.slurm.update(name, nodeaddr=vm["ip"], nodehostname=vm["hostname"])

    # ---------------------------------------------------------------- changes

    def refresh(self, index: int) -> _Set:
        return self.load(index)

    def delete(self, s: _Set, instances: list[str], why: str) -> None:
        """Delete these instances of the scale set in one request; never one that something holds."""
        instances = [i for i in instances if i not in s.held]
        if instances:
            self.serially(self._delete, s, instances, why)

    def _delete(self, s: _Set, instances: list[str], why: str) -> None:
        from ..deploy import delete_instances

        self.log(f"deleting {len(instances)} instance(s) of {s.name} ({why}): "
                 + ", ".join(f"{i}={s.nodes[i]['hostname']}" for i in sorted(instances, key=_order)))
        delete_instances(self.session, self.ctx.resource_group, s.name, instances)
        for instance in instances:
            name = s.bound.pop(instance, None)
            if name and self.data["nodes"].get(name, {}).get("instance_id") == instance:
                del self.data["nodes"][name]
            self.data["inspect"].pop(f"{s.name}/{instance}", None)
            s.nodes.pop(instance, None)
            s.inspect.discard(instance)
        self.save()

    def fix_capacity(self, s: _Set) -> None:
        """A grow Azure could not finish (AllocationFailed) leaves sku.capacity above the VMs there are, and
        Azure would place the rest later, carrying no name: the capacity goes back to the VMs there are."""
        self.serially(self._fix_capacity, s)

    def _fix_capacity(self, s: _Set) -> None:
        from ..deploy import set_capacity

        info = s.info
        if not info or info["capacity"] <= len(s.nodes):
            return
        if str(info.get("provisioning_state") or "").lower() in IN_FLIGHT:
            self.log(f"{s.name} is being changed ({info['provisioning_state']}): its capacity {info['capacity']} "
                     f"is left above its {len(s.nodes)} VM(s) for now")
            return
        self.log(f"{s.name}: capacity {info['capacity']} but {len(s.nodes)} VM(s) (a grow that did not finish): "
                 f"setting it to {len(s.nodes)}, so that no VM comes later without a name")
        try:
            set_capacity(self.session, self.ctx.resource_group, s.name, len(s.nodes))
            info["capacity"] = len(s.nodes)
        except AzgpuError as exc:
            self.log(f"{s.name}: could not set the capacity: [{exc.code}] {exc.message}")

    def reconcile(self, s: _Set) -> None:
        """No VM without a name: what carries none is deleted (on vertical-connect sizes: whole racks with no
        name bound), unless slurmctld could not say which VMs carry its nodes."""
        if s.info is None:
            return
        self.fix_capacity(s)
        unnamed = s.unnamed()
        if not unnamed:
            return
        if self.view is None:
            self.log(f"{len(unnamed)} VM(s) of {s.name} carry no name in Azure; slurmctld did not answer, so "
                     "they stay until a run that it answers")
            return
        if not s.per_rack:
            self.delete(s, unnamed, "they carry no Slurm name")
            return
        free_racks, waiting = [], 0
        for rack in self.racks(s):
            members = rack["members"]
            if any(i in s.bound or i in s.held for i in members):
                waiting += sum(1 for i in members if i not in s.bound)
                continue
            if len(members) % s.per_rack:
                self.log(f"rack {rack['name']} of {s.name} has {len(members)} VM(s), not a whole rack: not deleted "
                         "(Azure deletes vertical-connect VMs only by whole racks)")
                continue
            free_racks.append(rack)
        if free_racks:
            self.delete(s, [i for r in free_racks for i in r["members"]],
                        f"{len(free_racks)} whole rack(s) with no name bound")
        if waiting:
            self.log(f"{waiting} VM(s) of {s.name} wait unnamed in racks that still carry named nodes"
                     + self.cost(s, waiting))

    def racks(self, s: _Set, fabrics: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        """The scale set's racks (azgpu.racks: the nodes' measured NVLink domain where known, Azure's interconnect
        subgroup, else instance order), each with its members' instance ids."""
        from ..racks import group

        nodes = [s.nodes[i] for i in sorted(s.nodes, key=_order)]
        signals = {n["hostname"]: {"subgroup": n.get("subgroup"), "block": n.get("block")} for n in nodes}
        found = group(self.ctx.cluster, [{"scale_set": s.name, "nodes": nodes}], signals, s.per_rack,
                      fabrics=fabrics or {})
        by_host = {n["hostname"]: n["instance_id"] for n in nodes}
        return [{**r, "members": [by_host[h] for h in r["nodes"]]} for r in found]

    def cost(self, s: _Set, count: int) -> str:
        """'; they cost 12.34 USD/h (Retail Prices API)' for `count` VMs of the scale set, '' when unknown."""
        if not self.ctx.price or not s.info:
            return ""
        try:
            price = self.ctx.price(s.info["size"], s.info["location"])
        except Exception:  # a price is information, never a failure
            return ""
        if getattr(price, "per_hour", None) is None:
            return f"; their price is not known ({_clean(getattr(price, 'reason', '') or 'no price', 120)})"
        return f"; they cost {price.per_hour * count:.2f} {price.currency}/h ({count} x {s.info['size']})"


# ------------------------------------------------------------------------------------ resume


def resume(ctx: Context, hostlist: str) -> dict[str, Any]:
    """Bring up the named nodes; returns {"resumed": [...], "failed": [...]}."""
    wanted = locate(ctx.domains, expand(hostlist))
    ctx.log("resume", hostlist, f"requested {sum(map(len, wanted.values()))} node(s) in "
            + ", ".join(ctx.domains[i].scale_set for i in wanted))
    resumed: list[str] = []
    failed: dict[str, str] = {}
    with state.locked(ctx.state_dir, ctx.cluster), ctx.open_session() as session:
        run = _Run(ctx, session, "resume", hostlist, list(wanted))
        unusable = _join_problem(ctx)
        if unusable is not None:  # no node could join: nothing is created, the names go DOWN with why
            ctx.log.error("resume", hostlist, unusable)
            failed = {n: reason_text(unusable.code, unusable.message, unusable.remedy)
                      for names in wanted.values() for n in names}
            wanted = {}
        for done, left in _resume_domains(run, wanted):
            resumed += done
            failed.update(left)
        if failed:
            _set_down(run, failed)
    return {"resumed": resumed, "failed": sorted(failed)}


def _resume_domains(run: _Run, wanted: dict[int, list[str]]) -> list[tuple[list[str], dict[str, str]]]:
    """Each domain's (resumed, failed), in the domains' order. First what each domain has (its names already up
    get their address again), then one create that grows every domain short of VMs at once, then each domain's
    check, binding and reconcile in a thread of its own: one domain after another took the sum of their
    creations and checks where Azure runs them side by side (a resume of 1,000 nodes in 10 scale sets took
    5.7 times the time Azure's limits allow, benchmarks/scale_worker.py)."""
    results: dict[int, tuple[list[str], dict[str, str]]] = {}
    prepared: dict[int, tuple[list[str], dict[str, str], list[str]]] = {}
    for index, names in wanted.items():
        try:
            prepared[index] = _prepare(run, index, names)
        except Exception as exc:
            results[index] = _domain_failed(run, index, names, exc)
    short = {}
    for index, (_, _, todo) in prepared.items():
        target = _short_of(run, index, todo)
        if target is not None:
            short[index] = target
    together = len(short) > 1  # one domain short grows in its own bring-up, exactly as before
    if together:
        _grow_together(run, short)

    def finish(index: int) -> tuple[list[str], dict[str, str]]:
        try:
            checked = _fresh_checked(run, index) if together and index in short else {}
            return _finish(run, index, *prepared[index], checked)
        except Exception as exc:
            return _domain_failed(run, index, wanted[index], exc)

    if len(prepared) > 1:
        from concurrent.futures import ThreadPoolExecutor

        run._serial = ThreadPoolExecutor(max_workers=1)
        try:
            with ThreadPoolExecutor(max_workers=len(prepared)) as pool:
                results.update(zip(prepared, pool.map(finish, prepared), strict=True))
        finally:
            run._serial.shutdown()
            run._serial = None
    else:
        results.update((index, finish(index)) for index in prepared)
    return [results[index] for index in wanted if index in results]


def _fresh_checked(run: _Run, index: int) -> dict[str, Any]:
    """After the grow: the domain read again (the VMs the create added, and whether each carries a name in
    Azure, one read a VM) while the new VMs' health check runs, as the two draw on different buckets of
    Azure's (Resource Manager's reads, Run Commands' writes): one after the other the reads held the check
    back some 30 s at 1,000 nodes. instance id -> its NodeResult, for the bring-up's first round (which uses
    only VMs that carry no name). On rack sizes the racks' own checks run instead: {}."""
    from concurrent.futures import ThreadPoolExecutor

    before = run.sets[index]
    listed = run.listing(index)
    fresh = [n["instance_id"] for n in (listed[0]["nodes"] if listed else []) if n["instance_id"] not in before.nodes]
    if before.per_rack or not fresh:
        run.load(index, listed=listed)
        return {}
    with ThreadPoolExecutor(max_workers=1) as pool:
        loading: list[Any] = []

        def read(_count: int) -> None:  # once the check's own reads are done: its Run Commands wait for none
            loading.append(pool.submit(run.load, index, (), listed))

        try:
            checked = _check(run, _Set(before.domain, listed[0], per_rack=before.per_rack), fresh, on_start=read)
        finally:
            if not loading:
                read(0)
            loading[0].result()
    return checked


def _domain_failed(run: _Run, index: int, names: list[str], exc: BaseException) -> tuple[list[str], dict[str, str]]:
    """Any failure ends on the DOWN path, with its code and remedy; the names already up stay up."""
    ctx = run.ctx
    err = _as_error(exc, f"resuming {compress(names)}")
    ctx.log.error("resume", run.hostlist, err)
    up = run.data["nodes"]
    done = [n for n in names if up.get(n, {}).get("status") == state.UP and n in run.given]
    left = {n: reason_text(err.code, err.message, err.remedy) for n in names if n not in done}
    try:  # a failed grow must not leave capacity, or VMs, without names
        s = run.load(index)
        run.reconcile(s)
    except Exception as again:  # the next run reconciles
        ctx.log("resume", run.hostlist, f"could not reconcile {ctx.domains[index].scale_set}: "
                                        f"{_as_error(again, 'reconciling').message}")
    return done, left


def _join_problem(ctx: Context) -> AzgpuError | None:
    """Why no node could join (the munge key SlurmUser cannot read, or that is no key), found before a VM is
    created for them: the bootstrap reads the key only after the VMs passed their health check."""
    if ctx.join is None:
        return None
    from .bootstrap import read_key

    try:
        read_key(ctx.join.munge_key)
    except InputError as exc:
        return exc
    return None


def _set_down(run: _Run, failed: dict[str, str]) -> None:
    """Record why, then tell slurmctld: DOWN with azgpu's reason, and power down the names no VM is left for
    (so that slurmctld does not reach ResumeTimeout for them, which would replace the reason and undo an
    administrator's `state=resume`). Names whose VMs are left for inspection go on to ResumeFailProgram."""
    now = time.time()
    for name, why in failed.items():
        run.data["failed"][name] = {"reason": why, "at": now}
    run.save()
    by_reason: dict[str, list[str]] = {}
    for name, why in failed.items():
        by_reason.setdefault(why, []).append(name)
    with_vm = {n for n, e in run.data["nodes"].items()}
    for why, names in by_reason.items():
        hosts = compress(names)
        run.log(f"setting DOWN {hosts}: {why}")
        try:
            run.ctx.slurm.update(hosts, state="DOWN", reason=why)
        except InputError as exc:
            run.log(f"could not set {hosts} DOWN ([{exc.code}] {exc.message}); resume-fail records the reason "
                    "once slurmctld reaches ResumeTimeout")
            continue
        gone = [n for n in names if n not in with_vm]
        if gone:
            try:
                run.ctx.slurm.update(compress(gone), state="POWER_DOWN")
            except InputError as exc:
                run.log(f"could not power down {compress(gone)}: [{exc.code}] {exc.message}")


def _prepare(run: _Run, index: int, names: list[str]) -> tuple[list[str], dict[str, str], list[str]]:
    """The domain as it is: (names already up, given their address again; names waiting for their VM, with
    why; names to bring up)."""
    s = run.load(index, verify=names)
    run.fix_capacity(s)
    done, todo = [], []
    waiting: dict[str, str] = {}
    for name in names:
        vms = s.vms_of(name)
        carried = [i for i in vms if i not in s.inspect]
        ready = [i for i in carried if s.settled(i) and s.nodes[i].get("ip")]
        if carried and not ready:  # its VM is being changed, or has no address listed yet: nothing is touched
            vm = s.nodes[carried[0]]
            waiting[name] = reason_text(code="AZGPU_VM_NOT_READY",
                                        message=f"its VM {vm['hostname']} is {vm.get('provisioning_state')} "
                                                "and has no address yet", remedy="resume it again later")
            continue
        if ready:
            keep = ready[0]
            extra = [i for i in vms if i != keep]
            if extra:
                _release(run, s, extra, f"{name} carries another VM")
            vm = s.nodes[keep]
            run.give_address(name, vm)
            run.given.add(name)
            run.data["failed"].pop(name, None)
            run.save()
            run.log(f"{name}: already up on {vm['hostname']} ({vm['ip']}), address given again")
            done.append(name)
            continue
        if vms:  # left for inspection by an earlier resume: a fresh VM is taken, this one goes
            _release(run, s, vms, f"{name} was left for inspection on it and is resumed again")
        todo.append(name)
    return done, waiting, todo


def _finish(run: _Run, index: int, done: list[str], waiting: dict[str, str], todo: list[str],
            checked: dict[str, Any] | None = None) -> tuple[list[str], dict[str, str]]:
    """The names to bring up onto checked VMs (grown where short), the join, the reconcile. `checked`: the
    new VMs' results of a check run already (_fresh_checked)."""
    brought: list[str] = []
    left: dict[str, str] = {}
    if todo:  # (the bring-up takes the names it brings up off todo)
        if run.sets[index].per_rack:
            brought, left = _bring_up_racks(run, index, list(todo))
        else:
            brought, left = _bring_up(run, index, list(todo), dict(checked or {}))
    resumed = done + brought
    if run.ctx.join is not None and resumed:
        resumed, refused = _join(run, index, resumed)
        left.update(refused)
    if todo:
        run.reconcile(run.sets[index])
    return resumed, {**waiting, **left}


def _join(run: _Run, index: int, names: list[str]) -> tuple[list[str], dict[str, str]]:
    """The node bootstrap (azgpu.slurm.bootstrap) on the VMs these names were just bound to and given
    addresses for: slurmd starts with its Slurm name. Names resumed again on a VM that already carries them
    are bootstrapped again (slurmctld resumes only a powered-down node, so no job runs there, and a resume
    cut off between the binding and the bootstrap converges). A name whose bootstrap failed is left DOWN
    with why; its VM is left for inspection and nothing is replaced: a bootstrap that fails on one new VM
    fails alike on the next (the image, the controller's address or version, the munge key)."""
    from .bootstrap import Target, join_all

    s = run.sets[index]
    on = {name: instance for instance, name in s.bound.items() if instance not in s.inspect}
    targets = [Target(n, s.name, on[n], s.info["location"]) for n in names if n in on]
    problems = join_all(run.session, run.ctx.resource_group, run.ctx.spec, targets, run.ctx.join, run.log)
    problems.update({n: "its VM is no longer listed" for n in names if n not in on})
    failed = [n for n in names if n in problems]
    if failed:
        _keep_for_inspection(run, s, [on[n] for n in failed if n in on], [n for n in failed if n in on])
    refused = {n: reason_text(code="SLURM_JOIN_FAILED", message=problems[n],
                              remedy="see the power log; fix the image, the controller's address or version or "
                                     "the munge key, then resume it again")
               for n in failed}
    return [n for n in names if n not in problems], refused


def _release(run: _Run, s: _Set, instances: list[str], why: str) -> None:
    """Take these VMs from their name: deleted, or on vertical-connect sizes left waiting in their rack."""
    if s.per_rack:
        run.log(f"{len(instances)} VM(s) of {s.name} no longer carry a name ({why}); they wait in their rack")
        run.unbind(s, instances, inspect="left for inspection" if any(i in s.inspect for i in instances) else None)
    else:
        run.delete(s, instances, why)


def _grow(run: _Run, index: int, s: _Set, target: int) -> _Set:
    """Grow the domain's scale set to `target` VMs with create (the others stay at the VMs they hold); a grow
    that fails puts the capacity back where the VMs are before the error goes on."""
    return run.serially(_grow_alone, run, index, s, target)


def _grow_alone(run: _Run, index: int, s: _Set, target: int) -> _Set:
    run.log(f"growing {s.name} from {len(s.nodes)} to {target} instance(s)")
    try:
        # The other domains' VMs as Azure lists them where their threads run: one may not have read its own
        # back yet after the grow of all, and create would take its older size for a scale-in.
        _create(run, _capacities(run, {index: target}, listed=run._serial is not None))
    except BaseException:
        try:
            run.fix_capacity(run.load(index))
        except Exception as exc:  # the next run reconciles
            run.log(f"could not check {s.name}'s capacity after the failed grow: {_as_error(exc, 'reading').message}")
        raise
    return run.load(index)


def _grow_together(run: _Run, targets: dict[int, int]) -> None:
    """The short domains' scale sets grown to their targets in one create: one preflight and one deployment whose
    scale sets Azure creates side by side. Where it fails, each scale set's capacity goes back to the VMs it
    holds and the domains still short grow on their own in their bring-up, as a resume of one domain does: a
    failure of one (AllocationFailed) or of all together (quota for some of them only) keeps no domain from
    what it alone can get."""
    run.log("growing " + ", ".join(f"{run.sets[i].name} from {len(run.sets[i].nodes)} to {t}"
                                    for i, t in targets.items()) + " instance(s) in one deployment")
    try:
        _create(run, _capacities(run, targets))
    except BaseException as exc:
        for index in targets:
            try:
                run.fix_capacity(run.load(index))
            except Exception as again:  # the next run reconciles
                run.log(f"could not check {run.ctx.domains[index].scale_set}'s capacity after the failed grow: "
                        f"{_as_error(again, 'reading').message}")
        if not isinstance(exc, Exception):
            raise
        err = _as_error(exc, "growing the scale sets")
        run.log(f"growing them together failed ([{err.code}] {err.message}): each short one grows on its own")


def _capacities(run: _Run, targets: dict[int, int], *, listed: bool = False) -> list[int]:
    """Every scale set's capacity for create: the targets', and for the others the VMs they hold (as this run
    read them, or listed: as Azure lists them now)."""
    capacities = []
    for other in run.ctx.domains:
        if other.index in targets:
            capacities.append(targets[other.index])
            continue
        known = None if listed else run.sets.get(other.index)
        capacities.append(len(known.nodes) if known is not None else _present(run, other))
    return capacities


def _create(run: _Run, capacities: list[int]) -> None:
    from ..deploy import CreateOptions, create

    create(run.session, run.ctx.request, CreateOptions(
        scale_sets=tuple(capacities), zones=tuple(run.ctx.zones),
        fallback_locations=tuple(run.ctx.fallback_locations), on_notice=run.log))


def _short_of(run: _Run, index: int, todo: list[str]) -> int | None:
    """The VMs the domain's scale set needs for these names, as its bring-up's first round would grow it
    (_bring_up, _fill_slot: a rack for each slot no rack hosts nor an empty one takes); None when it needs
    none, or more than the domain holds (its bring-up says so)."""
    s = run.sets[index]
    if not todo:
        return None
    if s.per_rack:
        slots = {name: number for number, names in enumerate(s.domain.slots(s.per_rack)) for name in names}
        hosted = {slots[name] for name in s.bound.values() if name in slots}
        empty = sum(1 for r in run.racks(s) if not any(i in s.bound or i in s.held for i in r["members"]))
        target = len(s.nodes) + s.per_rack * max(0, len({slots[n] for n in todo} - hosted) - empty)
    else:
        target = len(s.nodes) + len(todo) - len(s.unnamed())
    if target <= len(s.nodes) or target > s.domain.capacity + len(s.inspect):
        return None
    return target


def _present(run: _Run, domain: Domain) -> int:
    from ..deploy import cluster_nodes

    listed = cluster_nodes(run.session, run.ctx.cluster, run.ctx.resource_group, only=[domain.scale_set])
    return len(listed[0]["nodes"]) if listed else 0


def _check(run: _Run, s: _Set, candidates: list[str],
           on_start: Callable[[int], None] | None = None) -> dict[str, Any]:
    """The health gate's node check on these instances, judged by the gate's own rule for a finding every
    node shares; instance id -> NodeResult (absent: not checked)."""
    from ..deploy import check, common_failures

    ids = {f"{s.info['id']}/virtualMachines/{i}".lower() for i in candidates}
    run.log(f"health check of {len(candidates)} node(s) of {s.name}")
    report = check(run.session, run.ctx.cluster, run.ctx.resource_group, run.ctx.node_check, instances=ids,
                   on_start=on_start)
    results = common_failures([n for n in report.nodes if n.scale_set == s.name])
    return {n.instance_id: n for n in results}


def _address_not_taken() -> str:
    """The DOWN reason of a name whose VM passed but whose address slurmctld did not take."""
    return reason_text(code="SCONTROL_FAILED", message="the node passed but slurmctld did not take its address",
                       remedy="check slurmctld ('scontrol ping'); the VM carries the name")


def _take(run: _Run, s: _Set, pairs: list[tuple[str, str]], bound: dict[str, BaseException],
          fields: dict[str, dict[str, Any]] | None = None) -> dict[str, bool]:
    """Record the round's bindings ((instance, name) pairs whose VMs passed; Azure's were made by bind_all) in
    the cache, saved once for the round (once a node, each save writing every node, took longer than the
    bindings themselves at a thousand nodes), then give slurmctld each address. An error of bind_all is
    raised once the pairs before it are recorded and given. name -> False where slurmctld did not take the
    address: the VM keeps its name, and resume-fail or the node's own registration follows. `fields`:
    instance -> more of its cache entry (the NVLink domain it measured)."""
    taken, error = [], None
    for instance, name in pairs:
        if instance in bound:
            error = bound[instance]
            break
        run._record(s, instance, name, bound=True, save=False)
        run.data["nodes"][name].update((fields or {}).get(instance, {}))
        run.data["failed"].pop(name, None)
        taken.append((instance, name))
    if taken:
        run.save()
    given = {name: _give(run, s, instance, name) for instance, name in taken}
    if error is not None:
        raise error
    return given


def _give(run: _Run, s: _Set, instance: str, name: str) -> bool:
    vm = s.nodes[instance]
    try:
        run.give_address(name, vm)
    except InputError as exc:
        run.log(f"{name}: {vm['hostname']} ({vm['ip']}) passed and carries the name, but slurmctld did not take "
                f"its address: [{exc.code}] {exc.message}")
        return False
    run.given.add(name)
    run.log(f"{name}: {vm['hostname']} ({vm['ip']}) passed the health check; address given to slurmctld")
    return True


def _judge(run: _Run, s: _Set, candidates: list[str], results: dict[str, Any]):
    """(passed, replaceable, left) instance ids of a checked round, and the reason the left ones give."""
    from ..deploy import replaceable
    from ..health.results import PASSED

    passed, bad, left, reasons = [], [], [], []
    for instance in candidates:
        result = results.get(instance)
        if result is not None and result.status == PASSED:
            passed.append(instance)
            continue
        summary = result.summary() if result is not None else "not checked"
        run.log(f"{s.nodes[instance]['hostname']} (instance {instance}) did not pass: {summary}")
        if result is not None and replaceable(result):
            bad.append(instance)
        else:
            left.append(instance)
            reasons.append(result)
    common = next((r for r in reasons if r is not None and r.reason_code == "common"), None)
    if common is not None:
        why = reason_text(code="COMMON_FINDING", message=common.reason,
                          remedy="fix the image, driver or configuration; no host was replaced for it")
    else:
        why = reason_text(code="NODES_UNREACHABLE", message=f"{len(left)} new node(s) of {s.name} could not be checked",
                          remedy="see the power log; the VMs are left for inspection")
    return passed, bad, left, why


def _keep_for_inspection(run: _Run, s: _Set, instances: list[str], names: list[str]) -> None:
    """VMs a new VM would not fix stay for inspection, each carrying one of the names it was meant for (in
    the cache only: the VM may not answer Azure's Run Command); ResumeFailProgram deletes them unless --keep."""
    pairs = list(zip(instances, names, strict=False))
    for instance, name in pairs:
        s.bound[instance] = name
        s.inspect.add(instance)
        run._cache(s, instance, name, state.INSPECT)
    if pairs:
        run.log(f"left for inspection in {s.name}: instance(s) {', '.join(i for i, _ in pairs)}")
    run.save()


def _bring_up(run: _Run, index: int, todo: list[str],
              checked: dict[str, Any] | None = None) -> tuple[list[str], dict[str, str]]:
    """Names onto fresh or adopted VMs of a scale set whose VMs can be deleted one by one. `checked`: results of
    VMs checked already, each used once (a VM found carrying a name meanwhile is not a candidate)."""
    checked = checked if checked is not None else {}
    from ..deploy import replacement_stop, signature

    s = run.sets[index]
    domain = s.domain
    done: list[str] = []
    failed: dict[str, str] = {}
    rounds = grown = 0
    previous: set = set()
    reason = reason_text(code="AZGPU_RESUME_INCOMPLETE", message="no healthy node for it", remedy="see the power log")
    while todo:
        free = s.unnamed()
        if len(free) < len(todo):
            most = domain.capacity + len(s.inspect)
            target = len(s.nodes) + len(todo) - len(free)
            if target > most:
                reason = reason_text(code="AZGPU_DOMAIN_FULL",
                                     message=f"{s.name} holds at most {domain.capacity} node(s)",
                                     remedy="suspend nodes of this domain or use another partition")
                break
            if grown > run.ctx.max_rounds:  # each create should have added them; do not loop on Azure
                break
            s = _grow(run, index, s, target)
            grown += 1
            continue
        candidates = free[:len(todo)]
        results = {i: checked.pop(i) for i in candidates if i in checked}
        unchecked = [i for i in candidates if i not in results]
        if unchecked:
            results.update(_check(run, s, unchecked))
        passed, bad, left, why = _judge(run, s, candidates, results)
        pairs = list(zip(passed, todo, strict=False))
        del todo[:len(pairs)]
        given = _take(run, s, pairs, run.bind_all(s, pairs))
        for _, name in pairs:
            if given[name]:
                done.append(name)
            else:
                failed[name] = _address_not_taken()
        if left:
            _keep_for_inspection(run, s, left + bad, todo)
            reason = why
            break
        if bad:
            rounds += 1
            nodes = [results[i] for i in candidates if i in results]
            stop = replacement_stop(nodes, [results[i] for i in bad], previous, rounds, run.ctx.max_rounds)
            if stop:
                _keep_for_inspection(run, s, bad, todo)
                reason = reason_text(code="UNHEALTHY_NODES", message=stop,
                                     remedy="see the power log; the VMs are left for inspection")
                break
            previous = {signature(results[i]) for i in bad}
            run.delete(s, bad, "they failed the health check")
            s = run.load(index)
    failed.update({n: reason for n in todo})
    return done, failed


def _bring_up_racks(run: _Run, index: int, todo: list[str]) -> tuple[list[str], dict[str, str]]:
    """Names onto VMs of whole racks: the names of one topology/block slot all go to one measured rack (the
    rack that carries names of the slot already, else a rack that carries none, else a new one); the
    rest of a rack waits unnamed. Nothing single is deleted: a VM that fails is left in its rack,
    marked, and the next VM of the rack is tried."""
    s = run.sets[index]
    per = s.per_rack
    done: list[str] = []
    failed: dict[str, str] = {}
    slots = {name: number for number, names in enumerate(s.domain.slots(per)) for name in names}
    by_slot: dict[int, list[str]] = {}
    for name in todo:
        by_slot.setdefault(slots[name], []).append(name)
    for slot, names in sorted(by_slot.items()):
        brought, left = _fill_slot(run, index, slot, names)
        done += brought
        failed.update(left)
    return done, failed


def _fill_slot(run: _Run, index: int, slot: int, names: list[str]) -> tuple[list[str], dict[str, str]]:
    from ..deploy import replacement_stop, signature

    s = run.sets[index]
    per = s.per_rack
    members_of_slot = set(s.domain.slots(per)[slot])
    done: list[str] = []
    failed: dict[str, str] = {}
    grown = rounds = 0
    tried: set[str] = set()  # VMs this run checked and did not use: not tried again
    seen: dict[str, Any] = {}  # instance id -> its NodeResult in this run
    previous: set = set()
    reason = reason_text(code="AZGPU_RESUME_INCOMPLETE", message="no healthy node for it in its rack",
                         remedy="see the power log")
    while names:
        racks = run.racks(s)  # membership as Azure reports it; the NVLink domain the nodes measure checks it
        host = next((r for r in racks if any(s.bound.get(i) in members_of_slot for i in r["members"])), None)
        if host is None:  # a rack no name is bound to yet, whole ones first
            empty = [r for r in racks if not any(i in s.bound or i in s.held for i in r["members"])]
            empty.sort(key=lambda r: (len(r["members"]) != per, r["name"]))
            host = empty[0] if empty else None
        if host is None:
            if len(s.nodes) + per > s.domain.capacity + len(s.inspect) or grown > run.ctx.max_rounds:
                reason = reason_text(code="AZGPU_DOMAIN_FULL", message=f"no rack of {s.name} is free for these names",
                                     remedy="suspend the names of another slot of this domain")
                break
            s = _grow(run, index, s, len(s.nodes) + per)
            grown += 1
            continue
        free = [i for i in host["members"] if i not in s.bound and i not in s.held and i not in tried and s.settled(i)]
        free.sort(key=lambda i: (i not in seen, i in s.inspect, _order(i)))  # checked ones, then fresh, inspected last
        if not free:
            reason = reason_text(code="AZGPU_RACK_SHORT",
                                 message=f"rack {host['name']} of {s.name} has no healthy VM left for these names",
                                 remedy="suspend the other names of its slot so that the rack is freed")
            break
        candidates = free[:len(names)]
        tried.update(candidates)
        unchecked = [i for i in candidates if i not in seen]
        if unchecked:
            seen.update(_check(run, s, unchecked))
        results = {i: seen[i] for i in candidates if i in seen}
        passed, bad, left, why = _judge(run, s, candidates, results)
        domain = _rack_domain(run, s, host, passed, seen, tried)
        taken = []
        for instance in passed:
            measured = _domain(seen[instance])
            if domain is None or measured != domain:
                run.log(f"{s.nodes[instance]['hostname']} (instance {instance}) passed, but its NVLink domain "
                        f"({measured}) is not its rack's ({domain or 'undecided'}, {host['name']}): not used")
                left.append(instance)
                continue
            taken.append(instance)
        pairs = list(zip(taken, names, strict=False))
        del names[:len(pairs)]
        given = _take(run, s, pairs, run.bind_all(s, pairs), {i: {"domain": _domain(seen[i])} for i, _ in pairs})
        for _, name in pairs:
            if given[name]:
                done.append(name)
            else:
                failed[name] = _address_not_taken()
        if bad or left:
            run.unbind(s, bad + left, inspect="did not pass the health check, or its NVLink domain is not its rack's")
        if left and all(r is not None and r.reason_code == "common" for r in (results.get(i) for i in left)):
            reason = why  # a finding every node shares: another VM of the rack would show it too
            break
        if bad:
            rounds += 1
            nodes = [results[i] for i in candidates if i in results]
            stop = replacement_stop(nodes, [results[i] for i in bad], previous, rounds, run.ctx.max_rounds)
            if stop:
                reason = reason_text(code="UNHEALTHY_NODES", message=stop,
                                     remedy="see the power log; the VMs wait in their rack, marked")
                break
            previous = {signature(results[i]) for i in bad}
    return done, {**failed, **{n: reason for n in names}}


def _domain(result: Any) -> str | None:
    from ..racks import fabric_domain, fabric_of

    return fabric_domain(fabric_of(result)) if result is not None else None


def _rack_domain(run: _Run, s: _Set, host: dict[str, Any], passed: list[str], seen: dict[str, Any],
                 tried: set[str]) -> str | None:
    """The NVLink domain (ClusterUUID/CliqueId) of the rack Azure groups these VMs in: the one its bound
    nodes measured when they were bound, else the one most of its checked VMs measure. When the VMs
    checked so far disagree, the rack's other free VMs are checked too; no majority decides nothing."""
    from collections import Counter

    recorded = Counter(run.data["nodes"].get(s.bound[i], {}).get("domain") for i in host["members"] if i in s.bound)
    recorded.pop(None, None)
    if recorded:
        return recorded.most_common(1)[0][0]
    counts = Counter(d for d in (_domain(seen[i]) for i in passed) if d)
    if len(counts) > 1:
        rest = [i for i in host["members"] if i not in s.bound and i not in s.held and i not in seen
                and i not in tried and s.settled(i)]
        if rest:
            run.log(f"the VMs checked in rack {host['name']} of {s.name} measure {len(counts)} NVLink domains: "
                    f"checking its other {len(rest)} VM(s) to tell the rack's own")
            seen.update(_check(run, s, rest))
        counts = Counter(d for d in (_domain(r) for r in seen.values() if r is not None and r.passed) if d)
    top = counts.most_common(2)
    if not top or (len(top) > 1 and top[0][1] == top[1][1]):
        return None
    return top[0][0]


# ------------------------------------------------------------------------------------ suspend, resume-fail


def suspend(ctx: Context, hostlist: str, *, command: str = "suspend") -> dict[str, Any]:
    """Free the VMs that carry these names: delete them, or on vertical-connect sizes let them wait in their
    rack and delete a rack, whole and in one request, once no name is bound to it."""
    wanted = locate(ctx.domains, expand(hostlist))
    with state.locked(ctx.state_dir, ctx.cluster), ctx.open_session() as session:
        run = _Run(ctx, session, command, hostlist, list(wanted))
        return _free(run, wanted)


def _free(run: _Run, wanted: dict[int, list[str]]) -> dict[str, Any]:
    removed, absent, waiting = [], [], []
    for index, names in wanted.items():
        s = run.load(index, verify=names)
        mine: dict[str, list[str]] = {}
        for name in names:
            vms = [i for i in s.vms_of(name) if i not in s.held]
            if vms:
                mine[name] = vms
            else:
                absent.append(name)
            run.data["failed"].pop(name, None)
        if not mine:
            run.reconcile(s)
            continue
        instances = [i for vms in mine.values() for i in vms]
        if not s.per_rack:
            run.log(f"deleting the VMs of {compress(mine)}: "
                    + ", ".join(f"{n}={s.nodes[i]['hostname']}" for n, vms in mine.items() for i in vms))
            run.delete(s, instances, "their nodes are suspended")
            removed += list(mine)
        else:
            going = set(instances)
            for rack in run.racks(s):
                members = set(rack["members"])
                if not members & going:
                    continue
                users = sorted({s.bound[i] for i in members - going if i in s.bound})
                if users or members & set(s.held):
                    run.unbind(s, sorted(members & going, key=_order))
                    run.log(f"rack {rack['name']} of {s.name} keeps its {len(members)} VM(s): "
                            f"{compress(users) or 'a VM something holds'} still use it" + run.cost(s, len(members)))
                else:  # the rack goes whole (reconcile, below): its bindings go with its VMs
                    run.unbind(s, sorted(members & going, key=_order), in_azure=False)
            waiting += list(mine)
        run.reconcile(s)
        if s.per_rack:  # the names whose rack went with them are removed, the others wait
            gone = [n for n, vms in mine.items() if not set(vms) & set(s.nodes)]
            removed += gone
            waiting = [n for n in waiting if n not in gone]
        run.save()
    if absent:
        run.log(f"{len(absent)} node(s) had no VM: nothing to delete for them")
    out: dict[str, Any] = {"removed": removed, "without_vm": absent}
    if waiting:
        out["waiting"] = waiting
    return out


def resume_fail(ctx: Context, hostlist: str, *, keep: bool = False) -> dict[str, Any]:
    """ResumeFailProgram: slurmctld runs it at ResumeTimeout for nodes it has set DOWN ("ResumeTimeout
    reached"). Each such node gets azgpu's reason back (its code and remedy, recorded when resume gave up
    on it), and its VMs are freed (unless keep). A node that is no longer DOWN (an administrator returned
    it, or it registered) is left exactly as it is."""
    wanted = locate(ctx.domains, expand(hostlist))  # the names are checked before slurmctld is told anything
    names = [n for ns in wanted.values() for n in ns]
    with state.locked(ctx.state_dir, ctx.cluster), ctx.open_session() as session:
        run = _Run(ctx, session, "resume-fail", hostlist, list(wanted))
        if run.view is None:
            raise InputError("slurmctld did not answer 'scontrol show node': the nodes' state is unknown, so none "
                             "was set DOWN or freed", code="SCONTROL_FAILED",
                             remedy="check that slurmctld runs ('scontrol ping'); run 'provision slurm resume-fail' "
                                    "again for these nodes when it does")
        down = [n for n in names if n in run.view and run.view[n].down]
        left = [n for n in names if n not in down]
        for name in left:
            node = run.view.get(name)
            run.log(f"{name}: {'State=' + node.state + '+' + '+'.join(sorted(node.flags)) if node else 'unknown'}"
                    " - not DOWN any more (an administrator or the node itself returned it): left as it is")
        by_reason: dict[str, list[str]] = {}
        for name in down:
            recorded = run.data["failed"].get(name, {}).get("reason")
            current = run.view[name].reason
            why = recorded or (current if current.startswith("azgpu ") else reason_text(
                code="AZGPU_NOT_REGISTERED", message="the node did not register with slurmctld within ResumeTimeout",
                remedy="see the power log, then 'scontrol update nodename=... state=resume'"))
            if current != why:
                by_reason.setdefault(why, []).append(name)
        for why, group in by_reason.items():
            run.log(f"setting DOWN {compress(group)}: {why}")
            ctx.slurm.update(compress(group), state="DOWN", reason=why)
        freed = {"removed": [], "without_vm": []}
        if down and not keep:
            freed = _free(run, locate(ctx.domains, down))
        elif down:
            run.log(f"--keep: the VMs of {compress(down)} are left for inspection")
    return {"down": down, "left": left, **freed}
