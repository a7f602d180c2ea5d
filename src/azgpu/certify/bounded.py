"""What every certification parser shares: a node's output is evidence, never trusted as a shape.

Each parser reads text a node printed (through Run Command, or a file a user gives): it must be a
string of bounded size, its lines bounded in number and length, and every number in it finite and
of a sane magnitude. A parser ends in a typed result or an OutputError that says in one line what
was wrong; never in a traceback, whatever the text holds (truncated, NaN, huge, nested).
"""

from __future__ import annotations

import math
import re

MAX_TEXT = 2_000_000  # characters of one tool's output read at all (a DCGM r3 JSON is ~100 KB)
MAX_LINES = 50_000
MAX_LINE = 10_000  # a longer line is not one any of these tools prints: it is skipped
MAX_MAGNITUDE = 1e15
_PRINTABLE = re.compile(r"[\x20-\x7e]*")
_UNPRINTABLE = re.compile(r"[^\x20-\x7e]")
_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d{1,3})?")


class OutputError(ValueError):
    """A tool's output that cannot be read as that tool's format."""


def text_of(value: object, what: str) -> str:
    if not isinstance(value, str):
        raise OutputError(f"{what}: output is {type(value).__name__}, not text")
    if len(value) > MAX_TEXT:
        raise OutputError(f"{what}: output of {len(value)} characters (at most {MAX_TEXT})")
    return value


def lines_of(value: object, what: str) -> list[str]:
    """The lines of a tool's output, bounded; over-long lines are dropped (no tool prints them)."""
    lines = text_of(value, what).splitlines()
    if len(lines) > MAX_LINES:
        raise OutputError(f"{what}: {len(lines)} lines of output (at most {MAX_LINES})")
    return [line for line in lines if len(line) <= MAX_LINE]


def number(token: str, what: str) -> float:
    """A finite number of sane magnitude, or OutputError (nan, inf, 1e999 and text are refused)."""
    if not _NUMBER.fullmatch(token):
        raise OutputError(f"{what}: {ascii(token[:30])} is not a number")
    value = float(token)
    if not math.isfinite(value) or abs(value) > MAX_MAGNITUDE:
        raise OutputError(f"{what}: {ascii(token[:30])} is not a finite number of sane size")
    return value


def integer(token: str, what: str) -> int:
    if not re.fullmatch(r"[-+]?\d{1,18}", token):
        raise OutputError(f"{what}: {ascii(token[:30])} is not an integer")
    return int(token)


def printable(value: object, limit: int = 200) -> str:
    """Text from a node, shortened and stripped of anything but printable ASCII (what is shown)."""
    text = (value if isinstance(value, str) else str(value))[: limit * 4]
    if not _PRINTABLE.fullmatch(text):
        text = _UNPRINTABLE.sub(" ", text)
    return text[:limit].strip()
