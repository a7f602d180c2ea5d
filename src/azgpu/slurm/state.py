"""The controller's cache of which VM carries which Slurm node name, and the lock that serialises
resumes and suspends.

The binding itself lives with the VM in Azure (a named Run Command on the instance, see
azgpu.deploy.nodes) and shows in slurmctld (the NodeAddr of a node that is not powered down); this
file only saves asking Azure about every instance on every run. Losing it loses nothing: the next
run reads the bindings back from Azure and slurmctld. It also keeps what azgpu alone knows: why a
resume failed (the DOWN reason with azgpu's code and remedy, which slurmctld replaces with
"ResumeTimeout reached" before it runs resume-fail) and which VMs were left for inspection.

A directory only the Slurm user reads (0700); every change happens under the lock. What is read
is checked (a malformed or symlinked file is a coded error, never a traceback or a followed link).
"""

from __future__ import annotations

import json
import os
import stat
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..bounded_read import read_bounded
from ..errors import InputError

# slurmctld starts one ResumeProgram per batch of nodes; a create of a whole InfiniBand domain can
# take as long as ResumeTimeout allows, so a waiting call waits about as long before it gives up.
LOCK_TIMEOUT = 3600.0
VERSION = 2
MAX_BYTES = 16 * 1024 * 1024  # about 200 bytes a binding: far above any cluster azgpu makes
UP, INSPECT = "up", "inspect"
_NODE_KEYS = {"scale_set": str, "instance_id": str, "hostname": str, "ip": str}
MOVE_AWAY = "move the file away: the next run reads the bindings back from Azure and slurmctld"


def _dir(state_dir: str) -> Path:
    path = Path(state_dir).expanduser()
    try:
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
        if not path.is_dir():
            raise NotADirectoryError(20, "not a directory")
    except OSError as exc:
        raise InputError(f"cannot use state directory '{state_dir}': {exc.strerror or exc}", code="INVALID_STATE_DIR",
                         remedy="pass a --state-dir the Slurm user (SlurmUser) may write") from None
    return path


def _refuse_link(path: Path, what: str) -> None:
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    except OSError as exc:
        raise InputError(f"cannot read {what} '{path}': {exc.strerror}", code="SLURM_STATE_INVALID",
                         remedy=MOVE_AWAY) from None
    if stat.S_ISLNK(mode) or not stat.S_ISREG(mode):
        raise InputError(f"{what} '{path}' is {'a symbolic link' if stat.S_ISLNK(mode) else 'not a regular file'}: "
                         "azgpu does not follow it", code="SLURM_STATE_LINK",
                         remedy=f"remove '{path}' (the programs make it again) and check who else writes to "
                                "the state directory; it should be the Slurm user's alone (mode 0700)")


@contextmanager
def locked(state_dir: str, cluster: str, timeout: float = LOCK_TIMEOUT):
    """Hold the cluster's lock: one resume or suspend at a time changes its scale sets.

    One lock per cluster rather than per scale set: `create` writes every scale set's model of the
    cluster in one run, so two runs that grew different domains at once could each put the other's
    older capacity back.
    """
    from filelock import FileLock, Timeout

    path = _dir(state_dir) / f"{cluster}.lock"
    _refuse_link(path, "the lock file")
    lock = FileLock(str(path))
    try:
        lock.acquire(timeout=timeout)
    except Timeout:
        raise InputError(f"another resume or suspend of cluster '{cluster}' held its lock for {timeout:.0f} s",
                         code="SLURM_LOCK_TIMEOUT",
                         remedy="check for a hung 'provision slurm' process (ps) before removing nothing: "
                                "the lock frees itself when that process ends") from None
    try:
        yield
    finally:
        lock.release()


def empty() -> dict[str, Any]:
    return {"version": VERSION, "nodes": {}, "failed": {}, "inspect": {}}


