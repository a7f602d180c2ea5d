"""-o json|table|yaml|tsv|none and --query, the az way: results on stdout only."""

from __future__ import annotations

import json
import os
import re
from typing import Any

from .errors import InputError

FORMATS = ("json", "table", "yaml", "tsv", "none")


# jmespath parses and evaluates by recursion: a query of 3,000 nested brackets, or a pipe of 20,000 stages,
# ends in RecursionError. azgpu's results nest a few levels, and the queries az's documentation shows
# are a line long, so a query is held to these before anything runs.
MAX_QUERY = 1000  # characters
MAX_QUERY_DEPTH = 32  # levels of the parsed expression


def check_query(query: str | None) -> None:
    """Raise INVALID_QUERY for a --query that is not JMESPath, or longer or deeper than azgpu evaluates,
    before the command does anything (takes a lock, sends a request, writes a file)."""
    if not query:
        return
    compiled_query(query)


def compiled_query(query: str):
    import jmespath
    from jmespath.exceptions import JMESPathError

    if len(query) > MAX_QUERY:
        raise _query_error(query, ValueError(f"{len(query)} characters, at most {MAX_QUERY}"), limit=True)
    try:
        compiled = jmespath.compile(query)  # syntax only: type errors depend on the result
    except JMESPathError as exc:
        raise _query_error(query, exc) from None
    except RecursionError:
        raise _query_error(query, ValueError(f"nested deeper than {MAX_QUERY_DEPTH} levels"), limit=True) from None
    if _depth(compiled.parsed) > MAX_QUERY_DEPTH:
        raise _query_error(query, ValueError(f"nested deeper than {MAX_QUERY_DEPTH} levels (pipes and "
                                             "sub-expressions count)"), limit=True)
    return compiled


def _depth(node: Any) -> int:
    """The depth of a parsed JMESPath expression (dicts with 'children'), walked without recursion."""
    deepest, stack = 0, [(node, 1)]
    while stack:
        item, depth = stack.pop()
        deepest = max(deepest, depth)
        if deepest > MAX_QUERY_DEPTH:
            return deepest
        if isinstance(item, dict):
            stack.extend((child, depth + 1) for child in item.get("children") or [] if isinstance(child, dict))
    return deepest


def _query_error(query: str, exc: Exception, *, limit: bool = False) -> InputError:
    # jmespath's message spans lines (expression and a caret); the error line stays one line.
    detail = (str(exc).splitlines() or [""])[0].rstrip(": ")
    shown = query if len(query) <= 80 else query[:77] + "..."
    what = "longer or deeper than azgpu evaluates" if limit else "not valid JMESPath"
    return InputError(f"--query '{shown}' is {what}: {detail}", code="INVALID_QUERY",
                      remedy="see https://jmespath.org, e.g. --query 'sizes[].name'")


def apply_query(result: Any, query: str | None) -> Any:
    if not query:
        return result
    from jmespath.exceptions import JMESPathError

    compiled = compiled_query(query)
    try:
        return compiled.search(result)
    except JMESPathError as exc:
        raise _query_error(query, exc) from None
    except RecursionError:
        raise _query_error(query, ValueError("too deep to evaluate"), limit=True) from None


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


def terminal_text(text: str, *, lines: bool = False, escape: str = "python") -> str:
    """Text that can go to a terminal: every character that is not printable (C0 and C1 controls, DEL,
    the bidirectional and other format characters, separators other than the space) is shown as an
    escape instead of reaching the terminal, where it would move the cursor, rewrite what was printed or
    reorder a line. lines: newlines (and tabs) stay. escape: "python" (\\x1b, as a message shows a
    value) or "json" (\\u001b: the same JSON value, for JSON that is already rendered). The one
    filter every output path of the CLI applies to what it prints (options.emit, log, one_line, the
    what-if report)."""
    if text.isprintable():
        return text
    keep = "\n\t" if lines else ""
    return "".join(ch if ch.isprintable() or ch in keep else _escaped(ch, escape) for ch in text)


def _escaped(ch: str, escape: str) -> str:
    if escape != "json":
        return ascii(ch)[1:-1]
    code = ord(ch)
    if code > 0xFFFF:  # JSON spells a character beyond the BMP as a surrogate pair
        code -= 0x10000
        return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"
    return f"\\u{code:04x}"


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


LONG_LIST = 6  # a table cell shows a list of more names than this as its first and last and a count


