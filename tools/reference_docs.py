"""Writes the reference pages that are made from the code, not by hand:

- docs/error-codes.md: every stable error code azgpu's source gives a user, with what it means
  (the message, placeholders as ‹…›) and the remedy, read from the calls that raise or report it;
- docs/fake-coverage.md: every Azure REST operation the fake (azgpu.testing) answers, as moto
  publishes its coverage, read from the fake's route table;
- docs/node-faults.md: every fault of a simulated node, read from the fake's node fault table.

Run `python tools/reference_docs.py` after changing either; tests/test_docs.py fails while a page
is stale.
"""

from __future__ import annotations

import ast
import re
import sys
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SRC = REPO / "src" / "azgpu"
DOCS = REPO / "docs"
CODE = re.compile(r"[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+")
# The call that makes a finding (keywords only: code=, message=, remedy=, severity=).
FINDING_MAKERS = {"Finding"}
# Exceptions by their exit status (azgpu.errors; exceptions of other modules derive from these).
EXIT = {"InputError": 2, "ProfileError": 2, "ValidationFailed": 2, "AzgpuError": 2, "NotFoundError": 3,
        "AzureError": 1}


def _table_value(node: ast.AST) -> str:
    """A placeholder that names only rows of azgpu.resource_types (an ARM type, an example resource ID)
    is fixed text: written out as the user reads it. Anything else is filled in at run time: ‹…›."""
    from azgpu import resource_types

    names = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
    if not names or not all(n.isupper() and hasattr(resource_types, n) for n in names):
        return "‹…›"
    return str(eval(compile(ast.Expression(node), "<table>", "eval"), {n: getattr(resource_types, n) for n in names}))


def _text(node: ast.AST | None) -> str:
    """A message as the user reads it: literal text, with ‹…› where a value is filled in."""
    if node is None:
        return ""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else _table_value(v.value) for v in node.values)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _text(node.left) + _text(node.right)
    return "‹…›"


def _name(func: ast.AST) -> str:
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""


def _kw(call: ast.Call, name: str) -> ast.AST | None:
    return next((k.value for k in call.keywords if k.arg == name), None)


def _codes(node: ast.AST | None) -> list[str]:
    """The code(s) a node gives: a literal, or either branch of `A if ... else B`."""
    if isinstance(node, ast.IfExp):
        return _codes(node.body) + _codes(node.orelse)
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and CODE.fullmatch(node.value):
        return [node.value]
    return []


def _assigned(body: list[ast.stmt], name: str, nested: bool = False) -> ast.AST | None:
    """What `name = ...` in these statements (with nested: also in their branches) assigns first."""
    statements = [n for st in body for n in ast.walk(st)] if nested else body
    return next((st.value for st in statements if isinstance(st, ast.Assign)
                 and any(isinstance(t, ast.Name) and t.id == name for t in st.targets)), None)


def error_codes() -> dict[str, list[dict]]:
    """code -> the distinct (kind, message, remedy, module) it is given with."""
    found: dict[str, list[dict]] = defaultdict(list)

    def add(codes: list[str], kind: str, message: ast.AST | None, remedy: ast.AST | None, module: str,
            constants: dict) -> None:
        message, remedy = constants.get(getattr(message, "id", None),
                                        message), constants.get(getattr(remedy, "id", None), remedy)
        entry = {"kind": kind, "message": " ".join(_text(message).split()) if message is not None else "",
                 "remedy": " ".join(_text(remedy).split()) if remedy is not None else "", "module": module}
        for code in codes:
            if entry not in found[code]:
                found[code].append(entry)

    trees = {}
    for path in sorted(SRC.rglob("*.py")):
        module = path.relative_to(SRC.parent).with_suffix("").as_posix().replace("/", ".")
        if not module.startswith("azgpu.testing"):  # the fake answers with Azure's codes, not azgpu's
            trees[module] = ast.parse(path.read_text(), str(path))
    # Exceptions that carry a code of their own: raising one without code= gives it.
    class_codes = {node.name: _codes(_assigned(node.body, "default_code"))
                   for tree in trees.values() for node in ast.walk(tree) if isinstance(node, ast.ClassDef)}
    for module, tree in trees.items():
        # Module-level texts (a remedy kept in a constant) read where a call names them.
        constants = {t.id: st.value for st in tree.body if isinstance(st, ast.Assign)
                     for t in st.targets if isinstance(t, ast.Name)}
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                # An exception class's own code: its docstring says what it means.
                add(_codes(_assigned(node.body, "default_code")), "error", ast.Constant(ast.get_docstring(node) or ""),
                    None, module, constants)
            body = getattr(node, "body", None)
            if isinstance(body, list) and not isinstance(node, ast.ClassDef):
                # `code = "X"` beside `remedy = ...`: an error built from variables.
                for branch in (body, getattr(node, "orelse", None) or []):
                    codes = _codes(_assigned(branch, "code"))
                    if codes:
                        add(codes, "error", None, _assigned(branch, "remedy", nested=True), module, constants)
            if isinstance(node, ast.Dict):
                # azure_errors: Azure's error code -> Mapping(exception class, azgpu's code, remedy).
                for key, value in zip(node.keys, node.values, strict=True):
                    if (isinstance(key, ast.Constant) and isinstance(value, ast.Call) and _name(value.func) == "Mapping"
                            and len(value.args) > 1):
                        add(_codes(value.args[1]), "error, exit " + str(EXIT.get(_name(value.args[0]), 1)),
                            ast.Constant(f"Azure answered {key.value}"), value.args[2] if len(value.args) > 2 else None,
                            module, constants)
            if not isinstance(node, ast.Call):
                continue
            name = _name(node.func)
            kind = "error, exit " + str(EXIT[name]) if name in EXIT else "error"
            message, remedy = (node.args[0] if node.args else _kw(node, "message")), _kw(node, "remedy")
            codes = _codes(_kw(node, "code"))
            if not codes and class_codes.get(name) and name not in EXIT:
                codes = class_codes[name]
            if codes and name in FINDING_MAKERS:
                given = _kw(node, "severity")
                severity = given.value if isinstance(given, ast.Constant) and given.value in ("warning",
                                                                                              "note") else "error"
                kind = "warning" if severity == "warning" else "note" if severity == "note" else "error, exit 2"
            if codes:
                add(codes, kind, message, remedy, module, constants)
    for entries in found.values():
        entries.sort(key=lambda e: (not e["message"], not e["remedy"]))
    return dict(sorted(found.items()))


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ") or "-"


