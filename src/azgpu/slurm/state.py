"""Which VM carries which Slurm node name, and the lock that serialises resumes and suspends.

Uniform scale sets (the only kind InfiniBand works in) carry no per-instance tags, so the mapping
lives in a JSON file beside the lock, in a directory only the Slurm user reads (0700). Every
change happens under the lock, and each reader checks the mapping against the VMs Azure lists:
an instance that is gone is forgotten, an instance nobody holds is free to be given a name.
"""

from __future__ import annotations

import json
import os
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..errors import InputError

# slurmctld starts one ResumeProgram per batch of nodes; a create of a whole InfiniBand domain can
# take as long as ResumeTimeout allows, so a waiting call waits about as long before it gives up.
LOCK_TIMEOUT = 3600.0


def _dir(state_dir: str) -> Path:
    path = Path(state_dir).expanduser()
    try:
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
    except OSError as exc:
        raise InputError(f"cannot use state directory '{state_dir}': {exc.strerror}", code="INVALID_STATE_DIR",
                         remedy="pass a --state-dir the Slurm user (SlurmUser) may write") from None
    return path


@contextmanager
def locked(state_dir: str, cluster: str, timeout: float = LOCK_TIMEOUT):
    """Hold the cluster's lock: one resume or suspend at a time changes its scale sets.

    One lock per cluster rather than per scale set: `create` writes every scale set's model of the
    cluster in one run, so two runs that grew different domains at once could each put the other's
    older capacity back.
    """
    from filelock import FileLock, Timeout

    lock = FileLock(str(_dir(state_dir) / f"{cluster}.lock"))
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


def load(state_dir: str, cluster: str) -> dict[str, Any]:
    path = _dir(state_dir) / f"{cluster}.json"
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return {"nodes": {}}
    except (OSError, ValueError) as exc:
        raise InputError(f"cannot read '{path}': {exc}", code="SLURM_STATE_INVALID",
                         remedy="move the file away: the next resume rebuilds it from the VMs Azure lists") from None
    data.setdefault("nodes", {})
    return data


def save(state_dir: str, cluster: str, data: dict[str, Any]) -> None:
    directory = _dir(state_dir)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{cluster}.", suffix=".json")
    try:
        with os.fdopen(fd, "w") as fh:
            json.dump(data, fh, indent=1, sort_keys=True)
        os.replace(tmp, directory / f"{cluster}.json")
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
