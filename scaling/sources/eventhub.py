"""Event Hubs: partition properties (azure-eventhub) + checkpoints (blob store) -> backlog.

``PartitionSource`` is the small interface the collector needs from a hub. The real adapter
wraps ``azure.eventhub.aio.EventHubConsumerClient``; tests and the local demo use stand-ins
behind the same protocol (no Event Hubs emulator runs here).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from scaling.domain.lag import EMPTY_PARTITION
from scaling.domain.policy import SourceSettings
from scaling.domain.samples import PartitionReading, SourceReading
from scaling.sources.base import CallGate, ReadError, connection_from_env, error_text
from scaling.sources.checkpoints import CheckpointLocation, CheckpointReader, summarize_ownership

KIND = "eventhub"


@dataclass(frozen=True, slots=True)
class PartitionProperties:
    """One partition's positions as the service reports them."""

    partition_id: str
    beginning_sequence_number: int
    last_enqueued_sequence_number: int
    is_empty: bool


class PartitionSource(Protocol):
    """What the collector needs from one hub (as seen through one consumer group)."""

    async def get_partition_ids(self) -> list[str]: ...

    async def get_partition_properties(self, partition_id: str) -> PartitionProperties: ...


def properties_from_sdk(raw: Mapping[str, Any]) -> PartitionProperties:
    """Map the dict ``EventHubConsumerClient.get_partition_properties`` returns.

    SDK keys: ``id``, ``beginning_sequence_number``, ``last_enqueued_sequence_number``,
    ``is_empty`` (plus ``eventhub_name``, ``last_enqueued_offset``, ``last_enqueued_time_utc``,
    unused here). A missing key is an error: guessing a position would invent backlog.
    """
    try:
        return PartitionProperties(
            partition_id=str(raw["id"]),
            beginning_sequence_number=int(raw["beginning_sequence_number"]),
            last_enqueued_sequence_number=int(raw["last_enqueued_sequence_number"]),
            is_empty=bool(raw["is_empty"]),
        )
    except KeyError as missing:
        raise ValueError(f"partition properties lack {missing.args[0]!r}: {sorted(raw)}") from None


class EventHubPartitionSource:
    """``PartitionSource`` over an ``azure.eventhub.aio.EventHubConsumerClient`` (or any object
    with its ``get_partition_ids``/``get_partition_properties``/``close`` methods)."""

    def __init__(self, client: Any) -> None:
        self.client = client

    async def get_partition_ids(self) -> list[str]:
        return [str(pid) for pid in await self.client.get_partition_ids()]

    async def get_partition_properties(self, partition_id: str) -> PartitionProperties:
        return properties_from_sdk(await self.client.get_partition_properties(partition_id))

    async def close(self) -> None:
        await self.client.close()


def normalize_namespace(namespace: str) -> str:
    """``sb://ns.servicebus.windows.net/`` -> ``ns.servicebus.windows.net`` (the name checkpoint blobs use)."""
    text = namespace.strip()
    if "://" in text:
        text = text.split("://", 1)[1]
    return text.split("/", 1)[0]


def namespace_from_connection_string(connection_string: str) -> str:
    """The namespace host of an Event Hubs / Service Bus connection string's ``Endpoint``."""
    for part in connection_string.split(";"):
        key, _, value = part.partition("=")
        if key.strip().lower() == "endpoint" and value.strip():
            return normalize_namespace(value)
    raise ValueError("the connection string has no Endpoint=sb://... part")


class EventHubClients:
    """Creates ``EventHubConsumerClient``s once per (namespace or connection, hub, consumer group)
    and reuses them across invocations; ``aclose()`` closes them all.

    ``client_factory(source, connection_string)`` builds a client; the default uses the real
    SDK with ``credential`` (identity) or the connection string read from the environment
    variable the source's ``connectionFromEnv`` names.
    """

    def __init__(
        self,
        credential: Any = None,
        environ: Mapping[str, str] | None = None,
        client_factory: Callable[[SourceSettings, str | None], Any] | None = None,
    ) -> None:
        self.credential = credential
        self.environ = os.environ if environ is None else environ
        self._factory = client_factory or self._sdk_client
        self._sources: dict[tuple[str, str, str], EventHubPartitionSource] = {}

    def connection_string(self, source: SourceSettings) -> str | None:
        return connection_from_env(source, self.environ)

    def namespace(self, source: SourceSettings) -> str:
        if source.fully_qualified_namespace:
            return normalize_namespace(source.fully_qualified_namespace)
        try:
            return namespace_from_connection_string(self.connection_string(source) or "")
        except ValueError:
            raise ValueError(f"{source.connection_from_env} (connectionFromEnv of source {source.name!r}) "
                             "has no Endpoint=sb://... part") from None

    def source_for(self, source: SourceSettings) -> EventHubPartitionSource:
        connection = self.connection_string(source)
        endpoint = f"env:{source.connection_from_env}" if connection else self.namespace(source)
        key = (endpoint, source.event_hub_name or "", source.consumer_group)
        if key not in self._sources:
            self._sources[key] = EventHubPartitionSource(self._factory(source, connection))
        return self._sources[key]

    def _sdk_client(self, source: SourceSettings, connection_string: str | None) -> Any:
        from azure.eventhub.aio import EventHubConsumerClient

        if connection_string:
            return EventHubConsumerClient.from_connection_string(
                connection_string, consumer_group=source.consumer_group, eventhub_name=source.event_hub_name
            )
        if self.credential is None:
            raise LookupError(f"source {source.name!r} uses identity but no credential was given")
        return EventHubConsumerClient(
            fully_qualified_namespace=self.namespace(source),
            eventhub_name=source.event_hub_name,
            consumer_group=source.consumer_group,
            credential=self.credential,
        )

    async def aclose(self) -> None:
        sources, self._sources = list(self._sources.values()), {}
        await asyncio.gather(*(source.close() for source in sources), return_exceptions=True)


