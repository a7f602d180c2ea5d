"""-o json|table|yaml|tsv|none and --query, the az way: results on stdout only."""

from __future__ import annotations

import json
import re
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


# Control characters (C0, DEL, C1) in a value from a node, a tag or an Azure message would reach the
# terminal as escape sequences, or forge rows: tables drop them, tsv escapes tab, newline, CR and backslash
# (the way PostgreSQL's text format does) and drops the rest.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x0c\x0e-\x1f\x7f-\x9f]")
_TSV = {"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"}


def printable(text: str) -> str:
    """A value for a table cell: control characters out, whitespace runs as one space."""
    return " ".join(_CONTROL.sub("", text).split())


def tsv_value(text: str) -> str:
    return re.sub(r"[\\\t\n\r]", lambda m: _TSV[m.group()], _CONTROL.sub("", text))


WIDE = 60
# Column and row names: snake_case keys read as words, with the acronyms and units spelled as
# people write them ('gpus' is GPUs, 'ib_domain' IB domain), not 'Gpus' or 'Ib Domain'.
WORDS = {
    "gpu": "GPU", "gpus": "GPUs", "vcpus": "vCPUs", "cpus": "CPUs", "ib": "IB", "id": "ID", "ids": "IDs",
    "ip": "IP", "ips": "IPs", "os": "OS", "urn": "URN", "hpc": "HPC", "ofed": "OFED", "cuda": "CUDA",
    "nccl": "NCCL", "gib": "GiB", "gb": "GB", "gbps": "Gb/s", "gbs": "GB/s", "nics": "NICs", "nic": "NIC", "sku": "SKU",
    "vm": "VM", "vms": "VMs", "vmss": "VMSS", "infiniband": "InfiniBand", "url": "URL", "api": "API",
}


def header(key: str) -> str:
    words = [WORDS.get(w.lower(), w) for w in printable(str(key)).split("_") if w]
    if words and words[0] == words[0].lower():
        words[0] = words[0][:1].upper() + words[0][1:]
    return " ".join(words)


def listing(items, limit: int = 6) -> str:
    """Names for a message: all of a few, the first few and a count of many (100 scale sets)."""
    items = [str(i) for i in items]
    if len(items) <= limit:
        return ", ".join(items)
    return f"{', '.join(items[:limit - 1])} and {len(items) - limit + 1} more"


def _empty(value: Any) -> bool:
    return isinstance(value, (list, dict)) and not value


def _records(rows: list[dict], columns: list[str]) -> str:
    """Rows with long text (discrepancies, findings) as blocks of 'key  value' lines: nothing cut."""
    width = max(len(header(c)) for c in columns)
    blocks = []
    for row in rows:
        lines = [f"{header(c).ljust(width)}  {printable(_scalar(row.get(c)))}" for c in columns
                 if _scalar(row.get(c))]
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def _grid(rows: list[dict], top: bool = False) -> str:
    """Rows as a table; a nested section with long text as records (top-level lists stay tables)."""
    columns: list[str] = []
    for row in rows:
        for key, value in row.items():
            if key not in columns and not isinstance(value, dict) and not (
                    isinstance(value, list) and any(isinstance(v, (dict, list)) for v in value)):
                columns.append(key)
    cells = [[printable(_scalar(row.get(c))) for c in columns] for row in rows]
    prose = any(isinstance(row.get(c), str) and len(row[c]) > WIDE and row[c].count(" ") >= 8 for row in rows
                for c in columns)  # long text (a message), not a list of names joined by ', '
    if prose and not top:
        return _records(rows, columns)
    widths = [max([len(header(c))] + [len(r[i]) for r in cells]) for i, c in enumerate(columns)]
    head = "  ".join(header(c).ljust(w) for c, w in zip(columns, widths))
    rule = "  ".join("-" * w for w in widths)
    body = ["  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip() for r in cells]
    return "\n".join([head.rstrip(), rule, *body])


def to_table(result: Any) -> str:
    if isinstance(result, list):
        if result and all(isinstance(r, dict) for r in result):
            return _grid(result, top=True)
        if result and all(isinstance(r, (list, tuple)) for r in result):  # --query 'x[].[a, b]'
            return _grid([{f"column{i + 1}": v for i, v in enumerate(r)} for r in result], top=True)
        return "\n".join(printable(_scalar(r)) for r in result)
    if isinstance(result, dict):
        parts, scalars = [], []
        for key, value in result.items():
            if _empty(value):
                continue  # an empty list (no findings, no notes) is no row
            if isinstance(value, list) and all(isinstance(v, dict) for v in value):
                parts.append(f"\n{header(key)}\n{_grid(value)}")
            elif isinstance(value, dict) and any(isinstance(v, (dict, list)) for v in value.values()):
                parts.append(f"\n{header(key)}\n{to_table(value)}")
            else:
                scalars.append((header(key), printable(_scalar(value))))
        width = max((len(k) for k, _ in scalars), default=0)
        head = "\n".join(f"{k.ljust(width)}  {v}".rstrip() for k, v in scalars)
        return (head + "".join(parts)).strip("\n")
    return printable(_scalar(result))


def to_tsv(result: Any) -> str:
    """az's tsv: one line per item of a list, its values separated by tabs, nested objects left out."""
    if isinstance(result, list):
        return "\n".join(_tsv_row(r) for r in result)
    return _tsv_row(result)


def _tsv_row(value: Any) -> str:
    if isinstance(value, dict):
        return "\t".join(tsv_value(_scalar(v)) for v in value.values() if not isinstance(v, (dict, list)) or
                          (isinstance(v, list) and all(not isinstance(x, (dict, list)) for x in v)))
    if isinstance(value, (list, tuple)):
        return "\t".join(tsv_value(_scalar(v)) for v in value if not isinstance(v, (dict, list)))
    return tsv_value(_scalar(value))


def render(result: Any, fmt: str, query: str | None = None, table=None) -> str:
    """The text to print on stdout ('' for none). table: what -o table shows of the result when no
    --query chose (az's table transformers): a summary of the columns that fit on a screen."""
    if fmt == "table" and table is not None and not query:
        result = table(result)
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