def error_codes_page() -> str:
    codes = error_codes()
    out = ["# Error codes", "",
           "Every problem azgpu reports carries a stable code: `ERROR: [CODE] message`, then `remedy: ...`.",
           "Exit status 2 is bad input (nothing was created), 1 an Azure or operation failure, 3 not found,",
           "130 interrupted; warnings and notes do not stop a command. This page is generated from the source",
           "(`python tools/reference_docs.py`); ‹…› stands for a value filled in at run time.", "",
           f"{len(codes)} codes.", "",
           "| code | kind | what it means | what to do |", "|---|---|---|---|"]
    for code, entries in codes.items():
        for entry in entries:
            out.append(f"| `{code}` | {entry['kind']} | {_cell(entry['message'])} | {_cell(entry['remedy'])} |")
    return "\n".join(out) + "\n"


def _readable(pattern: str) -> str:
    path = re.sub(r"\(\?P<(\w+)>[^)]*\)", r"{\1}", pattern)
    path = re.sub(r"\(\?:([^)|]*)\)\?", r"[\1]", path)
    return path.replace("\\.", ".").replace("\\", "").rstrip("$").lstrip("^")


def fake_coverage() -> list[tuple[str, str, str, str, str]]:
    """(provider module, method, path, api-versions, what the handler does) for every route the fake
    answers, as the routes registered themselves (azgpu.testing.routes.ROUTES)."""
    from azgpu.testing import retail_prices
    from azgpu.testing.routes import ROUTES

    rows = []
    for entry in ROUTES:
        handler = entry.handler
        doc = (handler.__doc__ or "").strip().split("\n")[0] or handler.__name__.strip("_").replace("_", " ")
        rows.append((handler.__module__.rsplit(".", 1)[-1], entry.method, _readable(entry.pattern.pattern),
                     ", ".join(entry.api_versions), doc))
    rows.append(("retail_prices", "GET", f"https://{retail_prices.HOST}{retail_prices.PATH}",
                 retail_prices.API_VERSION, "the Azure Retail Prices API, from a recording"))
    return rows


def fake_coverage_page() -> str:
    rows = fake_coverage()
    out = ["# What the fake covers", "",
           "The REST operations `azgpu.testing.FakeAzure` answers (and so `--simulate`), generated from its route",
           "table (`python tools/reference_docs.py`), as moto publishes its coverage. Anything else answers",
           "`NotImplementedInFake`, loudly, and never reaches the network. Paths are under",
           "`https://management.azure.com` unless they name a host.", "",
           "The api-version column is the REST API version whose shapes the fake answers in, as each route",
           "registers it (`API_VERSION` in its module under `src/azgpu/testing/routes/`). The fake answers",
           "whatever api-version a client sends; where an answer differs by version, the route says so.", "",
           f"{len(rows)} operations.", ""]
    by_module: dict[str, list] = defaultdict(list)
    for module, method, path, versions, doc in rows:
        by_module[module].append((method, path, versions, doc))
    for module in sorted(by_module):
        out += [f"## {module}", "", "| method | path | api-version | notes |", "|---|---|---|---|"]
        out += [f"| {m} | `{_cell(p)}` | {_cell(v)} | {_cell(d)} |" for m, p, v, d in by_module[module]]
        out.append("")
    return "\n".join(out).rstrip("\n") + "\n"


def node_faults_page() -> str:
    """Every fault of a simulated node, from the fake's one table of them (azgpu.testing.node_fault_table)."""
    from azgpu.testing.node_fault_table import NODE_FAULTS

    def value(row) -> str:
        if row.kind == "flag":
            return "(a flag: `True` in Python)"
        if row.kind == "choice":
            return " or ".join(f"`{c}`" for c in row.choices)
        if row.metavar:
            return f"`{row.metavar}`"
        return {"int": "a whole number", "float": "a number"}.get(row.kind, "text")

    out = ["# Faults of a simulated node", "",
           "What `provision simulate fault` (and `FakeAzure.make_unhealthy(instance, ...)` /",
           "`unhealthy_next(count, ...)` in Python) can break on a simulated node, generated from the fake's",
           "table of them (`src/azgpu/testing/node_fault_table.py`, `python tools/reference_docs.py`). A new fault",
           "is a row there: its keyword, its option, its help and its effect on the node.", "",
           f"{len(NODE_FAULTS)} faults.", "",
           "| option | Python keyword | value | what it does |", "|---|---|---|---|"]
    out += [f"| `{row.option}` | `{row.name}` | {_cell(value(row))} | {_cell(row.help)} |" for row in NODE_FAULTS]
    return "\n".join(out) + "\n"


PAGES = {"error-codes.md": error_codes_page, "fake-coverage.md": fake_coverage_page, "node-faults.md": node_faults_page}


def main() -> int:
    for name, make in PAGES.items():
        (DOCS / name).write_text(make())
        print(f"wrote docs/{name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
