"""Shared fixtures: one real Azurite for the whole test session (started and stopped here)."""

from __future__ import annotations

import uuid

import pytest

from scaling.local.azurite import Azurite, AzuriteEndpoints


@pytest.fixture(scope="session")
def azurite() -> AzuriteEndpoints:
    """A real Azurite on free loopback ports, stopped when the session ends."""
    server = Azurite()
    endpoints = server.start()
    yield endpoints
    server.stop()


@pytest.fixture
def storage_connection_string(azurite: AzuriteEndpoints) -> str:
    return azurite.connection_string


@pytest.fixture
def unique_name() -> str:
    """A fresh lower-case name for a queue, table or container, so tests never share state."""
    return "t" + uuid.uuid4().hex[:12]
