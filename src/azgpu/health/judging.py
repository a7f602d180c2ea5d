"""Judge one node's captured check output exactly as the health gate does, without Azure.

    from azgpu.health import judge
    result = judge(open("out.txt").read(), "Standard_ND96isr_H100_v5")
    result.status        # passed | failed | inconclusive | unreachable
    result.as_dict()     # what 'provision check -o json' shows for a node

`output` is what the node script printed (its last line is the verdict), or a Run Command result (the
REST JSON, as text or parsed, whose stdout holds it). The size must be one a profile knows (its
expectations are what the script printed against); the node's identity fields stay as the caller gives
them, since a captured output carries nothing Azure vouches for.
"""

from __future__ import annotations

from typing import Any

from ..bounded import BoundedError, loads
from .results import NodeRef, NodeResult, output_streams, result_of


def judge(output: Any, size: str, *, name: str = "node", scale_set: str = "", instance_id: str = "",
          resource_id: str = "", vm_id: str | None = None) -> NodeResult:
    """The NodeResult the gate would give this output on a node of `size` (a name or alias a profile
    knows; InputError UNKNOWN_SIZE otherwise). Never raises for what the output holds."""
    from ..profiles import find_size

    size_name = find_size(size)[1].name
    stdout, stderr = _streams(output)
    return result_of(NodeRef(scale_set, instance_id, resource_id, name, vm_id, size_name), stdout, stderr)


MAX_OUTPUT = 8 * 1024 * 1024  # what `check --from-output` reads at most (4 MB) and then some


def _streams(output: Any) -> tuple[str, str]:
    """(stdout, stderr) of the output: a Run Command result (REST JSON, as text or parsed) or the script's own
    output. JSON that is not a Run Command result azgpu can read (too large, too deep, NaN, another shape) is
    read as plain output: it holds no verdict line, and the node is judged on that, never with a traceback."""
    if isinstance(output, (bytes, bytearray)):
        output = bytes(output).decode("utf-8", errors="replace")
    if isinstance(output, str):
        text = output.lstrip()
        if text.startswith("{") and '"value"' in text[:200]:
            try:
                output = loads(text, max_bytes=MAX_OUTPUT, what="the Run Command result")
            except BoundedError:
                return text[:MAX_OUTPUT], ""
        else:
            return output, ""
    return output_streams(output)
