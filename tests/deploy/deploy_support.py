"""Helpers for the deploy tests (a module with a unique name, so test files import it safely)."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import azgpu

SSH_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJOgAYClhajeh3m7rJp5Bf+XHzOywcIepjITM9B6OJMg azgpu-test"
NAME, RG, LOCATION = "c1", "rg1", "eastus"

VMSS = "Microsoft.Compute/virtualMachineScaleSets"
VM = "Microsoft.Compute/virtualMachineScaleSets/virtualMachines"
NIC = "Microsoft.Network/networkInterfaces"
NSG = "Microsoft.Network/networkSecurityGroups"
VNET = "Microsoft.Network/virtualNetworks"
NAT = "Microsoft.Network/natGateways"
PIP = "Microsoft.Network/publicIPAddresses"
RG_TYPE = "Microsoft.Resources/resourceGroups"

SEED_SERIES = ["ndv2", "ng", "nd-a100-v4", "nd-gb300-v6"]  # the seed series azgpu can still deploy
BEYOND_SERIES = ["ndm-a100-v4", "nd-h100-v5", "nd-h200-v5", "nd-mi300x-v5", "nd-gb200-v6"]
ALL_SERIES = SEED_SERIES + BEYOND_SERIES
WRITES = ("PUT", "PATCH", "POST", "DELETE")


def request(profile: str = "nd-a100-v4", **values: Any) -> azgpu.Request:
    base = {"profile": profile, "name": NAME, "resource_group": RG, "location": LOCATION, "ssh_key": SSH_KEY,
            "nodes": 2}
    return azgpu.build_request(**{**base, **values})


def create_args(profile: str = "nd-a100-v4", *extra: Any, nodes: int = 2) -> list[Any]:
    return ["create", "--profile", profile, "-n", NAME, "-g", RG, "-l", LOCATION, "--nodes", nodes,
            "--ssh-key", SSH_KEY, *extra]


def cluster_args(name: str = NAME, rg: str = RG) -> list[str]:
    return ["-n", name, "-g", rg]


def calls(azure, *methods: str, since: int = 0, path: str = "") -> list:
    """Logged requests with one of `methods` (all when none), from index `since`, path containing `path`."""
    return [r for r in azure.requests[since:]
            if (not methods or r.method in methods) and path.lower() in r.path.lower()]


def arm_check(r) -> bool:
    """Deployments - Validate or What If: a POST that writes nothing (REST spec, deployments 2025-04-01)."""
    path = r.path.lower()
    return r.method == "POST" and "/providers/microsoft.resources/deployments/" in path and \
        path.endswith(("/validate", "/whatif"))


def writes(azure, since: int = 0) -> list:
    return [r for r in calls(azure, *WRITES, since=since) if not arm_check(r)]


def ours(resource: dict, name: str = NAME) -> bool:
    tags = resource.get("tags") or {}
    return tags.get("managed-by") == "azgpu" and tags.get("azgpu-cluster") == name


def names(azure, type_: str, rg: str | None = RG) -> list[str]:
    return sorted(r["name"] for r in azure.resources(type=type_, resource_group=rg))


def error_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("ERROR: ")]


def assert_cli_error(rc: int, err: str, exit_code: int, code: str, remedy_part: str = "") -> None:
    """Exit code, exactly one `ERROR: [CODE] ...` line followed by a remedy line, no traceback."""
    assert rc == exit_code, err
    assert "Traceback" not in err, err
    lines = error_lines(err)
    assert len(lines) == 1 and lines[0].startswith(f"ERROR: [{code}] "), err
    following = err.splitlines()[err.splitlines().index(lines[0]) + 1:]
    assert following and following[0].startswith("  remedy: "), err
    assert remedy_part in following[0], following[0]


FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "azure"


def azure_fixture(name: str) -> dict[str, Any]:
    """A real Azure body kept under tests/fixtures/azure, as inject() keywords that replay it:
    {"status": ..., "body": ..., "headers": ...} from NAME.json and its NAME.source.toml."""
    source = tomllib.loads((FIXTURES / f"{name}.source.toml").read_text())
    return {"status": source["status"], "body": json.loads((FIXTURES / f"{name}.json").read_text()),
            "headers": dict(source.get("headers", {}))}


def model(cls, body: dict):
    """An SDK model from a REST body, as the installed SDK deserializes one: the newest generated
    models take the mapping, the msrest models of the lowest allowed SDKs have deserialize()."""
    return cls.deserialize(body) if hasattr(cls, "deserialize") else cls(body)


def sdk_has(models, name: str) -> bool:
    """Whether the installed SDK knows a model (newer API features are absent from the lowest SDKs)."""
    return hasattr(models, name)

