"""Service Bus: the active message count of a queue or a topic subscription.

``MessageCounter`` is the small interface; the real adapter wraps
``azure.servicebus.aio.management.ServiceBusAdministrationClient`` (identity, or a connection
string from the variable ``connectionFromEnv`` names, locally).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, Protocol

from scaling.domain.policy import SourceSettings
from scaling.domain.samples import SourceReading
from scaling.sources.base import CallGate, error_text
from scaling.sources.eventhub import normalize_namespace

KIND = "servicebus"


class MessageCounter(Protocol):
    """Counts the messages waiting in one entity of one namespace."""

    async def queue_active_messages(self, queue_name: str) -> int: ...

    async def subscription_active_messages(self, topic_name: str, subscription_name: str) -> int: ...


class ServiceBusAdminCounter:
    """``MessageCounter`` over ``ServiceBusAdministrationClient`` (or an object with its
    ``get_queue_runtime_properties``/``get_subscription_runtime_properties``/``close``)."""

    def __init__(self, client: Any) -> None:
        self.client = client

    async def queue_active_messages(self, queue_name: str) -> int:
        properties = await self.client.get_queue_runtime_properties(queue_name)
        return int(properties.active_message_count)

    async def subscription_active_messages(self, topic_name: str, subscription_name: str) -> int:
        properties = await self.client.get_subscription_runtime_properties(topic_name, subscription_name)
        return int(properties.active_message_count)

    async def close(self) -> None:
        await self.client.close()


class ServiceBusClients:
    """One administration client per namespace (or connection-string variable), reused."""

    def __init__(
        self,
        credential: Any = None,
        environ: Mapping[str, str] | None = None,
        client_factory: Callable[[SourceSettings, str | None], Any] | None = None,
    ) -> None:
        self.credential = credential
        self.environ = os.environ if environ is None else environ
        self._factory = client_factory or self._sdk_client
        self._counters: dict[str, ServiceBusAdminCounter] = {}

    def connection_string(self, source: SourceSettings) -> str | None:
        if not source.connection_from_env:
            return None
        value = self.environ.get(source.connection_from_env)
        if not value:
            raise LookupError(f"{source.connection_from_env} (connectionFromEnv of source {source.name!r}) is not set")
        return value

    def counter_for(self, source: SourceSettings) -> ServiceBusAdminCounter:
        connection = self.connection_string(source)
        key = f"env:{source.connection_from_env}" if connection else normalize_namespace(source.fully_qualified_namespace or "")
        if key not in self._counters:
            self._counters[key] = ServiceBusAdminCounter(self._factory(source, connection))
        return self._counters[key]

    def _sdk_client(self, source: SourceSettings, connection_string: str | None) -> Any:
        from azure.servicebus.aio.management import ServiceBusAdministrationClient

        if connection_string:
            return ServiceBusAdministrationClient.from_connection_string(connection_string)
        if self.credential is None:
            raise LookupError(f"source {source.name!r} uses identity but no credential was given")
        return ServiceBusAdministrationClient(normalize_namespace(source.fully_qualified_namespace or ""), self.credential)

    async def aclose(self) -> None:
        counters, self._counters = list(self._counters.values()), {}
        await asyncio.gather(*(counter.close() for counter in counters), return_exceptions=True)


class ServiceBusReader:
    """``SourceReader`` for ``kind: servicebus``: one gated call per source."""

    kind = KIND

    def __init__(self, counter_for: Callable[[SourceSettings], MessageCounter],
                 closers: tuple[Callable[[], Any], ...] = ()) -> None:
        self.counter_for = counter_for
        self._closers = closers

    async def read(self, source: SourceSettings, gate: CallGate, now: datetime) -> SourceReading:
        counter = self.counter_for(source)
        try:
            if source.queue_name:
                count = await gate.call("get_queue_runtime_properties",
                                        lambda: counter.queue_active_messages(source.queue_name or ""))
            else:
                count = await gate.call("get_subscription_runtime_properties",
                                        lambda: counter.subscription_active_messages(source.topic_name or "",
                                                                                     source.subscription_name or ""))
        except Exception as error:
            return SourceReading(name=source.name, kind=KIND, ok=False, error=error_text(error))
        return SourceReading(name=source.name, kind=KIND, active_messages=max(count, 0))

    async def aclose(self) -> None:
        await asyncio.gather(*(close() for close in self._closers), return_exceptions=True)
