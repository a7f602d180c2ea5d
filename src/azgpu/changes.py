"""What a deployment would change: the change model, the property diff and the what-if report.

The report follows `az deployment group what-if` (Learn, "ARM template deployment what-if
operation"): one line per resource with its symbol and api-version, property paths under it with
`before => after`, and a summary line. On top, a scale set lists the instances a change deletes,
one by one, because those are GPU nodes. Symbols: `+` create, `-` delete, `~` modify, `=` no
change, `*` ignore (exists, not in the plan, left alone), and `#` refused: a change Azure cannot
apply in place, so `provision create` stops before writing anything. `#` is a symbol ARM does not
use: ARM's `!` means "Deploy" and its `x` "NoEffect". Below it, ARM's own what-if of the same
template, in ARM's vocabulary (`arm_lines`).

Pure and offline: the deployer feeds it the plan's resolved bodies and the live resources in REST
shape.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from .naming import location_name
from .output import terminal_text

SYMBOLS = {"Delete": "-", "Create": "+", "Modify": "~", "NoChange": "=", "Refused": "#", "Ignore": "*"}
REFUSED = SYMBOLS["Refused"]
# ARM's change types and property change types with the symbols `az deployment group what-if` prints.
ARM_SYMBOLS = {"Create": "+", "Delete": "-", "Modify": "~", "NoChange": "=", "Ignore": "*", "Deploy": "!",
               "NoEffect": "x", "Unsupported": "?", "Array": "~"}
LEGEND = {
    "Delete": "Delete",
    "Create": "Create",
    "Modify": "Modify",
    "NoChange": "Nochange",
    "Refused": "Refused (Azure cannot change this in place; create stops before any write)",
    "Ignore": "Ignore (exists, no longer in the plan; left as it is)",
}
SUMMARY = {"Create": "to create", "Delete": "to delete", "Modify": "to modify", "Refused": "refused",
           "NoChange": "no change", "Ignore": "to ignore"}

# Properties Azure takes on a PUT and never returns on a GET, so their absence is no change:
# custom data (Learn, "User data for Azure Virtual Machine": unlike custom data, user data "can be
# queried via GET VM/VMSS API"), passwords, and extensions' protected settings.
WRITE_ONLY = frozenset({"customData", "adminPassword", "protectedSettings"})
NAMES_SHOWN = 20  # instance names in the summary line; the '-' lines above list every one


@dataclass
class PropertyChange:
    path: str  # tags.team, sku.capacity, properties.virtualMachineProfile.storageProfile.imageReference.offer
    change: str  # Create | Delete | Modify
    before: Any = None
    after: Any = None
    refused: bool = False  # Azure cannot apply this one in place

    @property
    def symbol(self) -> str:
        return REFUSED if self.refused else SYMBOLS[self.change]

    def as_dict(self) -> dict[str, Any]:
        out = {"path": self.path, "property_change_type": self.change, "before": self.before, "after": self.after}
        if self.refused:
            out["refused"] = True
        return out


@dataclass
class InstanceChange:
    """One scale-set instance a change deletes (or, for change=Create, a number of new ones)."""

    change: str  # Delete | Create
    instance_id: str | None = None
    name: str = ""
    computer_name: str = ""
    provisioning_state: str = ""
    created: str = ""
    count: int = 1  # Create: how many new instances; Azure assigns their ids

    def as_dict(self) -> dict[str, Any]:
        if self.change == "Create":
            return {"change_type": "Create", "count": self.count}
        return {"change_type": self.change, "instance_id": self.instance_id, "name": self.name,
                "computer_name": self.computer_name, "provisioning_state": self.provisioning_state,
                "created": self.created}


@dataclass
class ResourceChange:
    change: str  # Create | Delete | Modify | NoChange | Refused | Ignore
    type: str
    name: str
    resource_id: str
    api_version: str = ""
    delta: list[PropertyChange] = field(default_factory=list)
    instances: list[InstanceChange] = field(default_factory=list)
    reason: str = ""  # Refused and Ignore: why
    capacity: tuple[int, int] | None = None  # scale sets: (instances now, instances after)

    @property
    def symbol(self) -> str:
        return SYMBOLS[self.change]

    @property
    def deleted_instances(self) -> list[InstanceChange]:
        return [i for i in self.instances if i.change == "Delete"]

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"change_type": self.change, "symbol": self.symbol, "resource_id": self.resource_id,
                               "type": self.type, "name": self.name, "api_version": self.api_version,
                               "delta": [d.as_dict() for d in self.delta]}
        if self.capacity is not None:
            out["instances_before"], out["instances_after"] = self.capacity
            out["instances"] = [i.as_dict() for i in self.instances]
        if self.reason:
            out["reason"] = self.reason
        return out


@dataclass
class WhatIf:
    cluster: str
    resource_group: str
    scope: str  # /subscriptions/ID/resourceGroups/NAME
    changes: list[ResourceChange]
    cost: dict[str, Any] | None = None
    preflight: dict[str, Any] | None = None
    arm: list[dict[str, Any]] | None = None  # ARM's own what-if `changes`, as Azure answered them
    arm_note: str = ""  # why ARM's what-if is absent (--no-arm-validate)

    @property
    def deleted_instances(self) -> list[tuple[ResourceChange, InstanceChange]]:
        """Every instance the deployment would delete, with its scale set."""
        return [(c, i) for c in self.changes for i in c.deleted_instances]

    @property
    def refused(self) -> list[ResourceChange]:
        return [c for c in self.changes if c.change == "Refused"]

    @property
    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for c in self.changes:
            out[c.change] = out.get(c.change, 0) + 1
        return out

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "cluster": self.cluster,
            "resource_group": self.resource_group,
            "scope": self.scope,
            "summary": {SUMMARY[k].replace(" ", "_"): v for k, v in self.counts.items()},
            "instances_to_delete": [i.name for _, i in self.deleted_instances],
            "refused": [{"name": c.name, "reason": c.reason} for c in self.refused],
            "changes": [c.as_dict() for c in self.changes],
        }
        if self.cost is not None:
            out["cost"] = self.cost
        if self.preflight is not None:
            out["preflight"] = self.preflight
        if self.arm is not None:
            out["azure_what_if"] = [arm_change(c) for c in self.arm]
        elif self.arm_note:
            out["azure_what_if_skipped"] = self.arm_note
        return out


# ------------------------------------------------------------------------------------ the diff


def _same(path: str, before: Any, after: Any) -> bool:
    if isinstance(before, str) and isinstance(after, str):
        leaf = path.rsplit(".", 1)[-1]
        if leaf == "id" or path.endswith(".id"):
            return before.lower() == after.lower()  # ARM ids compare case-insensitively
        if path == "location":
            return location_name(before) == location_name(after)
    if isinstance(before, bool) or isinstance(after, bool):
        return before is after
    return before == after


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def diff(desired: Any, live: Any, path: str = "") -> list[PropertyChange]:
    """The changes a PUT of `desired` makes to `live`, looking only at what `desired` sets.

    Properties Azure adds (provisioningState, uniqueId, timeCreated, ids of children, defaults)
    are not in `desired`, so they never show; write-only ones are taken as unchanged when absent.
    Lists compare element by element when both have the same length, whole otherwise.
    """
    if isinstance(desired, dict):
        if not isinstance(live, dict):
            return [PropertyChange(path, "Modify", live, desired)]
        out: list[PropertyChange] = []
        for key, value in desired.items():
            where = _join(path, key)
            if live.get(key) is None:
                if key in WRITE_ONLY or value in (None, {}, []):
                    continue
                out.append(PropertyChange(where, "Create", None, value))
            else:
                out.extend(diff(value, live[key], where))
        return out
    if isinstance(desired, list):
        if not isinstance(live, list) or len(live) != len(desired):
            return [PropertyChange(path, "Modify", live, desired)]
        out = []
        for i, (want, have) in enumerate(zip(desired, live, strict=True)):
            out.extend(diff(want, have, f"{path}[{i}]"))
        return out
    return [] if _same(path, live, desired) else [PropertyChange(path, "Modify", live, desired)]


def compare(desired: dict[str, Any], live: dict[str, Any]) -> list[PropertyChange]:
    """diff(), and when a PUT goes out at all: the tags it drops, since a PUT replaces the tag set."""
    delta = diff(desired, live)
    if delta and "tags" in desired:
        wanted = desired.get("tags") or {}
        for key, value in sorted((live.get("tags") or {}).items()):
            if key not in wanted:
                delta.append(PropertyChange(f"tags.{key}", "Delete", value, None))
    return delta


# ------------------------------------------------------------------------------------ the report


def _value(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "))


def _paint(text: str, symbol: str, color: bool) -> str:
    # Resource ids, paths and values come from Azure's what-if too: their control characters are shown as
    # escapes before azgpu adds its own colour codes.
    text = terminal_text(text)
    if not color:
        return text
    code = {"-": "31", REFUSED: "31;1", "!": "34", "+": "32", "~": "35", "*": "90", "=": "0"}.get(symbol, "0")
    return f"\x1b[{code}m{text}\x1b[0m"


def _resource_lines(c: ResourceChange, color: bool) -> list[str]:
    api = f" [{c.api_version}]" if c.api_version else ""
    lines = [_paint(f"  {c.symbol} {c.type}/{c.name}{api}", c.symbol, color)]
    for d in c.delta:
        if d.change == "Modify":
            text = f"    {d.symbol} {d.path}: {_value(d.before)} => {_value(d.after)}"
        elif d.change == "Create":
            text = f"    {d.symbol} {d.path}: {_value(d.after)}"
        else:
            text = f"    {d.symbol} {d.path}: {_value(d.before)}"
        lines.append(_paint(text, d.symbol, color))
    for i in c.instances:
        if i.change == "Create":
            lines.append(_paint(f"    + {i.count} new instance(s) (Azure assigns their ids)", "+", color))
        else:
            extra = ", ".join(x for x in (i.computer_name, i.provisioning_state, f"created {i.created}" if i.created
                                          else "") if x)
            lines.append(_paint(f"    - instance {i.instance_id}: {i.name}" + (f" ({extra})" if extra else ""), "-",
                                color))
    if c.reason:
        lines.append(_paint(f"      {c.reason}", c.symbol, color))
    return lines


def format_what_if(w: WhatIf, *, color: bool = False) -> str:
    """The what-if as `az deployment group what-if` prints it, with instances and the cost added."""
    used = set()
    for c in w.changes:
        used.add(c.symbol)
        used.update(d.symbol for d in c.delta)
        used.update("+" if i.change == "Create" else "-" for i in c.instances)
    present = [k for k, symbol in SYMBOLS.items() if symbol in used]
    lines = ["Resource and property changes are indicated with " + ("these symbols:" if len(present) > 1
                                                                     else "this symbol:")]
    lines += [f"  {SYMBOLS[k]} {LEGEND[k]}" for k in present]
    lines += ["", "The deployment will update the following scope:", "", f"Scope: {w.scope}", ""]
    for c in w.changes:
        lines += _resource_lines(c, color)
    counts = w.counts
    summary = ", ".join(f"{counts[k]} {SUMMARY[k]}" for k in ("Create", "Delete", "Modify", "Refused", "NoChange",
                                                               "Ignore") if counts.get(k))
    lines += ["", f"Resource changes: {summary or 'none'}."]
    deleted = w.deleted_instances
    if deleted:
        names = ", ".join(i.name for _, i in deleted[:NAMES_SHOWN])
        more = f" and {len(deleted) - NAMES_SHOWN} more" if len(deleted) > NAMES_SHOWN else ""
        lines += [_paint(line, "-", color) for line in _fitted(
            f"Instances to delete: {len(deleted)} GPU node(s): {names}{more}. 'provision create' "
            "deletes them only with --allow-scale-in or a yes at its prompt.")]
    for c in w.refused:
        lines += [_paint(line, REFUSED, color) for line in _fitted(f"Refused: {c.name}: {c.reason}")]
    if w.cost is not None:
        lines += _fitted(f"Cost: {cost_line(w.cost)}")
    if w.arm is not None:
        lines += ["", *_fitted("Azure Resource Manager's own what-if of the same template (az deployment group "
                               "what-if), including what azgpu does not set:"), ""]
        lines += arm_lines(w.arm, color=color)
    elif w.arm_note:
        lines += ["", *_fitted(f"Azure Resource Manager's own what-if: {w.arm_note}")]
    return "\n".join(lines) + "\n"


def _fitted(text: str) -> list[str]:
    """A summary line wrapped to the terminal's width (120 in a pipe), continued under an indent."""
    import textwrap

    from .output import table_width

    return textwrap.wrap(text, table_width(), subsequent_indent="  ", break_long_words=False,
                         break_on_hyphens=False) or [""]


