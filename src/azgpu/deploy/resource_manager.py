"""Resource Manager's own address and what azgpu says of an answer it refuses: what the session's
transport checks every request against before the token goes with it, and what arm's readers raise.
Apart from arm so that the session, which arm's clients are built on, imports nothing back."""

from __future__ import annotations

from typing import Any

from ..errors import AzureError

BASE = "https://management.azure.com"


INVALID_ANSWER_REMEDY = ("nothing more was sent; re-run the command, and if Azure keeps answering so, run it with "
                         "--debug and report what it shows")


def invalid_answer(what: str, problem: str) -> AzureError:
    """The error for an answer from Azure that azgpu cannot read (not JSON, too large or deep, wrong types)."""
    return AzureError(f"{what}: Azure's answer {problem}", code="ARM_ANSWER_INVALID", remedy=INVALID_ANSWER_REMEDY)


def arm_url(url: Any) -> bool:
    """A URL Azure may send azgpu on to (a nextLink, Location, Azure-AsyncOperation): HTTPS to Resource
    Manager itself. The session's token goes with every request, so nothing else is followed."""
    from urllib.parse import urlsplit

    if not isinstance(url, str) or len(url) > 8192 or not url.isprintable():
        return False
    try:
        parts = urlsplit(url)
        return parts.scheme == "https" and parts.netloc.lower() == BASE.split("://", 1)[1] and parts.port is None
    except ValueError:
        return False
