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

import json
from typing import Any

from .results import NodeRef, NodeResult, output_streams, result_of


def judge(output: Any, size: str, *, name: str = "node", scale_set: str = "", instance_id: str = "",
          resource_id: str = "", vm_id: str | None = None) -> NodeResult:
    """The NodeResult the gate would give this output on a node of `size` (a name or alias a profile
    knows; InputError UNKNOWN_SIZE otherwise). Never raises for what the output holds."""
    from ..profiles import find_size

    size_name = find_size(size)[1].name
    stdout, stderr = _streams(output)
    return result_of(NodeRef(scale_set, instance_id, resource_id, name, vm_id, size_name), stdout, stderr)


def _streams(output: Any) -> tuple[str, str]:
    if isinstance(output, bytes):
        output = output.decode("utf-8", errors="replace")
    if isinstance(output, str):
        text = output.lstrip()
        if text.startswith("{") and '"value"' in text[:200]:
            try:
                output = json.loads(text)
            except ValueError:
                return output, ""
        else:
            return output, ""
    return output_streams(output)
