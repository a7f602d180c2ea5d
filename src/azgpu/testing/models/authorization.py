"""Microsoft.Authorization: the caller's permissions at a scope, and whether they allow an action (the model
behind routes/authorization.py; Impact Reporting, deployments and scale sets ask it before they act).
The fake's caller has the same permissions at every scope.
"""

from __future__ import annotations

import copy
import re
from typing import Any

from ..errors import ArmError
from ..store import Store, stable_uuid

# Owner-like, so an untouched fake lets azgpu report; set_permissions narrows it.
DEFAULT_PERMISSIONS = [{"actions": ["*"], "notActions": [], "dataActions": [], "notDataActions": []}]


def permissions(store: Store) -> list[dict[str, Any]]:
    return copy.deepcopy(store.permissions if store.permissions is not None else DEFAULT_PERMISSIONS)


def matches(pattern: str, action: str) -> bool:
    regex = "^" + ".*".join(re.escape(p) for p in pattern.split("*")) + "$"
    return re.match(regex, action, re.IGNORECASE) is not None


def allowed(store: Store, action: str) -> bool:
    """Learn: an action is allowed when some permission lists it in actions and not in its notActions."""
    return any(any(matches(a, action) for a in p.get("actions") or [])
               and not any(matches(n, action) for n in p.get("notActions") or [])
               for p in permissions(store))


def authorization_failed(action: str, scope: str) -> ArmError:
    # ARM's wording (Learn, "Resolve errors for resource provider registration", AuthorizationFailed).
    principal = stable_uuid("principal", "caller")
    return ArmError(403, "AuthorizationFailed",
                    f"The client '{principal}' with object id '{principal}' does not have authorization to perform "
                    f"action '{action}' over scope '{scope}' or the scope is invalid. If access was recently "
                    "granted, please refresh your credentials.")
