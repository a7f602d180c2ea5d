"""docs/fake-coverage.md is made from the routes' own registration: every route says its api-version,
and the page lists every route with it (tests/test_docs.py fails while the page is stale)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from azgpu.testing import retail_prices, routes

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "fake-coverage.md"


def _page_rows() -> list[tuple[str, str, str]]:
    rows = []
    for line in PAGE.read_text().splitlines():
        cells = re.fullmatch(r"\| (\w+) \| `(.+?)` \| (.+?) \| .* \|", line)
        if cells:
            rows.append((cells.group(1), cells.group(2).replace("\\|", "|"), cells.group(3)))
    return rows


def test_a_route_without_an_api_version_is_refused_when_it_registers():
    before = list(routes.ROUTES)

    def handler(backend, req, sub):  # its module (this test file) has no API_VERSION
        raise AssertionError("never called")

    with pytest.raises(TypeError, match="names no REST api-version"):
        routes.route("GET", routes.SUB + r"/nothing")(handler)
    with pytest.raises(TypeError, match="names no REST api-version"):
        routes.route("GET", routes.SUB + r"/nothing", api_version="latest")(handler)
    assert routes.ROUTES == before


def test_every_route_is_on_the_page_with_its_api_version():
    sys.path.insert(0, str(REPO / "tools"))
    try:
        import reference_docs
    finally:
        sys.path.remove(str(REPO / "tools"))
    listed = _page_rows()
    assert len(listed) == len(routes.ROUTES) + 1  # and the Retail Prices API
    for entry in routes.ROUTES:
        path = reference_docs._readable(entry.pattern.pattern)
        assert (entry.method, path, ", ".join(entry.api_versions)) in listed, (entry.method, path)
    assert "2026-04-01" in {v for _, _, v in listed}  # the scale sets' Compute version, for one
    assert ("GET", f"https://{retail_prices.HOST}{retail_prices.PATH}", retail_prices.API_VERSION) in listed


def test_the_retail_prices_version_is_the_one_azgpu_asks_for():
    from azgpu import pricing

    assert retail_prices.API_VERSION == pricing.API_VERSION
