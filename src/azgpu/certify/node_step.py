"""One certification step on one node: the Run Command body that runs it, and its answer read back.

The body is azgpu/health/certify_node.sh with its settings (AZGPU_*) written above it, as the health
gate sends node_check.sh (health/script.py). The answer is one verdict line on stdout,
{"azgpu_certify": 1, ...}, carrying the tool's output in base64 pages (Run Command returns 4 KB): the
line is validated against a schema before anything in it is used (keys, types, lengths, base64, a
SHA-256 over the pages put together), and the output is then only text for the bounded parsers.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
import shlex
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any

from .bounded import printable

MARKER = "# azgpu node certification step, verdict version 1"
VERSION = 1
PAGE = 2700  # raw bytes of output per page (certify_node.sh's PAGE)
MAX_PAGES = 98  # 264,600 bytes: certify_node.sh keeps at most 262,144
MAX_LINE = 16384
_NAME = re.compile(r"AZGPU_[A-Z0-9_]+")
_RUN = re.compile(r"[a-z0-9-]{8,48}")
_HEX = re.compile(r"[0-9a-f]{64}")
_B64 = re.compile(r"[A-Za-z0-9+/]*={0,2}")
_TEXT = re.compile(r"[\x20-\x7e]*")
MODES = ("dcgm", "thermal", "nvbandwidth", "loopback", "ibpair", "fabric", "page", "forget")


class NodeOutputError(ValueError):
    """A node's answer that is not what certify_node.sh writes."""


@cache
def script_text() -> str:
    return resources.files("azgpu.health").joinpath("certify_node.sh").read_text(encoding="utf-8")


def body(mode: str, settings: dict[str, Any]) -> dict[str, Any]:
    """The RunCommandInput (REST shape) of one step: a shebang, the marker, the settings, the script."""
    if mode not in MODES:
        raise ValueError(f"not a certification mode: {mode!r}")
    head = ["#!/bin/bash", MARKER, f"AZGPU_MODE={mode}"]
    for name, value in settings.items():
        if not _NAME.fullmatch(name):
            raise ValueError(f"not an AZGPU_* setting name: {name!r}")
        if value is not None:
            head.append(f"{name}={shlex.quote(str(value))}")
    return {"commandId": "RunShellScript", "script": head + script_text().splitlines()}


@dataclass(frozen=True)
class Verdict:
    mode: str
    ok: bool
    run: str = ""
    exit: int | None = None
    seconds: int | None = None
    bytes: int = 0
    pages: int = 0
    sha256: str = ""
    output: bytes = b""  # this answer's page
    page: int = 0
    error: str | None = None
    versions: dict[str, str] = field(default_factory=dict)


_SCHEMA: dict[str, tuple[str, int]] = {
    "azgpu_certify": ("int", 0), "mode": ("str", 16), "run": ("str", 48), "ok": ("bool", 0), "exit": ("int", 0),
    "seconds": ("int", 0), "bytes": ("int", 0), "pages": ("int", 0), "sha256": ("str", 64), "output": ("str", 4000),
    "page": ("int", 0), "error": ("str", 400), "versions": ("versions", 0),
}
_VERSIONS = {"driver": 40, "vbios": 40, "ofed": 60, "hca_fw": 40, "image": 400}


def _check(key: str, value: Any) -> None:
    kind, limit = _SCHEMA[key]
    if kind == "str":
        if not isinstance(value, str) or len(value) > limit or not _TEXT.fullmatch(value):
            raise NodeOutputError(f"'{key}' is not printable text of at most {limit} characters")
    elif kind == "int":
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 10**9:
            raise NodeOutputError(f"'{key}' is not a whole number from 0 to 10^9")
    elif kind == "bool":
        if not isinstance(value, bool):
            raise NodeOutputError(f"'{key}' is not true or false")
    elif kind == "versions":
        if not isinstance(value, dict) or set(value) - set(_VERSIONS):
            raise NodeOutputError("'versions' is not an object of the known version fields")
        for name, text in value.items():
            if not isinstance(text, str) or len(text) > _VERSIONS[name] or not _TEXT.fullmatch(text):
                raise NodeOutputError(f"versions.{name} is not printable text")


