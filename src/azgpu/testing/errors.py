"""Errors of the fake: ARM error answers, and the loud failure for what it does not implement."""

from __future__ import annotations


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


class ArmError(Exception):
    """An answer in ARM's error shape: {"error": {"code", "message"}} with an HTTP status."""

    def __init__(self, status: int, code: str, message: str, headers: dict | None = None,
                 details: list[dict] | None = None):
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.headers = headers or {}
        self.details = details or []

    def body(self) -> dict:
        error = {"code": self.code, "message": self.message}
        if self.details:
            error["details"] = self.details
        return {"error": error}


def resource_group_not_found(rg: str) -> ArmError:
    return ArmError(404, "ResourceGroupNotFound", f"Resource group '{rg}' could not be found.")


def resource_not_found(type_: str, name: str, rg: str) -> ArmError:
    return ArmError(
        404,
        "ResourceNotFound",
        f"The Resource '{type_}/{name}' under resource group '{rg}' was not found. "
        "For more details please go to https://aka.ms/ARMResourceNotFoundFix",
    )


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
