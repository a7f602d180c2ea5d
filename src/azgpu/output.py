"""-o json|table|yaml|tsv|none and --query, the az way: results on stdout only."""

from __future__ import annotations

import json
from typing import Any

from .errors import InputError

FORMATS = ("json", "table", "yaml", "tsv", "none")


def check_query(query: str | None) -> None:
    """Raise INVALID_QUERY for a --query that is not JMESPath, before the command does anything."""
    if not query:
        return
    import jmespath
    from jmespath.exceptions import JMESPathError

    try:
        jmespath.compile(query)  # syntax only: type errors depend on the result
    except JMESPathError as exc:
        raise _query_error(query, exc) from None


def _query_error(query: str, exc: Exception) -> InputError:
    # jmespath's message spans lines (expression and a caret); the error line stays one line.
    detail = (str(exc).splitlines() or [""])[0].rstrip(": ")
    return InputError(f"--query '{query}' is not valid JMESPath: {detail}", code="INVALID_QUERY",
                      remedy="see https://jmespath.org, e.g. --query 'sizes[].name'")


def apply_query(result: Any, query: str | None) -> Any:
    if not query:
        return result
    import jmespath  # only when asked
    from jmespath.exceptions import JMESPathError

    try:
        return jmespath.search(query, result)
    except JMESPathError as exc:
        raise _query_error(query, exc) from None


def _scalar(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (list, tuple)) and all(not isinstance(v, (dict, list)) for v in value):
        return ", ".join(_scalar(v) for v in value)
    if isinstance(value, (dict, list)):
        return json.dumps(value, separators=(",", ":"))
    return str(value)


WIDE = 60


def _records(rows: list[dict], columns: list[str]) -> str:
    """Rows with long text (discrepancies, findings) as blocks of 'key  value' lines: nothing cut."""
    width = max(len(c) for c in columns)
    blocks = []
    for row in rows:
        lines = [f"{c.replace('_', ' ').title().ljust(width)}  {' '.join(_scalar(row.get(c)).split())}" for c in columns
                 if _scalar(row.get(c))]
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def _grid(rows: list[dict]) -> str:
    columns: list[str] = []
    for row in rows:
        for key, value in row.items():
            if key not in columns and not isinstance(value, dict) and not (
                    isinstance(value, list) and any(isinstance(v, (dict, list)) for v in value)):
                columns.append(key)
    cells = [[" ".join(_scalar(row.get(c)).split()) for c in columns] for row in rows]
    if any(len(v) > WIDE and v.count(" ") >= 8 for r in cells for v in r):  # prose, not a list of names
        return _records(rows, columns)
    widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(columns)]
    head = "  ".join(c.replace("_", " ").title().ljust(w) for c, w in zip(columns, widths))
    rule = "  ".join("-" * w for w in widths)
    body = ["  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip() for r in cells]
    return "\n".join([head.rstrip(), rule, *body])


def to_table(result: Any) -> str:
    if isinstance(result, list):
        if result and all(isinstance(r, dict) for r in result):
            return _grid(result)
        return "\n".join(_scalar(r) for r in result)
    if isinstance(result, dict):
        parts, scalars = [], []
        for key, value in result.items():
            if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
                parts.append(f"\n{key.replace('_', ' ').title()}\n{_grid(value)}")
            elif isinstance(value, dict) and value and any(isinstance(v, (dict, list)) for v in value.values()):
                parts.append(f"\n{key.replace('_', ' ').title()}\n{to_table(value)}")
            else:
                scalars.append((key, _scalar(value)))
        width = max((len(k) for k, _ in scalars), default=0)
        head = "\n".join(f"{k.replace('_', ' ').title().ljust(width)}  {v}" for k, v in scalars)
        return (head + "".join(parts)).strip("\n")
    return _scalar(result)


def to_tsv(result: Any) -> str:
    if isinstance(result, list):
        return "\n".join(to_tsv(r) for r in result)
    if isinstance(result, dict):
        return "\t".join(_scalar(v) for v in result.values() if not isinstance(v, (dict, list)) or
                         (isinstance(v, list) and all(not isinstance(x, (dict, list)) for x in v)))
    return _scalar(result)


def render(result: Any, fmt: str, query: str | None = None) -> str:
    """The text to print on stdout ('' for none)."""
    result = apply_query(result, query)
    if fmt == "none":
        return ""
    if fmt == "json":
        return json.dumps(result, indent=2, ensure_ascii=False) + "\n"
    if fmt == "yaml":
        import yaml  # only when asked

        return yaml.safe_dump(result, sort_keys=False, allow_unicode=True)
    if fmt == "tsv":
        text = to_tsv(result)
    else:
        text = to_table(result)
    return text + "\n" if text else ""