@dataclass(frozen=True, slots=True)
class EventHubBinding:
    """Everything needed to read one configured hub: its partitions, its checkpoint store and
    the namespace name the checkpoint blobs are filed under."""

    partitions: PartitionSource
    checkpoints: CheckpointReader
    namespace: str


class EventHubReader:
    """``SourceReader`` for ``kind: eventhub``.

    Reads the partition ids, then every partition's properties concurrently, while the
    consumer group's checkpoints and ownership are listed at the same time; computes each
    partition's backlog with the domain's lag rules. Any failed call fails the whole source
    (a partial sum would understate the backlog): the reading then has ``ok`` false, the error,
    and no partitions.
    """

    kind = KIND

    def __init__(self, bind: Callable[[SourceSettings], EventHubBinding], *, ownership_expiry_seconds: float = 60.0,
                 closers: tuple[Callable[[], Any], ...] = ()) -> None:
        self.bind = bind
        self.ownership_expiry_seconds = ownership_expiry_seconds
        self._closers = closers

    async def read(self, source: SourceSettings, gate: CallGate, now: datetime) -> SourceReading:
        binding = self.bind(source)
        location = CheckpointLocation(binding.namespace, source.event_hub_name or "", source.consumer_group)
        properties_result, snapshot_result = await asyncio.gather(
            self._read_partitions(binding.partitions, gate),
            binding.checkpoints.read(location, gate),
            return_exceptions=True,
        )
        failures = []
        if isinstance(properties_result, BaseException):
            failures.append(error_text(properties_result))
        if isinstance(snapshot_result, BaseException):
            failures.append(f"checkpoints: {error_text(snapshot_result)}")
        if failures:
            for result in (properties_result, snapshot_result):
                if isinstance(result, BaseException) and not isinstance(result, Exception):
                    raise result  # cancellation and the like are not source failures
            return SourceReading(name=source.name, kind=KIND, ok=False, error="; ".join(failures))

        properties: list[PartitionProperties] = properties_result
        snapshot = snapshot_result
        partition_ids = [p.partition_id for p in properties]
        ownership = summarize_ownership(snapshot.ownership, partition_ids, now, self.ownership_expiry_seconds)
        readings = tuple(
            PartitionReading.measure(
                p.partition_id,
                beginning=p.beginning_sequence_number,
                last_enqueued=EMPTY_PARTITION if p.is_empty else p.last_enqueued_sequence_number,
                checkpoint=snapshot.checkpoints.get(p.partition_id),
                owner=ownership.owner_by_partition.get(p.partition_id),
            )
            for p in properties
        )
        notes = snapshot.notes
        if snapshot.layout is not None:  # checkpointStrategy auto: say what it found, first
            notes = (snapshot.layout.note(partition_ids, snapshot.checkpoints), *notes)
        return SourceReading(
            name=source.name,
            kind=KIND,
            partitions=readings,
            # No claim at all: the consumer claims no partitions (not: nobody is running).
            owners=ownership.live_owners if ownership.claimed else None,
            unowned_partitions=ownership.unowned_partitions,
            notes=notes,
        )

    async def _read_partitions(self, partitions: PartitionSource, gate: CallGate) -> list[PartitionProperties]:
        ids = await gate.call("get_partition_ids", partitions.get_partition_ids)
        results = await asyncio.gather(
            *(gate.call("get_partition_properties", lambda pid=pid: partitions.get_partition_properties(pid))
              for pid in ids),
            return_exceptions=True,
        )
        errors = [(pid, r) for pid, r in zip(ids, results, strict=True) if isinstance(r, BaseException)]
        if errors:
            pid, first = errors[0]
            more = f" (and {len(errors) - 1} more partitions)" if len(errors) > 1 else ""
            raise PartitionReadError(f"partition {pid}: {error_text(first)}{more}") from first
        # The SDK reports the id it was asked for; keep the listing's order and ids.
        return [
            p if p.partition_id == pid else PartitionProperties(pid, p.beginning_sequence_number,
                                                                p.last_enqueued_sequence_number, p.is_empty)
            for pid, p in zip(ids, results, strict=True)
        ]

    async def aclose(self) -> None:
        await asyncio.gather(*(close() for close in self._closers), return_exceptions=True)


class PartitionReadError(ReadError):
    """At least one partition of a hub could not be read."""
