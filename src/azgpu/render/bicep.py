"""Plan -> Bicep through the Jinja2 templates in templates/ (same resources as the ARM JSON)."""

from __future__ import annotations

import re
from functools import cache
from typing import Any

from ..expr import EXPR_TYPES
from ..plan import Plan
from ..shipped_data import cache_dir, data_dir

IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Bicep's limits on a bare property name (Azure/bicep src/Bicep.Core/LanguageConstants.cs:
# MaxIdentifierLength = 255; true, false and null are keywords everywhere). Any other name is quoted.
MAX_IDENTIFIER = 255
KEYWORDS = {"true", "false", "null"}
INDENT = "  "
_ESCAPES = {"\\": "\\\\", "'": "\\'", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
_NEEDS_ESCAPE = re.compile(r"[\\'\x00-\x1f\x7f-\x9f\u2028\u2029]|\$\{")


def _escape(match: re.Match) -> str:
    text = match.group()
    if text == "${":
        return "\\${"
    # Other control characters (and the Unicode line separators) as \u{...}: printable in review,
    # never a line break inside a one-line string.
    return _ESCAPES.get(text) or f"\\u{{{ord(text):X}}}"


def bicep_string(text: str) -> str:
    return f"'{_NEEDS_ESCAPE.sub(_escape, text)}'"


def bicep_key(name: str) -> str:
    """A property name: bare when Bicep reads it as an identifier, quoted otherwise."""
    if IDENTIFIER.fullmatch(name) and name not in KEYWORDS and len(name) <= MAX_IDENTIFIER:
        return name
    return bicep_string(name)


def bicep_value(value: Any, level: int = 0) -> str:
    """A Python value (with plan expressions) as a Bicep expression, nested at `level`."""
    if isinstance(value, EXPR_TYPES):
        return value.bicep()
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return repr(value)
    if isinstance(value, float):
        # Bicep has integer literals only: 0.5 would parse as a property access. json('0.5') is the
        # documented way to write a decimal (e.g. a spot maxPrice).
        return repr(int(value)) if value.is_integer() else f"json('{value!r}')"
    if isinstance(value, str):
        return bicep_string(value)
    pad, inner = INDENT * level, INDENT * (level + 1)
    if isinstance(value, dict):
        if not value:
            return "{}"
        lines = [f"{inner}{bicep_key(k)}: {bicep_value(v, level + 1)}" for k, v in value.items()]
        return "{\n" + "\n".join(lines) + f"\n{pad}}}"
    if isinstance(value, list):
        if not value:
            return "[]"
        return "[\n" + "\n".join(f"{inner}{bicep_value(v, level + 1)}" for v in value) + f"\n{pad}]"
    if value is None:
        return "null"
    raise TypeError(f"cannot write {type(value).__name__} as Bicep")


def _bytecode_cache(jinja2):
    """Compiled templates kept between runs in azgpu's per-user cache directory: compiling them took
    almost half of what `provision render` does after its imports. Any failure to read or write the
    cache only means compiling again."""
    directory = cache_dir()
    if directory is None:
        return None

    class Cache(jinja2.FileSystemBytecodeCache):
        def load_bytecode(self, bucket):
            try:
                super().load_bytecode(bucket)
            except Exception:  # a damaged cache file: compile as if there were none
                bucket.reset()

        def dump_bytecode(self, bucket):
            try:
                super().dump_bytecode(bucket)
            except OSError:
                pass

    return Cache(str(directory), "template-%s.jinja")


@cache
def _environment():
    import jinja2  # imported here: only rendering Bicep needs it

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(data_dir("templates"))),
        bytecode_cache=_bytecode_cache(jinja2),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,  # Bicep, not HTML; values are escaped by bicep_value
    )
    env.filters["bicep"] = bicep_value
    return env


def render_bicep(plan: Plan) -> str:
    return _environment().get_template("main.bicep.j2").render(plan=plan, spec=plan.spec)


def render_bicepparam(plan: Plan) -> str:
    return _environment().get_template("main.bicepparam.j2").render(plan=plan, spec=plan.spec)
