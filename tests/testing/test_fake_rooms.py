"""The fake is laid out as moto lays out a provider: every route module (URL and body) has a model module of the
same name (the checks and state changes), so a new Azure call has one obvious room for each half."""

from __future__ import annotations

from pathlib import Path

import azgpu.testing

FAKE = Path(azgpu.testing.__file__).parent


def _modules(folder: str) -> set[str]:
    return {p.stem for p in (FAKE / folder).glob("*.py") if p.stem != "__init__"}


def test_every_route_module_has_a_model_of_its_name():
    routes = _modules("routes")
    assert len(routes) > 10  # the walk sees the fake's routes
    assert sorted(routes - _modules("models")) == []


def test_every_route_module_registers_routes():
    """A route module kept only to pair a name would answer nothing: each one registers a route."""
    from azgpu.testing.routes import ROUTES

    registering = {entry.handler.__module__.rsplit(".", 1)[-1] for entry in ROUTES}
    assert registering == _modules("routes")
