"""Namespace resource ids, read once for both kinds: a Service Bus namespace (a queue source's
management reads) and an Event Hubs namespace (a namespace target's throughput units)."""

from __future__ import annotations

import re
from dataclasses import dataclass

SERVICE_BUS = "Microsoft.ServiceBus"
EVENT_HUB = "Microsoft.EventHub"

_NAMESPACE_ID = re.compile(r"^/subscriptions/(?P<subscription>[^/]+)/resourceGroups/(?P<group>[^/]+)"
                           r"/providers/(?P<provider>[^/]+)/namespaces/(?P<name>[^/]+)/?$", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class NamespaceId:
    """The parts of a namespace's resource id a management-plane client needs."""

    subscription_id: str
    resource_group: str
    name: str
    provider: str

    @property
    def resource_id(self) -> str:
        return (f"/subscriptions/{self.subscription_id}/resourceGroups/{self.resource_group}"
                f"/providers/{self.provider}/namespaces/{self.name}")


def namespace_id_shape(provider: str) -> str:
    """How a ``provider`` namespace's resource id reads, for error messages and field descriptions."""
    return f"/subscriptions/SUB/resourceGroups/RG/providers/{provider}/namespaces/NAME"


def parse_namespace_id(resource_id: str | None, provider: str) -> NamespaceId | None:
    """``namespace_id_shape(provider)`` (any case, a trailing slash tolerated) in parts; ``None``
    for anything else, a namespace of another provider included."""
    match = _NAMESPACE_ID.match(resource_id or "")
    if match is None or match["provider"].lower() != provider.lower():
        return None
    return NamespaceId(match["subscription"], match["group"], match["name"], provider)