def _cell(value: Any) -> str:
    """A table cell: a long list of names (18 nodes of a rack) as 'first … last (18)', not 18 lines of a
    narrow column; -o json, yaml and tsv have every item."""
    if isinstance(value, (list, tuple)) and len(value) > LONG_LIST and all(
            not isinstance(v, (dict, list)) for v in value):
        return f"{_scalar(value[0])} … {_scalar(value[-1])} ({len(value)})"
    return _scalar(value)


def _empty(value: Any) -> bool:
    return isinstance(value, (list, dict)) and not value


def _pair(key: str, value: str, width: int) -> str:
    """'key  value', the value wrapped under itself to fit the table width."""
    room = table_width() - width - 2
    if len(value) <= room or room < 20:
        return f"{key.ljust(width)}  {value}".rstrip()
    lines = _wrap(value, room)
    return "\n".join([f"{key.ljust(width)}  {lines[0]}", *(f"{'':{width}}  {line}" for line in lines[1:])])


def _records(rows: list[dict], columns: list[str]) -> str:
    """Rows with long text (discrepancies, findings) as blocks of 'key  value' lines: nothing cut."""
    width = max(len(header(c)) for c in columns)
    blocks = []
    for row in rows:
        lines = [_pair(header(c), printable(" ".join(_scalar(row.get(c)).split())), width) for c in columns
                 if _scalar(row.get(c))]
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


# The widest table azgpu prints when the width is not known (a pipe, a file): what fits a terminal
# of 120 columns. On a terminal, its width (COLUMNS, as the shell sets it, wins).
DEFAULT_WIDTH = 120
NARROWEST = 40  # a narrower width given is laid out at this one: a name and a verdict column still fit
MIN_COLUMN = 10  # a column is wrapped down to this width at most, then columns are left out


def table_width() -> int:
    import shutil
    import sys

    # COLUMNS is the width the user asked for, in a pipe too: one below NARROWEST is a narrow screen, laid out
    # at the narrowest, never at the 120 of an unknown width (0 or a non-number: not set).
    # ASCII digits: str.isdigit() is true of '²', which int() refuses (a traceback from every table).
    columns = os.environ.get("COLUMNS", "").strip()
    if re.fullmatch(r"[0-9]+", columns) and int(columns) > 0:
        return max(NARROWEST, int(columns))
    if sys.stdout.isatty():
        return max(NARROWEST, shutil.get_terminal_size((DEFAULT_WIDTH, 24)).columns)
    return DEFAULT_WIDTH


def _wrap(text: str, width: int) -> list[str]:
    import textwrap

    return textwrap.wrap(text, width, break_long_words=True, break_on_hyphens=False) or [""]


# The columns a narrow table keeps longest, most important first: what names a row, and the verdict
# or state a reader looks for (a retired series, a cluster's state, what a node measured and the fault
# code). Other columns go before them, empty ones first of all.
KEEP = ("id", "name", "node", "status", "state", "retired", "severity", "code", "measured", "check", "expected",
        "location", "zone", "detail", "remedy", "reason")


def _drop_order(columns: list[str], cells: list[list[str]]) -> list[int]:
    """Which column to leave out first, second ...: empty columns, then the others from the right, then
    those of KEEP, least important first."""
    empty = [i for i in reversed(range(len(columns))) if not any(r[i] for r in cells)]
    rank = {key: n for n, key in enumerate(KEEP)}
    other = [i for i in reversed(range(len(columns))) if i not in empty and str(columns[i]) not in rank]
    kept = sorted((i for i in range(len(columns)) if i not in empty and str(columns[i]) in rank),
                  key=lambda i: -rank[str(columns[i])])
    return empty + other + kept


