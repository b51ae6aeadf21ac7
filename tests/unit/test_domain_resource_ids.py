"""``domain/resource_ids.py``: one reading of a namespace's resource id for both providers."""

from __future__ import annotations

import pytest

from scaling.domain.resource_ids import EVENT_HUB, SERVICE_BUS, NamespaceId, parse_namespace_id

SB = "/subscriptions/s/resourceGroups/rg/providers/Microsoft.ServiceBus/namespaces/jobs"
EH = "/subscriptions/s/resourceGroups/rg/providers/Microsoft.EventHub/namespaces/hub"


@pytest.mark.parametrize(("resource_id", "provider", "expected"), [
    (SB, SERVICE_BUS, NamespaceId("s", "rg", "jobs", SERVICE_BUS)),
    (SB + "/", SERVICE_BUS, NamespaceId("s", "rg", "jobs", SERVICE_BUS)),
    (SB.lower(), SERVICE_BUS, NamespaceId("s", "rg", "jobs", SERVICE_BUS)),
    (EH, EVENT_HUB, NamespaceId("s", "rg", "hub", EVENT_HUB)),
    (SB, EVENT_HUB, None),  # another provider's namespace
    (EH, SERVICE_BUS, None),
    (SB + "/queues/q", SERVICE_BUS, None),  # an entity, not the namespace
    ("", SERVICE_BUS, None),
    (None, EVENT_HUB, None),
])
def test_parse_namespace_id(resource_id, provider, expected):
    assert parse_namespace_id(resource_id, provider) == expected


def test_resource_id_round_trips():
    assert parse_namespace_id(SB, SERVICE_BUS).resource_id == SB
    assert parse_namespace_id(EH, EVENT_HUB).resource_id == EH
