"""Fixtures for the fake Azure's tests."""

from __future__ import annotations

import pytest
from fake_azure_support import Clients, build_network, make_clients

from azgpu.testing import FakeAzure


@pytest.fixture
def azure():
    with FakeAzure() as fake:
        yield fake


@pytest.fixture
def clients(azure) -> Clients:
    return make_clients(azure)


@pytest.fixture
def network(clients) -> dict:
    return build_network(clients)