def _fit(columns: list[str], cells: list[list[str]], limit: int) -> tuple[list[str], list[list[str]], list[int],
                                                                          list[str]]:
    """Columns and widths that fit `limit`: the widest columns wrap between words first, then columns are
    left out in _drop_order (named under the table; -o json has everything); a word is broken only when
    a single column is left."""
    dropped: list[str] = []
    order, original = _drop_order(columns, cells), list(columns)
    empty = {columns[i] for i in range(len(columns)) if not any(r[i] for r in cells)}
    while True:
        widths = [max([len(header(c))] + [len(r[i]) for r in cells]) for i, c in enumerate(columns)]
        # Headers wrap too, so a column's floor is its longest word, cell or header.
        words = [max([MIN_COLUMN] + [len(w) for r in cells for w in r[i].split()] + [len(w) for w in header(c).split()])
                 for i, c in enumerate(columns)]
        excess = _shrink(widths, words, sum(widths) + 2 * (len(widths) - 1) - limit)
        if excess <= 0 or len(columns) == 1:
            if excess > 0:
                _shrink(widths, [MIN_COLUMN], excess)
            # The note names what was left out, in the table's order; an empty column said nothing.
            return columns, cells, widths, sorted((c for c in dropped if c not in empty), key=original.index)
        gone = order.pop(0)
        order = [i - (i > gone) for i in order]
        dropped.append(columns[gone])
        columns = columns[:gone] + columns[gone + 1:]
        cells = [r[:gone] + r[gone + 1:] for r in cells]


def _shrink(widths: list[int], floors: list[int], excess: int) -> int:
    """Narrow the widest columns in turn, none below its floor; what is still too much."""
    while excess > 0:
        room = [i for i in range(len(widths)) if widths[i] > floors[i]]
        if not room:
            break
        widest = max(room, key=lambda i: widths[i])
        cut = min(excess, widths[widest] - floors[widest])
        others = [widths[i] for i in room if i != widest]
        if others:  # bring the widest down to the next widest, so columns shrink in turn
            cut = min(cut, max(1, widths[widest] - max(others)))
        widths[widest] -= cut
        excess -= cut
    return excess


def _grid(rows: list[dict], top: bool = False, limit: int | None = None) -> str:
    """Rows as a table that fits the width; a nested section with long text as records (top-level
    lists stay tables). A cell holds text, never JSON: nested objects are left to -o json."""
    columns: list[str] = []
    for row in rows:
        for key, value in row.items():
            if key not in columns and not isinstance(value, dict) and not (
                    isinstance(value, list) and any(isinstance(v, (dict, list)) for v in value)):
                columns.append(key)
    cells = [[printable(_cell(row.get(c))) for c in columns] for row in rows]
    prose = any(isinstance(row.get(c), str) and len(row[c]) > WIDE and row[c].count(" ") >= 8 for row in rows
                for c in columns)  # long text (a message), not a list of names joined by ', '
    if prose and not top:
        return _records(rows, columns)
    columns, cells, widths, dropped = _fit(columns, cells, limit or table_width())
    titles = [_wrap(header(c), w) for c, w in zip(columns, widths, strict=True)]
    lines = []
    for i in range(max(len(t) for t in titles) if titles else 0):
        lines.append("  ".join((t[i] if i < len(t) else "").ljust(w)
                               for t, w in zip(titles, widths, strict=True)).rstrip())
    lines.append("  ".join("-" * w for w in widths))
    for r in cells:
        wrapped = [_wrap(v, w) if len(v) > w else [v] for v, w in zip(r, widths, strict=True)]
        for i in range(max(len(c) for c in wrapped) if wrapped else 0):
            lines.append("  ".join((c[i] if i < len(c) else "").ljust(w)
                                   for c, w in zip(wrapped, widths, strict=True)).rstrip())
    if dropped:
        lines += _wrap(f"({len(dropped)} more column(s) left out to fit {limit or table_width()} characters: "
                       f"{', '.join(header(c) for c in dropped)}; -o json shows everything)", limit or table_width())
    return "\n".join(lines)


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
            elif isinstance(value, dict):
                # A section of its own (never JSON in a cell): key-value lines, or tables for its lists.
                parts.append(f"\n{header(key)}\n{to_table(value)}")
            else:
                scalars.append((header(key), printable(_scalar(value))))
        width = max((len(k) for k, _ in scalars), default=0)
        head = "\n".join(_pair(k, v, width) for k, v in scalars)
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
        return terminal_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n", lines=True, escape="json")
    if fmt == "yaml":
        import yaml  # only when asked

        text = yaml.safe_dump(result, sort_keys=False, allow_unicode=True)
        if terminal_text(text, lines=True) != text:
            # A value YAML prints as it is (a bidirectional override is printable to YAML): escaped instead.
            text = yaml.safe_dump(result, sort_keys=False, allow_unicode=False)
        return text
    if fmt == "tsv":
        text = to_tsv(result)
    else:
        text = to_table(result)
    return terminal_text(text, lines=True) + "\n" if text else ""
