"""One error hierarchy: every error a user can see has a stable code, a message and a remedy."""

from __future__ import annotations

from msgspec import Struct

EXIT_OK = 0
EXIT_AZURE = 1
EXIT_INPUT = 2
EXIT_NOT_FOUND = 3
EXIT_INTERRUPTED = 130


class Finding(Struct, frozen=True, kw_only=True):
    """One validation result. Errors block; warnings and notes do not.

    The one way to make one: Finding(code=..., message=..., remedy=..., source=..., severity=..., field=...),
    keywords only; source is the cited text (sources.cite of the profile's source keys)."""

    code: str
    message: str
    remedy: str = ""
    source: str = ""
    severity: str = "error"  # error | warning | note
    field: str = ""

    @property
    def is_error(self) -> bool:
        return self.severity == "error"

    def as_dict(self) -> dict:
        return {
            "severity": self.severity,
            "code": self.code,
            "message": self.message,
            "remedy": self.remedy,
            "source": self.source,
            "field": self.field,
        }


class AzgpuError(Exception):
    """Base of every error azgpu raises on purpose."""

    exit_code = EXIT_INPUT
    default_code = "AZGPU_ERROR"

    def __init__(self, message: str, *, code: str | None = None, remedy: str = "", source: str = ""):
        super().__init__(message)
        self.message = message
        self.code = code or self.default_code
        self.remedy = remedy
        self.source = source

    def as_dict(self) -> dict:
        return {"code": self.code, "message": self.message, "remedy": self.remedy}


class InputError(AzgpuError):
    """Bad input: flags, cluster files, names. Exit 2, nothing created."""

    default_code = "INVALID_INPUT"


class ProfileError(AzgpuError):
    """A profile or catalog data file is broken; names the file and key."""

    default_code = "PROFILE_INVALID"


class ValidationFailed(AzgpuError):
    """The request breaks one or more documented rules; carries every finding at once."""

    def __init__(self, findings: list[Finding]):
        self.findings = list(findings)
        errors = [f for f in self.findings if f.is_error]
        first = errors[0] if errors else Finding(code="VALIDATION_FAILED", message="validation failed")
        super().__init__(first.message, code=first.code, remedy=first.remedy, source=first.source)

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.is_error]


class NotFoundError(AzgpuError):
    exit_code = EXIT_NOT_FOUND
    default_code = "NOT_FOUND"


class AzureError(AzgpuError):
    """An Azure operation failed; `azure_code` is ARM's error code when there is one."""

    exit_code = EXIT_AZURE
    default_code = "AZURE_ERROR"

    def __init__(self, message: str, *, code: str | None = None, remedy: str = "", azure_code: str = "",
                 source: str = ""):
        super().__init__(message, code=code, remedy=remedy, source=source)
        self.azure_code = azure_code