def load(state_dir: str, cluster: str) -> dict[str, Any]:
    """The cache: {"nodes": {name: {scale_set, instance_id, vm_id, hostname, ip, status}}, "failed": {name:
    {reason, at}}, "inspect": {"<scale set>/<instance id>": {vm_id, reason}}} (VMs of a rack left for
    inspection, which carry no name); empty when there is no file; a file azgpu did not write is a coded error."""
    path = _dir(state_dir) / f"{cluster}.json"
    _refuse_link(path, "the state file")
    try:
        # Bounded and non-blocking: a FIFO left at the path blocked slurmctld's program for ever.
        raw = read_bounded(path, limit=MAX_BYTES, follow_links=False)
    except FileNotFoundError:
        return empty()
    except IsADirectoryError as exc:
        raise InputError(f"cannot read '{path}': it is {exc}", code="SLURM_STATE_INVALID", remedy=MOVE_AWAY) from None
    except OSError as exc:
        raise InputError(f"cannot read '{path}': {exc.strerror}", code="SLURM_STATE_INVALID",
                         remedy=MOVE_AWAY) from None
    try:
        if len(raw) > MAX_BYTES:
            raise ValueError(f"larger than {MAX_BYTES} bytes")
        return _checked(json.loads(raw.decode("utf-8")))
    except (ValueError, RecursionError, UnicodeDecodeError) as exc:
        raise InputError(f"'{path}' is not a state file azgpu wrote: {str(exc)[:200]}", code="SLURM_STATE_INVALID",
                         remedy=MOVE_AWAY) from None


def _checked(data: Any) -> dict[str, Any]:
    """The state as azgpu wrote it (version 1, before 2026-11: nodes only), or ValueError saying what is wrong."""
    if not isinstance(data, dict) or not isinstance(data.get("nodes", {}), dict):
        raise ValueError("not an object with 'nodes'")
    version = data.get("version", 1)
    if version not in (1, VERSION):
        raise ValueError(f"version {version!r}")
    out = empty()
    for name, node in data.get("nodes", {}).items():
        if not isinstance(node, dict):
            raise ValueError(f"node {name!r} is not an object")
        for key, kind in _NODE_KEYS.items():
            if not isinstance(node.get(key), kind):
                raise ValueError(f"node {name!r} has no {key}")
        status = node.get("status", UP)
        if status not in (UP, INSPECT):
            raise ValueError(f"node {name!r} has status {status!r}")
        for key in ("vm_id", "domain"):  # the VM's id; on rack sizes the NVLink domain it measured when bound
            if node.get(key) is not None and not isinstance(node.get(key), str):
                raise ValueError(f"node {name!r} has a {key} that is not text")
        out["nodes"][str(name)] = {**{k: node[k] for k in _NODE_KEYS}, "vm_id": node.get("vm_id"), "status": status}
        if node.get("domain"):
            out["nodes"][str(name)]["domain"] = node["domain"]
    failed = data.get("failed", {})
    if not isinstance(failed, dict):
        raise ValueError("'failed' is not an object")
    for name, entry in failed.items():
        if not (isinstance(entry, dict) and isinstance(entry.get("reason"), str)
                and isinstance(entry.get("at"), (int, float)) and not isinstance(entry.get("at"), bool)):
            raise ValueError(f"failure of {name!r} is not a reason and a time")
        out["failed"][str(name)] = {"reason": entry["reason"], "at": float(entry["at"])}
    inspect = data.get("inspect", {})
    if not isinstance(inspect, dict):
        raise ValueError("'inspect' is not an object")
    for where, entry in inspect.items():
        if not (isinstance(entry, dict) and isinstance(entry.get("reason"), str)
                and isinstance(entry.get("vm_id"), (str, type(None)))):
            raise ValueError(f"inspection mark {where!r} is not a reason and a vm_id")
        out["inspect"][str(where)] = {"reason": entry["reason"], "vm_id": entry["vm_id"]}
    return out


def save(state_dir: str, cluster: str, data: dict[str, Any]) -> None:
    directory = _dir(state_dir)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{cluster}.", suffix=".json")
    try:
        with os.fdopen(fd, "w") as fh:
            json.dump({**data, "version": VERSION}, fh, indent=1, sort_keys=True)
        os.replace(tmp, directory / f"{cluster}.json")  # replaces a link itself, never what it points at
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