# ------------------------------------------------------------------------------------ ARM's what-if


def _masked(path: str, value: Any) -> Any:
    """Write-only values (custom data, passwords) are not printed: they may hold secrets."""
    if path.rsplit(".", 1)[-1] in WRITE_ONLY:
        return "(write-only, not shown)"
    if isinstance(value, dict):
        return {k: _masked(f"{path}.{k}", v) for k, v in value.items()}
    if isinstance(value, list):
        return [_masked(path, v) for v in value]
    return value


def _flat(delta: list[dict[str, Any]], prefix: str = "") -> list[dict[str, Any]]:
    """ARM's nested property changes (Array children by index) as flat paths: a.b[0].c."""
    out = []
    for d in delta or []:
        path = d.get("path") or ""
        where = (f"{prefix}[{path}]" if path.isdigit() else f"{prefix}.{path}" if prefix else path) if path else prefix
        kind = d.get("propertyChangeType") or "Modify"
        if d.get("children"):
            out += _flat(d["children"], where)
            continue
        out.append({"path": where, "change": kind, "before": _masked(where, d.get("before")),
                    "after": _masked(where, d.get("after"))})
    return out


def arm_change(c: dict[str, Any]) -> dict[str, Any]:
    """One of ARM's resource changes for -o json: its id, change type, symbol and flat property deltas."""
    kind = c.get("changeType") or "Unsupported"
    out = {"resource_id": c.get("resourceId"), "change_type": kind, "symbol": ARM_SYMBOLS.get(kind, "?"),
           "delta": [{**d, "symbol": ARM_SYMBOLS.get(d["change"], "?")} for d in _flat(c.get("delta") or [])]}
    if c.get("unsupportedReason"):
        out["reason"] = c["unsupportedReason"]
    return out


