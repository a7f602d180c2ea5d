"""Errors of the fake: ARM error answers, and the loud failure for what it does not implement."""

from __future__ import annotations

from ..errors import EXIT_AZURE, AzgpuError, InputError


class NotImplementedInFake(NotImplementedError):
    """A request the fake does not implement.

    Raised out of the SDK call instead of answering, so a missing route can never pass as an empty
    result. It is deliberately not an AzureError: the SDK's retry policy would retry it.
    """

    def __init__(self, method: str, path: str, reason: str = ""):
        self.method = method
        self.path = path
        self.reason = reason
        detail = f" ({reason})" if reason else ""
        super().__init__(f"azgpu.testing does not implement {method} {path}{detail}")


class OfflineError(NotImplementedInFake):
    """A request that would have left the process: made after the fake stopped, or needing a socket."""


class ArmError(Exception):
    """An answer in ARM's error shape: {"error": {"code", "message"}} with an HTTP status."""

    def __init__(self, status: int, code: str, message: str, headers: dict | None = None,
                 details: list[dict] | None = None, extra: dict | None = None):
        super().__init__(f"{status} {code}: {message}")
        self.extra = extra or {}  # more members of the error: target, additionalInfo
        self.status = status
        self.code = code
        self.message = message
        self.headers = headers or {}
        self.details = details or []

    def body(self) -> dict:
        error = {"code": self.code, "message": self.message}
        if self.details:
            error["details"] = self.details
        error.update(self.extra)
        return {"error": error}


def required_location(body) -> str:
    """The body's location, or ARM's answer to a located resource's PUT without one."""
    location = (body or {}).get("location") if isinstance(body, dict) else None
    if not location:
        raise ArmError(400, "LocationRequired", "The location property is required for this definition.")
    return location


def resource_group_not_found(rg: str) -> ArmError:
    return ArmError(404, "ResourceGroupNotFound", f"Resource group '{rg}' could not be found.")


def resource_not_found(rid) -> ArmError:
    """ARM's 404 for a parsed resource id (store.ResourceId); a nested one is named as ARM names it,
    types and names interleaved: 'Microsoft.Compute/galleries/g/images/i'."""
    path = "/".join(f"{t}/{n}" for t, n in zip(rid.types, rid.names, strict=False))
    return ArmError(404, "ResourceNotFound",
                    f"The Resource '{rid.namespace}/{path}' under resource group '{rid.resource_group}' was not found. "
                    "For more details please go to https://aka.ms/ARMResourceNotFoundFix")


def child_not_found(resource_id: str) -> ArmError:
    # Network and Compute answer a missing child (subnet, extension) with the plain code NotFound.
    return ArmError(404, "NotFound", f"Resource {resource_id} not found.")


def invalid_reference(target: str, referrer: str) -> ArmError:
    return ArmError(
        400,
        "InvalidResourceReference",
        f"Resource {target} referenced by resource {referrer} was not found. Please make sure that the "
        "referenced resource exists, and that both resources are in the same region.",
    )


_LABELS = {"virtualmachinescalesets": "Virtual Machine Scale Set", "extensions": "Virtual Machine Scale Set Extension"}


def operation_in_progress(op: dict, method: str, target: dict, status_url: str) -> ArmError:
    """ARM's 409 for a write to a resource whose operation is still running.

    Network: AnotherOperationInProgress with the running operation's status URI (Learn, "Troubleshoot
    common Azure deployment errors": wait for the concurrent operation). Compute: OperationNotAllowed,
    "Operation '...' is not allowed on Virtual Machine Scale Set '...' since it is marked for deletion"
    as Compute words it for a running delete; Learn documents no wording for a running create or
    update, so that message says the operation is in progress. Resource groups: ResourceGroupBeingDeleted.
    """
    provider = (op.get("provider") or "").lower()
    name = target.get("name", "")
    if provider == "microsoft.network":
        return ArmError(409, "AnotherOperationInProgress",
                        "Another operation on this or dependent resource is in progress. To retrieve status of the "
                        f"operation use uri: {status_url}.")
    if provider == "microsoft.compute":
        kind = (target.get("type") or "").rsplit("/", 1)[-1].lower()
        label = _LABELS.get(kind, kind)
        verb = {"DELETE": "Delete", "PATCH": "Update"}.get(method.upper(), "Update")
        since = "it is marked for deletion" if op["kind"] == "delete" else "another operation on it is in progress"
        return ArmError(409, "OperationNotAllowed",
                        f"Operation '{verb} {label}' is not allowed on {label} '{name}' since {since}. For more "
                        "information on your operations, please refer to https://aka.ms/activitylog.")
    return ArmError(409, "ResourceGroupBeingDeleted",
                    f"The resource group '{name}' is in deprovisioning state and cannot perform this operation.")


class StateFileError(InputError):
    """A state file that cannot be used: unreadable, not JSON, not a FakeAzure state, another version.

    An InputError (exit 2 in the CLI): the file, not Azure, is wrong, and nothing was sent anywhere.
    """

    def __init__(self, path, problem: str, remedy: str = ""):
        self.path = str(path)
        super().__init__(f"simulated Azure state file '{path}' {problem}", code="SIMULATE_STATE_INVALID",
                         remedy=remedy or f"delete it to start an empty simulated cloud (rm '{path}'), or pass another "
                                          "--simulate-state FILE")


class StateFileBusy(AzgpuError):
    """Another process held the state file's lock for longer than the wait allows."""

    exit_code = EXIT_AZURE

    def __init__(self, path, seconds: float):
        super().__init__(f"simulated Azure state file '{path}' stayed locked by another process for {seconds:g} s",
                         code="SIMULATE_STATE_BUSY",
                         remedy=f"let the other 'provision --simulate' command finish (its lock is '{path}.lock'), "
                                "or pass another --simulate-state FILE")
