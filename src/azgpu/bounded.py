"""Reading what azgpu does not control: a node's verdict, Azure's answers, a state file.

Whatever comes from outside is read with limits before anything looks inside it: a size, a nesting
depth (Python's json module recurses, and so does most code that walks the result: a verdict nested
1,500 arrays deep fits in Run Command's 4 KB and ended in RecursionError), numbers JSON allows (no
NaN or Infinity), and then the types the reader expects. What does not fit raises BoundedError, which
each reader turns into its own clean answer: a node `inconclusive`, a coded error for Azure or a file.

Waits are bounded the same way: `retry_after` is the one reading of Azure's Retry-After header (the
retry policy, the pollers and azgpu's own polling loops call it), and `seconds` checks any other
duration that reaches a wait.
"""

from __future__ import annotations

import json
import math
import re
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

MAX_DEPTH = 64  # deeper than any answer azgpu reads (a what-if delta nests a few levels), far below recursion
# The longest wait Azure documents asking for: Compute's throttling may answer Retry-After: 1200 (Learn,
# "Troubleshooting API throttling errors"). Anything longer, or unreadable, is not waited for as asked.
MAX_RETRY_AFTER = 1200.0


class BoundedError(ValueError):
    """Input outside the limits: too large, too deep, not JSON, not finite, or not the expected type.
    `reason`: size | depth | syntax | number | type."""

    def __init__(self, message: str, reason: str = "type"):
        super().__init__(message)
        self.reason = reason


def _refuse_constant(name: str) -> Any:
    raise BoundedError(f"holds {name}, which JSON does not allow", "number")


def loads(text: str | bytes, *, max_bytes: int, max_depth: int = MAX_DEPTH, what: str = "the answer") -> Any:
    """json.loads with limits: at most `max_bytes` characters, nested at most `max_depth` deep, finite
    numbers only. Raises BoundedError (never RecursionError or another exception) for anything else."""
    if isinstance(text, (bytes, bytearray)):
        if len(text) > max_bytes:
            raise BoundedError(f"{what} is {len(text)} bytes long (at most {max_bytes})", "size")
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError:
            raise BoundedError(f"{what} is not UTF-8 text", "syntax") from None
    if not isinstance(text, str):
        raise BoundedError(f"{what} is {type(text).__name__}, not text")
    if len(text) > max_bytes:
        raise BoundedError(f"{what} is {len(text)} characters long (at most {max_bytes})", "size")
    try:
        data = json.loads(text, parse_constant=_refuse_constant)
    except BoundedError as exc:
        raise BoundedError(f"{what} {exc}", exc.reason) from None
    except RecursionError:
        raise BoundedError(f"{what} is nested deeper than {max_depth} levels", "depth") from None
    except ValueError as exc:
        raise BoundedError(f"{what} is not JSON ({str(exc)[:80]})", "syntax") from None
    check_depth(data, max_depth, what)
    return data


def check_depth(data: Any, max_depth: int = MAX_DEPTH, what: str = "the answer") -> None:
    """BoundedError when lists and objects nest deeper than max_depth (walked without recursion)."""
    stack = [(data, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, dict):
            children = value.values()
        elif isinstance(value, list):
            children = value
        else:
            continue
        if depth > max_depth:
            raise BoundedError(f"{what} is nested deeper than {max_depth} levels", "depth")
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))


# ------------------------------------------------------------------------------ types


def obj(value: Any, what: str) -> dict[str, Any]:
    """value when it is a JSON object; BoundedError naming `what` otherwise. None reads as {}."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise BoundedError(f"{what} is {_kind(value)}, not an object")
    return value


def array(value: Any, what: str, limit: int = 100000) -> list[Any]:
    """value when it is a JSON array of at most `limit` items; None reads as []."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise BoundedError(f"{what} is {_kind(value)}, not a list")
    if len(value) > limit:
        raise BoundedError(f"{what} has {len(value)} items (at most {limit})")
    return value


def text(value: Any, what: str, limit: int = 4096, *, optional: bool = True) -> str | None:
    """value when it is a string of at most `limit` characters (None when absent and optional)."""
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise BoundedError(f"{what} is {_kind(value)}, not a string")
    if len(value) > limit:
        raise BoundedError(f"{what} is {len(value)} characters long (at most {limit})")
    return value


def _kind(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "true or false", int: "a number",
            float: "a number", type(None): "null"}.get(type(value), type(value).__name__)


# ------------------------------------------------------------------------------ waits


_DELAY = re.compile(r"\d{1,12}(?:\.\d{1,6})?")


def retry_after(value: Any, *, default: float | None = None, maximum: float = MAX_RETRY_AFTER,
                milliseconds: bool = False) -> float | None:
    """Seconds to wait for a Retry-After header value (RFC 9110: delay-seconds or an HTTP-date), at most
    `maximum`; `default` for a value that is absent or is neither (abc, -5, inf, nan, 1e10).
    milliseconds: the value is retry-after-ms / x-ms-retry-after-ms."""
    if value is None:
        return default
    raw = str(value).strip()
    if _DELAY.fullmatch(raw):
        delay = float(raw) / (1000.0 if milliseconds else 1.0)
    elif milliseconds or len(raw) > 64:
        return default
    else:
        try:
            when = parsedate_to_datetime(raw)
        except (TypeError, ValueError, IndexError, OverflowError):
            return default
        if when is None:
            return default
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        delay = (when - datetime.now(UTC)).total_seconds()
    return min(max(0.0, delay), maximum)


def retry_after_of(headers: Any, *, default: float | None = None, maximum: float = MAX_RETRY_AFTER) -> float | None:
    """retry_after of a response's headers (any mapping, names in any case): Retry-After, else the
    millisecond forms azure-core also reads."""
    found = {str(k).lower(): v for k, v in (headers or {}).items()}
    if found.get("retry-after"):
        return retry_after(found["retry-after"], default=default, maximum=maximum)
    for name in ("retry-after-ms", "x-ms-retry-after-ms"):
        if found.get(name):
            return retry_after(found[name], default=default, maximum=maximum, milliseconds=True)
    return default


def seconds(value: Any, *, minimum: float = 0.0, maximum: float) -> float | None:
    """value as a finite number of seconds in [minimum, maximum], or None when it is not one."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if not math.isfinite(value) or not minimum <= value <= maximum:
        return None
    return float(value)