def _reject_constant(name: str):
    raise NodeOutputError(f"the verdict holds {name}, not a number JSON allows")


def read(stdout: object) -> Verdict | None:
    """The last certification verdict line of stdout (None when there is none); NodeOutputError when
    the line is there but is not what certify_node.sh writes."""
    if not isinstance(stdout, str):
        return None
    for line in reversed(stdout[-200_000:].splitlines()):
        line = line.strip()
        if not line.startswith('{"azgpu_certify"'):
            continue
        if len(line) > MAX_LINE:
            raise NodeOutputError(f"a verdict line of {len(line)} bytes")
        try:
            data = json.loads(line, parse_constant=_reject_constant)
        except NodeOutputError:
            raise
        except RecursionError:
            raise NodeOutputError("a verdict nested too deep to read") from None
        except ValueError:
            continue  # cut at its start by Run Command's 4 KB tail: not a verdict
        if not isinstance(data, dict):
            continue
        return _verdict(data)
    return None


def _verdict(data: dict) -> Verdict:
    unknown = [k for k in data if k not in _SCHEMA]
    if unknown:
        raise NodeOutputError(f"the verdict holds an unknown key {ascii(str(unknown[0])[:40])}")
    for key, value in data.items():
        _check(key, value)
    if data.get("azgpu_certify") != VERSION:
        raise NodeOutputError(f"verdict version {data.get('azgpu_certify')!r}, this azgpu reads {VERSION}")
    if data.get("mode") not in MODES:
        raise NodeOutputError(f"mode {printable(data.get('mode'), 20)!r} is not a certification step")
    if data.get("run") and not _RUN.fullmatch(data["run"]):
        raise NodeOutputError("'run' is not a run id")
    if data.get("sha256") and not _HEX.fullmatch(data["sha256"]):
        raise NodeOutputError("'sha256' is not a SHA-256 digest")
    raw = data.get("output", "")
    if not _B64.fullmatch(raw) or len(raw) % 4:
        raise NodeOutputError("'output' is not base64")
    try:
        page = base64.b64decode(raw, validate=True)
    except (binascii.Error, ValueError):
        raise NodeOutputError("'output' is not base64") from None
    if len(page) > PAGE:
        raise NodeOutputError(f"a page of {len(page)} bytes (at most {PAGE})")
    size, pages = data.get("bytes", 0), data.get("pages", 0)
    if pages > MAX_PAGES or size > pages * PAGE or (size and pages != -(-size // PAGE)):
        raise NodeOutputError(f"an output of {size} bytes in {pages} pages does not add up")
    return Verdict(mode=data["mode"], ok=data.get("ok", False), run=data.get("run", ""), exit=data.get("exit"),
                   seconds=data.get("seconds"), bytes=size, pages=pages, sha256=data.get("sha256", ""),
                   output=page, page=data.get("page", 0), error=data.get("error"),
                   versions=dict(data.get("versions") or {}))


def assemble(first: Verdict, more: list[Verdict]) -> str:
    """The whole output from its pages, checked against the size and digest the node reported."""
    pages = {0: first.output}
    for v in more:
        if v.run != first.run or v.bytes != first.bytes or v.sha256 != first.sha256:
            raise NodeOutputError("a page of another output came back")
        pages[v.page] = v.output
    if sorted(pages) != list(range(first.pages or 1)):
        raise NodeOutputError(f"pages {sorted(pages)} of {first.pages}")
    data = b"".join(pages[i] for i in range(first.pages or 1))
    if len(data) != first.bytes or (first.sha256 and hashlib.sha256(data).hexdigest() != first.sha256):
        raise NodeOutputError("the pages put together are not the output the node reported")
    return data.decode("utf-8", errors="replace")