def _short(resource_id: str) -> str:
    """provider/type/name from a resource id, as az prints it."""
    parts = (resource_id or "").split("/")
    lowered = [p.lower() for p in parts]
    if "providers" in lowered:
        i = len(lowered) - 1 - lowered[::-1].index("providers")
        return "/".join(parts[i + 1:])
    return resource_id


def arm_lines(changes: list[dict[str, Any]], *, color: bool = False) -> list[str]:
    """ARM's what-if result in its own vocabulary, the way `az deployment group what-if` prints it."""
    lines = []
    counts: dict[str, int] = {}
    for c in changes:
        entry = arm_change(c)
        counts[entry["change_type"]] = counts.get(entry["change_type"], 0) + 1
        api = ((c.get("after") or c.get("before") or {}).get("apiVersion"))
        lines.append(_paint(f"  {entry['symbol']} {_short(entry['resource_id'])}" + (f" [{api}]" if api else ""),
                            entry["symbol"], color))
        for d in entry["delta"]:
            if d["change"] == "Create":
                text = f"    {d['symbol']} {d['path']}: {_value(d['after'])}"
            elif d["change"] == "Delete":
                text = f"    {d['symbol']} {d['path']}: {_value(d['before'])}"
            else:
                text = f"    {d['symbol']} {d['path']}: {_value(d['before'])} => {_value(d['after'])}"
            lines.append(_paint(text, d["symbol"], color))
        if entry.get("reason"):
            lines.append(terminal_text(f"      {entry['reason']}"))
    order = ("Create", "Delete", "Modify", "Deploy", "NoChange", "NoEffect", "Ignore", "Unsupported")
    words = {"Create": "to create", "Delete": "to delete", "Modify": "to modify", "Deploy": "to deploy",
             "NoChange": "no change", "NoEffect": "no effect", "Ignore": "to ignore", "Unsupported": "unsupported"}
    summary = ", ".join(f"{counts[k]} {words[k]}" for k in order if counts.get(k))
    lines += ["", f"Azure's resource changes: {summary or 'none'}."]
    return lines


def _rate(value: float) -> str:
    return f"{value:,.4f}".rstrip("0").rstrip(".")


def cost_line(cost: dict[str, Any]) -> str:
    """One line for a cost estimate (pricing.Estimate.as_dict()), known or not."""
    if cost.get("status") != "known":
        return f"unknown ({cost.get('reason', 'no price')})"
    cur = cost["currency"]
    text = (f"{cost['hourly']:,.2f} {cur}/hour, {cost['monthly']:,.0f} {cur}/month for {cost['nodes']} x "
            f"{cost['size']} at {_rate(cost['per_node_hourly'])} {cur}/hour each ({cost['price_type']}, Linux, "
            f"{cost['location']}; {cost['source']})")
    before = cost.get("before")
    if before and before.get("status") == "known" and before.get("nodes") not in (0, cost.get("nodes")):
        text += f"; now {before['hourly']:,.2f} {cur}/hour for {before['nodes']} node(s)"
    return text
