"""Credentials, subscription and SDK clients, resolved the Azure way."""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from ..errors import AzureError, InputError

SUBSCRIPTION_ENV = "AZURE_SUBSCRIPTION_ID"
SUBSCRIPTION_ID_RE = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
# Bounded retries for throttling (429 honours Retry-After), 5xx and dropped connections.
RETRY = {"retry_total": 8, "retry_connect": 4, "retry_read": 4, "retry_status": 6, "retry_backoff_factor": 0.8,
         "retry_backoff_max": 60}


def cli_default_subscription() -> str | None:
    """The Azure CLI's default subscription, read from its profile file (no subprocess)."""
    config = Path(os.environ.get("AZURE_CONFIG_DIR", Path.home() / ".azure")) / "azureProfile.json"
    try:
        data = json.loads(config.read_text(encoding="utf-8-sig"))
    except (OSError, ValueError):
        return None
    for sub in data.get("subscriptions", []):
        if sub.get("isDefault"):
            return sub.get("id")
    return None


def resolve_subscription(explicit: str | None) -> str:
    sub = explicit or os.environ.get(SUBSCRIPTION_ENV) or cli_default_subscription()
    if not sub:
        raise InputError("no Azure subscription selected", code="NO_SUBSCRIPTION",
                         remedy=f"pass --subscription ID, set {SUBSCRIPTION_ENV}, or run 'az login' and "
                                "'az account set -s ID'")
    if not SUBSCRIPTION_ID_RE.fullmatch(sub):
        # It goes into every request path: a name or a '/' would address something else.
        where = "--subscription" if explicit else SUBSCRIPTION_ENV if os.environ.get(SUBSCRIPTION_ENV) else "az's default"
        raise InputError(f"subscription {sub!r} (from {where}) is not a subscription ID", code="INVALID_SUBSCRIPTION",
                         remedy="pass the subscription's ID, a GUID: az account show --query id -o tsv")
    return sub


def default_credential():
    from azure.identity import DefaultAzureCredential

    # Interactive browser login would hang a script or CI; az login is the interactive path.
    return DefaultAzureCredential(exclude_interactive_browser_credential=True)


@dataclass
class Session:
    subscription_id: str
    credential: Any
    polling_interval: float | None = None
    client_kwargs: dict[str, Any] = field(default_factory=dict)
    # How azgpu's own polling loops wait (wait, following an interrupted run); the fake swaps it.
    sleep: Callable[[float], None] = field(default=lambda seconds: time.sleep(seconds), repr=False)

    def _kwargs(self) -> dict[str, Any]:
        kw = {**RETRY, **self.client_kwargs}
        if self.polling_interval is not None:
            kw["polling_interval"] = self.polling_interval
        return kw

    @cached_property
    def compute(self):
        from azure.mgmt.compute import ComputeManagementClient

        return ComputeManagementClient(self.credential, self.subscription_id, **self._kwargs())

    @cached_property
    def network(self):
        from azure.mgmt.network import NetworkManagementClient

        return NetworkManagementClient(self.credential, self.subscription_id, **self._kwargs())

    @cached_property
    def resources(self):
        from azure.mgmt.resource.resources import ResourceManagementClient

        return ResourceManagementClient(self.credential, self.subscription_id, **self._kwargs())

    def check_credential(self) -> None:
        """Fail early and clearly when no credential works, before any other call."""
        from azure.core.exceptions import ClientAuthenticationError

        try:
            self.credential.get_token("https://management.azure.com/.default")
        except ClientAuthenticationError as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise AzureError(f"no Azure credential worked: {first}", code="AUTHENTICATION_FAILED",
                             remedy="run 'az login', or set AZURE_CLIENT_ID, AZURE_TENANT_ID and AZURE_CLIENT_SECRET "
                                    "(or use a managed identity)") from None
