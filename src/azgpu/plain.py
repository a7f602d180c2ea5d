"""Results as plain data: what `-o json|yaml|table|tsv` and Python callers can print as they are.

The Azure SDK's models hold enums (azure-mgmt-network's ProvisioningState, for one) where the
REST API has strings; a result carrying one crashes `-o yaml` and prints 'ProvisioningState.SUCCEEDED'
in a table. Results are converted once, where they are built.
"""

from __future__ import annotations

from enum import Enum
from typing import Any


def plain(value: Any) -> Any:
    """value with every Enum replaced by its value, through dicts, lists and tuples."""
    if isinstance(value, Enum):
        return plain(value.value)
    if isinstance(value, dict):
        return {plain(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value
