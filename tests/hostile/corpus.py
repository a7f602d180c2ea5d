"""Reading the corpus files: a case's input built from a world's body (a REST spec example, a real node's
output) and its mutation, and the checks every case shares."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parent / "data"
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
WRITES = ("PUT", "PATCH", "POST", "DELETE")


def load(name: str) -> dict[str, Any]:
    return json.loads((DATA / name).read_text(encoding="utf-8"))


def ids(cases: list[dict]) -> list[str]:
    return [c["id"] for c in cases]


def expand(value: Any, bases: dict[str, str] | None = None) -> Any:
    """{"repeat": X, "times": n} is a list of n X, {"text": segments} a text (kept short in the data file)."""
    if isinstance(value, dict) and set(value) == {"repeat", "times"}:
        return [copy.deepcopy(value["repeat"]) for _ in range(value["times"])]
    if isinstance(value, dict) and set(value) == {"text"}:
        return segments(value["text"], bases or {})
    return value


def segments(parts: Any, bases: dict[str, str]) -> str:
    """A text case: a string, or segments (text, {"repeat": text, "times": n}, {"base": name})."""
    if isinstance(parts, str):
        return parts
    out = []
    for part in parts:
        if isinstance(part, str):
            out.append(part)
        elif "base" in part:
            out.append(bases[part["base"]])
        else:
            out.append(part["repeat"] * part["times"])
    return "".join(out)


def pointer_set(doc: Any, pointer: str, value: Any) -> Any:
    """doc with `value` at JSON pointer `pointer` (RFC 6901; the parents must exist), or value for ''."""
    if pointer in ("", "/"):
        return value
    parts = [p.replace("~1", "/").replace("~0", "~") for p in pointer.lstrip("/").split("/")]
    target = doc
    for part in parts[:-1]:
        target = target[int(part)] if isinstance(target, list) else target[part]
    last = parts[-1]
    if isinstance(target, list):
        target[int(last)] = value
    else:
        target[last] = value
    return doc


def mutated(base: Any, case: dict, bases: dict[str, str] | None = None) -> Any:
    doc = copy.deepcopy(base)
    for pointer in case.get("delete", ()):
        parts = [p.replace("~1", "/").replace("~0", "~") for p in pointer.lstrip("/").split("/")]
        parent = doc
        for part in parts[:-1]:
            parent = parent[int(part)] if isinstance(parent, list) else parent[part]
        if isinstance(parent, list):
            del parent[int(parts[-1])]
        else:
            parent.pop(parts[-1], None)
    for pointer, value in (case.get("set") or {}).items():
        doc = pointer_set(doc, pointer, expand(value, bases))
    if "nest" in case:  # {"at": pointer, "depth": n}: n lists around the value there
        value = []
        for _ in range(case["nest"]["depth"]):
            value = [value]
        doc = pointer_set(doc, case["nest"]["at"], value)
    return doc


def assert_clean(rc: int, out: str, err: str) -> None:
    """No traceback, and nothing that drives a terminal on stdout or stderr."""
    assert "Traceback" not in err and "Traceback" not in out, err
    for line in (out + err).splitlines():
        assert all(ch.isprintable() or ch == "\t" for ch in line), ascii(line)


def error_code(err: str) -> str | None:
    """The first error's code: 'ERROR: [CODE]' at a line's start, or after a Slurm program's log prefix
    ('<time> azgpu-slurm[<pid>] resume <hostlist>: ERROR: [CODE] ...', as slurmctld keeps it)."""
    for line in err.splitlines():
        found = re.match(r"(?:.*?: )?ERROR: \[([A-Z0-9_]+)\]", line)
        if found:
            return found.group(1)
    return None


def writes(azure, since: int = 0, allowed=lambda r: False) -> list:
    return [r for r in azure.requests[since:] if r.method in WRITES and not allowed(r)]


def arm_check(r) -> bool:
    """Deployments - Validate or What If: POSTs that write nothing (REST spec, deployments 2025-04-01)."""
    path = r.path.lower()
    return r.method == "POST" and "/providers/microsoft.resources/deployments/" in path and \
        path.endswith(("/validate", "/whatif"))
