"""What the health gate measured about a cluster's racks, kept for `provision outputs`.

The NVLink domain each node reported (racks.fabric_of) and the nodes left out of the scheduler
files (unhealthy nodes of a vertical-connect rack that Azure does not let azgpu delete alone), by
cluster, in the user's state directory (XDG_STATE_HOME on Linux). Only what the nodes and Azure
said is kept: no secret. `outputs` joins it with what Azure lists now, so a node that has since
gone is simply not shown.
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path
from typing import Any

from .racks import fabric_of

VERSION = 1


def _safe(part: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", part.lower())


def path(subscription: str, resource_group: str, cluster: str) -> Path:
    from platformdirs import user_state_dir

    folder = Path(user_state_dir("azgpu")) / "racks" / _safe(subscription) / _safe(resource_group)
    return folder / f"{_safe(cluster)}.json"


def save(subscription: str, resource_group: str, cluster: str, nodes: list[Any], excluded: dict[str, str]) -> Path:
    """Record each checked node's fabric and status, and the excluded hostnames with why. `nodes`:
    NodeResults (or their dicts) of the health gate."""
    record = {
        "version": VERSION,
        "cluster": cluster,
        "resource_group": resource_group,
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "nodes": {str(_get(n, "computer_name")): {"fabric": fabric_of(n), "status": _get(n, "status"),
                                                  "physical_host": _get(n, "physical_host")} for n in nodes},
        "excluded": dict(excluded),
    }
    target = path(subscription, resource_group, cluster)
    target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = target.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(record, fh, indent=1, sort_keys=True)
    os.replace(tmp, target)
    return target


MAX_RECORD = 16 * 1024 * 1024  # a record of thousands of nodes is a few hundred KB


def load(subscription: str, resource_group: str, cluster: str) -> dict[str, Any] | None:
    """The record, or None when there is none (or it is of another version: then racks are not measured).
    A record whose entries are not what save() writes raises RACK_RECORD_INVALID, naming the file."""
    from .bounded import BoundedError, loads

    where = path(subscription, resource_group, cluster)
    try:
        raw = where.read_bytes()
    except OSError:
        return None
    try:
        record = loads(raw, max_bytes=MAX_RECORD, what="the record")
    except BoundedError as exc:
        raise _invalid(where, str(exc)) from None
    if not isinstance(record, dict) or record.get("version") != VERSION:
        return None
    problem = _problem(record)
    if problem:
        raise _invalid(where, problem)
    return record


def _invalid(where: Path, problem: str):
    from .errors import InputError

    return InputError(f"the racks recorded in '{where}' cannot be used: {problem}", code="RACK_RECORD_INVALID",
                      remedy="run 'provision check' on the cluster to measure its racks again (it rewrites the "
                             "file), or delete the file")


_FABRIC = {"clusterUuid": str, "cliqueId": int, "state": str, "status": str, "complete": bool}


def _problem(record: dict[str, Any]) -> str | None:
    nodes, excluded = record.get("nodes"), record.get("excluded", {})
    if not isinstance(nodes, dict) or not isinstance(excluded, dict):
        return "'nodes' and 'excluded' must be objects"
    for name, entry in nodes.items():
        if not isinstance(entry, dict):
            return f"node {name[:80]!r} is not an object"
        for key, kind in (("status", str), ("physical_host", str), ("fabric", dict)):
            if entry.get(key) is not None and not isinstance(entry[key], kind):
                return f"node {name[:80]!r} has a malformed '{key}'"
        for key, value in (entry.get("fabric") or {}).items():
            if key not in _FABRIC or (value is not None and (not isinstance(value, _FABRIC[key])
                                                              or isinstance(value, bool) != (_FABRIC[key] is bool))):
                return f"node {name[:80]!r} has a malformed fabric ({key[:40]!r})"
    if not all(isinstance(v, str) for v in excluded.values()):
        return "'excluded' holds reasons that are not text"
    if record.get("measured_at") is not None and not isinstance(record["measured_at"], str):
        return "'measured_at' is not text"
    return None


def forget(subscription: str, resource_group: str, cluster: str) -> None:
    """Drop the record (destroy): a cluster created again under the same name reuses its computer
    names, and must not inherit what was measured on the old VMs."""
    try:
        path(subscription, resource_group, cluster).unlink()
    except FileNotFoundError:
        pass


def _get(obj: Any, name: str) -> Any:
    return obj.get(name) if isinstance(obj, dict) else getattr(obj, name, None)
