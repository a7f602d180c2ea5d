"""A request as the routes see it, and the answer they give."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Request:
    method: str
    path: str
    query: dict
    body: dict | list | None

    @property
    def api_version(self) -> str:
        return self.query.get("api-version", "")


@dataclass
class Response:
    status: int
    body: dict | list | None = None
    headers: dict = field(default_factory=dict)


def page(items: list) -> Response:
    """A list answer; everything fits on one page, so there is never a nextLink."""
    return Response(200, {"value": items})
